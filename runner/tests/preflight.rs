//! Preflight against the real Docker engine, reproducing the write-ups: a benchmark script given
//! `--port --num-prompts --output-len` when its flags are `--server-url --max-tokens --num-runs
//! --warmup`, next to a server that takes 60 s to load. The wrong flags must fail the run in
//! seconds, before the server container exists, with the script's usage and the real flags;
//! the right ones must pass and the benchmark must then run against the simulator.
//!
//! Images: `gpuflow-sim:test` and `gpuflow-python:test` (`make test-images`). These tests run
//! `gpuflow run` (which sweeps orphans at start), so they are in nextest's `docker-sweep` group.

use std::time::{Duration, Instant};

use gpuflow::engine::{EventKind, JobResult, RunOptions};

use crate::support::images::{self, PYTHON, SIM};
use crate::support::{Ran, Workspace, engine, shipped};

const IMAGES: [&str; 2] = [SIM, PYTHON];

/// The write-ups' job: a server with a 60 s model load, the benchmark script in its own
/// container, its interface checked, then the benchmark itself.
fn workflow(args: &str, startup_delay: &str) -> String {
    format!(
        r#"
on: workflow_dispatch
jobs:
  bench:
    steps:
      - name: start the server
        uses: start-container
        with:
          name: server
          image: gpuflow-sim:test
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay {startup_delay} --tokens-per-second 400
      - name: start the client
        uses: start-container
        with:
          name: client
          image: gpuflow-python:test
          command: sleep 600
      - name: check the benchmark's flags
        uses: check-cli-interface
        with:
          container: client
          command: python3 /tmp/benchmark_eagle3.py
          args: {args}
      - name: benchmark
        container: client
        run: |
          for i in $(seq 100); do
            python3 /tmp/benchmark_eagle3.py {args} && exit 0
            sleep 0.1
          done
          exit 1
"#
    )
}

const WRONG: &str = "--port 30000 --num-prompts 5 --output-len 256";
const RIGHT: &str = "--server-url http://server:30000 --max-tokens 32 --num-runs 2 --warmup 0";

/// Runs `yaml` through the engine's API with the images above, listing the run's containers
/// every 20 ms meanwhile.
async fn run(yaml: &str, tweak: impl FnOnce(&mut RunOptions)) -> Option<Ran> {
    run_with(yaml, &[], tweak).await
}

/// Like [`run`], with more files (`path`, text) in the workspace.
async fn run_with(
    yaml: &str,
    files: &[(&str, &str)],
    tweak: impl FnOnce(&mut RunOptions),
) -> Option<Ran> {
    engine::workflow(yaml)
        .files(files)
        .images(&IMAGES)
        .options(tweak)
        .watch_containers()
        .on_docker()
        .await
}

#[tokio::test]
async fn the_write_ups_wrong_flags_fail_in_preflight_before_the_server_is_created() {
    let Some(ran) = run(&workflow(WRONG, "60s"), |_| {}).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    assert_eq!(ran.report.preflight.failed, 1, "{:#?}", ran.events);
    // Seconds, not the 60 s load.
    assert!(ran.took < Duration::from_secs(20), "took {:?}", ran.took);
    // Events: no container of the job was started, and the job never started.
    assert!(!ran.started("server"), "the server was started");
    assert!(!ran.started("client"), "the client was started");
    assert!(ran.started("preflight-client"), "{:#?}", ran.events);
    assert!(
        ran.position(|k| matches!(k, EventKind::JobStarted { .. }))
            .is_none()
    );
    // The engine's API: the only containers of the run ever listed were preflight's.
    assert!(
        ran.seen_jobs.iter().all(|j| j == "preflight-bench"),
        "{:?}",
        ran.seen_jobs
    );

    let messages = ran.preflight_messages();
    assert_eq!(messages.len(), 1, "{messages:#?}");
    let m = &messages[0];
    for expected in [
        "`python3 /tmp/benchmark_eagle3.py` in container `client` does not accept what it will be given:",
        "`--port` is not a flag of this command; did you mean `--server-url SERVER_URL`?",
        "`--num-prompts` is not a flag of this command; did you mean `--num-runs NUM_RUNS`?",
        "`--output-len` is not a flag of this command; did you mean `--max-tokens MAX_TOKENS`?",
        "its usage (argparse, from `python3 /tmp/benchmark_eagle3.py --help`):",
        "usage: benchmark_eagle3.py [-h] [--server-url SERVER_URL]",
        "[--warmup WARMUP]",
    ] {
        assert!(m.contains(expected), "missing {expected:?} in:\n{m}");
    }
}

