//! gpuflow's own diagnostics (`src/diag_log.rs`), through the built binary: `-vv` shows the
//! Docker API calls a real command makes, `GPUFLOW_LOG` chooses targets, nothing shows by
//! default, a bad filter is an error naming the variable, a secret never shows, and the
//! worker's diagnostics (its own and its runs') are JSON lines beside `worker.log`.
//!
//! The Docker tests run `gpuflow run` (which sweeps dead runners' containers) and `gpuflow
//! gc --dry-run`: nextest's `docker-sweep` group.

use std::path::Path;

use serde_json::Value;

use crate::support::docker::connect_or_skip;
use crate::support::{Output, Workspace, free_port, gpuflow};

/// `gpuflow gc --dry-run` with `args` before it and `env`: lists containers and networks on
/// the local engine, removing nothing.
fn gc_dry_run(args: &[&str], env: &[(&str, &str)]) -> Output {
    gpuflow()
        .in_scratch_folder()
        .args(args)
        .args(["gc", "--dry-run"])
        .envs(env.iter().copied())
        .success()
}

const API_CALL: &str = "docker API call";

#[tokio::test]
async fn vv_shows_each_docker_api_call_and_the_default_shows_none() {
    if connect_or_skip().await.is_none() {
        return;
    }
    let quiet = gc_dry_run(&[], &[]);
    let quiet_err = &quiet.stderr;
    assert!(!quiet_err.contains(API_CALL), "{quiet_err}");
    assert!(!quiet_err.contains("gpuflow::"), "{quiet_err}");

    let loud = gc_dry_run(&["-vv"], &[]);
    let err = &loud.stderr;
    for call in [
        "operation=\"list_containers\"",
        "operation=\"list_networks\"",
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains(API_CALL) && l.contains(call)),
            "no `{call}` line:\n{err}"
        );
    }
    // Each call names the engine; the connection is a span of its own.
    assert!(err.contains("endpoint=unix://"), "{err}");
    assert!(err.contains("docker_connect"), "{err}");
    // Diagnostics go to stderr only: what the command prints for the user is unchanged.
    assert!(!loud.stdout.contains(API_CALL));

    // `-vv` is a global flag: after the subcommand too.
    let after = gpuflow()
        .in_scratch_folder()
        .args(["gc", "--dry-run", "-vv"])
        .output();
    assert!(after.stderr.contains(API_CALL));
    // `-v` is info: the calls are debug.
    let info = gc_dry_run(&["-v"], &[]);
    assert!(!info.stderr.contains(API_CALL));
}

#[tokio::test]
async fn gpuflow_log_chooses_the_targets() {
    if connect_or_skip().await.is_none() {
        return;
    }
    // Only the API calls: not the connection's own lines.
    let api = gc_dry_run(
        &[],
        &[("GPUFLOW_LOG", "gpuflow::backend::docker_api=debug")],
    );
    let err = &api.stderr;
    assert!(err.contains(API_CALL), "{err}");
    assert!(!err.contains("connected"), "{err}");
    // Another target at debug: no API calls; and it replaces `-vv`.
    let other = gc_dry_run(&["-vv"], &[("GPUFLOW_LOG", "gpuflow::report=debug")]);
    let err = &other.stderr;
    assert!(!err.contains(API_CALL), "{err}");
    assert!(!err.contains("connected"), "{err}");
    // `GPUFLOW_LOG_JSON`: the same lines, as JSON, in a file; stderr stays clean.
    let dir = Workspace::empty();
    let file = dir.path().join("diag.jsonl");
    let json = gc_dry_run(
        &[],
        &[
            ("GPUFLOW_LOG", "gpuflow=debug"),
            ("GPUFLOW_LOG_JSON", file.to_str().unwrap()),
        ],
    );
    assert!(!json.stderr.contains(API_CALL));
    let lines = json_lines(&file);
    assert!(
        lines.iter().any(|l| l["fields"]["message"] == API_CALL
            && l["fields"]["operation"] == "list_containers"
            && l["target"] == "gpuflow::backend::docker_api"),
        "{lines:#?}"
    );
}

