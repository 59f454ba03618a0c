//! What a benchmark is asked to do ([`BenchConfig`]), from its typed inputs
//! ([`BenchInputs`], which the `benchmark` step and `gpuflow bench` make): which inputs go
//! together, and what those left out mean. Every error names the input and says how to fix
//! it; the caller points at the input's place in the workflow. Knows nothing about HTTP, the
//! engine or steps.

use std::time::Duration;

use super::inputs::{
    ArrivalKind, BenchInputs, ConfigError, Endpoint, ModeKind, PromptKind, Slo, err,
};
use super::prompts::PromptSource;
use super::schedule::Arrival;
use super::server_metrics::{ServerMetricsConfig, Wanted};

/// How load is offered.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// One request at a time.
    SingleStream,
    /// A closed loop: each level keeps that many requests in flight; several levels sweep.
    Concurrency(Vec<u32>),
    /// An open loop: requests are sent on a seeded schedule, whatever the server does;
    /// `max_concurrency` caps requests in flight (vLLM's `--max-concurrency`).
    RequestRate {
        rate: f64,
        arrival: Arrival,
        max_concurrency: Option<u32>,
    },
}

/// When a run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// After this many measured requests.
    Requests(u64),
    /// No new request starts after this long; those in flight finish and count.
    Duration(Duration),
}

/// Everything one benchmark needs.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    /// Base URL, without the `/v1/...` path.
    pub target: String,
    pub endpoint: Endpoint,
    /// `None`: ask `/v1/models`.
    pub model: Option<String>,
    pub mode: Mode,
    /// Seed of the arrival schedule and the synthetic prompts. `None`: prompts get a fresh
    /// random salt each invocation (recorded in the result), so a second run is not served
    /// from the server's prefix cache; the schedule then uses seed 0.
    pub seed: Option<u64>,
    pub stop: Stop,
    pub runs: u32,
    pub warmup: u32,
    pub prompts: PromptSource,
    pub output_tokens: u32,
    pub ignore_eos: bool,
    pub request_timeout: Duration,
    pub idle_timeout: Duration,
    /// A fraction: 0.05 is 5%.
    pub max_error_rate: f64,
    pub slo: Slo,
    /// The server's `/metrics` to scrape around each run; `None`: off.
    pub server_metrics: Option<ServerMetricsConfig>,
}

/// Requests per run when neither `requests` nor `duration` is given: a few long single-stream
/// requests; for load, enough that every in-flight slot cycles several times.
pub fn default_requests(mode: &Mode) -> u64 {
    match mode {
        Mode::SingleStream => 3,
        Mode::Concurrency(levels) => {
            100.max(4 * u64::from(levels.iter().copied().max().unwrap_or(1)))
        }
        Mode::RequestRate { .. } => 100,
    }
}

impl BenchConfig {
    /// The benchmark `inputs` ask for, once they are checked to go together: a target to
    /// send requests to, a mode with its load, one way to end a run, prompts.
    pub fn from_inputs(inputs: &BenchInputs) -> Result<Self, ConfigError> {
        let target = target(inputs)?;
        let mode = mode(inputs)?;
        let stop = stop(inputs, &mode)?;
        at_least_one("runs", inputs.runs, "at least one run is needed")?;
        let prompts = prompts(inputs)?;
        at_least_one(
            "output-tokens",
            inputs.output_tokens,
            "streaming metrics need at least one token",
        )?;
        let synthetic = matches!(prompts, PromptSource::Synthetic { .. });
        let server_metrics = server_metrics(inputs, &target)?;
        Ok(Self {
            target,
            endpoint: inputs.endpoint,
            model: inputs.model.clone(),
            mode,
            seed: inputs.seed,
            stop,
            runs: inputs.runs,
            warmup: inputs.warmup,
            prompts,
            output_tokens: inputs.output_tokens,
            ignore_eos: inputs.ignore_eos.unwrap_or(synthetic),
            request_timeout: positive("request-timeout", inputs.request_timeout)?,
            idle_timeout: positive("idle-timeout", inputs.idle_timeout)?,
            max_error_rate: inputs.max_error_rate,
            slo: inputs.slo,
            server_metrics,
        })
    }
}

/// The target, required, as a base URL paths can be appended to.
fn target(inputs: &BenchInputs) -> Result<String, ConfigError> {
    let target = inputs
        .target
        .as_deref()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            err(
                "target",
                "`benchmark` needs a `target`: the server's base URL".into(),
                Some("add `target: http://localhost:30000` (or `command:` to run a script)".into()),
            )
        })?;
    normalise_target(target)
}

