//! Server-side metrics (docs/benchmark.md, "Server-side metrics"): the benchmark scrapes the
//! simulator's `/metrics` around each run and records what it served, and a collapse of its
//! speculative acceptance length fails a comparison on `spec_accept_length` while the
//! throughput stays where it was.

use gpuflow::bench::server_metrics::ServerValue;
use gpuflow::store::{ResultFilter, ResultStore};
use serde_json::Value;

use crate::support::Workspace;
use crate::support::bench::{config, run_ok};
use crate::support::sim::{self, SimProcess};

fn value(values: &[ServerValue], name: &str) -> f64 {
    values
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no `{name}` in {values:?}"))
        .value
}

/// Sums a field over the record's requests of measured run `run` at the first level (warm-up
/// ids end in `-w`).
fn served(record: &Value, run: u32, field: impl Fn(&Value) -> u64) -> u64 {
    let prefix = format!("gpuflow-0-{run}-");
    record["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["client_request_id"]
                .as_str()
                .is_some_and(|id| id.starts_with(&prefix) && !id.contains("-w"))
        })
        .map(field)
        .sum()
}

#[tokio::test]
async fn the_recorded_counts_are_what_the_simulator_served_in_each_run() {
    let server = sim::serve(gpuflow::sim::SimConfig {
        tokens_per_chunk: 4,
        tokens_per_second: 20_000.0,
        ttft: std::time::Duration::from_millis(2),
        prefix_cache: true,
        ..gpuflow::sim::SimConfig::local()
    })
    .await;
    let names = r#"["vllm:generation_tokens_total", "vllm:prompt_tokens_total", "sglang:num_requests_total higher"]"#;
    let result = run_ok(&config(
        &server.url(),
        &[
            ("concurrency", "2"),
            ("requests", "6"),
            ("runs", "2"),
            ("warmup", "2"),
            ("output-tokens", "10"),
            ("input-tokens", "16"),
            ("server-metric-names", names),
        ],
    ))
    .await;
    let record = server.record_json();
    for run in &result.levels[0].runs {
        let v = &run.server;
        let completion = served(&record, run.run, |r| {
            r["completion_tokens"].as_u64().unwrap()
        });
        let chunks = served(&record, run.run, |r| {
            r["chunks"].as_array().unwrap().len() as u64
        });
        let prompt = served(&record, run.run, |r| r["prompt_tokens"].as_u64().unwrap());
        assert_eq!(completion, 60, "6 requests of 10 tokens");
        assert_eq!(
            value(v, "server.vllm:generation_tokens_total"),
            completion as f64
        );
        assert_eq!(value(v, "server.vllm:prompt_tokens_total"), prompt as f64);
        assert_eq!(value(v, "server.sglang:num_requests_total"), 6.0);
        // 10 tokens are chunks of 4, 4 and 2: the acceptance length served is 10 / 3.
        assert_eq!(chunks, 18);
        assert_eq!(
            value(v, "spec_accept_length"),
            completion as f64 / chunks as f64
        );
        // Fresh prompts share only what the synthetic ones have in common, never all of it.
        let hit_rate = value(v, "prefix_cache_hit_rate");
        assert!((0.0..1.0).contains(&hit_rate), "{hit_rate}");
        assert!(value(v, "queue_len") >= 0.0);
    }
    server.shutdown().await;
}

/// The simulator on the host, benchmarked with three runs and compared with the previous
/// run on `metric`.
fn workflow(port: u16, metric: &str) -> String {
    format!(
        r#"on: workflow_dispatch
jobs:
  j:
    steps:
      - uses: benchmark
        with: {{ target: 'http://127.0.0.1:{port}', concurrency: 2, requests: 8, runs: 3, warmup: 1, output-tokens: 64 }}
      - uses: compare-to-baseline
        with: {{ metric: {metric}, baseline: previous }}
"#
    )
}

/// `gpuflow run` of the workflow against a simulator serving `tokens_per_chunk` tokens per
/// step of 3 drafts: the exit code and all it printed.
fn run_against(dir: &Workspace, tokens_per_chunk: &str, metric: &str) -> (Option<i32>, String) {
    let sim = SimProcess::start(&[
        "--ttft",
        "5ms",
        "--tokens-per-second",
        "2000",
        "--num-speculative-tokens",
        "3",
        "--tokens-per-chunk",
        tokens_per_chunk,
    ]);
    dir.write("w.yml", &workflow(sim.addr().port(), metric));
    let out = dir.run_plain_without_docker();
    drop(sim);
    (out.status.code(), out.all())
}

#[test]
fn an_acceptance_collapse_fails_a_comparison_on_spec_accept_length() {
    let dir = Workspace::new();
    let (code, out) = run_against(&dir, "4", "spec_accept_length");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Server (/metrics)"), "{out}");
    assert!(out.contains("spec_accept_length:"), "{out}");

    // The same server again: the acceptance length is what it was.
    let (code, out) = run_against(&dir, "4", "spec_accept_length");
    assert_eq!(code, Some(0), "{out}");

    // Drafts of 3 now accept 1 token a step instead of 3: the same tokens per second reach
    // the client, but the server does twice the steps for them.
    let (code, out) = run_against(&dir, "2", "spec_accept_length");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("regression"), "{out}");
    assert!(out.contains("spec_accept_length"), "{out}");

    // What the store holds of the last two runs: the acceptance length halved, while the
    // throughput a throughput-only gate judges moved far less.
    let store = ResultStore::open(&dir.path().join(".gpuflow/results.db")).unwrap();
    let median = |metric: &str| -> Vec<f64> {
        let mut results = store
            .find(&ResultFilter {
                metric: metric.into(),
                limit: 10,
                ..Default::default()
            })
            .unwrap();
        results.sort_by_key(|r| r.id);
        results
            .iter()
            .map(|r| gpuflow::compare::center(&r.metric(metric).unwrap().samples).unwrap())
            .collect()
    };
    assert_eq!(median("spec_accept_length"), [4.0, 4.0, 2.0]);
    let throughput = median("output_throughput");
    let change = throughput[2] / throughput[1] - 1.0;
    assert!(change.abs() < 0.3, "output_throughput {throughput:?}");
}
