//! The live view on a terminal: one board of the run's jobs, redrawn in place (indicatif),
//! each with its state and duration; the steps of running jobs (and the step that failed a
//! job) under it, a running step with the latest line it printed. When the run is over, the
//! board ends with the run's headline: figures, verdicts, the report's path.
//!
//! Split in two so the picture can be tested without a terminal or a clock: [`Board`] folds
//! events into state and renders a frame as a string for a given "now"; [`LiveView`] feeds it
//! and draws the frames, also between events so running durations move. Fed only by engine
//! events; knows nothing of backends, logs or exit codes.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::plain_view::duration_text;
use crate::events::{
    Event, EventKind, EventSink, Headline, JobRef, JobResult, StepOutcome, Stream,
};

/// How often running durations are redrawn between events.
const TICK: Duration = Duration::from_millis(200);
/// A log line longer than this is cut (the board is one line per thing).
const LINE_CHARS: usize = 100;

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Queued,
    /// Ready, waiting for GPUs.
    Waiting {
        reason: String,
    },
    Running {
        since: Duration,
    },
    Done {
        word: &'static str,
        took: Duration,
    },
    Skipped {
        reason: String,
    },
}

#[derive(Clone, Debug)]
struct StepRow {
    name: String,
    state: State,
    failed: bool,
    last_line: Option<String>,
}

#[derive(Clone, Debug)]
struct JobRow {
    display: String,
    state: State,
    failed: bool,
    steps: IndexMap<String, StepRow>,
}

/// The run as the events so far tell it.
#[derive(Clone, Debug, Default)]
pub struct Board {
    header: Option<String>,
    jobs: IndexMap<(String, usize), JobRow>,
    /// The latest event's time: "now" when no clock is at hand.
    last: Duration,
    /// The run's answer, once it is over.
    headline: Option<Headline>,
}

impl Board {
    pub fn new() -> Self {
        Self::default()
    }

    fn finish_job(&mut self, job: &JobRef, result: JobResult, took: Duration) {
        let row = self.job(job);
        if result != JobResult::Skipped {
            row.state = State::Done {
                word: result.as_str(),
                took,
            };
        }
        row.failed = result == JobResult::Failure;
    }

    fn start_step(&mut self, job: &JobRef, step: &str, name: &str, at: Duration) {
        self.job(job).steps.insert(
            step.to_owned(),
            StepRow {
                name: name.to_owned(),
                state: State::Running { since: at },
                failed: false,
                last_line: None,
            },
        );
    }

    /// Folds one event in.
    pub fn apply(&mut self, event: &Event) {
        self.last = self.last.max(event.elapsed);
        let at = event.elapsed;
        match &event.kind {
            // The log folder on the first line, as plain lines and `--json` give it: where
            // to look is known before the run is over (or is interrupted).
            EventKind::RunStarted {
                run_id,
                workflow,
                log_dir,
                ..
            } => self.header = Some(format!("run {run_id} of `{workflow}` (logs: {log_dir})")),
            EventKind::JobQueued { job, .. } => self.queue(job),
            EventKind::JobStarted { job } => self.job(job).state = State::Running { since: at },
            EventKind::JobWaiting { job, reason } => {
                self.job(job).state = State::Waiting {
                    reason: reason.clone(),
                }
            }
            EventKind::JobSkipped { job, reason } => {
                self.job(job).state = State::Skipped {
                    reason: reason.clone(),
                }
            }
            EventKind::JobFinished {
                job,
                result,
                duration,
                ..
            } => self.finish_job(job, *result, *duration),
            EventKind::StepStarted { job, step, name } => self.start_step(job, step, name, at),
            EventKind::StepFinished {
                job,
                step,
                outcome,
                duration,
                ..
            } => {
                if let Some(row) = self.job(job).steps.get_mut(step) {
                    row.state = State::Done {
                        word: outcome.as_str(),
                        took: *duration,
                    };
                    row.failed = *outcome == StepOutcome::Failure;
                }
            }
            EventKind::LogLine {
                job,
                step: Some(step),
                stream,
                text,
                ..
            } if *stream != Stream::Runner => {
                if let Some(row) = self.job(job).steps.get_mut(step) {
                    row.last_line = Some(cut(text));
                }
            }
            // A wait (`wait-for-health`) or a benchmark says how it is doing: time waited and
            // the server's latest line, or requests done and the current rate.
            EventKind::StepProgress {
                job, step, message, ..
            } => {
                if let Some(row) = self.job(job).steps.get_mut(step) {
                    row.last_line = Some(cut(message));
                }
            }
            // A step's pull shows on its row; preflight's on the job's, until the job starts.
            EventKind::ImagePull { .. } => self.pulling(&event.kind),
            EventKind::BenchmarkProgress {
                job,
                step,
                level,
                phase,
                done,
                total,
                errors,
                output_tok_s,
            } => {
                let line = super::progress::benchmark_progress(
                    level,
                    phase,
                    *done,
                    *total,
                    *errors,
                    *output_tok_s,
                );
                if let Some(row) = self.job(job).steps.get_mut(step) {
                    row.last_line = Some(cut(&line));
                }
            }
            EventKind::RunHeadline(h) => self.headline = Some(h.clone()),
            _ => {}
        }
    }

