//! `wait-for-health` and `assert-file` run by the engine against the real Docker engine and the
//! simulator image: readiness noticed as the server becomes ready, a crashed server failing the
//! wait at once with its cause, and missing files explained by what is there instead.

use std::time::Duration;

use gpuflow::engine::{EventKind, JobResult, StepOutcome};

use crate::support::Ran;
use crate::support::engine::{on_docker, on_docker_with};

fn all_text(ran: &Ran, job: &str) -> String {
    ran.lines(job).join("\n")
}

/// A job that starts the simulator with `flags`, then waits with `with`.
fn waiting(flags: &str, with: &str) -> String {
    format!(
        r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        name: start
        uses: start-container
        with:
          image: gpuflow-sim:test
          command: gpuflow-sim --host 0.0.0.0 --port 30000 {flags}
      - id: wait
        name: wait
        uses: wait-for-health
        with:
{with}
      - name: report
        run: echo "ready=${{{{ steps.wait.outputs.ready-after }}}}"
"#
    )
}

fn ready_after(ran: &Ran) -> f64 {
    ran.value("serve", "ready=").parse().unwrap()
}

#[tokio::test]
async fn http_notices_readiness_as_the_model_finishes_loading() {
    let Some(ran) = on_docker(&waiting(
        "--startup-delay 1500ms",
        "          url: http://server:30000/health\n          timeout: 1m",
    ))
    .await
    else {
        return;
    };
    assert_eq!(
        ran.report.result,
        JobResult::Success,
        "{}",
        all_text(&ran, "serve")
    );
    let ready = ready_after(&ran);
    assert!((1.4..3.5).contains(&ready), "ready-after {ready}");
    assert!(
        ran.events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::StepProgress { message, .. } if message.contains("waiting for"))),
        "no progress event while waiting"
    );
    ran.assert_nothing_left().await;
}

#[tokio::test]
async fn log_matches_the_ready_line_as_it_is_printed() {
    let Some(ran) = on_docker(&waiting(
        "--startup-delay 1500ms",
        "          probe: log\n          container: server\n          pattern: fired up and ready to roll\n          timeout: 1m",
    ))
    .await
    else {
        return;
    };
    assert_eq!(
        ran.report.result,
        JobResult::Success,
        "{}",
        all_text(&ran, "serve")
    );
    let ready = ready_after(&ran);
    assert!((1.4..3.5).contains(&ready), "ready-after {ready}");
}

#[tokio::test]
async fn a_server_that_runs_out_of_memory_fails_the_wait_at_once() {
    let Some(ran) = on_docker(&waiting(
        "--startup-delay 1s --oom-at-start",
        "          url: http://server:30000/health\n          timeout: 10m",
    ))
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    assert_eq!(ran.step("wait"), StepOutcome::Failure);
    // Far less than the 10 minutes it was allowed: the exit decided it.
    let took = ran.step_duration("wait");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let text = all_text(&ran, "serve");
    assert!(
        text.contains("container `server` exited with code 1"),
        "{text}"
    );
    assert!(text.contains("OOMKilled: false"), "{text}");
    assert!(
        text.contains("cause: not enough GPU memory for the model and its KV cache: `ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88."),
        "{text}"
    );
    assert!(text.contains("the last "), "{text}");
    assert_eq!(ran.step("report"), StepOutcome::Skipped);
}

