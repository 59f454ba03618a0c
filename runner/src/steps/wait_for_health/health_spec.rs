//! `wait-for-health`'s inputs read and checked into a [`HealthSpec`]: which probe, what it
//! waits for, how long and how often, with a message naming the input for every wrong value.

use std::time::Duration;

use indexmap::IndexMap;
use regex::Regex;

use crate::expr::Value;
use crate::steps::StepError;

/// How readiness is checked.
#[derive(Clone, Debug)]
pub enum Probe {
    Http(HttpProbe),
    Tcp {
        address: String,
    },
    Log {
        pattern: Regex,
    },
    Docker,
    /// `command` is the evaluated text (for messages); `script` is what `sh -c` reads, its
    /// `${{ }}` values replaced by references to the variables in `env`
    /// ([`crate::engine::step_inputs::shell_inputs`]), so a pushed value cannot become shell code.
    Command {
        command: String,
        script: String,
        env: IndexMap<String, String>,
    },
}

/// What an HTTP answer must be to mean ready.
#[derive(Clone, Debug)]
pub struct HttpProbe {
    pub url: hyper::Uri,
    pub expect_status: u16,
    pub body_contains: Option<String>,
    pub body_regex: Option<Regex>,
    /// A dotted path into a JSON body and the value it must have.
    pub json: Option<(String, String)>,
}

/// The step's inputs, checked.
#[derive(Clone, Debug)]
pub struct HealthSpec {
    pub probe: Probe,
    /// The container to watch, by the name the job gave it.
    pub container: Option<String>,
    pub timeout: Duration,
    pub interval: Duration,
    pub tail_lines: usize,
    /// What is waited for, as the user wrote it (a container's name in a URL is later
    /// replaced by its address; messages keep the name).
    shown: String,
}

impl HealthSpec {
    /// Reads the evaluated inputs (declared defaults filled in).
    pub fn from_inputs(inputs: &IndexMap<String, Value>) -> Result<Self, StepError> {
        let inputs = Inputs(inputs);
        let probe_name = inputs.text("probe").unwrap_or_else(|| "http".into());
        let probe = match probe_name.as_str() {
            "http" => Probe::Http(http_probe(&inputs)?),
            "tcp" => {
                let address = inputs.need("address", "tcp", "localhost:30000")?;
                if split_host_port(&address).is_none() {
                    return Err(StepError::input(
                        "address",
                        format!("`address` is `{address}`, not `HOST:PORT`"),
                        Some("e.g. `localhost:30000`".into()),
                    ));
                }
                Probe::Tcp { address }
            }
            "log" => {
                inputs.need("pattern", "log", "fired up and ready to roll")?;
                Probe::Log {
                    pattern: inputs.regex("pattern")?.expect("checked above"),
                }
            }
            "docker" => Probe::Docker,
            "command" => Probe::Command {
                command: inputs.need("command", "command", "curl -sf localhost:30000/health")?,
                // Until `run` is given the shell form: nothing runs without it (see `run`).
                script: String::new(),
                env: IndexMap::new(),
            },
            other => {
                return Err(StepError::input(
                    "probe",
                    format!("`probe` is `{other}`"),
                    Some("it is one of `http`, `tcp`, `log`, `docker` or `command`".into()),
                ));
            }
        };
        let container = inputs.text("container");
        if container.is_none() && matches!(probe, Probe::Log { .. } | Probe::Docker) {
            return Err(StepError::input(
                "probe",
                format!("the `{probe_name}` probe reads a container: give `container`"),
                Some(
                    "the `name` or `id` of the `start-container` step, e.g. `container: server`"
                        .into(),
                ),
            ));
        }
        let tail_lines = match inputs.text("tail-lines") {
            None => 20,
            Some(s) => s.parse::<usize>().map_err(|_| {
                StepError::input(
                    "tail-lines",
                    format!("`tail-lines` is `{s}`, not a whole number"),
                    Some("e.g. `tail-lines: 50`".into()),
                )
            })?,
        };
        let interval = inputs
            .duration("interval", "50ms")?
            .max(Duration::from_millis(1));
        let shown = describe(&probe);
        Ok(Self {
            probe,
            container,
            timeout: inputs.duration("timeout", "10m")?,
            interval,
            tail_lines: tail_lines.min(10_000),
            shown,
        })
    }

