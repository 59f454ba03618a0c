//! `make bench`: `gpuflow history` and report rendering over a results store holding 100 000
//! runs (generated here), against the goal of 200 ms each, printed beside the time the
//! `sqlite3` CLI takes for the same history query, for scale.
//!
//! `GPUFLOW_BENCH_RESULTS_RUNS` sets a smaller store for a quick try in a debug build.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use gpuflow::compare::StepInputs;
use gpuflow::report::{Format, ReportData, ReportSource, render};
use gpuflow::store::{
    Fingerprint, GitInfo, HistoryQuery, Identity, Info, NewMetric, NewResult, ResultStore,
    RunStatus,
};

const RUNS: usize = 100_000;
const GOAL: Duration = Duration::from_millis(200);
const REPEATS: usize = 7;
const T0: i64 = 1_796_029_200_000;

fn identity(driver: &str) -> Identity {
    Identity {
        host_label: "blackwell".into(),
        gpu_model: Some("NVIDIA RTX PRO 6000 Blackwell".into()),
        gpu_count: 8,
        driver: Some(driver.into()),
        cuda: Some("12.9".into()),
        image_digest: Some("sha256:5d41402abc4b2a76b9719d911017c592".into()),
        server_command: ["python3", "-m", "sglang.launch_server", "--tp", "8"]
            .map(String::from)
            .to_vec(),
        benchmark: BTreeMap::from([("mode".into(), "single-stream".into())]),
    }
}

/// Run `i`: two workflows, two matrix cells, a driver upgrade half way, samples with a little
/// deterministic noise around 89.5 tok/s.
fn result(i: usize) -> NewResult {
    let at = T0 + i64::try_from(i).unwrap() * 60_000;
    let noise = |k: usize| ((i * 7 + k * 13) % 11) as f64 / 10.0 - 0.5;
    let samples: Vec<f64> = (0..5).map(|k| 89.5 + noise(k)).collect();
    let driver = if i < RUNS / 2 {
        "570.86.15"
    } else {
        "580.65.06"
    };
    NewResult {
        run_id: format!("run-{i:06}"),
        workflow: if i.is_multiple_of(2) {
            "eagle3"
        } else {
            "nccl"
        }
        .into(),
        job: "bench".into(),
        matrix: BTreeMap::from([(
            "allreduce".into(),
            if i % 4 < 2 { "nccl" } else { "custom" }.into(),
        )]),
        step: "measure".into(),
        git: GitInfo {
            commit: Some(format!("{i:040x}")),
            ref_name: Some("main".into()),
            dirty: false,
        },
        started_at_ms: at - 60_000,
        finished_at_ms: at,
        status: RunStatus::Success,
        fingerprint: Fingerprint {
            identity: identity(driver),
            info: Info::default(),
        },
        metrics: vec![
            NewMetric {
                name: "output_tok_s".into(),
                unit: "tok/s".into(),
                direction: None,
                samples: samples.clone(),
            },
            NewMetric {
                name: "ttft_ms".into(),
                unit: "ms".into(),
                direction: None,
                samples: samples.iter().map(|v| 4000.0 / v).collect(),
            },
        ],
    }
}

fn median(mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..REPEATS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn line(what: &str, took: Duration, goal: Option<Duration>) {
    let verdict = match goal {
        Some(g) if took <= g => format!("  (goal ≤ {} ms: met)", g.as_millis()),
        Some(g) => format!("  (goal ≤ {} ms: MISSED)", g.as_millis()),
        None => String::new(),
    };
    println!(
        "{what:<58} {:>9.2} ms{verdict}",
        took.as_secs_f64() * 1000.0
    );
}

fn main() {
    let runs: usize = std::env::var("GPUFLOW_BENCH_RESULTS_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(RUNS);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = dir.path().join("results.db");
    let started = Instant::now();
    {
        let mut store = ResultStore::open(&db).expect("the store opens");
        for i in 0..runs {
            store.record(&result(i)).expect("a result is recorded");
        }
    }
    println!(
        "results store: {runs} runs ({} results with 2 metrics of 5 samples), written in {:.1} s",
        runs,
        started.elapsed().as_secs_f64()
    );
    let store = ResultStore::open(&db).expect("the store opens");
    let last = format!("run-{:06}", runs - 1);

    let query = HistoryQuery {
        metric: "output_tok_s".into(),
        series: None,
        workflow: Some("eagle3".into()),
        limit: 20,
    };
    let points = store.history(&query).expect("history reads");
    assert_eq!(points.len(), 20.min(runs.div_ceil(2)));
    line(
        "history (library): newest 20 of `output_tok_s` in `eagle3`",
        median(|| {
            std::hint::black_box(store.history(&query).unwrap());
        }),
        Some(GOAL),
    );

    let bin = env!("CARGO_BIN_EXE_gpuflow");
    let cli = median(|| {
        let out = Command::new(bin)
            .args(["history", "output_tok_s", "--workflow", "eagle3", "--store"])
            .arg(&db)
            .output()
            .expect("gpuflow runs");
        assert!(out.status.success(), "{out:?}");
    });
    line(
        "gpuflow history output_tok_s --workflow eagle3 (process)",
        cli,
        Some(GOAL),
    );

    let render_once = |format: Format| {
        let data = ReportData::gather(&ReportSource {
            store: &store,
            run_id: &last,
            run_dir: None,
            compare: StepInputs::default(),
            title: None,
            now_ms: T0,
        })
        .expect("the report gathers");
        render(&data, format, None).expect("the report renders")
    };
    line(
        "report (gather + compare + charts + Markdown), last run",
        median(|| {
            std::hint::black_box(render_once(Format::Markdown));
        }),
        Some(GOAL),
    );
    line(
        "report (gather + compare + charts + HTML), last run",
        median(|| {
            std::hint::black_box(render_once(Format::Html));
        }),
        Some(GOAL),
    );

    sqlite_line(&db);
}

/// The history query in the `sqlite3` CLI, process start included like the `gpuflow` line.
fn sqlite_line(db: &Path) {
    if Command::new("sqlite3").arg("-version").output().is_err() {
        println!(
            "sqlite3 CLI not found: no comparison line (apt-get install -y sqlite3 to see one)"
        );
        return;
    }
    let sql = "SELECT r.run_id, m.median FROM metrics m JOIN results r ON r.id = m.result_id \
               WHERE m.name = 'output_tok_s' AND m.n > 0 AND r.workflow = 'eagle3' \
               ORDER BY r.finished_at_ms DESC, r.id DESC LIMIT 20;";
    let took = median(|| {
        let out = Command::new("sqlite3")
            .arg(db)
            .arg(sql)
            .output()
            .expect("sqlite3 runs");
        assert!(out.status.success(), "{out:?}");
    });
    line("sqlite3 CLI, the same history query (process)", took, None);
}
