//! `make bench` (alone: `cargo bench --bench real_server`): gpuflow's load generator against a
//! real server nobody on this team wrote, llama.cpp's `llama-server` (built by
//! `images/llamacpp/llama-server.sh` from the sources vendored in the llama-cpp-python sdist,
//! cached outside the clone), serving a random-weight GGUF on 127.0.0.1.
//!
//! (a) Single stream, `small` model: gpuflow's decode tok/s beside the server's own
//!     `timings.predicted_per_second`, request by request (mean of each, and the ratio), and
//!     gpuflow's median TTFT beside the server's median `timings.prompt_ms` (the difference
//!     is the first token's decode plus the trip, in ms).
//! (b) Throughput, `tiny` model with 4 slots: gpuflow's requests/s at concurrency 4 beside a
//!     minimal independent client's (`benches/minimal_client.py`, Python standard library,
//!     threads, one new connection per request) at the same concurrency, prompt length and
//!     `max_tokens`. Run in `CYCLES` cycles of independent, gpuflow, gpuflow, independent, so
//!     a drift of the machine's speed during the run weighs on both alike; each rate is its
//!     requests over the summed durations of its runs, and each run's own rate is shown.
//!
//! Nothing is pinned: the server (2 threads) and the client share the machine's cores, as
//! they would on a GPU host. The process exits non-zero only when a measurement is broken
//! (the server does not start, a client fails to run or loses requests, the server gives no
//! timings), never because of a ratio. `GPUFLOW_BENCH_SCALE` (default 1) multiplies the
//! request counts; `GPUFLOW_BENCH_PYTHON` names the Python for the independent client
//! (default `python3`; any Python 3 will do).

use std::path::Path;
use std::process::{Command, Stdio};

#[path = "../tests/llama_process.rs"]
mod llama_process;

use gpuflow::bench::stats::Summary;
use gpuflow::bench::{self, BenchConfig, BenchInputs, BenchResult};
use llama_process::{LlamaServer, llama_dir};
use serde_json::Value;

/// Cycles of the throughput comparison (each: independent, gpuflow, gpuflow, independent).
const CYCLES: u64 = 3;
const MINIMAL_CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/minimal_client.py");

