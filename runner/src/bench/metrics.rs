//! A run's metrics from its request records, with vLLM's and SGLang's names and definitions:
//!
//! - `ttft_ms`: send → first token-carrying chunk. `itl_ms`: gaps between token-carrying
//!   chunks (one sample per gap). `tpot_ms`: per request, (latency − TTFT) / (tokens − 1).
//!   `e2el_ms`: send → last token-carrying chunk (vLLM's latency).
//! - Throughputs over the run's duration (first send → last end): `request_throughput`,
//!   `output_throughput`, `total_token_throughput`; `request_goodput` counts requests meeting
//!   every SLO given. `concurrency`: SGLang's achieved concurrency, Σ latency / duration.
//! - Single-stream: `decode_tok_s`, `e2e_tok_s`, `tokens_per_chunk` per request.
//!
//! Token counts come only from the server's `usage`. When a completed request has none, the
//! token metrics are `None` and `tokens_known` is false: nothing is guessed from the requested
//! length. Knows nothing about HTTP or how the requests were sent.

use std::collections::BTreeMap;

use serde::Serialize;

use super::inputs::Slo;
use super::request::RequestRecord;
use super::stats::Summary;

/// What the client itself cost and did during a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Honesty {
    /// CPU time (user + system) of the client process during the run, ms.
    pub client_cpu_ms: f64,
    /// That CPU time per measured request, ms.
    pub client_cpu_ms_per_request: f64,
    /// Client CPU time over wall time: 1.0 is one core busy the whole run.
    pub client_cpu_cores: f64,
    /// The concurrency asked for (closed loop, or the open loop's cap); `None`: uncapped.
    pub asked_concurrency: Option<u32>,
    /// The open loop's asked request rate.
    pub asked_request_rate: Option<f64>,
    /// Requests in flight at once, at most.
    pub max_concurrent_requests: u64,
    /// Open loop: how late sends were against the schedule, ms.
    pub dispatch_lag_ms: Option<Summary>,
    /// TCP connections opened during the run (keep-alive reuses them; connections left open
    /// by the warm-up or an earlier level are not counted again).
    pub connections_opened: u64,
    /// Requests resent on a new connection because the server closed the reused one just as
    /// they went out (before any response).
    pub reconnects: u64,
}

/// One run's numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunMetrics {
    /// Benchmark duration, seconds: first send to last response end.
    pub duration: f64,
    pub completed: u64,
    pub failed: u64,
    /// Failures by kind (`http_503`, `timeout`, `truncated`, …).
    pub errors: BTreeMap<String, u64>,
    /// Every completed request had `usage`; otherwise the token metrics are `None`.
    pub tokens_known: bool,
    pub total_input_tokens: Option<u64>,
    pub total_output_tokens: Option<u64>,
    pub request_throughput: f64,
    pub request_goodput: Option<f64>,
    pub output_throughput: Option<f64>,
    pub total_token_throughput: Option<f64>,
    /// Achieved concurrency: Σ e2el / duration.
    pub concurrency: f64,
    pub ttft_ms: Summary,
    pub tpot_ms: Option<Summary>,
    pub itl_ms: Summary,
    pub e2el_ms: Summary,
    pub decode_tok_s: Option<Summary>,
    pub e2e_tok_s: Option<Summary>,
    pub tokens_per_chunk: Option<Summary>,
    /// How `decode_tok_s` knew the first chunk's tokens: `per-chunk usage` or `mean per chunk`.
    pub first_chunk_tokens_from: Option<&'static str>,
    pub honesty: Honesty,
}

impl RunMetrics {
    /// The run's metrics. `duration` is in seconds; `honesty` is filled by the caller
    /// except the per-request CPU share, derived here.
    pub fn compute(
        records: &[RequestRecord],
        duration: f64,
        slo: &Slo,
        mut honesty: Honesty,
    ) -> Self {
        let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.ok()).collect();
        let mut errors = BTreeMap::new();
        for r in records {
            if let Some(e) = &r.error {
                *errors.entry(e.kind.key()).or_insert(0) += 1;
            }
        }
        let completed = ok.len() as u64;
        let tokens_known = !ok.is_empty() && ok.iter().all(|r| r.completion_tokens.is_some());
        let input_known = !ok.is_empty() && ok.iter().all(|r| r.prompt_tokens.is_some());
        let total_output =
            tokens_known.then(|| ok.iter().filter_map(|r| r.completion_tokens).sum());
        let total_input = input_known.then(|| ok.iter().filter_map(|r| r.prompt_tokens).sum());
        let per_s = |n: f64| if duration > 0.0 { n / duration } else { 0.0 };

        let collect = |f: &dyn Fn(&RequestRecord) -> Option<f64>| -> Vec<f64> {
            ok.iter().filter_map(|r| f(r)).collect()
        };
        let ttfts = collect(&RequestRecord::ttft_ms);
        let e2els = collect(&RequestRecord::e2el_ms);
        let itls: Vec<f64> = ok.iter().flat_map(|r| r.itls_ms()).collect();
        let known = |values: Vec<f64>| tokens_known.then(|| Summary::of(&values));

