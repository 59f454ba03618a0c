//! Volumes against the real Docker engine. A bind mount whose host folder does not exist is
//! refused, saying which path, where it was to be mounted and which input of the workflow gave
//! it, and nothing is created on the host: with Docker's legacy `Binds` the engine made the
//! folder, empty and owned by root, and the server failed later on an empty `/models`. A named
//! volume still mounts.
//!
//! Image: `gpuflow-base:test` (`make test-images`). The workflow tests run the engine, which
//! sweeps orphans at start, so they are in nextest's `docker-sweep` group.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use gpuflow::backend::{BackendError, ExecSpec, LogLine, VolumeMount};
use gpuflow::engine::JobResult;

use crate::support::Workspace;
use crate::support::docker::{base_spec, raw_docker, with_docker};
use crate::support::engine::on_docker_with;
use crate::support::images::BASE;
use crate::support::{Ran, shipped};

fn volume(source: &Path, target: &str) -> VolumeMount {
    VolumeMount {
        source: source.display().to_string(),
        target: target.into(),
        read_only: true,
    }
}

/// The backend refuses the missing host folder with its own error (the path and its target)
/// and creates nothing; an existing folder and a named volume mount as before.
#[tokio::test]
async fn a_missing_host_folder_is_refused_and_not_created() {
    with_docker("mount-missing", |t| async move {
        let host = Workspace::empty();
        let missing = host.path().join("no/such/models");
        let mut spec = base_spec(&["sleep", "300"]);
        spec.volumes = vec![volume(&missing, "/models")];
        let e = t
            .backend
            .start_container(&t.run, &spec)
            .await
            .expect_err("a missing bind source must be refused");
        match &e {
            BackendError::BindSourceMissing { path, target, .. } => {
                assert_eq!(path, &missing.display().to_string());
                assert_eq!(target.as_deref(), Some("/models"));
            }
            other => panic!("not BindSourceMissing: {other:?}"),
        }
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "the host path `{}` to mount at `/models` does not exist on the Docker engine's host",
                missing.display()
            )),
            "{text}"
        );
        assert!(
            e.hint()
                .unwrap()
                .contains(&format!("mkdir -p {}", missing.display())),
            "{:?}",
            e.hint()
        );
        // The point of the change: Docker did not make the folder (nor its parent).
        assert!(!host.path().join("no").exists(), "Docker created the folder");

        // An existing folder (read-only) and a named volume (read-write) mount.
        std::fs::write(host.path().join("weights"), "w").unwrap();
        let name = format!(
            "gpuflow-test-mounts-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let mut spec = base_spec(&["sleep", "300"]);
        spec.volumes = vec![
            volume(host.path(), "/models"),
            VolumeMount {
                source: name.clone(),
                target: "/cache".into(),
                read_only: false,
            },
        ];
        let started = t.backend.start_container(&t.run, &spec).await;
        let outcome = async {
            let c = started.unwrap();
            let mut out = Vec::new();
            let script = "cat /models/weights; echo; touch /models/x 2>/dev/null && echo rw || echo ro; echo kept > /cache/f && cat /cache/f";
            let code = t
                .backend
                .exec(
                    &c.id,
                    &ExecSpec::new(["sh", "-c", script]),
                    |l: LogLine| out.push(l.text),
                )
                .await
                .unwrap();
            assert_eq!(code, 0, "{out:?}");
            assert_eq!(out, ["w", "ro", "kept"]);
        };
        let outcome = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(outcome)).await;
        t.backend.remove_run(&t.run.run_id).await.unwrap();
        let _ = raw_docker()
            .await
            .remove_volume(&name, None::<bollard::query_parameters::RemoveVolumeOptions>)
            .await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    })
    .await;
}

/// Runs `yaml` (with the shipped `sglang-server` action beside it) on the local engine.
async fn run_with_sglang_action(yaml: &str) -> Option<Ran> {
    let action = shipped("actions/sglang-server/action.yml");
    on_docker_with(
        yaml,
        &[("actions/sglang-server/action.yml", action.as_str())],
    )
    .await
}