    /// An image pull's progress: on the step's row, or (preflight's) on the job's while it
    /// has not started.
    fn pulling(&mut self, kind: &EventKind) {
        let EventKind::ImagePull {
            job,
            step,
            image,
            finished,
            text,
            ..
        } = kind
        else {
            return;
        };
        let (line, finished) = (format!("pulling `{image}`: {text}"), *finished);
        let row = self.job(job);
        match step {
            Some(step) => {
                if let Some(step) = row.steps.get_mut(step.as_str()) {
                    step.last_line = Some(cut(&line));
                }
            }
            None if finished => {
                if matches!(row.state, State::Waiting { .. }) {
                    row.state = State::Queued;
                }
            }
            None => {
                if matches!(row.state, State::Queued | State::Waiting { .. }) {
                    row.state = State::Waiting { reason: line };
                }
            }
        }
    }

    /// A job run queued. A cell queued again (a search's next round, `tune (4), round 2`):
    /// its row shows the new run from the start.
    fn queue(&mut self, job: &JobRef) {
        let row = self.job(job);
        if row.display != job.display {
            *row = JobRow {
                display: job.display.clone(),
                state: State::Queued,
                failed: false,
                steps: IndexMap::new(),
            };
        }
    }

    fn job(&mut self, job: &JobRef) -> &mut JobRow {
        self.jobs
            .entry((job.job.clone(), job.cell))
            .or_insert_with(|| JobRow {
                display: job.display.clone(),
                state: State::Queued,
                failed: false,
                steps: IndexMap::new(),
            })
    }

    /// The board at `now` (time since the run started): one line per job; under a running
    /// job its steps, under a failed one the step that failed; once the run is over, its
    /// headline below.
    pub fn render(&self, now: Duration) -> String {
        let mut out = self.render_jobs(now);
        if let Some(h) = &self.headline {
            out.push('\n');
            out.push_str(&super::headline_text(h));
        }
        out
    }

    /// The board without the headline: what is redrawn in place.
    fn render_jobs(&self, now: Duration) -> String {
        let mut out = String::new();
        if let Some(header) = &self.header {
            let _ = writeln!(out, "{header}");
        }
        for job in self.jobs.values() {
            let _ = writeln!(
                out,
                "{} {}  {}",
                mark(&job.state, job.failed),
                job.display,
                state_text(&job.state, now)
            );
            let show_all = matches!(job.state, State::Running { .. });
            for step in job.steps.values() {
                if !show_all && !step.failed {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "    {} {}  {}",
                    mark(&step.state, step.failed),
                    step.name,
                    state_text(&step.state, now)
                );
                if let (State::Running { .. }, Some(line)) = (&step.state, &step.last_line) {
                    let _ = writeln!(out, "        │ {line}");
                }
            }
        }
        out
    }
}

