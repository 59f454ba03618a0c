//! `gpuflow cancel RUN`: a queued run never starts; a running one is stopped by its worker
//! as Ctrl-C would stop `gpuflow run` (steps stopped, `always()` steps run, containers
//! removed). Exit codes: 0 (cancelled or asked to stop), 1 (it had already ended), 2 (no such
//! run).

use crate::diag::{ExitCode, RenderOptions};
use crate::trigger::{CancelOutcome, RunState};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run's id (or the start of it).
    pub run: String,
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let mut queue = match super::runs::open_queue(render_opts) {
        Ok(q) => q,
        Err(code) => return Ok(code),
    };
    let run = match super::runs::find_run(&queue, &args.run, render_opts) {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    Ok(match queue.cancel(&run.id)? {
        Some(CancelOutcome::Dequeued) => {
            println!("run {}: cancelled before it started", run.id);
            ExitCode::Success
        }
        Some(CancelOutcome::Requested) if run.state == RunState::Queued => {
            // It was queued when looked up, and a worker claimed it before the cancel.
            println!(
                "run {}: it had just started: cancelling it (`gpuflow logs {} -f` to watch)",
                run.id, run.id
            );
            ExitCode::Success
        }
        Some(CancelOutcome::Requested) => {
            println!(
                "run {}: its worker is stopping it (`gpuflow logs {} -f` to watch)",
                run.id, run.id
            );
            ExitCode::Success
        }
        Some(CancelOutcome::AlreadyFinished(state)) => {
            eprintln!("run {} already ended: {}", run.id, state.as_str());
            ExitCode::Failure
        }
        None => ExitCode::Usage,
    })
}