/// What `server-metrics` and `server-metric-names` ask: the target's `/metrics` unless another
/// URL is given or it is turned off.
fn server_metrics(
    inputs: &BenchInputs,
    target: &str,
) -> Result<Option<ServerMetricsConfig>, ConfigError> {
    let url = match &inputs.server_metrics {
        None => format!("{target}/metrics"),
        Some(None) => return Ok(None),
        Some(Some(url)) => {
            if url.parse::<hyper::Uri>().is_err() || url.contains(char::is_whitespace) {
                return Err(err(
                    "server-metrics",
                    format!("input `server-metrics` is `{url}`, which is not a URL"),
                    Some("`http://localhost:30000/metrics`".into()),
                ));
            }
            url.clone()
        }
    };
    let wanted = inputs
        .server_metric_names
        .iter()
        .map(|name| Wanted::parse(name))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            err(
                "server-metric-names",
                format!("input `server-metric-names`: {e}"),
                Some(
                    "list series as `/metrics` names them, with labels to pick some and \
                     `higher` or `lower` after: `vllm:num_preemptions_total lower`"
                        .into(),
                ),
            )
        })?;
    Ok(Some(ServerMetricsConfig { url, wanted }))
}

/// `requests` or `duration`, not both; without either, [`default_requests`].
fn stop(inputs: &BenchInputs, mode: &Mode) -> Result<Stop, ConfigError> {
    match (inputs.requests, inputs.duration) {
        (Some(_), Some(_)) => Err(err(
            "duration",
            "`requests` and `duration` both end a run; give one".into(),
            Some("remove `requests` or `duration`".into()),
        )),
        (Some(0), None) => Err(err(
            "requests",
            "input `requests` is `0`; a run needs at least one request".into(),
            None,
        )),
        (Some(n), None) => Ok(Stop::Requests(n)),
        (None, Some(d)) if d.is_zero() => Err(err(
            "duration",
            "input `duration` is zero; a run needs time to send requests".into(),
            None,
        )),
        (None, Some(d)) => Ok(Stop::Duration(d)),
        (None, None) => Ok(Stop::Requests(default_requests(mode))),
    }
}

/// Synthetic prompts, or a file's with `prompt-file` (which only a file's kind may take).
fn prompts(inputs: &BenchInputs) -> Result<PromptSource, ConfigError> {
    let file = inputs.prompt_file.clone();
    match (inputs.prompts, file) {
        (PromptKind::Synthetic, None) => Ok(PromptSource::Synthetic {
            input_tokens: inputs.input_tokens,
        }),
        (PromptKind::Synthetic, Some(_)) => Err(err(
            "prompt-file",
            "`prompt-file` is given but `prompts` is `synthetic`".into(),
            Some("add `prompts: jsonl` or `prompts: sharegpt`".into()),
        )),
        (kind, None) => {
            let kind = if kind == PromptKind::Jsonl {
                "jsonl"
            } else {
                "sharegpt"
            };
            Err(err(
                "prompt-file",
                format!("`prompts: {kind}` needs a `prompt-file`"),
                Some("add `prompt-file: prompts.jsonl`".into()),
            ))
        }
        (PromptKind::Jsonl, Some(path)) => Ok(PromptSource::Jsonl(path)),
        (PromptKind::ShareGpt, Some(path)) => Ok(PromptSource::ShareGpt(path)),
    }
}

fn at_least_one(name: &str, value: u32, why: &str) -> Result<(), ConfigError> {
    if value == 0 {
        return Err(err(name, format!("input `{name}` is `0`; {why}"), None));
    }
    Ok(())
}

fn positive(name: &str, duration: Duration) -> Result<Duration, ConfigError> {
    if duration.is_zero() {
        return Err(err(
            name,
            format!("input `{name}` must be longer than zero"),
            None,
        ));
    }
    Ok(duration)
}

/// The mode asked for, or the one the load inputs given imply (`concurrency: 8` alone means
/// it), with its load.
fn mode(inputs: &BenchInputs) -> Result<Mode, ConfigError> {
    let levels = inputs.concurrency.as_deref();
    let rate = inputs.request_rate;
    let kind = match inputs.mode {
        Some(kind) => kind,
        None if rate.is_some() => ModeKind::RequestRate,
        None if levels.is_some() => ModeKind::Concurrency,
        None => ModeKind::SingleStream,
    };
    match kind {
        ModeKind::Concurrency => closed_loop(levels, rate),
        ModeKind::RequestRate => open_loop(inputs, levels, rate),
        ModeKind::SingleStream => single_stream(levels, rate),
    }
}

