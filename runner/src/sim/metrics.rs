//! `GET /metrics`: what the simulator served, in the Prometheus text format under vLLM's and
//! SGLang's own names (vLLM's `vllm/v1/metrics/loggers.py` and `spec_decode/metrics.py`,
//! SGLang's `srt/metrics/collector.py`), so a scraper written for either reads it.
//!
//! Every count is what was really sent: prompt tokens when a request gets its slot, generated
//! tokens as each chunk is handed to the connection. A chunk is one speculative step: a draft
//! of --num-speculative-tokens tokens of which the chunk's tokens beyond the first were
//! accepted (the first is the target model's own), so vLLM's mean acceptance length,
//! `1 + accepted / drafts`, SGLang's `generation_tokens / spec_verify_calls` (one verify call
//! per step) and its `spec_accept_length` gauge are the tokens per chunk served.
//!
//! SGLang's series carry its labels: the scheduler's gauges `model_name, engine_type, tp_rank,
//! pp_rank, moe_ep_rank` (metrics_collector.py `SchedulerMetricsCollector`), the tokenizer's
//! counters `model_name, engine_type` (`tokenizer_metric_labels`; the real token counters also
//! split by `is_streaming`, which the simulator does not).
//! This file knows nothing of HTTP or timing.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use super::config::SimConfig;

/// The server's counters and gauges, bumped by routes and streams.
#[derive(Debug, Default)]
pub struct ServerMetrics {
    waiting: AtomicU64,
    running: AtomicU64,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    /// Speculative steps: one per chunk.
    drafts: AtomicU64,
    /// Tokens of each chunk beyond its first.
    accepted: AtomicU64,
    /// Under --prefix-cache: prompt tokens looked up, and those found.
    prefix_queries: AtomicU64,
    prefix_hits: AtomicU64,
    /// Requests answered in full.
    finished: AtomicU64,
    /// Prompt and generated tokens of the running requests: what their KV cache holds.
    kv_tokens: AtomicU64,
}

/// A request waiting for a generation slot; no longer counted as waiting once dropped.
pub struct Waiting<'a>(&'a ServerMetrics);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ServerMetrics {
    /// A request is queued for a slot until the returned guard is dropped.
    pub fn waiting(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(self)
    }

    /// A request got its slot: its prompt is prefilled (`cached` of it found under
    /// --prefix-cache) and held in the KV cache.
    pub fn started(&self, prompt_tokens: u32, cached: Option<u32>) {
        let prompt = u64::from(prompt_tokens);
        self.running.fetch_add(1, Ordering::Relaxed);
        self.prompt_tokens.fetch_add(prompt, Ordering::Relaxed);
        self.kv_tokens.fetch_add(prompt, Ordering::Relaxed);
        if let Some(cached) = cached {
            self.prefix_queries.fetch_add(prompt, Ordering::Relaxed);
            self.prefix_hits
                .fetch_add(u64::from(cached), Ordering::Relaxed);
        }
    }

    /// A chunk of `tokens` tokens was handed to the connection: one speculative step.
    pub fn chunk(&self, tokens: u32) {
        let tokens = u64::from(tokens);
        self.generation_tokens.fetch_add(tokens, Ordering::Relaxed);
        self.kv_tokens.fetch_add(tokens, Ordering::Relaxed);
        self.drafts.fetch_add(1, Ordering::Relaxed);
        self.accepted
            .fetch_add(tokens.saturating_sub(1), Ordering::Relaxed);
    }

