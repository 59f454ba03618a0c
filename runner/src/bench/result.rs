//! A benchmark's result and its files.
//!
//! The JSON result's top-level keys are those of `vllm bench serve --save-result` (`completed`,
//! `total_input_tokens`, `request_throughput`, `mean_ttft_ms`, `p99_itl_ms`, `ttfts`, `itls`,
//! …), so readers written for vLLM work unchanged; gpuflow's own fields (each run, the spread
//! across runs, the client's honesty figures, warnings) sit under one `gpuflow` key. Token
//! counts the server did not give are `null`, never a guess. Beside it, one JSON line per
//! measured request. Knows nothing about HTTP or terminals.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Value, json};

use super::config::{BenchConfig, Mode, Stop};
use super::inputs::Slo;
use super::metrics::{Honesty, RunMetrics};
use super::request::{RequestError, RequestRecord};
use super::schedule::Arrival;
use super::server_metrics::ServerValue;
use super::stats::{AcrossRuns, Summary};
use crate::events::Masker;

/// One load level: a closed-loop concurrency, or an open-loop rate (with its optional cap).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Level {
    pub concurrency: Option<u32>,
    pub request_rate: Option<f64>,
}

impl Level {
    pub fn all(mode: &Mode) -> Vec<Self> {
        match mode {
            Mode::SingleStream => vec![Self {
                concurrency: Some(1),
                request_rate: None,
            }],
            Mode::Concurrency(levels) => levels
                .iter()
                .map(|&n| Self {
                    concurrency: Some(n),
                    request_rate: None,
                })
                .collect(),
            Mode::RequestRate {
                rate,
                max_concurrency,
                ..
            } => vec![Self {
                concurrency: *max_concurrency,
                request_rate: Some(*rate),
            }],
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.request_rate, self.concurrency) {
            (Some(rate), Some(cap)) => write!(f, "{rate} req/s (at most {cap} in flight)"),
            (Some(rate), None) => write!(f, "{rate} req/s"),
            (None, n) => write!(f, "concurrency {}", n.unwrap_or(1)),
        }
    }
}

/// One measured run.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// From 1.
    pub run: u32,
    pub metrics: RunMetrics,
    pub records: Vec<RequestRecord>,
    /// The warm-up before it.
    pub warmup: WarmUp,
    /// When its first request could be sent (for "the server went away at T").
    pub started_at: Option<std::time::Instant>,
    /// From the server's `/metrics` around it (empty when not scraped).
    pub server: Vec<ServerValue>,
}

/// A run's warm-up: its requests are not measured, but their failures are shown.
#[derive(Clone, Debug, Default)]
pub struct WarmUp {
    pub sent: u64,
    pub failures: Vec<RequestError>,
}

/// Every run at one level, and what they say together.
#[derive(Clone, Debug)]
pub struct LevelResult {
    pub level: Level,
    pub runs: Vec<RunResult>,
    /// All runs' requests as one benchmark (durations added): the vLLM-compatible numbers.
    pub pooled: RunMetrics,
    /// Headline metrics over runs: each run's value, median, mean with a 95% interval, CV.
    pub across_runs: IndexMap<&'static str, AcrossRuns>,
}

