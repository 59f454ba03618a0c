//! Executing `wait-for-health`: wait until a server is ready, and fail the moment the container
//! it watches dies instead of at the end of a long timeout.
//!
//! Strategy: three things race in one `select!`: a poller task (`http`, `tcp`, `command`,
//! `docker`: one attempt every `interval`), the container's log stream (the `log` probe matches
//! each line as it arrives, and every probe keeps the last lines for the failure message), and
//! the engine's `wait` on the watched container, which answers the moment it exits. Whichever
//! settles first decides the step; the timeout and cancellation are two more arms.
//!
//! No Docker engine is needed against a server on the host: the job's containers are watched
//! only when an earlier step reached the engine (a machine without Docker polls the URL alone).
//!
//! Knows the step's inputs and the backend's calls; nothing of scheduling or rendering.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use indexmap::IndexMap;
use regex::Regex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::causes;
use crate::backend::{DockerBackend, ExecSpec, LogLine, LogStart};
use crate::engine::containers::JobContainers;
use crate::events::{EventKind, JobRef, Stream};
use crate::expr::Value;
use crate::steps::StepHost;
use crate::steps::{Outputs, StepCall};

/// One attempt may take this long before it counts as failed (a server that accepts
/// connections but never answers).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest body read from a health endpoint.
const MAX_BODY: usize = 1 << 20;
/// How often the live view hears where the wait is.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// After the container exited, how long to wait for its last lines to arrive.
const DRAIN_LOGS: Duration = Duration::from_secs(2);

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
    pub fn from_inputs(inputs: &IndexMap<String, Value>) -> Result<Self, String> {
        let text = |k: &str| {
            inputs
                .get(k)
                .map(Value::to_expr_string)
                .filter(|s| !s.is_empty())
        };
        let need = |k: &str, probe: &str, example: &str| {
            text(k).ok_or_else(|| {
                format!(
                    "the `{probe}` probe needs `{k}` (help: add `{k}: {example}` under `with:`)"
                )
            })
        };
        let duration = |k: &str, default: &str| {
            let t = text(k).unwrap_or_else(|| default.to_string());
            humantime::parse_duration(&t).map_err(|_| {
                format!("`{k}` is `{t}`, not a duration (help: write it as `50ms`, `30s`, `20m` or `2h`)")
            })
        };
        let regex = |k: &str| -> Result<Option<Regex>, String> {
            text(k)
                .map(|p| {
                    Regex::new(&p).map_err(|e| {
                        format!(
                            "`{k}` is not a valid regular expression: {}",
                            one_line(&e.to_string())
                        )
                    })
                })
                .transpose()
        };
        let probe_name = text("probe").unwrap_or_else(|| "http".into());
        let probe = match probe_name.as_str() {
            "http" => {
                let raw = need("url", "http", "http://localhost:30000/health")?;
                let url: hyper::Uri = raw
                    .parse()
                    .map_err(|_| format!("`url` is `{raw}`, not a URL (help: write it as `http://localhost:30000/health`)"))?;
                match url.scheme_str() {
                    Some("http") => {}
                    Some(other) => {
                        return Err(format!(
                            "`url` uses `{other}`; the http probe speaks plain `http` (help: health endpoints of local servers are plain HTTP: `http://{}`)",
                            url.authority().map_or("localhost:30000", |a| a.as_str())
                        ));
                    }
                    None => {
                        return Err(format!(
                            "`url` is `{raw}`, without `http://` (help: write `http://{raw}`)"
                        ));
                    }
                }
                if url.host().is_none() {
                    return Err(format!("`url` is `{raw}`, which names no host"));
                }
                let expect_status = match text("expect-status") {
                    None => 200,
                    Some(s) => s
                        .parse::<u16>()
                        .ok()
                        .filter(|c| (100..600).contains(c))
                        .ok_or_else(|| {
                            format!("`expect-status` is `{s}`, not an HTTP status such as `200`")
                        })?,
                };
                let json = match (text("json-field"), text("json-value")) {
                    (Some(f), Some(v)) => Some((f, v)),
                    (None, None) => None,
                    (Some(_), None) => {
                        return Err(
                            "`json-field` needs `json-value` (help: e.g. `json-value: ok`)".into(),
                        );
                    }
                    (None, Some(_)) => {
                        return Err(
                            "`json-value` needs `json-field` (help: e.g. `json-field: status`)"
                                .into(),
                        );
                    }
                };
                Probe::Http(HttpProbe {
                    url,
                    expect_status,
                    body_contains: text("body-contains"),
                    body_regex: regex("body-regex")?,
                    json,
                })
            }
            "tcp" => {
                let address = need("address", "tcp", "localhost:30000")?;
                if split_host_port(&address).is_none() {
                    return Err(format!(
                        "`address` is `{address}`, not `HOST:PORT` (help: e.g. `localhost:30000`)"
                    ));
                }
                Probe::Tcp { address }
            }
            "log" => {
                need("pattern", "log", "fired up and ready to roll")?;
                Probe::Log {
                    pattern: regex("pattern")?.expect("checked above"),
                }
            }
            "docker" => Probe::Docker,
            "command" => {
                let command = need("command", "command", "curl -sf localhost:30000/health")?;
                // Until `run` is given the shell form: nothing runs without it (see `run`).
                Probe::Command {
                    script: String::new(),
                    command,
                    env: IndexMap::new(),
                }
            }
            other => {
                return Err(format!(
                    "`probe` is `{other}`; it is one of `http`, `tcp`, `log`, `docker` or `command`"
                ));
            }
        };
        let container = text("container");
        if container.is_none() && matches!(probe, Probe::Log { .. } | Probe::Docker) {
            return Err(format!(
                "the `{probe_name}` probe reads a container: give `container` (help: the `name` or `id` of the `start-container` step, e.g. `container: server`)"
            ));
        }
        let tail_lines = match text("tail-lines") {
            None => 20,
            Some(s) => s
                .parse::<usize>()
                .map_err(|_| format!("`tail-lines` is `{s}`, not a whole number"))?,
        };
        let interval = duration("interval", "50ms")?.max(Duration::from_millis(1));
        let shown = describe(&probe);
        Ok(Self {
            probe,
            container,
            timeout: duration("timeout", "10m")?,
            interval,
            tail_lines: tail_lines.min(10_000),
            shown,
        })
    }

    fn target(&self) -> String {
        self.shown.clone()
    }
}

