//! One planned job of a run, run alone: what a Slurm node does with the job Slurm placed on it
//! (`slurm/node.rs`). The jobs it needs ended elsewhere (their `needs` context is given) and
//! Slurm chose its GPUs (given, already leased on the node); everything else is as the
//! dispatcher runs a job: its `if:`, its steps, its clean-up, its events, the run's headline.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::readiness::{condition_holds, job_context, job_continue_on_error, needs_succeeded};
use super::run::{RunError, RunReport, clean_up, finish_run, start_run};
use crate::engine::engines::Engines;
use crate::engine::executor::{JobOutcome, run_job};
use crate::engine::job_gpus::GrantedGpus;
use crate::engine::options::RunOptions;
use crate::engine::preflight::PreflightReport;
use crate::events::{EventKind, EventSink, HeadlineSink, JobRef, JobResult, JobSummary};
use crate::expr::Value;
use crate::plan::Plan;
use crate::workflow::model::Workflow;

/// The job to run alone and what it is given.
pub struct Alone {
    /// Its number in the plan.
    pub index: usize,
    /// `needs.<job>.result` and `.outputs` of every job it needs, as they ended.
    pub needs: Value,
    /// The GPUs allocated to it, leased.
    pub gpus: GrantedGpus,
}

/// Runs job `alone.index` of `plan`: the run's events for it alone, and how it ended.
pub async fn run_alone(
    wf: Arc<Workflow>,
    plan: Plan,
    alone: Alone,
    opts: RunOptions,
    sink: Arc<dyn EventSink>,
    engines: Engines,
    cancel: CancellationToken,
) -> Result<(RunReport, JobOutcome), RunError> {
    let refused = crate::engine::preflight::check(&wf);
    if refused.has_errors() {
        return Err(RunError::Refused(refused));
    }
    let inputs = crate::engine::inputs::resolve(&wf, &opts.inputs).map_err(RunError::Input)?;
    let headline = Arc::new(HeadlineSink::new(sink));
    let mut one = plan.clone();
    let planned = one.jobs.swap_remove(alone.index);
    one.jobs = vec![planned.clone()];
    let shared = start_run(wf, &one, opts, &headline, engines, inputs);
    let jref = JobRef {
        job: planned.job_id.clone(),
        cell: planned.cell,
        display: planned.display_name.clone(),
    };
    let continue_on_error = &shared.wf.jobs[&planned.job_id].continue_on_error;
    let may_fail = job_continue_on_error(continue_on_error.as_ref(), &shared, &planned);
    let needs_ok = needs_succeeded(&planned, &alone.needs);
    let ctx = job_context(&shared, &planned, &alone.needs, needs_ok);
    let outcome = match condition_holds(&shared, &planned, &ctx, needs_ok) {
        Ok(true) => {
            if let Some(g) = &alone.gpus.leased {
                shared.emit(EventKind::GpusLeased {
                    job: jref.clone(),
                    indexes: g.devices.iter().map(|(i, _)| *i).collect(),
                    uuids: g.uuids(),
                    stand_in: g.stand_in,
                });
            }
            shared.emit(EventKind::JobStarted { job: jref.clone() });
            let token = cancel.child_token();
            run_job(
                shared.clone(),
                planned,
                jref.clone(),
                alone.needs,
                token,
                alone.gpus,
                None,
            )
            .await
        }
        Ok(false) => {
            let reason = if needs_ok {
                "its `if` condition is false"
            } else {
                "a job it needs did not succeed"
            };
            super::dispatch::finish_unstarted(&shared, &jref, JobResult::Skipped, reason);
            JobOutcome {
                result: JobResult::Skipped,
                ..JobOutcome::failed(None)
            }
        }
        Err(message) => {
            super::dispatch::finish_unstarted(&shared, &jref, JobResult::Failure, &message);
            JobOutcome::failed(Some(message))
        }
    };
    clean_up(&shared).await;
    let result = if cancel.is_cancelled() {
        JobResult::Cancelled
    } else {
        outcome.result
    };
    let summary = JobSummary {
        job: jref,
        result: outcome.result,
        duration: shared.started.elapsed(),
        failure_allowed: may_fail && outcome.result == JobResult::Failure,
    };
    let report = finish_run(
        &shared,
        &headline,
        result,
        vec![summary],
        PreflightReport::default(),
    );
    Ok((report, outcome))
}
