//! `wait-for-health`: waits until a server answers, and fails fast, with the cause, when it dies loading.
//! Declared in `spec.rs`, run by `run.rs`.

pub mod causes;
mod run;
mod spec;

use super::builtin::{Builtin, EngineUse, StepCall, StepFuture};
use super::spec::BuiltinSpec;

pub struct WaitForHealth;

impl Builtin for WaitForHealth {
    fn spec(&self) -> &'static BuiltinSpec {
        &spec::SPEC
    }

    fn engine(&self) -> EngineUse {
        EngineUse::IfReached
    }

    fn run<'a>(&'a self, call: StepCall<'a, '_>) -> StepFuture<'a> {
        Box::pin(run::run(call))
    }
}
