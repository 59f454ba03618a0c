//! What `wait-for-health` says when it fails: the watched container died (exit code, OOM, the
//! recognised cause, its last lines) or the wait timed out (the last attempt's answer).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;

use super::causes;
use super::health_spec::{HealthSpec, Probe};
use super::watch::Watched;
use crate::backend::LogLine;

/// After the container exited, how long to wait for its last lines to arrive.
const DRAIN_LOGS: Duration = Duration::from_secs(2);

/// Lines kept for recognising the cause, more than are shown: a server's root cause can sit
/// far above its last lines (vLLM's front end prints its own traceback, 20-odd lines, under the
/// engine's), and argparse prints its usage line above a long usage.
const RECOGNISED_LINES: usize = 200;

/// How many of the container's last lines the step keeps: those it shows, and at least
/// [`RECOGNISED_LINES`] to recognise the cause in.
pub(super) fn kept(spec: &HealthSpec) -> usize {
    spec.tail_lines.max(RECOGNISED_LINES)
}

pub(super) fn keep(tail: &mut VecDeque<String>, line: String, max: usize) {
    if tail.len() == max {
        tail.pop_front();
    }
    tail.push_back(line);
}

/// The lines still in flight after an exit (the log stream ends with the container).
pub(super) async fn drain(
    lines: &mut mpsc::Receiver<LogLine>,
    tail: &mut VecDeque<String>,
    max: usize,
) {
    let until = tokio::time::Instant::now() + DRAIN_LOGS;
    while let Ok(Some(line)) = tokio::time::timeout_at(until, lines.recv()).await {
        keep(tail, line.text, max);
    }
}

/// The failure message when the watched container stopped: exit code, OOM flag, the
/// recognised cause and the last lines.
pub(super) async fn died(
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
        head.push('\n');
        head.push_str(&cause.explain());
    }
    push_tail(&mut head, &w.name, tail, spec.tail_lines);
    head
}

pub(super) fn timed_out(
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
        push_tail(&mut m, &w.name, tail, spec.tail_lines);
    }
    m
}

/// The last `shown` lines of `tail`.
fn push_tail(m: &mut String, name: &str, tail: &VecDeque<String>, shown: usize) {
    if tail.is_empty() {
        m.push_str(&format!("\ncontainer `{name}` printed nothing"));
        return;
    }
    let shown = shown.clamp(1, tail.len());
    m.push_str(&format!("\nthe last {shown} lines of `{name}`:"));
    for line in tail.iter().skip(tail.len() - shown) {
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

    #[test]
    fn the_tail_keeps_the_last_lines() {
        let mut tail = VecDeque::new();
        for i in 0..30 {
            keep(&mut tail, i.to_string(), 20);
        }
        assert_eq!(tail.len(), 20);
        assert_eq!(tail.front().unwrap(), "10");
    }
}
