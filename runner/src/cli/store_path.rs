//! The `--store` option shared by the commands that read the results store, and how their
//! store errors are shown.

use std::path::PathBuf;

use crate::diag::{Diagnostic, ExitCode, RenderOptions, render};
use crate::store::{ResultStore, StoreError, default_path};

#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// The results store (default: `.gpuflow/results.db` at the top of the git work tree).
    #[arg(
        long = "store",
        value_name = "PATH",
        env = "GPUFLOW_STORE",
        global = true
    )]
    pub path: Option<PathBuf>,
}

impl StoreArgs {
    /// Opens an existing store; a missing file is an error, not a new empty store, since
    /// these commands only read or pin what runs recorded.
    pub fn open_existing(&self, render_opts: RenderOptions) -> Result<ResultStore, ExitCode> {
        let path = match &self.path {
            Some(p) => p.clone(),
            None => default_path(&std::env::current_dir().unwrap_or_default()),
        };
        if !path.is_file() {
            let d = Diagnostic::unlocated(format!("no results store at `{}`", path.display()))
                .hint("results are recorded by `gpuflow run`; pass `--store PATH` to read another file");
            eprintln!("{}", render(&d, render_opts));
            return Err(ExitCode::Usage);
        }
        ResultStore::open(&path).map_err(|e| report(&e, render_opts))
    }
}

/// Prints a store error with its hint; the exit code says whose fault it was.
pub fn report(err: &StoreError, render_opts: RenderOptions) -> ExitCode {
    let d = Diagnostic::unlocated(err.to_string()).maybe_hint(err.hint());
    eprintln!("{}", render(&d, render_opts));
    if err.is_usage() {
        ExitCode::Usage
    } else {
        ExitCode::Infrastructure
    }
}