    /// What is waited for, as the user wrote it.
    pub(super) fn target(&self) -> String {
        self.shown.clone()
    }
}

/// The step's evaluated inputs, read with the message a wrong one gets.
struct Inputs<'a>(&'a IndexMap<String, Value>);

impl Inputs<'_> {
    fn text(&self, k: &str) -> Option<String> {
        self.0
            .get(k)
            .map(Value::to_expr_string)
            .filter(|s| !s.is_empty())
    }

    /// `k`, which the probe needs: its absence is said at `probe` (it has no place itself).
    fn need(&self, k: &str, probe: &str, example: &str) -> Result<String, StepError> {
        self.text(k).ok_or_else(|| {
            StepError::input(
                "probe",
                format!("the `{probe}` probe needs `{k}`"),
                Some(format!("add `{k}: {example}` under `with:`")),
            )
        })
    }

    fn duration(&self, k: &str, default: &str) -> Result<Duration, StepError> {
        let t = self.text(k).unwrap_or_else(|| default.to_string());
        humantime::parse_duration(&t).map_err(|_| {
            StepError::input(
                k,
                format!("`{k}` is `{t}`, not a duration"),
                Some("write it as `50ms`, `30s`, `20m` or `2h`".into()),
            )
        })
    }

    fn regex(&self, k: &str) -> Result<Option<Regex>, StepError> {
        self.text(k)
            .map(|p| {
                Regex::new(&p).map_err(|e| {
                    StepError::input(
                        k,
                        format!(
                            "`{k}` is not a valid regular expression: {}",
                            one_line(&e.to_string())
                        ),
                        None,
                    )
                })
            })
            .transpose()
    }
}

/// The `http` probe: a plain-HTTP URL with a host, and what its answer must be.
fn http_probe(inputs: &Inputs<'_>) -> Result<HttpProbe, StepError> {
    let url = http_url(&inputs.need("url", "http", "http://localhost:30000/health")?)?;
    let expect_status = match inputs.text("expect-status") {
        None => 200,
        Some(s) => s
            .parse::<u16>()
            .ok()
            .filter(|c| (100..600).contains(c))
            .ok_or_else(|| {
                StepError::input(
                    "expect-status",
                    format!("`expect-status` is `{s}`, not an HTTP status"),
                    Some("e.g. `expect-status: 200`".into()),
                )
            })?,
    };
    let json = match (inputs.text("json-field"), inputs.text("json-value")) {
        (Some(f), Some(v)) => Some((f, v)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(StepError::input(
                "json-field",
                "`json-field` needs `json-value`",
                Some("e.g. `json-value: ok`".into()),
            ));
        }
        (None, Some(_)) => {
            return Err(StepError::input(
                "json-value",
                "`json-value` needs `json-field`",
                Some("e.g. `json-field: status`".into()),
            ));
        }
    };
    Ok(HttpProbe {
        url,
        expect_status,
        body_contains: inputs.text("body-contains"),
        body_regex: inputs.regex("body-regex")?,
        json,
    })
}

/// `url`, which must be plain `http://` with a host.
fn http_url(raw: &str) -> Result<hyper::Uri, StepError> {
    let bad = |message: String, hint: Option<String>| StepError::input("url", message, hint);
    let url: hyper::Uri = raw.parse().map_err(|_| {
        bad(
            format!("`url` is `{raw}`, not a URL"),
            Some("write it as `http://localhost:30000/health`".into()),
        )
    })?;
    match url.scheme_str() {
        Some("http") => {}
        Some(other) => {
            return Err(bad(
                format!("`url` uses `{other}`; the http probe speaks plain `http`"),
                Some(format!(
                    "health endpoints of local servers are plain HTTP: `http://{}`",
                    url.authority().map_or("localhost:30000", |a| a.as_str())
                )),
            ));
        }
        None => {
            return Err(bad(
                format!("`url` is `{raw}`, without `http://`"),
                Some(format!("write `http://{raw}`")),
            ));
        }
    }
    if url.host().is_none() {
        return Err(bad(format!("`url` is `{raw}`, which names no host"), None));
    }
    Ok(url)
}

