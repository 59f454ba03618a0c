//! Server-side metrics: the server's Prometheus `/metrics` (vLLM, SGLang with
//! `--enable-metrics`, TGI, llama-server with `--metrics`) scraped before, during and after each
//! measured run, made into metrics of that run (docs/benchmark.md, "Server-side metrics").
//!
//! Counters give their increase over the run, gauges their mean over the scrapes taken while
//! it ran (the value after it when the run was shorter than one scrape interval). Built in:
//! `spec_accept_length` (vLLM's `1 + accepted / drafts` over the run, SGLang's generated tokens
//! per verify call over the run, else SGLang's last-window gauge),
//! `prefix_cache_hit_rate`, `queue_len` and `kv_cache_usage`; and `server.<name>` for each
//! series a user lists. A server without `/metrics` is said once and never fails a benchmark.
//! Knows nothing of steps or the engine.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::client::Client;
use super::prometheus::{self, Exposition, Selector};
use crate::store::Direction;

/// How often gauges are read while a run goes on.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// How long one scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// What to scrape.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerMetricsConfig {
    /// `http://host:port/metrics`.
    pub url: String,
    /// Series the user listed, besides the built-in ones.
    pub wanted: Vec<Wanted>,
}

/// A series a user listed (`server-metric-names`): `NAME`, `NAME{label="value"}`, either
/// followed by ` higher` or ` lower`.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    /// As written, without the direction: the stored metric is `server.<this>`.
    pub text: String,
    pub selector: Selector,
    pub direction: Direction,
}

impl Wanted {
    /// Without a direction, the name's convention decides (`…_seconds` lower), else lower: most
    /// series worth watching count what a strained server does more (preemptions, aborts).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (name, direction) = match text.rsplit_once(' ') {
            Some((name, word)) => match Direction::parse(word) {
                Some(direction) => (name.trim(), Some(direction)),
                None => (text, None),
            },
            None => (text, None),
        };
        let selector = Selector::parse(name)?;
        let direction = direction
            .or_else(|| Direction::infer(&selector.name, ""))
            .unwrap_or(Direction::Lower);
        Ok(Self {
            text: name.to_owned(),
            selector,
            direction,
        })
    }
}

/// One server-side metric of one run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ServerValue {
    pub name: String,
    pub unit: &'static str,
    pub direction: Direction,
    pub value: f64,
}

/// Scrapes one server for a whole benchmark; the first failure stops it, and is said once.
pub struct Scraper {
    config: ServerMetricsConfig,
    client: Client,
    path: String,
    failure: Mutex<Option<String>>,
}

impl Scraper {
    pub fn new(config: ServerMetricsConfig) -> Self {
        let rest = config.url.strip_prefix("http://").unwrap_or(&config.url);
        let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
        Self {
            client: Client::new(&format!("http://{authority}")),
            path: path.to_owned(),
            config,
            failure: Mutex::new(None),
        }
    }

    /// Why no server-side metrics were recorded, once a scrape failed.
    pub fn note(&self) -> Option<String> {
        let failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.as_ref().map(|why| {
            format!(
                "server metrics: `{}` {why}; no server-side metrics from then on (turn them on \
                 in the server: SGLang `--enable-metrics`, llama-server `--metrics`; give \
                 `server-metrics` its URL, or `false`)",
                self.config.url
            )
        })
    }

    /// The exposition now; `None` once a scrape has failed.
    async fn scrape(&self) -> Option<Exposition> {
        if self
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            return None;
        }
        let why = match tokio::time::timeout(SCRAPE_TIMEOUT, self.client.get(&self.path)).await {
            Err(_) => format!("did not answer within {}s", SCRAPE_TIMEOUT.as_secs()),
            Ok(Err(e)) => format!("could not be read ({e})"),
            Ok(Ok((200, body))) => match prometheus::parse(&String::from_utf8_lossy(&body)) {
                Ok(exposition) => return Some(exposition),
                Err(e) => format!("is not in the Prometheus text format ({e})"),
            },
            Ok(Ok((status, _))) => format!("answered HTTP {status}"),
        };
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert(why);
        None
    }

    /// Scrapes now, then every [`SAMPLE_EVERY`] until [`Watch::finish`].
    pub async fn watch(self: &Arc<Self>) -> Watch {
        let before = self.scrape().await;
        let stop = CancellationToken::new();
        let task = before.is_some().then(|| {
            let scraper = Arc::clone(self);
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut during = Vec::new();
                loop {
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(SAMPLE_EVERY) => {}
                    }
                    // A slow answer must not hold the run's end: it is dropped unread.
                    let scraped = tokio::select! {
                        () = stop.cancelled() => break,
                        scraped = scraper.scrape() => scraped,
                    };
                    match scraped {
                        Some(e) => during.push(e),
                        None => break,
                    }
                }
                during
            })
        });
        Watch {
            scraper: Arc::clone(self),
            before,
            stop,
            task,
        }
    }
}

