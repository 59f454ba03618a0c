//! Where the host's queue lives: `$GPUFLOW_HOME`, else `$XDG_STATE_HOME/gpuflow`, else
//! `~/.local/state/gpuflow`. One folder per host (per user), whatever the repository, since
//! one worker runs the host's runs (several at once, as their GPUs fit): `queue.db`, `worker.lock` (held by the
//! running worker), `worker.log` (what detached workers print), `worker.diag.jsonl` (the
//! worker's and its runs' diagnostics as JSON lines, `crate::diag_log`) and `work/` (the
//! checkouts of running runs).

use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct GpuflowHome {
    pub dir: PathBuf,
}

impl GpuflowHome {
    pub fn from_env() -> Self {
        let dir = std::env::var_os("GPUFLOW_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_STATE_HOME")
                    .filter(|v| !v.is_empty())
                    .map(|d| PathBuf::from(d).join("gpuflow"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state/gpuflow"))
            })
            .unwrap_or_else(|| PathBuf::from(".gpuflow-home"));
        Self::at(dir)
    }

    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn queue(&self) -> PathBuf {
        self.dir.join("queue.db")
    }

    pub fn lock(&self) -> PathBuf {
        self.dir.join("worker.lock")
    }

    pub fn worker_log(&self) -> PathBuf {
        self.dir.join("worker.log")
    }

    /// gpuflow's own diagnostics of the worker and the runs it starts, as JSON lines.
    pub fn worker_diag_log(&self) -> PathBuf {
        self.dir.join("worker.diag.jsonl")
    }

    /// The folder a run works in: its checkout and its event file.
    pub fn work(&self, run_id: &str) -> PathBuf {
        self.dir.join("work").join(run_id)
    }

    pub fn ensure(&self) -> std::io::Result<&Path> {
        std::fs::create_dir_all(&self.dir)?;
        Ok(&self.dir)
    }
}
