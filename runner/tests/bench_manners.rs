//! The load generator against the manners of real servers, reproduced by the simulator behind
//! its flags (docs/simulator.md): a kept-alive connection closed right after a stream
//! (llama-server), a server killed mid-run, a prefix cache, a context limit that refuses or
//! cuts requests short. Each test fails on a generator that trusts a polite server.

use std::time::{Duration, Instant};

use gpuflow::bench::{self, BenchError, BenchResult};
use gpuflow::sim::{self, SimConfig};

use crate::support::sim::{SimProcess, serve};

use crate::support::bench::{config, run_ok};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_right_after_a_stream_is_resent_not_failed() {
    let server = serve(SimConfig {
        close_after_stream: true,
        ttft: Duration::from_millis(1),
        tokens_per_second: 5000.0,
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("mode", "concurrency"),
            ("concurrency", "4"),
            ("requests", "300"),
            ("warmup", "0"),
            ("input-tokens", "8"),
            ("output-tokens", "4"),
        ],
    );
    let result = run_ok(&cfg).await;
    let m = &result.levels[0].pooled;
    assert_eq!((m.completed, m.failed), (300, 0), "{:?}", m.errors);
    // Every closed connection is replaced: a resend opens one, and so does a request that
    // found its pooled connection already closed.
    assert!(
        m.honesty.connections_opened > 4,
        "the server closes after every stream: {:?}",
        m.honesty
    );
    assert!(m.honesty.reconnects <= m.honesty.connections_opened);
    let resent: u64 = result.levels[0].runs[0]
        .records
        .iter()
        .map(|r| u64::from(r.reconnects))
        .sum();
    assert_eq!(
        resent, m.honesty.reconnects,
        "counted per request and in all"
    );
    if m.honesty.reconnects > 0 {
        assert!(
            result
                .warnings
                .iter()
                .any(|w| w.contains("resent on a new connection")),
            "{:?}",
            result.warnings
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_ends_the_run_at_once() {
    let mut server = SimProcess::start(&["--ttft", "5ms", "--tokens-per-second", "400"]);
    let cfg = config(
        &format!("http://{}", server.addr()),
        &[
            ("mode", "concurrency"),
            ("concurrency", "4"),
            ("duration", "20s"),
            ("warmup", "0"),
            ("output-tokens", "8"),
            ("model", "gpuflow-sim"),
        ],
    );
    let bench = tokio::spawn(async move { bench::run(&cfg, &|_| {}).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.child.kill().unwrap();
    let killed = Instant::now();
    server.child.wait().unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), bench)
        .await
        .expect("a 20 s run ends soon after its server died")
        .unwrap();
    let ended_after = killed.elapsed();
    assert!(
        ended_after < Duration::from_secs(1),
        "the run ended {ended_after:?} after the kill"
    );
    let Err(BenchError::ServerGone { message, result }) = outcome else {
        panic!("expected the server to be found gone, got {outcome:?}");
    };
    assert!(message.starts_with("the server went away at "), "{message}");
    assert!(message.contains("cannot connect to"), "{message}");
    let m = &result.levels[0].pooled;
    assert!(m.completed > 0, "requests before the kill were measured");
    // Backing off keeps the failures to a handful per worker, not a tight loop of thousands.
    assert!(
        m.failed > 0 && m.failed < 100,
        "{} failed: {:?}",
        m.failed,
        m.errors
    );
    assert!(m.errors.contains_key("connect"), "{:?}", m.errors);
}

/// Median TTFT of a run.
fn median_ttft(result: &BenchResult) -> f64 {
    result.levels[0].pooled.ttft_ms.median
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_invocation_is_not_served_from_the_prefix_cache() {
    let server = serve(SimConfig {
        prefix_cache: true,
        ttft: Duration::from_millis(60),
        tokens_per_second: 2000.0,
        ..SimConfig::local()
    })
    .await;
    let run = |seed: Option<&'static str>| {
        let mut pairs = vec![
            ("mode", "single-stream"),
            ("requests", "4"),
            ("warmup", "0"),
            ("input-tokens", "200"),
            ("output-tokens", "4"),
        ];
        if let Some(seed) = seed {
            pairs.push(("seed", seed));
        }
        config(&server.url(), &pairs)
    };
    let first = run_ok(&run(None)).await;
    let second = run_ok(&run(None)).await;
    assert_ne!(
        first.prompt_seed, second.prompt_seed,
        "each invocation salts its prompts"
    );
    let (a, b) = (median_ttft(&first), median_ttft(&second));
    assert!(
        b > 0.7 * a,
        "the second run's prompts were new to the server: TTFT {a:.1} → {b:.1} ms"
    );
    let cached: u64 = second.levels[0].runs[0]
        .records
        .iter()
        .filter_map(|r| r.cached_prompt_tokens)
        .sum();
    assert!(
        cached < 4 * 20,
        "{cached} prompt tokens came from the cache"
    );

    // A seed repeats the prompts exactly: the cache serves the second run.
    let seeded = run_ok(&run(Some("7"))).await;
    let again = run_ok(&run(Some("7"))).await;
    assert_eq!((seeded.prompt_seed, again.prompt_seed), (7, 7));
    assert!(
        median_ttft(&again) < 0.5 * median_ttft(&seeded),
        "the same prompts again hit the cache: TTFT {:.1} → {:.1} ms",
        median_ttft(&seeded),
        median_ttft(&again)
    );
    let json = first.to_json();
    assert_eq!(json["gpuflow"]["seed"], serde_json::Value::Null);
    assert_eq!(json["gpuflow"]["prompt_seed"], first.prompt_seed);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_opened_are_counted_per_level() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(2),
        tokens_per_second: 2000.0,
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("mode", "concurrency"),
            ("concurrency", "[1, 2, 4]"),
            ("requests", "16"),
            ("warmup", "0"),
            ("output-tokens", "4"),
            // Asking `/v1/models` would open the first connection before the first level.
            ("model", "gpuflow-sim"),
        ],
    );
    let result = run_ok(&cfg).await;
    let opened: Vec<u64> = result
        .levels
        .iter()
        .map(|l| l.pooled.honesty.connections_opened)
        .collect();
    // The pool keeps the earlier levels' connections: each level opens only what it adds.
    assert_eq!(opened, [1, 1, 2]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_context_shows_the_servers_reason_and_no_figures() {
    let server = serve(SimConfig {
        stop_at_context_limit: true,
        max_model_len: 64,
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("requests", "3"),
            ("warmup", "1"),
            ("input-tokens", "100"),
            ("output-tokens", "8"),
        ],
    );
    let Err(BenchError::TooManyErrors { message, result }) = bench::run(&cfg, &|_| {}).await else {
        panic!("every request is over the context");
    };
    assert!(
        message.starts_with("all 3 requests failed (3 http_400"),
        "{message}"
    );
    assert!(
        message.contains("exceeds the available context size (64 tokens)"),
        "the server's reason, not only its status: {message}"
    );
    let table = bench::report::render_table(&result);
    assert!(
        table.contains("exceeds the available context size (64 tokens)"),
        "{table}"
    );
    assert!(table.contains("Warm-up requests failed:"), "{table}");
    assert!(table.contains("1 of 1"), "{table}");
    for figure in [
        "Mean TTFT",
        "Achieved concurrency",
        "-0.00",
        "Request throughput",
    ] {
        assert!(
            !table.contains(figure),
            "`{figure}` has no sample:\n{table}"
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_at_its_context_limit_is_warned_about() {
    let server = serve(SimConfig {
        stop_at_context_limit: true,
        max_model_len: 50,
        tokens_per_second: 5000.0,
        ttft: Duration::from_millis(1),
        ..SimConfig::local()
    })
    .await;
    let cfg = config(
        &server.url(),
        &[
            ("requests", "3"),
            ("warmup", "0"),
            ("input-tokens", "20"),
            ("output-tokens", "100"),
        ],
    );
    let result = run_ok(&cfg).await;
    let m = &result.levels[0].pooled;
    assert_eq!(m.completed, 3);
    assert_eq!(
        m.total_output_tokens,
        Some(3 * 30),
        "the context holds 30 more"
    );
    let warning = result
        .warnings
        .iter()
        .find(|w| w.contains("fewer tokens than asked"))
        .unwrap_or_else(|| panic!("no warning: {:?}", result.warnings));
    assert!(
        warning.contains("3 of 3 requests got fewer tokens than asked (30 of 100"),
        "{warning}"
    );
    assert!(warning.contains("finish_reason `length`"), "{warning}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_read_from_its_own_chunk_or_the_last_one_on_both_endpoints() {
    for usage_chunk in [sim::UsageChunk::Separate, sim::UsageChunk::Final] {
        let server = serve(SimConfig {
            usage_chunk,
            ttft: Duration::from_millis(1),
            tokens_per_second: 5000.0,
            ..SimConfig::local()
        })
        .await;
        for endpoint in ["chat", "completions"] {
            let cfg = config(
                &server.url(),
                &[
                    ("endpoint", endpoint),
                    ("requests", "3"),
                    ("warmup", "0"),
                    ("input-tokens", "12"),
                    ("output-tokens", "9"),
                ],
            );
            let result = run_ok(&cfg).await;
            let m = &result.levels[0].pooled;
            assert!(m.tokens_known, "{usage_chunk:?} {endpoint}");
            assert_eq!(
                (m.total_input_tokens, m.total_output_tokens),
                (Some(3 * 12), Some(3 * 9)),
                "{usage_chunk:?} {endpoint}"
            );
            for r in &result.levels[0].runs[0].records {
                assert_eq!(r.chunks_ms.len(), 9, "usage events carry no token");
                assert_eq!(r.finish_reason.as_deref(), Some("length"));
            }
        }
        server.shutdown().await;
    }
}
