//! A run from its start to its end: refused before anything starts when a step cannot run or
//! the inputs do not fit; then the run's shared state (every event masked before any sink
//! sees it), its jobs queued, preflight, the jobs dispatched; then its result, the clean-up
//! sweep, `run_finished` and the headline, and the [`RunReport`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::base_contexts::base_contexts;
use super::dispatch::{Dispatcher, finish_unstarted, summary};
use crate::diag::{Diagnostics, ExitCode};
use crate::engine::engines::Engines;
use crate::engine::options::RunOptions;
use crate::engine::preflight::PreflightReport;
use crate::engine::registry_logins::registry_logins;
use crate::engine::server_groups;
use crate::engine::server_pool::ServerPool;
use crate::engine::shared::Shared;
use crate::events::{
    EventKind, EventSink, Headline, HeadlineSink, JobRef, JobResult, JobSummary, Masker,
    MaskingSink,
};
use crate::expr::Value;
use crate::plan::{Plan, PlannedJob};
use crate::workflow::model::Workflow;

/// How a run ended.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub run_id: String,
    pub result: JobResult,
    pub jobs: Vec<JobSummary>,
    pub log_dir: PathBuf,
    /// What ran before any job started.
    pub preflight: PreflightReport,
    /// Hosts whose engine could not be reached when a job needed it, each with why.
    pub unreachable: Vec<String>,
    /// The run's answer: benchmark figures, verdicts, reports (also its last event).
    pub headline: Headline,
}

impl RunReport {
    /// The documented exit code: 0, 1 (a job failed), 4 (a host's engine could not be
    /// reached), 130 (cancelled).
    pub fn exit_code(&self) -> ExitCode {
        if self.result == JobResult::Failure && !self.unreachable.is_empty() {
            return ExitCode::Infrastructure;
        }
        match self.result {
            JobResult::Success | JobResult::Skipped => ExitCode::Success,
            JobResult::Failure => ExitCode::Failure,
            JobResult::Cancelled => ExitCode::Interrupted,
        }
    }
}

/// Why a run did not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Steps the engine cannot run, found before anything started.
    #[error("the workflow uses steps that cannot run yet")]
    Refused(Diagnostics),
    /// `--input` values that do not fit the workflow's inputs.
    #[error("{}", .0.message)]
    Input(crate::engine::inputs::InputError),
}

/// Runs `plan` (of `wf`) to its end. Nothing starts when the workflow uses a step the engine
/// cannot run or the inputs do not fit. `cancel` stops the run: running steps are stopped,
/// `always()` steps run, containers go, and the result is `cancelled`.
#[tracing::instrument(name = "run", skip_all, fields(run = %opts.run_id))]
pub async fn run(
    wf: Arc<Workflow>,
    plan: Plan,
    opts: RunOptions,
    sink: Arc<dyn EventSink>,
    engines: impl Into<Engines>,
    cancel: CancellationToken,
) -> Result<RunReport, RunError> {
    let refused = crate::engine::preflight::check(&wf);
    if refused.has_errors() {
        return Err(RunError::Refused(refused));
    }
    let inputs = crate::engine::inputs::resolve(&wf, &opts.inputs).map_err(RunError::Input)?;
    let headline = Arc::new(HeadlineSink::new(sink));
    let shared = start_run(wf, &plan, opts, &headline, engines.into(), inputs);
    let runs = plan.jobs;
    let refs = queue(&shared, &runs);
    // Before anything long starts: the checks whose answers cannot change by their step.
    let preflight = crate::engine::preflight::run(&shared, &runs, &refs, &cancel).await;
    if !preflight.passed() || shared.opts.preflight_only {
        let (result, jobs) = end_after_preflight(&shared, &preflight, &refs);
        return Ok(finish_run(&shared, &headline, result, jobs, preflight));
    }
    // Jobs the plan skipped (an empty matrix) count as skipped for those that need them.
    let skipped_jobs: Vec<String> = plan.skipped.iter().map(|s| s.job_id.clone()).collect();
    let jobs = Dispatcher::new(shared.clone(), runs, refs, skipped_jobs, cancel.clone())
        .dispatch()
        .await;
    let result = run_result(&jobs, &cancel);
    clean_up(&shared).await;
    Ok(finish_run(&shared, &headline, result, jobs, preflight))
}