/// The scrapes of one run under way.
pub struct Watch {
    scraper: Arc<Scraper>,
    before: Option<Exposition>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<Vec<Exposition>>>,
}

impl Watch {
    /// The run ended: scrapes once more and makes the run's server-side metrics (none when a
    /// scrape failed).
    pub async fn finish(self) -> Vec<ServerValue> {
        self.stop.cancel();
        let during = match self.task {
            Some(task) => task.await.unwrap_or_default(),
            None => Vec::new(),
        };
        let (Some(before), Some(after)) = (self.before, self.scraper.scrape().await) else {
            return Vec::new();
        };
        summarize(&before, &during, &after, &self.scraper.config.wanted)
    }
}

/// The series gpuflow reads from the servers' `/metrics`, by their exposed names (a counter
/// with its `_total`). Checked against the real servers, so a rename upstream fails a test:
/// vLLM's live (runner/tests/vllm_server.rs), SGLang's against its source's declarations
/// (runner/tests/server_contract.rs).
pub mod series {
    pub const VLLM_WAITING: &str = "vllm:num_requests_waiting";
    pub const VLLM_KV_USAGE: &str = "vllm:kv_cache_usage_perc";
    /// The name older vLLM used for [`VLLM_KV_USAGE`] (gone from 0.32 and 0.34); still read for them.
    pub const VLLM_KV_USAGE_OLD: &str = "vllm:gpu_cache_usage_perc";
    pub const VLLM_PREFIX_HITS: &str = "vllm:prefix_cache_hits_total";
    pub const VLLM_PREFIX_QUERIES: &str = "vllm:prefix_cache_queries_total";
    pub const VLLM_DRAFTS: &str = "vllm:spec_decode_num_drafts_total";
    pub const VLLM_ACCEPTED: &str = "vllm:spec_decode_num_accepted_tokens_total";
    pub const SGLANG_QUEUE: &str = "sglang:num_queue_reqs";
    pub const SGLANG_TOKEN_USAGE: &str = "sglang:token_usage";
    pub const SGLANG_CACHE_HIT_RATE: &str = "sglang:cache_hit_rate";
    pub const SGLANG_CACHED_TOKENS: &str = "sglang:cached_tokens_total";
    pub const SGLANG_PROMPT_TOKENS: &str = "sglang:prompt_tokens_total";
    pub const SGLANG_GENERATED: &str = "sglang:generation_tokens_total";
    pub const SGLANG_VERIFY_CALLS: &str = "sglang:spec_verify_calls_total";
    pub const SGLANG_ACCEPT_LENGTH: &str = "sglang:spec_accept_length";

    /// Every vLLM series read from today's vLLM (the speculative ones only while it speculates).
    pub const VLLM: &[&str] = &[
        VLLM_WAITING,
        VLLM_KV_USAGE,
        VLLM_PREFIX_HITS,
        VLLM_PREFIX_QUERIES,
        VLLM_DRAFTS,
        VLLM_ACCEPTED,
    ];
    /// Every SGLang series read.
    pub const SGLANG: &[&str] = &[
        SGLANG_QUEUE,
        SGLANG_TOKEN_USAGE,
        SGLANG_CACHE_HIT_RATE,
        SGLANG_CACHED_TOKENS,
        SGLANG_PROMPT_TOKENS,
        SGLANG_GENERATED,
        SGLANG_VERIFY_CALLS,
        SGLANG_ACCEPT_LENGTH,
    ];
}

