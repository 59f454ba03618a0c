//! GPU leases shared on one Docker engine (docs/gpus.md#leases-across-clients-of-one-engine):
//! `gpuflow run` processes with lease folders of their own (as on two laptops driving one
//! node) on this machine's engine, with `engine-leases = true` and a stand-in inventory whose
//! UUIDs are this test's own (lease containers are named after them, engine-wide).
//!
//! Each job writes the GPU it got and when it held it; no two spans of one GPU overlap. A
//! holder SIGKILLed stops its heartbeat, and its lease container is reclaimed once stale; one
//! cancelled with Ctrl-C, and every run that ends, leaves none behind.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gpuflow::backend::{
    DockerBackend, LABEL_LEASE_GPU, LABEL_MANAGED, LABEL_OWNER_HOST, LeaseState, Owner,
};
use gpuflow::gpu::engine_lease::{EngineLeases, Holder, STALE_ENV, container_name};

use crate::support::docker::{dead_owner, raw_docker};
use crate::support::images::{BASE, docker_with};
use crate::support::{self, Running, Signal, Workspace, wait_until};

/// A node of `n` stand-in GPUs with UUIDs no other test uses, its engine this machine's.
struct Node {
    dir: Workspace,
    uuids: Vec<String>,
}

impl Node {
    fn new(n: usize, lease_image: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let uuids: Vec<String> = (0..n)
            .map(|i| format!("GPU-lease-test-{}-{nanos}-{i}", std::process::id()))
            .collect();
        let dir = Workspace::empty();
        let mut inventory = "model = \"NVIDIA L40S\"\nmemory-mib = 46068\n".to_string();
        for (i, uuid) in uuids.iter().enumerate() {
            inventory.push_str(&format!("[[gpus]]\nindex = {i}\nuuid = \"{uuid}\"\n"));
        }
        std::fs::write(dir.path().join("inv.toml"), inventory).unwrap();
        std::fs::write(
            dir.path().join("gpuflow.toml"),
            format!(
                "[hosts.local]\ngpu-inventory = \"inv.toml\"\nengine-leases = true\nlease-image = \"{lease_image}\"\n"
            ),
        )
        .unwrap();
        Self { dir, uuids }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `gpuflow run` of `workflow` (written as `NAME.yml`) with a lease folder and a gpuflow
    /// home of its own (another machine: its runner locks are not this one's); its output
    /// goes to `log-NAME`.
    fn run(&self, name: &str, workflow: &str, env: &[(&str, &str)]) -> Running {
        let d = self.path();
        std::fs::write(d.join(format!("{name}.yml")), workflow).unwrap();
        support::gpuflow()
            .without_docker_host()
            .args([
                "run",
                &format!("{name}.yml"),
                "--plain",
                "--config",
                "gpuflow.toml",
            ])
            .current_dir(d)
            .env("GPUFLOW_LEASE_DIR", d.join(format!("leases-{name}")))
            .env("GPUFLOW_HOME", d.join(format!("home-{name}")))
            .envs(env.iter().copied())
            .into_std()
            .stdout(std::fs::File::create(d.join(format!("log-{name}"))).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .map(Running::new)
            .unwrap()
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(format!("log-{name}"))).unwrap_or_default()
    }

    /// The lease containers of this node's GPUs on the engine.
    fn lease_containers(&self) -> Vec<LeaseState> {
        block_on(async {
            let docker = DockerBackend::connect_local().await.unwrap();
            let all = docker.lease_containers(None).await.unwrap();
            all.into_iter()
                .filter(|c| self.uuids.iter().any(|u| u == c.gpu()))
                .collect()
        })
    }
}

impl Drop for Node {
    /// Whatever a failing test left: its lease containers, and the sleepers of its jobs.
    fn drop(&mut self) {
        let names: Vec<String> = self.uuids.iter().map(|u| container_name(u)).collect();
        block_on(async {
            if let Ok(docker) = DockerBackend::connect_local().await {
                for name in &names {
                    let _ = docker.remove_container(name).await;
                }
            }
        });
        if let Ok(entries) = std::fs::read_dir(self.path()) {
            for pid in entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("pid-"))
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .filter_map(|p| p.trim().parse::<i32>().ok())
            {
                let _ = support::process::signal(pid, Signal::KILL);
            }
        }
    }
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// The engine has the base image (the lease containers' here), or the test is skipped.
fn engine_ready() -> bool {
    block_on(docker_with(&[BASE])).is_some()
}

/// A matrix of `cells` jobs of one GPU each, every one holding it `secs` and appending
/// `UUID start end` (nanoseconds) to `spans-NAME`.
fn spans_workflow(dir: &Path, name: &str, cells: usize, secs: f64) -> String {
    let cells: Vec<String> = (1..=cells).map(|c| c.to_string()).collect();
    format!(
        "on: workflow_dispatch\njobs:\n  use:\n    gpus: 1\n    strategy:\n      matrix:\n        cell: [{}]\n    steps:\n      - run: |\n          s=$(date +%s%N); sleep {secs}; e=$(date +%s%N)\n          echo \"$CUDA_VISIBLE_DEVICES $s $e\" >> {}/spans-{name}\n",
        cells.join(", "),
        dir.display()
    )
}

/// One job holding one GPU until killed: it writes the GPU to `out-NAME` and its sleeper's pid
/// to `pid-NAME`.
fn hold_workflow(dir: &Path, name: &str) -> String {
    format!(
        "on: workflow_dispatch\njobs:\n  hold:\n    gpus: 1\n    steps:\n      - run: |\n          echo \"$CUDA_VISIBLE_DEVICES\" > {0}/out-{name}.tmp && mv {0}/out-{name}.tmp {0}/out-{name}\n          echo $$ > {0}/pid-{name}; exec sleep 120\n",
        dir.display()
    )
}

/// `(GPU, start, end)` of every span in `spans-NAME`.
fn spans(dir: &Path, name: &str) -> Vec<(String, u128, u128)> {
    std::fs::read_to_string(dir.join(format!("spans-{name}")))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn runners_with_separate_lease_folders_never_hold_one_gpu_at_once() {
    if !engine_ready() {
        return;
    }
    let node = Node::new(2, BASE);
    let d = node.path();
    // Three cells each on two GPUs: without a lease both runners share, they would start
    // all at once, two on each GPU.
    let a = node.run("a", &spans_workflow(d, "a", 3, 0.6), &[]);
    let b = node.run("b", &spans_workflow(d, "b", 3, 0.6), &[]);
    let (a_status, _) = a.wait();
    let (b_status, _) = b.wait();
    assert!(a_status.success(), "{}", node.log("a"));
    assert!(b_status.success(), "{}", node.log("b"));

    let mut all: Vec<(String, u128, u128, &str)> = Vec::new();
    for run in ["a", "b"] {
        let got = spans(d, run);
        assert_eq!(got.len(), 3, "run {run}: {got:?}");
        all.extend(got.into_iter().map(|(g, s, e)| (g, s, e, run)));
    }
    for (i, x) in all.iter().enumerate() {
        assert!(node.uuids.contains(&x.0), "{x:?}");
        for y in &all[i + 1..] {
            assert!(
                x.0 != y.0 || x.2 <= y.1 || y.2 <= x.1,
                "two jobs held {} at once: {x:?} and {y:?}",
                x.0
            );
        }
    }
    // Some job waited for a GPU the other runner held, and said so as for a busy lock file.
    let logs = node.log("a") + &node.log("b");
    assert!(logs.contains("waiting for 1 GPU ("), "{logs}");
    assert_eq!(
        node.lease_containers(),
        Vec::new(),
        "lease containers left behind"
    );
}

#[test]
fn a_killed_holders_lease_is_reclaimed_once_stale_and_shown_meanwhile() {
    if !engine_ready() {
        return;
    }
    let node = Node::new(1, BASE);
    let d = node.path();
    // Its lease container exits 3 s after its last heartbeat.
    let mut a = node.run("a", &hold_workflow(d, "a"), &[(STALE_ENV, "3")]);
    wait_until("run a's GPU", Duration::from_secs(30), || {
        d.join("out-a").exists()
    });
    let b = node.run("b", &hold_workflow(d, "b"), &[]);
    wait_until("run b to wait", Duration::from_secs(30), || {
        node.log("b")
            .contains("[hold] waiting for 1 GPU (0 of 1 free)")
    });
    // Another machine's lease folder knows nothing of run a; the engine names it.
    let hosts = support::gpuflow()
        .without_docker_host()
        .args(["hosts", "--config", "gpuflow.toml"])
        .current_dir(d)
        .env("GPUFLOW_LEASE_DIR", d.join("leases-b"))
        .success();
    let row = hosts
        .stdout
        .lines()
        .find(|l| l.contains(&node.uuids[0]))
        .unwrap_or_default()
        .to_string();
    assert!(row.contains('@'), "{}", hosts.stdout);
    assert!(
        row.contains(&format!("pid {}, run ", a.id())),
        "{}",
        hosts.stdout
    );
    // Still held a while later: its heartbeat keeps it.
    std::thread::sleep(Duration::from_secs(5));
    assert!(!d.join("out-b").exists(), "{}", node.log("b"));

    a.kill();
    wait_until("run b's GPU", Duration::from_secs(30), || {
        d.join("out-b").exists()
    });
    b.signal(Signal::INT);
    let _ = b.wait();
    assert_eq!(
        node.lease_containers(),
        Vec::new(),
        "lease containers left behind"
    );
}

#[test]
fn a_run_cancelled_with_ctrl_c_leaves_no_lease_behind() {
    if !engine_ready() {
        return;
    }
    let node = Node::new(1, BASE);
    let d = node.path();
    let a = node.run("a", &hold_workflow(d, "a"), &[]);
    wait_until("run a's GPU", Duration::from_secs(30), || {
        d.join("out-a").exists()
    });
    let held = node.lease_containers();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].status, "running");
    a.signal(Signal::INT);
    let (status, _) = a.wait();
    assert_eq!(status.code(), Some(130), "{}", node.log("a"));
    // At once, not once stale (30 s): the run removed it.
    assert_eq!(
        node.lease_containers(),
        Vec::new(),
        "lease container left behind"
    );
}

