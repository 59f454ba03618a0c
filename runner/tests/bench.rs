//! The built-in load generator against the real simulator over 127.0.0.1, no mocks. Every
//! timing is checked against the simulator's own record of when it sent each chunk (matched
//! by the `x-request-id` the generator sends), with tolerances that hold on a loaded machine
//! but would catch a wrong definition (a chunk gap taken for a token gap, a missed first
//! chunk, a warm-up request counted).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use gpuflow::bench::{self, BenchConfig, BenchError, BenchResult, Progress};
use gpuflow::sim::{SimConfig, SimServer};

use crate::support::bench::{config, run_ok};
use crate::support::sim::serve;
use crate::support::{Workspace, gpuflow};
use serde_json::Value;

/// The simulator's record, by the client's request id.
fn record_by_id(server: &SimServer) -> HashMap<String, Value> {
    server.record_json()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| Some((r["client_request_id"].as_str()?.to_owned(), r.clone())))
        .collect()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn ns(v: &Value) -> f64 {
    v.as_u64().unwrap() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_matches_the_simulators_record() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(40),
        tokens_per_second: 200.0,
        tokens_per_chunk: 2, // a chunk every 10 ms
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("mode", "concurrency"),
            ("concurrency", "4"),
            ("requests", "12"),
            ("warmup", "2"),
            ("input-tokens", "16"),
            ("output-tokens", "20"),
        ],
    );
    let calls = Mutex::new(Vec::<Progress>::new());
    let result = bench::run(&cfg, &|p| calls.lock().unwrap().push(p))
        .await
        .unwrap();
    let level = &result.levels[0];
    let m = &level.pooled;
    let records = &level.runs[0].records;

    // Counts: warm-up excluded; tokens from the server's usage.
    assert_eq!((m.completed, m.failed), (12, 0));
    assert!(m.tokens_known);
    assert_eq!(m.total_input_tokens, Some(12 * 16));
    assert_eq!(m.total_output_tokens, Some(12 * 20));
    let sim = record_by_id(&server);
    assert_eq!(
        sim.len(),
        14,
        "2 warm-up and 12 measured requests reached the server"
    );
    assert_eq!(sim.keys().filter(|id| id.contains("-w")).count(), 2);
    assert!(records.iter().all(|r| !r.id.contains("-w")));

    // Each chunk's arrival against the moment the server sent it (wall clocks of one host).
    let mut arrival_error_ms = Vec::new();
    let mut ttft_vs_server_ms = Vec::new();
    let mut itl_vs_server_ms = Vec::new();
    for r in records {
        let s = &sim[&r.id];
        let chunks = s["chunks"].as_array().unwrap();
        assert_eq!(r.chunks_ms.len(), chunks.len(), "every chunk seen");
        assert_eq!(r.chunks_ms.len(), 10);
        for (client_ms, chunk) in r.chunks_ms.iter().zip(chunks) {
            let client_unix = r.start_unix_ns as f64 + client_ms * 1e6;
            arrival_error_ms.push((client_unix - ns(&chunk["unix_ns"])) / 1e6);
        }
        let server_ttft = (ns(&chunks[0]["unix_ns"]) - ns(&s["received"]["unix_ns"])) / 1e6;
        ttft_vs_server_ms.push(r.ttft_ms().unwrap() - server_ttft);
        for (gap, pair) in r.itls_ms().zip(chunks.windows(2)) {
            let server_gap = (ns(&pair[1]["mono_ns"]) - ns(&pair[0]["mono_ns"])) / 1e6;
            itl_vs_server_ms.push((gap - server_gap).abs());
        }
    }
    let abs: Vec<f64> = arrival_error_ms.iter().map(|e| e.abs()).collect();
    assert!(
        median(&mut abs.clone()) < 3.0,
        "chunk arrival error (ms): {arrival_error_ms:?}"
    );
    assert!(
        median(&mut ttft_vs_server_ms) < 5.0,
        "ttft − server ttft: {ttft_vs_server_ms:?}"
    );
    assert!(
        median(&mut itl_vs_server_ms) < 2.0,
        "|itl − server gap|: {itl_vs_server_ms:?}"
    );

    // Against the configured truth.
    assert!(
        (m.ttft_ms.median - 40.0).abs() < 15.0,
        "ttft {:?}",
        m.ttft_ms
    );
    assert!((m.itl_ms.median - 10.0).abs() < 3.0, "itl {:?}", m.itl_ms);
    assert_eq!(m.itl_ms.count, 12 * 9, "one ITL per gap between chunks");
    // TPOT is per token: 9 gaps of 10 ms over 19 tokens after the first.
    let tpot = m.tpot_ms.unwrap();
    assert!((tpot.median - 90.0 / 19.0).abs() < 1.5, "tpot {tpot:?}");
    let tpc = m.tokens_per_chunk.unwrap();
    assert_eq!((tpc.min, tpc.max), (2.0, 2.0));
    // Throughput against the server's own span of the measured requests.
    let first = records
        .iter()
        .map(|r| ns(&sim[&r.id]["received"]["unix_ns"]))
        .fold(f64::MAX, f64::min);
    let last = records
        .iter()
        .map(|r| ns(&sim[&r.id]["finished"]["unix_ns"]))
        .fold(0.0, f64::max);
    let server_tok_s = 240.0 / ((last - first) / 1e9);
    let client_tok_s = m.output_throughput.unwrap();
    assert!(
        (client_tok_s / server_tok_s - 1.0).abs() < 0.15,
        "client {client_tok_s} tok/s, server {server_tok_s} tok/s"
    );
    assert!((m.request_throughput * m.duration - 12.0).abs() < 1e-9);
    // Closed loop of 4 over 3 rounds: 4 in flight, on 4 kept-alive connections.
    assert_eq!(m.honesty.max_concurrent_requests, 4);
    assert!(
        m.concurrency > 2.5 && m.concurrency <= 4.05,
        "concurrency {}",
        m.concurrency
    );
    assert!(m.honesty.connections_opened <= 4, "{:?}", m.honesty);
    assert!(m.honesty.client_cpu_ms > 0.0);

    // Progress: warm-up first, then the measured run to its end.
    let calls = calls.into_inner().unwrap();
    assert!(calls[0].warmup);
    let last = calls.last().unwrap();
    assert!(!last.warmup);
    assert_eq!((last.done, last.total), (12, Some(12)));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eagle3_single_stream_reports_decode_speed_and_tokens_per_chunk() {
    // Speculative decoding as the client sees it: 4 tokens per event, events 20 ms apart.
    let server = serve(SimConfig {
        ttft: Duration::from_millis(30),
        tokens_per_second: 200.0,
        tokens_per_chunk: 4,
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("output-tokens", "32"),
            ("requests", "1"),
            ("runs", "3"),
            ("warmup", "1"),
        ],
    );
    let result = run_ok(&cfg).await;
    let level = &result.levels[0];
    let m = &level.pooled;
    assert_eq!(m.completed, 3);
    // (32 − 4) tokens over 7 gaps of 20 ms = 200 tok/s.
    let decode = m.decode_tok_s.unwrap();
    assert!((decode.mean / 200.0 - 1.0).abs() < 0.1, "decode {decode:?}");
    assert_eq!(m.tokens_per_chunk.unwrap().mean, 4.0);
    assert_eq!(m.first_chunk_tokens_from, Some("mean per chunk"));
    // Per chunk (ITL) and per token (TPOT) differ by the chunk size.
    assert!((m.itl_ms.median - 20.0).abs() < 3.0, "itl {:?}", m.itl_ms);
    let tpot = m.tpot_ms.unwrap().median;
    assert!((tpot - 140.0 / 31.0).abs() < 1.0, "tpot {tpot}");
    let e2e = m.e2e_tok_s.unwrap().mean;
    assert!((e2e / (32.0 / 0.17) - 1.0).abs() < 0.15, "e2e {e2e}");

    // Across runs: each run, a median and an interval around the mean.
    let across = &level.across_runs["decode_tok_s"];
    assert_eq!(across.values.len(), 3);
    assert!(across.ci95_low <= across.mean && across.mean <= across.ci95_high);
    let outputs = result.outputs();
    let headline: f64 = outputs["output_tok_s"].parse().unwrap();
    assert!((headline / 200.0 - 1.0).abs() < 0.1, "{outputs:?}");
    assert_eq!(outputs["tokens_per_chunk"], "4");

    let table = bench::report::render_table(&result);
    for label in [
        "Inter-token Latency (per chunk)",
        "Time per Output Token (per token, excl. 1st)",
        "Decode tok/s (after the first chunk), mean:",
        "Tokens per chunk, mean:",
        "Across runs",
    ] {
        assert!(table.contains(label), "{label} missing from:\n{table}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_sweep_gives_one_result_per_level_and_vllm_files() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(10),
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("endpoint", "chat"),
            ("concurrency", "[1, 3]"),
            ("requests", "6"),
            ("warmup", "0"),
            ("output-tokens", "5"),
            ("slo", "ttft_ms=5000"),
        ],
    );
    let result = run_ok(&cfg).await;
    assert_eq!(result.levels.len(), 2);
    assert_eq!(result.levels[0].pooled.honesty.max_concurrent_requests, 1);
    assert_eq!(result.levels[1].pooled.honesty.max_concurrent_requests, 3);
    for level in &result.levels {
        assert_eq!(level.pooled.completed, 6);
        assert_eq!(level.pooled.total_output_tokens, Some(30));
        assert_eq!(
            level.pooled.request_goodput,
            Some(level.pooled.request_throughput)
        );
    }

    let dir = Workspace::empty();
    let path = dir.path().join("result.json");
    let written = result
        .write_files(&path, &gpuflow::events::Masker::default())
        .unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "result.json",
            "result.c1.json",
            "result.c3.json",
            "result.requests.jsonl"
        ]
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for key in [
        "date",
        "backend",
        "model_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "errors",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "p99_itl_ms",
        "p95_e2el_ms",
        "p90_itl_ms",
    ] {
        assert!(json.get(key).is_some(), "`{key}` missing");
    }
    assert_eq!(json["backend"], "openai-chat");
    assert_eq!(json["completed"], 6);
    assert_eq!(json["max_concurrency"], 1);
    assert_eq!(json["itls"].as_array().unwrap().len(), 6);
    assert_eq!(json["gpuflow"]["by_level"][1]["max_concurrency"], 3);
    let c3: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("result.c3.json")).unwrap())
            .unwrap();
    assert_eq!(c3["max_concurrency"], 3);
    let lines = std::fs::read_to_string(dir.path().join("result.requests.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 12);
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["completion_tokens"], 5);
    assert!(first["ttft_ms"].as_f64().unwrap() > 0.0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_loop_keeps_its_schedule_and_records_dispatch_lag() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(5),
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("request-rate", "40"),
            ("arrival", "constant"),
            ("requests", "12"),
            ("warmup", "0"),
            ("output-tokens", "3"),
        ],
    );
    let result = run_ok(&cfg).await;
    let run = &result.levels[0].runs[0];
    assert_eq!(run.metrics.completed, 12);
    let lag = run.metrics.honesty.dispatch_lag_ms.unwrap();
    assert_eq!(lag.count, 12);
    assert!(lag.median < 10.0, "{lag:?}");
    // Constant arrivals 25 ms apart: each send at its slot, give or take the lag.
    for r in &run.records {
        let due = r.index as f64 * 0.025;
        assert!(
            r.start_s >= due - 0.001,
            "request {} early: {}",
            r.index,
            r.start_s
        );
        assert!(
            r.start_s - due < 0.03,
            "request {} late: {}",
            r.index,
            r.start_s
        );
    }
    let json = result.to_json();
    assert_eq!(json["request_rate"], 40.0);
    assert_eq!(json["max_concurrency"], Value::Null);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duration_run_starts_no_request_after_its_end() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(20),
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("concurrency", "2"),
            ("duration", "300ms"),
            ("warmup", "0"),
            ("output-tokens", "4"),
        ],
    );
    let result = run_ok(&cfg).await;
    let run = &result.levels[0].runs[0];
    assert!(run.metrics.completed >= 4, "{}", run.metrics.completed);
    assert!(run.records.iter().all(|r| r.start_s < 0.3));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_files_set_the_input_lengths() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(1),
        tokens_per_second: 10_000.0,
        ..SimConfig::local()
    })
    .await;
    let dir = Workspace::empty();
    let path = dir.path().join("p.jsonl");
    std::fs::write(
        &path,
        "{\"prompt\": \"one two three\"}\n{\"prompt\": \"four five\", \"output_tokens\": 7}\n",
    )
    .unwrap();
    let cfg = config(
        &server.url(),
        &[
            ("prompts", "jsonl"),
            ("prompt-file", path.to_str().unwrap()),
            ("requests", "2"),
            ("warmup", "0"),
            ("output-tokens", "3"),
        ],
    );
    assert!(!cfg.ignore_eos, "prompt files keep the server's EOS");
    let result = run_ok(&cfg).await;
    let m = &result.levels[0].pooled;
    assert_eq!(m.total_input_tokens, Some(5));
    assert_eq!(m.total_output_tokens, Some(10));
    server.shutdown().await;
}