        let good = (!slo.is_empty()).then(|| {
            ok.iter()
                .filter(|r| {
                    let meets = |limit: Option<f64>, value: Option<f64>| {
                        limit.is_none_or(|l| value.is_some_and(|v| v <= l))
                    };
                    meets(slo.ttft_ms, r.ttft_ms())
                        && meets(slo.tpot_ms, r.tpot_ms())
                        && meets(slo.e2el_ms, r.e2el_ms())
                })
                .count()
        });
        let per_chunk_usage = !ok.is_empty() && ok.iter().all(|r| r.chunk_tokens.is_some());
        honesty.client_cpu_ms_per_request = if records.is_empty() {
            0.0
        } else {
            honesty.client_cpu_ms / records.len() as f64
        };
        Self {
            duration,
            completed,
            failed: records.len() as u64 - completed,
            errors,
            tokens_known,
            total_input_tokens: total_input,
            total_output_tokens: total_output,
            request_throughput: per_s(completed as f64),
            request_goodput: good.map(|g| per_s(g as f64)),
            output_throughput: total_output.map(|t| per_s(t as f64)),
            total_token_throughput: total_output
                .zip(total_input)
                .map(|(o, i)| per_s((o + i) as f64)),
            concurrency: per_s(e2els.iter().sum::<f64>() / 1000.0),
            ttft_ms: Summary::of(&ttfts),
            tpot_ms: known(collect(&RequestRecord::tpot_ms)),
            itl_ms: Summary::of(&itls),
            e2el_ms: Summary::of(&e2els),
            decode_tok_s: known(collect(&RequestRecord::decode_tok_s)),
            e2e_tok_s: known(collect(&RequestRecord::e2e_tok_s)),
            tokens_per_chunk: known(collect(&RequestRecord::tokens_per_chunk)),
            first_chunk_tokens_from: tokens_known.then_some(if per_chunk_usage {
                "per-chunk usage"
            } else {
                "mean per chunk"
            }),
            honesty,
        }
    }

    /// Failed over all requests (0 when there were none).
    pub fn error_rate(&self) -> f64 {
        let total = self.completed + self.failed;
        if total == 0 {
            0.0
        } else {
            self.failed as f64 / total as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::request::{ErrorKind, RequestError};

    fn rec(chunks: &[f64], prompt: Option<u64>, completion: Option<u64>) -> RequestRecord {
        RequestRecord {
            chunks_ms: chunks.to_vec(),
            prompt_tokens: prompt,
            completion_tokens: completion,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn throughput_latency_and_goodput() {
        let records = vec![
            rec(&[100.0, 200.0, 300.0], Some(10), Some(3)),
            rec(&[50.0, 60.0, 70.0], Some(10), Some(3)),
            RequestRecord {
                error: Some(RequestError {
                    kind: ErrorKind::Http(503),
                    message: "HTTP 503".into(),
                }),
                ..RequestRecord::default()
            },
        ];
        let slo = Slo {
            ttft_ms: Some(80.0),
            ..Slo::default()
        };
        let m = RunMetrics::compute(&records, 2.0, &slo, Honesty::default());
        assert_eq!((m.completed, m.failed), (2, 1));
        assert_eq!(m.errors.get("http_503"), Some(&1));
        assert!(m.tokens_known);
        assert_eq!(m.total_input_tokens, Some(20));
        assert_eq!(m.total_output_tokens, Some(6));
        assert_eq!(m.request_throughput, 1.0);
        assert_eq!(m.output_throughput, Some(3.0));
        assert_eq!(m.total_token_throughput, Some(13.0));
        assert_eq!(
            m.request_goodput,
            Some(0.5),
            "only the 50 ms TTFT meets 80 ms"
        );
        assert_eq!(m.ttft_ms.mean, 75.0);
        assert_eq!(m.itl_ms.count, 4);
        assert_eq!(m.itl_ms.mean, 55.0);
        assert_eq!(m.e2el_ms.median, 185.0);
        // tpot: (300 − 100) / 2 and (70 − 50) / 2
        assert_eq!(m.tpot_ms.unwrap().mean, 55.0);
        assert!((m.concurrency - 0.185).abs() < 1e-12);
        assert!((m.error_rate() - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn one_request_without_usage_makes_tokens_unknown() {
        let records = vec![
            rec(&[10.0, 20.0], Some(3), Some(2)),
            rec(&[10.0, 20.0], None, None),
        ];
        let m = RunMetrics::compute(&records, 1.0, &Slo::default(), Honesty::default());
        assert!(!m.tokens_known);
        assert_eq!(m.total_output_tokens, None);
        assert_eq!(m.output_throughput, None);
        assert_eq!(m.tpot_ms, None);
        assert_eq!(m.decode_tok_s, None);
        assert_eq!(m.request_goodput, None, "no SLO given");
        assert_eq!(m.ttft_ms.count, 2, "latencies need no token counts");
    }
}