#[tokio::test]
async fn with_the_right_flags_preflight_passes_and_the_benchmark_runs() {
    let Some(ran) = run(&workflow(RIGHT, "1s"), |_| {}).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    // Two images and the flags.
    assert_eq!(ran.report.preflight.checks, 3);
    assert_eq!(ran.report.preflight.failed, 0);
    let finished = ran.index(|k| matches!(k, EventKind::PreflightFinished { .. }));
    let server =
        ran.index(|k| matches!(k, EventKind::ContainerStarted { name, .. } if name == "server"));
    assert!(finished < server);
    let result = ran.events.iter().any(|e| {
        matches!(&e.kind, EventKind::LogLine { text, .. }
            if text.ends_with(" tok/s") && !text.starts_with("run "))
    });
    assert!(result, "no `NN.N tok/s` line: {:#?}", ran.events);
}

#[tokio::test]
async fn preflight_only_runs_no_job() {
    let Some(ran) = run(&workflow(RIGHT, "60s"), |o| o.preflight_only = true).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success);
    assert!(ran.report.preflight.passed());
    assert!(!ran.started("server"));
    assert!(
        ran.report
            .jobs
            .iter()
            .all(|j| j.result == JobResult::Skipped)
    );
}

#[tokio::test]
async fn a_check_reading_an_earlier_step_runs_at_its_place() {
    let yaml = r#"
on: workflow_dispatch
jobs:
  bench:
    steps:
      - uses: start-container
        with: { name: client, image: gpuflow-python:test, command: sleep 600 }
      - id: args
        run: echo "value=--port 30000" >> "$GITHUB_OUTPUT"
      - name: check
        uses: check-cli-interface
        with:
          container: client
          command: python3 /tmp/benchmark_eagle3.py
          args: ${{ steps.args.outputs.value }}
"#;
    let Some(ran) = run(yaml, |_| {}).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    // Only the image was checked early.
    assert_eq!(ran.report.preflight.checks, 1);
    assert!(ran.started("client"));
    let at_place = ran.events.iter().any(|e| {
        matches!(&e.kind, EventKind::LogLine { text, .. }
            if text.contains("did you mean `--server-url SERVER_URL`?"))
    });
    assert!(at_place, "{:#?}", ran.events);
}

/// eagle3.yml's shape: the container comes from a composite action, the script's path from
/// the workflow's `env`.
#[tokio::test]
async fn a_container_started_by_an_action_and_a_path_from_env_are_checked_early() {
    let action = r#"
name: client
description: the benchmark client
inputs:
  name: { description: its name, default: client }
runs:
  using: composite
  steps:
    - uses: start-container
      with: { name: "${{ inputs.name }}", image: gpuflow-python:test, command: sleep 600 }
"#;
    let yaml = r#"
on: workflow_dispatch
env:
  BENCH_SCRIPT: /tmp/benchmark_eagle3.py
jobs:
  bench:
    steps:
      - uses: ./actions/client
      - name: check
        uses: check-cli-interface
        with:
          container: client
          command: python3 ${{ env.BENCH_SCRIPT }}
          args: --port 30000
"#;
    let Some(ran) = run_with(yaml, &[("actions/client/action.yml", action)], |_| {}).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    assert_eq!(ran.report.preflight.failed, 1, "{:#?}", ran.events);
    assert!(!ran.started("client"));
    let messages = ran.preflight_messages();
    assert!(
        messages[0].contains("did you mean `--server-url SERVER_URL`?"),
        "{messages:#?}"
    );
}

