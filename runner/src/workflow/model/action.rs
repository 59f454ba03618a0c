//! An action file (`action.yml`): a reusable composite step with inputs and outputs.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Serialize;

use super::{Step, schema};
use std::sync::Arc;

use crate::diag::{SourceFile, Spanned};

/// GitHub action keys that load with a warning: they only matter on GitHub's Marketplace.
pub const GITHUB_ONLY_ACTION_KEYS: &[&str] = &["branding"];

/// A composite action (`actions/<name>/action.yml`), used as `uses: ./actions/<name>`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[schemars(transform = action_schema_ignored_keys)]
pub struct Action {
    /// The file the action was read from, so later checks can point into it.
    #[serde(skip)]
    #[schemars(skip)]
    pub file: Arc<SourceFile>,
    /// The action's name.
    #[schemars(schema_with = "schema::scalar_string")]
    pub name: Spanned<String>,
    /// What the action does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<String>>,
    /// Who maintains it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<Spanned<String>>,
    /// The inputs the action takes (`with:` of the step that uses it), read as
    /// `inputs.<name>` inside.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, ActionInput>,
    /// Values the action returns, read as `steps.<id>.outputs.<name>` by the caller.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub outputs: IndexMap<String, ActionOutput>,
    /// How the action runs: `using: composite` and its steps.
    pub runs: ActionRuns,
}

fn action_schema_ignored_keys(schema: &mut schemars::Schema) {
    schema::accept_ignored_keys(schema, GITHUB_ONLY_ACTION_KEYS);
}

/// One input of an action.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActionInput {
    /// The input's name, as written under `inputs:`.
    #[serde(skip)]
    #[schemars(skip)]
    pub name: Spanned<String>,
    /// What the input is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<String>>,
    /// A step using the action must give this input unless it has a `default`.
    #[serde(default)]
    pub required: bool,
    /// The value used when the step does not give one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::scalar_string")]
    pub default: Option<Spanned<String>>,
    /// Shown as a warning when a step gives this input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecation_message: Option<Spanned<String>>,
}

/// One output of an action.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ActionOutput {
    /// What the output holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<String>>,
    /// Its value: an expression over the action's steps
    /// (`${{ steps.health.outputs.ready-after }}`).
    pub value: Spanned<String>,
}

/// `runs:` of an action.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ActionRuns {
    /// `composite`: the only kind gpuflow runs for now.
    #[schemars(with = "CompositeOnly")]
    pub using: Spanned<String>,
    /// The action's steps, run in order.
    #[schemars(length(min = 1))]
    pub steps: Vec<Step>,
}

/// Only composite actions are supported.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum CompositeOnly {
    Composite,
}
