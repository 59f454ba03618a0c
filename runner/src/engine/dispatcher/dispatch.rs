//! The dispatcher's loop: one `select!` over what can happen while a run goes on (a job's
//! task ends, the run is cancelled, GPUs may have been freed), each answered by a small
//! handler; before each wait, every job run that became ready is started or ended. The loop
//! owns all scheduling state; job runs are tasks that report back through their join handles.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use super::gpu_start::{GPU_POLL, GpuStart, lease_gpus};
use super::readiness::{
    condition_holds, job_context, job_continue_on_error, needs_context, needs_succeeded,
};
use super::search::{Answer, Concluded, Decision, Searches, TrialEnd};
use crate::engine::executor::{JobOutcome, run_job};
use crate::engine::job_gpus::GrantedGpus;
use crate::engine::shared::Shared;
use crate::events::{EventKind, JobRef, JobResult, JobSummary};
use crate::expr::Value;
use crate::plan::PlannedJob;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    Done,
}

/// What a job run's task hands back: which run, how it ended, how long it took.
type Finished = (usize, JobOutcome, Duration);

/// What to do when no job runs.
enum Idle {
    /// Look again for jobs to start.
    Again,
    /// Every job run is done.
    Over,
}

/// The scheduling state of a run's jobs, owned by [`Dispatcher::dispatch`]'s loop.
pub(super) struct Dispatcher {
    shared: Arc<Shared>,
    runs: Vec<PlannedJob>,
    refs: Vec<JobRef>,
    cancel: CancellationToken,
    state: Vec<State>,
    results: Vec<Option<JobSummary>>,
    outputs: HashMap<String, IndexMap<String, String>>,
    fail_fast: HashMap<String, CancellationToken>,
    tasks: JoinSet<Finished>,
    // Which job run each task is, so a task that panicked (and so returned nothing) can still
    // be ended: without this its job stayed `Running` and the loop below spun forever.
    task_jobs: HashMap<tokio::task::Id, (usize, Instant)>,
    // Runs that are ready but wait for GPUs; each says so once (`job_waiting`).
    waiting: Vec<bool>,
    // Jobs the plan skipped (an empty matrix) count as skipped for those that need them.
    skipped_jobs: Vec<String>,
    // Jobs whose cells run only as a search needs them (`strategy.search`).
    searches: Searches,
    // The outputs of each probe, so the job's outputs can be the best cell's.
    probe_outputs: HashMap<usize, IndexMap<String, String>>,
}

impl Dispatcher {
    pub(super) fn new(
        shared: Arc<Shared>,
        runs: Vec<PlannedJob>,
        refs: Vec<JobRef>,
        skipped_jobs: Vec<String>,
        cancel: CancellationToken,
    ) -> Self {
        let count = runs.len();
        let groups: Vec<Option<String>> = refs
            .iter()
            .map(|r| shared.servers.group_of(r).map(String::from))
            .collect();
        let searches = Searches::new(&shared.wf, &runs, &groups);
        Self {
            searches,
            probe_outputs: HashMap::new(),
            shared,
            runs,
            refs,
            cancel,
            state: vec![State::Pending; count],
            results: vec![None; count],
            outputs: HashMap::new(),
            fail_fast: HashMap::new(),
            tasks: JoinSet::new(),
            task_jobs: HashMap::new(),
            waiting: vec![false; count],
            skipped_jobs,
        }
    }

    /// Runs every job run to its end; their summaries, in plan order.
    pub(super) async fn dispatch(mut self) -> Vec<JobSummary> {
        loop {
            self.start_ready().await;
            // GPUs freed by this run are seen when its job ends; those freed by other gpuflow
            // processes only by looking again.
            let gpu_wait = self.waits_for_gpus();
            if self.tasks.is_empty() {
                match self.when_nothing_runs(gpu_wait).await {
                    Idle::Again => continue,
                    Idle::Over => break,
                }
            }
            let cancel = self.cancel.clone();
            tokio::select! {
                joined = self.tasks.join_next() => {
                    if let Some(joined) = joined {
                        self.on_task_ended(joined);
                    }
                }
                // Cancelled: the next round ends the runs that have not started.
                () = cancel.cancelled(), if !cancel.is_cancelled() => {}
                () = tokio::time::sleep(GPU_POLL), if gpu_wait => {}
            }
        }
        self.results.into_iter().flatten().collect()
    }

    /// Starts (or ends without starting) every pending run whose needed jobs are done; first
    /// those whose server an earlier cell kept running for them. Servers no cell will adopt
    /// any more go first, so their GPUs are free for the runs that start.
    async fn start_ready(&mut self) {
        self.remove_unwanted_servers().await;
        let servers = self.shared.servers.clone();
        let mut order: Vec<usize> = (0..self.runs.len()).collect();
        order.sort_by_key(|&i| !servers.has_parked(&self.refs[i]));
        for i in order {
            if self.state[i] == State::Pending && self.needs_done(i) {
                self.try_start(i).await;
            }
        }
    }

