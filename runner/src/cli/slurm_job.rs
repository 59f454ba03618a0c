//! `gpuflow slurm-job RUN_FOLDER N`: what the batch script of a run on a Slurm cluster runs on
//! the node Slurm placed job N on (docs/slurm.md). Not for people: the coordinator submits it.
//! Exit 0 when the job succeeded, was skipped or its failure is allowed (its dependants may
//! run), 1 when it failed (Slurm then cancels the jobs that need it), 130 when cancelled.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::diag::{ExitCode, RenderOptions};
use crate::events::JobResult;
use crate::signal::{SignalHandlerKind, cancel_on_signals};
use crate::slurm::node::NodeJob;
use crate::ui::PlainView;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run's folder on the cluster's shared folder.
    pub run_dir: PathBuf,
    /// The job's number in the run's plan.
    pub job: usize,
}

pub fn run(args: &Args, render: RenderOptions) -> anyhow::Result<ExitCode> {
    let node_job = match NodeJob::open(&args.run_dir, args.job) {
        Ok(job) => job,
        Err(why) => {
            eprintln!("error: {why}");
            return Ok(ExitCode::Failure);
        }
    };
    let file = node_job.manifest.workflow.clone();
    let wf = match super::run::runnable_workflow(&file, render) {
        Ok(wf) => wf,
        Err(_) => return Ok(ExitCode::Failure),
    };
    let plan = super::run::plan_jobs(&wf, &file)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let cancel = CancellationToken::new();
        // scancel --signal=TERM: the steps stop, `always()` steps run, containers go.
        let _shutdown = cancel_on_signals(SignalHandlerKind::Standard, cancel.clone(), |_, _| {
            eprintln!("gpuflow slurm-job: signalled; cancelling the job");
        })?;
        // What Slurm keeps as the batch script's output: the job's lines, plainly.
        let view = Arc::new(PlainView::new(std::io::stdout()));
        match node_job
            .run(Arc::new(*wf), plan, view, cancel.clone())
            .await
        {
            Ok(end) if cancel.is_cancelled() || end.result == JobResult::Cancelled => {
                Ok(ExitCode::Interrupted)
            }
            Ok(end) if end.result == JobResult::Failure && !end.failure_allowed => {
                Ok(ExitCode::Failure)
            }
            Ok(_) => Ok(ExitCode::Success),
            Err(why) => {
                eprintln!("error: {why}");
                Ok(ExitCode::Failure)
            }
        }
    })
}