/// A host command (gpuflow's own clap CLI): checked on the host, before the job.
#[tokio::test]
async fn a_host_command_is_checked_on_the_host() {
    let bin = env!("CARGO_BIN_EXE_gpuflow");
    let yaml = format!(
        r#"
on: workflow_dispatch
jobs:
  bench:
    steps:
      - uses: check-cli-interface
        with:
          command: {bin} run
          args: w.yml --jsn --input a=b
          required-flags: [--json, --preflight-only]
          version-pattern: ^gpuflow-0
"#
    );
    let Some(ran) = run(&yaml, |_| {}).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    let messages = ran.preflight_messages();
    assert_eq!(messages.len(), 1, "{messages:#?}");
    let m = &messages[0];
    for expected in [
        "on the host does not accept what it will be given:",
        "`--jsn` is not a flag of this command; did you mean `--json`?",
        "the version does not match `^gpuflow-0`",
        "its usage (clap, from",
        "Usage: gpuflow run [OPTIONS] <FILE>",
    ] {
        assert!(m.contains(expected), "missing {expected:?} in:\n{m}");
    }
    assert!(!m.contains("--preflight-only"), "{m}");
}

#[tokio::test]
async fn a_missing_test_image_fails_preflight_with_the_make_target() {
    let yaml = r#"
on: workflow_dispatch
jobs:
  bench:
    steps:
      - uses: start-container
        with: { name: server, image: "gpuflow-missing:test" }
"#;
    let Some(ran) = run(yaml, |_| {}).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    let messages = ran.preflight_messages();
    assert!(
        messages.iter().any(|m| m.contains("make test-images")),
        "{messages:#?}"
    );
    assert!(!ran.started("server"));
}

