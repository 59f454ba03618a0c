//! The state of one job run while its steps run. [`JobRun`]'s methods live beside the part of
//! the job they do (contexts, containers, steps, scripts); this file holds the state and what
//! every part uses.

use std::path::PathBuf;
use std::sync::Arc;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use crate::diag::SourceFile;
use crate::engine::container_runner::ContainerRunner;
use crate::engine::containers::JobContainers;
use crate::engine::host::HostRunner;
use crate::engine::shared::Shared;
use crate::events::{EventKind, JobRef, StepOutcome, Stream};
use crate::expr::{JobStatus, Value};
use crate::gpu::JobGpus;
use crate::steps::{self, StepHost};

/// One level of steps: the job's, or a composite action's.
pub(super) struct Scope {
    pub(super) steps: IndexMap<String, Value>,
    /// A composite action's `inputs`; `None` in the job itself (the run's inputs).
    pub(super) inputs: Option<Value>,
    /// Before each step's number (`3.` inside the action used by step 3).
    pub(super) prefix: String,
    pub(super) file: Arc<SourceFile>,
    /// For errors inside an action: which workflow step used it.
    pub(super) caller: Option<String>,
}

/// What a step produced.
pub(super) struct StepResult {
    pub(super) outcome: StepOutcome,
    pub(super) outputs: IndexMap<String, String>,
}

impl StepResult {
    pub(super) fn failed() -> Self {
        Self {
            outcome: StepOutcome::Failure,
            outputs: IndexMap::new(),
        }
    }
}

/// A search's early round: the job's step at `step_key` (`3`) measures for `fraction` of its
/// full length.
#[derive(Clone, Debug, PartialEq)]
pub struct Shortened {
    pub step_key: String,
    pub fraction: f64,
}

pub(super) struct JobRun {
    pub(super) shared: Arc<Shared>,
    pub(super) job_id: String,
    pub(super) jref: JobRef,
    pub(super) contexts: IndexMap<String, Value>,
    /// Workflow → job → `$GITHUB_ENV` additions.
    pub(super) env: IndexMap<String, String>,
    pub(super) status: JobStatus,
    pub(super) cancel: CancellationToken,
    pub(super) host: HostRunner,
    pub(super) containers: Option<JobContainers>,
    pub(super) job_container: Option<ContainerRunner>,
    pub(super) temp: PathBuf,
    /// Benchmark results this job run recorded, for `compare-to-baseline`.
    pub(super) recorded: Vec<steps::Recorded>,
    /// The GPUs leased to this job run, held until it has cleaned up.
    pub(super) gpus: Option<JobGpus>,
    /// The job's `gpus:` as evaluated when it started: what its containers get where nothing
    /// was leased (the host's GPUs are not known to the run).
    pub(super) asked_gpus: crate::backend::GpuRequest,
    /// Why its first failed step failed.
    pub(super) failure: Option<String>,
    /// The step a search's early round runs shorter, and how much shorter.
    pub(super) budget: Option<Shortened>,
    /// The outputs of each of the job's own steps (not an action's), by position (`3`): what
    /// a search scores a cell with.
    pub(super) step_outputs: IndexMap<String, IndexMap<String, String>>,
}

impl JobRun {
    /// A line from gpuflow itself about the job or one of its steps; masked by the run's sink
    /// (`MaskingSink`), as every event is.
    /// Says why step `key` failed, and keeps the job's first such reason ([`JobRun::failure`]):
    /// what a search records of an infeasible probe.
    pub(super) fn fail_with(&mut self, key: &str, message: &str) {
        self.say(Some(key), message);
        if self.failure.is_none() {
            self.failure = Some(message.to_string());
        }
    }

    pub(super) fn say(&self, step: Option<&str>, text: &str) {
        self.shared.emit(EventKind::LogLine {
            job: self.jref.clone(),
            step: step.map(String::from),
            container: None,
            stream: Stream::Runner,
            text: text.to_string(),
        });
    }

    /// `message`, inside a composite action prefixed with the workflow step that used it.
    pub(super) fn in_caller(&self, scope: &Scope, message: &str) -> String {
        match &scope.caller {
            Some(c) => format!("{c}: {message}"),
            None => message.to_string(),
        }
    }

    /// The run as a built-in step sees it.
    pub(super) fn step_host(&self) -> Arc<dyn StepHost> {
        self.shared.clone()
    }
}
