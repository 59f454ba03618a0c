//! The one interface every built-in step implements ([`Builtin`]), and what a step is handed
//! when it runs ([`StepCall`]). The registry in [`super`] lists the implementations; the engine
//! asks them, never a step's name, what a step needs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use indexmap::IndexMap;

use super::context::StepContext;
use super::error::StepError;
use super::host::StepHost;
use super::spec::BuiltinSpec;
use crate::backend::GpuRequest;
use crate::engine::containers::JobContainers;
use crate::events::JobRef;
use crate::expr::Value;

/// A step's outputs (`steps.<id>.outputs.<name>`).
pub type Outputs = IndexMap<String, String>;

/// What [`Builtin::run`] returns: the outputs, or why the step failed.
pub type StepFuture<'a> = Pin<Box<dyn Future<Output = Result<Outputs, StepError>> + Send + 'a>>;

/// How a built-in uses the job's Docker engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineUse {
    /// It starts, stops or looks into containers: the job's host must have an engine.
    Required,
    /// It runs on a GPU machine without Docker too (judging results, writing reports, checking
    /// host files, a server on the host), and uses the job's containers when an earlier step
    /// reached the engine (a server it started, to watch for crashes or to run a script in);
    /// no connection is tried for it.
    IfReached,
}

/// What a built-in does to the job's containers and files, as preflight sees it: a check runs
/// early only when no step before it can change its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// It only reads (or judges, or writes a report nobody checks).
    ReadsOnly,
    /// It starts a container (`with: { name }`, else the step's `id`).
    StartsContainer,
    /// It stops a container (`with: { container }`).
    StopsContainer,
    /// It runs a command that may write anywhere (a benchmark's script).
    MayWrite,
}

/// A built-in step (`uses: <name>`): its declaration and how it runs.
pub trait Builtin: Sync {
    /// Its inputs, outputs and docs: what validation, the JSON Schema and `gpuflow docs` read.
    fn spec(&self) -> &'static BuiltinSpec;

    fn engine(&self) -> EngineUse;

    fn effect(&self) -> Effect {
        Effect::ReadsOnly
    }

    /// Whether it is told the host's GPUs and the job's lease ([`StepContext::gpus`]).
    fn reads_gpus(&self) -> bool {
        false
    }

    /// Whether preflight may run it before any job starts, where nothing before it can change
    /// its answer: true only of steps that merely read.
    fn runs_in_preflight(&self) -> bool {
        false
    }

    /// Runs the step; `call.inputs` holds its evaluated `with:` with the declared defaults.
    fn run<'a>(&'a self, call: StepCall<'a, '_>) -> StepFuture<'a>;
}

/// Everything a built-in step runs with.
pub struct StepCall<'a, 'c> {
    /// The built-in's name, for messages.
    pub name: &'static str,
    /// The step's `with:`, evaluated, with the declared defaults for what it leaves out.
    pub inputs: &'a IndexMap<String, Value>,
    /// The job's containers; `None` when the step's [`EngineUse`] let the engine give none
    /// (no engine on the host, or none reached yet).
    pub containers: Option<&'a mut JobContainers>,
    pub host: &'a Arc<dyn StepHost>,
    pub job: &'a JobRef,
    /// What the job's `gpus:` asks for (start-container hands it to the containers it starts).
    pub job_gpus: Option<GpuRequest>,
    pub step: &'a mut StepContext<'c>,
}

impl StepCall<'_, '_> {
    /// The job's containers, for a step that cannot run without an engine.
    pub fn engine(&mut self) -> Result<&mut JobContainers, StepError> {
        let step = self.name;
        self.containers
            .as_deref_mut()
            .ok_or(StepError::NoEngine { step })
    }

    /// An input as text; `None` when it is absent or empty.
    pub fn text(&self, name: &str) -> Option<String> {
        self.inputs
            .get(name)
            .map(Value::to_expr_string)
            .filter(|s| !s.is_empty())
    }
}