fn mark(state: &State, failed: bool) -> &'static str {
    match state {
        State::Queued | State::Waiting { .. } => "○",
        State::Running { .. } => "●",
        State::Done { .. } if failed => "✗",
        State::Done {
            word: "success", ..
        } => "✓",
        State::Done { .. } => "−",
        State::Skipped { .. } => "−",
    }
}

fn state_text(state: &State, now: Duration) -> String {
    match state {
        State::Queued => "queued".into(),
        State::Waiting { reason } => reason.clone(),
        State::Running { since } => duration_text(now.saturating_sub(*since)),
        State::Done {
            word: "success",
            took,
        } => duration_text(*took),
        State::Done { word, took } => format!("{word} after {}", duration_text(*took)),
        State::Skipped { reason } => format!("skipped: {reason}"),
    }
}

/// At most [`LINE_CHARS`] characters, tabs as spaces, with `…` when cut.
fn cut(text: &str) -> String {
    let text = text.replace('\t', "    ");
    if text.chars().count() <= LINE_CHARS {
        text
    } else {
        let mut cut: String = text.chars().take(LINE_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}

/// Draws the [`Board`] in place on the terminal as events arrive and every [`TICK`].
pub struct LiveView {
    board: Arc<Mutex<Board>>,
    bar: ProgressBar,
    started: Instant,
    stop: Arc<AtomicBool>,
    /// Where the headline is printed below the final board: written once the board is drawn
    /// for the last time, so a board taller than the terminal cannot cut it off.
    after: Mutex<Box<dyn Write + Send>>,
}

impl LiveView {
    /// A live view drawing on `target` (tests draw nowhere), its headline printed to `after`.
    pub fn new(target: ProgressDrawTarget, after: Box<dyn Write + Send>) -> Self {
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(ProgressStyle::with_template("{msg}").expect("a valid template"));
        let view = Self {
            board: Arc::default(),
            bar,
            started: Instant::now(),
            stop: Arc::default(),
            after: Mutex::new(after),
        };
        let (board, bar, stop, started) = (
            view.board.clone(),
            view.bar.clone(),
            view.stop.clone(),
            view.started,
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(TICK);
                // Held while drawing: the final frame, drawn under this lock, is never
                // followed by a stale one.
                let board = board.lock().expect("not poisoned");
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                bar.set_message(board.render(started.elapsed()).trim_end().to_string());
            }
        });
        view
    }

    /// A live view drawing on stdout.
    pub fn stdout() -> Self {
        Self::new(ProgressDrawTarget::stdout(), Box::new(std::io::stdout()))
    }

    /// The board as it is now.
    pub fn frame(&self) -> String {
        self.board
            .lock()
            .expect("not poisoned")
            .render(self.started.elapsed())
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl EventSink for LiveView {
    fn emit(&self, event: Event) {
        let mut board = self.board.lock().expect("not poisoned");
        board.apply(&event);
        match &event.kind {
            // Said once, above the board, so they are not lost when it is redrawn.
            EventKind::Warning { job, message } => {
                let line = match job {
                    Some(j) => format!("[{}] warning: {message}", j.display),
                    None => format!("warning: {message}"),
                };
                self.bar.println(line);
            }
            // The board shows the job's `failure`; why it never started is said above it.
            EventKind::JobCannotRun { job, reason } => {
                self.bar
                    .println(format!("[{}] cannot run: {reason}", job.display));
            }
            // The run is over: no more ticking; the headline follows at once.
            EventKind::RunFinished { .. } => {
                self.stop.store(true, Ordering::Relaxed);
                self.bar
                    .set_message(board.render(event.elapsed).trim_end().to_string());
                return;
            }
            // The last event: the board's final frame, then the run's answer below it.
            EventKind::RunHeadline(h) => {
                self.stop.store(true, Ordering::Relaxed);
                self.bar
                    .set_message(board.render_jobs(board.last).trim_end().to_string());
                self.bar.finish();
                if let Ok(mut out) = self.after.lock() {
                    let _ = write!(out, "\n{}", super::headline_text(h));
                    let _ = out.flush();
                }
                return;
            }
            _ => {}
        }
        self.bar
            .set_message(board.render(self.started.elapsed()).trim_end().to_string());
    }
}

#[cfg(test)]
mod tests;