impl LevelResult {
    pub fn new(level: Level, runs: Vec<RunResult>, slo: &Slo) -> Self {
        let records: Vec<RequestRecord> = runs.iter().flat_map(|r| r.records.clone()).collect();
        let duration = runs.iter().map(|r| r.metrics.duration).sum();
        let honesty = pooled_honesty(&runs);
        let pooled = RunMetrics::compute(&records, duration, slo, honesty);
        let mut across_runs = IndexMap::new();
        let headline: [(&'static str, Getter); 11] = [
            ("output_throughput", |m| m.output_throughput),
            ("request_throughput", |m| Some(m.request_throughput)),
            ("total_token_throughput", |m| m.total_token_throughput),
            ("ttft_ms", |m| Some(m.ttft_ms.median)),
            ("tpot_ms", |m| m.tpot_ms.map(|s| s.median)),
            ("itl_ms", |m| Some(m.itl_ms.median)),
            ("e2el_ms", |m| Some(m.e2el_ms.median)),
            ("decode_tok_s", |m| m.decode_tok_s.map(|s| s.mean)),
            ("e2e_tok_s", |m| m.e2e_tok_s.map(|s| s.mean)),
            ("tokens_per_chunk", |m| m.tokens_per_chunk.map(|s| s.mean)),
            ("concurrency", |m| Some(m.concurrency)),
        ];
        for (name, get) in headline {
            let values: Option<Vec<f64>> = runs
                .iter()
                .filter(|r| r.metrics.completed > 0)
                .map(|r| get(&r.metrics))
                .collect();
            if let Some(values) = values.filter(|v| !v.is_empty()) {
                across_runs.insert(name, AcrossRuns::of(values));
            }
        }
        Self {
            level,
            runs,
            pooled,
            across_runs,
        }
    }

    /// The median across runs of a headline metric.
    pub fn median(&self, name: &str) -> Option<f64> {
        self.across_runs.get(name).map(|a| a.median)
    }
}

/// Reads one headline number from a run's metrics.
type Getter = fn(&RunMetrics) -> Option<f64>;

fn pooled_honesty(runs: &[RunResult]) -> Honesty {
    let h: Vec<&Honesty> = runs.iter().map(|r| &r.metrics.honesty).collect();
    let lags: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.records.iter().filter_map(|x| x.dispatch_lag_ms))
        .collect();
    let cpu: f64 = h.iter().map(|h| h.client_cpu_ms).sum();
    let duration: f64 = runs.iter().map(|r| r.metrics.duration).sum();
    Honesty {
        client_cpu_ms: cpu,
        client_cpu_ms_per_request: 0.0,
        client_cpu_cores: if duration > 0.0 {
            cpu / 1000.0 / duration
        } else {
            0.0
        },
        asked_concurrency: h.first().and_then(|h| h.asked_concurrency),
        asked_request_rate: h.first().and_then(|h| h.asked_request_rate),
        max_concurrent_requests: h
            .iter()
            .map(|h| h.max_concurrent_requests)
            .max()
            .unwrap_or(0),
        dispatch_lag_ms: (!lags.is_empty()).then(|| Summary::of(&lags)),
        connections_opened: h.iter().map(|h| h.connections_opened).sum(),
        reconnects: h.iter().map(|h| h.reconnects).sum(),
    }
}

/// A whole benchmark.
#[derive(Clone, Debug)]
pub struct BenchResult {
    /// Local time the result was made, as vLLM writes it (`YYYYMMDD-HHMMSS`, UTC here).
    pub date: String,
    pub config: BenchConfig,
    /// The seed the synthetic prompts were made with: `seed` when given, else this
    /// invocation's random salt (give it as `seed` to send the same prompts again).
    pub prompt_seed: u64,
    pub model: String,
    pub levels: Vec<LevelResult>,
    /// Reasons the numbers may not mean what they seem (the client limited the load, tokens
    /// unknown, …).
    pub warnings: Vec<String>,
}

impl BenchResult {
    /// Every request sent to the server, warm-ups included: what it served for this benchmark.
    pub fn requests_sent(&self) -> u64 {
        self.levels
            .iter()
            .flat_map(|l| &l.runs)
            .map(|r| r.records.len() as u64 + r.warmup.sent)
            .sum()
    }

    pub fn new(
        config: &BenchConfig,
        model: String,
        prompt_seed: u64,
        levels: Vec<LevelResult>,
    ) -> Self {
        let warnings = warnings(config, &levels);
        Self {
            date: vllm_date(std::time::SystemTime::now()),
            config: config.clone(),
            prompt_seed,
            model,
            levels,
            warnings,
        }
    }

