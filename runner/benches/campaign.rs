//! `make bench`: a tuning campaign (docs/campaigns.md) of N cells over M server keys, each
//! server taking `GPUFLOW_BENCH_LOAD` (default 60 s, a real model's load is minutes) to load.
//! Goal: the campaign takes at most M × load + the benchmarks' time + 10% — the servers are
//! loaded once per key, not once per cell; the naive cost, N × load + the benchmarks, is
//! printed beside it. The servers are kept warm (`keep-warm`), and the same campaign run again
//! adopts them: goal, at most 10% of the first run's time.
//!
//! Needs the local engine and `make test-images` (the simulator image).

use std::time::Duration;

use gpuflow::engine::{Event, EventKind};

mod engine_run;

const IMAGE: &str = "gpuflow-sim:test";
/// Server flag values (M servers) × client concurrencies: N = M × levels cells.
const SERVERS: [u32; 2] = [1, 4];
const LEVELS: [u32; 3] = [1, 4, 16];

fn main() {
    let load = std::env::var("GPUFLOW_BENCH_LOAD")
        .ok()
        .and_then(|v| humantime::parse_duration(&v).ok())
        .unwrap_or(Duration::from_secs(60));
    // The warm servers' registry of this benchmark alone.
    let home = tempfile::tempdir().expect("a temporary folder");
    let registry = gpuflow::warm::Registry::at(home.path());
    let (runtime, docker) = engine_run::engine_with(IMAGE);
    let workspace = tempfile::tempdir().expect("a temporary folder");
    std::fs::create_dir(workspace.path().join(".git")).unwrap();
    std::fs::write(workspace.path().join("w.yml"), workflow(load)).unwrap();

    let run = || engine_run::run_workflow(&docker, workspace.path(), &registry);
    let (events, took) = runtime.block_on(run());
    let servers = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ContainerStarted { .. }))
        .count();
    let (m, n) = (SERVERS.len(), SERVERS.len() * LEVELS.len());
    assert_eq!(servers, m, "one server per key");
    let benchmarks = step_time(&events, "3");
    let goal = (load * m as u32 + benchmarks).mul_f64(1.1);
    let naive = load * n as u32 + benchmarks;
    println!(
        "tuning campaign: {n} cells over {m} server keys, a {}s load per server",
        load.as_secs()
    );
    println!(
        "  the campaign, start to end                 {:>8.1} s  ({servers} servers started)",
        took.as_secs_f64()
    );
    println!(
        "  goal: M × load + benchmarks ({:.1} s) + 10% {:>8.1} s  ({})",
        benchmarks.as_secs_f64(),
        goal.as_secs_f64(),
        if took <= goal { "met" } else { "NOT met" }
    );
    println!(
        "  naive: N × load + benchmarks               {:>8.1} s  (a server per cell)",
        naive.as_secs_f64()
    );

    let (events, again) = runtime.block_on(run());
    let started_again = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ContainerStarted { .. }))
        .count();
    let warm_goal = took.mul_f64(0.1);
    println!(
        "  the same campaign again, servers kept warm {:>8.1} s  ({started_again} servers started; goal ≤ 10% of the first: {:.1} s, {})",
        again.as_secs_f64(),
        warm_goal.as_secs_f64(),
        if again <= warm_goal { "met" } else { "NOT met" }
    );
    assert_eq!(started_again, 0, "the re-run adopts the warm servers");
    runtime.block_on(async {
        for (entry, _) in gpuflow::warm::list(&docker, &registry).await {
            gpuflow::warm::stop(&docker, &registry, &entry)
                .await
                .expect("the warm servers stop");
        }
    });
}

/// The grid: a server flag (`--tokens-per-chunk`) × the benchmark's concurrency.
fn workflow(load: Duration) -> String {
    let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    format!(
        r#"on: workflow_dispatch
jobs:
  tune:
    strategy:
      matrix:
        tokens-per-chunk: [{servers}]
        concurrency: [{levels}]
    steps:
      - uses: start-container
        with:
          name: server
          image: {IMAGE}
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay {load}ms --ttft 5ms --tokens-per-second 2000 --tokens-per-chunk ${{{{ matrix.tokens-per-chunk }}}}
          keep-warm: 10m
      - uses: wait-for-health
        with: {{ container: server, url: "http://server:30000/health", timeout: 10m }}
      - uses: benchmark
        with:
          target: http://server:30000
          mode: concurrency
          concurrency: ${{{{ matrix.concurrency }}}}
          requests: 32
          output-tokens: 16
"#,
        servers = list(&SERVERS),
        levels = list(&LEVELS),
        load = load.as_millis(),
    )
}

/// The summed time of step `key` over every job run.
fn step_time(events: &[Event], key: &str) -> Duration {
    let mut total = Duration::ZERO;
    for start in events.iter() {
        let EventKind::StepStarted { job, step, .. } = &start.kind else {
            continue;
        };
        if step != key {
            continue;
        }
        let end = events.iter().find_map(|e| match &e.kind {
            EventKind::StepFinished {
                job: j, step: s, ..
            } if j == job && s == key => Some(e.elapsed),
            _ => None,
        });
        total += end.map_or(Duration::ZERO, |end| end - start.elapsed);
    }
    total
}