fn closed_loop(levels: Option<&[u32]>, rate: Option<f64>) -> Result<Mode, ConfigError> {
    if rate.is_some() {
        return Err(err(
            "request-rate",
            "`request-rate` is for `mode: request-rate`, not `concurrency`".into(),
            Some("remove `request-rate`, or set `mode: request-rate`".into()),
        ));
    }
    let levels = levels.ok_or_else(|| {
        err(
            "concurrency",
            "`mode: concurrency` needs `concurrency`".into(),
            Some("add `concurrency: 8` or a sweep `concurrency: [1, 8, 64]`".into()),
        )
    })?;
    Ok(Mode::Concurrency(levels.to_vec()))
}

fn open_loop(
    inputs: &BenchInputs,
    levels: Option<&[u32]>,
    rate: Option<f64>,
) -> Result<Mode, ConfigError> {
    let rate = rate.filter(|r| *r > 0.0).ok_or_else(|| {
        err(
            "request-rate",
            "`mode: request-rate` needs a `request-rate` above 0".into(),
            Some("add `request-rate: 10` (requests per second)".into()),
        )
    })?;
    let arrival = match inputs.arrival {
        ArrivalKind::Poisson => Arrival::Poisson,
        ArrivalKind::Constant => Arrival::Constant,
        ArrivalKind::Gamma if inputs.burstiness <= 0.0 => {
            return Err(err(
                "burstiness",
                "input `burstiness` must be above 0".into(),
                Some("1.0 is Poisson; lower is burstier".into()),
            ));
        }
        ArrivalKind::Gamma => Arrival::Gamma {
            burstiness: inputs.burstiness,
        },
    };
    let max_concurrency = match levels {
        None => None,
        Some([one]) => Some(*one),
        Some(_) => {
            return Err(err(
                "concurrency",
                "with `mode: request-rate`, `concurrency` caps requests in flight and takes one number".into(),
                Some("sweep rates with a matrix, or use `mode: concurrency`".into()),
            ));
        }
    };
    Ok(Mode::RequestRate {
        rate,
        arrival,
        max_concurrency,
    })
}

fn single_stream(levels: Option<&[u32]>, rate: Option<f64>) -> Result<Mode, ConfigError> {
    for (name, given) in [
        ("concurrency", levels.is_some()),
        ("request-rate", rate.is_some()),
    ] {
        if given {
            return Err(err(
                name,
                format!("`{name}` is not used by `mode: single-stream`"),
                Some(format!("remove `{name}`, or set the mode it belongs to")),
            ));
        }
    }
    Ok(Mode::SingleStream)
}

/// Whether `text` is a `target` requests can be sent to (what `gpuflow validate` checks of a
/// literal target, with the same words as the step).
pub fn check_target(text: &str) -> Result<(), ConfigError> {
    normalise_target(text).map(drop)
}

