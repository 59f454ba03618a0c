//! What `gpuflow serve` is started with.

use std::path::PathBuf;
use std::sync::Arc;

use super::access::Token;
use crate::events::Masker;
use crate::trigger::GpuflowHome;

/// What the server reads, and who may change things.
pub struct Settings {
    /// The queue of triggered runs (`$GPUFLOW_HOME`).
    pub home: GpuflowHome,
    /// The folder whose `.gpuflow/runs/` holds the runs started there by hand.
    pub project: PathBuf,
    /// The results store; it may not exist yet (pages then say so).
    pub store: PathBuf,
    /// The host file (`--config`), else `gpuflow.toml` found from `project`; read again for
    /// every GPUs page, so what it shows is never older than the request.
    pub hosts_file: Option<PathBuf>,
    /// `None`: read-only (nothing can be cancelled).
    pub token: Option<Token>,
    /// Hides the secrets the server was given in everything it serves.
    pub masker: Arc<Masker>,
}
