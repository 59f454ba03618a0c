//! `make bench`: from `git push` returning to the triggered run starting, with gpuflow's
//! `post-receive` hook on a bare "GPU node" repository pushed to over `file://`. Goal: ≤ 1 s.
//!
//! Baseline, measured in the same run: the same `git push` to a bare repository without hooks.
//! Printed: that push, the hooked push (what the hook adds before git returns), and the time
//! from the hooked push returning to (a) the worker taking the run from the queue and (b) the
//! run's `gpuflow run` having started (its first line, `run <id> of ...`, written), each as a median and
//! as a ratio to the bare push. The first push also starts the worker (cold); it is reported
//! apart. Host-only: no Docker needed. `GPUFLOW_BENCH_RUNS` (default 5) sets the pushes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gpuflow::trigger::{GpuflowHome, Queue, RunState};

const GPUFLOW: &str = env!("CARGO_BIN_EXE_gpuflow");

fn main() {
    let runs: usize = std::env::var("GPUFLOW_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let root = dir.path();
    let home = GpuflowHome::at(root.join("home"));
    git(root, &["init", "-q", "--bare", "node.git"]);
    git(root, &["init", "-q", "--bare", "plain.git"]);
    git(root, &["init", "-q", "-b", "main", "dev"]);
    let dev = root.join("dev");
    git(&dev, &["config", "user.email", "bench@example.com"]);
    git(&dev, &["config", "user.name", "bench"]);
    for name in ["node", "plain"] {
        let url = format!("file://{}", root.join(format!("{name}.git")).display());
        git(&dev, &["remote", "add", name, &url]);
    }
    std::fs::create_dir_all(dev.join("workflows")).unwrap();
    std::fs::write(
        dev.join("workflows/bench.yml"),
        "on:\n  push:\n    paths: ['configs/**']\njobs:\n  a:\n    steps:\n      - run: 'true'\n",
    )
    .unwrap();
    let status = Command::new(GPUFLOW)
        .args(["hooks", "install", "--repo"])
        .arg(root.join("node.git"))
        .env("GPUFLOW_HOME", &home.dir)
        .status()
        .unwrap();
    assert!(status.success(), "gpuflow hooks install failed");

    let mut bare_push = Vec::new();
    let mut hooked_push = Vec::new();
    let mut to_claim = Vec::new();
    let mut to_started = Vec::new();
    let mut cold = None;
    for i in 0..=runs {
        std::fs::create_dir_all(dev.join("configs")).unwrap();
        std::fs::write(dev.join("configs/a.toml"), format!("a = {i}\n")).unwrap();
        git(&dev, &["add", "-A"]);
        git(&dev, &["commit", "-q", "-m", &format!("change {i}")]);

        bare_push.push(time(|| push(&dev, "plain", &home)));
        let (hooked, returned) = {
            let start = Instant::now();
            push(&dev, "node", &home);
            (start.elapsed(), Instant::now())
        };
        let (claimed, started) = wait_for_start(&home, returned);
        if i == 0 {
            cold = Some((hooked, claimed, started));
        } else {
            hooked_push.push(hooked);
            to_claim.push(claimed);
            to_started.push(started);
        }
    }
    if let Some(pid) = gpuflow::worker::worker_pid(&home)
        && gpuflow::worker::worker_running(&home)
    {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }

    let base = median(&mut bare_push);
    let ratio = |d: Duration| d.as_secs_f64() / base.as_secs_f64();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("triggers: {runs} pushes of a configs/ change (medians), worker already running");
    println!(
        "  git push, bare repository without hooks (baseline)   {:8.1} ms",
        ms(base)
    );
    let hooked = median(&mut hooked_push);
    println!(
        "  git push, node repository with gpuflow's hook         {:8.1} ms  ({:.2}x the baseline)",
        ms(hooked),
        ratio(hooked)
    );
    let claim = median(&mut to_claim);
    println!(
        "  push returned -> the worker took the run             {:8.1} ms  ({:.2}x the baseline)",
        ms(claim),
        ratio(claim)
    );
    let started = median(&mut to_started);
    println!(
        "  push returned -> the run started (gpuflow run)       {:8.1} ms  ({:.2}x the baseline; goal <= 1000 ms: {})",
        ms(started),
        ratio(started),
        if started <= Duration::from_secs(1) {
            "met"
        } else {
            "MISSED"
        }
    );
    if let Some((hooked, claimed, started)) = cold {
        println!(
            "  first push (starts the worker): push {:.1} ms, -> taken {:.1} ms, -> started {:.1} ms",
            ms(hooked),
            ms(claimed),
            ms(started)
        );
    }
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn push(dev: &Path, remote: &str, home: &GpuflowHome) {
    let out = Command::new("git")
        .args(["push", "-q", remote, "HEAD:refs/heads/main"])
        .current_dir(dev)
        .env("GPUFLOW_HOME", &home.dir)
        .env("GPUFLOW_WORKER_IDLE_EXIT", "60s")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git push {remote}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// From `since` to the newest run being taken by the worker, and to its run starting;
/// then waits for it to end, so the next push finds an idle worker.
fn wait_for_start(home: &GpuflowHome, since: Instant) -> (Duration, Duration) {
    let queue = Queue::open(&home.queue()).unwrap();
    let deadline = since + Duration::from_secs(60);
    let newest = || queue.list(1).unwrap().pop().expect("the push queued a run");
    let mut claimed = None;
    let log_dir: PathBuf;
    loop {
        let run = newest();
        if claimed.is_none() && run.state != RunState::Queued {
            claimed = Some(since.elapsed());
        }
        // `gpuflow run --plain` says `run <id> of ...` as its run starts (stdout is
        // line-buffered: the line is in the file at that moment).
        let output = run.log_dir.join("output.log");
        if std::fs::read_to_string(&output).is_ok_and(|t| t.starts_with("run ")) {
            log_dir = run.log_dir;
            break;
        }
        assert!(Instant::now() < deadline, "the run never started: {run:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    let started = since.elapsed();
    while !newest().state.is_final() {
        assert!(
            Instant::now() < deadline,
            "the run never ended ({})",
            log_dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (claimed.unwrap_or(started), started)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}
