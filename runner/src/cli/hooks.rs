//! `gpuflow hooks install|uninstall`: git hooks that queue the workflows a push starts
//! (docs/triggers.md). Exit codes: 0, 2 (not a repository, an unknown hook, `--wait` on a hook
//! other than `pre-push`, a hook gpuflow will not overwrite), 4 (a hook cannot be written).

use std::path::PathBuf;

use git2::Repository;

use crate::diag::{Diagnostic, ExitCode, RenderOptions, render};
use crate::trigger::hook_input::HOOKS;
use crate::trigger::hooks::{self, HookError, InstallOptions, Installed, Uninstalled};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Write the hooks (default: `post-receive` in a bare repository, else `post-commit`;
    /// with `--wait`, `pre-push`); a hook already there is kept and still runs first.
    Install {
        /// The hook to write (repeatable).
        #[arg(long = "hook", value_name = "HOOK", value_parser = HOOKS.to_vec())]
        hooks: Vec<String>,
        /// Wait for the runs and fail the push when one fails: `pre-push` only, the hook
        /// written when no `--hook` is given.
        #[arg(long)]
        wait: bool,
        /// The repository (default: the current folder's).
        #[arg(long, value_name = "PATH")]
        repo: Option<PathBuf>,
    },
    /// Remove gpuflow's hooks (default: all of them), putting back the hooks they kept.
    Uninstall {
        #[arg(long = "hook", value_name = "HOOK", value_parser = HOOKS.to_vec())]
        hooks: Vec<String>,
        #[arg(long, value_name = "PATH")]
        repo: Option<PathBuf>,
    },
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let (repo_path, chosen) = match &args.action {
        Action::Install { repo, hooks, .. } | Action::Uninstall { repo, hooks } => (repo, hooks),
    };
    let opened = match repo_path {
        Some(p) => Repository::open(p),
        None => Repository::open_from_env(),
    };
    let repo = match opened {
        Ok(r) => r,
        Err(e) => {
            let d = Diagnostic::unlocated(format!("not in a git repository: {}", e.message()))
                .hint("run it inside the repository, or pass `--repo PATH`");
            eprintln!("{}", render(&d, render_opts));
            return Ok(ExitCode::Usage);
        }
    };
    let result = match &args.action {
        Action::Install { hooks: h, wait, .. } => {
            let h = if h.is_empty() {
                // Only `pre-push` can wait (it runs before the push leaves), so `--wait` alone
                // means it, as `--help` says.
                if *wait {
                    vec!["pre-push".to_string()]
                } else {
                    hooks::default_hooks(&repo)
                }
            } else {
                h.clone()
            };
            let opts = InstallOptions {
                gpuflow: std::env::current_exe()?.canonicalize()?,
                wait: *wait,
                home: std::env::var_os("GPUFLOW_HOME").map(PathBuf::from),
            };
            hooks::install(&repo, &h, &opts).map(|done| {
                for d in done {
                    match d {
                        Installed::New(p) => println!("installed `{}`", p.display()),
                        Installed::Rewritten(p) => println!("rewrote gpuflow's `{}`", p.display()),
                        Installed::Chained { hook, kept_as } => println!(
                            "installed `{}`; the hook that was there runs first, kept as `{}`",
                            hook.display(),
                            kept_as.display()
                        ),
                    }
                }
            })
        }
        Action::Uninstall { .. } => {
            let h = if chosen.is_empty() {
                HOOKS.iter().map(ToString::to_string).collect()
            } else {
                chosen.clone()
            };
            hooks::uninstall(&repo, &h).map(|done| {
                for d in done {
                    match d {
                        Uninstalled::Removed(p) => println!("removed `{}`", p.display()),
                        Uninstalled::Restored(p) => {
                            println!("restored the earlier `{}`", p.display())
                        }
                        Uninstalled::NotOurs(p) if !chosen.is_empty() => {
                            println!("left `{}` alone: it is not gpuflow's", p.display());
                        }
                        Uninstalled::NotOurs(_) | Uninstalled::NotInstalled(_) => {}
                    }
                }
            })
        }
    };
    match result {
        Ok(()) => Ok(ExitCode::Success),
        Err(e) => {
            let code = if matches!(e, HookError::Io { .. }) {
                ExitCode::Infrastructure
            } else {
                ExitCode::Usage
            };
            let hint = match &e {
                HookError::ChainTaken { .. } => {
                    Some("move one of them away, then install again".to_string())
                }
                HookError::WaitNotPrePush => Some("use `--hook pre-push --wait`".to_string()),
                _ => None,
            };
            let d = Diagnostic::unlocated(e.to_string()).maybe_hint(hint);
            eprintln!("{}", render(&d, render_opts));
            Ok(code)
        }
    }
}
