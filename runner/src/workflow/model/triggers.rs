//! `on:`: the events that start a workflow.

use std::borrow::Cow;

use indexmap::IndexMap;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde_json::json;

use crate::diag::Spanned;

/// The events gpuflow can trigger on; the loader's "unknown event" hint lists these.
pub const SUPPORTED_EVENTS: &[&str] = &["push", "workflow_dispatch"];

/// `on:`, in any of GitHub's shapes: `on: push`, `on: [push, workflow_dispatch]`, or a
/// mapping with settings per event.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Triggers {
    /// Runs when commits are pushed (via the git hooks gpuflow installs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push: Option<PushTrigger>,
    /// Runs on demand (`gpuflow run`), with typed inputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_dispatch: Option<WorkflowDispatch>,
    /// Where `on` names `workflow_call`, which gpuflow ignores: the checks then tell an
    /// `inputs.<name>` that only `workflow_call` could declare from a misspelt one.
    #[serde(skip)]
    pub workflow_call: Option<crate::diag::Span>,
}

/// GitHub events gpuflow does not trigger on: a workflow using them still loads (a warning),
/// so a GitHub workflow can be validated as it is.
pub const GITHUB_ONLY_EVENTS: &[&str] = &[
    "pull_request",
    "pull_request_target",
    "schedule",
    "workflow_call",
    "workflow_run",
    "repository_dispatch",
    "release",
    "merge_group",
    "issues",
    "issue_comment",
    "create",
    "delete",
];

impl JsonSchema for Triggers {
    fn schema_name() -> Cow<'static, str> {
        "Triggers".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let push = generator.subschema_for::<PushTrigger>();
        let dispatch = generator.subschema_for::<WorkflowDispatch>();
        let events: Vec<&str> = SUPPORTED_EVENTS
            .iter()
            .chain(GITHUB_ONLY_EVENTS)
            .copied()
            .collect();
        let mut properties = serde_json::Map::new();
        properties.insert(
            "push".into(),
            json!({ "oneOf": [{ "type": "null" }, push] }),
        );
        properties.insert(
            "workflow_dispatch".into(),
            json!({ "oneOf": [{ "type": "null" }, dispatch] }),
        );
        for event in GITHUB_ONLY_EVENTS {
            // Accepted so a GitHub workflow validates as it is; gpuflow warns and ignores it.
            properties.insert(
                (*event).into(),
                json!({ "description": "A GitHub event gpuflow does not trigger on (ignored, with a warning)." }),
            );
        }
        json_schema!({
            "description": "When the workflow runs: an event name, a list of them, or a mapping of event → settings.",
            "oneOf": [
                { "enum": events },
                { "type": "array", "items": { "enum": events } },
                {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": properties
                }
            ]
        })
    }
}

/// `on.push`: which pushes start the workflow. Patterns are globs (`release/**`, `*.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PushTrigger {
    /// Only pushes to these branches (globs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<Spanned<String>>,
    /// Not pushes to these branches (globs). Cannot be combined with `branches`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches_ignore: Vec<Spanned<String>>,
    /// Only pushes of these tags (globs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Spanned<String>>,
    /// Not pushes of these tags (globs). Cannot be combined with `tags`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags_ignore: Vec<Spanned<String>>,
    /// Only pushes that change a file matching one of these globs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<Spanned<String>>,
    /// Not pushes that change only files matching these globs. Cannot be combined with `paths`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths_ignore: Vec<Spanned<String>>,
}

/// `on.workflow_dispatch`: runs started by hand, with inputs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct WorkflowDispatch {
    /// The inputs a run takes (`gpuflow run --input name=value`), read as `inputs.<name>`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, DispatchInput>,
}

/// One input of `workflow_dispatch`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DispatchInput {
    /// The input's name, as written under `inputs:`.
    #[serde(skip)]
    #[schemars(skip)]
    pub name: Spanned<String>,
    /// What the input is for, shown in `gpuflow run --help`-style listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<String>>,
    /// A run must give this input when it has no `default`.
    #[serde(default)]
    pub required: bool,
    /// The value used when a run does not give one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::scalar_string")]
    pub default: Option<Spanned<String>>,
    /// The input's type; values are checked against it when a run starts.
    #[serde(rename = "type", default)]
    pub ty: DispatchInputType,
    /// The allowed values of a `choice` input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<Spanned<String>>,
}

/// The type of a `workflow_dispatch` input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DispatchInputType {
    /// Any text (the default).
    #[default]
    String,
    /// `true` or `false`.
    Boolean,
    /// A number.
    Number,
    /// One of `options`.
    Choice,
    /// The name of an environment (accepted for GitHub compatibility; a string).
    Environment,
}

impl DispatchInputType {
    pub const NAMES: &[&str] = &["string", "boolean", "number", "choice", "environment"];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "boolean" => Self::Boolean,
            "number" => Self::Number,
            "choice" => Self::Choice,
            "environment" => Self::Environment,
            _ => return None,
        })
    }
}

/// The event names of a [`Triggers`], for messages and `plan --json`.
impl Triggers {
    pub fn events(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.push.is_some() {
            v.push("push");
        }
        if self.workflow_dispatch.is_some() {
            v.push("workflow_dispatch");
        }
        v
    }
}
