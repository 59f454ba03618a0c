//! GPUs as a resource (docs/gpus.md) on the shipped stand-in inventory, an 8-GPU PCIe node:
//! `gpuflow hosts` with and without GPUs, leases between concurrent `gpuflow run` processes
//! (and a SIGKILLed holder freeing its GPUs), and matrix cells on a Docker engine that accepts
//! NVIDIA device requests.
//!
//! This machine has no GPU and its engine no NVIDIA runtime, so a container with a GPU
//! `DeviceRequest` cannot start on it. The engine test starts its own second `dockerd` with a
//! stand-in `nvidia-container-runtime-hook` first in its PATH: dockerd 20.10 registers its
//! `nvidia` device driver when that binary is there at start, and the stand-in (a script that
//! exits 0) stands in for the NVIDIA Container Toolkit, which would mount the devices. The
//! containers really start with the requested device ids; the test reads them back with
//! `docker inspect`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuflow::backend::{DockerBackend, Endpoint};
use gpuflow::engine::{CollectSink, Engines, EventKind, JobResult, RunOptions};
use gpuflow::gpu::{Discovery, HostGpus, LeaseDir};
use tokio_util::sync::CancellationToken;

use crate::support::docker::connect_or_skip;
use crate::support::engine::prepare;
use crate::support::{self, Running, Workspace, command::Gpuflow, wait_until};

fn stand_in() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stand-in-8gpu-pcie.toml")
}

/// `gpuflow` with the developer's `DOCKER_HOST` kept out (it would change host `local`).
fn gpuflow() -> Gpuflow {
    support::gpuflow().without_docker_host()
}

#[test]
fn hosts_on_a_machine_without_gpus_says_so_and_exits_0() {
    let dir = Workspace::empty();
    let out = gpuflow().arg("hosts").current_dir(dir.path()).output();
    let stdout = &out.stdout;
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    // NVML cannot load here: said in words, not as an error.
    assert!(
        stdout.contains("\nlocal: no GPU: no NVIDIA driver library"),
        "{stdout}"
    );
    let json = gpuflow()
        .args(["hosts", "--json"])
        .current_dir(dir.path())
        .output();
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let inventory = &json["hosts"][0]["inventory"];
    assert_eq!(inventory["source"]["kind"], "none");
    assert_eq!(inventory["gpus"], serde_json::json!([]));
}

#[test]
fn hosts_shows_a_stand_in_inventory_with_its_topology_and_leases() {
    let dir = Workspace::empty();
    let leases = dir.path().join("leases");
    std::fs::write(
        dir.path().join("gpuflow.toml"),
        format!(
            "[hosts.ci]\nendpoint = \"tcp://127.0.0.1:9\"\nlabels = [\"8gpu\"]\ngpu-inventory = \"{}\"\n",
            stand_in().display()
        ),
    )
    .unwrap();
    // Another holder (this test) has GPU 3.
    let held = LeaseDir::at(&leases, "tcp://127.0.0.1:9")
        .try_lease(
            &["GPU-5a1d0000-0000-4000-8000-000000000003".to_string()],
            "pid 1, run held-by-test",
        )
        .unwrap()
        .unwrap();
    let out = gpuflow()
        .args(["hosts", "--config"])
        .arg(dir.path().join("gpuflow.toml"))
        .env("GPUFLOW_LEASE_DIR", &leases)
        .output();
    let stdout = &out.stdout;
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let ci_row = stdout.lines().find(|l| l.starts_with("ci ")).unwrap();
    assert!(ci_row.ends_with("8 stand-in"), "{stdout}");
    assert!(
        stdout.contains("ci: 8 GPUs from STAND-IN inventory file"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "topology: 8 GPUs; NVLink: none; PCIe switches: {0,1,2,3} {4,5,6,7}; NUMA 0: 0,1,2,3; 1: 4,5,6,7 (stand-in)"
        ),
        "{stdout}"
    );
    let gpu3 = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("3 "))
        .unwrap();
    assert!(gpu3.ends_with("pid 1, run held-by-test"), "{stdout}");
    drop(held);
}

