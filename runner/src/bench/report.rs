//! The readable form of a result: one block per load level in the layout of vLLM's
//! "Serving Benchmark Result" (so numbers are found where people look for them), then the
//! single-stream speeds, the spread across runs, errors, the client's honesty figures and
//! warnings. Per-token and per-chunk latencies are labelled as such. Knows nothing about
//! HTTP or how the result was measured.

use std::fmt::Write;

use super::config::Mode;
use super::metrics::RunMetrics;
use super::result::{BenchResult, LevelResult, mode_name};
use super::stats::Summary;

/// The result as text for a terminal.
pub fn render_table(result: &BenchResult) -> String {
    let mut out = String::new();
    let c = &result.config;
    let _ = writeln!(
        out,
        "benchmark {} · {} · model `{}` · {}",
        c.target,
        c.endpoint.path(),
        result.model,
        mode_name(&c.mode)
    );
    for (i, level) in result.levels.iter().enumerate() {
        // The step's outputs and stored metrics come from the first level.
        render_level(&mut out, level, (i == 0).then_some(&c.mode));
    }
    if !result.warnings.is_empty() {
        out.push('\n');
        for w in &result.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
    }
    out
}

/// What a metric the `benchmark` step stores is, in words, as `compare-to-baseline` names it
/// (`output_tok_s (decode tok/s, per-request median)`): which samples are kept and that the
/// comparison judges their median ([`crate::compare::center`]). `None` for a name the
/// generator does not store.
pub fn metric_meaning(name: &str, mode: &Mode) -> Option<&'static str> {
    let single = matches!(mode, Mode::SingleStream);
    Some(match name {
        "output_tok_s" if single => "decode tok/s, per-request median",
        "output_tok_s" | "output_throughput" => "output tok/s, median of runs",
        "request_throughput" => "req/s, median of runs",
        "total_token_throughput" => "total tok/s, median of runs",
        "ttft_ms" => "TTFT, per-request median",
        "tpot_ms" => "TPOT, per-request median",
        "itl_ms" => "each run's median ITL, median of runs",
        "e2el_ms" => "E2EL, per-request median",
        "decode_tok_s" => "decode tok/s, per-request median",
        "e2e_tok_s" => "end-to-end tok/s, per-request median",
        "tokens_per_chunk" => "tokens per chunk, per-request median",
        "spec_accept_length" => "server's mean speculative acceptance length, per run",
        "prefix_cache_hit_rate" => "server's prefix-cache hit rate, per run",
        "queue_len" => "server's waiting requests, mean per run",
        "kv_cache_usage" => "server's KV-cache usage, mean per run",
        n if n.starts_with("server.") => "from the server's /metrics, per run",
        _ => return None,
    })
}

/// The samples stored as `output_tok_s` for one level: each successful request's decode
/// speed in single-stream mode, each run's output throughput otherwise.
pub fn output_tok_s_samples(level: &LevelResult, mode: &Mode) -> Vec<f64> {
    if matches!(mode, Mode::SingleStream) {
        level
            .runs
            .iter()
            .flat_map(|r| r.records.iter().filter(|x| x.ok()))
            .filter_map(|r| r.decode_tok_s())
            .collect()
    } else {
        level
            .across_runs
            .get("output_throughput")
            .map(|a| a.values.clone())
            .unwrap_or_default()
    }
}

fn row(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{label:<44} {value}");
}

fn opt(v: Option<f64>, precision: usize) -> String {
    v.map_or_else(|| "unknown".to_owned(), |v| format!("{v:.precision$}"))
}

fn header(out: &mut String, title: &str) {
    let _ = writeln!(out, "{:-^60}", format!(" {title} "));
}

