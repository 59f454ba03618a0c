//! Plain lines, one per thing that happened, prefixed by job and step so interleaved jobs stay
//! readable: `[bench (1)] start the server | listening on :30000`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use crate::events::{
    Event, EventKind, EventSink, JobRef, JobResult, JobSummary, StepOutcome, Stream,
};

/// Step names by (job, cell, step key), so a log line can say which step printed it.
type StepNames = HashMap<(String, usize, String), String>;

/// Renders events as plain lines to `out`.
pub struct PlainView<W: Write + Send> {
    state: Mutex<(W, StepNames)>,
}

impl<W: Write + Send> PlainView<W> {
    pub fn new(out: W) -> Self {
        Self {
            state: Mutex::new((out, HashMap::new())),
        }
    }
}

/// The line for `event`, or `None` for events shown only in JSON. Each kind is routed to the
/// function for its subject here, so a new kind must be placed (the match is exhaustive).
fn line(event: &Event, names: &mut StepNames) -> Option<String> {
    let kind = &event.kind;
    match kind {
        // Progress repeats what the log lines said; a live view shows it, plain lines don't.
        EventKind::JobQueued { .. }
        | EventKind::StepSummary { .. }
        | EventKind::StepProgress { .. } => None,
        // The steps' own lines said these; the headline after the summary repeats them
        // (`headline_text`, printed by `gpuflow run` once the run is over).
        EventKind::BenchmarkResult(_)
        | EventKind::ComparisonResult(_)
        | EventKind::ReportWritten(_)
        | EventKind::RunHeadline(_) => None,
        EventKind::RunStarted { .. }
        | EventKind::RunFinished { .. }
        | EventKind::Warning { .. } => run_line(kind),
        EventKind::JobStarted { .. }
        | EventKind::JobSkipped { .. }
        | EventKind::JobCannotRun { .. }
        | EventKind::JobWaiting { .. }
        | EventKind::GpusLeased { .. }
        | EventKind::JobFinished { .. }
        | EventKind::ContainerStarted { .. }
        | EventKind::ContainerRemoved { .. } => job_line(kind),
        EventKind::StepStarted { .. }
        | EventKind::StepFinished { .. }
        | EventKind::LogLine { .. }
        | EventKind::BenchmarkProgress { .. } => step_line(kind, names),
        EventKind::PreflightCheck { .. } | EventKind::PreflightFinished { .. } => {
            preflight_line(kind)
        }
        EventKind::ImagePull { .. } => pull_line(kind),
    }
}

/// An image pull's progress (at most a line a second: the engine's stream is throttled where
/// it is read) and its end.
fn pull_line(kind: &EventKind) -> Option<String> {
    let EventKind::ImagePull {
        job,
        image,
        elapsed,
        finished,
        text,
        ..
    } = kind
    else {
        return None;
    };
    Some(if *finished {
        format!(
            "{} image `{image}` pulled in {:.1}s: {text}",
            prefix(job),
            elapsed.as_secs_f64()
        )
    } else {
        format!("{} pulling `{image}`: {text}", prefix(job))
    })
}

/// The run's start and end, and warnings.
fn run_line(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::RunStarted {
            run_id,
            workflow,
            log_dir,
            ..
        } => format!("run {run_id} of `{workflow}` (logs: {log_dir})"),
        EventKind::RunFinished { result, .. } => format!("run {}", result.as_str()),
        EventKind::Warning { job, message } => match job {
            Some(j) => format!("{} warning: {message}", prefix(j)),
            None => format!("warning: {message}"),
        },
        _ => return None, // `line` routes the other kinds elsewhere
    })
}

/// A job run's life: start, skip, waiting, GPUs, containers, end.
fn job_line(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::JobStarted { job } => format!("{} started", prefix(job)),
        EventKind::JobSkipped { job, reason } => format!("{} skipped: {reason}", prefix(job)),
        EventKind::JobCannotRun { job, reason } => {
            format!("{} cannot run: {reason}", prefix(job))
        }
        EventKind::JobWaiting { job, reason } => format!("{} {reason}", prefix(job)),
        EventKind::GpusLeased {
            job,
            indexes,
            stand_in,
            ..
        } => gpus_leased(job, indexes, *stand_in),
        // The `job_skipped` line said it already.
        EventKind::JobFinished {
            result: JobResult::Skipped,
            ..
        } => return None,
        EventKind::JobFinished {
            job,
            result,
            duration,
            ..
        } => format!(
            "{} {} in {}",
            prefix(job),
            result.as_str(),
            duration_text(*duration)
        ),
        EventKind::ContainerStarted {
            job,
            name,
            image,
            host,
            ..
        } => container_started(job, name, image, host),
        EventKind::ContainerRemoved { job, name } => {
            format!("{} container {name} removed", prefix(job))
        }
        _ => return None, // `line` routes the other kinds elsewhere
    })
}