#[test]
fn a_broken_stand_in_file_is_reported_in_the_host_file_and_in_itself() {
    let dir = Workspace::empty();
    std::fs::write(
        dir.path().join("inv.toml"),
        "model = \"X\"\n[[gpus]]\nindex = 0\npcie = 1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("gpuflow.toml"),
        "[hosts.ci]\nendpoint = \"tcp://127.0.0.1:9\"\ngpu-inventory = \"inv.toml\"\n",
    )
    .unwrap();
    let out = gpuflow()
        .args(["hosts", "--config"])
        .arg(dir.path().join("gpuflow.toml"))
        .output();
    let stderr = &out.stderr;
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the stand-in GPU inventory `inv.toml` cannot be used"),
        "{stderr}"
    );
    assert!(stderr.contains("gpuflow.toml:3:17"), "{stderr}");
    assert!(stderr.contains("inv.toml:4:1"), "{stderr}");
    assert!(stderr.contains("unknown key `pcie`"), "{stderr}");
}

/// A stand-in file with several problems: each one with its `file:line:col` (docs/gpus.md),
/// whether the file is named by `gpuflow.toml` or by `GPUFLOW_GPU_INVENTORY`, and not just the
/// first one, or one plain line.
#[test]
fn every_problem_of_a_stand_in_file_is_reported_at_its_place() {
    let dir = Workspace::empty();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(
        dir.path().join("inv.toml"),
        "model = \"X\"\n[[gpus]]\nindex = 0\npcie = 1\n[[gpus]]\nindex = 0\nmig = \"yes\"\n",
    )
    .unwrap();
    let expect = |stderr: &str| {
        for (at, what) in [
            ("inv.toml:4:1", "unknown key `pcie`"),
            ("inv.toml:7:7", "`mig` must be `true` or `false`"),
            ("inv.toml:5:1", "two GPUs have index `0`"),
        ] {
            assert!(
                stderr.contains(&format!("error: {what}")),
                "{what}: {stderr}"
            );
            // The path is as the host file or the variable names it, then `:line:col`.
            assert!(stderr.contains(&format!("{at}\n")), "{at}: {stderr}");
        }
        assert!(
            stderr.contains("cannot be used: 3 problems in it, each reported at its place"),
            "{stderr}"
        );
    };

    std::fs::write(
        dir.path().join("gpuflow.toml"),
        "[hosts.ci]\nendpoint = \"tcp://127.0.0.1:9\"\ngpu-inventory = \"inv.toml\"\n",
    )
    .unwrap();
    let out = gpuflow().args(["hosts"]).current_dir(dir.path()).output();
    let stderr = &out.stderr;
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    expect(stderr);
    assert!(stderr.contains("gpuflow.toml:3:17"), "{stderr}");
    std::fs::remove_file(dir.path().join("gpuflow.toml")).unwrap();

    for args in [&["hosts"][..], &["run", "--plain", "w.yml"][..]] {
        std::fs::write(
            dir.path().join("w.yml"),
            "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: touch started\n",
        )
        .unwrap();
        let out = gpuflow()
            .args(args)
            .current_dir(dir.path())
            .env(gpuflow::gpu::STAND_IN_ENV, "inv.toml")
            .output();
        let stderr = &out.stderr;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        expect(stderr);
        assert!(
            stderr.contains("(set by GPUFLOW_GPU_INVENTORY)"),
            "{args:?}: {stderr}"
        );
        assert!(!dir.path().join("started").exists(), "{args:?}");
    }
}

