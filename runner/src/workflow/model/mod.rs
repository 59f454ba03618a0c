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
mod defaults;
mod job;
mod schema;
mod search;
mod step;
mod triggers;
mod value;
mod workflow;

pub use action::{Action, ActionInput, ActionOutput, ActionRuns, GITHUB_ONLY_ACTION_KEYS};
pub use defaults::{Defaults, RunDefaults};
pub use job::{
    Container, GITHUB_ONLY_JOB_KEYS, GpuConstraint, GpuDevices, GpuRequest, Job, Matrix, MatrixDim,
    MatrixDims, MatrixRow, Strategy,
};
pub use search::{Comparison, Constraint, Goal, Search, SearchBudget, SearchFind};
pub use step::{Step, Uses};
pub use triggers::{
    DispatchInput, DispatchInputType, GITHUB_ONLY_EVENTS, PushTrigger, SUPPORTED_EVENTS, Triggers,
    WorkflowDispatch,
};
pub use value::{BoolOrExpr, Env, NumberOrExpr, Value};
pub use workflow::{Concurrency, Workflow};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_generate_with_docs_and_several_shapes() {
        let workflow = serde_json::to_value(schemars::schema_for!(Workflow)).unwrap();
        let text = workflow.to_string();
        if std::env::var_os("DUMP_SCHEMA").is_some() {
            println!("{}", serde_json::to_string_pretty(&workflow).unwrap());
        }
        // Field docs become tooltips.
        assert!(
            text.contains("Cancel the job after this many minutes"),
            "{text}"
        );
        // `permissions` is accepted (and ignored), so the schema must accept it too.
        assert!(workflow["properties"]["permissions"].is_object(), "{text}");
        assert_eq!(workflow["additionalProperties"], false);
        // Built-in names come from the step declarations.
        assert!(text.contains("wait-for-health"));
        // Keys the loader accepts with a warning are accepted by the schema too.
        for key in GITHUB_ONLY_JOB_KEYS {
            assert!(
                workflow["$defs"]["Job"]["properties"][key].is_object(),
                "{key}"
            );
        }
        assert!(
            workflow["$defs"]["Container"]["oneOf"][1]["properties"]["credentials"].is_object()
        );
        let action = serde_json::to_value(schemars::schema_for!(Action)).unwrap();
        assert!(action.to_string().contains("composite"));
        assert!(action["properties"]["branding"].is_object());
    }
}
