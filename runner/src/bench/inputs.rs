//! The benchmark's inputs as typed values ([`BenchInputs`]) with the load generator's own
//! defaults, read from JSON: the `benchmark` step's evaluated `with:` (numbers, lists and
//! mappings as the workflow wrote them) or `gpuflow bench`'s flags (text).
//!
//! Each input takes its natural JSON form and text alike, since an expression or a flag gives
//! text: `concurrency` a list (`[1, 8]`), JSON text (`"[1, 8, 64]"`), comma-separated text or
//! one number; `slo` a mapping, JSON text or `ttft_ms=500,tpot_ms=50`. Every error names the
//! input and says what is expected. Which inputs go together (a mode and its load, `requests`
//! or `duration`) is [`BenchConfig::from_inputs`](super::BenchConfig::from_inputs)'s business.

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value as Json};

use crate::diag::{did_you_mean, join_quoted};

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

/// An input that cannot be used, named so the caller can point at it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// The input's name as written under `with:`.
    pub input: String,
    pub message: String,
    pub hint: Option<String>,
}

pub(super) fn err(input: &str, message: String, hint: Option<String>) -> ConfigError {
    ConfigError {
        input: input.to_owned(),
        message,
        hint,
    }
}

/// How load is offered, as asked; `None` in [`BenchInputs::mode`] lets the load inputs decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeKind {
    SingleStream,
    Concurrency,
    RequestRate,
}

/// How open-loop arrivals are spaced (the shape of `gamma` is [`BenchInputs::burstiness`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrivalKind {
    Poisson,
    Constant,
    Gamma,
}

/// Where prompts come from (a file's path is [`BenchInputs::prompt_file`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptKind {
    Synthetic,
    Jsonl,
    ShareGpt,
}

/// Everything a benchmark may be asked, each input typed. `Default` is the load generator's
/// own defaults: what an absent input means (the `benchmark` step declares the same ones,
/// which a test of the step checks).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(try_from = "Map<String, Json>")]
pub struct BenchInputs {
    /// The server's base URL as given; checked and trimmed by `BenchConfig::from_inputs`.
    pub target: Option<String>,
    pub endpoint: Endpoint,
    pub model: Option<String>,
    pub mode: Option<ModeKind>,
    /// Closed-loop levels (several sweep), or the open loop's cap on requests in flight.
    pub concurrency: Option<Vec<u32>>,
    /// Requests per second, ≥ 0.
    pub request_rate: Option<f64>,
    pub arrival: ArrivalKind,
    /// Gamma arrivals' shape, ≥ 0.
    pub burstiness: f64,
    pub seed: Option<u64>,
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    pub runs: u32,
    pub warmup: u32,
    pub prompts: PromptKind,
    pub prompt_file: Option<PathBuf>,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// `None`: true for synthetic prompts.
    pub ignore_eos: Option<bool>,
    pub request_timeout: Duration,
    pub idle_timeout: Duration,
    /// A fraction: 0.05 is 5%.
    pub max_error_rate: f64,
    pub slo: Slo,
    /// `None`: the target's `/metrics`; `Some(None)`: off; `Some(Some(url))`: that URL.
    pub server_metrics: Option<Option<String>>,
    /// Series of `/metrics` to record besides the built-in ones, as written.
    pub server_metric_names: Vec<String>,
}

impl Default for BenchInputs {
    fn default() -> Self {
        Self {
            target: None,
            endpoint: Endpoint::Completions,
            model: None,
            mode: None,
            concurrency: None,
            request_rate: None,
            arrival: ArrivalKind::Poisson,
            burstiness: 1.0,
            seed: None,
            requests: None,
            duration: None,
            runs: 1,
            warmup: 1,
            prompts: PromptKind::Synthetic,
            prompt_file: None,
            input_tokens: 128,
            output_tokens: 128,
            ignore_eos: None,
            request_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(60),
            max_error_rate: 0.0,
            slo: Slo::default(),
            server_metrics: None,
            server_metric_names: Vec::new(),
        }
    }
}

