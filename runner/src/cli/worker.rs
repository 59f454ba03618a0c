//! `gpuflow worker`: runs the host's queued runs in queue order, several at once as far as
//! their GPUs fit (docs/triggers.md). Exit codes: 0 (idle for `--idle-exit`, or another worker
//! already runs), 4 (the queue or its folder cannot be used), 130 (stopped by SIGTERM/Ctrl-C;
//! the runs in flight are cancelled).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::diag::ExitCode;
use crate::trigger::GpuflowHome;
use crate::worker::run_loop::WorkerExit;
use crate::worker::{Worker, WorkerOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Leave after this long without a queued run (default: never).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub idle_exit: Option<Duration>,
    /// At most this many runs at once (default: as many as the machine has GPUs, at least 1).
    /// Runs start in queue order while their GPUs fit in those not held by runs in flight.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_runs: Option<u32>,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    // The worker's loop is one blocking thread, so the span stays entered for its whole life;
    // its runs' own lines carry the run span of their process.
    let _span = tracing::info_span!("worker", pid = std::process::id()).entered();
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signals(stop.clone());
    let opts = WorkerOptions {
        home: GpuflowHome::from_env(),
        gpuflow: std::env::current_exe()?,
        idle_exit: args.idle_exit,
        poll: Duration::from_millis(100),
        retry: Default::default(),
        max_runs: args.max_runs.map(|n| n as usize),
    };
    let say: Box<dyn Fn(&str)> = Box::new(|line| {
        println!(
            "{} {line}",
            humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        );
    });
    let worker = match Worker::start(opts, stop, say) {
        Ok(Ok(w)) => w,
        Ok(Err(WorkerExit::AlreadyRunning(pid))) => {
            let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
            eprintln!("a worker already runs{pid}: it takes the queued runs");
            return Ok(ExitCode::Success);
        }
        Ok(Err(_)) => return Ok(ExitCode::Success),
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::Infrastructure);
        }
    };
    match worker.run() {
        Ok(WorkerExit::Stopped) => Ok(ExitCode::Interrupted),
        Ok(_) => Ok(ExitCode::Success),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::Infrastructure)
        }
    }
}

/// The worker's loop is plain blocking code (its children must be spawned from one long-lived
/// thread); signals are watched on a thread of their own and only set `stop`.
fn stop_on_signals(stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            tracing::info!("SIGTERM or SIGINT: stopping");
            eprintln!("worker: stopping: cancelling the runs in flight");
            stop.store(true, Ordering::SeqCst);
        });
    });
}