    /// A request ended (answered or cancelled), freeing the `held` tokens of its KV cache.
    pub fn ended(&self, held: u64, complete: bool) {
        self.running.fetch_sub(1, Ordering::Relaxed);
        self.kv_tokens.fetch_sub(held, Ordering::Relaxed);
        if complete {
            self.finished.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The exposition of every series, vLLM's then SGLang's.
    pub fn exposition(&self, config: &SimConfig) -> String {
        let model = escape(&config.model_name);
        let mut out = Exposition {
            text: String::new(),
            labels: format!("engine=\"0\",model_name=\"{model}\""),
        };
        self.vllm(&mut out, config);
        self.sglang(&mut out, config, &model);
        out.text
    }

    fn get(n: &AtomicU64) -> f64 {
        n.load(Ordering::Relaxed) as f64
    }

    /// The prompt and generated tokens of the running requests over the KV cache, at most 1.
    fn kv_usage(&self, config: &SimConfig) -> f64 {
        (Self::get(&self.kv_tokens) / config.kv_cache_tokens as f64).min(1.0)
    }

    fn vllm(&self, out: &mut Exposition, config: &SimConfig) {
        let get = Self::get;
        out.gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            get(&self.running),
        );
        out.gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            get(&self.waiting),
        );
        out.gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            self.kv_usage(config),
        );
        out.counter(
            "vllm:prompt_tokens",
            "Number of prefill tokens processed.",
            get(&self.prompt_tokens),
        );
        out.counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            get(&self.generation_tokens),
        );
        if config.prefix_cache {
            out.counter(
                "vllm:prefix_cache_queries",
                "Prefix cache queries, in terms of number of queried tokens.",
                get(&self.prefix_queries),
            );
            out.counter(
                "vllm:prefix_cache_hits",
                "Prefix cache hits, in terms of number of cached tokens.",
                get(&self.prefix_hits),
            );
        }
        let speculative = config.speculative_tokens();
        if speculative > 0 {
            let drafts = get(&self.drafts);
            out.counter(
                "vllm:spec_decode_num_drafts",
                "Number of spec decoding drafts.",
                drafts,
            );
            out.counter(
                "vllm:spec_decode_num_draft_tokens",
                "Number of draft tokens.",
                drafts * f64::from(speculative),
            );
            out.counter(
                "vllm:spec_decode_num_accepted_tokens",
                "Number of accepted tokens.",
                get(&self.accepted),
            );
        }
    }

    fn sglang(&self, out: &mut Exposition, config: &SimConfig, model: &str) {
        let get = Self::get;
        let hits = get(&self.prefix_hits);
        // One scheduler (no DP attention), not disaggregated: `engine_type` is `unified`.
        out.labels = format!(
            "model_name=\"{model}\",engine_type=\"unified\",tp_rank=\"0\",pp_rank=\"0\",moe_ep_rank=\"0\""
        );
        out.gauge(
            "sglang:num_running_reqs",
            "The number of running requests.",
            get(&self.running),
        );
        out.gauge(
            "sglang:num_queue_reqs",
            "The number of requests in the waiting queue.",
            get(&self.waiting),
        );
        out.gauge(
            "sglang:token_usage",
            "The token usage.",
            self.kv_usage(config),
        );
        out.gauge(
            "sglang:cache_hit_rate",
            "The prefix cache hit rate.",
            ratio(hits, get(&self.prefix_queries)),
        );
        if config.speculative_tokens() > 0 {
            let drafts = get(&self.drafts);
            out.gauge(
                "sglang:spec_accept_length",
                "The average acceptance length of speculative decoding.",
                if drafts > 0.0 {
                    1.0 + get(&self.accepted) / drafts
                } else {
                    0.0
                },
            );
        }
        out.labels = format!("model_name=\"{model}\",engine_type=\"unified\"");
        // SGLang writes the series once a request with a verify call has finished; here, once
        // speculative decoding is on. The sum of every request's steps, as the tokenizer adds
        // each finished request's `spec_verify_ct`.
        if config.speculative_tokens() > 0 {
            out.counter(
                "sglang:spec_verify_calls",
                "Number of speculative decoding verification calls.",
                get(&self.drafts),
            );
        }
        let counters = [
            (
                "sglang:prompt_tokens",
                "Number of prefill tokens processed.",
                get(&self.prompt_tokens),
            ),
            (
                "sglang:generation_tokens",
                "Number of generation tokens processed.",
                get(&self.generation_tokens),
            ),
            (
                "sglang:cached_tokens",
                "Number of cached prompt tokens.",
                hits,
            ),
            (
                "sglang:num_requests",
                "Number of requests processed.",
                get(&self.finished),
            ),
        ];
        for (name, help, value) in counters {
            out.counter(name, help, value);
        }
    }
}

fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

/// A label value as the format writes it: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The text being written, with the labels of the series written now.
struct Exposition {
    text: String,
    labels: String,
}

