//! `gpuflow run` as a user runs it: exit codes, the plain and `--json` output, stored logs.
//! Workflows here use only `run:` steps on the host, so no Docker is needed.

use std::io::Read;
use std::time::Duration;

use crate::support::sim::SimProcess;
use crate::support::{Signal, Workspace, wait_until};

/// A workspace holding `w.yml`.
fn workspace(yaml: &str) -> Workspace {
    Workspace::new().file("w.yml", yaml)
}

const OK: &str = r#"
name: hello
on:
  workflow_dispatch:
    inputs:
      who: { default: world }
jobs:
  greet:
    steps:
      - name: say
        run: echo "hello ${{ inputs.who }}"
  after:
    needs: greet
    steps:
      - run: echo done
"#;

#[test]
fn a_successful_run_exits_0_with_prefixed_lines_a_summary_and_stored_logs() {
    let dir = workspace(OK);
    let out = dir
        .gpuflow()
        .args(["run", "w.yml", "--input", "who=gpus"])
        .status(0);
    let stdout = out.stdout;
    assert!(stdout.contains("[greet] say | hello gpus"), "{stdout}");
    assert!(stdout.contains("summary:"), "{stdout}");
    assert!(stdout.contains("after"), "{stdout}");
    let runs: Vec<_> = std::fs::read_dir(dir.path().join(".gpuflow/runs"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 1);
    let run = runs[0].as_ref().unwrap().path();
    assert!(run.join("events.jsonl").is_file());
    // Compressed when the step ended (docs/running.md, "Stored logs").
    assert!(run.join("greet/1-say.log.zst").is_file());
    let mut step_log = String::new();
    gpuflow::run_logs::files::open_log(&run.join("greet/1-say.log"))
        .unwrap()
        .read_to_string(&mut step_log)
        .unwrap();
    assert_eq!(step_log, "hello gpus\n");
}

#[test]
fn json_output_is_one_event_per_line() {
    let dir = workspace(OK);
    let out = dir.gpuflow().args(["run", "--json", "w.yml"]).status(0);
    let events: Vec<serde_json::Value> = out.json_lines();
    assert_eq!(events.first().unwrap()["type"], "run_started");
    // The run's answer comes last, right after `run_finished`.
    let [.., finished, headline] = &events[..] else {
        panic!("too few events: {events:?}");
    };
    assert_eq!(finished["type"], "run_finished");
    assert_eq!(finished["result"], "success");
    assert_eq!(headline["type"], "run_headline");
    assert_eq!(headline["result"], "success");
    assert_eq!(headline["benchmarks"], serde_json::json!([]));
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "log_line" && e["text"] == "hello world")
    );
    assert!(events.iter().all(|e| e["elapsed"].is_number()));
}

#[test]
fn a_failing_job_exits_1() {
    let dir = workspace("on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: exit 4\n");
    let out = dir.gpuflow().args(["run", "w.yml"]).status(1);
    let stdout = out.stdout;
    assert!(stdout.contains("exited with code 4"), "{stdout}");
    assert!(stdout.contains("failure"), "{stdout}");
}

#[test]
fn an_invalid_workflow_exits_3_and_starts_nothing() {
    let dir = workspace(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: touch started\n      - run: echo ${{ steps.nope.outputs.x }}\n",
    );
    let out = dir.gpuflow().args(["run", "w.yml"]).status(3);
    assert!(out.stderr.contains("nothing was started"));
    assert!(!dir.path().join("started").exists());
    assert!(!dir.path().join(".gpuflow").exists());
}

#[test]
fn a_step_that_cannot_run_yet_exits_3_naming_it() {
    let dir = workspace(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: touch started\n      - uses: docker://gpuflow-base:test\n",
    );
    let out = dir.gpuflow().args(["run", "w.yml"]).status(3);
    let stderr = out.stderr;
    assert!(
        stderr.contains("`docker://gpuflow-base:test` steps are not supported yet"),
        "{stderr}"
    );
    assert!(stderr.contains("w.yml:6:"), "{stderr}");
    assert!(!dir.path().join("started").exists());
}

#[test]
fn a_secret_missing_from_the_environment_is_a_usage_error() {
    let dir = workspace(OK);
    let out = dir
        .gpuflow()
        .env_remove("GPUFLOW_TEST_NO_SUCH_SECRET")
        .args(["run", "w.yml", "--secret", "GPUFLOW_TEST_NO_SUCH_SECRET"])
        .status(2);
    assert!(out.stderr.contains("`GPUFLOW_TEST_NO_SUCH_SECRET`"));
}