    /// `3 http_400: HTTP 400: request (9427 tokens) exceeds …`: the failures of every level,
    /// by kind, with the first distinct messages the server or connection gave.
    pub fn error_summary(&self) -> String {
        let mut all: IndexMap<String, u64> = IndexMap::new();
        for level in &self.levels {
            for (k, n) in &level.pooled.errors {
                *all.entry(k.clone()).or_insert(0) += n;
            }
        }
        if all.is_empty() {
            return "no errors".into();
        }
        let counts = all
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ");
        let messages = self.first_error_messages(3);
        if messages.is_empty() {
            counts
        } else {
            format!("{counts}: {}", messages.join("; "))
        }
    }

    /// Up to `n` distinct failure messages, in the order they happened (measured requests
    /// first, then warm-ups).
    pub fn first_error_messages(&self, n: usize) -> Vec<String> {
        let measured = self
            .levels
            .iter()
            .flat_map(|l| &l.runs)
            .flat_map(|r| r.records.iter().filter_map(|x| x.error.as_ref()));
        let warmup = self
            .levels
            .iter()
            .flat_map(|l| &l.runs)
            .flat_map(|r| &r.warmup.failures);
        let mut out: Vec<String> = Vec::new();
        for error in measured.chain(warmup) {
            if out.len() == n {
                break;
            }
            if !out.contains(&error.message) {
                out.push(error.message.clone());
            }
        }
        out
    }

    /// The step's outputs (`steps.<id>.outputs.*`), from the first level: medians across
    /// runs; token metrics are absent when the server gave no `usage`.
    pub fn outputs(&self) -> IndexMap<String, String> {
        let mut out = IndexMap::new();
        let Some(level) = self.levels.first() else {
            return out;
        };
        let single = matches!(self.config.mode, Mode::SingleStream);
        for name in [
            "output_throughput",
            "request_throughput",
            "total_token_throughput",
            "ttft_ms",
            "tpot_ms",
            "itl_ms",
            "e2el_ms",
            "decode_tok_s",
            "e2e_tok_s",
            "tokens_per_chunk",
        ] {
            if let Some(v) = level.median(name) {
                out.insert(name.to_owned(), format_number(v));
            }
        }
        let headline = if single {
            level.median("decode_tok_s")
        } else {
            level.median("output_throughput")
        };
        if let Some(v) = headline {
            out.insert("output_tok_s".into(), format_number(v));
        }
        let errors: u64 = self.levels.iter().map(|l| l.pooled.failed).sum();
        out.insert("errors".into(), errors.to_string());
        out
    }

