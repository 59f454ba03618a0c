//! `gpuflow serve`: the node's web page (docs/serve.md) — runs, a run live, GPUs, history,
//! comparisons — and the same as JSON. Exit codes: 130 (stopped by Ctrl-C/SIGTERM, its only
//! way to end), 2 (a bad argument: no token beyond loopback, an unreadable token or secrets
//! file), 4 (the address cannot be listened on).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::hosts::ConfigArg;
use super::store_path::StoreArgs;
use crate::diag::{Diagnostic, ExitCode, RenderOptions, render};
use crate::events::Masker;
use crate::serve::{Settings, Token, access};
use crate::signal::{SignalHandlerKind, cancel_on_signals};
use crate::trigger::GpuflowHome;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to listen. Beyond the loopback interface a token is required (`--token-file`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8470")]
    pub listen: SocketAddr,

    /// A file (mode 600) whose first line is the token that cancelling a run needs; without
    /// it the server is read-only.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// The folder whose `.gpuflow/runs/` holds runs started by hand (default: here).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,

    /// A secret (read from the environment variable of that name) masked in everything
    /// served, as a run masks it (repeatable).
    #[arg(long = "secret", value_name = "NAME")]
    pub secrets: Vec<String>,

    /// A file of `NAME=VALUE` lines, each a secret to mask.
    #[arg(long, value_name = "FILE")]
    pub secrets_file: Option<PathBuf>,

    #[command(flatten)]
    pub store: StoreArgs,

    #[command(flatten)]
    pub config: ConfigArg,
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let usage = |message: String, hint: &str| {
        eprintln!(
            "{}",
            render(
                &Diagnostic::unlocated(message).hint(hint.to_string()),
                render_opts
            )
        );
        Ok(ExitCode::Usage)
    };
    let token = match &args.token_file {
        Some(path) => match Token::read(path) {
            Ok(t) => Some(t),
            Err(e) => return usage(e, "the token is any secret text of 32 characters or more"),
        },
        None => None,
    };
    if let Some(refusal) = access::listen_refusal(&args.listen, token.as_ref()) {
        return usage(refusal, "docs/serve.md, \"Access\"");
    }
    let secrets = match super::run::read_secrets(&args.secrets, args.secrets_file.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            return usage(
                e,
                "`--secret NAME` reads the variable NAME; `--secrets-file` takes NAME=VALUE lines",
            );
        }
    };
    crate::diag_log::hide(secrets.values().map(String::as_str));
    let cwd = std::env::current_dir()?;
    let project = args.project.clone().unwrap_or_else(|| cwd.clone());
    let store = args
        .store
        .path
        .clone()
        .unwrap_or_else(|| crate::store::default_path(&project));
    let writable = token.is_some();
    let settings = Settings {
        home: GpuflowHome::from_env(),
        project,
        store,
        hosts_file: args.config.config.clone(),
        token,
        masker: Arc::new(Masker::new(secrets.into_values())),
    };
    let runtime = super::hosts::runtime()?;
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!(
                    "{}",
                    render(
                        &Diagnostic::unlocated(format!("cannot listen on {}: {e}", args.listen))
                            .hint("another program may hold the port: choose another with `--listen 127.0.0.1:PORT`"),
                        render_opts
                    )
                );
                return Ok(ExitCode::Infrastructure);
            }
        };
        let addr = listener.local_addr()?;
        say_where(addr, writable);
        let stop = CancellationToken::new();
        let _shutdown = cancel_on_signals(SignalHandlerKind::Standard, stop.clone(), |_, _| {})?;
        crate::serve::serve(settings, listener, stop.cancelled_owned()).await?;
        Ok(ExitCode::Interrupted)
    })
}

/// Where the page is, how to reach it from a laptop, and whether it can change anything.
fn say_where(addr: SocketAddr, writable: bool) {
    println!("gpuflow serve: http://{addr}/");
    let port = addr.port();
    if addr.ip().is_loopback() {
        println!(
            "  from your machine: `ssh -N -L {port}:127.0.0.1:{port} NODE`, then open http://127.0.0.1:{port}/"
        );
    } else {
        println!(
            "  reachable from other machines; an ssh tunnel keeps it private: `ssh -N -L {port}:127.0.0.1:{port} NODE`"
        );
    }
    if writable {
        println!("  cancelling a run needs the token (`Authorization: Bearer TOKEN`)");
    } else {
        println!("  read-only: `--token-file FILE` allows cancelling runs with that token");
    }
    println!("  Ctrl-C stops it");
}