    async fn remove_unwanted_servers(&self) {
        let unwanted = self.shared.servers.unwanted();
        if unwanted.is_empty() {
            return;
        }
        let registry = self.shared.servers.registry();
        for problem in crate::engine::warm_servers::retire(unwanted, registry).await {
            self.shared.emit(EventKind::Warning {
                job: None,
                message: format!("could not remove {problem}"),
            });
        }
    }

    /// Whether another cell of the run's server group runs now: the group's cells run one
    /// after another, each adopting the server the one before kept.
    fn server_group_busy(&self, i: usize) -> bool {
        let servers = &self.shared.servers;
        let Some(group) = servers.group_of(&self.refs[i]) else {
            return false;
        };
        (0..self.runs.len()).any(|j| {
            j != i
                && self.state[j] == State::Running
                && servers.group_of(&self.refs[j]) == Some(group)
        })
    }

    fn needs_done(&self, i: usize) -> bool {
        self.runs[i].needs.iter().all(|need| {
            self.runs
                .iter()
                .zip(&self.state)
                .filter(|(r, _)| &r.job_id == need)
                .all(|(_, s)| *s == State::Done)
        })
    }

    fn waits_for_gpus(&self) -> bool {
        (0..self.runs.len()).any(|i| self.state[i] == State::Pending && self.waiting[i])
    }

    /// A ready run: cancelled, held back by `max-parallel`, skipped or failed by its `if:`,
    /// waiting for GPUs, or started.
    async fn try_start(&mut self, i: usize) {
        let shared = self.shared.clone();
        let planned = &self.runs[i];
        let token = self
            .fail_fast
            .entry(planned.job_id.clone())
            .or_insert_with(|| self.cancel.child_token())
            .clone();
        if self.cancel.is_cancelled() || token.is_cancelled() {
            let reason = if self.cancel.is_cancelled() {
                "the run was cancelled"
            } else {
                "another cell of the matrix failed (fail-fast)"
            };
            self.end_unstarted(i, JobResult::Cancelled, reason);
            return;
        }
        if self.at_max_parallel(i) || self.server_group_busy(i) {
            return;
        }
        match self.searches.decide(i) {
            Decision::Run => {}
            Decision::Wait => return,
            Decision::Skip(reason) => {
                self.end_unstarted(i, JobResult::Skipped, &reason);
                if let Some(answer) = self.searches.skipped(i, &reason) {
                    self.on_search_answer(i, answer);
                }
                return;
            }
        }
        let needs = needs_context(
            planned,
            &self.runs,
            &self.results,
            &self.outputs,
            &self.skipped_jobs,
        );
        let needs_ok = needs_succeeded(planned, &needs);
        let ctx = job_context(&shared, planned, &needs, needs_ok);
        match condition_holds(&shared, planned, &ctx, needs_ok) {
            Ok(true) => {}
            Ok(false) => {
                let reason = if needs_ok {
                    "its `if` condition is false"
                } else {
                    "a job it needs did not succeed"
                };
                self.end_unstarted(i, JobResult::Skipped, reason);
                return;
            }
            Err(message) => {
                self.end_unstarted(i, JobResult::Failure, &message);
                return;
            }
        }
        match lease_gpus(&shared, planned, &ctx, &self.refs[i]).await {
            GpuStart::Go(gpus) => self.start(i, needs, token, gpus),
            GpuStart::Wait(reason) => self.wait_for_gpus(i, reason),
            GpuStart::Fail(message) => self.end_unstarted(i, JobResult::Failure, &message),
        }
    }

    /// Whether as many cells of the run's job run as its `max-parallel` allows.
    fn at_max_parallel(&self, i: usize) -> bool {
        let planned = &self.runs[i];
        let running = self
            .runs
            .iter()
            .zip(&self.state)
            .filter(|(r, s)| r.job_id == planned.job_id && **s == State::Running)
            .count();
        planned.max_parallel.is_some_and(|m| running >= m as usize)
    }

    /// The run waits for GPUs; it says so once.
    fn wait_for_gpus(&mut self, i: usize, reason: String) {
        if !self.waiting[i] {
            self.waiting[i] = true;
            self.shared.emit(EventKind::JobWaiting {
                job: self.refs[i].clone(),
                reason,
            });
        }
    }

