//! `wait-for-health` on a GPU machine without Docker: a server started on the host (here
//! gpuflow-sim as a process) is waited for by URL, address and command, and no Docker engine
//! is asked for; `DOCKER_HOST` points at nothing, so any attempt would fail the run. The job's
//! containers are watched only when an earlier step reached an engine (runner/tests/health.rs
//! covers that side).

use assert_cmd::Command;

use crate::support::sim::SimProcess;

/// The engine gpuflow would reach: nothing listens there.
const NO_DOCKER: &str = "unix:///nonexistent/docker.sock";

fn run_without_docker(yaml: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join("w.yml"), yaml).unwrap();
    let out = Command::cargo_bin("gpuflow")
        .unwrap()
        .current_dir(dir.path())
        .env("DOCKER_HOST", NO_DOCKER)
        .env("NO_COLOR", "1")
        .args(["run", "--plain", "w.yml"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), all)
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
