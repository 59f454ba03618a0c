//! `make bench`: one workflow run on the test Slurm cluster (docs/slurm.md) — a matrix of 64
//! cells, each `gpus: 1` and a `run:` step that sleeps 1 s and records when it started and
//! ended, on which node and GPU — submitted by `gpuflow run` (the built binary), which sends
//! each cell to Slurm as one `sbatch` job.
//!
//! Goal: the run, from `gpuflow run` starting to its exit, within 1.5× of the ideal: ceil(64 /
//! GPUs) waves of 1 s (3 s on the 24 GPUs of `scripts/slurm-cluster.sh`). The ideal's
//! baseline, measured in the same run, is the same 64 recorded sleeps as local processes, as
//! many at a time as the cluster has GPUs; the goal is held against the larger of the two.
//! Also measured in the same run: Slurm alone, the same 64 sleeps as plain `sbatch --wrap`
//! jobs without gpuflow — the floor any client of this cluster can reach (on the 2-CPU test
//! machine it is itself above 1.5× the ideal), and so what gpuflow adds to Slurm.
//!
//! Printed beside the verdict: where the run's time went, what a GPU's hand-over from one cell
//! to the next costs (gpuflow's wrap-up, Slurm seeing the job end, Slurm's scheduler, slurmd
//! launching the next, gpuflow's start-up on the node), and per job the time from submission to
//! running: Slurm's own `submit_time` → `start_time` (`squeue`, whole seconds) and the precise
//! times. Precise times come from the steps' records, from a wrapper the batch script runs as
//! its gpuflow (it notes when Slurm launched it and when it exited, around the built binary),
//! from when `gpuflow run` said each job was submitted, and, where this user can read it, from
//! slurmctld's log (millisecond stamps of each job's submission, allocation and end).
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
    let (nodes, gpus) = cluster_gpus();
    let busy = wait_for_idle_cluster(Duration::from_secs(120));
    let machine = machine(nodes);
    let bench = Bench::new();
    let baseline = bench.baseline(gpus).as_secs_f64();
    let alone = slurm_alone();
    let run = bench.run();
    assert_eq!(
        run.code,
        Some(0),
        "`gpuflow run` failed; its last events:\n{}",
        run.tail
    );
    let ids: Vec<u64> = run.submitted.keys().copied().collect();
    let mut records = bench.records();
    assert_eq!(records.len(), CELLS, "every cell recorded its sleep");
    assert_no_gpu_held_twice(&records);
    let squeue = squeue_jobs(&ids);
    assert!(
        squeue.values().all(|j| j.state == "COMPLETED"),
        "every Slurm job completed: {squeue:?}"
    );
    let log = SlurmLog::read(&ids, &squeue);
    for r in &mut records {
        r.slurm = log.as_ref().and_then(|l| l.jobs.get(&r.slurm_id)).copied();
    }
    let busy_after = other_jobs(&ids);
    println!(
        "Slurm: one run of {CELLS} one-GPU cells × a {SLEEP_SECS} s sleep, `gpuflow run` on the test cluster ({nodes} nodes, {gpus} stand-in GPUs)"
    );
    println!("  ({machine})");
    if busy > 0 || busy_after > 0 {
        println!(
            "  NOTE: other jobs shared the cluster ({busy} before the run, {busy_after} after): the times are inflated"
        );
    }
    print_verdict(&run, baseline, alone, CELLS.div_ceil(gpus));
    print_breakdown(&run, &records);
    print_hand_overs(&records);
    print_latencies(&run, &records, &squeue, gpus);
    if log.is_none() {
        println!(
            "  (slurmctld's log is not readable here: the Slurm-side times above are squeue's whole seconds only)"
        );
    }
    println!(
        "  the floor of submitted → running is Slurm's scheduler, {}:",
        scheduler_parameters()
    );
    println!(
        "    a batch job starts at the next scheduling pass, not when it is submitted: the main loop's,"
    );
    println!(
        "    every sched_interval s, or one its submission asks for, at most every batch_sched_delay s"
    );
    println!(
        "    (default 3); the backfill pass runs every bf_interval s (default 30). A job's end asks for a"
    );
    println!("    pass too (the hand-overs), which waits for the main loop when many end at once.");
}

/// The machine's CPUs and load: the nodes, slurmd and gpuflow share them here.
fn machine(nodes: usize) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split(' ').next().unwrap_or("?").to_string();
    format!(
        "the {nodes} emulated nodes share this machine's {cpus} CPUs; load average {load} before the run"
    )
}