impl Exposition {
    fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, "", help, "gauge", value);
    }

    /// As Python's prometheus_client writes a counter: the family without `_total`, the
    /// sample with it.
    fn counter(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, "_total", help, "counter", value);
    }

    fn family(&mut self, name: &str, suffix: &str, help: &str, kind: &str, value: f64) {
        let _ = write!(
            self.text,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{suffix}{{{}}} {value:?}\n",
            self.labels
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, start: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no `{start}` in\n{text}"))
    }

    #[test]
    fn the_exposition_counts_what_was_served_under_vllm_and_sglang_names() {
        let config = SimConfig {
            tokens_per_chunk: 4,
            prefix_cache: true,
            kv_cache_tokens: 100,
            model_name: "m\"x".into(),
            ..SimConfig::local()
        };
        let metrics = ServerMetrics::default();
        let queued = metrics.waiting();
        metrics.started(10, Some(4));
        // 10 tokens in chunks of 4, 4 and 2.
        for tokens in [4, 4, 2] {
            metrics.chunk(tokens);
        }
        let text = metrics.exposition(&config);
        assert_eq!(
            line(&text, "vllm:num_requests_waiting"),
            r#"vllm:num_requests_waiting{engine="0",model_name="m\"x"} 1.0"#
        );
        assert!(text.contains("# TYPE vllm:spec_decode_num_drafts counter\n"));
        assert!(line(&text, "vllm:spec_decode_num_drafts_total").ends_with(" 3.0"));
        assert!(line(&text, "vllm:spec_decode_num_draft_tokens_total").ends_with(" 9.0"));
        assert!(line(&text, "vllm:spec_decode_num_accepted_tokens_total").ends_with(" 7.0"));
        assert!(line(&text, "vllm:generation_tokens_total").ends_with(" 10.0"));
        assert!(line(&text, "vllm:prompt_tokens_total").ends_with(" 10.0"));
        assert!(line(&text, "vllm:prefix_cache_queries_total").ends_with(" 10.0"));
        assert!(line(&text, "vllm:prefix_cache_hits_total").ends_with(" 4.0"));
        assert!(line(&text, "vllm:kv_cache_usage_perc").ends_with(" 0.2"));
        assert!(line(&text, "sglang:spec_accept_length").ends_with(" 3.3333333333333335"));
        // The run's value gpuflow reads: 10 tokens in 3 verify calls.
        assert_eq!(
            line(&text, "sglang:spec_verify_calls_total"),
            r#"sglang:spec_verify_calls_total{model_name="m\"x",engine_type="unified"} 3.0"#
        );
        assert!(text.contains("# TYPE sglang:spec_verify_calls counter\n"));
        assert!(line(&text, "sglang:generation_tokens_total").ends_with(" 10.0"));
        assert!(line(&text, "sglang:cache_hit_rate").ends_with(" 0.4"));
        assert_eq!(
            line(&text, "sglang:num_running_reqs"),
            r#"sglang:num_running_reqs{model_name="m\"x",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"} 1.0"#
        );

        drop(queued);
        metrics.ended(20, true);
        let text = metrics.exposition(&config);
        assert!(line(&text, "vllm:num_requests_waiting").ends_with(" 0.0"));
        assert!(line(&text, "vllm:num_requests_running").ends_with(" 0.0"));
        assert!(line(&text, "vllm:kv_cache_usage_perc").ends_with(" 0.0"));
        assert!(line(&text, "sglang:num_requests_total").ends_with(" 1.0"));
    }

    #[test]
    fn without_speculative_decoding_or_a_prefix_cache_their_series_are_absent() {
        let text = ServerMetrics::default().exposition(&SimConfig::local());
        assert!(!text.contains("spec_"), "{text}");
        assert!(!text.contains("prefix_cache"), "{text}");
        assert!(text.contains("vllm:generation_tokens_total{"), "{text}");
        // Every sample line follows its family's HELP and TYPE.
        for sample in text.lines().filter(|l| !l.starts_with('#')) {
            let name = sample.split('{').next().unwrap();
            let family = name.strip_suffix("_total").unwrap_or(name);
            assert!(text.contains(&format!("# TYPE {family} ")), "{sample}");
        }
    }
}