#[test]
fn secrets_from_the_environment_are_masked() {
    let dir = workspace(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: echo \"pw ${{ secrets.GPUFLOW_TEST_PW }}\"\n",
    );
    let out = dir
        .gpuflow()
        .env("GPUFLOW_TEST_PW", "correct-horse")
        .args(["run", "w.yml", "--secret", "GPUFLOW_TEST_PW"])
        .status(0);
    let stdout = out.stdout;
    assert!(stdout.contains("pw ***"), "{stdout}");
    assert!(!stdout.contains("correct-horse"));
}

#[test]
fn ctrl_c_stops_the_step_runs_always_steps_and_exits_130() {
    let dir = workspace(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: echo $$ > step.pid; sleep 60\n      - if: always()\n        run: echo cleanup ran > cleanup.txt\n",
    );
    let child = dir.gpuflow().args(["run", "w.yml"]).spawn();
    let pid_file = dir.path().join("step.pid");
    wait_until("the step to start", Duration::from_secs(30), || {
        pid_file.exists()
    });
    child.signal(Signal::INT);
    let (status, stderr) = child.wait();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cleanup.txt")).unwrap(),
        "cleanup ran\n"
    );
    let step = std::fs::read_to_string(&pid_file).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", step.trim())).unwrap_or_default();
    let alive = stat
        .rsplit_once(") ")
        .is_some_and(|(_, rest)| !rest.starts_with('Z'));
    assert!(!alive, "the step's process survived");
}

#[test]
fn vars_are_read_from_the_command_line() {
    let dir = workspace(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: echo \"region ${{ vars.region }}\"\n",
    );
    let out = dir
        .gpuflow()
        .args(["run", "w.yml", "--var", "region=eu-west"])
        .status(0);
    assert!(out.stdout.contains("[j] Run echo"));
    assert!(out.stdout.contains("| region eu-west"));
    dir.gpuflow()
        .args(["run", "w.yml", "--var", "no-equals"])
        .status(2);
}

/// `[vars]` of the workspace's `gpuflow.toml` is `vars.NAME` in its runs; `--var` replaces a
/// value of the same name, also spelt in another case (`vars.X` is case-insensitive).
#[test]
fn vars_come_from_gpuflow_toml_and_var_overrides_them() {
    let dir = workspace(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: echo \"model=${{ vars.MODEL }} region=${{ vars.region }}\"\n",
    );
    std::fs::write(
        dir.path().join("gpuflow.toml"),
        "[vars]\nMODEL = \"llama-3-8b\"\nregion = \"us-east\"\n",
    )
    .unwrap();
    let out = dir
        .gpuflow()
        .env_remove("GPUFLOW_CONFIG")
        .args(["run", "--plain", "w.yml"])
        .status(0);
    let stdout = out.stdout;
    assert!(
        stdout.contains("| model=llama-3-8b region=us-east"),
        "{stdout}"
    );

    let out = dir
        .gpuflow()
        .env_remove("GPUFLOW_CONFIG")
        .args(["run", "--plain", "w.yml", "--var", "model=qwen3"])
        .status(0);
    let stdout = out.stdout;
    assert!(stdout.contains("| model=qwen3 region=us-east"), "{stdout}");
}

/// A configuration variable is a string, as on GitHub: another type is refused before
/// anything starts, at its `file:line:col`, with the quoted form to write.
#[test]
fn a_var_in_gpuflow_toml_that_is_not_a_string_is_refused_at_its_place() {
    let dir =
        workspace("on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: touch started\n");
    std::fs::write(
        dir.path().join("gpuflow.toml"),
        "[vars]\nMODEL = \"llama\"\nGPUS = 8\n",
    )
    .unwrap();
    let out = dir
        .gpuflow()
        .env_remove("GPUFLOW_CONFIG")
        .args(["run", "--plain", "w.yml"])
        .status(2);
    let stderr = out.stderr;
    assert!(
        stderr.contains("error: `vars.GPUS` must be a string"),
        "{stderr}"
    );
    assert!(stderr.contains("gpuflow.toml:3:8"), "{stderr}");
    assert!(stderr.contains("quote it: `GPUS = \"8\"`"), "{stderr}");
    assert!(!dir.path().join("started").exists());
}

