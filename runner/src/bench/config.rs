//! What a benchmark is asked to do, read from the `benchmark` built-in's inputs
//! (`steps/benchmark/spec.rs` declares their names, types and defaults; this file reads the same
//! names and applies the same defaults).
//!
//! Values arrive as text, as a step's evaluated `with:` gives them. Lists (`concurrency`) may
//! be JSON (`[1, 8, 64]`), comma-separated or one number; the `slo` mapping may be a JSON object
//! or `ttft_ms=500,tpot_ms=50`. Every error names the input and says how to fix it; the caller
//! points at the input's place in the workflow. Knows nothing about HTTP or the engine.

use std::path::PathBuf;
use std::time::Duration;

use indexmap::IndexMap;

use super::prompts::PromptSource;
use super::schedule::Arrival;
use crate::diag::did_you_mean;
use crate::steps::{BuiltinSpec, InputType};

/// The declaration these inputs come from.
fn spec() -> &'static BuiltinSpec {
    crate::steps::builtin("benchmark").expect("the `benchmark` built-in is declared")
}

/// Which OpenAI endpoint is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/completions`
    Completions,
    /// `/v1/chat/completions`
    Chat,
}

impl Endpoint {
    pub fn path(self) -> &'static str {
        match self {
            Self::Completions => "/v1/completions",
            Self::Chat => "/v1/chat/completions",
        }
    }

    /// vLLM's `endpoint_type` / `backend` name for it.
    pub fn vllm_backend(self) -> &'static str {
        match self {
            Self::Completions => "openai",
            Self::Chat => "openai-chat",
        }
    }
}

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

/// Service-level objectives for `request_goodput` (vLLM's `--goodput`): a request is good when
/// it meets every one given.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Slo {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2el_ms: Option<f64>,
}

impl Slo {
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.tpot_ms.is_none() && self.e2el_ms.is_none()
    }
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
}

/// An input that cannot be used, named so the caller can point at it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// The input's name as written under `with:`.
    pub input: String,
    pub message: String,
    pub hint: Option<String>,
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

fn err(input: &str, message: String, hint: Option<String>) -> ConfigError {
    ConfigError {
        input: input.to_owned(),
        message,
        hint,
    }
}

/// Reads inputs by name, with the declared defaults.
struct Reader<'a> {
    inputs: &'a IndexMap<String, String>,
}

