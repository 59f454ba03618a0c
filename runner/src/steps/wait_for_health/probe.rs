//! The polled probes (`http`, `tcp`, `docker`, `command`): one attempt every `interval`
//! until one succeeds or one shows that waiting is pointless.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};

use super::health_spec::{HealthSpec, HttpProbe, Probe};
use super::watch::Watched;
use crate::backend::{ExecSpec, LogLine};

/// One attempt may take this long before it counts as failed (a server that accepts
/// connections but never answers).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest body read from a health endpoint.
const MAX_BODY: usize = 1 << 20;

/// Attempts until one succeeds (sent as `Ok`) or one shows waiting is pointless (`Err`).
pub(super) async fn poll(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::wait_for_health::health_spec::inputs;

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
