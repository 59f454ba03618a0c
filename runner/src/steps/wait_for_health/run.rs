//! Executing `wait-for-health`: wait until a server is ready, and fail the moment the container
//! it watches dies instead of at the end of a long timeout.
//!
//! Strategy: three things race in one `select!`: a poller task (`http`, `tcp`, `command`,
//! `docker`: one attempt every `interval`, [`super::probe`]), the container's log stream (the
//! `log` probe matches each line as it arrives, and every probe keeps the last lines for the
//! failure message), and the engine's `wait` on the watched container, which answers the moment
//! it exits. Whichever settles first decides the step; the timeout and cancellation are two
//! more arms.
//!
//! No Docker engine is needed against a server on the host: the job's containers are watched
//! only when an earlier step reached the engine (a machine without Docker polls the URL alone).
//!
//! Knows the step's inputs and the backend's calls; nothing of scheduling or rendering.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::failure::{died, drain, keep, kept, timed_out};
use super::health_spec::{HealthSpec, Probe};
use super::probe::poll;
use super::watch::{Watched, resolve_watched};
use crate::backend::{LogLine, LogStart};
use crate::engine::containers::JobContainers;
use crate::events::{EventKind, JobRef, Stream};
use crate::memory::reported::kv_tokens;
use crate::steps::{Outputs, StepCall, StepError, StepHost};

/// How often the live view hears where the wait is.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Everything a run of the step needs besides its inputs.
struct Call<'a> {
    /// `None` when no earlier step of the job reached a Docker engine: nothing to watch, and
    /// no engine is asked for (a server on the host of a machine without Docker).
    containers: Option<&'a JobContainers>,
    host: &'a Arc<dyn StepHost>,
    job: &'a JobRef,
    step: &'a str,
    cancel: &'a CancellationToken,
    /// The step's environment (`env:` of the workflow, job and step): the command probe's.
    env: &'a IndexMap<String, String>,
    /// The `command` input as the shell reads it, when the step gives one.
    shell: Option<&'a crate::engine::script::RenderedScript>,
}

/// Runs the step; returns `ready-after`.
pub async fn run(step: StepCall<'_, '_>) -> Result<Outputs, StepError> {
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
    let mut spec = HealthSpec::from_inputs(step.inputs)?;
    prepare_command(&mut spec, &call)?;
    let watched = resolve_watched(&mut spec, call.containers).await?;
    // The memory estimate `start-container` kept with the watched server, if it made one.
    let estimate = watched.as_ref().and_then(|w| {
        let started = call.containers?.started.values().find(|s| s.id == w.id)?;
        started.memory.clone()
    });
    let reported = wait(&spec, watched, &call, started, estimate.is_some()).await?;
    let ready_after = started.elapsed().as_secs_f64();
    say(
        &call,
        format!("ready after {ready_after:.3}s: {}", spec.target()),
    );
    let mut outputs = IndexMap::from([("ready-after".to_string(), format!("{ready_after:.3}"))]);
    if let Some(tokens) = reported {
        outputs.insert("kv-cache-tokens".into(), tokens.to_string());
    }
    if let Some(e) = estimate {
        outputs.insert("kv-cache-tokens-estimate".into(), e.kv_tokens.to_string());
        say(
            &call,
            match reported {
                Some(m) => format!(
                    "estimated KV room {} tokens, server allocated {m} ({:+.1}%)",
                    e.kv_tokens,
                    (m as f64 / e.kv_tokens.max(1) as f64 - 1.0) * 100.0
                ),
                None => format!(
                    "estimated KV room {} tokens; the server's log did not say what it allocated",
                    e.kv_tokens
                ),
            },
        );
    }
    Ok(outputs)
}

/// One line of the step's own in the run's log.
fn say(call: &Call<'_>, text: String) {
    call.host.emit(EventKind::LogLine {
        job: call.job.clone(),
        step: Some(call.step.to_string()),
        container: None,
        stream: Stream::Runner,
        text,
    });
}

/// The command probe runs the shell form of `command`, its `${{ }}` values in variables.
fn prepare_command(spec: &mut HealthSpec, call: &Call<'_>) -> Result<(), String> {
    if let Probe::Command { script, env, .. } = &mut spec.probe {
        // Running the evaluated text instead would splice values into the shell's code.
        let shell = call.shell.ok_or(
            "the command probe was not prepared for the shell (a bug in gpuflow: please report it)",
        )?;
        script.clone_from(&shell.text);
        env.clone_from(call.env);
        env.extend(shell.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Ok(())
}

/// Waits until the probe succeeds; `Err` when the watched container dies, the probe shows
/// waiting is pointless, the timeout passes or the step is cancelled. `Ok` with the KV cache
/// size the server's log reported, if it did; with `whole_log`, its log is read from the
/// start (the line may come before this step).
async fn wait(
    spec: &HealthSpec,
    watched: Option<Watched>,
    call: &Call<'_>,
    started: Instant,
    whole_log: bool,
) -> Result<Option<u64>, String> {
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
            _ if whole_log => LogStart::Beginning,
            _ => LogStart::Tail(kept(spec) as u64),
        };
        tokio::spawn(async move { docker.follow_logs(&id, start, tx).await })
    });
    let mut reported = None;
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
    let (mut logs_open, poller_open) = (watched.is_some(), poller.is_some());
    let outcome = loop {
        tokio::select! {
            biased;
            () = call.cancel.cancelled() => {
                break Err(format!("stopped while waiting for {}", spec.target()));
            }
            result = &mut ready_rx, if poller_open => {
                break result.unwrap_or_else(|_| Err("the readiness check stopped unexpectedly".into()));
            }
            // Before the log lines: a chatty server must not hide its own exit.
            code = &mut exit => {
                let w = watched.as_ref().expect("exit only resolves for a watched container");
                if let Some(p) = &poller { p.abort(); }
                drain(&mut lines, &mut tail, kept(spec)).await;
                break Err(died(w, code, started.elapsed(), spec, &tail).await);
            }
            line = lines.recv(), if logs_open => match line {
                Some(line) => {
                    reported = kv_tokens(&line.text).or(reported);
                    let matched = matches!(&spec.probe, Probe::Log { pattern } if pattern.is_match(&line.text));
                    keep(&mut tail, line.text, kept(spec));
                    if matched {
                        break Ok(());
                    }
                }
                None => logs_open = false,
            },
            () = tokio::time::sleep_until(deadline) => {
                break Err(timed_out(spec, watched.as_ref(), &last_attempt, &tail));
            }
            _ = progress.tick() => say_progress(call, spec, tail.back(), started.elapsed()),
        }
    };
    if let Some(p) = poller {
        p.abort();
    }
    if let Some(f) = follower {
        f.abort();
    }
    // Lines that arrived with the answer still count.
    while let Ok(line) = lines.try_recv() {
        reported = kv_tokens(&line.text).or(reported);
    }
    outcome.map(|()| reported)
}

/// Where the wait is, for the live view: what it waits for and the container's last line.
fn say_progress(call: &Call<'_>, spec: &HealthSpec, last_line: Option<&String>, waited: Duration) {
    let mut message = format!("waiting for {}", spec.target());
    if let Some(line) = last_line {
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

fn far_future() -> tokio::time::Instant {
    // About thirty years: "never" without overflowing the clock.
    tokio::time::Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}