#[tokio::test]
async fn gpuflow_run_prints_the_usage_and_suggestions_and_exits_1() {
    if images::docker_with(&IMAGES).await.is_none() {
        return;
    }
    let dir = Workspace::new().file("w.yml", &workflow(WRONG, "60s"));
    let started = Instant::now();
    let out = dir
        .gpuflow()
        .args(["run", "w.yml"])
        .timeout(Duration::from_secs(60))
        .status(1);
    assert!(started.elapsed() < Duration::from_secs(20));
    let stdout = out.stdout;
    for expected in [
        "[bench] preflight: check the benchmark's flags (step 3): failure",
        "did you mean `--server-url SERVER_URL`?",
        "usage: benchmark_eagle3.py [-h] [--server-url SERVER_URL]",
        "preflight: 1 of 3 checks failed",
        "nothing was started",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(!stdout.contains("container server started"), "{stdout}");

    dir.write("w.yml", &workflow(RIGHT, "60s"));
    dir.gpuflow()
        .args(["run", "w.yml", "--preflight-only"])
        .timeout(Duration::from_secs(60))
        .stdout_contains("preflight: 3 checks passed")
        .stdout_lacks("container server started")
        .success();
}

/// eagle3.yml's server, its model folder given by `models:` (a folder of the host, mounted at
/// /models) — the server image stands in as `gpuflow-sim:test`: it is never started.
fn server_with_models(models: Option<&std::path::Path>, before: &str) -> String {
    let models = models.map_or(String::new(), |m| format!("models: {}", m.display()));
    format!(
        r#"
on: workflow_dispatch
env:
  MODEL: /models/Qwen3-235B
jobs:
  bench:
    steps:
{before}
      - id: server
        uses: ./actions/sglang-server
        with:
          image: gpuflow-sim:test
          gpus: 0
          {models}
          model: ${{{{ env.MODEL }}}}
          args: --tp-size 8
"#
    )
}

/// A folder holding `files`, each an empty JSON object.
fn folder_with(files: &[&str]) -> Workspace {
    files
        .iter()
        .fold(Workspace::empty(), |folder, f| folder.file(f, "{}"))
}

/// The model is not in the host folder the action mounts: preflight says so in seconds, with
/// the mount, its folder on the host, what is there instead and the fix; no server is created.
#[tokio::test]
async fn a_model_missing_from_the_mounted_folder_fails_preflight_naming_the_mount() {
    let models = folder_with(&["Qwen3-235B-EAGLE3/config.json", "Qwen3-8B/config.json"]);
    let Some(ran) = run_with(
        &server_with_models(Some(models.path()), ""),
        &[(
            "actions/sglang-server/action.yml",
            &shipped("actions/sglang-server/action.yml"),
        )],
        |_| {},
    )
    .await
    else {
        return;
    };
    let m = &ran.refused_in_preflight("server");
    let host = models.path().display();
    for expected in [
        "`/models/Qwen3-235B` does not exist in container `server` (image `gpuflow-sim:test`, with the step's volumes mounted)".to_string(),
        format!("expected from the volume `{host}:/models:ro`: `{host}/Qwen3-235B` on the host"),
        "`/models` holds `Qwen3-235B-EAGLE3`, `Qwen3-8B`".to_string(),
        format!("help: put it at `{host}/Qwen3-235B` on the host, or mount the folder that holds it at `/models`"),
        // Where the workflow gives the folder: the `models:` input of the job's step (line 14).
        ":14:19 (the step `server`)".to_string(),
    ] {
        assert!(m.contains(&expected), "missing {expected:?} in:\n{m}");
    }
}

/// No `models:` at all (eagle3.yml as it was): nothing is mounted at /models, and the fix
/// names the action's input.
#[tokio::test]
async fn a_model_path_with_nothing_mounted_fails_preflight_with_the_input_to_give() {
    let Some(ran) = run_with(
        &server_with_models(None, ""),
        &[(
            "actions/sglang-server/action.yml",
            &shipped("actions/sglang-server/action.yml"),
        )],
        |_| {},
    )
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    assert!(!ran.started("server"));
    let messages = ran.preflight_messages();
    assert_eq!(messages.len(), 1, "{messages:#?}");
    let m = &messages[0];
    for expected in [
        "`/models/Qwen3-235B` does not exist in container `server`",
        "expected from a volume mounted at `/models` or above it, and there is none: the step mounts nothing",
        "give `models: /HOST/FOLDER`, mounted read-only at `/models`",
    ] {
        assert!(m.contains(expected), "missing {expected:?} in:\n{m}");
    }
}

/// The model is there: preflight passes (the image, the model's path), nothing is started.
#[tokio::test]
async fn a_model_in_the_mounted_folder_passes_preflight() {
    let models = folder_with(&["Qwen3-235B/config.json"]);
    let Some(ran) = run_with(
        &server_with_models(Some(models.path()), ""),
        &[(
            "actions/sglang-server/action.yml",
            &shipped("actions/sglang-server/action.yml"),
        )],
        |o| o.preflight_only = true,
    )
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    // The model's path, and the server's command line (not checked: the stand-in image has
    // no SGLang to print its help, a warning).
    assert_eq!(ran.report.preflight.checks, 2, "{:#?}", ran.events);
    assert!(ran.report.preflight.passed());
    assert!(ran.started("preflight-server"), "{:#?}", ran.events);
    assert!(!ran.started("server"));
}

/// A `run:` step before the server could put the model there (a download): preflight leaves
/// the path alone, and `start-container` looks for it itself, before creating the server.
#[tokio::test]
async fn after_a_script_the_model_is_looked_for_by_the_step_itself() {
    let models = folder_with(&["other/config.json"]);
    let Some(ran) = run_with(
        &server_with_models(Some(models.path()), "      - run: echo downloading"),
        &[(
            "actions/sglang-server/action.yml",
            &shipped("actions/sglang-server/action.yml"),
        )],
        |_| {},
    )
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    assert_eq!(ran.report.preflight.checks, 0, "{:#?}", ran.events);
    assert!(ran.started("server-paths"), "{:#?}", ran.events);
    assert!(!ran.started("server"), "the server was started");
    let said = ran.events.iter().any(|e| {
        matches!(&e.kind, EventKind::LogLine { text, .. }
            if text.contains("`/models/Qwen3-235B` does not exist in container `server`"))
    });
    assert!(said, "{:#?}", ran.events);
}

/// SGLang 0.5.23's real parser behind `python3 -m sglang.launch_server` and `sglang serve`
/// (images/sglang/build.sh, `make test-images`): its `--help` is SGLang's own, and it exits
/// instead of loading a model.
const SGLANG_CLI: &str = "gpuflow-test/sglang-cli:0.5.23";

/// The shipped `sglang-server` action with `args`, on the SGLang CLI image (no GPU, a model
/// given by name, so no path to look for).
fn sglang_server(args: &str) -> String {
    format!(
        r#"
on: workflow_dispatch
jobs:
  bench:
    steps:
      - id: server
        uses: ./actions/sglang-server
        with:
          image: {SGLANG_CLI}
          gpus: 0
          model: Qwen/Qwen3-0.6B
          args: {args}
      - run: echo the server is up
"#
    )
}

async fn run_sglang(args: &str, tweak: impl FnOnce(&mut RunOptions)) -> Option<Ran> {
    engine::workflow(&sglang_server(args))
        .files(&[(
            "actions/sglang-server/action.yml",
            &shipped("actions/sglang-server/action.yml"),
        )])
        .images(&[SGLANG_CLI])
        .options(tweak)
        .watch_containers()
        .on_docker()
        .await
}

/// The write-ups' SGLang flags: `--cuda-graph-max-bs`, removed in 0.5.20, is an ambiguous
/// prefix to argparse; `--enable-custom-all-reduce` never existed. Each fails preflight in
/// seconds, before the server's container exists, with the real usage and the flag meant.
#[tokio::test]
async fn a_server_flag_its_image_refuses_fails_preflight_before_the_server_starts() {
    for (args, expected) in [
        (
            "--tp-size 8 --cuda-graph-max-bs 128",
            [
                "`python3 -m sglang.launch_server` would refuse its command line before loading anything:",
                "`--cuda-graph-max-bs` could be any of `--cuda-graph-max-bs-decode` or `--cuda-graph-max-bs-prefill`; write the whole name",
                "error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
                "[--cuda-graph-max-bs-decode CUDA_GRAPH_MAX_BS_DECODE]",
            ],
        ),
        (
            "--tp-size 8 --enable-custom-all-reduce",
            [
                "`python3 -m sglang.launch_server` would refuse its command line before loading anything:",
                "`--enable-custom-all-reduce` is not a flag of this command; did you mean `--disable-custom-all-reduce`?",
                "error: unrecognized arguments: --enable-custom-all-reduce",
                "[--disable-custom-all-reduce]",
            ],
        ),
    ] {
        let Some(ran) = run_sglang(args, |_| {}).await else {
            return;
        };
        let m = ran.refused_in_preflight("server");
        assert!(ran.took < Duration::from_secs(60), "took {:?}", ran.took);
        assert!(
            ran.seen_jobs.iter().all(|j| j == "preflight-bench"),
            "{:?}",
            ran.seen_jobs
        );
        for e in expected.iter().copied().chain([
            "its usage (from `python3 -m sglang.launch_server --help` in the image):",
            "usage: sglang serve [-h] --model-path MODEL_PATH",
            // Where the job writes the flags: the `args:` of the step (line 12, column 17).
            "/w.yml:12:17 (the step `server`)",
        ]) {
            assert!(m.contains(e), "missing {e:?} in:\n{m}");
        }
    }
}

/// Flags SGLang 0.5.23 accepts pass the check; `--tp` passes too, with a warning that it is
/// only an abbreviation of `--tp-size`.
#[tokio::test]
async fn server_flags_its_image_accepts_pass_preflight() {
    let Some(ran) = run_sglang(
        "--tp 8 --cuda-graph-max-bs-decode 128 --disable-custom-all-reduce --enable-metrics",
        |o| o.preflight_only = true,
    )
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    // The server's command line (an image an action names is not checked on its own).
    assert_eq!(ran.report.preflight.checks, 1, "{:#?}", ran.events);
    assert!(ran.report.preflight.passed());
    assert!(!ran.started("server"));
    let passed = ran.preflight_messages();
    assert!(
        passed.iter().any(|m| m.contains(
            "`python3 -m sglang.launch_server` accepts its arguments (from `python3 -m sglang.launch_server --help` in `gpuflow-test/sglang-cli:0.5.23`)"
        )),
        "{passed:#?}"
    );
    let warned = ran.events.iter().any(|e| {
        matches!(&e.kind, EventKind::Warning { message, .. }
            if message.contains("`--tp` is not a flag of `python3 -m sglang.launch_server`: it works only as argparse's abbreviation of `--tp-size`"))
    });
    assert!(warned, "{:#?}", ran.events);
}

/// A plain `start-container` running `sglang serve MODEL …` is checked too (its model given
/// first, as `sglang serve` takes it), and so is its image; a wrapper script is not run with
/// `--help` at all.
#[tokio::test]
async fn a_plain_start_container_server_command_is_checked_and_a_wrapper_is_not() {
    let yaml = |command: &str| {
        format!(
            "on: workflow_dispatch\njobs:\n  bench:\n    steps:\n      - name: server\n        uses: start-container\n        with:\n          name: server\n          image: {SGLANG_CLI}\n          command: {command}\n"
        )
    };
    let run = |yaml: String| async move {
        engine::workflow(&yaml)
            .images(&[SGLANG_CLI])
            .options(|o| o.preflight_only = true)
            .on_docker()
            .await
    };
    let Some(ran) = run(yaml("sglang serve /models/m --cuda-graph-max-bs 8")).await else {
        return;
    };
    let m = ran.refused_in_preflight("server");
    assert!(
        m.contains("`sglang serve` would refuse its command line before loading anything:")
            && m.contains("`--cuda-graph-max-bs` could be any of")
            && m.contains("/w.yml:10:20 (the step `server`)"),
        "{m}"
    );
    // The image, then the command line.
    assert_eq!(ran.report.preflight.checks, 2, "{:#?}", ran.events);

    let Some(ran) = run(yaml(
        "sh -c 'sglang serve --model-path /m --cuda-graph-max-bs 8'",
    ))
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    // Only the image: the wrapper's `--help` is never run.
    assert_eq!(ran.report.preflight.checks, 1, "{:#?}", ran.events);
    assert!(!ran.started("preflight-server"), "{:#?}", ran.events);
}

/// An image without the server (busybox standing in for it): its help cannot run, so the
/// command line is not checked — a warning saying why, never a refusal.
#[tokio::test]
async fn a_server_help_that_cannot_run_is_a_warning_not_a_refusal() {
    let yaml = sglang_server("--cuda-graph-max-bs 128").replace(SGLANG_CLI, images::BASE);
    let Some(ran) = engine::workflow(&yaml)
        .files(&[(
            "actions/sglang-server/action.yml",
            &shipped("actions/sglang-server/action.yml"),
        )])
        .images(&[images::BASE])
        .options(|o| o.preflight_only = true)
        .on_docker()
        .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    assert_eq!(ran.report.preflight.checks, 1, "{:#?}", ran.events);
    assert!(ran.report.preflight.passed());
    let warned = ran.events.iter().any(|e| {
        matches!(&e.kind, EventKind::Warning { message, .. }
            if message.starts_with("the command line of the server in container `server` was not checked against its help:")
                && message.contains("python3 -m sglang.launch_server --help"))
    });
    assert!(warned, "{:#?}", ran.events);
}