/// `runner.gpus` lists the GPUs leased to the job, the same ones its `CUDA_VISIBLE_DEVICES`
/// and `GPUFLOW_GPUS` name, with what the inventory knows of each; a job without GPUs gets
/// an empty list.
#[test]
fn runner_gpus_lists_the_jobs_leased_gpus() {
    let dir = workspace(
        r#"on: workflow_dispatch
jobs:
  two:
    gpus: 2
    steps:
      - run: |
          echo '${{ toJSON(runner.gpus) }}' > two.json
          echo "$CUDA_VISIBLE_DEVICES" > two.cuda
          echo "$GPUFLOW_GPUS" > two.indexes
  none:
    steps:
      - run: echo '${{ toJSON(runner.gpus) }}' > none.json
"#,
    );
    let stand_in = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/stand-in-8gpu-pcie.toml");
    dir.gpuflow()
        .env_remove("GPUFLOW_CONFIG")
        .env(gpuflow::gpu::STAND_IN_ENV, stand_in)
        .env("GPUFLOW_LEASE_DIR", dir.path().join("leases"))
        .args(["run", "--plain", "w.yml"])
        .status(0);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let gpus: serde_json::Value = serde_json::from_str(&read("two.json")).unwrap();
    let gpus = gpus.as_array().unwrap();
    assert_eq!(gpus.len(), 2, "{gpus:?}");
    let uuids: Vec<&str> = gpus.iter().map(|g| g["uuid"].as_str().unwrap()).collect();
    assert_eq!(uuids.join(","), read("two.cuda").trim());
    let indexes: Vec<String> = gpus.iter().map(|g| g["index"].to_string()).collect();
    assert_eq!(indexes.join(","), read("two.indexes").trim());
    for g in gpus {
        assert_eq!(g["model"], "NVIDIA L40S", "{g}");
        assert_eq!(g["memory_mib"], 46068, "{g}");
    }
    assert_eq!(read("none.json").trim(), "[]");
}

/// The first Ctrl-C starts the `always()` step; a second forces: that step is stopped rather
/// than waited for, and the run still exits 130.
#[test]
fn a_second_ctrl_c_stops_the_always_steps_and_exits_130() {
    let dir = workspace(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: touch step.started; sleep 60\n      - if: always()\n        run: touch cleanup.started; sleep 60; touch cleanup.finished\n",
    );
    let child = dir.gpuflow().args(["run", "--plain", "w.yml"]).spawn();
    let wait_for = |name: &str| {
        wait_until(&format!("`{name}`"), Duration::from_secs(30), || {
            dir.path().join(name).exists()
        });
    };
    wait_for("step.started");
    child.signal(Signal::INT);
    wait_for("cleanup.started");
    child.signal(Signal::INT);
    let (status, stderr) = child.wait();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("received SIGINT (#2): forcing"), "{stderr}");
    assert!(
        !dir.path().join("cleanup.finished").exists(),
        "the always() step was waited for after the second Ctrl-C"
    );
}

#[test]
fn steps_that_need_no_engine_run_without_docker() {
    // A GPU machine without Docker: `report` (like `compare-to-baseline`) never connects, so
    // its own problem is what the run reports, not an unreachable engine (exit 1, not 4).
    let dir = workspace(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: echo measured\n      - uses: report\n        with: { format: markdown }\n",
    );
    let out = dir
        .gpuflow()
        .without_docker()
        .args(["run", "--plain", "w.yml"])
        .status(1);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("no results store"), "{all}");
    assert!(!all.contains("Docker engine"), "{all}");
}

/// A GPU machine without Docker, its server started on the host: the built-in load generator
/// measures it, records the result and a comparison judges it, and nothing asks for an engine.
#[test]
fn a_benchmark_of_a_server_on_the_host_runs_without_docker() {
    let sim = SimProcess::start(&["--ttft", "5ms", "--tokens-per-second", "2000"]);
    let port = sim.addr().port();
    let dir = workspace(&format!(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - uses: benchmark\n        with: {{ target: 'http://127.0.0.1:{port}', mode: single-stream, requests: 3, warmup: 0, output-tokens: 8 }}\n      - uses: compare-to-baseline\n        with: {{ metric: output_tok_s, baseline: previous }}\n"
    ));
    let out = dir
        .gpuflow()
        .without_docker()
        .args(["run", "--plain", "w.yml"])
        .output();
    drop(sim);
    let all = out.all();
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("Successful requests:"), "{all}");
    assert!(all.contains("recorded as result"), "{all}");
    assert!(!all.contains("Docker engine"), "{all}");
}

/// Prints where a `run:` step's working state is and the modes of its folder and files.
const STATE: &str = r#"
name: state
jobs:
  build:
    steps:
      - run: |
          echo "temp=$RUNNER_TEMP"
          stat -c 'job-folder=%a' "$(dirname "$RUNNER_TEMP")"
          stat -c 'env-file=%a' "$GITHUB_ENV"
          stat -c 'output-file=%a' "$GITHUB_OUTPUT"
          echo "token=secret" >> "$GITHUB_ENV"
  other:
    steps:
      - run: echo "temp=$RUNNER_TEMP"
"#;