#[tokio::test]
async fn a_container_killed_by_the_kernel_for_memory_fails_the_wait_at_once() {
    // A 32 MiB limit and a shell that builds a 200 MB string: the kernel OOM-kills it.
    let Some(ran) = on_docker(r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: start-container
        with:
          image: gpuflow-base:test
          memory: 32m
          command: sh -c 'echo loading; sleep 1; x=$(head -c 200000000 /dev/zero | tr "\0" a); echo loaded'
      - id: wait
        name: wait
        uses: wait-for-health
        with: { probe: tcp, address: "server:30000", container: server, timeout: 10m }
"#)
    .await
    else {
        return;
    };
    assert_eq!(ran.step("wait"), StepOutcome::Failure);
    let took = ran.step_duration("wait");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let text = all_text(&ran, "serve");
    assert!(text.contains("OOMKilled: true"), "{text}");
    assert!(text.contains("exited with code 137"), "{text}");
    assert!(text.contains("loading"), "the last lines are shown: {text}");
    ran.assert_nothing_left().await;
}

#[tokio::test]
async fn a_container_that_restarts_fails_the_wait_at_its_first_restart() {
    let Some(ran) = on_docker(
        r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: start-container
        with:
          image: gpuflow-base:test
          restart: on-failure:5
          command: >-
            sh -c 'echo starting; sleep 1; echo "RuntimeError: boom" >&2; exit 3'
      - id: wait
        name: wait
        uses: wait-for-health
        with: { probe: tcp, address: "server:30000", container: server, timeout: 10m }
"#,
    )
    .await
    else {
        return;
    };
    assert_eq!(ran.step("wait"), StepOutcome::Failure);
    let took = ran.step_duration("wait");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let text = all_text(&ran, "serve");
    assert!(
        text.contains("container `server` crashed and is restarting with code 3"),
        "{text}"
    );
    assert!(text.contains("RuntimeError: boom"), "{text}");
    ran.assert_nothing_left().await;
}

#[tokio::test]
async fn tcp_and_command_probes_wait_for_the_server() {
    let Some(ran) = on_docker(
        r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        name: start
        uses: start-container
        with:
          image: gpuflow-sim:test
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 1s
      - name: tcp
        uses: wait-for-health
        with: { probe: tcp, address: "server:30000", timeout: 30s }
      - id: inside
        name: command in the container
        uses: wait-for-health
        with:
          probe: command
          container: server
          command: wget -qO /dev/null http://127.0.0.1:30000/health
          timeout: 30s
      - id: host
        name: command on the host
        uses: wait-for-health
        with: { probe: command, command: "test -d /", timeout: 10s }
      - run: echo "inside=${{ steps.inside.outputs.ready-after }}"
"#,
    )
    .await
    else {
        return;
    };
    assert_eq!(
        ran.report.result,
        JobResult::Success,
        "{}",
        all_text(&ran, "serve")
    );
    // The port opens before the model has loaded; the health URL answers only after.
    let inside: f64 = ran.value("serve", "inside=").parse().unwrap();
    assert!(inside < 3.0, "{inside}");
    assert!(
        ran.step_duration("tcp") + ran.step_duration("command in the container")
            >= Duration::from_millis(800)
    );
}

#[tokio::test]
async fn a_timeout_fails_with_the_last_log_lines() {
    let Some(ran) = on_docker(&waiting(
        "--startup-delay 1m",
        "          probe: log\n          container: server\n          pattern: never printed\n          timeout: 1500ms",
    ))
    .await
    else {
        return;
    };
    assert_eq!(ran.step("wait"), StepOutcome::Failure);
    let text = all_text(&ran, "serve");
    assert!(
        text.contains("not ready after 1s 500ms: waited for a log line matching `never printed`"),
        "{text}"
    );
    assert!(text.contains("lines of `server`:\n  "), "{text}");
    assert!(text.contains("Load weight begin"), "{text}");
}

#[tokio::test]
async fn the_docker_probe_without_a_healthcheck_fails_at_once() {
    let Some(ran) = on_docker(&waiting(
        "",
        "          probe: docker\n          container: server\n          timeout: 10m",
    ))
    .await
    else {
        return;
    };
    assert_eq!(ran.step("wait"), StepOutcome::Failure);
    assert!(ran.step_duration("wait") < Duration::from_secs(10));
    let text = all_text(&ran, "serve");
    assert!(
        text.contains("container `server` has no healthcheck"),
        "{text}"
    );
}

#[tokio::test]
async fn assert_file_in_a_container_and_on_the_host() {
    let Some(ran) = on_docker_with(
        r#"
on: workflow_dispatch
jobs:
  files:
    steps:
      - id: box
        name: start
        uses: start-container
        with:
          image: gpuflow-base:test
          command: sh -c 'mkdir -p /opt/bench && echo "import argparse" > /opt/bench/benchmark_eagle.py && sleep 300'
      - name: settle
        container: box
        run: for i in $(seq 1 50); do test -f /opt/bench/benchmark_eagle.py && exit 0; sleep 0.1; done; exit 1
      - id: present
        name: present in the container
        uses: assert-file
        with:
          container: box
          path: /opt/bench/benchmark_eagle.py
          contains: "^import arg"
          min-size: 10
          sha256: 3a5d0e7a2bfc4ba1c2c6a5a08ee7fd5b22e29e6fac8d8ba3f8a4bb4ce7c0e2d1
        continue-on-error: true
      - id: good
        name: all checks pass in the container
        uses: assert-file
        with: { container: box, path: /opt/bench/benchmark_eagle.py, contains: argparse, min-size: 8, executable: false }
      - name: a folder in the container
        uses: assert-file
        with: { container: box, path: /opt/bench, kind: dir }
      - name: typo in the container
        uses: assert-file
        with: { container: box, path: /opt/bench/benchmark_eagle3.py }
        continue-on-error: true
      - name: missing folder in the container
        uses: assert-file
        with: { container: box, path: /opt/models/qwen/config.json }
        continue-on-error: true
      - name: on the host
        uses: assert-file
        with: { path: scripts/bench.py, contains: argparse, executable: false }
      - name: typo on the host
        uses: assert-file
        with: { path: scripts/bench2.py }
        continue-on-error: true
      - run: echo "size=${{ steps.good.outputs.size }}"
"#,
        &[("scripts/bench.py", "import argparse\n")],
    )
    .await
    else {
        return;
    };
    let text = all_text(&ran, "files");
    assert_eq!(ran.report.result, JobResult::Success, "{text}");
    assert_eq!(ran.step("present in the container"), StepOutcome::Failure);
    // Only the hash is wrong; the size was measured.
    assert!(
        text.contains("the SHA-256 of `/opt/bench/benchmark_eagle.py` is `"),
        "{text}"
    );
    assert!(text.contains("in container `box`"), "{text}");
    assert!(
        text.contains("`/opt/bench/benchmark_eagle3.py` does not exist in container `box`; did you mean `/opt/bench/benchmark_eagle.py`?"),
        "{text}"
    );
    assert!(
        text.contains("the parent folder `/opt/models/qwen` does not exist either; the nearest folder that does, `/opt`, holds `bench`"),
        "{text}"
    );
    assert_eq!(
        ran.step("all checks pass in the container"),
        StepOutcome::Success
    );
    assert_eq!(ran.step("a folder in the container"), StepOutcome::Success);
    assert!(
        ran.lines("files").contains(&"size=16".to_string()),
        "{text}"
    );
    assert_eq!(ran.step("on the host"), StepOutcome::Success);
    assert!(
        text.contains(
            "`scripts/bench2.py` does not exist on the host; did you mean `scripts/bench.py`?"
        ),
        "{text}"
    );
    ran.assert_nothing_left().await;
}

#[tokio::test]
async fn the_steps_own_timeout_minutes_stops_the_wait() {
    let Some(ran) = on_docker(r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: start-container
        with: { image: gpuflow-sim:test, command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 1m }
      - name: wait
        timeout-minutes: 0.02
        uses: wait-for-health
        with: { url: "http://server:30000/health", timeout: 10m }
"#)
    .await
    else {
        return;
    };
    assert_eq!(ran.step("wait"), StepOutcome::Failure);
    assert!(ran.step_duration("wait") < Duration::from_secs(10));
    let text = all_text(&ran, "serve");
    assert!(
        text.contains("stopped while waiting for `http://server:30000/health`"),
        "{text}"
    );
    assert!(text.contains("the step timed out after 1.2s"), "{text}");
}

/// An image whose own healthcheck asks the simulator's `/health` every 100 ms.
fn build_healthchecked_image() -> &'static str {
    const TAG: &str = "gpuflow-sim-healthcheck:test";
    let dockerfile = "FROM gpuflow-sim:test\nHEALTHCHECK --interval=100ms --timeout=1s CMD wget -q -O /dev/null http://127.0.0.1:30000/health\n";
    let mut child = std::process::Command::new("docker")
        .args(["build", "-q", "-t", TAG, "-"])
        .env("DOCKER_BUILDKIT", "0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the docker CLI runs");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), dockerfile.as_bytes()).unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "docker build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    TAG
}

#[tokio::test]
async fn the_docker_probe_waits_for_the_images_own_healthcheck() {
    if std::env::var_os("GPUFLOW_SKIP_DOCKER").is_some() {
        return;
    }
    let image = build_healthchecked_image();
    let Some(ran) = on_docker(&format!(
        r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: start-container
        with: {{ image: "{image}", command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 1s }}
      - id: wait
        name: wait
        uses: wait-for-health
        with: {{ probe: docker, container: server, timeout: 1m }}
      - run: echo "ready=${{{{ steps.wait.outputs.ready-after }}}}"
"#
    ))
    .await
    else {
        return;
    };
    assert_eq!(
        ran.report.result,
        JobResult::Success,
        "{}",
        all_text(&ran, "serve")
    );
    let ready = ready_after(&ran);
    assert!((0.9..5.0).contains(&ready), "ready-after {ready}");
}