impl Reader<'_> {
    fn given(&self, name: &str) -> Option<&str> {
        self.inputs.get(name).map(|v| v.trim())
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.given(name)
            .or_else(|| spec().input(name).and_then(|i| i.default))
    }

    fn enumerated(&self, name: &str) -> Result<Option<&str>, ConfigError> {
        let Some(value) = self.text(name) else {
            return Ok(None);
        };
        let Some(InputType::Enum(values)) = spec().input(name).map(|i| i.ty) else {
            return Ok(Some(value));
        };
        if values.contains(&value) {
            Ok(Some(value))
        } else {
            Err(err(
                name,
                format!(
                    "input `{name}` is `{value}`, expected one of {}",
                    crate::diag::join_quoted(values, "or")
                ),
                did_you_mean(value, values),
            ))
        }
    }

    fn integer(&self, name: &str) -> Result<Option<u64>, ConfigError> {
        self.text(name)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    err(
                        name,
                        format!("input `{name}` is `{v}`, expected a whole number"),
                        v.parse::<f64>().ok().map(|f| {
                            format!("use a whole number, such as `{}`", f.round().max(0.0))
                        }),
                    )
                })
            })
            .transpose()
    }

    fn u32(&self, name: &str) -> Result<Option<u32>, ConfigError> {
        self.integer(name)?
            .map(|n| {
                u32::try_from(n).map_err(|_| {
                    err(
                        name,
                        format!("input `{name}` is `{n}`, which is too large"),
                        None,
                    )
                })
            })
            .transpose()
    }

    fn number(&self, name: &str) -> Result<Option<f64>, ConfigError> {
        self.text(name)
            .map(|v| match v.parse::<f64>() {
                Ok(f) if f.is_finite() && f >= 0.0 => Ok(f),
                _ => Err(err(
                    name,
                    format!("input `{name}` is `{v}`, expected a number ≥ 0"),
                    None,
                )),
            })
            .transpose()
    }

    fn boolean(&self, name: &str) -> Result<Option<bool>, ConfigError> {
        self.text(name)
            .map(|v| match v.to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(err(
                    name,
                    format!("input `{name}` is `{v}`, expected `true` or `false`"),
                    None,
                )),
            })
            .transpose()
    }

    fn duration(&self, name: &str) -> Result<Option<Duration>, ConfigError> {
        self.text(name)
            .map(|v| {
                humantime::parse_duration(v).map_err(|_| {
                    let hint = if v.parse::<f64>().is_ok() {
                        format!("add a unit: `{v}s` or `{v}m`")
                    } else {
                        "write a number and a unit: `ms`, `s`, `m` or `h` (`1h30m`)".to_owned()
                    };
                    err(
                        name,
                        format!("input `{name}` is `{v}`, expected a duration"),
                        Some(hint),
                    )
                })
            })
            .transpose()
    }

    fn percent(&self, name: &str) -> Result<Option<f64>, ConfigError> {
        self.text(name)
            .map(|v| {
                let with_sign = v.ends_with('%');
                let number = v.trim_end_matches('%').trim();
                match number.parse::<f64>() {
                    Ok(f) if f.is_finite() && f >= 0.0 && with_sign && f <= 100.0 => Ok(f / 100.0),
                    Ok(f) if f.is_finite() && (0.0..=1.0).contains(&f) && !with_sign => Ok(f),
                    Ok(f) if f.is_finite() && f > 1.0 && !with_sign => Err(err(
                        name,
                        format!("input `{name}` is `{v}`, a fraction of {}%", f * 100.0),
                        Some(format!("write `{v}%` for {v} percent")),
                    )),
                    _ => Err(err(
                        name,
                        format!("input `{name}` is `{v}`, expected a percentage such as `3%`"),
                        None,
                    )),
                }
            })
            .transpose()
    }

    /// `8`, `[1, 8, 64]` or `1,8,64`.
    fn integer_list(&self, name: &str) -> Result<Option<Vec<u32>>, ConfigError> {
        let Some(v) = self.text(name) else {
            return Ok(None);
        };
        let inner = v
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or(v);
        let items: Result<Vec<u32>, _> = inner
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<u32>().map_err(|_| s.to_owned()))
            .collect();
        match items {
            Ok(items) if !items.is_empty() && items.iter().all(|&n| n > 0) => Ok(Some(items)),
            Ok(_) => Err(err(
                name,
                format!("input `{name}` is `{v}`, expected numbers ≥ 1"),
                Some(format!("write `{name}: 8` or a sweep `{name}: [1, 8, 64]`")),
            )),
            Err(item) => Err(err(
                name,
                format!("input `{name}` has `{item}`, which is not a whole number"),
                Some(format!("write `{name}: 8` or a sweep `{name}: [1, 8, 64]`")),
            )),
        }
    }
}

const SLO_KEYS: &[&str] = &["ttft_ms", "tpot_ms", "e2el_ms"];