/// The server action's job with `with` lines (indented under it).
fn server(with: &str) -> String {
    format!(
        "on: workflow_dispatch\njobs:\n  serve:\n    steps:\n      - id: server\n        uses: ./actions/sglang-server\n        with:\n          image: {BASE}\n          gpus: 0\n          timeout: 10s\n{with}"
    )
}

/// `line:column` of the value of `key:` in `yaml`, as the engine's locations give it.
fn place_of(yaml: &str, key: &str) -> String {
    let (n, line) = yaml
        .lines()
        .enumerate()
        .find(|(_, l)| l.trim_start().starts_with(&format!("{key}: ")))
        .unwrap();
    let column = line.find(": ").unwrap() + 3;
    format!("/w.yml:{}:{column}", n + 1)
}

/// A mistyped `models:` with the model's path given: preflight's throw-away container is
/// refused, and the message names the path, `/models`, the input and its line; nothing is
/// started and no folder appears on the host.
#[tokio::test]
async fn a_missing_models_folder_fails_preflight_naming_the_input() {
    let host = Workspace::empty();
    let missing = host.path().join("modles");
    let yaml = server(&format!(
        "          models: {}\n          model: /models/Qwen3-8B\n",
        missing.display()
    ));
    let Some(ran) = run_with_sglang_action(&yaml).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    assert_eq!(ran.report.preflight.failed, 1, "{:#?}", ran.events);
    assert!(!ran.started("server"), "the server was started");
    let text = ran.said();
    for expected in [
        format!(
            "the host path `{}` to mount at `/models` does not exist on the Docker engine's host",
            missing.display()
        ),
        "the input `models` of the step gives it".to_string(),
        format!("mkdir -p {}", missing.display()),
        // Where the workflow gives the folder: the `models:` line of the job's step.
        "\n  --> /".to_string(),
        format!("{} (the step `server`)", place_of(&yaml, "models")),
    ] {
        assert!(text.contains(&expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!missing.exists(), "Docker created the folder");
}

/// Without a model path to look for, the step itself fails when Docker refuses the mount,
/// naming the action's input that gave the folder (`models`, `hf-cache`) or the step's own
/// `volumes` item; no folder appears on the host.
#[tokio::test]
async fn a_missing_host_folder_fails_the_step_naming_the_input() {
    let host = Workspace::empty();
    let models = host.path().join("models");
    std::fs::create_dir(&models).unwrap();
    let missing = host.path().join("hf-cahce");
    let yaml = server(&format!(
        "          models: {}\n          hf-cache: {}\n          model: Qwen/Qwen3-8B\n          command: sleep 300\n",
        models.display(),
        missing.display()
    ));
    let Some(ran) = run_with_sglang_action(&yaml).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    assert!(!ran.started("server"), "the server was started");
    let text = ran.said();
    for expected in [
        // Where the workflow uses the action, then what the action's step says.
        format!(
            "/w.yml:5:9, uses `./actions/sglang-server`): could not start container `server`: the host path `{}` to mount at `/root/.cache/huggingface` does not exist on the Docker engine's host",
            missing.display()
        ),
        "; the action's input `hf-cache` gives it (help: create it on that host".to_string(),
        format!("mkdir -p {}", missing.display()),
    ] {
        assert!(text.contains(&expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!missing.exists(), "Docker created the folder");

    let missing = host.path().join("data");
    let yaml = format!(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - uses: start-container\n        with: {{ name: box, image: {BASE}, command: sleep 300, volumes: ['{}:/data:ro'] }}\n",
        missing.display()
    );
    let Some(ran) = run_with_sglang_action(&yaml).await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    let text = ran.said();
    for expected in [
        format!(
            "could not start container `box`: the host path `{}` to mount at `/data` does not exist on the Docker engine's host",
            missing.display()
        ),
        format!(
            "; the step's `volumes` gives it as `{}:/data:ro` (help: ",
            missing.display()
        ),
    ] {
        assert!(text.contains(&expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!missing.exists(), "Docker created the folder");
}
