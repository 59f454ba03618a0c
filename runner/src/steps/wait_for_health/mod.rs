//! `wait-for-health`: waits until a server answers, and fails fast, with the cause, when it dies loading.
//! Declared in `spec.rs`, run by `run.rs`: its inputs read in `health_spec.rs`, the polled
//! probes in `probe.rs`, the watched container in `watch.rs`, the failure messages in
//! `failure.rs` (with `causes.rs`, the known causes a dying server prints).

pub mod causes;
mod failure;
mod health_spec;
mod probe;
mod run;
mod spec;
mod watch;

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
