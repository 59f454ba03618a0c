//! A run read back from its events (`events.jsonl` and the log files it points into), folded
//! into what its page shows: each job run with its state, GPUs and steps, each step's latest
//! lines. The live stream (`live.rs`) folds the same events in the same order, so the job
//! numbers it sends match the page's.

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use indexmap::IndexMap;
use serde::Serialize;

use crate::events::{Event, EventKind, JobRef, Stream};
use crate::run_logs::replay::Replay;

/// The lines kept per step: a page shows the end of a long log (`gpuflow logs` has all of it),
/// and a follower's memory stays bounded however much a step prints.
pub const LINES_KEPT: usize = 400;

#[derive(Debug, Default, Serialize)]
pub struct RunView {
    pub run_id: String,
    pub workflow: String,
    /// How the run ended; `None` while it runs (or when it stopped without saying).
    pub result: Option<String>,
    /// How many events were read: where a live follower of this page starts.
    pub events: u64,
    pub jobs: Vec<JobView>,
    /// The run's answer (benchmarks, verdicts, reports), once it is there.
    pub headline: Option<crate::events::Headline>,
    pub warnings: Vec<String>,
    /// The checks preflight failed, as the terminal names them: a run stopped there started
    /// no job, so this is the page's answer to why.
    pub preflight: Vec<PreflightFailure>,
    #[serde(skip)]
    index: HashMap<(String, usize, String), usize>,
}

/// A failed preflight check: the job run, what was checked, why it failed and the fix.
#[derive(Debug, Serialize)]
pub struct PreflightFailure {
    pub job: String,
    pub name: String,
    pub message: String,
}

#[derive(Debug, Serialize)]
pub struct JobView {
    pub job: String,
    pub cell: usize,
    pub display: String,
    pub matrix: IndexMap<String, String>,
    pub needs: Vec<String>,
    /// `queued`, `waiting`, `running`, `success`, `failure`, `cancelled`, `skipped`.
    pub state: String,
    /// Why it waits, was skipped or could not run; why it failed.
    pub reason: Option<String>,
    pub gpus: Vec<u32>,
    pub stand_in_gpus: bool,
    pub duration_s: Option<f64>,
    pub steps: Vec<StepView>,
}

#[derive(Debug, Serialize)]
pub struct StepView {
    /// `3`, or `3.1` inside a composite action; `output` for containers' own lines.
    pub step: String,
    pub name: String,
    /// `running`, `success`, `failure`, `cancelled`, `skipped`; `output` for containers'
    /// own lines.
    pub state: String,
    pub duration_s: Option<f64>,
    /// The latest progress message of a long step (`waited 40s: loading weights`).
    pub progress: Option<String>,
    /// Lines printed before the ones kept.
    pub earlier: u64,
    pub lines: VecDeque<Line>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Line {
    pub stream: Stream,
    pub text: String,
}

impl RunView {
    /// Reads the whole run in `dir`; `over` says the run has ended (lines never written are
    /// then skipped rather than waited for).
    pub fn read(dir: &Path, over: bool) -> std::io::Result<Self> {
        let mut view = Self::default();
        let mut replay = Replay::open(dir)?;
        replay.poll(over, &mut |e| {
            view.apply(&e);
        })?;
        Ok(view)
    }

