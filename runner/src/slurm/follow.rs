//! Following a run's Slurm jobs until each has ended: their state from `squeue` (pending with
//! Slurm's reason, running on a node, ended and how), their events read from their folders as
//! the nodes write them and told again here, fail-fast between a matrix's cells, and
//! cancellation: running jobs are signalled (gpuflow on the node stops its steps and removes
//! its containers), pending ones cancelled, and after a grace period whatever is left is
//! cancelled outright, so nothing of the run stays queued or running.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::bundle::Bundle;
use super::client::{self, JobInfo};
use super::state::{Ending, Phase};
use super::voice::{Voice, summary};
use crate::events::{EventKind, JobRef, JobResult, JobSummary};
use crate::plan::Plan;
use crate::run_logs::replay::Replay;

/// How often Slurm is asked. Its own scheduler runs every few seconds; asking more often
/// only costs the controller.
const POLL: Duration = Duration::from_millis(500);
/// How often Slurm is asked while a job's node has written its end and Slurm has yet to say
/// the job ended.
const POLL_ENDING: Duration = Duration::from_millis(100);

/// How long cancelled jobs get to stop their steps and remove their containers before they
/// are cancelled outright.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

/// One submitted job, as followed.
pub struct Tracked {
    index: usize,
    slurm_id: u64,
    jref: JobRef,
    bundle: Bundle,
    replay: Option<Replay>,
    /// The pending reason last said.
    waiting: Option<String>,
    node: Option<String>,
    /// The node said it started / finished it.
    started: bool,
    /// The node's `job_finished`, held back until Slurm's state says whether it stands (a
    /// job Slurm stopped for its time limit ends as that, not as the cancel the node saw).
    finished: Option<EventKind>,
    done: Option<JobSummary>,
    /// Cancelled by this run (Ctrl-C, or fail-fast): why.
    cancelled: Option<&'static str>,
}

impl Tracked {
    pub fn new(index: usize, slurm_id: u64, jref: JobRef, bundle: Bundle) -> Self {
        Self {
            index,
            slurm_id,
            jref,
            bundle,
            replay: None,
            waiting: None,
            node: None,
            started: false,
            finished: None,
            done: None,
            cancelled: None,
        }
    }
}

/// What fail-fast needs of a job's plan: its job, whether its matrix fails fast, how many
/// cells it has.
#[derive(Clone, Debug, Default)]
pub struct Sibling {
    pub job_id: String,
    pub fail_fast: bool,
    pub cells: usize,
}

impl Sibling {
    pub fn of(plan: &Plan) -> Vec<Self> {
        plan.jobs
            .iter()
            .map(|p| Self {
                job_id: p.job_id.clone(),
                fail_fast: p.fail_fast,
                cells: p.cells,
            })
            .collect()
    }
}

pub struct Follower {
    jobs: Vec<Tracked>,
    planned: Vec<Sibling>,
    voice: Voice,
    cancel: CancellationToken,
    /// When the run was cancelled: the grace period runs from then.
    cancelling_since: Option<Instant>,
}

