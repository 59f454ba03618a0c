//! One job run from start to end: its private working folder, its contexts and timeout, its
//! containers, its steps, its outputs; then clean-up, `job_finished`, and only then its GPUs
//! given back.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use super::job_run::{JobRun, Scope, Shortened};
use super::timeout::Timeout;
use crate::engine::host::HostRunner;
use crate::engine::job_gpus::GrantedGpus;
use crate::engine::shared::Shared;
use crate::events::{EventKind, JobRef, JobResult};
use crate::expr::{JobStatus, Value};
use crate::plan::PlannedJob;
use crate::workflow::model::Job;

/// How a job run ended, and the outputs it passes to the jobs that need it.
#[derive(Clone, Debug)]
pub struct JobOutcome {
    pub result: JobResult,
    pub outputs: IndexMap<String, String>,
    /// Why its first failed step failed, in the words its log has.
    pub failure: Option<String>,
    /// The outputs of each of the job's own steps, by position (`3`).
    pub step_outputs: IndexMap<String, IndexMap<String, String>>,
    /// The benchmark results the job run recorded.
    pub recorded: Vec<crate::steps::Recorded>,
}

impl JobOutcome {
    /// A job run that ended with nothing to show.
    pub fn failed(failure: Option<String>) -> Self {
        Self {
            result: JobResult::Failure,
            outputs: IndexMap::new(),
            failure,
            step_outputs: IndexMap::new(),
            recorded: Vec::new(),
        }
    }
}

/// Runs one job run to its end; never fails (a problem is a failed step or job, said through
/// events).
#[tracing::instrument(name = "job", skip_all, fields(run = %shared.opts.run_id, job = %jref.job, cell = jref.cell))]
pub async fn run_job(
    shared: Arc<Shared>,
    planned: PlannedJob,
    jref: JobRef,
    needs: Value,
    cancel: CancellationToken,
    gpus: GrantedGpus,
    budget: Option<Shortened>,
) -> JobOutcome {
    let started = Instant::now();
    let job = shared.wf.jobs[&planned.job_id].clone();
    let temp = job_temp_dir(&shared, &jref);
    let temp_made = temp.is_ok();
    let mut run = JobRun::new(
        &shared,
        &planned,
        &jref,
        temp.clone().unwrap_or_default(),
        cancel,
        gpus,
    );
    run.budget = budget;
    let outcome = match temp.and_then(|_| run.setup(&planned, &job, needs)) {
        Err(message) => {
            run.say(None, &message);
            JobOutcome::failed(None)
        }
        Ok(minutes) => run.run_body(&job, minutes).await,
    };
    run.clean_up().await;
    let gpus = run.gpus.take();
    if temp_made {
        let _ = tokio::fs::remove_dir_all(&run.temp).await;
    }
    shared.emit(EventKind::JobFinished {
        job: jref,
        result: outcome.result,
        duration: started.elapsed(),
        failure: outcome.failure.clone(),
    });
    // Only now, with its containers gone and its end told, may another job have its GPUs:
    // no `job_started` of a job on these GPUs comes before this one's `job_finished`. Awaited:
    // on a shared engine they are free for other machines too once this returns.
    if let Some(gpus) = gpus {
        gpus.release().await;
    }
    outcome
}

/// The job run's working folder, or why it could not be made.
fn job_temp_dir(shared: &Shared, jref: &JobRef) -> Result<PathBuf, String> {
    // A new private folder each time (crate::local_dirs): a predictable path another local
    // user made first would own the scripts written and run there.
    crate::local_dirs::private_dir(
        &crate::local_dirs::runtime_base(),
        &format!(
            "gpuflow-{}-{}-{}",
            shared.opts.run_id,
            crate::run_logs::slug(&jref.job),
            jref.cell + 1
        ),
    )
    .map_err(|e| {
        format!(
            "could not make the job's working folder in `{}`: {e} (set TMPDIR to a folder you can write)",
            crate::local_dirs::runtime_base().display()
        )
    })
}

impl JobRun {
    fn new(
        shared: &Arc<Shared>,
        planned: &PlannedJob,
        jref: &JobRef,
        temp: PathBuf,
        cancel: CancellationToken,
        gpus: GrantedGpus,
    ) -> Self {
        Self {
            host: HostRunner::new(temp.join("host"), &shared.opts.workspace, shared.opts.grace),
            shared: shared.clone(),
            job_id: planned.job_id.clone(),
            jref: jref.clone(),
            contexts: IndexMap::new(),
            env: IndexMap::new(),
            status: JobStatus::Success,
            cancel: cancel.child_token(),
            containers: None,
            job_container: None,
            temp,
            recorded: Vec::new(),
            gpus: gpus.leased,
            asked_gpus: gpus.asked,
            failure: None,
            budget: None,
            step_outputs: IndexMap::new(),
        }
    }

    /// Containers, then steps, under the job's timeout; the job's result and outputs.
    async fn run_body(&mut self, job: &Job, minutes: f64) -> JobOutcome {
        let timeout = Timeout::start(minutes, self.cancel.clone());
        let mut outputs = IndexMap::new();
        if let Err(message) = self.start_containers(job).await {
            self.say(None, &message);
            self.failure = Some(message);
            self.status = JobStatus::Failure;
        } else {
            let mut scope = Scope {
                steps: IndexMap::new(),
                inputs: None,
                prefix: String::new(),
                file: self.shared.wf.file.clone(),
                caller: None,
            };
            self.run_steps(&job.steps, &mut scope).await;
            outputs = self.job_outputs(job, &scope);
        }
        let result = if timeout.fired() {
            self.say(None, &timeout.message("job"));
            JobResult::Failure
        } else if self.cancel.is_cancelled() {
            JobResult::Cancelled
        } else if self.status == JobStatus::Failure {
            JobResult::Failure
        } else {
            JobResult::Success
        };
        timeout.stop();
        JobOutcome {
            result,
            outputs,
            failure: self.failure.take(),
            step_outputs: std::mem::take(&mut self.step_outputs),
            recorded: self.recorded.clone(),
        }
    }
}