/// A step's start and end, and what it printed; `names` learns each step's name as it
/// starts, for the lines that only carry its key.
fn step_line(kind: &EventKind, names: &mut StepNames) -> Option<String> {
    Some(match kind {
        EventKind::StepStarted { job, step, name } => {
            names.insert(step_key(job, step), name.clone());
            format!("{} {name}: started", prefix(job))
        }
        EventKind::StepFinished {
            job,
            step,
            name,
            outcome,
            conclusion,
            duration,
            ..
        } => {
            names.remove(&step_key(job, step));
            step_finished(job, name, *outcome, *conclusion, *duration)
        }
        EventKind::LogLine {
            job,
            step,
            container,
            stream,
            text,
        } => {
            let source = log_source(names, job, step.as_deref(), container.as_deref());
            match stream {
                Stream::Runner => format!("{} {source} | gpuflow: {text}", prefix(job)),
                _ => format!("{} {source} | {text}", prefix(job)),
            }
        }
        EventKind::BenchmarkProgress {
            job,
            step,
            level,
            phase,
            done,
            total,
            errors,
            output_tok_s,
        } => format!(
            "{} {} | {}",
            prefix(job),
            step_name(names, job, step),
            super::progress::benchmark_progress(
                level,
                phase,
                *done,
                *total,
                *errors,
                *output_tok_s
            )
        ),
        _ => return None, // `line` routes the other kinds elsewhere
    })
}

fn preflight_line(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::PreflightCheck {
            job,
            step,
            name,
            outcome,
            message,
            duration,
        } => preflight_check(
            job,
            step.as_deref(),
            name,
            *outcome,
            message.as_deref(),
            *duration,
        ),
        EventKind::PreflightFinished {
            checks,
            failed,
            duration,
        } => preflight_finished(*checks, *failed, *duration),
        _ => return None, // `line` routes the other kinds elsewhere
    })
}

/// `[bench (1)]`: which job run a line is about.
fn prefix(job: &JobRef) -> String {
    format!("[{}]", job.display)
}

fn step_key(job: &JobRef, step: &str) -> (String, usize, String) {
    (job.job.clone(), job.cell, step.to_owned())
}

/// The step's name as it started, or its key when its start was not seen.
fn step_name(names: &StepNames, job: &JobRef, step: &str) -> String {
    names
        .get(&step_key(job, step))
        .cloned()
        .unwrap_or_else(|| format!("step {step}"))
}

/// Who printed a log line: a container, a step, or the job itself.
fn log_source(
    names: &StepNames,
    job: &JobRef,
    step: Option<&str>,
    container: Option<&str>,
) -> String {
    match (container, step) {
        (Some(c), _) => format!("container {c}"),
        (None, Some(step)) => step_name(names, job, step),
        (None, None) => "job".into(),
    }
}

fn gpus_leased(job: &JobRef, indexes: &[u32], stand_in: bool) -> String {
    format!(
        "{} GPUs leased: {}{}",
        prefix(job),
        indexes
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        if stand_in { " (stand-in)" } else { "" }
    )
}

fn step_finished(
    job: &JobRef,
    name: &str,
    outcome: StepOutcome,
    conclusion: StepOutcome,
    duration: Duration,
) -> String {
    let mut s = format!("{} {name}: {}", prefix(job), outcome.as_str());
    if outcome != conclusion && conclusion == StepOutcome::Success {
        s.push_str(" (continue-on-error)");
    }
    if outcome != StepOutcome::Skipped {
        let _ = write!(s, " in {}", duration_text(duration));
    }
    s
}

fn container_started(job: &JobRef, name: &str, image: &str, host: &str) -> String {
    // The local engine is the usual case; only another host is worth a word.
    if host.is_empty() || host == crate::events::LOCAL_HOST {
        format!("{} container {name} started ({image})", prefix(job))
    } else {
        format!(
            "{} container {name} started ({image}) on {host}",
            prefix(job)
        )
    }
}

fn preflight_check(
    job: &JobRef,
    step: Option<&str>,
    name: &str,
    outcome: StepOutcome,
    message: Option<&str>,
    duration: Duration,
) -> String {
    let at = step.map_or(String::new(), |s| format!(" (step {s})"));
    let mut s = format!(
        "{} preflight: {name}{at}: {} in {}",
        prefix(job),
        outcome.as_str(),
        duration_text(duration)
    );
    for l in message.iter().flat_map(|m| m.lines()) {
        let _ = write!(s, "\n{} preflight | {l}", prefix(job));
    }
    s
}