/// The cluster's nodes and GPUs (`sinfo`), or a failure naming the command that starts it.
fn cluster_gpus() -> (usize, usize) {
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
            .filter_map(|g| {
                g.split('(')
                    .next()?
                    .rsplit(':')
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .sum();
        nodes.insert(node.to_string(), count);
    }
    let gpus: usize = nodes.values().sum();
    assert!(gpus > 0, "`sinfo` shows no GPUs on the test cluster");
    (nodes.len(), gpus)
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
        .args([
            "-h",
            "-o",
            "%i",
            "--states=PENDING,RUNNING,COMPLETING,CONFIGURING",
        ])
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

/// One cell, as its step, the node's wrapper and Slurm recorded it (Unix seconds).
#[derive(Debug)]
struct Record {
    slurm_id: u64,
    node: String,
    gpus: Vec<String>,
    launched: f64,
    start: f64,
    end: f64,
    exited: f64,
    slurm: Option<Logged>,
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
    /// exited, around the built `gpuflow` (a `date` each side: a few milliseconds).
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
        let record = self.records.path().join("cell-${{ matrix.n }}");
        format!(
            "on: workflow_dispatch\njobs:\n  sleep:\n    runs-on: cluster\n    gpus: 1\n    strategy:\n      matrix:\n        n: [{}]\n    steps:\n      - run: |\n          {}\n",
            cells.join(", "),
            recording(&record.display().to_string())
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

    /// `gpuflow run --json wf.yml` to its end, each line of its output stamped as it came
    /// (it writes and flushes one event a line).
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

    /// Every cell's record, with the node wrapper's notes of its Slurm job.
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
                slurm: None,
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
            let notes = std::fs::read_to_string(node_log).unwrap_or_default();
            for line in notes.lines() {
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
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
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
struct SqueueJob {
    state: String,
    submit: u64,
    start: u64,
}

/// The jobs with these ids; finished ones are kept by the controller for `MinJobAge`.
fn squeue_jobs(ids: &[u64]) -> HashMap<u64, SqueueJob> {
    let out = Command::new("squeue")
        .args(["--json", "--states=all"])
        .output()
        .expect("squeue runs");
    let json: Value = serde_json::from_slice(&out.stdout).expect("squeue --json answers JSON");
    // 22.05 writes numbers; later versions `{"set": true, "number": N}`.
    let number = |v: &Value| v.as_u64().or_else(|| v["number"].as_u64()).unwrap_or(0);
    // Slurm 22.05's `--json` ignores `--jobs`: filtered here.
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
            let job = SqueueJob {
                state,
                submit: number(&j["submit_time"]),
                start: number(&j["start_time"]),
            };
            (number(&j["job_id"]), job)
        })
        .collect()
}

/// One job's moments in slurmctld's log (Unix seconds, to the millisecond).
#[derive(Clone, Copy, Debug)]
struct Logged {
    submitted: f64,
    allocated: f64,
    completed: f64,
}

/// slurmctld's log, for the jobs of the run: read only where this user may (root, on the test
/// cluster).
struct SlurmLog {
    jobs: HashMap<u64, Logged>,
}

impl SlurmLog {
    fn read(ids: &[u64], squeue: &HashMap<u64, SqueueJob>) -> Option<Self> {
        let path = config_value("SlurmctldLogFile")?;
        let text = std::fs::read_to_string(path).ok()?;
        let mut jobs: HashMap<u64, Logged> = HashMap::new();
        for line in text.lines() {
            let Some((stamp, what)) = line.strip_prefix('[').and_then(|l| l.split_once("] "))
            else {
                continue;
            };
            let Some(id) = what
                .split_once("JobId=")
                .and_then(|(_, rest)| rest.split(' ').next()?.parse::<u64>().ok())
                .filter(|id| ids.contains(id))
            else {
                continue;
            };
            // Local time without a zone; taken as UTC here, corrected below.
            let Ok(at) = humantime::parse_rfc3339_weak(stamp) else {
                continue;
            };
            let at = at
                .duration_since(SystemTime::UNIX_EPOCH)
                .ok()?
                .as_secs_f64();
            let job = jobs.entry(id).or_insert(Logged {
                submitted: f64::NAN,
                allocated: f64::NAN,
                completed: f64::NAN,
            });
            if what.starts_with("_slurm_rpc_submit_batch_job") {
                job.submitted = at;
            } else if what.starts_with("sched: Allocate") || what.contains("_start_job: Started") {
                job.allocated = at;
            } else if what.starts_with("_job_complete") && what.ends_with(" done") {
                job.completed = at;
            }
        }
        // The log's zone: the whole quarter hours between its stamps and squeue's.
        let offsets: Vec<f64> = jobs
            .iter()
            .filter_map(|(id, j)| Some(squeue.get(id)?.submit as f64 - j.submitted))
            .filter(|d| d.is_finite())
            .map(|d| (d / 900.0).round() * 900.0)
            .collect();
        let offset = *offsets.first()?;
        for j in jobs.values_mut() {
            j.submitted += offset;
            j.allocated += offset;
            j.completed += offset;
        }
        (jobs.len() == ids.len()).then_some(Self { jobs })
    }
}

/// A value of `scontrol show config`.
fn config_value(key: &str) -> Option<String> {
    let out = Command::new("scontrol")
        .args(["show", "config"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

fn scheduler_parameters() -> String {
    format!(
        "SchedulerParameters={}",
        config_value("SchedulerParameters").unwrap_or_else(|| "?".into())
    )
}

fn print_verdict(run: &Run, baseline: f64, alone: f64, waves: usize) {
    let ideal = waves as f64 * SLEEP_SECS;
    let makespan = run.exited - run.spawned;
    let floor = ideal.max(baseline);
    let row = |what: &str, secs: f64, note: &str| println!("  {what:<64} {secs:>6.2} s{note}");
    row(&format!("ideal: {waves} waves × {SLEEP_SECS} s"), ideal, "");
    row(
        "baseline: the same sleeps as local processes, one per GPU at a time",
        baseline,
        "",
    );
    row(
        "Slurm alone: the same sleeps as 64 `sbatch --wrap` jobs, no gpuflow",
        alone,
        &format!("  = {:.2}× the ideal: this cluster's floor", alone / ideal),
    );
    row(
        "`gpuflow run` on Slurm, start to exit",
        makespan,
        &format!(
            "  = {:.2}× the ideal, {:.2}× the baseline, {:.2}× Slurm alone",
            makespan / ideal,
            makespan / baseline,
            makespan / alone
        ),
    );
    println!(
        "  goal: within {GOAL}× of the ideal (of the larger of it and its baseline: ≤ {:.2} s): {}",
        GOAL * floor,
        if makespan <= GOAL * floor {
            "MET"
        } else {
            "NOT MET"
        }
    );
    if alone > GOAL * floor {
        println!(
            "  (Slurm alone takes {:.2}× the ideal here: no client of this cluster can meet the goal; gpuflow's own share is what it adds to Slurm alone, {:.2} s)",
            alone / ideal,
            makespan - alone
        );
    }
}

/// The run's 64 sleeps as plain `sbatch --wrap` jobs of one GPU each, without gpuflow, from
/// the first submission until Slurm says every one ended: what Slurm alone takes on this
/// cluster, the floor of any client's makespan.
fn slurm_alone() -> f64 {
    let start = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..CELLS {
        let out = Command::new("sbatch")
            .args([
                "--parsable",
                "--partition=gpu",
                "--gres=gpu:1",
                "--output=/dev/null",
                "--job-name=gpuflow-bench-slurm-alone",
                "--wrap",
                &format!("sleep {SLEEP_SECS}"),
            ])
            .output()
            .expect("sbatch runs");
        assert!(
            out.status.success(),
            "sbatch: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text.trim().split(';').next().and_then(|i| i.parse().ok());
        ids.push(id.expect("sbatch --parsable prints the job id"));
    }
    loop {
        let jobs = squeue_jobs(&ids);
        let ended =
            |state: &str| !matches!(state, "PENDING" | "RUNNING" | "COMPLETING" | "CONFIGURING");
        if jobs.len() == CELLS && jobs.values().all(|j| ended(&j.state)) {
            assert!(
                jobs.values().all(|j| j.state == "COMPLETED"),
                "every plain job completed: {jobs:?}"
            );
            return start.elapsed().as_secs_f64();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn first(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(f64::INFINITY, f64::min)
}

fn last(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(f64::NEG_INFINITY, f64::max)
}

/// Where the run's time went, in order, each span to the next moment of the whole run.
fn print_breakdown(run: &Run, records: &[Record]) {
    let first_submit = first(run.submitted.values().copied());
    let last_submit = last(run.submitted.values().copied());
    let first_allocated = first(records.iter().filter_map(|r| Some(r.slurm?.allocated)));
    let first_launch = first(records.iter().map(|r| r.launched));
    let first_start = first(records.iter().map(|r| r.start));
    let last_end = last(records.iter().map(|r| r.end));
    println!("  where the run's time went:");
    let row = |what: &str, secs: f64| {
        if secs.is_finite() {
            println!("    {what:<62} {secs:>6.2} s");
        }
    };
    // gpuflow says a level's jobs are submitted once the whole level is (8 `sbatch` at once):
    // the first line comes after the level's last answer.
    row(
        "`gpuflow run` starting → its first level submitted",
        first_submit - run.spawned,
    );
    row(
        &format!(
            "(its {} `submitted` lines, first to last)",
            run.submitted.len()
        ),
        last_submit - first_submit,
    );
    if first_allocated.is_finite() {
        row(
            "first submitted → Slurm's first allocation (its scheduler)",
            first_allocated - first_submit,
        );
        row(
            "→ the first `gpuflow slurm-job` launched (slurmd)",
            first_launch - first_allocated,
        );
    } else {
        row(
            "first submitted → first `gpuflow slurm-job` launched (Slurm)",
            first_launch - first_submit,
        );
    }
    row(
        "→ its step started (gpuflow's start-up on the node)",
        first_start - first_launch,
    );
    row(
        "→ the last step ended (the waves and the GPUs' hand-overs)",
        last_end - first_start,
    );
    row(
        "→ `gpuflow run` exited (the node's wrap-up, the coordinator's look)",
        run.exited - last_end,
    );
}

/// What a GPU costs between one cell's step ending and the next cell's step starting on it.
fn print_hand_overs(records: &[Record]) {
    let mut by_gpu: HashMap<(String, String), Vec<&Record>> = HashMap::new();
    for r in records {
        by_gpu
            .entry((r.node.clone(), r.gpus.join(",")))
            .or_default()
            .push(r);
    }
    let mut pairs: Vec<(&Record, &Record)> = Vec::new();
    for cells in by_gpu.values_mut() {
        cells.sort_by(|a, b| a.start.total_cmp(&b.start));
        pairs.extend(cells.windows(2).map(|w| (w[0], w[1])));
    }
    println!(
        "  a GPU handed from one cell to the next ({} hand-overs)           min  median   p95    max",
        pairs.len()
    );
    let span = |what: &str, f: &dyn Fn(&Record, &Record) -> Option<f64>| {
        let v: Vec<f64> = pairs.iter().filter_map(|(a, b)| f(a, b)).collect();
        stats(what, &v);
    };
    span(
        "step ended → `gpuflow slurm-job` exited (gpuflow)",
        &|a, _| Some(a.exited - a.end),
    );
    span(
        "→ Slurm saw the job complete (slurmd, slurmctld)",
        &|a, _| Some(a.slurm?.completed - a.exited),
    );
    span("→ the next job allocated (Slurm's scheduler)", &|a, b| {
        Some(b.slurm?.allocated - a.slurm?.completed)
    });
    span("→ its `gpuflow slurm-job` launched (slurmd)", &|_, b| {
        Some(b.launched - b.slurm?.allocated)
    });
    span("→ its step started (gpuflow's start-up)", &|_, b| {
        Some(b.start - b.launched)
    });
    span("step ended → the next step started, in all", &|a, b| {
        Some(b.start - a.end)
    });
}

/// Per-job time from submission to running.
fn print_latencies(run: &Run, records: &[Record], squeue: &HashMap<u64, SqueueJob>, gpus: usize) {
    let queued: Vec<f64> = squeue
        .values()
        .map(|j| j.start.saturating_sub(j.submit) as f64)
        .collect();
    let submitted = |r: &Record| run.submitted[&r.slurm_id];
    let mut by_launch: Vec<&Record> = records.iter().collect();
    by_launch.sort_by(|a, b| a.launched.total_cmp(&b.launched));
    let (first_wave, later) = by_launch.split_at(gpus.min(by_launch.len()));
    println!(
        "  per job, submitted → running ({} jobs)                           min  median   p95    max",
        records.len()
    );
    stats(
        "Slurm submit_time → start_time (squeue, whole seconds)",
        &queued,
    );
    let each = |what: &str, rs: &[&Record], f: &dyn Fn(&Record) -> Option<f64>| {
        let v: Vec<f64> = rs.iter().filter_map(|r| f(r)).collect();
        stats(what, &v);
    };
    let all: Vec<&Record> = records.iter().collect();
    each("submitted → allocated (slurmctld's log)", &all, &|r| {
        Some(r.slurm?.allocated - r.slurm?.submitted)
    });
    each(
        &format!("  the first {gpus} (a GPU free when submitted)"),
        first_wave,
        &|r| Some(r.slurm?.allocated - r.slurm?.submitted),
    );
    each("  the others (waited for a GPU to be freed)", later, &|r| {
        Some(r.slurm?.allocated - r.slurm?.submitted)
    });
    each("submitted → `gpuflow slurm-job` launched", &all, &|r| {
        Some(r.launched - submitted(r))
    });
    each(&format!("  the first {gpus}"), first_wave, &|r| {
        Some(r.launched - submitted(r))
    });
    each(
        "launched → step started (gpuflow's start-up)",
        &all,
        &|r| Some(r.start - r.launched),
    );
    each(
        "step ended → `gpuflow slurm-job` exited (wrap-up)",
        &all,
        &|r| Some(r.exited - r.end),
    );
}

fn stats(what: &str, values: &[f64]) {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    println!(
        "    {what:<62} {:>5.2} {:>6.2} {:>6.2} {:>6.2} s",
        v[0],
        at(0.5),
        at(0.95),
        v[v.len() - 1]
    );
}