impl Follower {
    pub fn new(
        jobs: Vec<Tracked>,
        planned: Vec<Sibling>,
        voice: Voice,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            jobs,
            planned,
            voice,
            cancel,
            cancelling_since: None,
        }
    }

    /// Follows every job to its end; their summaries in plan order.
    pub async fn follow(mut self) -> Vec<JobSummary> {
        let mut problem_said = false;
        while self.jobs.iter().any(|j| j.done.is_none()) {
            if self.cancel.is_cancelled() {
                self.cancel_jobs().await;
            }
            let ids: Vec<u64> = self
                .jobs
                .iter()
                .filter(|j| j.done.is_none())
                .map(|j| j.slurm_id)
                .collect();
            match client::squeue(&ids).await {
                Ok(infos) => {
                    let by_id: HashMap<u64, JobInfo> =
                        infos.into_iter().map(|i| (i.id, i)).collect();
                    for k in 0..self.jobs.len() {
                        if self.jobs[k].done.is_none() {
                            self.update(k, by_id.get(&self.jobs[k].slurm_id));
                        }
                    }
                    self.fail_fast().await;
                }
                // The controller may be restarting: said once, asked again.
                Err(why) if !problem_said => {
                    problem_said = true;
                    tracing::warn!("squeue: {why}");
                    self.voice.emit(EventKind::Warning {
                        job: None,
                        message: format!(
                            "cannot ask Slurm about the run's jobs ({why}); asking again"
                        ),
                    });
                }
                Err(_) => {}
            }
            if self.jobs.iter().all(|j| j.done.is_some()) {
                break;
            }
            // A job whose node wrote its end is about to end in Slurm too: asked sooner, so
            // the run ends when its last job does, not up to a poll later.
            let ending = self.jobs.iter().any(|j| {
                j.done.is_none() && j.bundle.job_dir(j.index).join("result.json").exists()
            });
            let wait = if ending { POLL_ENDING } else { POLL };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.cancel.cancelled(), if self.cancelling_since.is_none() => {}
            }
        }
        self.jobs.into_iter().filter_map(|j| j.done).collect()
    }

    /// One job's news: its events so far, then its Slurm state.
    fn update(&mut self, k: usize, info: Option<&JobInfo>) {
        self.replay(k, false);
        let job = &mut self.jobs[k];
        let phase = match info {
            Some(info) => Phase::of(info),
            // Slurm forgot it (it ended longer ago than `MinJobAge`): its end says how.
            None => Phase::Ended(Ending::EndedBySlurm {
                state: "UNKNOWN".into(),
                why: "Slurm no longer knows the job".into(),
            }),
        };
        match phase {
            Phase::Pending(reason) => {
                if job.waiting.as_ref() != Some(&reason) && !job.started {
                    job.waiting = Some(reason.clone());
                    self.voice.emit(EventKind::JobWaiting {
                        job: job.jref.clone(),
                        reason,
                    });
                }
            }
            Phase::Running { node } => {
                if job.node.is_none() {
                    self.voice.say(
                        &job.jref,
                        format!("Slurm job {} runs on node {node}", job.slurm_id),
                    );
                    job.node = Some(node);
                }
            }
            Phase::Ended(ending) => self.end(k, info, &ending),
        }
    }

    /// Tells the node's events of job `k` written since the last look. `last`: the job has
    /// ended, so lines never written are not waited for.
    fn replay(&mut self, k: usize, last: bool) {
        let job = &mut self.jobs[k];
        if job.replay.is_none() {
            job.replay = Replay::open(&job.bundle.job_dir(job.index)).ok();
        }
        let Some(replay) = job.replay.as_mut() else {
            return;
        };
        let voice = &self.voice;
        let (started, finished) = (&mut job.started, &mut job.finished);
        let _ = replay.poll(last, &mut |event| match event.kind {
            // The run's own beginning and end are this process's to say.
            EventKind::RunStarted { .. }
            | EventKind::RunFinished { .. }
            | EventKind::RunHeadline(_)
            | EventKind::JobQueued { .. } => {}
            kind => {
                if matches!(kind, EventKind::JobStarted { .. }) {
                    *started = true;
                }
                if matches!(kind, EventKind::JobFinished { .. }) {
                    *finished = Some(kind);
                } else {
                    voice.emit(kind);
                }
            }
        });
    }

    /// Job `k` ended in Slurm: its last events, then its end as its node wrote it, or as Slurm
    /// tells it when the node could not (a time limit, a cancel, a dependency that failed).
    fn end(&mut self, k: usize, info: Option<&JobInfo>, ending: &Ending) {
        self.replay(k, true);
        let job = &mut self.jobs[k];
        let wrote = job.bundle.end(job.index);
        let duration = info
            .filter(|i| i.start_time > 0 && i.end_time >= i.start_time)
            .map(|i| Duration::from_secs(i.end_time - i.start_time))
            .unwrap_or_default();
        let slurm_stopped_it =
            matches!(ending, Ending::EndedBySlurm { .. }) && job.cancelled.is_none();
        if let (Some(end), Some(finished), false) = (&wrote, &job.finished, slurm_stopped_it)
            && let EventKind::JobFinished {
                result, duration, ..
            } = finished
        {
            job.done = Some(JobSummary {
                job: job.jref.clone(),
                result: *result,
                duration: *duration,
                failure_allowed: end.failure_allowed,
            });
            self.voice.emit(finished.clone());
            return;
        }
        let (result, reason) = match (ending, job.cancelled) {
            (_, Some(why)) => (JobResult::Cancelled, why.to_string()),
            (Ending::DependencyFailed, None) => (
                JobResult::Skipped,
                "a job it needs did not succeed".to_string(),
            ),
            (ending, None) => (JobResult::Failure, ending.describe(job.slurm_id)),
        };
        if job.started {
            // It ran, and Slurm stopped it: what it printed last is in Slurm's output.
            self.voice.say(&job.jref, reason.clone());
            for line in slurm_output_tail(&job.bundle, job.index) {
                self.voice.say(&job.jref, line);
            }
            self.voice.emit(EventKind::JobFinished {
                job: job.jref.clone(),
                result,
                duration,
                failure: (result == JobResult::Failure).then(|| reason.clone()),
            });
        } else {
            if result == JobResult::Failure {
                for line in slurm_output_tail(&job.bundle, job.index) {
                    self.voice.say(&job.jref, line);
                }
            }
            self.voice.emit(if result == JobResult::Failure {
                EventKind::JobCannotRun {
                    job: job.jref.clone(),
                    reason: reason.clone(),
                }
            } else {
                EventKind::JobSkipped {
                    job: job.jref.clone(),
                    reason: reason.clone(),
                }
            });
            self.voice.emit(EventKind::JobFinished {
                job: job.jref.clone(),
                result,
                duration: Duration::ZERO,
                failure: None,
            });
        }
        job.done = Some(JobSummary {
            duration,
            ..summary(&job.jref, result)
        });
    }

    /// A failed cell of a `fail-fast` matrix cancels its siblings that have not ended.
    async fn fail_fast(&mut self) {
        let mut cancel: Vec<usize> = Vec::new();
        for failed in self.jobs.iter().filter(|j| {
            j.done
                .as_ref()
                .is_some_and(|d| d.result == JobResult::Failure && !d.failure_allowed)
        }) {
            let planned = &self.planned[failed.index];
            if !planned.fail_fast || planned.cells < 2 {
                continue;
            }
            for (k, sibling) in self.jobs.iter().enumerate() {
                if sibling.done.is_none()
                    && sibling.cancelled.is_none()
                    && self.planned[sibling.index].job_id == planned.job_id
                {
                    cancel.push(k);
                }
            }
        }
        if cancel.is_empty() {
            return;
        }
        let ids: Vec<u64> = cancel.iter().map(|&k| self.jobs[k].slurm_id).collect();
        for &k in &cancel {
            self.jobs[k].cancelled = Some("another cell of the matrix failed (fail-fast)");
        }
        // Signalled first (a running cell removes its containers), then ended for good.
        let _ = client::scancel(&ids, Some("TERM")).await;
        let _ = client::scancel(&ids, None).await;
    }

    /// The run was cancelled: each unended job once signalled (running) or cancelled
    /// (pending); past the grace period, all cancelled outright.
    async fn cancel_jobs(&mut self) {
        let open: Vec<u64> = self
            .jobs
            .iter()
            .filter(|j| j.done.is_none())
            .map(|j| j.slurm_id)
            .collect();
        match self.cancelling_since {
            None => {
                self.cancelling_since = Some(Instant::now());
                for job in self.jobs.iter_mut().filter(|j| j.done.is_none()) {
                    job.cancelled.get_or_insert("the run was cancelled");
                }
                let (running, pending): (Vec<&Tracked>, Vec<&Tracked>) = self
                    .jobs
                    .iter()
                    .filter(|j| j.done.is_none())
                    .partition(|j| j.node.is_some() || j.started);
                let running: Vec<u64> = running.iter().map(|j| j.slurm_id).collect();
                let pending: Vec<u64> = pending.iter().map(|j| j.slurm_id).collect();
                let _ = client::scancel(&pending, None).await;
                let _ = client::scancel(&running, Some("TERM")).await;
            }
            Some(since) if since.elapsed() > CANCEL_GRACE => {
                let _ = client::scancel(&open, None).await;
            }
            Some(_) => {}
        }
    }
}

/// The last lines Slurm kept of the batch script's own output: gpuflow's error when it could
/// not run the job at all.
fn slurm_output_tail(bundle: &Bundle, index: usize) -> Vec<String> {
    let path = bundle.job_dir(index).join("slurm.out");
    crate::run_logs::files::last_lines(&path, 5)
        .unwrap_or_default()
        .into_iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("slurm.out: {l}"))
        .collect()
}
