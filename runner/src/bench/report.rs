//! The readable form of a result: one block per load level in the layout of vLLM's
//! "Serving Benchmark Result" (so numbers are found where people look for them), then the
//! single-stream speeds, the spread across runs, errors, the client's honesty figures and
//! warnings. Per-token and per-chunk latencies are labelled as such. Knows nothing about
//! HTTP or how the result was measured.

use std::fmt::Write;

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
    for level in &result.levels {
        render_level(&mut out, level);
    }
    if !result.warnings.is_empty() {
        out.push('\n');
        for w in &result.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
    }
    out
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

fn render_level(out: &mut String, level: &LevelResult) {
    let m: &RunMetrics = &level.pooled;
    let _ = writeln!(
        out,
        "\n{:=^60}",
        format!(" {} · {} run(s) ", level.level, level.runs.len())
    );
    row(out, "Successful requests:", m.completed);
    row(out, "Failed requests:", m.failed);
    row(out, "Benchmark duration (s):", format!("{:.2}", m.duration));
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

    if level.runs.len() > 1 {
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
    if !m.errors.is_empty() {
        header(out, "Errors");
        for (kind, n) in &m.errors {
            row(out, &format!("{kind}:"), n);
        }
    }
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
}