    /// Starts the run as a task, with its GPUs leased.
    fn start(&mut self, i: usize, needs: Value, token: CancellationToken, gpus: GrantedGpus) {
        let jref = &self.refs[i];
        if let Some(g) = &gpus.leased {
            self.shared.emit(EventKind::GpusLeased {
                job: jref.clone(),
                indexes: g.devices.iter().map(|(i, _)| *i).collect(),
                uuids: g.uuids(),
                stand_in: g.stand_in,
            });
        }
        self.state[i] = State::Running;
        self.shared
            .emit(EventKind::JobStarted { job: jref.clone() });
        let (shared, planned, jref) = (self.shared.clone(), self.runs[i].clone(), jref.clone());
        let budget = self.searches.budget(i);
        let task = self.tasks.spawn(async move {
            let started = Instant::now();
            let outcome = run_job(shared, planned, jref, needs, token, gpus, budget).await;
            (i, outcome, started.elapsed())
        });
        self.task_jobs.insert(task.id(), (i, Instant::now()));
    }

    /// A run that never starts: told, and done with `result`.
    fn end_unstarted(&mut self, i: usize, result: JobResult, reason: &str) {
        finish_unstarted(&self.shared, &self.refs[i], result, reason);
        self.shared.servers.settled(&self.refs[i]);
        self.state[i] = State::Done;
        self.results[i] = Some(summary(&self.refs[i], result, false));
    }

    /// Nothing runs: the run is over, or it waits for GPUs, or (a state nothing will change)
    /// it is cancelled and ended.
    async fn when_nothing_runs(&mut self, gpu_wait: bool) -> Idle {
        if self.state.iter().all(|s| *s == State::Done) {
            return Idle::Over;
        }
        if gpu_wait && !self.cancel.is_cancelled() {
            tokio::select! {
                () = tokio::time::sleep(GPU_POLL) => {}
                () = self.cancel.cancelled() => {}
            }
            return Idle::Again;
        }
        // Nothing runs and nothing can start: only cancellation can change that. It cannot
        // happen for a valid plan, but a wait here would hang the run.
        if !self.cancel.is_cancelled() {
            self.cancel.cancel();
            return Idle::Again;
        }
        // Cancelled and still not done: a job run is in a state nothing will change (a
        // bug). End it rather than loop forever without yielding (which also starved
        // the Ctrl-C handler).
        for i in 0..self.runs.len() {
            if self.state[i] != State::Done {
                self.end_unstarted(i, JobResult::Cancelled, "the run was cancelled");
            }
        }
        Idle::Over
    }

    /// A job run's task ended: with its outcome, or lost (a panic).
    fn on_task_ended(&mut self, joined: Result<Finished, JoinError>) {
        let finished = match joined {
            Ok(done) => {
                self.task_jobs.retain(|_, (j, _)| *j != done.0);
                done
            }
            Err(e) => match self.on_task_lost(e) {
                Some(lost) => lost,
                None => return,
            },
        };
        self.on_job_finished(finished);
    }

    /// A task that returned nothing: its job run failed.
    fn on_task_lost(&mut self, e: JoinError) -> Option<Finished> {
        // A panic outside any step (steps contain their own) is a bug in gpuflow: the
        // job fails with the panic's message, and the run goes on and ends; what the job
        // started is removed by the run's clean-up below.
        let (i, started) = self.task_jobs.remove(&e.id())?;
        let why = if e.is_panic() {
            crate::engine::panic_text::panic_text(e.into_panic().as_ref())
        } else {
            "its task was stopped".to_string()
        };
        self.shared.emit(EventKind::Warning {
            job: Some(self.refs[i].clone()),
            message: format!(
                "the job failed: gpuflow panicked: {why} (help: this is a bug in gpuflow; please report it with this message and the workflow)"
            ),
        });
        self.shared.emit(EventKind::JobFinished {
            job: self.refs[i].clone(),
            result: JobResult::Failure,
            duration: started.elapsed(),
            failure: Some(format!("gpuflow panicked: {why}")),
        });
        let outcome = JobOutcome::failed(Some(format!("gpuflow panicked: {why}")));
        Some((i, outcome, started.elapsed()))
    }

    /// A job run ended: its failure allowed or spread (fail-fast), its outputs kept for the
    /// jobs that need it.
    fn on_job_finished(&mut self, (i, outcome, duration): Finished) {
        let planned = &self.runs[i];
        let job = &self.shared.wf.jobs[&planned.job_id];
        let probe = self.searches.is_probe(i);
        let allowed = outcome.result == JobResult::Failure
            && (probe
                || job_continue_on_error(job.continue_on_error.as_ref(), &self.shared, planned));
        if allowed && !probe {
            self.shared.emit(EventKind::Warning {
                job: Some(self.refs[i].clone()),
                message: "the job failed; `continue-on-error` lets the run go on".into(),
            });
        }
        if outcome.result == JobResult::Failure
            && !allowed
            && planned.fail_fast
            && planned.cells > 1
            && let Some(t) = self.fail_fast.get(&planned.job_id)
        {
            t.cancel();
        }
        if probe {
            self.probe_outputs.insert(i, outcome.outputs.clone());
        }
        self.outputs
            .entry(planned.job_id.clone())
            .or_default()
            .extend(outcome.outputs.clone());
        self.state[i] = State::Done;
        self.shared.servers.settled(&self.refs[i]);
        self.results[i] = Some(JobSummary {
            job: self.refs[i].clone(),
            result: outcome.result,
            duration,
            failure_allowed: allowed,
        });
        if probe {
            let end = self.trial_end(i, &outcome);
            if let Some(answer) = self.searches.record(i, end) {
                self.on_search_answer(i, answer);
            }
        }
    }

