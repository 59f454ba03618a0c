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
            EventKind::JobQueued { job, .. } => {
                self.job(job);
            }
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
mod tests {
    use super::*;
    use crate::events::Stream;

    fn job(name: &str) -> JobRef {
        JobRef {
            job: name.into(),
            cell: 0,
            display: name.into(),
        }
    }

    fn at(secs: f64, kind: EventKind) -> Event {
        Event {
            elapsed: Duration::from_secs_f64(secs),
            kind,
        }
    }

    fn step_started(secs: f64, j: &str, step: &str, name: &str) -> Event {
        at(
            secs,
            EventKind::StepStarted {
                job: job(j),
                step: step.into(),
                name: name.into(),
            },
        )
    }

    fn step_finished(secs: f64, j: &str, step: &str, outcome: StepOutcome, took: f64) -> Event {
        at(
            secs,
            EventKind::StepFinished {
                job: job(j),
                step: step.into(),
                name: String::new(),
                outcome,
                conclusion: outcome,
                duration: Duration::from_secs_f64(took),
                outputs: Default::default(),
            },
        )
    }

    fn log(secs: f64, j: &str, step: &str, text: &str) -> Event {
        at(
            secs,
            EventKind::LogLine {
                job: job(j),
                step: Some(step.into()),
                container: None,
                stream: Stream::Stdout,
                text: text.into(),
            },
        )
    }

    fn events() -> Vec<Event> {
        vec![
            at(
                0.0,
                EventKind::RunStarted {
                    run_id: "20261130-090000-ab12".into(),
                    workflow: "demo".into(),
                    log_dir: ".gpuflow/runs/x".into(),
                    jobs: 4,
                },
            ),
            at(
                0.0,
                EventKind::JobQueued {
                    job: job("build"),
                    matrix: Default::default(),
                },
            ),
            at(
                0.0,
                EventKind::JobQueued {
                    job: job("bench"),
                    matrix: Default::default(),
                },
            ),
            at(
                0.0,
                EventKind::JobQueued {
                    job: job("report"),
                    matrix: Default::default(),
                },
            ),
            at(
                0.0,
                EventKind::JobQueued {
                    job: job("lint"),
                    matrix: Default::default(),
                },
            ),
            at(0.0, EventKind::JobStarted { job: job("build") }),
            step_started(0.1, "build", "1", "compile"),
            log(0.5, "build", "1", "compiling"),
            step_finished(1.1, "build", "1", StepOutcome::Success, 1.0),
            at(
                1.2,
                EventKind::JobFinished {
                    job: job("build"),
                    result: JobResult::Success,
                    duration: Duration::from_secs_f64(1.2),
                    failure: None,
                },
            ),
            at(
                1.2,
                EventKind::JobSkipped {
                    job: job("lint"),
                    reason: "`if` is false".into(),
                },
            ),
            at(1.3, EventKind::JobStarted { job: job("bench") }),
            step_started(1.3, "bench", "1", "start the server"),
            step_finished(2.3, "bench", "1", StepOutcome::Success, 1.0),
            step_started(2.3, "bench", "2", "run the client"),
            log(2.5, "bench", "2", "warming up"),
            log(3.0, "bench", "2", "89.5 tok/s\twith a\ttab"),
        ]
    }

    fn board(events: &[Event]) -> Board {
        let mut board = Board::new();
        for e in events {
            board.apply(e);
        }
        board
    }

