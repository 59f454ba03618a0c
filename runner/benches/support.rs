//! Shared by the benchmarks: inputs generated in-process, and a timer that reports medians.

use std::time::{Duration, Instant};

/// A large workflow in the shape the issue sets for the loading benchmark: `jobs` jobs of
/// `steps` steps each, every job with a 4×4×4 matrix, `needs` edges to earlier jobs, and
/// expressions in step inputs so validation has real work to do.
pub fn large_workflow(jobs: usize, steps: usize) -> String {
    let mut y = String::from(
        "name: large\non:\n  workflow_dispatch:\n    inputs:\n      tokens:\n        default: \"256\"\nenv:\n  MODEL: /models/m\njobs:\n",
    );
    for j in 0..jobs {
        y.push_str(&format!(
            "  job-{j}:\n    runs-on: local\n    timeout-minutes: 30\n"
        ));
        if j > 0 {
            y.push_str(&format!("    needs: [job-{}]\n", j - 1));
        }
        y.push_str("    strategy:\n      matrix:\n        a: [1, 2, 3, 4]\n        b: [x, y, z, w]\n        c: [p, q, r, s]\n");
        y.push_str("    steps:\n");
        for s in 0..steps {
            if s % 2 == 0 {
                y.push_str(&format!(
                    "      - id: s{s}\n        name: step {s}\n        run: echo ${{{{ matrix.a }}}}-${{{{ matrix.b }}}} {s}\n        env:\n          X: ${{{{ env.MODEL }}}}\n"
                ));
            } else {
                y.push_str(&format!(
                    "      - id: s{s}\n        if: ${{{{ steps.s{}.outcome == 'success' }}}}\n        uses: assert-file\n        with:\n          path: /tmp/f-${{{{ matrix.c }}}}\n          kind: file\n",
                    s - 1
                ));
            }
        }
    }
    y
}

/// Median wall time of `f` over `runs` runs after one warm-up call.
pub fn median_time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    std::hint::black_box(f());
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(f());
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}