#[test]
fn a_lease_image_the_engine_lacks_fails_the_job_saying_how_to_get_it() {
    if !engine_ready() {
        return;
    }
    let node = Node::new(1, "gpuflow-no-such-image:test");
    let d = node.path();
    let (status, _) = node.run("a", &hold_workflow(d, "a"), &[]).wait();
    assert!(!status.success());
    let log = node.log("a");
    assert!(
        log.contains(
            "the GPU lease image `gpuflow-no-such-image:test` is not on the engine at `unix://"
        ),
        "{log}"
    );
    assert!(
        log.contains("docker pull gpuflow-no-such-image:test"),
        "{log}"
    );
    assert!(log.contains("`lease-image`"), "{log}");
    assert!(!d.join("out-a").exists());
    assert_eq!(node.lease_containers(), Vec::new());
}

/// The library's side: a live holder's lease is refused, a dead local runner's (its runner
/// lock free) is taken over at once, and a release leaves nothing.
#[tokio::test]
async fn a_live_lease_is_refused_and_a_dead_runners_is_taken_over() {
    let Some(docker) = docker_with(&[BASE]).await else {
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let gpu = vec![format!("GPU-lease-lib-test-{}-{nanos}", std::process::id())];
    let leases = EngineLeases::with_stale(BASE, Duration::from_secs(30));
    let holder = Holder::new("test-run", "job");

    let first = leases.try_take(&docker, &gpu, &holder).await.unwrap();
    let first = first.expect("a free GPU is taken");
    assert!(
        leases
            .try_take(&docker, &gpu, &holder)
            .await
            .unwrap()
            .is_none()
    );
    assert!(leases.held(&docker).await.unwrap().contains_key(&gpu[0]));
    first.release().await;
    assert!(node_containers(&docker, &gpu).await.is_empty());

    // Held by a runner of this machine that is gone (as after SIGKILL).
    let dead = docker.clone().with_owner(dead_owner());
    let orphan = leases
        .try_take(&dead, &gpu, &holder)
        .await
        .unwrap()
        .unwrap();
    assert!(!leases.held(&docker).await.unwrap().contains_key(&gpu[0]));
    let taken = leases.try_take(&docker, &gpu, &holder).await.unwrap();
    let taken = taken.expect("a dead runner's lease is taken over");
    // Another machine's runner: nothing says it is gone.
    let elsewhere = docker.clone().with_owner(Owner {
        host: "another-machine".into(),
        token: None,
        ..Owner::current()
    });
    assert!(
        leases
            .try_take(&elsewhere, &gpu, &holder)
            .await
            .unwrap()
            .is_none()
    );
    taken.release().await;
    orphan.release().await;
    assert!(node_containers(&docker, &gpu).await.is_empty());
}

async fn node_containers(docker: &DockerBackend, gpus: &[String]) -> Vec<LeaseState> {
    docker
        .lease_containers(None)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| gpus.iter().any(|g| g == c.gpu()))
        .collect()
}