fn parse_slo(text: &str) -> Result<Slo, ConfigError> {
    let pairs: Vec<(String, String)> =
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_str(text) {
            map.into_iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    (k, v)
                })
                .collect()
        } else {
            let mut pairs = Vec::new();
            for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let Some((k, v)) = part.split_once('=').or_else(|| part.split_once(':')) else {
                    return Err(err(
                        "slo",
                        format!("input `slo` has `{part}`, not NAME=VALUE"),
                        Some("write `slo: {ttft_ms: 500, tpot_ms: 50}`".into()),
                    ));
                };
                pairs.push((k.trim().to_owned(), v.trim().to_owned()));
            }
            pairs
        };
    let mut slo = Slo::default();
    for (key, value) in pairs {
        let number = value
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f > 0.0)
            .ok_or_else(|| {
                err(
                    "slo",
                    format!("`slo.{key}` is `{value}`, expected milliseconds > 0"),
                    None,
                )
            })?;
        match key.as_str() {
            "ttft_ms" => slo.ttft_ms = Some(number),
            "tpot_ms" => slo.tpot_ms = Some(number),
            "e2el_ms" => slo.e2el_ms = Some(number),
            _ => {
                return Err(err(
                    "slo",
                    format!(
                        "`slo` has no objective `{key}`; the objectives are {}",
                        crate::diag::join_quoted(SLO_KEYS, "and")
                    ),
                    did_you_mean(&key, SLO_KEYS),
                ));
            }
        }
    }
    Ok(slo)
}

impl BenchConfig {
    /// Reads the `benchmark` built-in's inputs (absent ones take their declared defaults).
    pub fn from_inputs(inputs: &IndexMap<String, String>) -> Result<Self, ConfigError> {
        let known: Vec<&str> = spec().input_names().collect();
        if let Some(unknown) = inputs.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(err(
                unknown,
                format!("`benchmark` has no input `{unknown}`"),
                did_you_mean(unknown, &known),
            ));
        }
        let r = Reader { inputs };
        if let Some(command) = r.given("command") {
            return Err(err(
                "command",
                format!("the built-in load generator cannot run the script `{command}`"),
                Some("scripted benchmarks run as a workflow step (`uses: benchmark` with `command:`), not through `gpuflow bench`".into()),
            ));
        }
        let target = r.given("target").filter(|t| !t.is_empty()).ok_or_else(|| {
            err(
                "target",
                "`benchmark` needs a `target`: the server's base URL".into(),
                Some("add `target: http://localhost:30000` (or `command:` to run a script)".into()),
            )
        })?;
        let target = normalise_target(target)?;
        let endpoint = match r.enumerated("endpoint")? {
            Some("chat") => Endpoint::Chat,
            _ => Endpoint::Completions,
        };
        let mode = read_mode(&r)?;
        let stop = match (r.integer("requests")?, r.duration("duration")?) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "duration",
                    "`requests` and `duration` both end a run; give one".into(),
                    Some("remove `requests` or `duration`".into()),
                ));
            }
            (Some(0), None) => {
                return Err(err(
                    "requests",
                    "input `requests` is `0`; a run needs at least one request".into(),
                    None,
                ));
            }
            (Some(n), None) => Stop::Requests(n),
            (None, Some(d)) if d.is_zero() => {
                return Err(err(
                    "duration",
                    "input `duration` is zero; a run needs time to send requests".into(),
                    None,
                ));
            }
            (None, Some(d)) => Stop::Duration(d),
            (None, None) => Stop::Requests(default_requests(&mode)),
        };
        let runs = r.u32("runs")?.unwrap_or(1);
        if runs == 0 {
            return Err(err(
                "runs",
                "input `runs` is `0`; at least one run is needed".into(),
                None,
            ));
        }
        let prompts = match r.enumerated("prompts")? {
            Some(kind @ ("jsonl" | "sharegpt")) => {
                let path = r.given("prompt-file").ok_or_else(|| {
                    err(
                        "prompt-file",
                        format!("`prompts: {kind}` needs a `prompt-file`"),
                        Some("add `prompt-file: prompts.jsonl`".into()),
                    )
                })?;
                if kind == "jsonl" {
                    PromptSource::Jsonl(PathBuf::from(path))
                } else {
                    PromptSource::ShareGpt(PathBuf::from(path))
                }
            }
            _ => {
                if r.given("prompt-file").is_some() {
                    return Err(err(
                        "prompt-file",
                        "`prompt-file` is given but `prompts` is `synthetic`".into(),
                        Some("add `prompts: jsonl` or `prompts: sharegpt`".into()),
                    ));
                }
                PromptSource::Synthetic {
                    input_tokens: r.u32("input-tokens")?.unwrap_or(128),
                }
            }
        };
        let output_tokens = r.u32("output-tokens")?.unwrap_or(128);
        if output_tokens == 0 {
            return Err(err(
                "output-tokens",
                "input `output-tokens` is `0`; streaming metrics need at least one token".into(),
                None,
            ));
        }
        let synthetic = matches!(prompts, PromptSource::Synthetic { .. });
        Ok(Self {
            target,
            endpoint,
            model: r.given("model").map(str::to_owned),
            mode,
            seed: r.integer("seed")?,
            stop,
            runs,
            warmup: r.u32("warmup")?.unwrap_or(1),
            prompts,
            output_tokens,
            ignore_eos: r.boolean("ignore-eos")?.unwrap_or(synthetic),
            request_timeout: positive(&r, "request-timeout")?,
            idle_timeout: positive(&r, "idle-timeout")?,
            max_error_rate: r.percent("max-error-rate")?.unwrap_or(0.0),
            slo: r
                .given("slo")
                .map(parse_slo)
                .transpose()?
                .unwrap_or_default(),
        })
    }
}