#[test]
fn a_bad_filter_is_an_error_naming_gpuflow_log() {
    let out = gpuflow()
        .in_scratch_folder()
        .args(["eval", "1 + 1"])
        .env("GPUFLOW_LOG", "gpuflow=loud")
        .status(2);
    let err = &out.stderr;
    assert!(
        err.starts_with("error: GPUFLOW_LOG=`gpuflow=loud` is not a valid filter: "),
        "{err}"
    );
    assert!(err.contains("help: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Nothing ran.
    assert_eq!(out.stdout, "");
}

/// A job container, a step in it with a secret in its env and its script, and a step on the
/// host: at `-vvv` the run, job and step spans and the engine's calls show, and the secret
/// never does (diagnostics do not go through the run's masker, so they must never hold it);
/// nor does a value a step hid with `::add-mask::` and a later container is named after.
#[tokio::test]
async fn a_run_at_vvv_shows_its_spans_and_calls_and_never_a_secret() {
    if connect_or_skip().await.is_none() {
        return;
    }
    const SECRET: &str = "diag-s3cr3t-Zq9";
    let lower = SECRET.to_ascii_lowercase();
    let dir = Workspace::new().file(
        "w.yml",
        r#"
on: workflow_dispatch
jobs:
  boxed:
    container: gpuflow-base:test
    steps:
      - id: greet
        env: { TOKEN: "${{ secrets.TOKEN }}" }
        run: echo "token ${{ secrets.TOKEN }} $TOKEN"
      - uses: start-container
        with: { name: "srv-${{ secrets.TOKEN }}", image: gpuflow-base:test, command: sleep 30 }
      - id: hide
        run: |
          echo "::add-mask::m4sk-qx7z"
          echo "value=m4sk-qx7z" >> "$GITHUB_OUTPUT"
      - uses: start-container
        with: { name: "late-${{ steps.hide.outputs.value }}", image: gpuflow-base:test, command: sleep 30 }
"#,
    );
    let out = dir
        .gpuflow()
        .args(["-vvv", "run", "--plain", "w.yml", "--secret", "TOKEN"])
        .env("TOKEN", SECRET)
        .output();
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    // The run masks its own output, as ever.
    assert!(stdout.contains("token ***"), "{stdout}\n{stderr}");
    assert!(!stdout.contains(SECRET), "{stdout}");
    // As given, and as the Docker name of the second container holds it (lower-cased).
    assert!(
        !stderr.contains(SECRET),
        "the secret is in the diagnostics:\n{stderr}"
    );
    assert!(
        !stderr.contains(&lower),
        "the secret is in the diagnostics:\n{stderr}"
    );
    assert!(stderr.contains("-srv-*** (gpuflow-base:test)"), "{stderr}");
    assert!(
        !stderr.contains("m4sk-qx7z"),
        "an added mask is in:\n{stderr}"
    );
    assert!(stderr.contains("-late-*** (gpuflow-base:test)"), "{stderr}");
    for expected in [
        "run{run=",
        "job{run=",
        "job=boxed cell=0",
        "step{step=\"1\" id=\"greet\"}",
        "operation=\"create_container\"",
        "operation=\"create_exec\"",
        "operation=\"remove_container\"",
    ] {
        assert!(stderr.contains(expected), "no `{expected}` in:\n{stderr}");
    }
}

fn json_lines(path: &Path) -> Vec<Value> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("`{}`: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{text}")))
        .collect()
}

/// A run queued by `gpuflow trigger` and run by a foreground worker: the worker's diagnostics
/// and its run's are JSON lines in `worker.diag.jsonl`, at info without `-v`; what the worker
/// prints and the run's output (`gpuflow logs`) hold none of them.
#[test]
fn the_worker_and_its_runs_write_json_lines_beside_worker_log() {
    let repo = Workspace::repository().file(
        "workflows/w.yml",
        "on: push\njobs:\n  hello:\n    steps:\n      - run: echo hello from the run\n",
    );
    let sha = repo.commit("w");
    let home = Workspace::empty();

    let gpuflow = |args: &[&str]| {
        repo.gpuflow()
            .env("GPUFLOW_HOME", home.path())
            .args(args)
            .success()
    };
    repo.gpuflow()
        .home(home.path())
        .trigger_main_push(None, &sha)
        .arg("--no-worker")
        .success();
    let worker = gpuflow(&["worker", "--idle-exit", "500ms"]);
    let (said, worker_err) = (&worker.stdout, &worker.stderr);
    assert!(said.contains(": success"), "{said}");
    assert!(
        !said.contains('{') && !worker_err.contains('{'),
        "{said}{worker_err}"
    );

    let lines = json_lines(&home.path().join("worker.diag.jsonl"));
    let span_names = |l: &Value| -> Vec<String> {
        l["spans"]
            .as_array()
            .map(|s| {
                s.iter()
                    .map(|s| s["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // The worker's own: its span, and the run's end.
    assert!(
        lines.iter().any(|l| l["fields"]["message"] == "run ended"
            && l["fields"]["state"] == "success"
            && span_names(l) == ["worker", "queued_run"]),
        "{lines:#?}"
    );
    // The run's, from its own process: its run, job and step spans (the step's inside the
    // job's).
    assert!(
        lines.iter().any(|l| l["span"]["name"] == "step"
            && l["span"]["step"] == "1"
            && span_names(l).contains(&"job".to_string())),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l["span"]["name"] == "run"),
        "{lines:#?}"
    );
    for l in &lines {
        assert!(l["timestamp"].is_string() && l["level"].is_string(), "{l}");
    }
    // The run's output (`gpuflow logs`) is the user's: no diagnostics in it.
    let runs: Vec<Value> = serde_json::from_str(&gpuflow(&["runs", "--json"]).stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap();
    let shown = gpuflow(&["logs", id]).stdout;
    assert!(shown.contains("hello from the run"), "{shown}");
    assert!(!shown.contains("\"timestamp\""), "{shown}");
}

/// A health probe's retries show at debug, each with why it was not ready: what someone
/// whose `wait-for-health` times out turns on first. A host-only run; no engine needed.
#[test]
fn health_probe_retries_show_at_debug_with_their_reason() {
    // A port nothing listens on: bound, then freed.
    let port = free_port();
    let dir = Workspace::new().file(
        "w.yml",
        &format!(
            r#"
on: workflow_dispatch
jobs:
  wait:
    steps:
      - uses: wait-for-health
        with: {{ probe: tcp, address: "127.0.0.1:{port}", timeout: 1s, interval: 100ms }}
"#
        ),
    );
    let run = |verbose: &[&str]| {
        dir.gpuflow()
            .args(verbose)
            .args(["run", "--plain", "w.yml"])
    };
    let out = run(&["-vv"]).status(1);
    let stderr = &out.stderr;
    let retries = stderr
        .lines()
        .filter(|l| l.contains("health probe: not ready, retrying") && l.contains("why="))
        .count();
    assert!(retries >= 2, "{stderr}");
    assert!(!run(&[]).output().stderr.contains("health probe"));
}
