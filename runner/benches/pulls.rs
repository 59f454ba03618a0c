//! `make bench`: pulling a 1.1 GiB image of four layers through gpuflow, beside `docker pull`
//! of the same image from the same registry (Debian's `docker-registry` on 127.0.0.1, started
//! here), measured in the same run, turn about.
//!
//! Goal: gpuflow's pull (from its first progress to the image on the engine, as its
//! `image_pull` events time it) within 1.05× of `docker pull`'s wall time; and the run's other
//! work going on during the pull: a second job's preflight check (a `--help` that takes 4 s, in
//! a throw-away container of another image) runs beside it, so preflight as a whole takes about
//! the pull's time, not the pull's plus the check's.
//!
//! Needs the engine, `gpuflow-base:test` (`make test-images`) and `docker-registry`
//! (`make test-deps`).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const GPUFLOW: &str = env!("CARGO_BIN_EXE_gpuflow");
const BASE: &str = "gpuflow-base:test";
const LAYERS_MIB: [u64; 4] = [288; 4];
const ROUNDS: usize = 3;
const GOAL: f64 = 1.05;
/// How long the other job's check takes (its `--help` sleeps this long).
const CHECK_SECS: f64 = 4.0;

fn main() {
    let registry = Registry::start();
    let image = registry.push_unique("bench-pull:1");
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("w.yml"), workflow(&image)).unwrap();
    let mut docker_times = Vec::new();
    let mut gpuflow_times = Vec::new();
    let mut overlaps = Vec::new();
    for round in 1..=ROUNDS {
        remove_local(&image);
        let t = Instant::now();
        docker(&["pull", "--quiet", &image]);
        docker_times.push(t.elapsed().as_secs_f64());
        remove_local(&image);
        let run = run_gpuflow(workspace.path());
        println!(
            "round {round}: docker pull {:.2}s, gpuflow's pull {:.2}s (run {:.2}s, preflight {:.2}s, the other job's check told at {:.2}s of the pull)",
            docker_times.last().unwrap(),
            run.pull,
            run.total,
            run.preflight,
            run.check_end_in_pull
        );
        gpuflow_times.push(run.pull);
        overlaps.push(run);
    }
    remove_local(&image);
    let docker_median = median(&docker_times);
    let gpuflow_median = median(&gpuflow_times);
    let ratio = gpuflow_median / docker_median;
    println!(
        "\npull of {} MiB in {} layers from a registry on 127.0.0.1 (median of {ROUNDS}):",
        LAYERS_MIB.iter().sum::<u64>(),
        LAYERS_MIB.len()
    );
    println!("  docker pull        {docker_median:.2}s");
    println!(
        "  gpuflow's pull     {gpuflow_median:.2}s  = {ratio:.3}x docker pull (goal <= {GOAL}x): {}",
        verdict(ratio <= GOAL)
    );
    // Overlap shows in preflight's length: the pull's time, not the pull's plus the check's.
    let overlapped = overlaps
        .iter()
        .all(|r| r.preflight < r.pull + CHECK_SECS / 2.0);
    let preflight = median(&overlaps.iter().map(|r| r.preflight).collect::<Vec<_>>());
    println!(
        "  other work beside the pull: preflight {preflight:.2}s for a {gpuflow_median:.2}s pull and a {CHECK_SECS} s check of another job (the check hidden in the pull in every round): {}",
        verdict(overlapped)
    );
}

fn verdict(met: bool) -> &'static str {
    if met { "MET" } else { "NOT MET" }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Two jobs: one starts a container of `image` (preflight pulls it), the other checks a
/// program whose `--help` takes 4 s in a throw-away container of the base image.
fn workflow(image: &str) -> String {
    format!(
        r#"on: workflow_dispatch
jobs:
  pull:
    steps:
      - uses: start-container
        with:
          name: c
          image: {image}
          command: "true"
  other:
    steps:
      - uses: start-container
        with:
          name: box
          image: {BASE}
          command: sleep 30
      - uses: check-cli-interface
        with:
          container: box
          command: "sh -c 'sleep 4; printf \"usage: prog [--port PORT]\\n\\noptions:\\n  --port PORT  the port\\n\"' prog"
          args: --port 1
"#
    )
}

/// One gpuflow run's times, in seconds.
struct Run {
    total: f64,
    preflight: f64,
    /// The pull's own time: its last `image_pull` event's `elapsed`.
    pull: f64,
    /// When the other job's check ended, counted from the pull's start.
    check_end_in_pull: f64,
}

fn run_gpuflow(workspace: &Path) -> Run {
    let t = Instant::now();
    let out = Command::new(GPUFLOW)
        .args(["run", "--json", "w.yml"])
        .current_dir(workspace)
        .output()
        .expect("gpuflow runs");
    let total = t.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // Events carry the run's clock in `elapsed`, but `image_pull` replaces it with the pull's
    // own: its start on the run's clock is the event before its first.
    let mut pull_start = None;
    let mut pull = 0.0;
    let mut check_end = None;
    let mut preflight = 0.0;
    let mut last_run_clock = 0.0;
    for e in &events {
        match e["type"].as_str() {
            Some("image_pull") => {
                pull_start.get_or_insert(last_run_clock);
                if e["finished"] == true {
                    pull = e["elapsed"].as_f64().unwrap();
                }
            }
            Some("preflight_check") if e["job"]["job"] == "other" => {
                check_end = e["elapsed"].as_f64();
            }
            Some("preflight_finished") => preflight = e["duration"].as_f64().unwrap(),
            _ => {}
        }
        if e["type"] != "image_pull" {
            last_run_clock = e["elapsed"].as_f64().unwrap_or(last_run_clock);
        }
    }
    let start = pull_start.expect("the image was pulled");
    Run {
        total,
        preflight,
        pull,
        check_end_in_pull: check_end.expect("the other job's check ran") - start,
    }
}

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn remove_local(image: &str) {
    let _ = Command::new("docker")
        .args(["image", "rm", "--force", image])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Debian's `docker-registry` on a free port of 127.0.0.1, its storage in a folder of its own.
struct Registry {
    dir: tempfile::TempDir,
    port: u16,
    child: Child,
}

impl Registry {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("storage").display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let child = Command::new("docker-registry")
            .args(["serve", config_path.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry runs: `make test-deps` installs it");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the registry did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Self { dir, port, child }
    }

    /// Builds an image only this bench has (random layers on the base image), pushes it as
    /// `repo_tag` and removes it from the engine; its reference in the registry.
    fn push_unique(&self, repo_tag: &str) -> String {
        let remote = format!("127.0.0.1:{}/{repo_tag}", self.port);
        let mut dockerfile = format!("FROM {BASE}\nRUN echo {:?} >/nonce\n", self.dir.path());
        for (i, mib) in LAYERS_MIB.iter().enumerate() {
            dockerfile.push_str(&format!(
                "RUN head -c {} /dev/urandom >/layer-{i}\n",
                mib << 20
            ));
        }
        let mut build = Command::new("docker")
            .args(["build", "--quiet", "--tag", &remote, "-"])
            .env("DOCKER_BUILDKIT", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write;
        build
            .stdin
            .take()
            .unwrap()
            .write_all(dockerfile.as_bytes())
            .unwrap();
        assert!(build.wait().unwrap().success(), "building {remote}");
        docker(&["push", "--quiet", &remote]);
        remove_local(&remote);
        remote
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
