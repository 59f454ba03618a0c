//! `gpuflow actions`: the remote actions `gpuflow.lock` pins (`list`, the default) and
//! `gpuflow actions update [owner/repo@ref…]`, which moves entries to the commit their ref
//! names now. New remote actions are pinned by `validate`, `plan` and `run` when first met.

use std::path::PathBuf;

use crate::actions::{ActionResolver, LOCK_FILE, LockFile};
use crate::diag::{Diagnostics, ExitCode, RenderOptions, render_all};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List the locked remote actions: `owner/repo@ref`, commit, source.
    List,
    /// Fetch each locked action's ref again and move its entry to the commit it names now.
    Update(UpdateArgs),
}

#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    /// `owner/repo@ref` (one entry) or `owner/repo` (all its refs); every entry when none is
    /// given.
    pub names: Vec<String>,
}

pub fn run(args: &Args, render: RenderOptions) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let workspace = crate::hosts::workspace_root(&cwd);
    let mut resolver = ActionResolver::new(&workspace);
    let fail = |d: Box<crate::diag::Diagnostic>| {
        eprint!("{}", render_all(&Diagnostics::from(*d), render));
        ExitCode::Failure
    };
    match &args.action {
        None | Some(Action::List) => {
            let lock = match LockFile::read(&resolver.lock_path()) {
                Ok(l) => l,
                Err(d) => return Ok(fail(d)),
            };
            if lock.entries.is_empty() {
                eprintln!(
                    "no remote actions are locked (`{}`); `gpuflow validate` pins those the workflows use",
                    resolver.lock_path().display()
                );
            }
            for e in &lock.entries {
                println!("{}  {}  {}", e.key(), e.commit, e.source);
            }
            Ok(ExitCode::Success)
        }
        Some(Action::Update(update)) => match resolver.update(&update.names) {
            Err(d) => Ok(fail(d)),
            Ok(moved) => {
                if moved.is_empty() {
                    eprintln!("`{LOCK_FILE}` is up to date: every ref names its locked commit");
                }
                for m in moved {
                    println!("{}: {} -> {}", m.key, m.from, m.to);
                }
                Ok(ExitCode::Success)
            }
        },
    }
}
