//! `make bench` (alone: `cargo bench --bench clients`): the capacity of gpuflow's load
//! generator against AIPerf and inference-perf, the Python tools users compare it with.
//!
//! All three run as their own process at the same settings (streaming `/v1/completions`,
//! 16 prompt and 16 output tokens, `ignore_eos`, concurrency 32, no warm-up) against one
//! `gpuflow-sim` process with no delays, so the client is the limit. The simulator is pinned
//! to CPU 0 and every client to CPU 1 (`taskset`). Per client it reports:
//!
//! - requests/s from the simulator's record (requests / first received to last finished), the
//!   same yardstick for every tool, beside the rate the tool reports itself;
//! - client CPU (user + system of the whole process tree, helper processes included: this
//!   process is their child subreaper, so every one is reaped here and counted in
//!   `/proc/self/stat`'s children times) per request, at the margin (a run of `SMALL`
//!   requests subtracted from one of `LARGE`, so start-up and imports cancel out) and over
//!   the whole large run;
//! - how busy the client's and the simulator's cores were, to tell which was the limit.
//!
//! Then the ratios gpuflow/AIPerf and gpuflow/inference-perf. Goal (issue 5): ≥ 5× their rate
//! and ≤ 0.3 ms CPU per request. The record also checks that each tool really sent what was
//! asked (lengths, streaming), so the comparison is like for like.
//!
//! The Python tools are installed from PyPI by this benchmark, at pinned versions, into
//! throw-away virtualenvs under `target/tmp/client-venvs` (kept for the next run). They need
//! Python ≥ 3.12 (inference-perf's floor): `GPUFLOW_BENCH_PYTHON` names one, otherwise the
//! first found of `python3.13`, `python3.12`, `python3` and pyenv's versions. Their tokenizer
//! is a word-level one written at run time by `benches/clients/word_tokenizer.py` (one token
//! per word, as the simulator counts), so nothing is fetched from the HuggingFace hub. When a
//! tool cannot be installed or run, the output says why and the rest is still measured.
//!
//! `GPUFLOW_BENCH_SCALE` (default 1) multiplies the request counts.

#[path = "sim_process.rs"]
mod sim_process;

use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};
use serde_json::Value;
use sim_process::{CLIENT_CPU, can_pin, pinned, start_sim};

const GPUFLOW: &str = env!("CARGO_BIN_EXE_gpuflow");
const AIPERF: &str = "aiperf==0.13.0";
const INFERENCE_PERF: &str = "inference-perf==0.7.0";
const WORD_TOKENIZER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/benches/clients/word_tokenizer.py"
);

const CONCURRENCY: u64 = 32;
const INPUT_TOKENS: u64 = 16;
const OUTPUT_TOKENS: u64 = 16;
/// Request counts of the two runs per client (times `GPUFLOW_BENCH_SCALE`). gpuflow's large
/// run lasts about half a second: long enough for CPU times counted in 10 ms ticks.
const SMALL: u64 = 1000;
const LARGE: u64 = 10_000;
/// How long a client's helper processes may outlive it before they are killed.
const LEFTOVER_GRACE: Duration = Duration::from_secs(10);