/// The run's images, pulled and run by the digests `gpuflow.lock` pins; why the pins were not
/// read, when they could not be.
fn run_images(workspace: &std::path::Path) -> (crate::backend::RunImages, Option<String>) {
    let images = crate::backend::RunImages::default();
    let path = workspace.join(crate::actions::LOCK_FILE);
    match crate::actions::LockFile::read(&path) {
        Ok(lock) if lock.images.is_empty() => (images, None),
        Ok(lock) => (images.with_pins(Arc::new(lock)), None),
        Err(e) => (
            images,
            Some(format!(
                "the image pins of `{}` are not used: {}",
                path.display(),
                e.message
            )),
        ),
    }
}

/// The run's shared state, and `run_started` said.
pub(super) fn start_run(
    wf: Arc<Workflow>,
    plan: &Plan,
    opts: RunOptions,
    headline: &Arc<HeadlineSink>,
    engines: Engines,
    inputs: Value,
) -> Arc<Shared> {
    let masker = Arc::new(Masker::new(opts.secrets.values().cloned()));
    let (images, pins_unread) = run_images(&opts.workspace);
    // Every event is masked before any sink (the headline's included) sees it: the one place
    // secrets are taken out of what the run shows and stores (docs/running.md#secrets).
    let masked: Arc<dyn EventSink> = Arc::new(MaskingSink::new(headline.clone(), masker.clone()));
    let base = base_contexts(&wf, plan, &opts, inputs);
    // Kept containers (`--keep-containers`) are never handed to another cell: no groups.
    let groups = if opts.keep_containers {
        Default::default()
    } else {
        server_groups::groups(&wf, &plan.jobs, &base)
    };
    let servers = Arc::new(ServerPool::new(groups).with_registry(opts.warm_registry.clone()));
    let mut engines = engines;
    engines.set_logins(registry_logins(&opts));
    let shared = Arc::new(Shared {
        servers,
        wf,
        sink: masked,
        masker,
        engines,
        started: Instant::now(),
        base,
        opts,
        images,
    });
    if let Some(why) = pins_unread {
        shared.emit(EventKind::Warning {
            job: None,
            message: why,
        });
    }
    shared.emit(EventKind::RunStarted {
        run_id: shared.opts.run_id.clone(),
        workflow: plan.workflow.clone(),
        log_dir: shared.opts.log_dir.display().to_string(),
        jobs: plan.jobs.len(),
    });
    shared
}

/// Every job run of the plan, queued (`job_queued`).
fn queue(shared: &Shared, runs: &[PlannedJob]) -> Vec<JobRef> {
    let refs: Vec<JobRef> = runs
        .iter()
        .map(|r| JobRef {
            job: r.job_id.clone(),
            cell: r.cell,
            display: r.display_name.clone(),
        })
        .collect();
    for (r, planned) in refs.iter().zip(runs) {
        shared.emit(EventKind::JobQueued {
            job: r.clone(),
            matrix: crate::engine::evaluate::matrix_text(planned),
            needs: planned.needs.clone(),
        });
    }
    refs
}

/// A run that ends after preflight (a check failed, or only preflight was asked for): every
/// job skipped; the run's result and its jobs.
fn end_after_preflight(
    shared: &Shared,
    preflight: &PreflightReport,
    refs: &[JobRef],
) -> (JobResult, Vec<JobSummary>) {
    let (result, reason) = if preflight.passed() {
        (
            JobResult::Success,
            "only the preflight checks were asked for (--preflight-only)",
        )
    } else {
        (
            JobResult::Failure,
            "a preflight check failed; nothing was started",
        )
    };
    for r in refs {
        finish_unstarted(shared, r, JobResult::Skipped, reason);
    }
    let jobs = refs
        .iter()
        .map(|r| summary(r, JobResult::Skipped, false))
        .collect();
    (result, jobs)
}

