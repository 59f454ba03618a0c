//! What every job of a run shares: the workflow, the options, the masked event sink, the Docker
//! engines and the contexts known before any job starts. The dispatcher makes it once per run;
//! the executor, preflight and the steps (through [`crate::steps::StepHost`]) read it.

use std::sync::Arc;
use std::time::Instant;

use indexmap::IndexMap;

use super::engines::Engines;
use super::options::RunOptions;
use crate::backend::RunImages;
use crate::events::Masker;
use crate::events::{Event, EventKind, EventSink};
use crate::expr::Value;
use crate::workflow::model::Workflow;

/// What every job of a run shares.
pub struct Shared {
    pub wf: Arc<Workflow>,
    pub opts: RunOptions,
    /// Masks every event's texts ([`crate::events::MaskingSink`]) before any view or file sees
    /// them: what is emitted needs no masking of its own. `masker` is for what is not an event
    /// (the results store, reports) and for the pieces of a cut line.
    pub sink: Arc<dyn EventSink>,
    pub masker: Arc<Masker>,
    /// The Docker engine of each job run's host.
    pub engines: Engines,
    pub started: Instant,
    /// `github`, `gpuflow`, `inputs`, `secrets`, `vars`.
    pub base: IndexMap<String, Value>,
    /// Servers the cells of a job share ([`super::server_pool`]).
    pub servers: Arc<super::server_pool::ServerPool>,
    /// Each image resolved once per engine for the whole run ([`RunImages`]): preflight
    /// starts the pulls, every container of the run is created from what they resolved to.
    pub images: RunImages,
}

impl Shared {
    pub fn emit(&self, kind: EventKind) {
        self.sink.emit(Event {
            elapsed: self.started.elapsed(),
            kind,
        });
    }
}
