//! `make bench`: the load generator's accuracy and capacity against `gpuflow-sim` run as its
//! own process (pinned to CPU 0 with `taskset` when there are two or more CPUs, so client and
//! server do not share a core), measured in the same run.
//!
//! (a) Accuracy at concurrency 64: when each chunk arrived by the client's clock against when
//!     the simulator's record says it was sent (wall clocks of one host), for the first chunk
//!     (the TTFT error) and every gap (the ITL error). Goal: median ≤ 0.2 ms, p99 ≤ 2 ms.
//! (b) Capacity: requests/s and client CPU per request on tiny requests, against a baseline
//!     client that only reads bytes (hyper, the same keep-alive connections, no SSE parsing,
//!     no clock reads) at the same concurrency: the ratio shows what measuring costs. Goal:
//!     limited only by the simulator (ratio ≈ 1), CPU per request ≤ 0.3 ms. The comparison
//!     with AIPerf and inference-perf is `benches/clients.rs`.
//!
//! `GPUFLOW_BENCH_SCALE` (default 1) multiplies the request counts.

#[path = "sim_process.rs"]
mod sim_process;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use gpuflow::bench::stats::Summary;
use gpuflow::bench::{self, BenchConfig, BenchInputs, process_cpu_time};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use sim_process::start_sim;

fn config(url: &str, pairs: &[(&str, String)]) -> BenchConfig {
    let mut inputs = serde_json::Map::new();
    inputs.insert("target".into(), url.into());
    inputs.insert("model".into(), "gpuflow-sim".into());
    for (k, v) in pairs {
        inputs.insert((*k).into(), v.clone().into());
    }
    let inputs = BenchInputs::from_json(&inputs).expect("valid inputs");
    BenchConfig::from_inputs(&inputs).expect("a valid benchmark")
}

fn main() {
    let scale: u64 = std::env::var("GPUFLOW_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(accuracy(scale));
    runtime.block_on(capacity(scale));
}

async fn accuracy(scale: u64) {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record.jsonl");
    let sim = start_sim(&[
        "--ttft",
        "20ms",
        "--tokens-per-second",
        "200",
        "--record",
        record.to_str().unwrap(),
    ]);
    let requests = 256 * scale;
    let cfg = config(
        &sim.url,
        &[
            ("concurrency", "64".into()),
            ("requests", requests.to_string()),
            ("warmup", "64".into()),
            ("input-tokens", "16".into()),
            ("output-tokens", "32".into()),
        ],
    );
    let result = bench::run(&cfg, &|_| {}).await.expect("the benchmark runs");
    let server: HashMap<String, Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "request")
        .filter_map(|v| Some((v["client_request_id"].as_str()?.to_owned(), v)))
        .collect();
    let (mut ttft_err, mut itl_err) = (Vec::new(), Vec::new());
    for r in &result.levels[0].runs[0].records {
        let Some(s) = server.get(&r.id) else { continue };
        let chunks = s["chunks"].as_array().unwrap();
        let sent: Vec<f64> = chunks
            .iter()
            .map(|c| c["unix_ns"].as_u64().unwrap() as f64)
            .collect();
        let sent_mono: Vec<f64> = chunks
            .iter()
            .map(|c| c["mono_ns"].as_u64().unwrap() as f64)
            .collect();
        if let (Some(first_ms), Some(first_sent)) = (r.chunks_ms.first(), sent.first()) {
            let arrived = r.start_unix_ns as f64 + first_ms * 1e6;
            ttft_err.push(((arrived - first_sent) / 1e6).abs());
        }
        for (gap, pair) in r.itls_ms().zip(sent_mono.windows(2)) {
            itl_err.push((gap - (pair[1] - pair[0]) / 1e6).abs());
        }
    }
    let (t, i) = (Summary::of(&ttft_err), Summary::of(&itl_err));
    let m = &result.levels[0].pooled;
    println!(
        "accuracy: concurrency 64, {requests} requests × 32 tokens, against the simulator's record"
    );
    let verdict = |s: &Summary| {
        if s.median <= 0.2 && s.p99 <= 2.0 {
            "met"
        } else {
            "NOT met"
        }
    };
    println!(
        "  TTFT error (first chunk)  median {:.3} ms  p99 {:.3} ms  max {:.3} ms  (goal ≤ 0.2 / ≤ 2: {})",
        t.median,
        t.p99,
        t.max,
        verdict(&t)
    );
    println!(
        "  ITL error  ({} gaps)     median {:.3} ms  p99 {:.3} ms  max {:.3} ms  (goal ≤ 0.2 / ≤ 2: {})",
        i.count,
        i.median,
        i.p99,
        i.max,
        verdict(&i)
    );
    println!(
        "  client: {:.3} ms CPU per request, {} in flight at most, {} connections",
        m.honesty.client_cpu_ms_per_request,
        m.honesty.max_concurrent_requests,
        m.honesty.connections_opened
    );
    drop(sim);
}

async fn capacity(scale: u64) {
    let sim = start_sim(&["--ttft", "0ms", "--tokens-per-second", "1000000000"]);
    let (requests, concurrency) = (2000 * scale, 32u64);
    let body = Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "model": "gpuflow-sim", "prompt": "a b c d", "max_tokens": 4, "stream": true,
            "stream_options": {"include_usage": true}, "ignore_eos": true
        }))
        .unwrap(),
    );

    // Baseline: the same keep-alive connections, bytes read and dropped.
    let addr = sim.url.trim_start_matches("http://").to_owned();
    let next = Arc::new(AtomicU64::new(0));
    let cpu_before = process_cpu_time();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (addr, next, body) = (addr.clone(), next.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(conn);
            while next.fetch_add(1, Ordering::Relaxed) < requests {
                sender.ready().await.unwrap();
                let request = Request::post("/v1/completions")
                    .header("host", &addr)
                    .header("content-type", "application/json")
                    .body(Full::new(body.clone()))
                    .unwrap();
                let response = sender.send_request(request).await.unwrap();
                response.into_body().collect().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let base_s = start.elapsed().as_secs_f64();
    let base_cpu = process_cpu_time().saturating_sub(cpu_before).as_secs_f64() * 1000.0;
    let base_rate = requests as f64 / base_s;
    let base_cpu_per = base_cpu / requests as f64;

    let cfg = config(
        &sim.url,
        &[
            ("concurrency", concurrency.to_string()),
            ("requests", requests.to_string()),
            ("warmup", "0".into()),
            ("input-tokens", "4".into()),
            ("output-tokens", "4".into()),
        ],
    );
    let result = bench::run(&cfg, &|_| {}).await.expect("the benchmark runs");
    let m = &result.levels[0].pooled;
    let rate = m.request_throughput;
    let cpu_per = m.honesty.client_cpu_ms_per_request;
    println!(
        "capacity: {requests} requests of 4 tokens at concurrency {concurrency}, simulator with no delays"
    );
    println!(
        "  byte-reading client   {base_rate:>9.0} req/s  {base_cpu_per:.3} ms CPU per request  (baseline)"
    );
    println!("  gpuflow bench         {rate:>9.0} req/s  {cpu_per:.3} ms CPU per request");
    println!(
        "  ratio {:.2}× the baseline's rate, {:.2}× its CPU per request  (goal ≈ 1× rate, ≤ 0.3 ms CPU per request: {})",
        rate / base_rate,
        cpu_per / base_cpu_per.max(1e-9),
        if cpu_per <= 0.3 { "met" } else { "NOT met" }
    );
    drop(sim);
}
