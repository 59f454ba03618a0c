//! `wait-for-health` on a GPU machine without Docker: a server started on the host (here
//! gpuflow-sim as a process) is waited for by URL, address and command, and no Docker engine
//! is asked for; `DOCKER_HOST` points at nothing, so any attempt would fail the run. The job's
//! containers are watched only when an earlier step reached an engine (runner/tests/health.rs
//! covers that side).

use std::time::Duration;

use crate::support::Workspace;
use crate::support::sim::SimProcess;

/// `gpuflow run --plain` of `yaml` with no engine reachable: its exit code and all it said.
fn run_without_docker(yaml: &str) -> (Option<i32>, String) {
    let out = Workspace::new()
        .file("w.yml", yaml)
        .gpuflow()
        .without_docker()
        .args(["run", "--plain", "w.yml"])
        .timeout(Duration::from_secs(60))
        .output();
    (out.code(), out.all())
}

/// The server loads for a moment (`/health` answers 503), then is ready: each probe waits for
/// it on the host, with no engine.
#[test]
fn wait_for_health_waits_for_a_server_on_the_host_without_docker() {
    let sim = SimProcess::start(&["--startup-delay", "500ms"]);
    let addr = sim.addr();
    let (code, all) = run_without_docker(&format!(
        r#"on: workflow_dispatch
jobs:
  j:
    steps:
      - id: http
        uses: wait-for-health
        with: {{ url: 'http://{addr}/health', timeout: 30s }}
      - uses: wait-for-health
        with: {{ probe: tcp, address: '{addr}', timeout: 30s }}
      - uses: wait-for-health
        with: {{ probe: command, command: 'test -n ready', timeout: 30s }}
      - run: echo "loaded=${{{{ steps.http.outputs.ready-after > 0.3 }}}}"
"#
    ));
    assert_eq!(code, Some(0), "{all}");
    assert!(
        all.contains("ready after") && all.contains(&format!("`http://{addr}/health`")),
        "{all}"
    );
    assert!(all.contains("loaded=true"), "{all}");
    assert!(!all.contains("Docker engine"), "{all}");
}

/// Naming a container to watch when no step of the job started one fails at once with that
/// reason, not with an unreachable engine.
#[test]
fn a_container_to_watch_that_the_job_never_started_is_named_without_docker() {
    let sim = SimProcess::start(&[]);
    let (code, all) = run_without_docker(&format!(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - uses: wait-for-health\n        with: {{ url: 'http://{}/health', container: server, timeout: 30s }}\n",
        sim.addr()
    ));
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains(
            "no container `server` was started in this job (help: start it in an earlier step of this job with `uses: start-container`)"
        ),
        "{all}"
    );
    assert!(!all.contains("Docker engine"), "{all}");
}

/// A step that needs the engine and cannot reach it fails alone: the results earlier steps of
/// the job recorded stay there for a later `compare-to-baseline` (they were lent to the failing
/// step before it connected, and lost with its failure).
#[test]
fn a_step_failing_to_reach_the_engine_keeps_the_jobs_recorded_results() {
    let (_code, all) = run_without_docker(
        r#"on: workflow_dispatch
jobs:
  j:
    steps:
      - id: bench
        uses: benchmark
        with:
          command: echo "tok/s 42"
          metrics: { tok_s: { regex: 'tok/s (?P<value>[0-9.]+)', unit: tok/s } }
      - uses: stop-container
        continue-on-error: true
        with: { container: server }
      - uses: compare-to-baseline
        with: { from: bench, metric: tok_s }
"#,
    );
    assert!(all.contains("cannot reach the Docker engine"), "{all}");
    assert!(!all.contains("recorded a result in this job"), "{all}");
    assert!(all.contains("tok_s: no-baseline"), "{all}");
}

/// An input the step cannot use, known only when the job runs (from the matrix), is said at
/// that input's place in the workflow, with how to fix it: the step's error names the input,
/// the engine finds where it is written.
#[test]
fn an_input_the_step_refuses_is_said_at_its_place_in_the_workflow() {
    let (code, all) = run_without_docker(
        "on: workflow_dispatch
jobs:
  j:
    strategy:
      matrix:
        lines: [lots]
    steps:
      - uses: wait-for-health
        with:
          url: http://127.0.0.1:9/health
          tail-lines: ${{ matrix.lines }}
",
    );
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains(
            "w.yml:11:23: `tail-lines` is `lots`, not a whole number (help: e.g. `tail-lines: 50`)"
        ),
        "{all}"
    );
}
