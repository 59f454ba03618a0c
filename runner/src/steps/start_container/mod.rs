//! `start-container`: starts a server container the job's later steps use, checking first that what it mounts exists.
//! Declared in `spec.rs`, run by `run.rs`.

pub mod memory;
pub mod required_paths;
mod run;
mod spec;

use super::builtin::{Builtin, Effect, EngineUse, StepCall, StepFuture};
use super::spec::BuiltinSpec;

pub struct StartContainer;

impl Builtin for StartContainer {
    fn spec(&self) -> &'static BuiltinSpec {
        &spec::SPEC
    }

    fn engine(&self) -> EngineUse {
        EngineUse::Required
    }

    /// The memory estimate of a model server needs the memory of the job's GPUs.
    fn reads_gpus(&self) -> bool {
        true
    }

    fn effect(&self) -> Effect {
        Effect::StartsContainer
    }

    fn run<'a>(&'a self, call: StepCall<'a, '_>) -> StepFuture<'a> {
        Box::pin(run::run(call))
    }
}