/// One run's server-side metrics from its scrapes.
pub fn summarize(
    before: &Exposition,
    during: &[Exposition],
    after: &Exposition,
    wanted: &[Wanted],
) -> Vec<ServerValue> {
    let run = Run {
        before,
        during,
        after,
    };
    let mut out = Vec::new();
    let mut push = |name: &str, unit: &'static str, direction: Direction, value: Option<f64>| {
        if let Some(value) = value.filter(|v| v.is_finite()) {
            out.push(ServerValue {
                name: name.to_owned(),
                unit,
                direction,
                value,
            });
        }
    };
    push(
        "spec_accept_length",
        "tok/step",
        Direction::Higher,
        run.accept_length(),
    );
    push(
        "prefix_cache_hit_rate",
        "ratio",
        Direction::Higher,
        run.prefix_hit_rate(),
    );
    let queue = [series::VLLM_WAITING, series::SGLANG_QUEUE];
    push(
        "queue_len",
        "requests",
        Direction::Lower,
        queue
            .iter()
            .find_map(|n| run.gauge(&named(n), Combine::Sum)),
    );
    let kv = [
        series::VLLM_KV_USAGE,
        series::VLLM_KV_USAGE_OLD,
        series::SGLANG_TOKEN_USAGE,
    ];
    push(
        "kv_cache_usage",
        "ratio",
        Direction::Lower,
        kv.iter().find_map(|n| run.gauge(&named(n), Combine::Mean)),
    );
    for w in wanted {
        let value = if after.is_counter(&w.selector.name) {
            run.delta(&w.selector)
        } else {
            run.gauge(&w.selector, Combine::Sum)
        };
        push(&format!("server.{}", w.text), "", w.direction, value);
    }
    out
}

fn named(name: &str) -> Selector {
    Selector {
        name: name.to_owned(),
        labels: Vec::new(),
    }
}

/// How a gauge's series (one per engine, say) make one value.
#[derive(Clone, Copy)]
enum Combine {
    /// Requests waiting on each engine add up.
    Sum,
    /// A share of each engine's cache is averaged.
    Mean,
}

struct Run<'a> {
    before: &'a Exposition,
    during: &'a [Exposition],
    after: &'a Exposition,
}

impl Run<'_> {
    /// The increase of a counter over the run: `None` when the server has no such series, or
    /// when it fell (the server restarted).
    fn delta(&self, selector: &Selector) -> Option<f64> {
        let after = sum(self.after, selector)?;
        // A series first written during the run (SGLang's cached tokens) started at 0.
        let before = sum(self.before, selector).unwrap_or(0.0);
        Some(after - before).filter(|d| *d >= 0.0)
    }

    /// A gauge's mean over the scrapes during the run, or its value after a short one.
    fn gauge(&self, selector: &Selector, combine: Combine) -> Option<f64> {
        let read = |e: &Exposition| {
            let values: Vec<f64> = e.select(selector).map(|s| s.value).collect();
            let total: f64 = values.iter().sum();
            match combine {
                _ if values.is_empty() => None,
                Combine::Sum => Some(total),
                Combine::Mean => Some(total / values.len() as f64),
            }
        };
        let seen: Vec<f64> = self.during.iter().filter_map(read).collect();
        if seen.is_empty() {
            return read(self.after);
        }
        Some(seen.iter().sum::<f64>() / seen.len() as f64)
    }

    /// The mean acceptance length (tokens per speculative step, the bonus token included) over
    /// the run; `None` without speculative decoding.
    ///
    /// - vLLM: `1 + Δaccepted / Δdrafts` (vllm/v1/spec_decode/metrics.py).
    /// - SGLang: `Δgeneration_tokens / Δspec_verify_calls`, counters its tokenizer adds each
    ///   finished request to (sglang/srt/observability/metrics_collector.py). Its
    ///   `spec_accept_length` gauge only covers the steps since the last decode log (≤ 40 by
    ///   default), one series per scheduler (DP rank), so it is the fallback for a server
    ///   without the counter, and averaged over the ranks that report one, never summed.
    ///
    /// A ratio is taken of sums: each counter's increase is summed over its series first (the
    /// ranks, `is_streaming`), so a rank that did more steps weighs more.
    fn accept_length(&self) -> Option<f64> {
        let drafts = self.delta(&named(series::VLLM_DRAFTS));
        let accepted = self.delta(&named(series::VLLM_ACCEPTED));
        if let (Some(drafts), Some(accepted)) = (drafts, accepted)
            && drafts > 0.0
        {
            return Some(1.0 + accepted / drafts);
        }
        let verify_calls = self.delta(&named(series::SGLANG_VERIFY_CALLS));
        let generated = self.delta(&named(series::SGLANG_GENERATED));
        if let (Some(verify_calls), Some(generated)) = (verify_calls, generated)
            && verify_calls > 0.0
        {
            return Some(generated / verify_calls);
        }
        let speculating: Vec<f64> = self
            .after
            .select(&named(series::SGLANG_ACCEPT_LENGTH))
            .map(|s| s.value)
            .filter(|v| *v > 0.0)
            .collect();
        (!speculating.is_empty())
            .then(|| speculating.iter().sum::<f64>() / speculating.len() as f64)
    }

    /// Prompt tokens found in the prefix cache over those looked up during the run: vLLM's
    /// counters, SGLang's cached and prompt tokens, else SGLang's gauge.
    fn prefix_hit_rate(&self) -> Option<f64> {
        let ratio = |hits: &str, queries: &str| {
            let queries = self.delta(&named(queries)).filter(|q| *q > 0.0)?;
            let hits = self.delta(&named(hits)).unwrap_or(0.0);
            Some(hits / queries)
        };
        let sglang_cache = self
            .after
            .samples
            .iter()
            .any(|s| s.name.starts_with(series::SGLANG_CACHE_HIT_RATE));
        ratio(series::VLLM_PREFIX_HITS, series::VLLM_PREFIX_QUERIES)
            .or_else(|| {
                sglang_cache
                    .then(|| ratio(series::SGLANG_CACHED_TOKENS, series::SGLANG_PROMPT_TOKENS))
                    .flatten()
            })
            .or_else(|| sum(self.after, &named(series::SGLANG_CACHE_HIT_RATE)))
    }
}