impl BenchInputs {
    /// The inputs' names as written under `with:` (and, with `--`, as flags).
    pub const NAMES: &'static [&'static str] = &[
        "target",
        "endpoint",
        "model",
        "mode",
        "concurrency",
        "request-rate",
        "arrival",
        "burstiness",
        "seed",
        "requests",
        "duration",
        "runs",
        "warmup",
        "prompts",
        "prompt-file",
        "input-tokens",
        "output-tokens",
        "ignore-eos",
        "request-timeout",
        "idle-timeout",
        "max-error-rate",
        "slo",
        "server-metrics",
        "server-metric-names",
    ];

    /// Reads the inputs given; absent ones, `null` and empty text keep their defaults.
    pub fn from_json(given: &Map<String, Json>) -> Result<Self, ConfigError> {
        let mut inputs = Self::default();
        for (name, value) in given {
            let empty = matches!(value, Json::Null) || value.as_str() == Some("");
            if !empty {
                inputs.set(&Given { name, value })?;
            }
        }
        Ok(inputs)
    }

    /// Sets the input `given` names, read as its type.
    fn set(&mut self, given: &Given<'_>) -> Result<(), ConfigError> {
        match given.name {
            "target" => self.target = Some(given.text().into_owned()),
            "endpoint" => self.endpoint = given.choice(ENDPOINTS)?,
            "model" => self.model = Some(given.text().into_owned()),
            "mode" => self.mode = Some(given.choice(MODES)?),
            "concurrency" => self.concurrency = Some(given.levels()?),
            "request-rate" => self.request_rate = Some(given.number()?),
            "arrival" => self.arrival = given.choice(ARRIVALS)?,
            "burstiness" => self.burstiness = given.number()?,
            "seed" => self.seed = Some(given.whole()?),
            "requests" => self.requests = Some(given.whole()?),
            "duration" => self.duration = Some(given.duration()?),
            "runs" => self.runs = given.u32()?,
            "warmup" => self.warmup = given.u32()?,
            "prompts" => self.prompts = given.choice(PROMPTS)?,
            "prompt-file" => self.prompt_file = Some(PathBuf::from(given.text().as_ref())),
            "input-tokens" => self.input_tokens = given.u32()?,
            "output-tokens" => self.output_tokens = given.u32()?,
            "ignore-eos" => self.ignore_eos = Some(given.boolean()?),
            "request-timeout" => self.request_timeout = given.duration()?,
            "idle-timeout" => self.idle_timeout = given.duration()?,
            "max-error-rate" => self.max_error_rate = given.percent()?,
            "slo" => self.slo = given.slo()?,
            "server-metrics" => self.server_metrics = given.switch_or_url()?,
            "server-metric-names" => self.server_metric_names = given.names()?,
            "command" => {
                return Err(given.err(
                    format!(
                        "the built-in load generator cannot run the script `{}`",
                        given.text()
                    ),
                    Some("scripted benchmarks run as a workflow step (`uses: benchmark` with `command:`), not through `gpuflow bench`".into()),
                ));
            }
            unknown => {
                return Err(given.err(
                    format!("`benchmark` has no input `{unknown}`"),
                    did_you_mean(unknown, Self::NAMES),
                ));
            }
        }
        Ok(())
    }
}

impl TryFrom<Map<String, Json>> for BenchInputs {
    type Error = ConfigError;

    fn try_from(given: Map<String, Json>) -> Result<Self, ConfigError> {
        Self::from_json(&given)
    }
}

const ENDPOINTS: &[(&str, Endpoint)] = &[
    ("completions", Endpoint::Completions),
    ("chat", Endpoint::Chat),
];

const MODES: &[(&str, ModeKind)] = &[
    ("single-stream", ModeKind::SingleStream),
    ("concurrency", ModeKind::Concurrency),
    ("request-rate", ModeKind::RequestRate),
];

const ARRIVALS: &[(&str, ArrivalKind)] = &[
    ("poisson", ArrivalKind::Poisson),
    ("constant", ArrivalKind::Constant),
    ("gamma", ArrivalKind::Gamma),
];