    /// How a search's run ended: its failure, and what its scored benchmark measured.
    fn trial_end(&self, i: usize, outcome: &JobOutcome) -> TrialEnd {
        let (metrics, measured) = match self.searches.scored_step(i) {
            Some(key) => super::trial_metrics::read(outcome, key, &self.shared.opts.store),
            None => Default::default(),
        };
        TrialEnd {
            failure: (outcome.result != JobResult::Success)
                .then(|| outcome.failure.clone().unwrap_or_default()),
            metrics,
            measured,
        }
    }

    /// A search's run ended (`last`) and its round or the search with it: said in its log;
    /// the cells a halving keeps queued again as new runs.
    fn on_search_answer(&mut self, last: usize, answer: Answer) {
        match answer {
            Answer::Concluded(concluded) => self.conclude_search(last, concluded),
            Answer::Round {
                summary,
                again,
                label,
            } => {
                self.say(last, summary);
                for previous in again {
                    let run = self.queue_again(previous, &label);
                    self.searches.enlist(previous, run);
                }
            }
        }
    }

    /// A new run of the cell run `previous` ran, named with `label` (`tune (4), round 2`):
    /// the same planned job and cell (its host and server group), its own log folder.
    fn queue_again(&mut self, previous: usize, label: &str) -> usize {
        let planned = self.runs[previous].clone();
        let jref = JobRef {
            display: format!("{}, {label}", planned.display_name),
            ..self.refs[previous].clone()
        };
        self.shared.emit(EventKind::JobQueued {
            job: jref.clone(),
            matrix: crate::engine::evaluate::matrix_text(&planned),
            needs: planned.needs.clone(),
        });
        self.runs.push(planned);
        self.refs.push(jref);
        self.state.push(State::Pending);
        self.results.push(None);
        self.waiting.push(false);
        self.runs.len() - 1
    }

    fn say(&self, i: usize, text: String) {
        self.shared.emit(EventKind::LogLine {
            job: self.refs[i].clone(),
            step: None,
            container: None,
            stream: crate::events::Stream::Runner,
            text,
        });
    }

    /// A search ended: said in the last probe's log, its answer the job's outputs `best`
    /// (…), and the job's outputs those of the best cell (not of the probe that happened to
    /// end last); a search that found no cell fails the run (its last probe counts as
    /// failed).
    fn conclude_search(&mut self, last_probe: usize, concluded: Concluded) {
        self.say(last_probe, concluded.summary);
        let outputs = self.outputs.entry(concluded.job_id).or_default();
        match concluded.best {
            Some(best) => {
                outputs.extend(
                    self.probe_outputs
                        .get(&best.run)
                        .cloned()
                        .unwrap_or_default(),
                );
                outputs.extend(best.outputs);
                outputs.insert("best-cell".into(), self.runs[best.run].display_name.clone());
            }
            None => {
                if let Some(summary) = self.results[last_probe].as_mut() {
                    summary.failure_allowed = false;
                    // A halving whose cells all ran but none qualified: the run still fails.
                    summary.result = JobResult::Failure;
                }
            }
        }
    }
}

pub(super) fn summary(job: &JobRef, result: JobResult, allowed: bool) -> JobSummary {
    JobSummary {
        job: job.clone(),
        result,
        duration: Duration::ZERO,
        failure_allowed: allowed,
    }
}

/// A run that never starts still ends: `job_skipped` (or `job_cannot_run`, for a failure) says
/// why, `job_finished` gives its result, so every queued run gets exactly one `job_finished`.
pub(super) fn finish_unstarted(shared: &Shared, job: &JobRef, result: JobResult, reason: &str) {
    // A job that fails without starting is not "skipped": it says once that it cannot run.
    shared.emit(if result == JobResult::Failure {
        EventKind::JobCannotRun {
            job: job.clone(),
            reason: reason.into(),
        }
    } else {
        EventKind::JobSkipped {
            job: job.clone(),
            reason: reason.into(),
        }
    });
    shared.emit(EventKind::JobFinished {
        job: job.clone(),
        result,
        duration: Duration::ZERO,
        failure: None,
    });
}