/// The run's result from its jobs'.
fn run_result(jobs: &[JobSummary], cancel: &CancellationToken) -> JobResult {
    if cancel.is_cancelled() {
        JobResult::Cancelled
    } else if jobs
        .iter()
        .any(|j| j.result == JobResult::Failure && !j.failure_allowed)
    {
        JobResult::Failure
    } else if jobs.iter().any(|j| j.result == JobResult::Cancelled) {
        // A cell cancelled by fail-fast: its sibling's failure already failed the run, unless
        // that failure was allowed.
        JobResult::Failure
    } else {
        JobResult::Success
    }
}

/// The run's servers kept warm or removed, then whatever of the run is left on any host.
pub(super) async fn clean_up(shared: &Shared) {
    let registry = shared.servers.registry();
    for problem in crate::engine::warm_servers::retire(shared.servers.drain(), registry).await {
        shared.emit(EventKind::Warning {
            job: None,
            message: format!("could not remove {problem}"),
        });
    }
    remove_leftovers(shared).await;
}

/// The run's containers left on any host, removed (unless they are to be kept; its GPU lease
/// containers always).
async fn remove_leftovers(shared: &Shared) {
    // GPU lease containers, whatever `--keep-containers` says: they hold GPUs from other
    // machines, and the run is over.
    for (host, docker) in shared.engines.connected() {
        if let Err(e) = docker.remove_run_leases(&shared.opts.run_id).await {
            shared.emit(EventKind::Warning {
                job: None,
                message: format!(
                    "could not remove the run's GPU lease containers on `{host}`: {e}"
                ),
            });
        }
    }
    if shared.opts.keep_containers {
        return;
    }
    // Each job removed its own; this catches what a failed removal or a crash left, but the
    // servers kept warm for later runs.
    let warm: Vec<String> = shared
        .servers
        .registry()
        .map(|r| r.list(None).into_iter().map(|e| e.container).collect())
        .unwrap_or_default();
    for (host, docker) in shared.engines.connected() {
        if let Err(e) = docker.remove_run_except(&shared.opts.run_id, &warm).await {
            shared.emit(EventKind::Warning {
                job: None,
                message: format!("could not remove the run's containers on `{host}`: {e}"),
            });
        }
    }
}

/// `run_finished`, then the headline; the run's report.
pub(super) fn finish_run(
    shared: &Shared,
    headline: &HeadlineSink,
    result: JobResult,
    jobs: Vec<JobSummary>,
    preflight: PreflightReport,
) -> RunReport {
    shared.emit(EventKind::RunFinished {
        run_id: shared.opts.run_id.clone(),
        result,
    });
    let headline = end_with_headline(shared, headline, result);
    masked_report(
        &shared.masker,
        RunReport {
            run_id: shared.opts.run_id.clone(),
            result,
            jobs,
            log_dir: shared.opts.log_dir.clone(),
            preflight,
            unreachable: shared.engines.failures(),
            headline,
        },
    )
}

/// `report` with the texts `gpuflow run` prints of it masked, as its events are: the jobs'
/// names in the closing summary hold matrix values and evaluated `name:`s, the unreachable
/// hosts their engines' errors. The headline came through the masking sink already; the run's
/// id and folder are paths, left as they are.
fn masked_report(masker: &Masker, mut report: RunReport) -> RunReport {
    for j in &mut report.jobs {
        j.job.job = masker.mask(&j.job.job);
        j.job.display = masker.mask(&j.job.display);
    }
    for u in &mut report.unreachable {
        *u = masker.mask(u);
    }
    report
}

/// The run's last event: its headline, from what the steps said on the way.
fn end_with_headline(shared: &Shared, sink: &HeadlineSink, result: JobResult) -> Headline {
    let headline = sink.headline(
        &shared.opts.run_id,
        result,
        &shared.opts.log_dir.display().to_string(),
    );
    shared.emit(EventKind::RunHeadline(headline.clone()));
    headline
}
