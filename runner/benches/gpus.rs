//! `make bench`: how close GPU allocation keeps a run to the ideal schedule.
//!
//! 64 single-GPU jobs (matrix cells) of known duration (`sleep D` on the host) on the 8 GPUs of
//! the shipped stand-in inventory: the ideal makespan is 8 waves of D. Printed: the makespan
//! with leases (from the first job's start to the last one's end) against that ideal (goal:
//! within 5%, ratio ≤ 1.05), and against a baseline measured in the same run: the same 64 jobs
//! without `gpus:`, held to 8 at a time by `max-parallel: 8`, so what remains is what leasing
//! and waiting add. `GPUFLOW_BENCH_RUNS` (default 3) sets how many times each is measured;
//! medians are printed. Needs no Docker.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gpuflow::check::load_and_check;
use gpuflow::engine::{CollectSink, Engines, EventKind, JobResult, RunOptions, new_run_id};
use gpuflow::gpu::{Discovery, HostGpus, LeaseDir};
use gpuflow::plan::{build, from_workflow};
use gpuflow::workflow::Loaded;
use tokio_util::sync::CancellationToken;

const JOBS: usize = 64;
const GPUS: usize = 8;
/// Each job's duration: long enough that a shell's start (milliseconds) is noise.
const JOB_SECS: f64 = 1.0;

fn workflow(with_gpus: bool) -> String {
    let cells = (1..=JOBS)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let limit = if with_gpus {
        "    gpus: 1\n".to_string()
    } else {
        format!("    strategy:\n      max-parallel: {GPUS}\n")
    };
    let strategy = if with_gpus {
        "    strategy:\n".to_string()
    } else {
        String::new()
    };
    format!(
        "on: workflow_dispatch\njobs:\n  job:\n{limit}{strategy}      matrix:\n        n: [{cells}]\n    steps:\n      - run: sleep {JOB_SECS}\n"
    )
}

fn main() {
    let runs: usize = std::env::var("GPUFLOW_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let stand_in =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stand-in-8gpu-pcie.toml");
    let mut leased = Vec::new();
    let mut baseline = Vec::new();
    for _ in 0..runs {
        leased.push(runtime.block_on(makespan(true, &stand_in)));
        baseline.push(runtime.block_on(makespan(false, &stand_in)));
    }
    let (leased, baseline) = (median(leased), median(baseline));
    let ideal = Duration::from_secs_f64(JOB_SECS * (JOBS / GPUS) as f64);
    println!(
        "GPU allocation: {JOBS} single-GPU jobs of {JOB_SECS} s on {GPUS} stand-in GPUs, median of {runs}"
    );
    println!(
        "  makespan with leases                {:>9.1} ms",
        ms(leased)
    );
    println!(
        "  ideal ({} waves of {JOB_SECS} s)              {:>9.1} ms",
        JOBS / GPUS,
        ms(ideal)
    );
    println!(
        "  same jobs, max-parallel {GPUS}, no GPUs  {:>9.1} ms  (baseline)",
        ms(baseline)
    );
    let to_ideal = leased.as_secs_f64() / ideal.as_secs_f64();
    let to_baseline = leased.as_secs_f64() / baseline.as_secs_f64();
    println!(
        "  ratio to the ideal: {to_ideal:.3}x (goal <= 1.05: {})",
        if to_ideal <= 1.05 { "met" } else { "NOT met" }
    );
    println!("  ratio to the baseline: {to_baseline:.3}x");
}

/// From the first job's start to the last job's end.
async fn makespan(with_gpus: bool, stand_in: &Path) -> Duration {
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join("w.yml"), workflow(with_gpus)).unwrap();
    let (loaded, diags) = load_and_check(&dir.path().join("w.yml")).unwrap();
    assert!(!diags.has_errors(), "{diags:#?}");
    let Loaded::Workflow(Some(wf)) = loaded else {
        panic!("not a workflow")
    };
    let plan = build(&from_workflow(&wf, "w").input).unwrap();
    let mut engines = Engines::none();
    engines.set_default_gpus(HostGpus::new(
        Discovery::StandIn(stand_in.to_path_buf()),
        LeaseDir::at(&dir.path().join("leases"), "local"),
    ));
    let sink = CollectSink::new();
    let report = gpuflow::engine::run(
        Arc::new(*wf),
        plan,
        RunOptions::new(new_run_id(), dir.path()),
        Arc::new(sink.clone()),
        engines,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(report.result, JobResult::Success);
    let events = sink.events();
    let first = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::JobStarted { .. }))
        .unwrap()
        .elapsed;
    let last = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::JobFinished { .. }))
        .map(|e| e.elapsed)
        .max()
        .unwrap();
    last - first
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