fn latency(out: &mut String, title: &str, name: &str, s: Option<&Summary>) {
    header(out, title);
    let Some(s) = s else {
        row(out, &format!("{name} (ms):"), "unknown (no token counts)");
        return;
    };
    if s.count == 0 {
        // A mean of nothing is not 0 ms: say there is no sample.
        row(out, &format!("{name} (ms):"), "no samples");
        return;
    }
    for (what, v) in [
        ("Mean", s.mean),
        ("Median", s.median),
        ("Std", s.std),
        ("P90", s.p90),
        ("P95", s.p95),
        ("P99", s.p99),
    ] {
        row(out, &format!("{what} {name} (ms):"), format!("{v:.2}"));
    }
}

fn render_level(out: &mut String, level: &LevelResult, compared: Option<&Mode>) {
    let m: &RunMetrics = &level.pooled;
    let _ = writeln!(
        out,
        "\n{:=^60}",
        format!(" {} · {} run(s) ", level.level, level.runs.len())
    );
    row(out, "Successful requests:", m.completed);
    row(out, "Failed requests:", m.failed);
    row(out, "Benchmark duration (s):", format!("{:.2}", m.duration));
    if m.completed == 0 {
        // No figure without a sample: a table of zeros would read as a measurement.
        row(out, "Measured:", "nothing (no request completed)");
    } else {
        render_throughput(out, level, compared);
        render_latencies(out, m);
        render_decode_speed(out, m);
        if level.runs.len() > 1 {
            render_across_runs(out, level);
        }
    }
    render_server(out, level);
    render_errors(out, level);
    render_client(out, m);
}

/// The server's own metrics (`/metrics`), each its median over the runs.
fn render_server(out: &mut String, level: &LevelResult) {
    let mut names: Vec<&str> = Vec::new();
    for v in level.runs.iter().flat_map(|r| &r.server) {
        if !names.contains(&v.name.as_str()) {
            names.push(&v.name);
        }
    }
    if names.is_empty() {
        return;
    }
    let _ = writeln!(out, "{:-^60}", " Server (/metrics) ");
    for name in names {
        let values: Vec<f64> = level
            .runs
            .iter()
            .flat_map(|r| r.server.iter().filter(|v| v.name == name))
            .map(|v| v.value)
            .collect();
        let median = super::stats::Summary::of(&values).median;
        row(out, &format!("{name}:"), format!("{median:.3}"));
    }
}

/// Tokens, requests and tokens per second, with the figure `compare-to-baseline` judges.
fn render_throughput(out: &mut String, level: &LevelResult, compared: Option<&Mode>) {
    let m = &level.pooled;
    row(
        out,
        "Total input tokens:",
        m.total_input_tokens
            .map_or_else(|| "unknown".into(), |t| t.to_string()),
    );
    row(
        out,
        "Total generated tokens:",
        m.total_output_tokens.map_or_else(
            || "unknown (no usage from the server)".into(),
            |t| t.to_string(),
        ),
    );
    row(
        out,
        "Request throughput (req/s):",
        format!("{:.2}", m.request_throughput),
    );
    if m.request_goodput.is_some() {
        row(out, "Request goodput (req/s):", opt(m.request_goodput, 2));
    }
    row(
        out,
        "Output token throughput (tok/s):",
        opt(m.output_throughput, 2),
    );
    if let Some(mode) = compared {
        render_compared(out, level, mode);
    }
    row(
        out,
        "Total token throughput (tok/s):",
        opt(m.total_token_throughput, 2),
    );
    row(
        out,
        "Achieved concurrency:",
        format!("{:.2}", m.concurrency),
    );
}

/// The figure `compare-to-baseline` judges, under the name its verdict gives it.
fn render_compared(out: &mut String, level: &LevelResult, mode: &Mode) {
    let samples = output_tok_s_samples(level, mode);
    if let (Some(meaning), Some(v)) = (
        metric_meaning("output_tok_s", mode),
        crate::compare::center(&samples),
    ) {
        row(
            out,
            &format!("output_tok_s ({meaning}):"),
            // The digits its verdict line gives.
            crate::compare::format_value(v, ""),
        );
    }
}