/// What is waited for, for messages: `http://…/health`, a log line matching `ready`.
fn describe(probe: &Probe) -> String {
    match probe {
        Probe::Http(h) => format!("`{}`", h.url),
        Probe::Tcp { address } => format!("a connection to `{address}`"),
        Probe::Log { pattern } => format!("a log line matching `{}`", pattern.as_str()),
        Probe::Docker => "Docker's healthcheck".into(),
        Probe::Command { command, .. } => format!("`{command}` to exit 0"),
    }
}

/// A watched container: the job's name for it, the engine's id, and the engine it runs on.
#[derive(Clone, Debug)]
struct Watched {
    name: String,
    id: String,
    docker: DockerBackend,
}

/// Everything a run of the step needs besides its inputs.
pub struct Call<'a> {
    /// `None` when no earlier step of the job reached a Docker engine: nothing to watch, and
    /// no engine is asked for (a server on the host of a machine without Docker).
    pub containers: Option<&'a JobContainers>,
    pub host: &'a Arc<dyn StepHost>,
    pub job: &'a JobRef,
    pub step: &'a str,
    pub cancel: &'a CancellationToken,
    /// The step's environment (`env:` of the workflow, job and step): the command probe's.
    pub env: &'a IndexMap<String, String>,
    /// The `command` input as the shell reads it, when the step gives one.
    pub shell: Option<&'a crate::engine::script::RenderedScript>,
}