async fn run_err(config: &BenchConfig) -> BenchResult {
    match bench::run(config, &|_| {}).await {
        Err(BenchError::TooManyErrors { result, .. }) => *result,
        Err(other) => panic!("expected too many errors, got {other}"),
        Ok(_) => panic!("expected the benchmark to fail"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_counted_by_kind_and_fail_the_benchmark() {
    // A 404 path: every request fails with the server's status.
    let server = serve(SimConfig {
        ttft: Duration::from_millis(1),
        tokens_per_second: 10_000.0,
        ..SimConfig::local()
    })
    .await;
    let url = format!("{}/nope", server.url());
    let cfg = config(&url, &[("model", "m"), ("requests", "3"), ("warmup", "0")]);
    let err = bench::run(&cfg, &|_| {}).await.unwrap_err();
    assert!(
        err.to_string().starts_with(
            "all 3 requests failed (3 http_404: HTTP 404: no route `POST /nope/v1/completions`"
        ),
        "the count and the server's own words: {err}"
    );
    // Without a model, the question to /v1/models fails first and says so.
    let cfg = config(&url, &[("requests", "1")]);
    let err = bench::run(&cfg, &|_| {}).await.unwrap_err();
    assert!(matches!(err, BenchError::Model { .. }), "{err}");
    assert!(err.to_string().contains("/nope/v1/models"), "{err}");
    server.shutdown().await;

    // A server that crashes ~50 ms after its 2nd answer: one at a time, 100 ms each, the 3rd
    // is cut mid-way and the 4th finds no server.
    let server = serve(SimConfig {
        ttft: Duration::from_millis(100),
        tokens_per_second: 10_000.0,
        crash_after_requests: Some(2),
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("model", "m"),
            ("requests", "4"),
            ("warmup", "0"),
            ("output-tokens", "2"),
        ],
    );
    let calls = Mutex::new(0u64);
    let outcome = bench::run(&cfg, &|p| *calls.lock().unwrap() = p.errors).await;
    if let Err(BenchError::TooManyErrors { result, message }) = outcome {
        let m = &result.levels[0].pooled;
        assert_eq!((m.completed, m.failed), (2, 2), "{message}");
        assert_eq!(m.errors.get("connect"), Some(&1), "{message}");
        assert_eq!(m.errors.get("truncated"), Some(&1), "{message}");
        let kinds: Vec<&String> = m.errors.keys().collect();
        assert!(
            kinds
                .iter()
                .all(|k| ["connect", "truncated"].contains(&k.as_str())),
            "{kinds:?}"
        );
        assert!(message.contains("more than the 0% allowed"), "{message}");
        assert_eq!(*calls.lock().unwrap(), m.failed, "progress counts errors");
    } else {
        panic!("the crash was not noticed");
    }

    // A total timeout and an idle timeout.
    let server = serve(SimConfig {
        ttft: Duration::from_secs(3),
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("model", "m"),
            ("requests", "1"),
            ("warmup", "0"),
            ("request-timeout", "150ms"),
        ],
    );
    let result = run_err(&cfg).await;
    assert_eq!(result.levels[0].pooled.errors.get("timeout"), Some(&1));
    server.shutdown().await;
    let server = serve(SimConfig {
        ttft: Duration::from_millis(5),
        tokens_per_second: 2.0, // a 500 ms gap after the first token
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("model", "m"),
            ("requests", "2"),
            ("warmup", "0"),
            ("output-tokens", "3"),
            ("idle-timeout", "150ms"),
            ("max-error-rate", "100%"),
        ],
    );
    // With every failure allowed, the benchmark still fails: nothing completed.
    let result = run_err(&cfg).await;
    let m = &result.levels[0].pooled;
    assert_eq!(m.errors.get("idle_timeout"), Some(&2));
    let json = result.to_json();
    assert_eq!(json["failed"], 2);
    assert!(
        json["errors"][0]
            .as_str()
            .unwrap()
            .contains("no data for 150ms")
    );
    let dir = Workspace::empty();
    result
        .write_files(
            &dir.path().join("r.json"),
            &gpuflow::events::Masker::default(),
        )
        .unwrap();
    let lines = std::fs::read_to_string(dir.path().join("r.requests.jsonl")).unwrap();
    let line: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(line["error"]["kind"], "idle_timeout");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_usage_the_result_says_tokens_are_unknown() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(2),
        tokens_per_second: 5000.0,
        no_usage: true,
        ..SimConfig::local()
    })
    .await;
    let cfg = config(&server.url(), &[("requests", "2"), ("output-tokens", "8")]);
    let result = run_ok(&cfg).await;
    let m = &result.levels[0].pooled;
    assert!(!m.tokens_known);
    assert_eq!(m.total_output_tokens, None);
    assert_eq!(m.output_throughput, None);
    assert_eq!(m.decode_tok_s, None);
    assert_eq!(m.ttft_ms.count, 2, "latencies are still measured");
    assert!(
        result.warnings.iter().any(|w| w.contains("no `usage`")),
        "{:?}",
        result.warnings
    );
    let json = result.to_json();
    assert_eq!(json["total_output_tokens"], Value::Null);
    assert_eq!(json["mean_tpot_ms"], Value::Null);
    assert_eq!(json["gpuflow"]["tokens_known"], false);
    let outputs = result.outputs();
    assert!(!outputs.contains_key("output_throughput"));
    assert!(!outputs.contains_key("output_tok_s"));
    assert!(outputs.contains_key("ttft_ms"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_command_prints_a_table_or_json() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(2),
        tokens_per_second: 5000.0,
        tokens_per_chunk: 2,
        ..SimConfig::local()
    })
    .await;
    let url = server.url();
    let dir = Workspace::empty();
    let save = dir.path().join("out.json");
    let json_run = {
        let url = url.clone();
        let save = save.clone();
        tokio::task::spawn_blocking(move || {
            gpuflow()
                .args([
                    "bench",
                    &url,
                    "-c",
                    "2",
                    "-n",
                    "4",
                    "--output-tokens",
                    "6",
                    "--json",
                ])
                .arg("--save-result")
                .arg(&save)
                .timeout(Duration::from_secs(60))
                .success()
        })
        .await
        .unwrap()
    };
    let json: Value = serde_json::from_str(&json_run.stdout).unwrap();
    assert_eq!(json["completed"], 4);
    assert_eq!(json["total_output_tokens"], 24);
    assert_eq!(json["max_concurrency"], 2);
    assert!(save.exists() && dir.path().join("out.requests.jsonl").exists());

    let table_run = tokio::task::spawn_blocking(move || {
        gpuflow()
            .args(["bench", &url, "--output-tokens", "4", "--requests", "1"])
            .timeout(Duration::from_secs(60))
            .success()
    })
    .await
    .unwrap();
    let table = &table_run.stdout;
    assert!(table.contains("Successful requests:"), "{table}");
    assert!(table.contains("concurrency 1"), "{table}");
    assert!(
        table_run.stderr.is_empty(),
        "no progress line when stderr is not a terminal"
    );

    let bad = gpuflow()
        .args(["bench", "http://127.0.0.1:1", "--mode", "concurency"])
        .status(2);
    let stderr = &bad.stderr;
    assert!(
        stderr.contains("error: `--mode` is `concurency`"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `concurrency`?"), "{stderr}");
    server.shutdown().await;
}
