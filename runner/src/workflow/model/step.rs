//! A step: a `run:` script or a `uses:` of a built-in, a local action, a remote action or an
//! image.

use std::borrow::Cow;
use std::fmt;

use indexmap::IndexMap;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use super::{BoolOrExpr, Env, NumberOrExpr, Value, schema};
use crate::diag::{Span, Spanned};

/// One step of a job or of a composite action. Exactly one of `run` and `uses` is set.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[schemars(extend("oneOf" = [{ "required": ["run"] }, { "required": ["uses"] }]))]
pub struct Step {
    /// The whole step mapping, for diagnostics about the step as a whole.
    #[serde(skip)]
    #[schemars(skip)]
    pub span: Span,
    /// Names the step so later steps read its results as `steps.<id>.outputs.<name>`;
    /// unique within the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Spanned<String>>,
    /// The name shown in progress and reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<Spanned<String>>,
    /// Run the step only when this expression is true (`${{ }}` may be left out). Without a
    /// status function it means `success() && (…)`.
    #[serde(rename = "if", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::scalar_string")]
    pub condition: Option<Spanned<String>>,
    /// A script, run by `shell`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub run: Option<Spanned<String>>,
    /// The shell of a `run:` step (`bash`, `sh`, `python`, or a command with `{0}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<Spanned<String>>,
    /// The folder a `run:` step starts in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<Spanned<String>>,
    /// Run this `run:` step inside the container an earlier `start-container` step started,
    /// by its name (`container: server`), instead of on the host or in the job's container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::scalar_string")]
    pub container: Option<Spanned<String>>,
    /// What the step runs: a built-in (`wait-for-health`), a local action
    /// (`./actions/sglang-server`), a remote action (`owner/repo/path@ref`) or an image
    /// (`docker://alpine:3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Uses")]
    pub uses: Option<Spanned<Uses>>,
    /// Inputs of the `uses:` step. Scalars are passed as strings; some built-ins take lists
    /// or mappings (`ports`, `env`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[schemars(schema_with = "with_schema")]
    pub with: IndexMap<String, Spanned<Value>>,
    /// Environment variables of this step.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[schemars(schema_with = "schema::env")]
    pub env: Env,
    /// Cancel the step after this many minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_minutes: Option<NumberOrExpr>,
    /// A failure of this step does not fail the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continue_on_error: Option<BoolOrExpr>,
}

fn with_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": { "type": ["string", "number", "boolean", "array", "object", "null"] }
    })
}

/// A parsed `uses:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uses {
    /// A bare name (`wait-for-health`): one of gpuflow's built-in steps.
    Builtin(String),
    /// `./path`: a composite action in this repository (a folder with `action.yml`).
    Local(String),
    /// `owner/repo[/path]@ref`: an action from another repository.
    Remote {
        /// The GitHub user or organisation.
        owner: String,
        /// The repository.
        repo: String,
        /// The action's folder inside the repository, if not its root.
        path: Option<String>,
        /// The branch, tag or commit after `@`.
        git_ref: String,
    },
    /// `docker://image`: run an image as the step.
    Docker(String),
}

impl Uses {
    /// The key the action a step uses is kept under in [`super::Workflow::actions`]: the
    /// `uses:` text of a local (`./x`) or remote (`owner/repo[/path]@ref`) action; `None` for
    /// built-ins and images.
    pub fn action_key(&self) -> Option<String> {
        match self {
            Self::Local(path) => Some(path.clone()),
            Self::Remote { .. } => Some(self.to_string()),
            Self::Builtin(_) | Self::Docker(_) => None,
        }
    }
}

impl fmt::Display for Uses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin(name) => f.write_str(name),
            Self::Local(path) => f.write_str(path),
            Self::Remote {
                owner,
                repo,
                path,
                git_ref,
            } => match path {
                Some(p) => write!(f, "{owner}/{repo}/{p}@{git_ref}"),
                None => write!(f, "{owner}/{repo}@{git_ref}"),
            },
            Self::Docker(image) => write!(f, "docker://{image}"),
        }
    }
}

impl Serialize for Uses {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl JsonSchema for Uses {
    fn schema_name() -> Cow<'static, str> {
        "Uses".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let builtins: Vec<&str> = crate::steps::builtins().map(|b| b.name).collect();
        json_schema!({
            "description": "A built-in step, `./local/action`, `owner/repo[/path]@ref` or `docker://image`.",
            "anyOf": [
                { "enum": builtins },
                { "type": "string", "pattern": "^\\./" },
                { "type": "string", "pattern": "^[^/@]+/[^/@]+(/[^@]+)?@.+$" },
                { "type": "string", "pattern": "^docker://.+" }
            ]
        })
    }
}
