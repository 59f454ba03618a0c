//! `gpuflow __wait-for-signal`: a hidden test hook, not a user command. It installs the same
//! signal handling `gpuflow run` uses ([`crate::signal::cancel_on_signals`]), prints `ready`,
//! and waits: the first SIGINT/SIGTERM cancels (it then pretends to clean up for
//! `--cleanup-secs`), a second forces, and it exits with the documented 130. Tests send real
//! signals to it (runner/tests/signals.rs), since a test process cannot safely signal itself.

use std::io::Write;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::diag::ExitCode;
use crate::signal::{Escalation, SignalEvent, SignalHandlerKind, cancel_on_signals};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long the pretended clean-up takes after the first signal.
    #[arg(long, default_value_t = 0)]
    pub cleanup_secs: u64,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let runtime = super::hosts::runtime()?;
    runtime.block_on(async {
        let cancel = CancellationToken::new();
        let shutdown = cancel_on_signals(
            SignalHandlerKind::Standard,
            cancel.clone(),
            |SignalEvent::Shutdown { signal, count }, escalation| {
                let what = match escalation {
                    Escalation::Cancel => "cancelling (again to force)",
                    Escalation::Force => "forcing",
                    Escalation::Exit => "exiting",
                };
                eprintln!("received {signal} (#{count}): {what}");
            },
        )?;
        println!("ready");
        std::io::stdout().flush()?;
        cancel.cancelled().await;
        let signal = shutdown.signal().map_or("?", |s| s.name());
        println!("cancelled by {signal}");
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(args.cleanup_secs)) => println!("cleaned up"),
            () = shutdown.force.cancelled() => println!("forced"),
        }
        Ok(shutdown.exit_code().unwrap_or(ExitCode::Interrupted))
    })
}