fn main() {
    let scale: u64 = std::env::var("GPUFLOW_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let (small, large) = (SMALL * scale, LARGE * scale);
    // Helpers a client leaves behind are re-parented here, so they are reaped (and their
    // CPU time counted) here rather than by init.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .expect("prctl(PR_SET_CHILD_SUBREAPER)");

    let work = tempfile::tempdir().unwrap();
    let record = work.path().join("record.jsonl");
    let sim = start_sim(&[
        "--ttft",
        "0ms",
        "--tokens-per-second",
        "1000000000",
        "--record",
        record.to_str().unwrap(),
    ]);
    let sim_pid = sim_pid(&record);
    println!(
        "clients: streaming /v1/completions, {INPUT_TOKENS} prompt + {OUTPUT_TOKENS} output tokens, concurrency {CONCURRENCY}, runs of {small} and {large} requests"
    );
    println!(
        "  gpuflow-sim with no delays {}; requests/s from the simulator's record",
        if can_pin() {
            "on CPU 0, each client on CPU 1"
        } else {
            "(NOT pinned: fewer than 2 CPUs or no taskset)"
        }
    );

    let measure = |name: &str, client: &dyn Fn(u64, &Path) -> Command| {
        println!("  measuring {name} …");
        measure(client, small, large, &record, sim_pid, work.path())
    };
    let mut results: Vec<(String, Result<Measured, String>)> = vec![(
        "gpuflow bench".to_owned(),
        measure("gpuflow bench", &|n, out| gpuflow_command(&sim.url, n, out)),
    )];
    match python_tools(work.path()) {
        Err(why) => {
            results.push(("AIPerf".to_owned(), Err(why.clone())));
            results.push(("inference-perf".to_owned(), Err(why)));
        }
        Ok(tools) => {
            let aiperf = tools.aiperf.and_then(|venv| {
                measure(&label(AIPERF), &|n, out| {
                    aiperf_command(&venv, &tools.tokenizer, &sim.url, n, out)
                })
            });
            results.push((label(AIPERF), aiperf));
            let inference_perf = tools.inference_perf.and_then(|venv| {
                measure(&label(INFERENCE_PERF), &|n, out| {
                    inference_perf_command(&venv, &tools.tokenizer, &sim.url, n, out)
                })
            });
            results.push((label(INFERENCE_PERF), inference_perf));
        }
    }
    drop(sim);
    print_report(&results, large);
}

/// "aiperf==0.13.0" → "aiperf 0.13.0".
fn label(spec: &str) -> String {
    spec.replace("==", " ")
}

/// What one client achieved and cost, from its large run (CPU also from its small run).
struct Measured {
    server_rate: f64,
    own_rate: Option<f64>,
    /// gpuflow's own in-run figure (`honesty.client_cpu_cores`): CPU / wall while it sent.
    own_cores: Option<f64>,
    cpu_ms_marginal: f64,
    cpu_ms_whole: f64,
    sim_busy: f64,
    /// Differences between what the simulator saw and what was asked, if any.
    mismatches: Vec<String>,
}

impl Measured {
    /// The client's share of its core while it sent: marginal CPU per request × rate. Above
    /// 100% when part of the per-request work happens after the last response (the Python
    /// tools compute their metrics then).
    fn client_busy(&self) -> f64 {
        self.cpu_ms_marginal * self.server_rate / 1000.0
    }
}

/// One client process run to its end, with all its helpers.
struct Run {
    cpu_s: f64,
    seen: RecordWindow,
    own_rate: Option<f64>,
    own_cores: Option<f64>,
    sim_cpu_s: f64,
}

fn measure(
    client: &dyn Fn(u64, &Path) -> Command,
    small: u64,
    large: u64,
    record: &Path,
    sim_pid: Option<u32>,
    work: &Path,
) -> Result<Measured, String> {
    let s = run_client(client, small, record, sim_pid, work)?;
    let l = run_client(client, large, record, sim_pid, work)?;
    let mut mismatches = l.seen.mismatches.clone();
    for (run, n) in [(&s, small), (&l, large)] {
        if run.seen.requests != n {
            mismatches.push(format!(
                "the simulator saw {} requests of a run of {n}",
                run.seen.requests
            ));
        }
    }
    Ok(Measured {
        server_rate: l.seen.requests as f64 / l.seen.span_s,
        own_rate: l.own_rate,
        own_cores: l.own_cores,
        cpu_ms_marginal: (l.cpu_s - s.cpu_s) * 1000.0 / (large - small) as f64,
        cpu_ms_whole: l.cpu_s * 1000.0 / large as f64,
        sim_busy: l.sim_cpu_s / l.seen.span_s,
        mismatches,
    })
}

fn run_client(
    client: &dyn Fn(u64, &Path) -> Command,
    n: u64,
    record: &Path,
    sim_pid: Option<u32>,
    work: &Path,
) -> Result<Run, String> {
    let out = tempfile::tempdir_in(work).unwrap();
    let (stdout_path, stderr_path) = (out.path().join("stdout"), out.path().join("stderr"));
    let mut command = client(n, out.path());
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).unwrap())
        .stderr(File::create(&stderr_path).unwrap())
        // Whatever the tools cache goes to the run's own folder, not the user's HF cache.
        .env("HF_HOME", out.path().join("hf-home"));
    let record_from = std::fs::metadata(record).map_or(0, |m| m.len());
    let (cpu_before, sim_before) = (children_cpu_s(), sim_pid.map_or(0.0, process_cpu_s));
    let status = command
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))?
        .wait()
        .unwrap();
    let leftovers = reap_descendants(LEFTOVER_GRACE);
    let cpu_s = children_cpu_s() - cpu_before;
    let sim_cpu_s = sim_pid.map_or(0.0, process_cpu_s) - sim_before;
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let output = stdout.clone() + &std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "{n} requests: it exited with {status}; its last lines:\n{}",
            tail(&output, 15)
        ));
    }
    if leftovers > 0 {
        eprintln!("  ({leftovers} helper processes outlived the client and were killed)");
    }
    let seen = read_record(record, record_from, n);
    if seen.requests == 0 {
        return Err(format!(
            "{n} requests: the simulator saw none; its last lines:\n{}",
            tail(&output, 15)
        ));
    }
    Ok(Run {
        cpu_s,
        own_rate: own_rate(out.path(), &stdout),
        own_cores: serde_json::from_str::<Value>(&stdout)
            .ok()
            .and_then(|v| v["gpuflow"]["metrics"]["honesty"]["client_cpu_cores"].as_f64()),
        seen,
        sim_cpu_s,
    })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| format!("      {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---- the three clients, at the same settings ----

fn gpuflow_command(url: &str, n: u64, _out: &Path) -> Command {
    let mut c = pinned(CLIENT_CPU, GPUFLOW);
    c.args(["bench", url, "--json", "--model", "gpuflow-sim"])
        .args(["--endpoint", "completions", "--warmup", "0"])
        .args(["--concurrency", &CONCURRENCY.to_string()])
        .args(["--requests", &n.to_string()])
        .args(["--input-tokens", &INPUT_TOKENS.to_string()])
        .args(["--output-tokens", &OUTPUT_TOKENS.to_string()]);
    c
}

/// AIPerf at its cheapest on one core: one worker, no dashboard, server metrics or GPU
/// telemetry, token counts from the server's `usage` (no client-side tokenizing). No
/// `HF_HUB_OFFLINE`: AIPerf 0.13.0 in offline mode looks even a local path up as a hub repo
/// id in the cache, and fails; online, it loads an absolute path as a local folder.
fn aiperf_command(venv: &Path, tokenizer: &Path, url: &str, n: u64, out: &Path) -> Command {
    let mut c = pinned(CLIENT_CPU, venv.join("bin/aiperf"));
    c.arg("profile")
        .args(["--model", "gpuflow-sim", "--url", url])
        .args(["--endpoint-type", "completions", "--streaming"])
        .arg("--tokenizer")
        .arg(tokenizer)
        .args(["--prompt-corpus", "random", "--random-seed", "1"])
        .args(["--isl", &INPUT_TOKENS.to_string()])
        .args(["--osl", &OUTPUT_TOKENS.to_string()])
        .args(["--concurrency", &CONCURRENCY.to_string()])
        .args(["--request-count", &n.to_string()])
        .args([
            "--extra-inputs",
            "ignore_eos:true",
            "--use-server-token-count",
        ])
        .args([
            "--ui-type",
            "none",
            "--no-server-metrics",
            "--no-gpu-telemetry",
        ])
        .args(["--workers-max", "1"])
        .arg("--artifact-dir")
        .arg(out.join("aiperf"));
    c
}

/// inference-perf with one worker process (its default is one per CPU of the machine, not of
/// the core it is pinned to), the `random` data set (exact lengths through the tokenizer).
fn inference_perf_command(venv: &Path, tokenizer: &Path, url: &str, n: u64, out: &Path) -> Command {
    let config = out.join("inference-perf.yaml");
    let lengths = |len: u64| {
        format!(
            "{{min: {len}, max: {len}, mean: {len}, std_dev: 0, total_count: {n}, type: fixed}}"
        )
    };
    let yaml = format!(
        "api: {{type: completion, streaming: true}}\n\
         data:\n  type: random\n  input_distribution: {}\n  output_distribution: {}\n\
         load:\n  type: concurrent\n  stages: [{{num_requests: {n}, concurrency_level: {CONCURRENCY}}}]\n  \
         num_workers: 1\n  worker_max_concurrency: {CONCURRENCY}\n  base_seed: 1\n\
         server: {{type: vllm, model_name: gpuflow-sim, base_url: \"{url}\", ignore_eos: true}}\n\
         tokenizer: {{pretrained_model_name_or_path: \"{}\"}}\n\
         storage: {{local_storage: {{path: \"{}\"}}}}\n",
        lengths(INPUT_TOKENS),
        lengths(OUTPUT_TOKENS),
        tokenizer.display(),
        out.join("inference-perf").display(),
    );
    std::fs::write(&config, yaml).unwrap();
    let mut c = pinned(CLIENT_CPU, venv.join("bin/inference-perf"));
    c.arg("-c").arg(config);
    // The hub's documented offline switches: the tokenizer is the local folder or nothing.
    c.env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1");
    c
}

/// The rate each tool reports itself: gpuflow's JSON on stdout, AIPerf's and
/// inference-perf's summary files.
fn own_rate(out: &Path, stdout: &str) -> Option<f64> {
    let read = |p: PathBuf| -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
    };
    if let Ok(v) = serde_json::from_str::<Value>(stdout) {
        return v["request_throughput"].as_f64();
    }
    if let Some(v) = read(out.join("aiperf/profile_export_aiperf.json")) {
        return v["request_throughput"]["avg"].as_f64();
    }
    let v = read(out.join("inference-perf/stage_0_lifecycle_metrics.json"))?;
    v["successes"]["throughput"]["requests_per_sec"].as_f64()
}