/// Runs the step; returns `ready-after`.
pub async fn run(step: StepCall<'_, '_>) -> Result<Outputs, String> {
    let inputs = step.inputs;
    let call = Call {
        containers: step.containers.as_deref(),
        host: step.host,
        job: step.job,
        step: step.step.key,
        cancel: &step.step.cancel,
        env: step.step.env,
        shell: step.step.shell.get("command"),
    };
    let started = Instant::now();
    let mut spec = HealthSpec::from_inputs(inputs)?;
    if let Probe::Command { script, env, .. } = &mut spec.probe {
        // Running the evaluated text instead would splice values into the shell's code.
        let shell = call.shell.ok_or(
            "the command probe was not prepared for the shell (a bug in gpuflow: please report it)",
        )?;
        script.clone_from(&shell.text);
        env.clone_from(call.env);
        env.extend(shell.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let watched = resolve_watched(&mut spec, call.containers).await?;
    let deadline = tokio::time::Instant::now()
        .checked_add(spec.timeout)
        .unwrap_or_else(far_future);

    // The container's output: matched by the `log` probe, kept for the failure message.
    let (tx, mut lines) = mpsc::channel::<LogLine>(1024);
    let follower = watched.as_ref().map(|w| {
        let (docker, id) = (w.docker.clone(), w.id.clone());
        let start = match spec.probe {
            // A ready line printed before this step started counts.
            Probe::Log { .. } => LogStart::Beginning,
            _ => LogStart::Tail(spec.tail_lines as u64),
        };
        tokio::spawn(async move { docker.follow_logs(&id, start, tx).await })
    });
    let mut tail: VecDeque<String> = VecDeque::new();

    let last_attempt = Arc::new(Mutex::new(None::<String>));
    let (ready_tx, mut ready_rx) = tokio::sync::oneshot::channel::<Result<(), String>>();
    let poller = (!matches!(spec.probe, Probe::Log { .. })).then(|| {
        tokio::spawn(poll(
            spec.clone(),
            watched.clone(),
            last_attempt.clone(),
            ready_tx,
        ))
    });
    let exit = async {
        match &watched {
            Some(w) => w.docker.wait_exit(&w.id).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(exit);
    let mut progress = tokio::time::interval(PROGRESS_EVERY);
    progress.tick().await;
    let mut logs_open = watched.is_some();
    let poller_open = poller.is_some();

    let outcome: Result<(), String> = loop {
        tokio::select! {
            biased;
            () = call.cancel.cancelled() => {
                break Err(format!("stopped while waiting for {}", spec.target()));
            }
            result = &mut ready_rx, if poller_open => {
                match result {
                    Ok(Ok(())) => break Ok(()),
                    Ok(Err(message)) => break Err(message),
                    Err(_) => break Err("the readiness check stopped unexpectedly".into()),
                }
            }
            // Before the log lines: a chatty server must not hide its own exit.
            code = &mut exit => {
                let w = watched.as_ref().expect("exit only resolves for a watched container");
                if let Some(p) = &poller { p.abort(); }
                drain(&mut lines, &mut tail, spec.tail_lines.max(1)).await;
                break Err(died(w, code, started.elapsed(), &spec, &tail).await);
            }
            line = lines.recv(), if logs_open => match line {
                Some(line) => {
                    let matched = matches!(&spec.probe, Probe::Log { pattern } if pattern.is_match(&line.text));
                    keep(&mut tail, line.text, spec.tail_lines.max(1));
                    if matched {
                        break Ok(());
                    }
                }
                None => logs_open = false,
            },
            () = tokio::time::sleep_until(deadline) => {
                break Err(timed_out(&spec, watched.as_ref(), &last_attempt, &tail));
            }
            _ = progress.tick() => {
                let waited = started.elapsed();
                let mut message = format!("waiting for {}", spec.target());
                if let Some(line) = tail.back() {
                    message.push_str(&format!(" | {line}"));
                }
                call.host.emit(EventKind::StepProgress {
                    job: call.job.clone(),
                    step: call.step.to_string(),
                    waited,
                    // The container's last line is masked by the run's sink, with the event.
                    message,
                });
            }
        }
    };
    if let Some(p) = poller {
        p.abort();
    }
    if let Some(f) = follower {
        f.abort();
    }
    outcome?;
    let ready_after = started.elapsed().as_secs_f64();
    call.host.emit(EventKind::LogLine {
        job: call.job.clone(),
        step: Some(call.step.to_string()),
        container: None,
        stream: Stream::Runner,
        text: format!("ready after {ready_after:.3}s: {}", spec.target()),
    });
    Ok(IndexMap::from([(
        "ready-after".to_string(),
        format!("{ready_after:.3}"),
    )]))
}

fn far_future() -> tokio::time::Instant {
    // About thirty years: "never" without overflowing the clock.
    tokio::time::Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

/// Which container to watch: `container`, else the one the URL or address names (a job's
/// container answers to its name only inside the job's network, so the host reaches it by its
/// address, which replaces the name). Without `containers` (no step reached an engine) the job
/// started none: nothing is watched, and a `container` named is one it never started.
async fn resolve_watched(
    spec: &mut HealthSpec,
    containers: Option<&JobContainers>,
) -> Result<Option<Watched>, String> {
    let by_name = |name: &str| {
        let containers = containers?;
        containers
            .started
            .get(name)
            .map(|s| s.id.clone())
            .or_else(|| {
                containers
                    .started
                    .iter()
                    .find(|(_, s)| s.id == name || s.docker_name == name)
                    .map(|(_, s)| s.id.clone())
            })
            .map(|id| (id, containers.docker.clone()))
    };
    let mut watched = None;
    if let Some(name) = &spec.container {
        let Some((id, docker)) = by_name(name) else {
            let names: Vec<&str> = containers
                .into_iter()
                .flat_map(|c| c.started.keys().map(String::as_str))
                .collect();
            let hint = match crate::diag::did_you_mean(name, &names) {
                Some(d) => d,
                None if names.is_empty() => {
                    "start it in an earlier step of this job with `uses: start-container`".into()
                }
                None => format!(
                    "this job started {}",
                    crate::diag::join_quoted(&names, "and")
                ),
            };
            return Err(format!(
                "no container `{name}` was started in this job (help: {hint})"
            ));
        };
        watched = Some(Watched {
            name: name.clone(),
            id,
            docker,
        });
    }
    let host = match &spec.probe {
        Probe::Http(h) => h.url.host().map(str::to_string),
        Probe::Tcp { address } => split_host_port(address).map(|(h, _)| h.to_string()),
        _ => None,
    };
    if let Some(host) = host
        && let Some((id, docker)) = by_name(&host)
    {
        let ip = docker
            .container_ip(&id)
            .await
            .map_err(|e| format!("could not find the address of container `{host}`: {e}"))?
            .ok_or_else(|| {
                format!("container `{host}` has no address the host can reach (help: publish its port with `ports` and use `localhost`)")
            })?;
        match &mut spec.probe {
            Probe::Http(h) => h.url = replace_host(&h.url, &ip)?,
            Probe::Tcp { address } => {
                let port = split_host_port(address).map(|(_, p)| p).unwrap_or_default();
                *address = format!("{ip}:{port}");
            }
            _ => {}
        }
        if watched.is_none() {
            watched = Some(Watched {
                name: host,
                id,
                docker,
            });
        }
    }
    Ok(watched)
}

fn replace_host(url: &hyper::Uri, ip: &str) -> Result<hyper::Uri, String> {
    let authority = match url.port_u16() {
        Some(port) => format!("{ip}:{port}"),
        None => ip.to_string(),
    };
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    format!("http://{authority}{path}")
        .parse()
        .map_err(|_| format!("could not address `{url}` through `{ip}`"))
}

/// `host:port` → its parts; `[::1]:80` too.
fn split_host_port(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port.parse().ok()?;
    (!host.is_empty()).then_some((host, port))
}

fn keep(tail: &mut VecDeque<String>, line: String, max: usize) {
    if tail.len() == max {
        tail.pop_front();
    }
    tail.push_back(line);
}

/// The lines still in flight after an exit (the log stream ends with the container).
async fn drain(lines: &mut mpsc::Receiver<LogLine>, tail: &mut VecDeque<String>, max: usize) {
    let until = tokio::time::Instant::now() + DRAIN_LOGS;
    while let Ok(Some(line)) = tokio::time::timeout_at(until, lines.recv()).await {
        keep(tail, line.text, max);
    }
}

/// Attempts until one succeeds (sent as `Ok`) or one shows waiting is pointless (`Err`).
async fn poll(
    spec: HealthSpec,
    watched: Option<Watched>,
    last: Arc<Mutex<Option<String>>>,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    for number in 1u64.. {
        let started = tokio::time::Instant::now();
        let attempt = tokio::time::timeout(
            ATTEMPT_TIMEOUT.max(spec.interval),
            attempt(&spec, watched.as_ref()),
        )
        .await
        .unwrap_or_else(|_| {
            Err(Attempt::NotYet(format!(
                "no answer within {}s",
                ATTEMPT_TIMEOUT.max(spec.interval).as_secs()
            )))
        });
        match attempt {
            Ok(()) => {
                tracing::debug!(attempt = number, "health probe: ready");
                let _ = ready.send(Ok(()));
                return;
            }
            Err(Attempt::Fatal(message)) => {
                tracing::debug!(attempt = number, "health probe: waiting cannot help");
                let _ = ready.send(Err(message));
                return;
            }
            Err(Attempt::NotYet(why)) => {
                // The reason is the probe's own words (a status, "connection refused"), never
                // a value of the run's; the diagnostics mask secrets anyway.
                tracing::debug!(attempt = number, why = %why, "health probe: not ready, retrying");
                if let Ok(mut l) = last.lock() {
                    *l = Some(why);
                }
            }
        }
        tokio::time::sleep_until(started + spec.interval).await;
    }
}

/// Why an attempt did not find the server ready.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// Try again.
    NotYet(String),
    /// Trying again cannot help (no healthcheck to wait for).
    Fatal(String),
}

async fn attempt(spec: &HealthSpec, watched: Option<&Watched>) -> Result<(), Attempt> {
    match &spec.probe {
        Probe::Http(h) => http_once(h).await.map_err(Attempt::NotYet),
        Probe::Tcp { address } => tokio::net::TcpStream::connect(address.as_str())
            .await
            .map(drop)
            .map_err(|e| Attempt::NotYet(e.to_string())),
        Probe::Log { .. } => Err(Attempt::Fatal("the log probe is not polled".into())),
        Probe::Docker => {
            let w = watched.expect("checked: the docker probe has a container");
            let state = w
                .docker
                .inspect_state(&w.id)
                .await
                .map_err(|e| Attempt::NotYet(e.to_string()))?;
            match state.health.as_deref() {
                Some("healthy") => Ok(()),
                Some(other) => Err(Attempt::NotYet(format!("Docker says `{other}`"))),
                None => Err(Attempt::Fatal(format!(
                    "container `{}` has no healthcheck (help: give its image a `HEALTHCHECK`, or use `probe: http` with the server's health URL)",
                    w.name
                ))),
            }
        }
        Probe::Command { script, env, .. } => match watched.filter(|_| spec.container.is_some()) {
            Some(w) => {
                let mut exec = ExecSpec::new(["sh", "-c", script.as_str()]);
                exec.env = env.clone();
                let code = w
                    .docker
                    .exec(&w.id, &exec, |_line: LogLine| {})
                    .await
                    .map_err(|e| Attempt::NotYet(e.to_string()))?;
                if code == 0 {
                    Ok(())
                } else {
                    Err(Attempt::NotYet(format!("exit code {code}")))
                }
            }
            None => {
                let status = tokio::process::Command::new("sh")
                    .args(["-c", script])
                    .envs(env)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .kill_on_drop(true)
                    .status()
                    .await
                    .map_err(|e| Attempt::NotYet(format!("could not run `sh`: {e}")))?;
                if status.success() {
                    Ok(())
                } else {
                    Err(Attempt::NotYet(match status.code() {
                        Some(c) => format!("exit code {c}"),
                        None => "killed by a signal".into(),
                    }))
                }
            }
        },
    }
}

/// One request; `Err` says what was wrong with the answer.
async fn http_once(probe: &HttpProbe) -> Result<(), String> {
    let host = probe.url.host().unwrap_or("localhost");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = probe.url.port_u16().unwrap_or(80);
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    let connection = tokio::spawn(connection);
    let path = probe.url.path_and_query().map_or("/", |p| p.as_str());
    let request = hyper::Request::get(path)
        .header(
            hyper::header::HOST,
            probe.url.authority().map_or(host, |a| a.as_str()),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let result = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("reading the body: {e}"))?
            .to_bytes();
        check_answer(probe, status, &String::from_utf8_lossy(&body))
    }
    .await;
    connection.abort();
    result
}

/// Whether an answer means ready; `Err` says why not.
fn check_answer(probe: &HttpProbe, status: u16, body: &str) -> Result<(), String> {
    if status != probe.expect_status {
        return Err(format!(
            "status {status}, waiting for {}",
            probe.expect_status
        ));
    }
    if let Some(text) = &probe.body_contains
        && !body.contains(text.as_str())
    {
        return Err(format!("the body does not contain `{text}` yet"));
    }
    if let Some(re) = &probe.body_regex
        && !re.is_match(body)
    {
        return Err(format!("the body does not match `{}` yet", re.as_str()));
    }
    if let Some((field, want)) = &probe.json {
        let json: serde_json::Value = serde_json::from_str(body)
            .map_err(|_| format!("the body is not JSON (`{}`)", clip(body, 80)))?;
        let got = field
            .split('.')
            .try_fold(&json, |v, key| match v {
                serde_json::Value::Array(items) => {
                    key.parse::<usize>().ok().and_then(|i| items.get(i))
                }
                _ => v.get(key),
            })
            .ok_or_else(|| format!("the body has no field `{field}`"))?;
        let got_text = match got {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if &got_text != want {
            return Err(format!("`{field}` is `{got_text}`, waiting for `{want}`"));
        }
    }
    Ok(())
}

fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The failure message when the watched container stopped: exit code, OOM flag, the
/// recognised cause and the last lines.
async fn died(
    w: &Watched,
    code: Result<i64, crate::backend::BackendError>,
    waited: Duration,
    spec: &HealthSpec,
    tail: &VecDeque<String>,
) -> String {
    let state = w.docker.inspect_state(&w.id).await.ok();
    let mut head = match (&code, &state) {
        (Err(crate::backend::BackendError::NoSuchContainer { .. }), _) => format!(
            "container `{}` was removed after {} while waiting for {}",
            w.name,
            seconds(waited),
            spec.target()
        ),
        (Err(e), _) => format!(
            "lost track of container `{}` while waiting for {}: {e}",
            w.name,
            spec.target()
        ),
        (Ok(code), state) => {
            let oom = state.as_ref().is_some_and(|s| s.oom_killed);
            let restarting = state
                .as_ref()
                .is_some_and(|s| s.running || s.restart_count > 0);
            format!(
                "container `{}` {} with code {code} after {}, while waiting for {} (OOMKilled: {oom})",
                w.name,
                if restarting {
                    "crashed and is restarting"
                } else {
                    "exited"
                },
                seconds(waited),
                spec.target()
            )
        }
    };
    if state.as_ref().is_some_and(|s| s.oom_killed) {
        head.push_str("\nthe kernel killed it for using more memory than it may (help: lower the server's host memory use, e.g. fewer workers or a smaller CPU cache, or give the container a higher memory limit)");
    }
    let lines: Vec<&String> = tail.iter().collect();
    if let Some(cause) = causes::recognise(&lines) {
        head.push_str(&format!(
            "\ncause: {}: `{}`\nhelp: {}",
            cause.kind.summary(),
            cause.line,
            cause.kind.hint()
        ));
    }
    push_tail(&mut head, &w.name, tail);
    head
}

fn timed_out(
    spec: &HealthSpec,
    watched: Option<&Watched>,
    last: &Mutex<Option<String>>,
    tail: &VecDeque<String>,
) -> String {
    let mut m = format!(
        "not ready after {}: waited for {}",
        humantime::format_duration(spec.timeout),
        spec.target()
    );
    if let Some(why) = last.lock().ok().and_then(|l| l.clone()) {
        m.push_str(&format!(" (the last attempt: {why})"));
    }
    m.push_str(&format!(
        "\nhelp: a model that loads for longer needs a longer `timeout` (hours are fine: `2h`); check `{}` is what the server serves",
        match &spec.probe {
            Probe::Log { .. } => "pattern",
            Probe::Http(_) => "url",
            Probe::Tcp { .. } => "address",
            Probe::Docker => "container",
            Probe::Command { .. } => "command",
        }
    ));
    if let Some(w) = watched {
        let lines: Vec<&String> = tail.iter().collect();
        if let Some(cause) = causes::recognise(&lines) {
            m.push_str(&format!(
                "\nits log shows {}: `{}`",
                cause.kind.summary(),
                cause.line
            ));
        }
        push_tail(&mut m, &w.name, tail);
    }
    m
}

fn push_tail(m: &mut String, name: &str, tail: &VecDeque<String>) {
    if tail.is_empty() {
        m.push_str(&format!("\ncontainer `{name}` printed nothing"));
        return;
    }
    m.push_str(&format!("\nthe last {} lines of `{name}`:", tail.len()));
    for line in tail {
        m.push_str("\n  ");
        m.push_str(line);
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn inputs(pairs: &[(&str, &str)]) -> IndexMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string())))
            .collect()
    }

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
        let e = HealthSpec::from_inputs(&inputs(pairs)).unwrap_err();
        assert!(e.contains(says), "{e}");
    }

    fn http(pairs: &[(&str, &str)]) -> HttpProbe {
        let mut all = vec![("url", "http://localhost:30000/health")];
        all.extend_from_slice(pairs);
        match HealthSpec::from_inputs(&inputs(&all)).unwrap().probe {
            Probe::Http(h) => h,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn answers_are_checked_by_status_body_and_json() {
        assert!(check_answer(&http(&[]), 200, "").is_ok());
        assert_eq!(
            check_answer(&http(&[]), 503, "").unwrap_err(),
            "status 503, waiting for 200"
        );
        let p = http(&[("body-contains", "ok")]);
        assert!(check_answer(&p, 200, "all ok").is_ok());
        assert!(check_answer(&p, 200, "loading").is_err());
        let p = http(&[("body-regex", "^ready: [0-9]+$")]);
        assert!(check_answer(&p, 200, "ready: 3").is_ok());
        assert!(check_answer(&p, 200, "ready: x").is_err());
        let p = http(&[("json-field", "data.0.status"), ("json-value", "ok")]);
        assert!(check_answer(&p, 200, r#"{"data":[{"status":"ok"}]}"#).is_ok());
        assert_eq!(
            check_answer(&p, 200, r#"{"data":[{"status":"loading"}]}"#).unwrap_err(),
            "`data.0.status` is `loading`, waiting for `ok`"
        );
        assert!(
            check_answer(&p, 200, "<html>")
                .unwrap_err()
                .contains("not JSON")
        );
        let p = http(&[("json-field", "ready"), ("json-value", "true")]);
        assert!(check_answer(&p, 200, r#"{"ready":true}"#).is_ok());
    }

    #[test]
    fn host_ports_split_and_hosts_are_replaced() {
        assert_eq!(split_host_port("server:30000"), Some(("server", 30000)));
        assert_eq!(split_host_port("[::1]:80"), Some(("::1", 80)));
        assert_eq!(split_host_port(":80"), None);
        let url: hyper::Uri = "http://server:30000/health?x=1".parse().unwrap();
        assert_eq!(
            replace_host(&url, "172.17.0.2").unwrap().to_string(),
            "http://172.17.0.2:30000/health?x=1"
        );
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

    #[test]
    fn the_tail_keeps_the_last_lines() {
        let mut tail = VecDeque::new();
        for i in 0..30 {
            keep(&mut tail, i.to_string(), 20);
        }
        assert_eq!(tail.len(), 20);
        assert_eq!(tail.front().unwrap(), "10");
    }

    #[tokio::test]
    async fn an_http_server_on_the_host_is_probed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            for body in ["loading", "{\"status\":\"ok\"}"] {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                s.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        let url = format!("http://127.0.0.1:{port}/health");
        let p = http(&[
            ("url", url.as_str()),
            ("json-field", "status"),
            ("json-value", "ok"),
        ]);
        assert!(http_once(&p).await.unwrap_err().contains("not JSON"));
        http_once(&p).await.unwrap();
    }
}
