//! The worker runs several queued runs at once (docs/triggers.md, "Several runs at once"), on
//! the shipped 8-GPU stand-in inventory with a private lease folder: runs start in queue order
//! while their GPUs fit, a large request is not overtaken by a later small one, a
//! `concurrency:` group still runs one at a time, and cancel and SIGTERM stop each run in
//! flight. The jobs are `run:` steps on the host (no Docker): each records its
//! `CUDA_VISIBLE_DEVICES` and when it started and ended.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Running, Signal, Workspace, gpuflow, poll_until, wait_until};

fn stand_in() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stand-in-8gpu-pcie.toml")
}

/// A repository whose runs are queued with `gpuflow trigger`, a private `GPUFLOW_HOME` and
/// lease folder, and a folder the jobs write their records to.
struct Host {
    repo: Workspace,
    home: Workspace,
    records: Workspace,
}

/// What one job recorded: when it started and ended (seconds since the epoch), its GPUs.
#[derive(Debug)]
struct Record {
    start: f64,
    end: f64,
    gpus: Vec<String>,
}

impl Host {
    fn new() -> Self {
        let host = Self {
            repo: Workspace::repository(),
            home: Workspace::empty(),
            records: Workspace::empty(),
        };
        host.repo.write("README.md", "hello\n");
        host
    }

    /// A workflow `name` with one job asking for `gpus` GPUs, run by pushes that touch
    /// `paths` (`**`: every push), in concurrency group `group`: it records its start and GPUs,
    /// sleeps `secs`, and records its end.
    fn workflow(&self, name: &str, gpus: u32, secs: u32, paths: &str, group: Option<&str>) {
        let record = self.records.path().join(name);
        let group = group.map_or_else(String::new, |g| format!("concurrency: {g}\n"));
        self.repo.write(
            &format!("workflows/{name}.yml"),
            &format!(
                "on:\n  push:\n    paths: ['{paths}']\n{group}jobs:\n  j:\n    gpus: {gpus}\n    steps:\n      - run: |\n          echo \"start $(date +%s.%N) $CUDA_VISIBLE_DEVICES\" >> {0}\n          sleep {secs}\n          echo \"end $(date +%s.%N)\" >> {0}\n",
                record.display()
            ),
        );
    }

    /// Queues the runs of the push `before..after` (no worker started).
    fn trigger(&self, before: &str, after: &str) {
        gpuflow()
            .current_dir(self.repo.path())
            .home(self.home.path())
            .trigger_main_push(Some(before), after)
            .arg("--no-worker")
            .success();
    }

    fn worker(&self, args: &[&str]) -> Running {
        let log = std::fs::File::create(self.home.path().join("worker.out")).unwrap();
        let child = gpuflow()
            .current_dir(self.repo.path())
            .home(self.home.path())
            .env(gpuflow::gpu::STAND_IN_ENV, stand_in())
            .env("GPUFLOW_LEASE_DIR", self.home.path().join("leases"))
            .arg("worker")
            .args(args)
            .into_std()
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Running::new(child)
    }

    fn worker_said(&self) -> String {
        std::fs::read_to_string(self.home.path().join("worker.out")).unwrap_or_default()
    }

    fn runs(&self) -> Vec<Value> {
        let out = gpuflow()
            .current_dir(self.repo.path())
            .home(self.home.path())
            .args(["runs", "--json"])
            .success();
        serde_json::from_str(&out.stdout).unwrap()
    }

    /// The runs' states, by workflow file stem, in queue order.
    fn states(&self) -> Vec<(String, String)> {
        self.runs()
            .iter()
            .map(|r| {
                let workflow = r["workflow"].as_str().unwrap();
                let stem = workflow
                    .trim_start_matches("workflows/")
                    .trim_end_matches(".yml");
                (stem.to_string(), r["state"].as_str().unwrap().to_string())
            })
            .collect()
    }

