//! The run's shared state as built-in steps see it ([`StepHost`]): the narrow handle keeps the
//! steps from reaching into the executor.

use std::path::Path;
use std::sync::Arc;

use super::shared::Shared;
use crate::events::Masker;
use crate::events::{EventKind, JobRef};
use crate::expr::Value;
use crate::steps::StepHost;

impl StepHost for Shared {
    fn emit(&self, kind: EventKind) {
        Shared::emit(self, kind);
    }

    fn masker(&self) -> &Arc<Masker> {
        &self.masker
    }

    fn workspace(&self) -> &Path {
        &self.opts.workspace
    }

    fn store(&self) -> &Path {
        &self.opts.store
    }

    fn run_id(&self) -> &str {
        &self.opts.run_id
    }

    fn log_dir(&self) -> &Path {
        &self.opts.log_dir
    }

    fn host_of(&self, job: &JobRef) -> Option<&str> {
        self.engines.host_of(job)
    }

    fn github(&self) -> Option<&Value> {
        self.base.get("github")
    }

    fn images(&self) -> Option<&crate::backend::RunImages> {
        Some(&self.images)
    }
}
