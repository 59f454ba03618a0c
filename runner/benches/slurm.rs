//! `make bench`: one workflow run on the test Slurm cluster (docs/slurm.md) — a matrix of 64
//! cells, each `gpus: 1` and a `run:` step that sleeps 1 s — submitted by `gpuflow run` (the
//! built binary), which sends each cell to Slurm as one `sbatch` job.
//!
//! Goal: the run, from `gpuflow run` starting to its exit, within 1.5× of the ideal. The ideal
//! is ceil(64 / GPUs) waves of 1 s (3 s on the 24 GPUs of `scripts/slurm-cluster.sh`); its
//! baseline, measured in the same run, is the same 64 recorded sleeps as local processes,
//! as many at a time as the cluster has GPUs. Printed beside the verdict: where the time went
//! (submitting, Slurm's first scheduling pass, the waves, the coordinator's last look), and per
//! job: Slurm's submit → start (`squeue`, whole seconds), the precise submit → gpuflow launched
//! on the node, and gpuflow's own start-up on the node (`gpuflow slurm-job` launched → its step
//! started) and wrap-up (step ended → `gpuflow slurm-job` exited). The node's program is a
//! wrapper that notes when it was launched and exited, then runs the built binary.
//!
//! Needs the cluster (`sudo bash scripts/slurm-cluster.sh up`; `make test` starts it): without
//! it the bench fails saying so. The cluster is shared with the tests: the bench waits (up to
//! 2 minutes) for other jobs to leave it, and says so when they did not.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

const GPUFLOW: &str = env!("CARGO_BIN_EXE_gpuflow");
const CELLS: usize = 64;
const SLEEP_SECS: f64 = 1.0;
const GOAL: f64 = 1.5;

fn main() {
    let gpus = cluster_gpus();
    let busy = wait_for_idle_cluster(Duration::from_secs(120));
    let bench = Bench::new();
    let baseline = bench.baseline(gpus);
    let run = bench.run();
    let records = bench.records();
    assert_eq!(
        run.code,
        Some(0),
        "`gpuflow run` failed; its events:\n{}",
        run.tail
    );
    assert_eq!(records.len(), CELLS, "every cell recorded its sleep");
    assert_no_gpu_held_twice(&records);
    let slurm = slurm_jobs(&run.submitted.keys().copied().collect::<Vec<_>>());
    assert!(
        slurm.values().all(|j| j.state == "COMPLETED"),
        "every Slurm job completed: {slurm:?}"
    );
    let busy_after = other_jobs(&run.submitted.keys().copied().collect::<Vec<_>>());
    let waves = CELLS.div_ceil(gpus);
    println!(
        "Slurm: one run of {CELLS} one-GPU cells × a {SLEEP_SECS} s sleep, `gpuflow run` on the test cluster ({gpus} stand-in GPUs)"
    );
    if busy > 0 || busy_after > 0 {
        println!(
            "  NOTE: other jobs shared the cluster ({busy} before, {busy_after} after): the makespan is inflated"
        );
    }
    print_verdict(&run, &baseline, waves);
    print_breakdown(&run, &records);
    print_latencies(&run, &records, &slurm, gpus);
}

/// The cluster's GPU count (`sinfo`), or a failure naming the command that starts it.
fn cluster_gpus() -> usize {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/slurm-cluster.sh");
    let up = Command::new("bash")
        .arg(&script)
        .arg("check")
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        up,
        "the Slurm bench needs the test Slurm cluster, which is not running: start it with `sudo bash scripts/slurm-cluster.sh up` (`make test-cluster`; docs/slurm.md)"
    );
    let out = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%N %G"])
        .output()
        .expect("sinfo runs");
    let mut nodes: HashMap<String, usize> = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut words = line.split_whitespace();
        let (Some(node), Some(gres)) = (words.next(), words.next()) else {
            continue;
        };
        // `gpu:8` or `gpu:h100:8(S:0-1)`.
        let count = gres
            .split(',')
            .filter(|g| g.starts_with("gpu:"))
            .filter_map(|g| g.split('(').next()?.rsplit(':').next()?.parse::<usize>().ok())
            .sum();
        nodes.insert(node.to_string(), count);
    }
    let gpus: usize = nodes.values().sum();
    assert!(gpus > 0, "`sinfo` shows no GPUs on the test cluster");
    gpus
}