    #[test]
    fn a_running_job_shows_its_steps_and_the_latest_line() {
        insta::assert_snapshot!(board(&events()).render(Duration::from_secs(5)), @r"
        run 20261130-090000-ab12 of `demo` (logs: .gpuflow/runs/x)
        ✓ build  1.2s
        ● bench  3.7s
            ✓ start the server  1.0s
            ● run the client  2.7s
                │ 89.5 tok/s    with a    tab
        ○ report  queued
        − lint  skipped: `if` is false
        ");
    }

    #[test]
    fn a_wait_shows_the_servers_latest_line_and_a_benchmark_its_progress() {
        let mut events = events();
        events.push(at(
            3.5,
            EventKind::StepProgress {
                job: job("bench"),
                step: "2".into(),
                waited: Duration::from_secs(2),
                message: "waited 2s: Load weight begin".into(),
            },
        ));
        let waiting = board(&events).render(Duration::from_secs(5));
        assert!(
            waiting.contains("│ waited 2s: Load weight begin"),
            "{waiting}"
        );
        events.push(at(
            4.0,
            EventKind::BenchmarkProgress {
                job: job("bench"),
                step: "2".into(),
                level: "single-stream".into(),
                phase: "run 2/3".into(),
                done: 3,
                total: Some(4),
                errors: 0,
                output_tok_s: 89.5,
            },
        ));
        let measuring = board(&events).render(Duration::from_secs(5));
        assert!(
            measuring.contains("│ single-stream run 2/3: 3/4 requests, 89.5 tok/s, 0 errors"),
            "{measuring}"
        );
    }

    #[test]
    fn a_job_waiting_for_gpus_says_so_until_it_starts() {
        let mut events = events();
        events.push(at(
            4.0,
            EventKind::JobWaiting {
                job: job("report"),
                reason: "waiting for 2 GPUs (0 of 8 free)".into(),
            },
        ));
        let text = board(&events).render(Duration::from_secs(5));
        assert!(
            text.contains("○ report  waiting for 2 GPUs (0 of 8 free)"),
            "{text}"
        );
        events.push(at(4.5, EventKind::JobStarted { job: job("report") }));
        let text = board(&events).render(Duration::from_secs(5));
        assert!(text.contains("● report  0.5s"), "{text}");
    }

    #[test]
    fn a_failed_job_keeps_the_step_that_failed() {
        let mut events = events();
        events.push(step_finished(4.0, "bench", "2", StepOutcome::Failure, 1.7));
        events.push(at(
            4.1,
            EventKind::JobFinished {
                job: job("bench"),
                result: JobResult::Failure,
                duration: Duration::from_secs_f64(2.8),
                failure: None,
            },
        ));
        insta::assert_snapshot!(board(&events).render(Duration::from_secs(9)), @r"
        run 20261130-090000-ab12 of `demo` (logs: .gpuflow/runs/x)
        ✓ build  1.2s
        ✗ bench  failure after 2.8s
            ✗ run the client  failure after 1.7s
        ○ report  queued
        − lint  skipped: `if` is false
        ");
    }

    #[test]
    fn the_final_frame_ends_with_the_runs_headline() {
        let mut events = events();
        events.push(step_finished(4.0, "bench", "2", StepOutcome::Success, 1.7));
        events.push(at(
            4.1,
            EventKind::JobFinished {
                job: job("bench"),
                result: JobResult::Success,
                duration: Duration::from_secs_f64(2.8),
                failure: None,
            },
        ));
        events.push(at(
            4.2,
            EventKind::RunFinished {
                run_id: "20261130-090000-ab12".into(),
                result: JobResult::Success,
            },
        ));
        let headline = crate::events::Headline {
            run_id: "20261130-090000-ab12".into(),
            result: JobResult::Success,
            log_dir: ".gpuflow/runs/20261130-090000-ab12".into(),
            benchmarks: vec![crate::events::BenchmarkFigure {
                job: job("bench"),
                step: "2".into(),
                name: "run the client".into(),
                metric: "decode_tok_s".into(),
                unit: "tok/s".into(),
                mean: 89.5,
                ci95_low: 88.5,
                ci95_high: 90.5,
                runs: 3,
            }],
            comparisons: vec![crate::events::ComparisonFigure {
                job: job("bench"),
                step: "3".into(),
                name: "compare".into(),
                metric: "output_tok_s".into(),
                meaning: Some("decode tok/s, per-request median".into()),
                verdict: "regression".into(),
                unit: "tok/s".into(),
                current: Some(38.0),
                baseline_value: Some(89.5),
                ratio: Some(0.4246),
                change_pct: Some(-57.54),
                baseline: "the pinned baseline `nccl`".into(),
            }],
            reports: vec![crate::events::ReportFile {
                job: job("report"),
                step: "1".into(),
                path: ".gpuflow/runs/20261130-090000-ab12/report/report.md".into(),
                commit: None,
            }],
        };
        events.push(at(4.2, EventKind::RunHeadline(headline)));
        insta::assert_snapshot!(board(&events).render(Duration::from_secs(9)), @r"
        run 20261130-090000-ab12 of `demo` (logs: .gpuflow/runs/x)
        ✓ build  1.2s
        ✓ bench  2.8s
        ○ report  queued
        − lint  skipped: `if` is false

        headline: run 20261130-090000-ab12 success
          benchmark  [bench] run the client: decode_tok_s 89.50 ± 1.00 tok/s (mean of 3 runs, 95% CI)
          verdict    [bench] compare: output_tok_s (decode tok/s, per-request median) regression, ratio 0.425 (-57.5%): 38.00 tok/s vs 89.50 tok/s
          report     .gpuflow/runs/20261130-090000-ab12/report/report.md
          logs       .gpuflow/runs/20261130-090000-ab12
        ");

        // The live view draws the board a last time, then prints the headline below it.
        let printed = Printed::default();
        let view = LiveView::new(ProgressDrawTarget::hidden(), Box::new(printed.clone()));
        for e in events {
            view.emit(e);
        }
        let frame = view.frame();
        assert!(
            frame
                .trim_end()
                .ends_with("logs       .gpuflow/runs/20261130-090000-ab12"),
            "{frame}"
        );
        let after = printed.text();
        assert!(
            after.starts_with("\nheadline: run 20261130-090000-ab12 success\n")
                && after.contains("  verdict    [bench] compare: output_tok_s (decode tok/s, per-request median) regression, ratio 0.425")
                && after.ends_with("  logs       .gpuflow/runs/20261130-090000-ab12\n"),
            "{after}"
        );
    }

    /// What the live view printed below its board.
    #[derive(Clone, Default)]
    struct Printed(Arc<Mutex<Vec<u8>>>);

    impl Printed {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for Printed {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        let long = "é".repeat(300);
        let c = cut(&long);
        assert_eq!(c.chars().count(), LINE_CHARS);
        assert!(c.ends_with('…'));
    }

    #[test]
    fn the_view_takes_every_event_without_a_terminal() {
        let view = LiveView::new(ProgressDrawTarget::hidden(), Box::new(std::io::sink()));
        for e in events() {
            view.emit(e);
        }
        assert!(
            view.frame().contains("● run the client"),
            "{}",
            view.frame()
        );
        view.emit(at(
            6.0,
            EventKind::RunFinished {
                run_id: "x".into(),
                result: JobResult::Success,
            },
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Events in any order, even nonsensical, never panic the board.
        #[test]
        fn any_event_order_renders(order in proptest::collection::vec(0usize..17, 0..40)) {
            let all = events();
            let mut board = Board::new();
            for i in order {
                board.apply(&all[i]);
            }
            let _ = board.render(Duration::from_secs(1));
        }
    }
}
