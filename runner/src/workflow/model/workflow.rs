//! The top of a workflow file: name, triggers, env, defaults, concurrency and the jobs.

use std::borrow::Cow;

use indexmap::IndexMap;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use super::{Action, BoolOrExpr, Defaults, Env, Job, Triggers, schema};
use crate::diag::Spanned;

/// A workflow file (`workflows/*.yml`): jobs that run on GPU hosts when its triggers fire.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Workflow {
    /// The file the workflow was read from, so later checks can point into it.
    #[serde(skip)]
    #[schemars(skip)]
    pub file: std::sync::Arc<crate::diag::SourceFile>,
    /// The workflow's name, shown in run lists and reports. Defaults to the file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::scalar_string")]
    pub name: Option<Spanned<String>>,
    /// The name of each run; may use `${{ }}` expressions (`bench ${{ inputs.model }}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_name: Option<Spanned<String>>,
    /// When the workflow runs: `push` (a git hook installed by `gpuflow hooks install`) and
    /// `workflow_dispatch` (`gpuflow run`, with `--input name=value`).
    #[serde(default)]
    pub on: Triggers,
    /// Environment variables for every step of every job.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[schemars(schema_with = "schema::env")]
    pub env: Env,
    /// Defaults for the `run:` steps of every job.
    #[serde(default, skip_serializing_if = "Defaults::is_empty")]
    pub defaults: Defaults,
    /// Runs of the same group never overlap: a new one waits, or cancels the running one
    /// with `cancel-in-progress: true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
    /// GitHub token permissions. Accepted so GitHub workflows load; gpuflow has no token
    /// and ignores them.
    #[serde(default, skip_serializing)]
    #[schemars(schema_with = "permissions_schema")]
    pub permissions: Option<Spanned<String>>,
    /// The jobs, by id. A job id starts with a letter or `_` and holds letters, digits, `-`
    /// and `_`. Jobs run in parallel unless `needs` orders them.
    #[schemars(schema_with = "jobs_schema")]
    pub jobs: IndexMap<String, Job>,
    /// The composite actions the steps use, loaded and checked, by their `uses:` text
    /// (`./actions/sglang-server`, `team/actions/vllm@v1`; see [`super::Uses::action_key`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub actions: IndexMap<String, Action>,
}

fn permissions_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "oneOf": [
            { "type": "string" },
            { "type": "object", "additionalProperties": { "type": "string" } }
        ]
    })
}

fn jobs_schema(generator: &mut SchemaGenerator) -> Schema {
    let job = generator.subschema_for::<Job>();
    json_schema!({
        "type": "object",
        "minProperties": 1,
        "propertyNames": { "pattern": "^[A-Za-z_][A-Za-z0-9_-]*$" },
        "additionalProperties": job
    })
}

/// `concurrency:`: a group name (`concurrency: bench-${{ github.ref }}`) or a mapping.
#[derive(Clone, Debug, PartialEq)]
pub struct Concurrency {
    /// Runs (or jobs) with the same group never run at the same time.
    pub group: Spanned<String>,
    /// Cancel the running member of the group when a new one starts (default `false`).
    pub cancel_in_progress: Option<BoolOrExpr>,
}

impl Serialize for Concurrency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("group", &self.group)?;
        if let Some(c) = &self.cancel_in_progress {
            m.serialize_entry("cancel-in-progress", c)?;
        }
        m.end()
    }
}

impl JsonSchema for Concurrency {
    fn schema_name() -> Cow<'static, str> {
        "Concurrency".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let cancel = generator.subschema_for::<BoolOrExpr>();
        json_schema!({
            "description": "A group name, or `{group, cancel-in-progress}`.",
            "oneOf": [
                { "type": "string" },
                {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["group"],
                    "properties": {
                        "group": {
                            "type": "string",
                            "description": "Runs with the same group never run at the same time."
                        },
                        "cancel-in-progress": cancel
                    }
                }
            ]
        })
    }
}