/// A `gpuflow run` process of a one-job workflow asking for `gpus` GPUs, whose script writes
/// its `CUDA_VISIBLE_DEVICES` to `out-NAME` and, when `hold`, then sleeps (writing the sleeper's
/// pid to `pid-NAME`). Its stdout goes to `log-NAME`.
fn start_run(dir: &Path, leases: &Path, name: &str, gpus: u32, hold: bool) -> Running {
    let sub = dir.join(name);
    std::fs::create_dir_all(sub.join(".git")).unwrap();
    let hold = if hold {
        format!("echo $$ > {0}/pid-{name}; exec sleep 60", dir.display())
    } else {
        String::new()
    };
    std::fs::write(
        sub.join("w.yml"),
        format!(
            "on: workflow_dispatch\njobs:\n  hold:\n    gpus: {gpus}\n    steps:\n      - run: |\n          echo \"$CUDA_VISIBLE_DEVICES\" > {0}/out-{name}.tmp\n          mv {0}/out-{name}.tmp {0}/out-{name}\n          {hold}\n",
            dir.display()
        ),
    )
    .unwrap();
    let child = gpuflow()
        .args(["run", "w.yml", "--plain"])
        .current_dir(&sub)
        .env(gpuflow::gpu::STAND_IN_ENV, stand_in())
        .env("GPUFLOW_LEASE_DIR", leases)
        .into_std()
        .stdout(std::fs::File::create(dir.join(format!("log-{name}"))).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Running::new(child)
}

fn wait_for(what: &str, done: impl FnMut() -> bool) {
    wait_until(what, Duration::from_secs(30), done);
}

fn set(path: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .split(',')
        .map(String::from)
        .collect();
    v.sort();
    v
}

/// Kills what a test started on every path, also when an assertion fails (the runs
/// themselves, when dropped; the sleepers they left, by their pid files).
struct Reaper {
    children: Vec<Running>,
    pid_files: Vec<PathBuf>,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for f in &self.pid_files {
            if let Some(pid) = std::fs::read_to_string(f)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

#[test]
fn concurrent_runs_never_share_a_gpu_and_a_killed_runner_frees_its_gpus() {
    let dir = Workspace::empty();
    let d = dir.path();
    let leases = d.join("leases");
    let mut reaper = Reaper {
        children: Vec::new(),
        pid_files: vec![d.join("pid-a"), d.join("pid-b")],
    };
    reaper.children.push(start_run(d, &leases, "a", 4, true));
    wait_for("run a's GPUs", || d.join("out-a").exists());
    reaper.children.push(start_run(d, &leases, "b", 4, true));
    wait_for("run b's GPUs", || d.join("out-b").exists());
    let (a, b) = (set(&d.join("out-a")), set(&d.join("out-b")));
    assert_eq!(a.len(), 4);
    assert_eq!(b.len(), 4);
    assert!(
        a.iter().all(|g| !b.contains(g)),
        "{a:?} and {b:?} share a GPU"
    );

    // All eight are leased: a third run waits, and says so.
    reaper.children.push(start_run(d, &leases, "c", 4, false));
    wait_for("run c to wait", || {
        std::fs::read_to_string(d.join("log-c"))
            .is_ok_and(|l| l.contains("[hold] waiting for 4 GPUs (0 of 8 free)"))
    });
    assert!(!d.join("out-c").exists());

    // SIGKILL: no clean-up of its own, yet the kernel frees its locks.
    reaper.children[0].kill();
    wait_for("run c's GPUs", || d.join("out-c").exists());
    assert_eq!(set(&d.join("out-c")), a, "c gets exactly what a held");
    let (c_status, _) = reaper.children.remove(2).wait();
    assert!(c_status.success());
    let log_c = std::fs::read_to_string(d.join("log-c")).unwrap();
    assert!(log_c.contains("[hold] GPUs leased: "), "{log_c}");
    assert!(log_c.contains("(stand-in)"), "{log_c}");
}

/// A second Docker engine of this machine whose `nvidia` device driver is registered (by a
/// stand-in `nvidia-container-runtime-hook`), with `gpuflow-base:test` loaded. Stopped, and its
/// folders removed, when dropped.
struct NvidiaEngine {
    dockerd: Child,
    dir: tempfile::TempDir,
    socket: PathBuf,
}

impl NvidiaEngine {
    async fn start() -> Self {
        // Short: a unix socket path has at most 107 bytes.
        let dir = tempfile::Builder::new()
            .prefix("gf-nv-")
            .tempdir_in("/tmp")
            .unwrap();
        let d = dir.path();
        let bin = d.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let hook = bin.join("nvidia-container-runtime-hook");
        std::fs::write(
            &hook,
            "#!/bin/sh\n# Stands in for the NVIDIA Container Toolkit's hook: it would mount the GPUs.\nexit 0\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Empty: the machine's /etc/docker/daemon.json names the main engine's data root.
        std::fs::write(d.join("daemon.json"), "{}").unwrap();
        let socket = d.join("docker.sock");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let namespace = format!("gpuflow-test-{}", std::process::id());
        // Its own network namespace: a dockerd started with `--bridge=none` deletes the host's
        // `docker0` bridge at start, which would break the machine's main engine.
        let dockerd = Command::new("unshare")
            .args(["--net", "--", "dockerd"])
            .arg("--config-file")
            .arg(d.join("daemon.json"))
            .arg("--data-root")
            .arg(d.join("data"))
            .arg("--exec-root")
            .arg(d.join("exec"))
            .arg("--pidfile")
            .arg(d.join("dockerd.pid"))
            .arg("--host")
            .arg(format!("unix://{}", socket.display()))
            .args(["--iptables=false", "--bridge=none", "--storage-driver=vfs"])
            .arg("--containerd-namespace")
            .arg(&namespace)
            .arg("--containerd-plugins-namespace")
            .arg(format!("{namespace}-plugins"))
            .env("PATH", path)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("dockerd.log")).unwrap())
            .spawn()
            .expect("unshare (util-linux) and dockerd (Debian's docker.io) are installed");
        let engine = Self {
            dockerd,
            dir,
            socket,
        };
        let until = Instant::now() + Duration::from_secs(60);
        while DockerBackend::connect(engine.endpoint()).await.is_err() {
            assert!(
                Instant::now() < until,
                "the second dockerd did not answer: {}",
                std::fs::read_to_string(engine.dir.path().join("dockerd.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let loaded = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "docker save gpuflow-base:test | docker -H unix://{} load",
                engine.socket.display()
            ))
            .output()
            .unwrap();
        assert!(
            loaded.status.success(),
            "loading the test image: {}",
            String::from_utf8_lossy(&loaded.stderr)
        );
        engine
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::Unix(self.socket.clone())
    }
}

impl Drop for NvidiaEngine {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.dockerd);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if matches!(self.dockerd.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.dockerd.kill();
        let _ = self.dockerd.wait();
        // The TempDir removes the data and exec roots.
    }
}

const MATRIX: &str = r"
on: workflow_dispatch
jobs:
  cell:
    gpus: 2
    strategy:
      matrix:
        n: [1, 2, 3, 4, 5, 6, 7, 8]
    steps:
      # NVIDIA's recommended `memlock: -1` (start-container's default with GPUs) cannot be
      # set in this sandbox (no CAP_SYS_RESOURCE): its own limit, 8 MiB, is asked instead.
      - uses: start-container
        with:
          name: server
          image: gpuflow-base:test
          command: sleep 60
          ulimits: { memlock: 8388608 }
          # Each cell its own container on its own GPUs, side by side (not one server shared
          # by the cells one after another, docs/campaigns.md).
          reuse: false
      - run: sleep 1
";

#[tokio::test]
async fn nvidia_engine_runs_eight_two_gpu_cells_four_at_a_time_on_disjoint_devices() {
    // The main engine must be there (it has the test image); CI never skips.
    let Some(main) = connect_or_skip().await else {
        return;
    };
    assert!(main.has_image("gpuflow-base:test").await.unwrap());
    let engine = NvidiaEngine::start().await;
    let docker = DockerBackend::connect(engine.endpoint()).await.unwrap();
    let (dir, wf, plan) = prepare(MATRIX, &[]);
    let run_id = format!("test-gpus-{}", gpuflow::engine::new_run_id());
    let mut opts = RunOptions::new(&run_id, dir.path());
    opts.grace = Duration::from_secs(1);
    // Kept, so their DeviceRequests can be read after the run; removed below.
    opts.keep_containers = true;
    let mut engines = Engines::single("gpu-node", docker.clone());
    engines.set_gpus(
        "gpu-node",
        HostGpus::new(
            Discovery::StandIn(stand_in()),
            LeaseDir::at(&dir.path().join("leases"), "gpu-node"),
        ),
    );
    let collect = CollectSink::new();
    let report = gpuflow::engine::run(
        Arc::new(*wf),
        plan,
        opts,
        Arc::new(collect.clone()),
        engines,
        CancellationToken::new(),
    )
    .await
    .unwrap();

    let raw = bollard::Docker::connect_with_unix(
        &engine.socket.display().to_string(),
        30,
        bollard::API_DEFAULT_VERSION,
    )
    .unwrap()
    .negotiate_version()
    .await
    .unwrap();
    // Per cell: when it ran, and the device ids its container was created with.
    let mut cells: Vec<(usize, Duration, Duration, Vec<String>)> = Vec::new();
    let events = collect.events();
    for e in &events {
        if let EventKind::ContainerStarted { job, id, .. } = &e.kind {
            let info = raw.inspect_container(id, None).await.unwrap();
            let requests = info.host_config.unwrap().device_requests.unwrap();
            assert_eq!(requests.len(), 1);
            assert_eq!(requests[0].driver.as_deref(), Some("nvidia"));
            let ids = requests[0].device_ids.clone().unwrap();
            let started = events
                .iter()
                .find_map(|e| match &e.kind {
                    EventKind::JobStarted { job: j } if j == job => Some(e.elapsed),
                    _ => None,
                })
                .unwrap();
            let finished = events
                .iter()
                .find_map(|e| match &e.kind {
                    EventKind::JobFinished { job: j, .. } if j == job => Some(e.elapsed),
                    _ => None,
                })
                .unwrap();
            cells.push((job.cell, started, finished, ids));
        }
    }
    let removed = docker.remove_run(&run_id).await;
    assert_eq!(report.result, JobResult::Success, "{events:#?}");
    removed.unwrap();
    assert_eq!(cells.len(), 8, "one container per cell");
    for (cell, _, _, ids) in &cells {
        assert_eq!(ids.len(), 2, "cell {cell}: {ids:?}");
        assert!(ids.iter().all(|i| i.starts_with("GPU-5a1d")), "{ids:?}");
    }
    // Cells that ran at the same time never share a device.
    for a in &cells {
        for b in &cells {
            let overlap = a.1 < b.2 && b.1 < a.2;
            if a.0 != b.0 && overlap {
                assert!(
                    a.3.iter().all(|g| !b.3.contains(g)),
                    "cells {} and {} ran together on {:?} and {:?}",
                    a.0,
                    b.0,
                    a.3,
                    b.3
                );
            }
        }
    }
    // Four at a time: 8 GPUs / 2 each. Counted at each start.
    let most = cells
        .iter()
        .map(|a| cells.iter().filter(|b| b.1 <= a.1 && a.1 < b.2).count())
        .max()
        .unwrap();
    assert_eq!(most, 4, "{cells:?}");
    let waited = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::JobWaiting { .. }))
        .count();
    assert_eq!(waited, 4, "the second four cells waited for GPUs");
    assert_eq!(
        docker.run_containers(&run_id).await.unwrap(),
        Vec::<String>::new()
    );
    drop(engine);
}

/// A job asking for more GPUs than its host has says once that it cannot run and why — not
/// "warning", then "skipped", then "failure" — and the run goes on with the other jobs.
#[test]
fn a_job_asking_for_more_gpus_than_the_host_has_says_once_that_it_cannot_run() {
    let dir = Workspace::empty();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(
        dir.path().join("w.yml"),
        "on: workflow_dispatch\njobs:\n  big:\n    gpus: 9\n    steps:\n      - run: touch started\n  small:\n    steps:\n      - run: echo ok\n",
    )
    .unwrap();
    let out = gpuflow()
        .args(["run", "--plain", "w.yml"])
        .current_dir(dir.path())
        .env(gpuflow::gpu::STAND_IN_ENV, stand_in())
        .env("GPUFLOW_LEASE_DIR", dir.path().join("leases"))
        .output();
    let stdout = &out.stdout;
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let big: Vec<&str> = stdout.lines().filter(|l| l.starts_with("[big]")).collect();
    assert_eq!(
        big,
        [
            "[big] cannot run: the job asks for 9 GPUs, and the host has 8 (host `local`)",
            "[big] failure in 0.0s",
        ],
        "{stdout}"
    );
    assert!(stdout.contains("[small] success"), "{stdout}");
    assert!(!dir.path().join("started").exists());

    let out = gpuflow()
        .args(["run", "--json", "w.yml"])
        .current_dir(dir.path())
        .env(gpuflow::gpu::STAND_IN_ENV, stand_in())
        .env("GPUFLOW_LEASE_DIR", dir.path().join("leases"))
        .output();
    let events: Vec<serde_json::Value> = out
        .json_lines()
        .into_iter()
        .filter(|e| e["job"]["job"] == "big")
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["job_queued", "job_cannot_run", "job_finished"]);
    assert_eq!(events[2]["result"], "failure");
}