fn positive(r: &Reader<'_>, name: &str) -> Result<Duration, ConfigError> {
    match r.duration(name)? {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(err(
            name,
            format!("input `{name}` must be longer than zero"),
            None,
        )),
    }
}

fn read_mode(r: &Reader<'_>) -> Result<Mode, ConfigError> {
    let levels = r.integer_list("concurrency")?;
    let rate = r.number("request-rate")?;
    // Without `mode`, the load inputs given decide it, so `concurrency: 8` alone means it.
    let mode = match r.given("mode") {
        Some(_) => r.enumerated("mode")?.unwrap_or("single-stream"),
        None if rate.is_some() => "request-rate",
        None if levels.is_some() => "concurrency",
        None => "single-stream",
    };
    match mode {
        "concurrency" => {
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
            Ok(Mode::Concurrency(levels))
        }
        "request-rate" => {
            let rate = rate.filter(|r| *r > 0.0).ok_or_else(|| {
                err(
                    "request-rate",
                    "`mode: request-rate` needs a `request-rate` above 0".into(),
                    Some("add `request-rate: 10` (requests per second)".into()),
                )
            })?;
            let arrival = match r.enumerated("arrival")? {
                Some("constant") => Arrival::Constant,
                Some("gamma") => {
                    let burstiness = r.number("burstiness")?.unwrap_or(1.0);
                    if burstiness <= 0.0 {
                        return Err(err(
                            "burstiness",
                            "input `burstiness` must be above 0".into(),
                            Some("1.0 is Poisson; lower is burstier".into()),
                        ));
                    }
                    Arrival::Gamma { burstiness }
                }
                _ => Arrival::Poisson,
            };
            let max_concurrency = match levels.as_deref() {
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
        _ => {
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
    }
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

    fn cfg(pairs: &[(&str, &str)]) -> Result<BenchConfig, ConfigError> {
        let inputs: IndexMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        BenchConfig::from_inputs(&inputs)
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

    #[test]
    fn every_declared_default_given_explicitly_reads_the_same() {
        // The engine may pass defaults along with the step's own inputs.
        let mut inputs: IndexMap<String, String> = spec()
            .inputs
            .iter()
            .filter_map(|i| Some((i.name.to_owned(), i.default?.to_owned())))
            .collect();
        inputs.insert("target".into(), "http://h:1".into());
        inputs.insert("concurrency".into(), "[2, 4]".into());
        let c = BenchConfig::from_inputs(&inputs).unwrap();
        assert_eq!(c.mode, Mode::Concurrency(vec![2, 4]));
        let bare = cfg(&[("target", "http://h:1"), ("concurrency", "[2, 4]")]).unwrap();
        assert_eq!(c, bare);
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
