//! `stop-container`: stops a container the job started, and says how it exited.
//! Declared in `spec.rs`, run by `run.rs`.

mod run;
mod spec;

use super::builtin::{Builtin, Effect, EngineUse, StepCall, StepFuture};
use super::spec::BuiltinSpec;

pub struct StopContainer;

impl Builtin for StopContainer {
    fn spec(&self) -> &'static BuiltinSpec {
        &spec::SPEC
    }

    fn engine(&self) -> EngineUse {
        EngineUse::Required
    }

    fn effect(&self) -> Effect {
        Effect::StopsContainer
    }

    fn run<'a>(&'a self, call: StepCall<'a, '_>) -> StepFuture<'a> {
        Box::pin(run::run(call))
    }
}