const PROMPTS: &[(&str, PromptKind)] = &[
    ("synthetic", PromptKind::Synthetic),
    ("jsonl", PromptKind::Jsonl),
    ("sharegpt", PromptKind::ShareGpt),
];

const SLO_KEYS: &[&str] = &["ttft_ms", "tpot_ms", "e2el_ms"];

/// One input as given: its name, for messages, and its value.
struct Given<'a> {
    name: &'a str,
    value: &'a Json,
}

impl Given<'_> {
    fn err(&self, message: String, hint: Option<String>) -> ConfigError {
        err(self.name, message, hint)
    }

    /// The value as text: a string as written (without surrounding blanks), anything else
    /// as JSON (`8`, `true`, `[1,8]`), which is also how messages quote it.
    fn text(&self) -> Cow<'_, str> {
        match self.value {
            Json::String(s) => Cow::Borrowed(s.trim()),
            other => Cow::Owned(other.to_string()),
        }
    }

    fn choice<T: Copy>(&self, options: &[(&str, T)]) -> Result<T, ConfigError> {
        let value = self.text();
        if let Some((_, choice)) = options.iter().find(|(n, _)| *n == value) {
            return Ok(*choice);
        }
        let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
        Err(self.err(
            format!(
                "input `{}` is `{value}`, expected one of {}",
                self.name,
                join_quoted(&names, "or")
            ),
            did_you_mean(&value, &names),
        ))
    }

    /// A whole number ≥ 0: a JSON integer, or text of one.
    fn whole(&self) -> Result<u64, ConfigError> {
        if let Some(n) = self.value.as_u64() {
            return Ok(n);
        }
        let v = self.text();
        v.parse::<u64>().map_err(|_| {
            self.err(
                format!("input `{}` is `{v}`, expected a whole number", self.name),
                v.parse::<f64>()
                    .ok()
                    .map(|f| format!("use a whole number, such as `{}`", f.round().max(0.0))),
            )
        })
    }

    fn u32(&self) -> Result<u32, ConfigError> {
        let n = self.whole()?;
        u32::try_from(n).map_err(|_| {
            self.err(
                format!("input `{}` is `{n}`, which is too large", self.name),
                None,
            )
        })
    }

    /// A finite number ≥ 0.
    fn number(&self) -> Result<f64, ConfigError> {
        let v = self.text();
        let number = match self.value {
            Json::Number(n) => n.as_f64(),
            _ => v.parse::<f64>().ok(),
        };
        match number {
            Some(f) if f.is_finite() && f >= 0.0 => Ok(f),
            _ => Err(self.err(
                format!("input `{}` is `{v}`, expected a number ≥ 0", self.name),
                None,
            )),
        }
    }

    fn boolean(&self) -> Result<bool, ConfigError> {
        if let Json::Bool(b) = self.value {
            return Ok(*b);
        }
        let v = self.text();
        match v.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.err(
                format!("input `{}` is `{v}`, expected `true` or `false`", self.name),
                None,
            )),
        }
    }

    /// `true` (the target's `/metrics`: `None`), `false` (off) or a URL to scrape.
    fn switch_or_url(&self) -> Result<Option<Option<String>>, ConfigError> {
        match self.value {
            Json::Bool(true) => return Ok(None),
            Json::Bool(false) => return Ok(Some(None)),
            _ => {}
        }
        let v = self.text();
        match v.to_ascii_lowercase().as_str() {
            "true" => Ok(None),
            "false" => Ok(Some(None)),
            _ if v.starts_with("http://") => Ok(Some(Some(v.into_owned()))),
            _ => Err(self.err(
                format!(
                    "input `{}` is `{v}`, expected `true`, `false` or an `http://` URL",
                    self.name
                ),
                Some("`http://localhost:30000/metrics`".into()),
            )),
        }
    }

    /// A list of texts: a JSON list of strings, or one string (a list of one).
    fn names(&self) -> Result<Vec<String>, ConfigError> {
        let items: Vec<String> = match self.value {
            Json::Array(items) => items
                .iter()
                .map(|item| match item {
                    Json::String(s) => Ok(s.trim().to_owned()),
                    other => Err(self.err(
                        format!("input `{}` lists `{other}`, not a metric name", self.name),
                        None,
                    )),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                let text = self.text();
                match serde_json::from_str::<Vec<String>>(&text) {
                    Ok(list) => list,
                    Err(_) => vec![text.into_owned()],
                }
            }
        };
        Ok(items.into_iter().filter(|s| !s.is_empty()).collect())
    }

    /// A duration with its unit (`30s`, `1h30m`); a bare number is refused, as its unit is
    /// anybody's guess.
    fn duration(&self) -> Result<Duration, ConfigError> {
        let v = self.text();
        humantime::parse_duration(&v).map_err(|_| {
            let hint = if v.parse::<f64>().is_ok() {
                format!("add a unit: `{v}s` or `{v}m`")
            } else {
                "write a number and a unit: `ms`, `s`, `m` or `h` (`1h30m`)".to_owned()
            };
            self.err(
                format!("input `{}` is `{v}`, expected a duration", self.name),
                Some(hint),
            )
        })
    }

    /// A share: `5%`, or a fraction from 0 to 1 (`0.05`); returned as the fraction.
    fn percent(&self) -> Result<f64, ConfigError> {
        let name = self.name;
        let v = self.text();
        let with_sign = v.ends_with('%');
        let number = v.trim_end_matches('%').trim();
        match number.parse::<f64>() {
            Ok(f) if f.is_finite() && f >= 0.0 && with_sign && f <= 100.0 => Ok(f / 100.0),
            Ok(f) if f.is_finite() && (0.0..=1.0).contains(&f) && !with_sign => Ok(f),
            Ok(f) if f.is_finite() && f > 1.0 && !with_sign => Err(self.err(
                format!("input `{name}` is `{v}`, a fraction of {}%", f * 100.0),
                Some(format!("write `{v}%` for {v} percent")),
            )),
            _ => Err(self.err(
                format!("input `{name}` is `{v}`, expected a percentage such as `3%`"),
                None,
            )),
        }
    }

    /// Numbers ≥ 1: a JSON list, one number, or text of either (`[1, 8, 64]`, `1,8,64`).
    fn levels(&self) -> Result<Vec<u32>, ConfigError> {
        let name = self.name;
        let v = self.text();
        let items: Result<Vec<u32>, String> = match self.value {
            Json::Array(items) => items.iter().map(level).collect(),
            Json::Number(_) => level(self.value).map(|n| vec![n]),
            _ => {
                let inner = v
                    .strip_prefix('[')
                    .and_then(|s| s.strip_suffix(']'))
                    .unwrap_or(&v);
                inner
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse::<u32>().map_err(|_| s.to_owned()))
                    .collect()
            }
        };
        let hint = Some(format!("write `{name}: 8` or a sweep `{name}: [1, 8, 64]`"));
        match items {
            Ok(items) if !items.is_empty() && items.iter().all(|&n| n > 0) => Ok(items),
            Ok(_) => Err(self.err(
                format!("input `{name}` is `{v}`, expected numbers ≥ 1"),
                hint,
            )),
            Err(item) => Err(self.err(
                format!("input `{name}` has `{item}`, which is not a whole number"),
                hint,
            )),
        }
    }

    /// A mapping of objectives to milliseconds: a JSON object, JSON text of one, or
    /// `ttft_ms=500,tpot_ms=50`.
    fn slo(&self) -> Result<Slo, ConfigError> {
        let pairs = match self.value {
            Json::Object(map) => object_pairs(map.clone()),
            _ => {
                let text = self.text();
                match serde_json::from_str(&text) {
                    Ok(Json::Object(map)) => object_pairs(map),
                    _ => self.slo_text_pairs(&text)?,
                }
            }
        };
        let mut slo = Slo::default();
        for (key, value) in pairs {
            let number = value
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f > 0.0)
                .ok_or_else(|| {
                    self.err(
                        format!("`slo.{key}` is `{value}`, expected milliseconds > 0"),
                        None,
                    )
                })?;
            let objective = match key.as_str() {
                "ttft_ms" => &mut slo.ttft_ms,
                "tpot_ms" => &mut slo.tpot_ms,
                "e2el_ms" => &mut slo.e2el_ms,
                _ => {
                    return Err(self.err(
                        format!(
                            "`slo` has no objective `{key}`; the objectives are {}",
                            join_quoted(SLO_KEYS, "and")
                        ),
                        did_you_mean(&key, SLO_KEYS),
                    ));
                }
            };
            *objective = Some(number);
        }
        Ok(slo)
    }

    /// `ttft_ms=500,tpot_ms=50` (or `ttft_ms:500`) as pairs.
    fn slo_text_pairs(&self, text: &str) -> Result<Vec<(String, String)>, ConfigError> {
        let mut pairs = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=').or_else(|| part.split_once(':')) else {
                return Err(self.err(
                    format!("input `slo` has `{part}`, not NAME=VALUE"),
                    Some("write `slo: {ttft_ms: 500, tpot_ms: 50}`".into()),
                ));
            };
            pairs.push((k.trim().to_owned(), v.trim().to_owned()));
        }
        Ok(pairs)
    }
}