    /// Folds one event in; returns the number of the job run it is about, if any.
    pub fn apply(&mut self, e: &Event) -> Option<usize> {
        self.events += 1;
        match &e.kind {
            EventKind::RunStarted {
                run_id, workflow, ..
            } => {
                self.run_id.clone_from(run_id);
                self.workflow.clone_from(workflow);
                None
            }
            EventKind::RunFinished { result, .. } => {
                self.result = Some(result.as_str().to_string());
                None
            }
            EventKind::RunHeadline(h) => {
                self.headline = Some(h.clone());
                None
            }
            EventKind::Warning { message, .. } => {
                self.warnings.push(message.clone());
                None
            }
            EventKind::PreflightCheck {
                job,
                name,
                outcome,
                message,
                ..
            } if *outcome == crate::events::StepOutcome::Failure => {
                self.preflight.push(PreflightFailure {
                    job: job.display.clone(),
                    name: name.clone(),
                    message: message.clone().unwrap_or_default(),
                });
                None
            }
            EventKind::JobQueued { job, matrix, needs } => {
                let i = self.jobs.len();
                self.index.insert(key(job), i);
                self.jobs.push(JobView {
                    job: job.job.clone(),
                    cell: job.cell,
                    display: job.display.clone(),
                    matrix: matrix.clone(),
                    needs: needs.clone(),
                    state: "queued".into(),
                    reason: None,
                    gpus: Vec::new(),
                    stand_in_gpus: false,
                    duration_s: None,
                    steps: Vec::new(),
                });
                Some(i)
            }
            kind => {
                let job = job_of(kind)?;
                let i = *self.index.get(&key(job))?;
                self.jobs[i].apply(kind);
                Some(i)
            }
        }
    }
}

fn key(job: &JobRef) -> (String, usize, String) {
    (job.job.clone(), job.cell, job.display.clone())
}

/// The job run an event is about.
pub fn job_of(kind: &EventKind) -> Option<&JobRef> {
    match kind {
        EventKind::JobQueued { job, .. }
        | EventKind::JobStarted { job }
        | EventKind::JobSkipped { job, .. }
        | EventKind::JobCannotRun { job, .. }
        | EventKind::JobWaiting { job, .. }
        | EventKind::GpusLeased { job, .. }
        | EventKind::JobFinished { job, .. }
        | EventKind::StepStarted { job, .. }
        | EventKind::StepFinished { job, .. }
        | EventKind::StepProgress { job, .. }
        | EventKind::ImagePull { job, .. }
        | EventKind::LogLine { job, .. } => Some(job),
        _ => None,
    }
}

impl JobView {
    fn apply(&mut self, kind: &EventKind) {
        match kind {
            EventKind::JobStarted { .. } => {
                self.state = "running".into();
                self.reason = None;
            }
            EventKind::JobWaiting { reason, .. } => {
                self.state = "waiting".into();
                self.reason = Some(reason.clone());
            }
            // The page says what the job is pulling, then how long the pull took.
            EventKind::ImagePull {
                image,
                text,
                finished,
                elapsed,
                ..
            } => {
                self.reason = Some(if *finished {
                    format!("pulled `{image}` in {:.1}s: {text}", elapsed.as_secs_f64())
                } else {
                    format!("pulling `{image}`: {text}")
                });
            }
            EventKind::JobSkipped { reason, .. } | EventKind::JobCannotRun { reason, .. } => {
                self.reason = Some(reason.clone());
                if matches!(kind, EventKind::JobSkipped { .. }) {
                    self.state = "skipped".into();
                }
            }
            EventKind::GpusLeased {
                indexes, stand_in, ..
            } => {
                self.gpus.clone_from(indexes);
                self.stand_in_gpus = *stand_in;
            }
            EventKind::JobFinished {
                result,
                duration,
                failure,
                ..
            } => {
                self.state = result.as_str().to_string();
                self.duration_s = Some(duration.as_secs_f64());
                if failure.is_some() {
                    self.reason.clone_from(failure);
                }
            }
            EventKind::StepStarted { step, name, .. } => self.steps.push(StepView {
                step: step.clone(),
                name: name.clone(),
                state: "running".into(),
                duration_s: None,
                progress: None,
                earlier: 0,
                lines: VecDeque::new(),
            }),
            EventKind::StepFinished {
                step,
                conclusion,
                duration,
                ..
            } => {
                if let Some(s) = self.step_mut(step) {
                    s.state = conclusion.as_str().to_string();
                    s.duration_s = Some(duration.as_secs_f64());
                    s.progress = None;
                }
            }
            EventKind::StepProgress { step, message, .. } => {
                if let Some(s) = self.step_mut(step) {
                    s.progress = Some(message.clone());
                }
            }
            EventKind::LogLine {
                step, stream, text, ..
            } => self.line(step.as_deref(), *stream, text),
            _ => {}
        }
    }

    fn step_mut(&mut self, step: &str) -> Option<&mut StepView> {
        self.steps.iter_mut().rev().find(|s| s.step == step)
    }

    fn line(&mut self, step: Option<&str>, stream: Stream, text: &str) {
        let step = step.unwrap_or("output");
        if self.step_mut(step).is_none() {
            self.steps.push(StepView {
                step: step.to_string(),
                name: "containers' output".into(),
                // Not a step: it neither runs nor ends.
                state: "output".into(),
                duration_s: None,
                progress: None,
                earlier: 0,
                lines: VecDeque::new(),
            });
        }
        let Some(s) = self.step_mut(step) else {
            return;
        };
        if s.lines.len() == LINES_KEPT {
            s.lines.pop_front();
            s.earlier += 1;
        }
        s.lines.push_back(Line {
            stream,
            text: text.to_string(),
        });
    }
}
