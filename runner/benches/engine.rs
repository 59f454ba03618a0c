//! `make bench`: what the engine adds on top of Docker, against Docker's own CLI measured in
//! the same run on the same engine, so the ratios hold on a noisy machine.
//!
//! (a) 50 trivial `run:` steps in one container (the engine's execs, log streaming, events),
//!     from the first step's start to the last one's end, against a shell loop of 50
//!     `docker exec C true` into an already running container. Goal: ≤ 0.5×.
//! (b) Start-container-to-first-step: from `uses: start-container` starting to the end of a
//!     first `run: true` in that container, against `docker run --rm IMAGE true`. Goal: ≤ 1.2×.
//!
//! Needs the local engine and `make test-images` (the base image). `GPUFLOW_BENCH_RUNS`
//! (default 5) sets how many times each side is measured; medians are printed.

use std::process::Command;
use std::time::{Duration, Instant};

use gpuflow::engine::{Event, EventKind};

mod engine_run;

const IMAGE: &str = "gpuflow-base:test";
const STEPS: usize = 50;

fn main() {
    let runs: usize = std::env::var("GPUFLOW_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let (runtime, docker) = engine_run::engine_with(IMAGE);
    let workspace = tempfile::tempdir().expect("a temporary folder");
    std::fs::create_dir(workspace.path().join(".git")).unwrap();
    std::fs::write(workspace.path().join("w.yml"), workflow()).unwrap();

    let mut steps = Vec::new();
    let mut first = Vec::new();
    let mut exec_loop = Vec::new();
    let mut docker_run = Vec::new();
    for _ in 0..runs {
        let warm = gpuflow::warm::Registry::at(workspace.path().join("warm"));
        let (events, _) =
            runtime.block_on(engine_run::run_workflow(&docker, workspace.path(), &warm));
        let (to_first, fifty) = measure(&events);
        first.push(to_first);
        steps.push(fifty);
        exec_loop.push(shell_exec_loop());
        docker_run.push(time_command("docker", &["run", "--rm", IMAGE, "true"]));
    }

    let (steps, exec_loop) = (median(steps), median(exec_loop));
    let (first, docker_run) = (median(first), median(docker_run));
    println!("engine overhead on the local Docker engine, median of {runs}");
    println!(
        "  (a) {STEPS} `run: true` steps in one container     {:>9.1} ms",
        ms(steps)
    );
    println!(
        "      shell loop of {STEPS} `docker exec C true`      {:>9.1} ms  (baseline)",
        ms(exec_loop)
    );
    ratio(steps, exec_loop, 0.5);
    println!(
        "  (b) start-container to the end of a first step {:>9.1} ms",
        ms(first)
    );
    println!(
        "      `docker run --rm {IMAGE} true`    {:>9.1} ms  (baseline)",
        ms(docker_run)
    );
    ratio(first, docker_run, 1.2);
}

/// One container started by `start-container`, then a first step and 49 more in it.
fn workflow() -> String {
    let mut text = format!(
        "on: workflow_dispatch\njobs:\n  bench:\n    steps:\n      - uses: start-container\n        \
         with: {{ name: box, image: {IMAGE}, command: sleep 600 }}\n"
    );
    for _ in 0..STEPS {
        text.push_str("      - run: 'true'\n        container: box\n");
    }
    text
}

/// (start-container started → step 2 finished, step 2 started → step 51 finished), from the
/// engine's own event times.
fn measure(events: &[Event]) -> (Duration, Duration) {
    let at = |want_start: bool, step: usize| {
        events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::StepStarted { step: s, .. } if want_start && *s == step.to_string() => {
                    Some(e.elapsed)
                }
                EventKind::StepFinished { step: s, .. }
                    if !want_start && *s == step.to_string() =>
                {
                    Some(e.elapsed)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no event for step {step}"))
    };
    (
        at(false, 2) - at(true, 1),
        at(false, STEPS + 1) - at(true, 2),
    )
}

/// 50 `docker exec` calls from a shell loop into a container that is already up.
fn shell_exec_loop() -> Duration {
    let out = Command::new("docker")
        .args(["run", "-d", "--rm", IMAGE, "sleep", "600"])
        .output()
        .expect("docker runs");
    assert!(out.status.success(), "docker run failed");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let script = format!("for i in $(seq {STEPS}); do docker exec {id} true; done");
    let took = time_command("sh", &["-c", &script]);
    let _ = Command::new("docker").args(["rm", "-f", &id]).output();
    took
}

fn time_command(program: &str, args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("runs");
    assert!(status.success(), "`{program} {}` failed", args.join(" "));
    start.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ratio(ours: Duration, baseline: Duration, goal: f64) {
    let r = ours.as_secs_f64() / baseline.as_secs_f64();
    println!(
        "      ratio {r:.2}×  (goal ≤ {goal}×: {})",
        if r <= goal { "met" } else { "NOT met" }
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
