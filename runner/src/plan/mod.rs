//! Planning: from a validated workflow to the immutable [`Plan`] of what would run.
//!
//! Owns matrix expansion with GitHub's include/exclude rules ([`matrix`]), the `needs` graph and
//! its errors ([`graph`]), and the plan shown by `gpuflow plan` ([`plan`], rendered by
//! [`render`]). It takes plain input types of its own, so it knows nothing of YAML, the workflow
//! model, expressions, backends, processes or clocks; the caller maps the indexes and tags in
//! its errors back to spans.

pub mod from_model;
pub mod graph;
pub mod matrix;
#[allow(clippy::module_inception)]
pub mod plan;
pub mod render;

pub use from_model::{ModelInput, from_workflow, to_json};
pub use graph::{GraphError, JobDeps, JobGraph, NeedsRef};
pub use matrix::{CellOrigin, MAX_CELLS, MatrixCell, MatrixError, MatrixInput, expand};
pub use plan::{
    JobInput, NameEvaluator, Plan, PlanError, PlannedJob, PlannedStep, SkippedJob, StepInput,
    StepKind, WorkflowInput, build, build_with_names, problems,
};
pub use render::{render_json, render_text};
