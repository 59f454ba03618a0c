//! `compare-to-baseline`: judges the job's benchmark result against a baseline with statistics.
//! Declared in `spec.rs`, run by `run.rs`.

mod run;
mod spec;

use super::builtin::{Builtin, EngineUse, StepCall, StepFuture};
use super::spec::BuiltinSpec;

pub struct CompareToBaseline;

impl Builtin for CompareToBaseline {
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
