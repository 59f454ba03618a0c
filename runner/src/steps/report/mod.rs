//! `report`: renders the run's report, writes it and optionally commits it to a results branch.
//! Declared in `spec.rs`, run by `run.rs`.

mod run;
mod spec;

use super::builtin::{Builtin, EngineUse, StepCall, StepFuture};
use super::spec::BuiltinSpec;

pub struct Report;

impl Builtin for Report {
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
