//! What a built-in step may ask of the run it is part of, and nothing more: say something
//! (events), mask a text, and the run's facts (workspace, results store, run id, log folder,
//! the job's host, the `github` context). The engine's shared run state implements it
//! (`engine/step_host.rs`), so a step never reaches into the executor.

use std::path::Path;
use std::sync::Arc;

use crate::backend::RunImages;
use crate::events::Masker;
use crate::events::{EventKind, JobRef};
use crate::expr::Value;

/// The run, as a built-in step sees it.
pub trait StepHost: Send + Sync {
    /// Emits an event; its texts are masked on the way out.
    fn emit(&self, kind: EventKind);
    /// For what is not an event: the results store, reports, result files.
    fn masker(&self) -> &Arc<Masker>;
    /// The folder the workflow runs in.
    fn workspace(&self) -> &Path;
    /// The results store (a SQLite file).
    fn store(&self) -> &Path;
    fn run_id(&self) -> &str;
    /// The run's log folder.
    fn log_dir(&self) -> &Path;
    /// The name of the host `job` runs on, when the run placed it on one.
    fn host_of(&self, job: &JobRef) -> Option<&str>;
    /// The `github` context (commit, ref, event), for what a result records.
    fn github(&self) -> Option<&Value>;
    /// The run's images, each resolved once ([`RunImages`]); `None` where the step runs
    /// outside a run (then it resolves its image itself).
    fn images(&self) -> Option<&RunImages> {
        None
    }
}