    /// The vLLM-compatible JSON of one level, with gpuflow's fields under `gpuflow`.
    pub fn level_json(&self, index: usize) -> Value {
        let level = &self.levels[index];
        let m = &level.pooled;
        let records: Vec<&RequestRecord> = level.runs.iter().flat_map(|r| &r.records).collect();
        let ok: Vec<&&RequestRecord> = records.iter().filter(|r| r.ok()).collect();
        let (burstiness, rate) = match &self.config.mode {
            Mode::RequestRate { rate, arrival, .. } => (
                match arrival {
                    Arrival::Gamma { burstiness } => json!(burstiness),
                    _ => json!(1.0),
                },
                json!(rate),
            ),
            _ => (json!(1.0), json!("inf")),
        };
        let mut v = serde_json::Map::new();
        let mut put = |k: &str, value: Value| {
            v.insert(k.to_owned(), value);
        };
        put("date", json!(self.date));
        put("endpoint_type", json!(self.config.endpoint.vllm_backend()));
        put("backend", json!(self.config.endpoint.vllm_backend()));
        put("label", Value::Null);
        put("model_id", json!(self.model));
        put("tokenizer_id", Value::Null);
        put("num_prompts", json!(records.len()));
        put("request_rate", rate);
        put("burstiness", burstiness);
        put("max_concurrency", json!(level.level.concurrency));
        put("duration", json!(m.duration));
        put("completed", json!(m.completed));
        put("failed", json!(m.failed));
        put("total_input_tokens", json!(m.total_input_tokens));
        put("total_output_tokens", json!(m.total_output_tokens));
        put("request_throughput", json!(m.request_throughput));
        put("request_goodput", json!(m.request_goodput));
        put("output_throughput", json!(m.output_throughput));
        put("total_token_throughput", json!(m.total_token_throughput));
        put(
            "max_concurrent_requests",
            json!(m.honesty.max_concurrent_requests),
        );
        put(
            "input_lens",
            json!(ok.iter().map(|r| r.prompt_tokens).collect::<Vec<_>>()),
        );
        put(
            "output_lens",
            json!(ok.iter().map(|r| r.completion_tokens).collect::<Vec<_>>()),
        );
        put(
            "ttfts",
            json!(
                ok.iter()
                    .map(|r| r.ttft_ms().unwrap_or(0.0) / 1000.0)
                    .collect::<Vec<_>>()
            ),
        );
        put(
            "itls",
            json!(
                ok.iter()
                    .map(|r| r.itls_ms().map(|x| x / 1000.0).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            ),
        );
        put(
            "start_times",
            json!(ok.iter().map(|r| r.start_s).collect::<Vec<_>>()),
        );
        put(
            "generated_texts",
            json!(ok.iter().map(|_| "").collect::<Vec<_>>()),
        );
        put(
            "errors",
            json!(
                records
                    .iter()
                    .map(|r| r.error.as_ref().map_or("", |e| e.message.as_str()))
                    .collect::<Vec<_>>()
            ),
        );
        for (name, summary) in [
            ("ttft", Some(m.ttft_ms)),
            ("tpot", m.tpot_ms),
            ("itl", Some(m.itl_ms)),
            ("e2el", Some(m.e2el_ms)),
        ] {
            let get = |f: fn(&Summary) -> f64| summary.as_ref().map(f);
            put(&format!("mean_{name}_ms"), json!(get(|s| s.mean)));
            put(&format!("median_{name}_ms"), json!(get(|s| s.median)));
            put(&format!("std_{name}_ms"), json!(get(|s| s.std)));
            put(&format!("p90_{name}_ms"), json!(get(|s| s.p90)));
            put(&format!("p95_{name}_ms"), json!(get(|s| s.p95)));
            put(&format!("p99_{name}_ms"), json!(get(|s| s.p99)));
        }
        put("gpuflow", self.extras(index));
        Value::Object(v)
    }

    fn extras(&self, index: usize) -> Value {
        let level = &self.levels[index];
        let c = &self.config;
        json!({
            "target": c.target,
            "mode": mode_name(&c.mode),
            "level": level.level,
            "level_index": index,
            "levels": self.levels.iter().map(|l| &l.level).collect::<Vec<_>>(),
            "runs_requested": c.runs,
            "warmup": c.warmup,
            "requests_per_run": match c.stop { Stop::Requests(n) => Some(n), Stop::Duration(_) => None },
            "duration_per_run_s": match c.stop { Stop::Duration(d) => Some(d.as_secs_f64()), Stop::Requests(_) => None },
            "output_tokens": c.output_tokens,
            "ignore_eos": c.ignore_eos,
            "seed": c.seed,
            "prompt_seed": self.prompt_seed,
            "warmup_failures": level.runs.iter().map(|r| json!({
                "run": r.run,
                "sent": r.warmup.sent,
                "failed": r.warmup.failures.len(),
                "errors": r.warmup.failures,
            })).collect::<Vec<_>>(),
            "tokens_known": level.pooled.tokens_known,
            "tokens_source": if level.pooled.tokens_known { "server usage" } else { "unknown: the server sent no usage" },
            "first_chunk_tokens_from": level.pooled.first_chunk_tokens_from,
            "metrics": level.pooled,
            "across_runs": level.across_runs,
            "runs": level.runs.iter().map(|r| json!({
                "run": r.run,
                "metrics": r.metrics,
                "server_metrics": r.server.iter().map(|v| (v.name.clone(), json!(v.value))).collect::<serde_json::Map<_, _>>(),
            })).collect::<Vec<_>>(),
            "errors_by_kind": level.pooled.errors,
            "warnings": self.warnings,
        })
    }

    /// The whole result: the first level's vLLM keys at the top, every level under
    /// `gpuflow.by_level` when there are several.
    pub fn to_json(&self) -> Value {
        let mut top = self.level_json(0);
        if self.levels.len() > 1 {
            let all: Vec<Value> = (0..self.levels.len()).map(|i| self.level_json(i)).collect();
            top["gpuflow"]["by_level"] = Value::Array(all);
        }
        top
    }

    /// Writes the result to `path`, the per-request lines beside it (`X.requests.jsonl` for
    /// `X.json`), and for a sweep one vLLM-format file per level (`X.c8.json`), every text
    /// through `masker`: the run's secrets can be in what the result echoes (the `model`, a
    /// server's error message). Returns every path written.
    pub fn write_files(&self, path: &Path, masker: &Masker) -> std::io::Result<Vec<PathBuf>> {
        let stem = path.with_extension("");
        let sibling = |suffix: &str| {
            let mut s = stem.clone().into_os_string();
            s.push(suffix);
            PathBuf::from(s)
        };
        let mut written = vec![path.to_path_buf()];
        let json = |value: &serde_json::Value| -> std::io::Result<String> {
            Ok(masker.mask(&serde_json::to_string_pretty(value)?) + "\n")
        };
        std::fs::write(path, json(&self.to_json())?)?;
        if self.levels.len() > 1 {
            for (i, level) in self.levels.iter().enumerate() {
                let tag = match (level.level.request_rate, level.level.concurrency) {
                    (Some(r), _) => format!(".r{r}.json"),
                    (None, c) => format!(".c{}.json", c.unwrap_or(1)),
                };
                let p = sibling(&tag);
                std::fs::write(&p, json(&self.level_json(i))?)?;
                written.push(p);
            }
        }
        let lines = sibling(".requests.jsonl");
        let mut out = std::io::BufWriter::new(std::fs::File::create(&lines)?);
        for (i, level) in self.levels.iter().enumerate() {
            for run in &level.runs {
                for r in &run.records {
                    let mut line = serde_json::to_value(r)?;
                    line["level_index"] = json!(i);
                    line["run"] = json!(run.run);
                    line["ttft_ms"] = json!(r.ttft_ms());
                    line["e2el_ms"] = json!(r.e2el_ms());
                    out.write_all(masker.mask(&serde_json::to_string(&line)?).as_bytes())?;
                    out.write_all(b"\n")?;
                }
            }
        }
        out.flush()?;
        written.push(lines);
        Ok(written)
    }
}

pub fn mode_name(mode: &Mode) -> &'static str {
    match mode {
        Mode::SingleStream => "single-stream",
        Mode::Concurrency(_) => "concurrency",
        Mode::RequestRate { .. } => "request-rate",
    }
}