fn render_latencies(out: &mut String, m: &RunMetrics) {
    latency(out, "Time to First Token", "TTFT", Some(&m.ttft_ms));
    latency(
        out,
        "Time per Output Token (per token, excl. 1st)",
        "TPOT",
        m.tpot_ms.as_ref(),
    );
    latency(
        out,
        "Inter-token Latency (per chunk)",
        "ITL",
        Some(&m.itl_ms),
    );
    latency(out, "End-to-end Latency", "E2EL", Some(&m.e2el_ms));
}

fn render_decode_speed(out: &mut String, m: &RunMetrics) {
    header(out, "Decode speed (per request)");
    row(
        out,
        "Decode tok/s (after the first chunk), mean:",
        opt(m.decode_tok_s.map(|s| s.mean), 2),
    );
    row(
        out,
        "End-to-end tok/s, mean:",
        opt(m.e2e_tok_s.map(|s| s.mean), 2),
    );
    row(
        out,
        "Tokens per chunk, mean:",
        opt(m.tokens_per_chunk.map(|s| s.mean), 2),
    );
    if let Some(from) = m.first_chunk_tokens_from {
        row(out, "First chunk's tokens from:", from);
    }
}

fn render_across_runs(out: &mut String, level: &LevelResult) {
    header(out, "Across runs (median · mean ± 95% CI · CV)");
    for (name, a) in &level.across_runs {
        row(
            out,
            &format!("{name}:"),
            format!(
                "{:.2} · {:.2} [{:.2}, {:.2}] · {:.1}%",
                a.median,
                a.mean,
                a.ci95_low,
                a.ci95_high,
                a.cv * 100.0
            ),
        );
    }
}

/// Failures by kind, then the first distinct messages: the server's own reason
/// (`request (9427 tokens) exceeds the available context size (512 tokens)`) is what tells
/// the user what to change. Warm-up failures are shown too.
fn render_errors(out: &mut String, level: &LevelResult) {
    let m = &level.pooled;
    let warmup: Vec<_> = level.runs.iter().flat_map(|r| &r.warmup.failures).collect();
    if m.errors.is_empty() && warmup.is_empty() {
        return;
    }
    header(out, "Errors");
    for (kind, n) in &m.errors {
        row(out, &format!("{kind}:"), n);
    }
    if !warmup.is_empty() {
        let sent: u64 = level.runs.iter().map(|r| r.warmup.sent).sum();
        row(
            out,
            "Warm-up requests failed:",
            format!("{} of {sent}", warmup.len()),
        );
    }
    let mut messages: Vec<&str> = Vec::new();
    let errors = level
        .runs
        .iter()
        .flat_map(|r| r.records.iter().filter_map(|x| x.error.as_ref()))
        .chain(warmup.iter().copied());
    for error in errors {
        if messages.len() == 3 {
            break;
        }
        if !messages.contains(&error.message.as_str()) {
            messages.push(&error.message);
        }
    }
    for message in messages {
        let _ = writeln!(out, "  {message}");
    }
}

fn render_client(out: &mut String, m: &RunMetrics) {
    header(out, "Client");
    let h = &m.honesty;
    row(
        out,
        "Client CPU time (ms):",
        format!(
            "{:.1} ({:.3} per request, {:.2} cores)",
            h.client_cpu_ms, h.client_cpu_ms_per_request, h.client_cpu_cores
        ),
    );
    row(
        out,
        "Requests in flight, most / asked:",
        format!(
            "{} / {}",
            h.max_concurrent_requests,
            h.asked_concurrency
                .map_or_else(|| "unlimited".into(), |n| n.to_string())
        ),
    );
    if let Some(lag) = &h.dispatch_lag_ms {
        row(
            out,
            "Dispatch lag (ms), median / p99 / max:",
            format!("{:.3} / {:.3} / {:.3}", lag.median, lag.p99, lag.max),
        );
    }
    row(out, "Connections opened:", h.connections_opened);
    if h.reconnects > 0 {
        row(out, "Resent on a new connection:", h.reconnects);
    }
}