/// What is waited for, for messages: `http://…/health`, a log line matching `ready`.
pub(super) fn describe(probe: &Probe) -> String {
    match probe {
        Probe::Http(h) => format!("`{}`", h.url),
        Probe::Tcp { address } => format!("a connection to `{address}`"),
        Probe::Log { pattern } => format!("a log line matching `{}`", pattern.as_str()),
        Probe::Docker => "Docker's healthcheck".into(),
        Probe::Command { command, .. } => format!("`{command}` to exit 0"),
    }
}

/// `host:port` → its parts; `[::1]:80` too.
pub(super) fn split_host_port(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port.parse().ok()?;
    (!host.is_empty()).then_some((host, port))
}

/// An error message of several lines (a regex's) as one.
fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
pub(super) fn inputs(pairs: &[(&str, &str)]) -> IndexMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test]
    fn defaults_poll_every_50ms_for_10_minutes() {
        let spec =
            HealthSpec::from_inputs(&inputs(&[("url", "http://localhost:30000/health")])).unwrap();
        assert_eq!(spec.interval, Duration::from_millis(50));
        assert_eq!(spec.timeout, Duration::from_secs(600));
        assert!(matches!(spec.probe, Probe::Http(ref h) if h.expect_status == 200));
    }

    #[test]
    fn hours_are_a_valid_timeout() {
        let spec = HealthSpec::from_inputs(&inputs(&[
            ("url", "http://localhost:30000/health"),
            ("timeout", "2h"),
        ]))
        .unwrap();
        assert_eq!(spec.timeout, Duration::from_secs(7200));
    }

    #[test_case(&[("probe", "http")], "needs `url`"; "http without url")]
    #[test_case(&[("url", "localhost:30000/health")], "not a URL"; "url without scheme")]
    #[test_case(&[("url", "https://x/health")], "plain `http`"; "https")]
    #[test_case(&[("probe", "tcp"), ("address", "30000")], "not `HOST:PORT`"; "tcp without host")]
    #[test_case(&[("probe", "log"), ("pattern", "ready")], "give `container`"; "log without container")]
    #[test_case(&[("probe", "log"), ("pattern", "(ready"), ("container", "s")], "not a valid regular expression"; "bad regex")]
    #[test_case(&[("probe", "docker")], "give `container`"; "docker without container")]
    #[test_case(&[("url", "http://x/h"), ("timeout", "10")], "not a duration"; "bare number timeout")]
    #[test_case(&[("url", "http://x/h"), ("json-field", "status")], "needs `json-value`"; "field without value")]
    #[test_case(&[("url", "http://x/h"), ("expect-status", "2000")], "not an HTTP status"; "bad status")]
    fn bad_inputs_are_explained(pairs: &[(&str, &str)], says: &str) {
        let e = HealthSpec::from_inputs(&inputs(pairs))
            .unwrap_err()
            .render(None);
        assert!(e.contains(says), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Whatever a workflow writes, the inputs are accepted or explained, never a panic.
        #[test]
        fn inputs_never_panic(
            probe in "(http|tcp|log|docker|command|x)",
            url in "\\PC{0,30}",
            timeout in "\\PC{0,8}",
            container in "[a-z]{0,5}",
        ) {
            let _ = HealthSpec::from_inputs(&inputs(&[
                ("probe", &probe),
                ("url", &url),
                ("address", &url),
                ("pattern", &url),
                ("command", &url),
                ("timeout", &timeout),
                ("container", &container),
            ]));
        }
    }
}