/// A job's folder for host `run:` steps used to be `$TMPDIR/gpuflow-<run>-<job>-<cell>`, used
/// as it was when there: another local user could make it (or a symlink) first and own the
/// script gpuflow then wrote and ran. Now each job run gets a new 0700 folder with a random
/// name, and a path made in advance is never written to.
#[test]
fn job_folders_are_private_and_new_never_a_path_made_in_advance() {
    let dir = workspace(STATE);
    let tmp = Workspace::empty();
    // The old, predictable paths of both jobs, made by "another user": a folder, and a symlink
    // to the victim's folder.
    let planted = tmp.path().join("gpuflow-planted-build-1");
    std::fs::create_dir_all(planted.join("host")).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, tmp.path().join("gpuflow-planted-other-1")).unwrap();

    let out = dir
        .gpuflow()
        .args(["run", "--plain", "--run-id", "planted", "w.yml"])
        .env("TMPDIR", tmp.path())
        .env_remove("XDG_RUNTIME_DIR")
        .status(0);
    let stdout = out.stdout;
    assert!(
        planted.join("host").is_dir(),
        "the folder made in advance was used as the job's folder (and removed at its end)\n{stdout}"
    );
    assert_eq!(
        std::fs::read_dir(planted.join("host")).unwrap().count(),
        0,
        "nothing is written into a folder made in advance\n{stdout}"
    );
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "{stdout}");
    let temps: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once("| temp=").map(|(_, t)| t))
        .collect();
    assert_eq!(temps.len(), 2, "{stdout}");
    for t in &temps {
        assert!(t.starts_with(tmp.path().to_str().unwrap()), "{t}");
        assert!(
            !t.contains("gpuflow-planted-build-1/") && !t.contains("gpuflow-planted-other-1/"),
            "{t}"
        );
    }
    assert!(stdout.contains("job-folder=700"), "{stdout}");
    assert!(stdout.contains("env-file=600"), "{stdout}");
    assert!(stdout.contains("output-file=600"), "{stdout}");
    // The job folders are removed when their jobs end; what was planted stays as it was.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
}

/// Another local user plants symlinks where the GPU lock files go, pointing at a file of the
/// victim's: the job asking for a GPU fails saying what is wrong, and that file is untouched
/// (lock files used to be opened through symlinks and truncated).
#[test]
fn a_planted_symlink_for_a_gpu_lock_file_fails_the_job_and_leaves_its_target_alone() {
    let dir = workspace(
        "on: workflow_dispatch\njobs:\n  hold:\n    gpus: 1\n    steps:\n      - run: echo \"gpus $CUDA_VISIBLE_DEVICES\"\n",
    );
    let leases = Workspace::empty();
    let victim = leases.path().join("victim-notes");
    std::fs::write(&victim, "precious\n").unwrap();
    for i in 0..8 {
        let uuid = format!("GPU-5a1d0000-0000-4000-8000-00000000000{i}");
        std::os::unix::fs::symlink(&victim, leases.path().join(format!("local@{uuid}.lock")))
            .unwrap();
    }
    let out = dir
        .gpuflow()
        .args(["run", "--plain", "w.yml"])
        .env(
            gpuflow::gpu::STAND_IN_ENV,
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../examples/stand-in-8gpu-pcie.toml"),
        )
        .env("GPUFLOW_LEASE_DIR", leases.path())
        .env_remove("GPUFLOW_CONFIG")
        .env_remove("DOCKER_HOST")
        .status(1);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("is a symbolic link"), "{all}");
    assert!(all.contains("remove it"), "{all}");
    assert!(!all.contains("gpus GPU-"), "the step must not run: {all}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
}

/// `.gpuflow/` (logs, results store) is gpuflow's state, not the user's work: when gpuflow
/// makes it, it writes a `.gitignore` holding `*` into it, as pytest and ruff do for their
/// caches, so a run leaves `git status` clean.
#[test]
fn a_run_in_a_fresh_git_repository_leaves_git_status_clean() {
    let dir = Workspace::repository()
        .file("w.yml", OK)
        .committed("workflow");
    let git = |args: &[&str]| dir.git(args);
    dir.gpuflow().args(["run", "--plain", "w.yml"]).status(0);
    assert!(dir.path().join(".gpuflow/runs").is_dir());
    assert_eq!(git(&["status", "--porcelain", "--untracked-files=all"]), "");
    // Workflows kept in `.gpuflow/workflows/` (docs/triggers.md) are still the user's to add.
    std::fs::create_dir(dir.path().join(".gpuflow/workflows")).unwrap();
    std::fs::write(dir.path().join(".gpuflow/workflows/w.yml"), OK).unwrap();
    assert_eq!(
        git(&["status", "--porcelain", "--untracked-files=all"]),
        "?? .gpuflow/workflows/w.yml"
    );
}
