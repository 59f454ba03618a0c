//! `make bench`: how soon `wait-for-health` notices a server is ready. Each run starts the
//! simulator with a short model load and `--ready-file`; the latency is from the moment the
//! simulator says it became ready (its own wall-clock stamp) to the moment the engine reports the
//! wait step done. Measured for the `http` and `log` probes, and, in the same run, for Docker's
//! own healthcheck at its default 30 s interval (the moment `docker inspect` first says
//! `healthy`). Goals (issue: waiting and checking): p99 ≤ 100 ms for http, ≤ 20 ms for log.
//!
//! `READINESS_RUNS` (default 20) sets the runs per probe; `READINESS_DOCKER_RUNS` (default 3)
//! the healthcheck's, which take about 30 s each (they run alongside the others).

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gpuflow::backend::DockerBackend;
use gpuflow::check::load_and_check;
use gpuflow::engine::{Event, EventKind, EventSink, JobResult, RunOptions};
use gpuflow::plan::{build, from_workflow};
use gpuflow::workflow::Loaded;
use tokio_util::sync::CancellationToken;

const IMAGE: &str = "gpuflow-sim:test";
const STARTUP: &str = "300ms";

fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Keeps the wall-clock moment the wait step finished.
#[derive(Default)]
struct WaitDone(Mutex<Option<(u128, bool)>>);

impl EventSink for WaitDone {
    fn emit(&self, event: Event) {
        if let EventKind::StepFinished { name, outcome, .. } = &event.kind
            && name == "wait"
            && let Ok(mut done) = self.0.lock()
        {
            *done = Some((unix_ns(), outcome.as_str() == "success"));
        }
    }
}

fn ready_ns(path: &std::path::Path) -> Option<u128> {
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["unix_ns"].as_u64().map(u128::from)
}

/// One `gpuflow run` of a job that starts the simulator and waits with `with`; the latency in
/// milliseconds.
async fn one(docker: &DockerBackend, with: &str) -> f64 {
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::create_dir(dir.path().join(".git")).expect("a workspace");
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).expect("a shared folder");
    let yaml = format!(
        r"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: start-container
        with:
          image: {IMAGE}
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay {STARTUP} --ready-file /shared/ready.json
          volumes: ['{}:/shared']
      - name: wait
        uses: wait-for-health
        with:
{with}
          timeout: 1m
",
        shared.display()
    );
    std::fs::write(dir.path().join("w.yml"), yaml).expect("the workflow");
    let (loaded, diags) = load_and_check(&dir.path().join("w.yml")).expect("loads");
    assert!(!diags.has_errors(), "{diags:?}");
    let Loaded::Workflow(Some(wf)) = loaded else {
        panic!("not a workflow")
    };
    let plan = build(&from_workflow(&wf, "w").input).expect("plans");
    let run_id = format!("bench-readiness-{}", gpuflow::engine::new_run_id());
    let mut opts = RunOptions::new(&run_id, dir.path());
    opts.grace = Duration::from_secs(1);
    let done = Arc::new(WaitDone::default());
    let report = gpuflow::engine::run(
        Arc::new(*wf),
        plan,
        opts,
        done.clone(),
        Some(docker.clone()),
        CancellationToken::new(),
    )
    .await
    .expect("runs");
    let _ = docker.remove_run(&run_id).await;
    assert_eq!(report.result, JobResult::Success, "the run failed");
    let (finished, ok) = done
        .0
        .lock()
        .expect("not poisoned")
        .expect("the wait step ran");
    assert!(ok, "the wait step failed");
    let ready = ready_ns(&shared.join("ready.json")).expect("the simulator wrote its ready file");
    (finished as f64 - ready as f64) / 1e6
}

/// Docker's own healthcheck at its default interval: the latency from the simulator's ready
/// stamp to the first `inspect` that says `healthy` (polled every 10 ms).
fn docker_healthcheck_once() -> f64 {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let name = format!(
        "gpuflow-bench-health-{}",
        gpuflow::engine::new_run_id().to_ascii_lowercase()
    );
    let volume = format!("{}:/shared", dir.path().display());
    let started = Command::new("docker")
        .args([
            "run",
            "-d",
            "--rm",
            "--init",
            "--name",
            &name,
            "-v",
            &volume,
            "--label",
            "dev.gpuflow.bench=readiness",
            "--health-cmd",
            "wget -q -O /dev/null http://127.0.0.1:30000/health",
            IMAGE,
            "gpuflow-sim",
            "--host",
            "0.0.0.0",
            "--port",
            "30000",
            "--startup-delay",
            STARTUP,
            "--ready-file",
            "/shared/ready.json",
        ])
        .output()
        .expect("docker runs");
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let healthy = loop {
        let out = Command::new("docker")
            .args(["inspect", "-f", "{{.State.Health.Status}}", &name])
            .output()
            .expect("docker inspect runs");
        if String::from_utf8_lossy(&out.stdout).trim() == "healthy" {
            break unix_ns();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = Command::new("docker").args(["rm", "-f", &name]).output();
    let ready =
        ready_ns(&dir.path().join("ready.json")).expect("the simulator wrote its ready file");
    (healthy as f64 - ready as f64) / 1e6
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn line(label: &str, mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    let (p50, p99) = (quantile(&ms, 0.5), quantile(&ms, 0.99));
    println!(
        "  {label:<34} n={:<3} p50 {p50:>9.1} ms   p99 {p99:>9.1} ms   max {:>9.1} ms",
        ms.len(),
        ms[ms.len() - 1]
    );
    (p50, p99)
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

fn main() {
    let runs = env_count("READINESS_RUNS", 20);
    let docker_runs = env_count("READINESS_DOCKER_RUNS", 3);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let docker = runtime
        .block_on(DockerBackend::connect_local())
        .expect("a Docker engine (the readiness benchmark starts the simulator image)");
    // Docker's healthcheck needs ~30 s a run: measured in threads alongside the rest.
    let baseline = std::thread::spawn(move || {
        (0..docker_runs)
            .map(|_| docker_healthcheck_once())
            .collect::<Vec<f64>>()
    });
    let http_with = "          url: http://server:30000/health";
    let log_with = "          probe: log\n          container: server\n          pattern: fired up and ready to roll";
    let (mut http, mut log) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        // Interleaved, so drift on the machine touches both alike.
        for _ in 0..runs {
            http.push(one(&docker, http_with).await);
            log.push(one(&docker, log_with).await);
        }
    });
    let docker_ms = baseline.join().expect("the healthcheck runs");
    println!(
        "readiness detection: simulator's ready stamp → wait step done (startup delay {STARTUP})"
    );
    let (http50, http99) = line("wait-for-health, probe: http", http);
    let (log50, log99) = line("wait-for-health, probe: log", log);
    let (docker50, docker99) = line("Docker healthcheck, 30s interval", docker_ms);
    println!(
        "  Docker healthcheck / http: p50 {:.0}×, p99 {:.0}×;  / log: p50 {:.0}×, p99 {:.0}×",
        docker50 / http50.max(0.001),
        docker99 / http99.max(0.001),
        docker50 / log50.max(0.001),
        docker99 / log99.max(0.001)
    );
    println!(
        "  goals: http p99 ≤ 100 ms ({}), log p99 ≤ 20 ms ({})",
        if http99 <= 100.0 { "met" } else { "NOT met" },
        if log99 <= 20.0 { "met" } else { "NOT met" }
    );
}