/// `http://host:port` without a trailing slash or `/v1`, so paths can be appended.
fn normalise_target(text: &str) -> Result<String, ConfigError> {
    let Some(rest) = text.strip_prefix("http://") else {
        let hint = if text.starts_with("https://") {
            "the load generator speaks plain HTTP/1.1; use `http://` (a TLS proxy in front would be measured too)".to_owned()
        } else {
            format!("write `http://{text}`")
        };
        return Err(err(
            "target",
            format!("input `target` is `{text}`, not an `http://` URL"),
            Some(hint),
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(err(
            "target",
            format!("input `target` is `{text}`, which has no host"),
            Some("write `http://localhost:30000`".into()),
        ));
    }
    // Every request's URI is this text with a path appended: text an HTTP request line cannot
    // hold (a blank, a quote, a control character) would fail each request.
    if let Some(bad) = text
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || "\"<>\\^`{|}".contains(*c))
        .or_else(|| text.parse::<hyper::Uri>().is_err().then_some('?'))
    {
        let what = match bad {
            ' ' => "a blank".to_owned(),
            '?' if text.parse::<hyper::Uri>().is_err() => "text a URL cannot hold".to_owned(),
            c if c.is_whitespace() || c.is_control() => format!("the character {c:?}"),
            c => format!("`{c}`"),
        };
        return Err(err(
            "target",
            format!("input `target` is `{}`, which holds {what}: no request can be sent to it", text.escape_debug()),
            Some("percent-encode such characters in the path (a blank is `%20`), or remove them: `http://localhost:30000`".into()),
        ));
    }
    let trimmed = text.trim_end_matches('/');
    Ok(trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    /// The inputs as text, as flags and expressions give them.
    fn cfg(pairs: &[(&str, &str)]) -> Result<BenchConfig, ConfigError> {
        let inputs: serde_json::Map<String, serde_json::Value> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
            .collect();
        BenchConfig::from_inputs(&BenchInputs::from_json(&inputs)?)
    }

    #[test]
    fn defaults_are_the_declared_ones() {
        let c = cfg(&[("target", "http://localhost:30000/")]).unwrap();
        assert_eq!(c.target, "http://localhost:30000");
        assert_eq!(c.mode, Mode::SingleStream);
        assert_eq!(c.endpoint, Endpoint::Completions);
        assert_eq!(c.runs, 1);
        assert_eq!(c.warmup, 1);
        assert_eq!(c.output_tokens, 128);
        assert!(c.ignore_eos, "synthetic prompts ignore EOS by default");
        assert_eq!(c.prompts, PromptSource::Synthetic { input_tokens: 128 });
        assert_eq!(c.request_timeout, Duration::from_secs(600));
        assert_eq!(c.idle_timeout, Duration::from_secs(60));
        assert_eq!(c.max_error_rate, 0.0);
        assert_eq!(c.stop, Stop::Requests(3));
    }

    #[test_case("8", &[8])]
    #[test_case("[1, 8, 64]", &[1, 8, 64])]
    #[test_case("1,2", &[1, 2])]
    fn concurrency_levels(text: &str, levels: &[u32]) {
        let c = cfg(&[("target", "http://h:1"), ("concurrency", text)]).unwrap();
        assert_eq!(c.mode, Mode::Concurrency(levels.to_vec()));
    }

    #[test]
    fn request_rate_mode() {
        let c = cfg(&[
            ("target", "http://h:1/v1"),
            ("request-rate", "20"),
            ("arrival", "gamma"),
            ("burstiness", "0.5"),
            ("concurrency", "16"),
            ("duration", "30s"),
            ("slo", "{\"ttft_ms\": 500, \"tpot_ms\": \"50\"}"),
            ("max-error-rate", "5%"),
        ])
        .unwrap();
        assert_eq!(c.target, "http://h:1");
        assert_eq!(
            c.mode,
            Mode::RequestRate {
                rate: 20.0,
                arrival: Arrival::Gamma { burstiness: 0.5 },
                max_concurrency: Some(16)
            }
        );
        assert_eq!(c.stop, Stop::Duration(Duration::from_secs(30)));
        assert_eq!(c.slo.ttft_ms, Some(500.0));
        assert_eq!(c.slo.tpot_ms, Some(50.0));
        assert!((c.max_error_rate - 0.05).abs() < 1e-12);
    }

    #[test_case(&[("target", "localhost:30000")], "target", "not an `http://` URL")]
    #[test_case(&[("target", "http://localhost:30000/my model")], "target", "holds a blank")]
    #[test_case(&[("target", "http://localhost:30000/a\"b")], "target", "holds `\"`")]
    #[test_case(&[], "target", "needs a `target`")]
    #[test_case(&[("target", "http://h:1"), ("mode", "concurency")], "mode", "expected one of")]
    #[test_case(&[("target", "http://h:1"), ("concurency", "4")], "concurency", "no input `concurency`")]
    #[test_case(&[("target", "http://h:1"), ("mode", "concurrency")], "concurrency", "needs `concurrency`")]
    #[test_case(&[("target", "http://h:1"), ("mode", "single-stream"), ("concurrency", "4")], "concurrency", "not used by")]
    #[test_case(&[("target", "http://h:1"), ("requests", "5"), ("duration", "1m")], "duration", "give one")]
    #[test_case(&[("target", "http://h:1"), ("max-error-rate", "5")], "max-error-rate", "a fraction of 500%")]
    #[test_case(&[("target", "http://h:1"), ("request-timeout", "30")], "request-timeout", "expected a duration")]
    #[test_case(&[("target", "http://h:1"), ("slo", "ttft=5")], "slo", "no objective `ttft`")]
    #[test_case(&[("target", "http://h:1"), ("prompts", "jsonl")], "prompt-file", "needs a `prompt-file`")]
    #[test_case(&[("target", "http://h:1"), ("concurrency", "[1, x]")], "concurrency", "`x`")]
    #[test_case(&[("command", "python bench.py")], "command", "cannot run the script")]
    fn errors_name_the_input(pairs: &[(&str, &str)], input: &str, message: &str) {
        let e = cfg(pairs).unwrap_err();
        assert_eq!(e.input, input);
        assert!(e.message.contains(message), "{}", e.message);
        assert!(
            e.message.chars().next().is_some_and(|c| !c.is_uppercase()),
            "lower-case: {}",
            e.message
        );
    }

    #[test]
    fn misspellings_get_a_suggestion() {
        let e = cfg(&[("target", "http://h:1"), ("mode", "concurency")]).unwrap_err();
        assert!(e.hint.unwrap().contains("`concurrency`"));
        let e = cfg(&[("target", "http://h:1"), ("slo", "tpot_m=5")]).unwrap_err();
        assert!(e.hint.unwrap().contains("`tpot_ms`"));
    }
}
