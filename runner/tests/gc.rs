//! `gpuflow gc` against the real engine, with the Docker harness of docker.rs (its run labels,
//! awaited clean-up and the rule that a missing engine fails under `CI`).
//!
//! These tests sweep what dead runners of this machine left, which another sweeping test
//! (`docker::sweep…`) also does: .config/nextest.toml runs them one at a time. `--all-runs` is
//! exercised with `--dry-run` only: really removing every gpuflow container would take those
//! of Docker tests running at the same time.

use gpuflow::backend::Owner;

use crate::support::docker::{base_spec, raw_docker, with_docker};
use crate::support::{Workspace, gpuflow};

/// `gpuflow gc ARGS` in an empty folder: (exit code, stdout, stderr).
fn gpuflow_gc(args: &[&str]) -> (i32, String, String) {
    let out = gpuflow().in_scratch_folder().arg("gc").args(args).output();
    (out.code().unwrap(), out.stdout, out.stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_removes_what_dead_runners_left_and_says_what() {
    with_docker("gc", |t| async move {
        let dead = crate::support::docker::dead_owner();
        let orphaned_by = t.backend.clone().with_owner(dead);
        let mut spec = base_spec(&["sleep", "300"]);
        let name = format!("gpuflow-test-gc-{}", std::process::id());
        spec.name = Some(name.clone());
        let orphan = orphaned_by.start_container(&t.run, &spec).await.unwrap();
        let network = format!("gpuflow-test-gc-net-{}", std::process::id());
        orphaned_by.create_network(&t.run, &network).await.unwrap();
        let alive = t.start(&["sleep", "300"]).await;

        // A dry run lists them and removes nothing.
        let (code, stdout, stderr) = gpuflow_gc(&["--dry-run"]);
        assert_eq!(code, 0, "{stderr}");
        let expected = format!(
            "would remove container `{name}` (run `{}`, job `gc`, runner pid 4194305 on `{}`)",
            t.run.run_id,
            Owner::current().host
        );
        assert!(stdout.contains(&expected), "{stdout}");
        assert!(
            raw_docker()
                .await
                .inspect_container(&orphan.id, None)
                .await
                .is_ok()
        );

        let (code, stdout, stderr) = gpuflow_gc(&[]);
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout.contains(&format!("removed container `{name}` (run `")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("removed network `{network}` (run `")),
            "{stdout}"
        );
        assert!(stdout.contains("on `local`"), "{stdout}");
        assert!(!stdout.contains(&alive.id), "{stdout}");
        let docker = raw_docker().await;
        assert!(
            docker.inspect_container(&orphan.id, None).await.is_err(),
            "the orphan survived"
        );
        assert!(
            docker.inspect_network(&network, None).await.is_err(),
            "the network survived"
        );
        // The live runner's container is left alone.
        assert!(docker.inspect_container(&alive.id, None).await.is_ok());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_all_runs_dry_run_lists_live_runs_too() {
    with_docker("gc-all", |t| async move {
        let alive = t.start(&["sleep", "300"]).await;
        let container_name = raw_docker()
            .await
            .inspect_container(&alive.id, None)
            .await
            .unwrap()
            .name
            .unwrap();
        let (code, stdout, stderr) = gpuflow_gc(&["--all-runs", "--dry-run"]);
        assert_eq!(code, 0, "{stderr}");
        let line = format!(
            "would remove container `{}` (run `{}`, job `gc-all`",
            container_name.trim_start_matches('/'),
            t.run.run_id
        );
        assert!(stdout.contains(&line), "{stdout}");
        assert!(t.backend.inspect_state(&alive.id).await.unwrap().running);
    })
    .await;
}

/// A sweep run from another PID namespace cannot see this test process (the owner of the
/// container below), as on a node with `hidepid=2` or a runner in a container: the owner's
/// runner lock, not its pid, decides, and a live run's container stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_from_another_pid_namespace_leaves_a_live_runs_containers_alone() {
    with_docker("gc-pidns", |t| async move {
        let alive = t.start(&["sleep", "300"]).await;
        let dir = Workspace::empty();
        let out = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc"])
            .arg(env!("CARGO_BIN_EXE_gpuflow"))
            .arg("gc")
            .current_dir(dir.path())
            .env_remove("GPUFLOW_CONFIG")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "`unshare --pid --fork --mount-proc gpuflow gc` (needs root): {stdout}{stderr}"
        );
        assert!(
            !stdout.contains(&t.run.run_id),
            "the live run's container was removed: {stdout}"
        );
        let docker = raw_docker().await;
        assert!(
            docker.inspect_container(&alive.id, None).await.is_ok(),
            "the live run's container is gone"
        );
    })
    .await;
}
