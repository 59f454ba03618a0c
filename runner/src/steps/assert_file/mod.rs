//! `assert-file`: checks that files exist (and their size, contents or hash) on the host or in a container.
//! Declared in `spec.rs`, run by `run.rs`.

mod run;
mod spec;

pub use run::{InContainer, Place};

use super::builtin::{Builtin, EngineUse, StepCall, StepFuture};
use super::spec::BuiltinSpec;

pub struct AssertFile;

impl Builtin for AssertFile {
    fn spec(&self) -> &'static BuiltinSpec {
        &spec::SPEC
    }

    fn engine(&self) -> EngineUse {
        EngineUse::IfReached
    }

    fn runs_in_preflight(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, call: StepCall<'a, '_>) -> StepFuture<'a> {
        Box::pin(run::run(call))
    }
}