/// One level of a JSON list; the item as JSON text when it is no whole number that fits.
fn level(item: &Json) -> Result<u32, String> {
    item.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| item.to_string())
}

/// An object's entries with their values as text: strings as written, others as JSON.
fn object_pairs(map: Map<String, Json>) -> Vec<(String, String)> {
    map.into_iter()
        .map(|(k, v)| {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            (k, v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: Json) -> Result<BenchInputs, ConfigError> {
        let Json::Object(map) = value else {
            panic!("an object")
        };
        BenchInputs::from_json(&map)
    }

    #[test]
    fn typed_values_and_their_text_read_the_same() {
        let typed = read(json!({
            "concurrency": [1, 8],
            "requests": 200,
            "request-rate": 2.5,
            "ignore-eos": false,
            "slo": {"ttft_ms": 500, "tpot_ms": 50},
        }))
        .unwrap();
        let text = read(json!({
            "concurrency": "[1, 8]",
            "requests": "200",
            "request-rate": "2.5",
            "ignore-eos": "false",
            "slo": "ttft_ms=500,tpot_ms=50",
        }))
        .unwrap();
        assert_eq!(typed, text);
        assert_eq!(typed.concurrency, Some(vec![1, 8]));
        assert_eq!(typed.requests, Some(200));
        assert_eq!(typed.slo.tpot_ms, Some(50.0));
    }

    #[test]
    fn absent_null_and_empty_inputs_keep_the_defaults() {
        let inputs = read(json!({"model": "", "seed": null})).unwrap();
        assert_eq!(inputs, BenchInputs::default());
    }

    #[test]
    fn a_list_item_that_is_no_level_is_quoted() {
        let e = read(json!({"concurrency": [1, "x"]})).unwrap_err();
        assert_eq!(e.input, "concurrency");
        assert_eq!(
            e.message,
            "input `concurrency` has `\"x\"`, which is not a whole number"
        );
        let e = read(json!({"concurrency": [0, 8]})).unwrap_err();
        assert_eq!(
            e.message,
            "input `concurrency` is `[0,8]`, expected numbers ≥ 1"
        );
        let e = read(json!({"runs": 1.5})).unwrap_err();
        assert_eq!(e.message, "input `runs` is `1.5`, expected a whole number");
        assert_eq!(e.hint.as_deref(), Some("use a whole number, such as `2`"));
    }

    #[test]
    fn it_deserializes_with_serde() {
        let inputs: BenchInputs =
            serde_json::from_value(json!({"concurrency": 4, "duration": "30s"})).unwrap();
        assert_eq!(inputs.concurrency, Some(vec![4]));
        assert_eq!(inputs.duration, Some(Duration::from_secs(30)));
        let e = serde_json::from_value::<BenchInputs>(json!({"runs": "x"})).unwrap_err();
        assert!(e.to_string().contains("input `runs` is `x`"), "{e}");
    }
}