fn preflight_finished(checks: usize, failed: usize, duration: Duration) -> String {
    // "1 check", not "1 checks": a workflow with one image to check has one.
    let word = if checks == 1 { "check" } else { "checks" };
    match failed {
        0 => format!(
            "preflight: {checks} {word} passed in {}",
            duration_text(duration)
        ),
        n => format!(
            "preflight: {n} of {checks} {word} failed in {}; nothing was started",
            duration_text(duration)
        ),
    }
}

impl<W: Write + Send> EventSink for PlainView<W> {
    fn emit(&self, event: Event) {
        if let Ok(mut state) = self.state.lock() {
            let (out, names) = &mut *state;
            if let Some(l) = line(&event, names) {
                let _ = writeln!(out, "{l}");
                let _ = out.flush();
            }
        }
    }
}

/// The final table: one line per job run with its result and duration. Not made of events,
/// but of the run's report, whose job names (matrix values, evaluated `name:`s) the engine
/// masks as it masks events (`dispatcher::masked_report`).
pub fn summary(jobs: &[JobSummary]) -> String {
    let width = jobs.iter().map(|j| j.job.display.len()).max().unwrap_or(0);
    let mut out = String::from("summary:\n");
    for j in jobs {
        let result = match (j.result, j.failure_allowed) {
            (JobResult::Failure, true) => "failure (continue-on-error)".to_string(),
            (r, _) => r.as_str().to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<width$}  {:<9}  {}",
            j.job.display,
            result,
            duration_text(j.duration)
        );
    }
    out
}

/// `0.4s`, `12.3s`, `2m05s`.
pub fn duration_text(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let s = d.as_secs();
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobRef {
        JobRef {
            job: "bench".into(),
            cell: 0,
            display: "bench (1)".into(),
        }
    }

    fn render(kinds: Vec<EventKind>) -> String {
        let view = PlainView::new(Vec::new());
        for kind in kinds {
            view.emit(Event {
                elapsed: Duration::ZERO,
                kind,
            });
        }
        String::from_utf8(view.state.into_inner().unwrap().0).unwrap()
    }

    #[test]
    fn lines_are_prefixed_by_job_and_step() {
        let out = render(vec![
            EventKind::StepStarted {
                job: job(),
                step: "1".into(),
                name: "say hi".into(),
            },
            EventKind::LogLine {
                job: job(),
                step: Some("1".into()),
                container: None,
                stream: Stream::Stdout,
                text: "hi".into(),
            },
            EventKind::StepFinished {
                job: job(),
                step: "1".into(),
                name: "say hi".into(),
                outcome: StepOutcome::Failure,
                conclusion: StepOutcome::Success,
                duration: Duration::from_millis(1500),
                outputs: Default::default(),
            },
        ]);
        insta::assert_snapshot!(out, @r"
        [bench (1)] say hi: started
        [bench (1)] say hi | hi
        [bench (1)] say hi: failure (continue-on-error) in 1.5s
        ");
    }

    #[test]
    fn benchmark_progress_says_requests_speed_and_errors() {
        let out = render(vec![
            EventKind::StepStarted {
                job: job(),
                step: "3".into(),
                name: "bench".into(),
            },
            EventKind::BenchmarkProgress {
                job: job(),
                step: "3".into(),
                level: "single-stream".into(),
                phase: "run 2/3".into(),
                done: 4,
                total: Some(10),
                errors: 1,
                output_tok_s: 88.04,
            },
        ]);
        insta::assert_snapshot!(out, @r"
        [bench (1)] bench: started
        [bench (1)] bench | single-stream run 2/3: 4/10 requests, 88.0 tok/s, 1 errors
        ");
    }

    #[test]
    fn one_preflight_check_is_one_check() {
        let finished = |checks, failed| EventKind::PreflightFinished {
            checks,
            failed,
            duration: Duration::from_millis(300),
        };
        let out = render(vec![finished(1, 0), finished(3, 0), finished(1, 1)]);
        insta::assert_snapshot!(out, @r"
        preflight: 1 check passed in 0.3s
        preflight: 3 checks passed in 0.3s
        preflight: 1 of 1 check failed in 0.3s; nothing was started
        ");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration_text(Duration::from_millis(400)), "0.4s");
        assert_eq!(duration_text(Duration::from_secs(125)), "2m05s");
    }
}