    fn record(&self, name: &str) -> Record {
        let text = std::fs::read_to_string(self.records.path().join(name))
            .unwrap_or_else(|e| panic!("run {name} recorded nothing ({e})"));
        let mut record = Record {
            start: f64::NAN,
            end: f64::NAN,
            gpus: Vec::new(),
        };
        for line in text.lines() {
            let mut words = line.split(' ');
            match (words.next(), words.next()) {
                (Some("start"), Some(t)) => {
                    record.start = t.parse().unwrap();
                    record.gpus = words
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .filter(|g| !g.is_empty())
                        .map(String::from)
                        .collect();
                }
                (Some("end"), Some(t)) => record.end = t.parse().unwrap(),
                _ => panic!("run {name}: unexpected record {line:?}"),
            }
        }
        record
    }

    /// Waits for the worker to leave (it was started with `--idle-exit`); its exit code.
    fn wait_for_exit(&self, worker: Running) -> Option<i32> {
        let mut worker = worker;
        wait_until(
            "the worker to finish the queue",
            Duration::from_secs(120),
            || worker.try_wait().is_some(),
        );
        let (status, stderr) = worker.wait();
        assert!(stderr.is_empty() || status.success(), "{stderr}");
        status.code()
    }
}

const ZERO: &str = "0000000000000000000000000000000000000000";

#[test]
fn four_two_gpu_runs_overlap_on_disjoint_gpus_and_a_large_one_is_not_overtaken() {
    let host = Host::new();
    // a1 ends first: two GPUs free while b-all waits for eight, which c-small would take
    // if it could jump the queue.
    host.workflow("a1", 2, 3, "**", None);
    for name in ["a2", "a3", "a4"] {
        host.workflow(name, 2, 5, "**", None);
    }
    // Queued after the four (files are read in name order): all eight GPUs, then one.
    host.workflow("b-all", 8, 1, "**", None);
    host.workflow("c-small", 1, 1, "**", None);
    let sha = host.repo.commit("workflows");
    host.trigger(ZERO, &sha);
    let worker = host.worker(&["--idle-exit", "1s"]);
    assert_eq!(
        host.wait_for_exit(worker),
        Some(0),
        "{}",
        host.worker_said()
    );
    let said = host.worker_said();
    assert!(
        host.states().iter().all(|(_, state)| state == "success"),
        "{:?}\n{said}",
        host.states()
    );

    let small: Vec<Record> = ["a1", "a2", "a3", "a4"].map(|n| host.record(n)).into();
    let last_start = small.iter().map(|r| r.start).fold(f64::MIN, f64::max);
    let first_end = small.iter().map(|r| r.end).fold(f64::MAX, f64::min);
    assert!(
        last_start < first_end,
        "the four 2-GPU runs did not all run at once: {small:#?}\n{said}"
    );
    let mut gpus: Vec<&String> = small.iter().flat_map(|r| &r.gpus).collect();
    assert!(small.iter().all(|r| r.gpus.len() == 2), "{small:#?}");
    gpus.sort();
    gpus.dedup();
    assert_eq!(gpus.len(), 8, "the runs shared GPUs: {small:#?}");

    let all = host.record("b-all");
    let last_end = small.iter().map(|r| r.end).fold(f64::MIN, f64::max);
    assert_eq!(all.gpus.len(), 8, "{all:?}");
    assert!(
        all.start >= last_end,
        "{all:?} started before {small:#?} ended"
    );
    let later = host.record("c-small");
    assert!(
        later.start >= all.end,
        "the later 1-GPU run overtook the 8-GPU one: {later:?} vs {all:?}\n{said}"
    );
    assert!(said.contains("waits for 8 GPU(s)"), "{said}");
}