/// Numbers for step outputs: up to 4 decimals, no trailing zeros.
fn format_number(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

/// `20261130-081500` in UTC.
fn vllm_date(now: std::time::SystemTime) -> String {
    let rfc = humantime::format_rfc3339_seconds(now).to_string(); // 2026-11-30T08:15:00Z
    rfc.trim_end_matches('Z')
        .replace(['-', ':'], "")
        .replace('T', "-")
}

fn warnings(config: &BenchConfig, levels: &[LevelResult]) -> Vec<String> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get) as f64;
    let mut out = Vec::new();
    for level in levels {
        let m = &level.pooled;
        let h = &m.honesty;
        let at = &level.level;
        if m.completed > 0 && !m.tokens_known {
            out.push(format!(
                "{at}: the server sent no `usage`, so token counts, token throughputs, TPOT and tok/s are unknown (the requested length is not substituted)"
            ));
        }
        if h.client_cpu_cores > 0.8 * cores {
            out.push(format!(
                "{at}: the client used {:.2} of {cores} CPU cores; it may have limited the measurement",
                h.client_cpu_cores
            ));
        }
        if let (Some(asked), Mode::Concurrency(_) | Mode::SingleStream) =
            (h.asked_concurrency, &config.mode)
        {
            let requests_per_run = level.runs.first().map_or(0, |r| r.records.len() as u64);
            if h.max_concurrent_requests < u64::from(asked) && requests_per_run >= u64::from(asked)
            {
                out.push(format!(
                    "{at}: at most {} requests were in flight, not {asked}; the client could not keep up",
                    h.max_concurrent_requests
                ));
            }
        }
        let warmup_failed: usize = level.runs.iter().map(|r| r.warmup.failures.len()).sum();
        if warmup_failed > 0 {
            let sent: u64 = level.runs.iter().map(|r| r.warmup.sent).sum();
            let first = level
                .runs
                .iter()
                .find_map(|r| r.warmup.failures.first())
                .map_or(String::new(), |e| format!(": {}", e.message));
            out.push(format!(
                "{at}: {warmup_failed} of {sent} warm-up requests failed{first}"
            ));
        }
        if h.reconnects > 0 {
            out.push(format!(
                "{at}: {} requests were resent on a new connection: the server closed a kept-alive connection as they went out (counted, not errors)",
                h.reconnects
            ));
        }
        if let Some(short) = ended_early(level) {
            out.push(format!("{at}: {short}"));
        }
        if let Some(lag) = &h.dispatch_lag_ms
            && lag.p99 > 5.0
        {
            out.push(format!(
                "{at}: sends were up to {:.1} ms late against the schedule (p99 dispatch lag); the offered rate was lower than asked",
                lag.p99
            ));
        }
    }
    out
}