/// The sum of the selected series; `None` when there is none.
fn sum(e: &Exposition, selector: &Selector) -> Option<f64> {
    let mut found = e.select(selector).peekable();
    found.peek()?;
    Some(found.map(|s| s.value).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposition(text: &str) -> Exposition {
        prometheus::parse(text).unwrap()
    }

    fn value(values: &[ServerValue], name: &str) -> Option<f64> {
        values.iter().find(|v| v.name == name).map(|v| v.value)
    }

    const VLLM_BEFORE: &str = "# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine=\"0\"} 100.0
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 300.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine=\"0\"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine=\"0\"} 0.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine=\"0\"} 0.0
vllm:num_requests_waiting{engine=\"1\"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine=\"0\"} 0.0
vllm:kv_cache_usage_perc{engine=\"1\"} 0.0
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine=\"0\"} 2.0
";

    #[test]
    fn vllm_counters_give_the_runs_acceptance_length_and_hit_rate() {
        let before = exposition(VLLM_BEFORE);
        // The run drafted 50 times and accepted 100 tokens: 3 tokens per step; it looked up
        // 400 prompt tokens and found 100; two engines queued 3 and 1, then 1 and 1.
        let during = [
            exposition(
                "vllm:num_requests_waiting{engine=\"0\"} 3\nvllm:num_requests_waiting{engine=\"1\"} 1\n\
                 vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.25\n",
            ),
            exposition(
                "vllm:num_requests_waiting{engine=\"0\"} 1\nvllm:num_requests_waiting{engine=\"1\"} 1\n\
                 vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.25\n",
            ),
        ];
        let after = exposition(
            &VLLM_BEFORE
                .replace("} 100.0", "} 150.0")
                .replace("} 300.0", "} 400.0")
                .replace("} 1000.0", "} 1400.0")
                .replace(
                    "hits_total{engine=\"0\"} 0.0",
                    "hits_total{engine=\"0\"} 100.0",
                )
                .replace("} 2.0", "} 5.0"),
        );
        let wanted = [
            Wanted::parse("vllm:num_preemptions_total").unwrap(),
            Wanted::parse("vllm:num_requests_waiting{engine=\"1\"} higher").unwrap(),
        ];
        let values = summarize(&before, &during, &after, &wanted);
        assert_eq!(value(&values, "spec_accept_length"), Some(3.0));
        assert_eq!(value(&values, "prefix_cache_hit_rate"), Some(0.25));
        assert_eq!(
            value(&values, "queue_len"),
            Some(3.0),
            "(4 + 2) / 2 scrapes"
        );
        assert_eq!(
            value(&values, "kv_cache_usage"),
            Some(0.3125),
            "(0.375 + 0.25) / 2"
        );
        assert_eq!(
            value(&values, "server.vllm:num_preemptions_total"),
            Some(3.0)
        );
        let waiting = values
            .iter()
            .find(|v| v.name == "server.vllm:num_requests_waiting{engine=\"1\"}")
            .unwrap();
        assert_eq!((waiting.value, waiting.direction), (1.0, Direction::Higher));
    }

    #[test]
    fn sglang_gauges_stand_in_where_it_has_no_counters() {
        let before = exposition(
            "sglang:prompt_tokens_total{model_name=\"m\"} 10\nsglang:spec_accept_length 0\n",
        );
        let after = exposition(
            "sglang:prompt_tokens_total{model_name=\"m\"} 50\n\
             sglang:cached_tokens_total{model_name=\"m\"} 30\n\
             sglang:cache_hit_rate{model_name=\"m\"} 0.9\n\
             sglang:spec_accept_length{model_name=\"m\"} 2.5\n\
             sglang:num_queue_reqs{model_name=\"m\"} 0\n\
             sglang:token_usage{model_name=\"m\"} 0.1\n",
        );
        let values = summarize(&before, &[], &after, &[]);
        assert_eq!(value(&values, "spec_accept_length"), Some(2.5));
        // Over the run (30 of 40 prompt tokens), not the gauge's own window.
        assert_eq!(value(&values, "prefix_cache_hit_rate"), Some(0.75));
        assert_eq!(value(&values, "queue_len"), Some(0.0), "the value after");
        assert_eq!(value(&values, "kv_cache_usage"), Some(0.1));
    }

    /// SGLang with DP attention: one scheduler gauge per DP rank (each over its last decode
    /// window), counters of the whole run. The run's value is Σ generated / Σ verify calls, not
    /// the sum of the gauges (twice too large) nor the mean of per-series ratios.
    #[test]
    fn sglang_acceptance_length_is_the_runs_tokens_per_verify_call_over_all_ranks() {
        let ranks = |rank0: f64, rank1: f64| {
            format!(
                "# TYPE sglang:spec_accept_length gauge\n\
                 sglang:spec_accept_length{{model_name=\"m\",engine_type=\"unified\",tp_rank=\"0\",pp_rank=\"0\",moe_ep_rank=\"0\",dp_rank=\"0\"}} {rank0}\n\
                 sglang:spec_accept_length{{model_name=\"m\",engine_type=\"unified\",tp_rank=\"0\",pp_rank=\"0\",moe_ep_rank=\"0\",dp_rank=\"1\"}} {rank1}\n"
            )
        };
        let counters = |streamed: f64, plain: f64, verify0: f64, verify1: f64| {
            format!(
                "# TYPE sglang:generation_tokens counter\n\
                 sglang:generation_tokens_total{{model_name=\"m\",engine_type=\"unified\",is_streaming=\"true\"}} {streamed}\n\
                 sglang:generation_tokens_total{{model_name=\"m\",engine_type=\"unified\",is_streaming=\"false\"}} {plain}\n\
                 # TYPE sglang:spec_verify_calls counter\n\
                 sglang:spec_verify_calls_total{{model_name=\"m\",engine_type=\"unified\",dp_rank=\"0\"}} {verify0}\n\
                 sglang:spec_verify_calls_total{{model_name=\"m\",engine_type=\"unified\",dp_rank=\"1\"}} {verify1}\n"
            )
        };
        let before = exposition(&(ranks(0.0, 0.0) + &counters(1000.0, 0.0, 400.0, 100.0)));
        // The run: 3000 + 600 tokens generated in 1000 + 200 verify calls: 3 tokens per call.
        // The last windows said 3.5 and 2.0; summed, 5.5.
        let after = exposition(&(ranks(3.5, 2.0) + &counters(4000.0, 600.0, 1400.0, 300.0)));
        let values = summarize(&before, &[], &after, &[]);
        assert_eq!(value(&values, "spec_accept_length"), Some(3.0));

        // A server without the counter: the gauges' mean over the ranks that speculate.
        let before = exposition(&ranks(0.0, 0.0));
        let after = exposition(&(ranks(3.5, 2.0) + "sglang:spec_accept_length{dp_rank=\"2\"} 0\n"));
        let values = summarize(&before, &[], &after, &[]);
        assert_eq!(value(&values, "spec_accept_length"), Some(2.75));
    }

    #[test]
    fn what_a_server_does_not_expose_is_left_out() {
        let empty = exposition("other_metric 1\n");
        let values = summarize(
            &empty,
            &[],
            &empty,
            &[Wanted::parse("absent_total").unwrap()],
        );
        assert_eq!(values, []);
        // No speculative decoding: SGLang's gauge stays 0.
        let zero = exposition("sglang:spec_accept_length 0\n");
        assert_eq!(summarize(&zero, &[], &zero, &[]), []);
    }

    #[test]
    fn a_counter_that_fell_is_a_restart_not_a_negative_increase() {
        let before = exposition("# TYPE x counter\nx_total 10\n");
        let after = exposition("# TYPE x counter\nx_total 4\n");
        let values = summarize(&before, &[], &after, &[Wanted::parse("x_total").unwrap()]);
        assert_eq!(values, []);
    }

    #[test]
    fn listed_names_read_a_direction_and_refuse_what_is_no_name() {
        let w = Wanted::parse("vllm:e2e_request_latency_seconds_sum").unwrap();
        assert_eq!(w.direction, Direction::Lower);
        let w = Wanted::parse("  tokens_total higher ").unwrap();
        assert_eq!(
            (w.text.as_str(), w.direction),
            ("tokens_total", Direction::Higher)
        );
        assert!(Wanted::parse("not a name").is_err());
    }
}
