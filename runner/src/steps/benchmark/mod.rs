//! `benchmark`: measures a server with the built-in load generator or a script, and records the result.
//! Declared in `spec.rs`, run by `run.rs`.

mod budget;
mod energy;
mod gpu_timing;
mod level_metrics;
mod recording;
mod run;
mod script_metrics;
pub mod server_version;
mod spec;

use super::builtin::{Builtin, Effect, EngineUse, StepCall, StepFuture};
use super::spec::BuiltinSpec;

pub struct Benchmark;

impl Builtin for Benchmark {
    fn spec(&self) -> &'static BuiltinSpec {
        &spec::SPEC
    }

    fn engine(&self) -> EngineUse {
        EngineUse::IfReached
    }

    fn reads_gpus(&self) -> bool {
        true
    }

    fn effect(&self) -> Effect {
        Effect::MayWrite
    }

    fn run<'a>(&'a self, call: StepCall<'a, '_>) -> StepFuture<'a> {
        Box::pin(run::run(call))
    }
}
