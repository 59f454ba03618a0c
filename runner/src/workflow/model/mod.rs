//! The workflow and action model: plain Rust types, filled by [`super::load`], read by
//! `plan` and the engine. Everything a later check must point at is a [`Spanned`] value;
//! every string that may hold `${{ }}` keeps the span of its text.
//!
//! Each type derives `JsonSchema` (its doc comments become editor tooltips) or implements it
//! by hand where a field accepts several shapes, so the schema says exactly what the loader
//! accepts. `Serialize` is for machine output (`plan --json`), not for loading.
//!
//! [`Spanned`]: crate::diag::Spanned

mod action;
mod job;
mod schema;
mod step;
mod triggers;
mod value;
mod workflow;

pub use action::{Action, ActionInput, ActionOutput, ActionRuns};
pub use job::{
    Container, GpuConstraint, GpuDevices, GpuRequest, Job, Matrix, MatrixDim, MatrixDims,
    MatrixRow, Strategy,
};
pub use step::{Step, Uses};
pub use triggers::{
    DispatchInput, DispatchInputType, PushTrigger, SUPPORTED_EVENTS, Triggers, WorkflowDispatch,
};
pub use value::{BoolOrExpr, NumberOrExpr, Value};
pub use workflow::{Concurrency, Defaults, Env, RunDefaults, Workflow};
