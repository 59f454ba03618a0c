//! `check-cli-interface`: checks that a command takes the flags a workflow is about to pass it, from its `--help`.
//! Declared in `spec.rs`, run by `run.rs`.

mod cli_usage;
mod flag_check;
mod run;
pub mod server_cli;
mod spec;

use super::builtin::{Builtin, EngineUse, StepCall, StepFuture};
use super::spec::BuiltinSpec;

pub struct CheckCliInterface;

impl Builtin for CheckCliInterface {
    fn spec(&self) -> &'static BuiltinSpec {
        &spec::SPEC
    }

    fn engine(&self) -> EngineUse {
        EngineUse::Required
    }

    fn runs_in_preflight(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, call: StepCall<'a, '_>) -> StepFuture<'a> {
        Box::pin(run::run(call))
    }
}
