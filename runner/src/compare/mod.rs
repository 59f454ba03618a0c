//! Compare-to-baseline: judging a run's metrics against a baseline with an effect-size
//! threshold AND a statistical test, so a real regression fails the step and noise does not.
//!
//! [`BaselineSpec`] is what the user asked for (`nccl`, `previous`, `window`, `89.5 tok/s`);
//! [`resolve`] turns it into a [`Baseline`] from the [`crate::store`]; [`compare`] decides a
//! [`Comparison`] per metric; [`step_outcome`] applies `fail-on`; [`compare_result`] is the whole step in one call. How the decision is made is
//! told in docs/results.md. This module knows nothing of terminals, templates or the engine.

mod baseline;
mod baseline_spec;
mod comparison;
mod error;
mod fail_on;
mod step_inputs;
mod value_text;
mod verdict;

pub use baseline::{Baseline, BaselineData, CurrentRun, resolve};
pub use baseline_spec::BaselineSpec;
pub use comparison::{
    CompareOptions, Comparison, MetricInput, Test, center, compare, metric_title,
};
pub use error::CompareError;
pub use fail_on::{FailOn, StepOutcome, step_outcome};
pub use step_inputs::{StepInputs, StepReport, compare_result};
pub use value_text::format_value;
pub use verdict::Verdict;