/// Waits until no job of anyone is pending or running (the tests share the cluster); how many
/// were still there when `limit` ran out.
fn wait_for_idle_cluster(limit: Duration) -> usize {
    let start = Instant::now();
    loop {
        let busy = other_jobs(&[]);
        if busy == 0 || start.elapsed() > limit {
            return busy;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Jobs on the cluster that are not `ours` and not yet ended.
fn other_jobs(ours: &[u64]) -> usize {
    let out = Command::new("squeue")
        .args(["-h", "-o", "%i", "--states=PENDING,RUNNING,COMPLETING,CONFIGURING"])
        .output()
        .expect("squeue runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .filter(|id| !ours.contains(id))
        .count()
}

/// The bench's folders: the workspace, the shared folder the nodes read the run from, the
/// records each cell and the node's wrapper write, and a home of its own.
struct Bench {
    ws: tempfile::TempDir,
    shared: tempfile::TempDir,
    records: tempfile::TempDir,
    home: tempfile::TempDir,
}

/// What the coordinator did, on this machine's clock (Unix seconds).
struct Run {
    code: Option<i32>,
    spawned: f64,
    exited: f64,
    /// Each Slurm job: when `gpuflow run` said it was submitted (its `sbatch` had returned).
    submitted: HashMap<u64, f64>,
    /// The last events, for a failure's message.
    tail: String,
}

/// One cell, as its step and the node's wrapper recorded it (Unix seconds).
#[derive(Debug)]
struct Record {
    slurm_id: u64,
    node: String,
    gpus: Vec<String>,
    launched: f64,
    start: f64,
    end: f64,
    exited: f64,
}

impl Bench {
    fn new() -> Self {
        let dir = || tempfile::tempdir().expect("a temporary folder");
        let bench = Self {
            ws: dir(),
            shared: dir(),
            records: dir(),
            home: dir(),
        };
        std::fs::create_dir(bench.ws.path().join(".git")).unwrap();
        let inventory =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stand-in-8gpu-pcie.toml");
        let wrapper = bench.write_wrapper();
        std::fs::write(
            bench.ws.path().join("gpuflow.toml"),
            format!(
                "[hosts.cluster]\ngpu-inventory = \"{}\"\n\n[hosts.cluster.slurm]\nshared-dir = \"{}\"\ngpuflow = \"{}\"\npartition = \"gpu\"\n",
                inventory.display(),
                bench.shared.path().display(),
                wrapper.display(),
            ),
        )
        .unwrap();
        std::fs::write(bench.ws.path().join("wf.yml"), bench.workflow()).unwrap();
        bench
    }

    /// The program the batch script runs on the node: notes when Slurm launched it and when it
    /// exited, around the built `gpuflow`.
    fn write_wrapper(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.home.path().join("gpuflow-timed");
        let log = self.records.path().join("node-$SLURM_JOB_ID");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"launched $(date +%s.%N)\" >> \"{log}\"\n\"{GPUFLOW}\" \"$@\"\ncode=$?\necho \"exited $(date +%s.%N)\" >> \"{log}\"\nexit $code\n",
                log = log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn workflow(&self) -> String {
        let cells: Vec<String> = (0..CELLS).map(|i| i.to_string()).collect();
        format!(
            "on: workflow_dispatch\njobs:\n  sleep:\n    runs-on: cluster\n    gpus: 1\n    strategy:\n      matrix:\n        n: [{}]\n    steps:\n      - run: |\n          {}\n",
            cells.join(", "),
            recording(
                &self
                    .records
                    .path()
                    .join("cell-${{ matrix.n }}")
                    .display()
                    .to_string()
            )
        )
    }

    /// The same 64 recorded sleeps as local processes, `parallel` at a time.
    fn baseline(&self, parallel: usize) -> Duration {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let next = std::sync::atomic::AtomicUsize::new(0);
        let start = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..parallel {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        if i >= CELLS {
                            break;
                        }
                        let file = dir.path().join(format!("cell-{i}"));
                        let script = recording(&file.display().to_string());
                        let status = Command::new("bash").arg("-c").arg(script).status();
                        assert!(status.is_ok_and(|s| s.success()), "a baseline sleep failed");
                    }
                });
            }
        });
        start.elapsed()
    }

    /// `gpuflow run --json wf.yml` to its end, each line of its output stamped as it came.
    fn run(&self) -> Run {
        let spawned = now();
        let mut child = Command::new(GPUFLOW)
            .args(["run", "--json", "wf.yml"])
            .current_dir(self.ws.path())
            .env("HOME", self.home.path())
            .env("GPUFLOW_LEASE_DIR", self.home.path().join("leases"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the built gpuflow starts");
        let mut submitted = HashMap::new();
        let mut tail: Vec<String> = Vec::new();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        for line in stdout.lines() {
            let line = line.expect("gpuflow's output");
            let at = now();
            if let Some(id) = submitted_id(&line) {
                submitted.insert(id, at);
            }
            tail.push(line);
            if tail.len() > 40 {
                tail.remove(0);
            }
        }
        let status = child.wait().expect("gpuflow run ends");
        Run {
            code: status.code(),
            spawned,
            exited: now(),
            submitted,
            tail: tail.join("\n"),
        }
    }

    /// Every cell's record, joined with the node wrapper's notes of its Slurm job.
    fn records(&self) -> Vec<Record> {
        let mut records = Vec::new();
        for i in 0..CELLS {
            let path = self.records.path().join(format!("cell-{i}"));
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let mut record = Record {
                slurm_id: 0,
                node: String::new(),
                gpus: Vec::new(),
                launched: f64::NAN,
                start: f64::NAN,
                end: f64::NAN,
                exited: f64::NAN,
            };
            for line in text.lines() {
                match line.split(' ').collect::<Vec<_>>().as_slice() {
                    ["start", t, node, gpus, id] => {
                        record.start = t.parse().unwrap();
                        record.node = (*node).to_string();
                        record.gpus = gpus.split(',').map(String::from).collect();
                        record.slurm_id = id.parse().unwrap();
                    }
                    ["end", t] => record.end = t.parse().unwrap(),
                    _ => panic!("cell {i}: unexpected record {line:?}"),
                }
            }
            let node_log = self
                .records
                .path()
                .join(format!("node-{}", record.slurm_id));
            for line in std::fs::read_to_string(node_log)
                .unwrap_or_default()
                .lines()
            {
                match line.split(' ').collect::<Vec<_>>().as_slice() {
                    ["launched", t] => record.launched = t.parse().unwrap(),
                    ["exited", t] => record.exited = t.parse().unwrap(),
                    _ => {}
                }
            }
            records.push(record);
        }
        records
    }
}

/// A step's script that records, in `file`, its start (time, node, GPUs, Slurm job) and end
/// around the sleep.
fn recording(file: &str) -> String {
    format!(
        "echo \"start $(date +%s.%N) ${{SLURMD_NODENAME:-local}} ${{GPUFLOW_GPUS:-none}} ${{SLURM_JOB_ID:-0}}\" >> \"{file}\"\n          sleep {SLEEP_SECS}\n          echo \"end $(date +%s.%N)\" >> \"{file}\""
    )
}

/// The Slurm job id of a `submitted to Slurm as job N` line of `--json` output.
fn submitted_id(line: &str) -> Option<u64> {
    let event: Value = serde_json::from_str(line).ok()?;
    let text = event["text"].as_str()?;
    let rest = text.strip_prefix("submitted to Slurm as job ")?;
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Two cells that ran at once on one node never held the same GPU.
fn assert_no_gpu_held_twice(records: &[Record]) {
    for (i, a) in records.iter().enumerate() {
        assert_eq!(a.gpus.len(), 1, "one GPU per cell: {a:?}");
        for b in &records[i + 1..] {
            if a.node == b.node && a.start < b.end && b.start < a.end {
                assert!(
                    a.gpus.iter().all(|g| !b.gpus.contains(g)),
                    "{a:?} and {b:?} held a GPU at once"
                );
            }
        }
    }
}

/// One Slurm job as `squeue --json` tells it (times in whole Unix seconds).
#[derive(Debug)]
struct SlurmJob {
    state: String,
    submit: u64,
    start: u64,
}

/// The jobs with these ids; finished ones are kept by the controller for `MinJobAge`.
fn slurm_jobs(ids: &[u64]) -> HashMap<u64, SlurmJob> {
    let out = Command::new("squeue")
        .args(["--json", "--states=all"])
        .output()
        .expect("squeue runs");
    let json: Value = serde_json::from_slice(&out.stdout).expect("squeue --json answers JSON");
    // Slurm 22.05's `--json` ignores `--jobs`: filtered here.
    let number = |v: &Value| v.as_u64().or_else(|| v["number"].as_u64()).unwrap_or(0);
    json["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|j| ids.contains(&number(&j["job_id"])))
        .map(|j| {
            let state = match &j["job_state"] {
                Value::Array(s) => s[0].as_str().unwrap_or("").to_string(),
                s => s.as_str().unwrap_or("").to_string(),
            };
            let job = SlurmJob {
                state,
                submit: number(&j["submit_time"]),
                start: number(&j["start_time"]),
            };
            (number(&j["job_id"]), job)
        })
        .collect()
}

fn print_verdict(run: &Run, baseline: &Duration, waves: usize) {
    let ideal = waves as f64 * SLEEP_SECS;
    let baseline = baseline.as_secs_f64();
    let makespan = run.exited - run.spawned;
    let floor = ideal.max(baseline);
    println!(
        "  ideal: {waves} waves × {SLEEP_SECS} s                                {ideal:>7.2} s"
    );
    println!(
        "  baseline: the same sleeps as local processes, a GPU's worth at a time {baseline:>7.2} s"
    );
    println!(
        "  `gpuflow run` on Slurm, start to exit                   {makespan:>7.2} s  = {:.2}× the ideal, {:.2}× the baseline",
        makespan / ideal,
        makespan / baseline
    );
    println!(
        "  goal: within {GOAL}× of the ideal/baseline ({:.2} s): {}",
        GOAL * floor,
        if makespan <= GOAL * floor {
            "MET"
        } else {
            "NOT MET"
        }
    );
}

/// Where the run's time went, in order.
fn print_breakdown(run: &Run, records: &[Record]) {
    let first_submit = run.submitted.values().copied().fold(f64::MAX, f64::min);
    let last_submit = run.submitted.values().copied().fold(f64::MIN, f64::max);
    let first_launch = records.iter().map(|r| r.launched).fold(f64::MAX, f64::min);
    let first_start = records.iter().map(|r| r.start).fold(f64::MAX, f64::min);
    let last_end = records.iter().map(|r| r.end).fold(f64::MIN, f64::max);
    let last_exit = records.iter().map(|r| r.exited).fold(f64::MIN, f64::max);
    println!("  where the time went:");
    let row = |what: &str, secs: f64| println!("    {what:<62} {secs:>6.2} s");
    row(
        "`gpuflow run` starting → its first job submitted",
        first_submit - run.spawned,
    );
    row(
        &format!("submitting all {} jobs (one `sbatch` each)", run.submitted.len()),
        last_submit - first_submit,
    );
    row(
        "first submitted → first `gpuflow slurm-job` launched (Slurm)",
        first_launch - first_submit,
    );
    row(
        "first launched → its step started (gpuflow's node start-up)",
        first_start - first_launch,
    );
    row(
        "first step started → last step ended (the waves)",
        last_end - first_start,
    );
    row(
        "last step ended → last `gpuflow slurm-job` exited",
        last_exit - last_end,
    );
    row(
        "last step ended → `gpuflow run` exited (node wrap-up, follower)",
        run.exited - last_end,
    );
}

/// Per-job latencies, with Slurm's scheduler settings that bound them.
fn print_latencies(
    run: &Run,
    records: &[Record],
    slurm: &HashMap<u64, SlurmJob>,
    gpus: usize,
) {
    let queued: Vec<f64> = slurm
        .values()
        .map(|j| j.start.saturating_sub(j.submit) as f64)
        .collect();
    let to_launch = |r: &Record| r.launched - run.submitted[&r.slurm_id];
    let launched: Vec<f64> = records.iter().map(to_launch).collect();
    let mut by_launch: Vec<&Record> = records.iter().collect();
    by_launch.sort_by(|a, b| a.launched.total_cmp(&b.launched));
    let first_wave: Vec<f64> = by_launch.iter().take(gpus).map(|r| to_launch(r)).collect();
    let slurm_to_launch: Vec<f64> = records
        .iter()
        .filter_map(|r| Some(r.launched - slurm.get(&r.slurm_id)?.start as f64))
        .collect();
    let start_up: Vec<f64> = records.iter().map(|r| r.start - r.launched).collect();
    let wrap_up: Vec<f64> = records.iter().map(|r| r.exited - r.end).collect();
    println!("  per job ({} jobs)                                          min  median   p95    max", records.len());
    stats("Slurm submit → start (squeue, whole seconds)", &queued);
    stats("submitted → `gpuflow slurm-job` launched", &launched);
    stats(
        &format!("  the first {gpus} launched (a GPU free at submission)"),
        &first_wave,
    );
    stats("Slurm start → launched (slurmd; start in whole s)", &slurm_to_launch);
    stats("launched → step started (gpuflow's node start-up)", &start_up);
    stats("step ended → `gpuflow slurm-job` exited (wrap-up)", &wrap_up);
    println!(
        "  the floor of submit → start is Slurm's scheduler: `{}` (a batch job is not scheduled at submission but by the next pass, up to sched_interval later; batch_sched_delay defaults to 3 s, the backfill pass to bf_interval, default 30 s)",
        scheduler_parameters()
    );
}

/// `SchedulerParameters` as the running controller has it.
fn scheduler_parameters() -> String {
    let out = Command::new("scontrol")
        .args(["show", "config"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.lines()
        .find_map(|l| {
            let (key, value) = l.split_once('=')?;
            (key.trim() == "SchedulerParameters").then(|| format!("SchedulerParameters={}", value.trim()))
        })
        .unwrap_or_else(|| "SchedulerParameters unknown".into())
}

fn stats(what: &str, values: &[f64]) {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        println!("    {what:<58} (none measured)");
        return;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    println!(
        "    {what:<58} {:>5.2} {:>6.2} {:>6.2} {:>6.2} s",
        v[0],
        at(0.5),
        at(0.95),
        v[v.len() - 1]
    );
}