#[test]
fn a_concurrency_group_runs_one_at_a_time_while_other_runs_pass_it() {
    let host = Host::new();
    host.workflow("g1", 2, 4, "one/**", Some("pair"));
    host.workflow("g2", 2, 1, "two/**", Some("pair"));
    host.workflow("u", 2, 1, "two/**", None);
    let base = host.repo.commit("workflows");
    host.repo.write("one/x", "1\n");
    let one = host.repo.commit("one");
    host.repo.write("two/x", "2\n");
    let two = host.repo.commit("two");

    host.trigger(&base, &one);
    let worker = host.worker(&["--idle-exit", "1s"]);
    wait_until("g1 to start", Duration::from_secs(60), || {
        host.records.path().join("g1").exists()
    });
    // Queued while g1 of the same group runs: g2 waits for it (it is not superseded: g1
    // runs), u does not.
    host.trigger(&one, &two);
    assert_eq!(
        host.wait_for_exit(worker),
        Some(0),
        "{}",
        host.worker_said()
    );
    let said = host.worker_said();
    assert_eq!(
        host.states(),
        [("g1", "success"), ("g2", "success"), ("u", "success")]
            .map(|(w, s)| (w.to_string(), s.to_string())),
        "{said}"
    );
    let (g1, g2, u) = (host.record("g1"), host.record("g2"), host.record("u"));
    assert!(
        g2.start >= g1.end,
        "g1 {g1:?} and g2 {g2:?} overlapped\n{said}"
    );
    assert!(u.start < g1.end, "u {u:?} waited for g1 {g1:?}\n{said}");
}

#[test]
fn cancel_stops_one_run_in_flight_and_sigterm_stops_all_the_others() {
    let host = Host::new();
    for name in ["s1", "s2", "s3"] {
        host.workflow(name, 2, 120, "**", None);
    }
    let sha = host.repo.commit("workflows");
    host.trigger(ZERO, &sha);
    let worker = host.worker(&[]);
    let runs = poll_until(
        "the three runs to run",
        Duration::from_secs(60),
        || host.runs(),
        |runs| {
            runs.iter().all(|r| r["state"] == "running")
                && ["s1", "s2", "s3"]
                    .iter()
                    .all(|n| host.records.path().join(n).exists())
        },
    );
    let s2 = runs[1]["id"].as_str().unwrap().to_string();
    gpuflow()
        .current_dir(host.repo.path())
        .home(host.home.path())
        .args(["cancel", &s2])
        .success();
    poll_until(
        "s2 to be cancelled, the others running on",
        Duration::from_secs(60),
        || host.states(),
        |states| states[1].1 == "cancelled",
    );
    assert_eq!(host.states()[0].1, "running");
    assert_eq!(host.states()[2].1, "running");

    worker.signal(Signal::TERM);
    let mut worker = worker;
    wait_until("the worker to stop", Duration::from_secs(60), || {
        worker.try_wait().is_some()
    });
    let (status, _) = worker.wait();
    assert_eq!(status.code(), Some(130), "{}", host.worker_said());
    let runs = host.runs();
    for i in [0, 2] {
        assert_eq!(runs[i]["state"], "cancelled", "{runs:#?}");
        let message = runs[i]["message"].as_str().unwrap_or("");
        assert!(message.contains("the worker was stopped"), "{runs:#?}");
    }
    assert!(
        std::fs::read_dir(host.home.path().join("work")).map_or(true, |mut d| d.next().is_none()),
        "checkouts were left behind"
    );
}

/// A worker killed with two runs in flight: each `gpuflow run` reads end-of-file on the pipe
/// from the worker and cancels itself; the next worker marks both failed.
#[test]
fn the_next_worker_recovers_every_run_a_killed_worker_had_in_flight() {
    let host = Host::new();
    for name in ["k1", "k2"] {
        host.workflow(name, 2, 120, "**", None);
    }
    let sha = host.repo.commit("workflows");
    host.trigger(ZERO, &sha);
    let mut worker = host.worker(&[]);
    poll_until(
        "the two runs to run",
        Duration::from_secs(60),
        || host.runs(),
        |runs| {
            runs.len() == 2
                && runs.iter().all(|r| r["process"]["pid"].as_u64().is_some())
                && ["k1", "k2"]
                    .iter()
                    .all(|n| host.records.path().join(n).exists())
        },
    );
    worker.kill();
    let next = host.worker(&["--idle-exit", "1s"]);
    assert_eq!(host.wait_for_exit(next), Some(0), "{}", host.worker_said());
    let runs = host.runs();
    for run in &runs {
        assert_eq!(run["state"], "failure", "{runs:#?}");
        let message = run["message"].as_str().unwrap_or("");
        assert!(message.contains("stopped before it ended"), "{runs:#?}");
    }
}