// ---- the simulator's record: what really reached the server ----

struct RecordWindow {
    requests: u64,
    span_s: f64,
    mismatches: Vec<String>,
}

fn sim_pid(record: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(record).ok()?;
    let start: Value = serde_json::from_str(text.lines().next()?).ok()?;
    u32::try_from(start["pid"].as_u64()?).ok()
}

/// The requests recorded after byte `from`, waiting briefly for the last lines: the
/// simulator writes a request's line as the request ends, which can be just after the client
/// saw its last byte and exited.
fn read_record(record: &Path, from: u64, expected: u64) -> RecordWindow {
    let deadline = Instant::now() + Duration::from_secs(2);
    let requests = loop {
        let mut text = String::new();
        let mut file = File::open(record).unwrap();
        file.seek(SeekFrom::Start(from)).unwrap();
        file.read_to_string(&mut text).unwrap();
        let requests: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == "request")
            .collect();
        if requests.len() as u64 >= expected || Instant::now() > deadline {
            break requests;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let ns = |v: &Value, at: &str| v[at]["unix_ns"].as_u64().unwrap_or(0);
    let first = requests
        .iter()
        .map(|r| ns(r, "received"))
        .min()
        .unwrap_or(0);
    let last = requests
        .iter()
        .map(|r| ns(r, "finished"))
        .max()
        .unwrap_or(0);
    let expect: [(&str, Value); 6] = [
        ("endpoint", "/v1/completions".into()),
        ("stream", true.into()),
        ("prompt_tokens", INPUT_TOKENS.into()),
        ("max_tokens", OUTPUT_TOKENS.into()),
        ("completion_tokens", OUTPUT_TOKENS.into()),
        ("outcome", "complete".into()),
    ];
    let mut mismatches = Vec::new();
    for (field, want) in expect {
        let off = requests.iter().filter(|r| r[field] != want).count();
        if off > 0 {
            let example = requests.iter().find(|r| r[field] != want).unwrap();
            mismatches.push(format!(
                "{off} requests had {field} {} (asked {want})",
                example[field]
            ));
        }
    }
    RecordWindow {
        requests: requests.len() as u64,
        span_s: last.saturating_sub(first) as f64 / 1e9,
        mismatches,
    }
}

// ---- CPU time of processes, from /proc ----

/// The fields of `/proc/<pid>/stat` after the command name (which may hold spaces):
/// index 0 is field 3 (`state`) of proc(5).
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

fn ticks_to_s(fields: &[String], at: &[usize]) -> f64 {
    let ticks: u64 = at
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    ticks as f64 / rustix::param::clock_ticks_per_second() as f64
}

/// User + system time of every child this process has reaped (`cutime` + `cstime`), the
/// same total `getrusage(RUSAGE_CHILDREN)` gives.
fn children_cpu_s() -> f64 {
    ticks_to_s(&stat_fields("self").unwrap(), &[13, 14])
}

/// User + system time of one running process (`utime` + `stime`).
fn process_cpu_s(pid: u32) -> f64 {
    stat_fields(&pid.to_string()).map_or(0.0, |f| ticks_to_s(&f, &[11, 12]))
}

/// Reaps every child of this process outside its own process group (the simulator shares
/// this group; each client has its own): the client's helpers, re-parented here when the
/// client exited. Those still running after `grace` are killed. Returns how many were.
fn reap_descendants(grace: Duration) -> usize {
    let me = rustix::process::getpid().as_raw_nonzero().get().to_string();
    let my_group = stat_fields("self").unwrap()[2].clone();
    let deadline = Instant::now() + grace;
    let mut killed = 0;
    loop {
        let children: Vec<Pid> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
            .filter(|pid| {
                stat_fields(pid).is_some_and(|f| f.get(1) == Some(&me) && f[2] != my_group)
            })
            .filter_map(|pid| Pid::from_raw(pid.parse().ok()?))
            .collect();
        if children.is_empty() {
            return killed;
        }
        let late = Instant::now() > deadline;
        for pid in children {
            if late {
                rustix::process::kill_process(pid, Signal::KILL).ok();
                killed += 1;
                rustix::process::waitpid(Some(pid), WaitOptions::empty()).ok();
            } else {
                rustix::process::waitpid(Some(pid), WaitOptions::NOHANG).ok();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---- the Python tools: a Python, their virtualenvs, the tokenizer ----

struct PythonTools {
    tokenizer: PathBuf,
    aiperf: Result<PathBuf, String>,
    inference_perf: Result<PathBuf, String>,
}

fn python_tools(work: &Path) -> Result<PythonTools, String> {
    let python = find_python()?;
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("client-venvs");
    std::fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let aiperf = venv(&python, &root, AIPERF);
    let inference_perf = venv(&python, &root, INFERENCE_PERF);
    // Both venvs hold `tokenizers` (through transformers); either can write the tokenizer.
    let tokenizer = work.join("word-tokenizer");
    let mut why = "no virtualenv could be installed".to_owned();
    let mut written = false;
    for venv in [&aiperf, &inference_perf].into_iter().flatten() {
        let out = Command::new(venv.join("bin/python"))
            .arg(WORD_TOKENIZER)
            .arg(&tokenizer)
            .output()
            .map_err(|e| e.to_string())?;
        written = out.status.success();
        if written {
            break;
        }
        why = format!(
            "{WORD_TOKENIZER} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    if !written {
        return Err(why);
    }
    Ok(PythonTools {
        tokenizer,
        aiperf,
        inference_perf,
    })
}

/// A Python ≥ 3.12 (inference-perf 0.7.0 needs it; AIPerf 0.13.0 runs on it too).
fn find_python() -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = if let Some(p) = std::env::var_os("GPUFLOW_BENCH_PYTHON") {
        vec![p.into()]
    } else {
        let mut c: Vec<PathBuf> = ["python3.13", "python3.12", "python3"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let pyenv = std::env::var_os("PYENV_ROOT")
            .map(PathBuf::from)
            .or_else(|| Some(PathBuf::from(std::env::var_os("HOME")?).join(".pyenv")));
        if let Some(Ok(versions)) = pyenv.map(|p| std::fs::read_dir(p.join("versions"))) {
            // Newest first: "3.13.0" before "3.9.18".
            let mut found: Vec<(Vec<u32>, PathBuf)> = versions
                .filter_map(|e| {
                    let dir = e.ok()?.path();
                    let name = dir.file_name()?.to_str()?.to_owned();
                    let version = name.split('.').map_while(|p| p.parse().ok()).collect();
                    Some((version, dir.join("bin/python3")))
                })
                .collect();
            found.sort();
            c.extend(found.into_iter().rev().map(|(_, python)| python));
        }
        c
    };
    let new_enough = |p: &PathBuf| {
        Command::new(p)
            .args([
                "-c",
                "import sys, venv; sys.exit(sys.version_info < (3, 12))",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    candidates.iter().find(|p| new_enough(p)).cloned().ok_or_else(|| {
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        format!(
            "no Python 3.12 or newer with the venv module (inference-perf 0.7.0 requires it); tried {}. Set GPUFLOW_BENCH_PYTHON to one.",
            tried.join(", ")
        )
    })
}

/// The virtualenv of `spec` (`name==version`) under `root`, installed from PyPI on first use.
/// A marker written after a successful install tells a complete one from a broken one.
fn venv(python: &Path, root: &Path, spec: &str) -> Result<PathBuf, String> {
    let dir = root.join(spec.replace("==", "-"));
    let marker = dir.join("gpuflow-installed");
    if marker.exists() {
        return Ok(dir);
    }
    println!(
        "  installing {spec} from PyPI into {} (first run only; minutes)",
        dir.display()
    );
    std::fs::remove_dir_all(&dir).ok();
    let log_path = root.join(format!("{}.pip.log", spec.replace("==", "-")));
    let run = |c: &mut Command| -> Result<(), String> {
        let log = File::create(&log_path).map_err(|e| e.to_string())?;
        let status = c
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .status()
            .map_err(|e| format!("cannot run {:?}: {e}", c.get_program()))?;
        if status.success() {
            return Ok(());
        }
        let output = std::fs::read_to_string(&log_path).unwrap_or_default();
        Err(format!(
            "{:?} exited with {status} (log: {}):\n{}",
            c.get_program(),
            log_path.display(),
            tail(&output, 6)
        ))
    };
    let installed = run(Command::new(python).arg("-m").arg("venv").arg(&dir))
        .and_then(|()| run(Command::new(dir.join("bin/pip")).args(["install", "--quiet", spec])));
    match installed {
        Ok(()) => {
            File::create(&marker).map_err(|e| e.to_string())?;
            std::fs::remove_file(&log_path).ok();
            Ok(dir)
        }
        Err(why) => {
            std::fs::remove_dir_all(&dir).ok();
            Err(format!("installing {spec} failed: {why}"))
        }
    }
}

// ---- the report ----

fn print_report(results: &[(String, Result<Measured, String>)], large: u64) {
    let rows: Vec<(&String, &Measured)> = results
        .iter()
        .filter_map(|(name, m)| Some((name, m.as_ref().ok()?)))
        .collect();
    let mut out = String::new();
    let header = |out: &mut String, cells: [&str; 7]| {
        let [a, b, c, d, e, f, g] = cells;
        writeln!(
            out,
            "  {a:<22} {b:>8} {c:>10} {d:>11} {e:>11} {f:>9} {g:>9}"
        )
        .unwrap();
    };
    let whole = format!("({large} run)");
    header(
        &mut out,
        [
            "client",
            "req/s",
            "own req/s",
            "CPU ms/req",
            "CPU ms/req",
            "client",
            "sim",
        ],
    );
    header(
        &mut out,
        [
            "",
            "(sim)",
            "(reported)",
            "(marginal)",
            &whole,
            "core busy",
            "core busy",
        ],
    );
    for (name, m) in &rows {
        let own = m.own_rate.map_or("-".to_owned(), |r| format!("{r:.0}"));
        writeln!(
            out,
            "  {name:<22} {:>8.0} {own:>10} {:>11.3} {:>11.3} {:>8.0}% {:>8.0}%",
            m.server_rate,
            m.cpu_ms_marginal,
            m.cpu_ms_whole,
            m.client_busy() * 100.0,
            m.sim_busy * 100.0
        )
        .unwrap();
        for mismatch in &m.mismatches {
            writeln!(out, "    NOT like for like: {mismatch}").unwrap();
        }
    }
    for (name, why) in results
        .iter()
        .filter_map(|(n, m)| Some((n, m.as_ref().err()?)))
    {
        writeln!(out, "  {name}: not measured: {why}").unwrap();
    }
    if let Some((_, g)) = rows.first().filter(|(name, _)| *name == "gpuflow bench") {
        for (name, other) in &rows[1..] {
            let (rate, cpu) = (
                g.server_rate / other.server_rate,
                g.cpu_ms_marginal / other.cpu_ms_marginal,
            );
            writeln!(
                out,
                "  gpuflow / {name}: {rate:.1}× the rate, {cpu:.3}× the CPU per request (goal ≥ 5× the rate: {})",
                if rate >= 5.0 { "met" } else { "NOT met" }
            )
            .unwrap();
        }
        // gpuflow measures its own CPU over exactly the sending (start-up and the final
        // statistics left out), so its figure says best whether the client was the limit.
        let client = g.own_cores.unwrap_or_else(|| g.client_busy());
        let limit = if client >= 0.9 && client >= g.sim_busy {
            "the client's core was the limit"
        } else if g.sim_busy >= 0.9 {
            "the simulator was the limit"
        } else {
            "neither process filled its core (other work on the machine may have)"
        };
        writeln!(
            out,
            "  gpuflow: {:.3} ms CPU per request (goal ≤ 0.3: {}); while it sent, its core was {:.0}% busy (its own figure) and the simulator's {:.0}%: {limit}",
            g.cpu_ms_marginal,
            if g.cpu_ms_marginal <= 0.3 { "met" } else { "NOT met" },
            client * 100.0,
            g.sim_busy * 100.0,
        )
        .unwrap();
    }
    print!("{out}");
}