/// `gpuflow gc` removes a lease container that holds nothing (one that exited and was not
/// removed, as after an engine restart), whoever made it, and leaves a live one.
#[tokio::test]
async fn gc_removes_lease_containers_that_hold_nothing_and_keeps_live_ones() {
    let Some(docker) = docker_with(&[BASE]).await else {
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let (dead, live) = (
        format!("GPU-lease-gc-{}-{nanos}-0", std::process::id()),
        format!("GPU-lease-gc-{}-{nanos}-1", std::process::id()),
    );
    // Made by another machine, exited, not removed.
    let raw = raw_docker().await;
    let body = bollard::models::ContainerCreateBody {
        image: Some(BASE.into()),
        cmd: Some(vec!["true".into()]),
        labels: Some(std::collections::HashMap::from([
            (LABEL_LEASE_GPU.to_string(), dead.clone()),
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_OWNER_HOST.to_string(), "another-machine".to_string()),
        ])),
        ..Default::default()
    };
    let options = bollard::query_parameters::CreateContainerOptionsBuilder::new()
        .name(&container_name(&dead))
        .build();
    let exited = raw.create_container(Some(options), body).await.unwrap().id;
    docker
        .start(&gpuflow::backend::Container {
            id: exited.clone(),
            name: None,
        })
        .await
        .unwrap();
    docker.wait_exit(&exited).await.unwrap();
    let held = EngineLeases::with_stale(BASE, Duration::from_secs(30))
        .try_take(
            &docker,
            std::slice::from_ref(&live),
            &Holder::new("test-run", "job"),
        )
        .await
        .unwrap()
        .unwrap();

    let dry = support::gpuflow()
        .without_docker_host()
        .in_scratch_folder()
        .args(["gc", "--dry-run"])
        .success();
    let listed = dry.stdout.clone();
    let removed = support::gpuflow()
        .without_docker_host()
        .in_scratch_folder()
        .arg("gc")
        .success();
    let left = node_containers(&docker, &[dead.clone(), live.clone()]).await;
    held.release().await;
    let _ = docker.remove_container(&exited).await;
    assert!(
        listed.contains(&format!(
            "would remove container `{}`",
            container_name(&dead)
        )),
        "{listed}"
    );
    assert!(!listed.contains(&live), "{listed}");
    assert!(
        removed.stdout.contains(&container_name(&dead)),
        "{}",
        removed.stdout
    );
    let left: Vec<&str> = left.iter().map(LeaseState::gpu).collect();
    assert_eq!(left, [live.as_str()]);
}