/// `12 of 500 requests got fewer tokens than asked (104 of 200 at the least, finish_reason
/// `length`)`: a server that stopped early (context full, end of sequence) makes token
/// throughputs incomparable with runs that did not.
fn ended_early(level: &LevelResult) -> Option<String> {
    let ok: Vec<&RequestRecord> = level
        .runs
        .iter()
        .flat_map(|r| r.records.iter().filter(|x| x.ok()))
        .collect();
    let short: Vec<&&RequestRecord> = ok
        .iter()
        .filter(|r| {
            r.completion_tokens
                .is_some_and(|t| t < u64::from(r.max_tokens))
        })
        .collect();
    let fewest = short
        .iter()
        .min_by_key(|r| r.completion_tokens.unwrap_or(0))?;
    let mut reasons: Vec<&str> = short
        .iter()
        .filter_map(|r| r.finish_reason.as_deref())
        .collect();
    reasons.sort_unstable();
    reasons.dedup();
    let reasons = if reasons.is_empty() {
        String::new()
    } else {
        format!(
            ", finish_reason {}",
            reasons
                .iter()
                .map(|r| format!("`{r}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        )
    };
    Some(format!(
        "{} of {} requests got fewer tokens than asked ({} of {} at the least{reasons}): the server stopped early (context full or end of sequence), so token throughputs are not comparable with full-length runs (help: lower `output-tokens` or `input-tokens` below the server's context size, or set `ignore-eos: true`)",
        short.len(),
        ok.len(),
        fewest.completion_tokens.unwrap_or(0),
        fewest.max_tokens,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_vllm_writes_them() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_026_629);
        assert_eq!(vllm_date(t), "20261130-081709");
    }

    #[test]
    fn output_numbers_are_short() {
        assert_eq!(format_number(89.5), "89.5");
        assert_eq!(format_number(4.0), "4");
        assert_eq!(format_number(1.234_567), "1.2346");
    }

    #[test]
    fn levels_read_as_prose() {
        let l = Level::all(&Mode::Concurrency(vec![1, 8]));
        assert_eq!(l[1].to_string(), "concurrency 8");
        let r = Level {
            concurrency: Some(4),
            request_rate: Some(2.5),
        };
        assert_eq!(r.to_string(), "2.5 req/s (at most 4 in flight)");
    }
}