fn main() {
    let scale: u64 = std::env::var("GPUFLOW_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = llama_dir();
    println!(
        "real server: llama.cpp llama-server ({}), random-weight GGUF models, 127.0.0.1, --threads 2, not pinned",
        version(dir)
    );
    let mut broken = Vec::new();
    if let Err(why) = single_stream(&runtime, scale) {
        println!("  BROKEN: {why}");
        broken.push(why);
    }
    if let Err(why) = throughput(&runtime, scale) {
        println!("  BROKEN: {why}");
        broken.push(why);
    }
    if !broken.is_empty() {
        eprintln!("real_server: {} broken measurement(s)", broken.len());
        std::process::exit(1);
    }
}

/// (a): decode speed and TTFT against the server's own `timings`.
fn single_stream(runtime: &tokio::runtime::Runtime, scale: u64) -> Result<(), String> {
    let (requests, input, output) = (20 * scale, 64, 128);
    let server = LlamaServer::ready("small", &["-np", "1", "-c", "2048"])?;
    println!(
        "single stream: `small` model (-np 1), {requests} requests × {output} output tokens, {input} prompt words, 1 warm-up"
    );
    let cfg = config(
        &server.url(),
        &[
            ("mode", "single-stream"),
            ("requests", &requests.to_string()),
            ("warmup", "1"),
            ("input-tokens", &input.to_string()),
            ("output-tokens", &output.to_string()),
            ("request-timeout", "60s"),
        ],
    );
    let result = run_bench(runtime, &cfg)?;
    drop(server);
    let m = &result.levels[0].pooled;
    if m.failed > 0 || m.completed != requests {
        return Err(format!(
            "single stream: {} of {requests} completed, {} failed {:?}: {:?}",
            m.completed,
            m.failed,
            m.errors,
            result.first_error_messages(3)
        ));
    }
    let (mut ours, mut theirs, mut ttft, mut prompt_ms, mut gap, mut prompt_n) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for r in result.levels[0].runs.iter().flat_map(|r| &r.records) {
        let t = r.server_timings.as_ref().ok_or_else(|| {
            format!(
                "request {} has no server `timings` (llama-server sends them on its last event)",
                r.id
            )
        })?;
        let (Some(o), Some(s), Some(f), Some(p)) = (
            r.decode_tok_s(),
            t.predicted_per_second,
            r.ttft_ms(),
            t.prompt_ms,
        ) else {
            return Err(format!(
                "request {}: a figure is missing (decode {:?}, TTFT {:?}, timings {t:?})",
                r.id,
                r.decode_tok_s(),
                r.ttft_ms()
            ));
        };
        ours.push(o);
        theirs.push(s);
        ttft.push(f);
        prompt_ms.push(p);
        gap.push(f - p);
        prompt_n.extend(t.prompt_n.map(|n| n as f64));
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (ours_mean, theirs_mean) = (mean(&ours), mean(&theirs));
    let (ttft_med, prompt_med, gap_sum) = (
        Summary::of(&ttft).median,
        Summary::of(&prompt_ms).median,
        Summary::of(&gap),
    );
    println!(
        "  decode tok/s   gpuflow {ours_mean:>8.1}   server's predicted_per_second {theirs_mean:>8.1}   ratio {:.4}×",
        ours_mean / theirs_mean
    );
    println!(
        "  median TTFT    gpuflow {ttft_med:>8.2} ms  server's prompt_ms (median) {prompt_med:>8.2} ms  difference {:+.2} ms",
        ttft_med - prompt_med
    );
    println!(
        "  TTFT − prompt_ms request by request: median {:.2} ms, min {:.2} ms, max {:.2} ms (the first token's decode and the trip); server counted {:.0} prompt tokens on average",
        gap_sum.median,
        gap_sum.min,
        gap_sum.max,
        if prompt_n.is_empty() {
            f64::NAN
        } else {
            mean(&prompt_n)
        }
    );
    Ok(())
}

/// One client's measured run for (b).
struct Throughput {
    completed: u64,
    failed: u64,
    errors: String,
    duration_s: f64,
    /// The server's prompt tokens (`usage`) over the completed requests.
    prompt_tokens: u64,
}

/// (b): gpuflow's request rate against the minimal independent client's.
fn throughput(runtime: &tokio::runtime::Runtime, scale: u64) -> Result<(), String> {
    let (concurrency, requests, input, output, warmup) = (4u64, 400 * scale, 16, 16, 4);
    let server = LlamaServer::ready("tiny", &["-np", "4", "-c", "4096"])?;
    println!(
        "throughput: `tiny` model (-np 4), concurrency {concurrency}, {requests} requests × {output} output tokens, {input} prompt words, {warmup} warm-up; {CYCLES} cycles of independent, gpuflow, gpuflow, independent"
    );
    let python = std::env::var("GPUFLOW_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let independent = |seed: u64| -> Result<Throughput, String> {
        let out = Command::new(&python)
            .arg(MINIMAL_CLIENT)
            .args(["--url", &server.url()])
            .args(["--concurrency", &concurrency.to_string()])
            .args(["--requests", &requests.to_string()])
            .args(["--warmup", &warmup.to_string()])
            .args(["--input-tokens", &input.to_string()])
            .args(["--output-tokens", &output.to_string()])
            .args(["--seed", &seed.to_string()])
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run `{python} {MINIMAL_CLIENT}`: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "the independent client failed ({}): {stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let v: Value = serde_json::from_str(stdout.trim())
            .map_err(|e| format!("the independent client printed no JSON ({e}): {stdout}"))?;
        Ok(Throughput {
            completed: v["completed"].as_u64().unwrap_or(0),
            failed: v["failed"].as_u64().unwrap_or(0),
            errors: v["errors"].to_string(),
            duration_s: v["duration_s"].as_f64().unwrap_or(0.0),
            prompt_tokens: v["prompt_tokens"].as_u64().unwrap_or(0),
        })
    };
    let mut reconnects = 0;
    let mut connections = 0;
    let mut gpuflow_run = || -> Result<Throughput, String> {
        let cfg = config(
            &server.url(),
            &[
                ("mode", "concurrency"),
                ("concurrency", &concurrency.to_string()),
                ("requests", &requests.to_string()),
                ("warmup", &warmup.to_string()),
                ("input-tokens", &input.to_string()),
                ("output-tokens", &output.to_string()),
                ("request-timeout", "60s"),
            ],
        );
        let result = run_bench(runtime, &cfg)?;
        let m = &result.levels[0].pooled;
        reconnects += m.honesty.reconnects;
        connections += m.honesty.connections_opened;
        Ok(Throughput {
            completed: m.completed,
            failed: m.failed,
            errors: format!("{:?}", m.errors),
            duration_s: m.duration,
            prompt_tokens: m.total_input_tokens.unwrap_or(0),
        })
    };
    let mut runs = Vec::new();
    for cycle in 0..CYCLES {
        runs.push(("independent", independent(2 * cycle + 11)?));
        runs.push(("gpuflow", gpuflow_run()?));
        runs.push(("gpuflow", gpuflow_run()?));
        runs.push(("independent", independent(2 * cycle + 12)?));
    }
    drop(server);
    let pooled = |name: &str| -> (f64, u64, u64, Vec<String>, f64) {
        let mine: Vec<&Throughput> = runs
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, t)| t)
            .collect();
        let completed: u64 = mine.iter().map(|t| t.completed).sum();
        let failed: u64 = mine.iter().map(|t| t.failed).sum();
        let duration: f64 = mine.iter().map(|t| t.duration_s).sum();
        let each = mine
            .iter()
            .map(|t| format!("{:.1}", t.completed as f64 / t.duration_s.max(1e-9)))
            .collect();
        let prompt: u64 = mine.iter().map(|t| t.prompt_tokens).sum();
        (
            completed as f64 / duration.max(1e-9),
            completed,
            failed,
            each,
            prompt as f64 / completed.max(1) as f64,
        )
    };
    let (ind_rate, ind_done, ind_failed, ind_each, ind_prompt) = pooled("independent");
    let (gf_rate, gf_done, gf_failed, gf_each, gf_prompt) = pooled("gpuflow");
    println!(
        "  independent client  {ind_rate:>8.1} req/s  ({} per run; {ind_done} completed, {ind_failed} failed; {ind_prompt:.1} prompt tokens per request; Python threads, one new connection per request)",
        ind_each.join(", ")
    );
    println!(
        "  gpuflow bench       {gf_rate:>8.1} req/s  ({} per run; {gf_done} completed, {gf_failed} failed; {gf_prompt:.1} prompt tokens per request; keep-alive, {connections} connections opened, {reconnects} requests resent on a new one after the server closed its)",
        gf_each.join(", ")
    );
    println!(
        "  ratio gpuflow / independent: {:.3}× the request rate",
        gf_rate / ind_rate
    );
    let lost: Vec<String> = runs
        .iter()
        .filter(|(_, t)| t.failed > 0 || t.completed != requests)
        .map(|(n, t)| {
            format!(
                "{n}: {} of {requests} completed, {} failed {}",
                t.completed, t.failed, t.errors
            )
        })
        .collect();
    if !lost.is_empty() {
        return Err(format!("throughput: requests lost: {}", lost.join("; ")));
    }
    Ok(())
}

fn run_bench(runtime: &tokio::runtime::Runtime, cfg: &BenchConfig) -> Result<BenchResult, String> {
    runtime
        .block_on(bench::run(cfg, &|_| {}))
        .map_err(|e| format!("gpuflow's benchmark failed: {e}"))
}

fn config(url: &str, pairs: &[(&str, &str)]) -> BenchConfig {
    let mut inputs = serde_json::Map::new();
    inputs.insert("target".into(), url.into());
    for (k, v) in pairs {
        inputs.insert((*k).into(), (*v).into());
    }
    let inputs = BenchInputs::from_json(&inputs).expect("valid inputs");
    BenchConfig::from_inputs(&inputs).expect("a valid benchmark")
}

/// `llama-server --version`'s first line, or the cache folder's name.
fn version(dir: &Path) -> String {
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let out = Command::new(dir.join("bin/llama-server"))
        .arg("--version")
        .output()
        .ok();
    let text = out
        .map(|o| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
        .unwrap_or_default();
    match text.lines().find(|l| l.starts_with("version")) {
        Some(line) => format!("{}, llama-cpp-python {folder}", line.trim()),
        None => format!("llama-cpp-python {folder}"),
    }
}
