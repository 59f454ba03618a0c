//! A job: where it runs (host, GPUs, container), its matrix, and its steps.

use std::borrow::Cow;

use indexmap::IndexMap;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use super::{BoolOrExpr, Defaults, Env, NumberOrExpr, Search, Step, Value, schema};
use crate::diag::{Span, Spanned};

/// GitHub job keys that load with a warning: they have no meaning without GitHub.
pub const GITHUB_ONLY_JOB_KEYS: &[&str] = &["permissions", "environment", "concurrency"];

/// One job of a workflow.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[schemars(transform = job_schema_ignored_keys)]
pub struct Job {
    /// The job's id: its key under `jobs:`.
    #[serde(skip)]
    #[schemars(skip)]
    pub id: Spanned<String>,
    /// The whole job mapping, for diagnostics about the job as a whole.
    #[serde(skip)]
    #[schemars(skip)]
    pub span: Span,
    /// The name shown in progress and reports; may use `${{ matrix.* }}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<Spanned<String>>,
    /// Jobs that must succeed before this one starts (`needs: build` or a list). Their
    /// outputs are read as `needs.<job>.outputs.<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::string_or_list")]
    pub needs: Vec<Spanned<String>>,
    /// Run the job only when this expression is true (`${{ }}` may be left out).
    #[serde(rename = "if", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::scalar_string")]
    pub condition: Option<Spanned<String>>,
    /// The host to run on, by name or label (from gpuflow's host configuration); a list
    /// means a host with all those labels; `{group, labels}` is read as its labels. Default:
    /// the local Docker engine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::runs_on")]
    pub runs_on: Vec<Spanned<String>>,
    /// GPUs allocated to the job for its whole duration, exclusively: `all`, a count, a
    /// list of device indexes or UUIDs, or `{count | ids, constraint}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<GpuRequest>,
    /// Environment variables for every step of the job.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[schemars(schema_with = "schema::env")]
    pub env: Env,
    /// Run the job once per combination of matrix values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// Cancel the job after this many minutes (default 360).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_minutes: Option<NumberOrExpr>,
    /// A failure of this job does not fail the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continue_on_error: Option<BoolOrExpr>,
    /// Values this job passes to the jobs that need it: name → expression
    /// (`${{ steps.bench.outputs.output_tok_s }}`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[schemars(schema_with = "schema::string_map")]
    pub outputs: IndexMap<String, Spanned<String>>,
    /// Run the job's `run:` steps inside this container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
    /// Side containers started for the job (a database, a cache), by name.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub services: IndexMap<String, Container>,
    /// Defaults for the job's `run:` steps.
    #[serde(default, skip_serializing_if = "Defaults::is_empty")]
    pub defaults: Defaults,
    /// The steps, run in order.
    #[schemars(length(min = 1))]
    pub steps: Vec<Step>,
}

fn job_schema_ignored_keys(schema: &mut Schema) {
    schema::accept_ignored_keys(schema, GITHUB_ONLY_JOB_KEYS);
}

/// `strategy:`: the matrix and how its cells run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Strategy {
    /// Dimensions → values; the job runs once per combination. `include` adds or extends
    /// combinations, `exclude` removes them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Matrix>,
    /// Cancel the other cells when one fails (default `true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_fast: Option<BoolOrExpr>,
    /// At most this many cells run at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<NumberOrExpr>,
    /// Run only the cells a search needs instead of every cell (docs/campaigns.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<Search>,
}

/// `strategy.matrix`: dimensions, or one expression that yields the whole matrix
/// (`${{ fromJSON(needs.setup.outputs.matrix) }}`).
#[derive(Clone, Debug, PartialEq)]
pub enum Matrix {
    /// Written out as dimensions.
    Dims(MatrixDims),
    /// One expression yielding the matrix as JSON.
    Expr(Spanned<String>),
}

/// A matrix written out: dimensions, `include` and `exclude`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MatrixDims {
    /// Dimension name → its values (or an expression yielding the list), in file order.
    pub dims: IndexMap<String, Spanned<MatrixDim>>,
    /// Extra or extended combinations.
    pub include: Vec<Spanned<MatrixRow>>,
    /// Combinations to remove (a partial row removes every cell it matches).
    pub exclude: Vec<Spanned<MatrixRow>>,
}

/// One dimension's values.
#[derive(Clone, Debug, PartialEq)]
pub enum MatrixDim {
    /// The values, in order.
    Values(Vec<Spanned<Value>>),
    /// An expression yielding the list (`${{ fromJSON(inputs.sizes) }}`).
    Expr(Spanned<String>),
}

/// One `include`/`exclude` entry: dimension (or extra variable) → value.
pub type MatrixRow = IndexMap<String, Spanned<Value>>;

impl Serialize for Matrix {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Self::Expr(e) => s.serialize_str(e),
            Self::Dims(d) => {
                let mut m = s.serialize_map(None)?;
                for (k, v) in &d.dims {
                    m.serialize_entry(k, v)?;
                }
                if !d.include.is_empty() {
                    m.serialize_entry("include", &d.include)?;
                }
                if !d.exclude.is_empty() {
                    m.serialize_entry("exclude", &d.exclude)?;
                }
                m.end()
            }
        }
    }
}

impl Serialize for MatrixDim {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Values(v) => s.collect_seq(v),
            Self::Expr(e) => s.serialize_str(e),
        }
    }
}

impl JsonSchema for Matrix {
    fn schema_name() -> Cow<'static, str> {
        "Matrix".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let row = json_schema!({ "type": "object" });
        json_schema!({
            "description": "Dimension → list of values, plus `include`/`exclude` lists of mappings; or one `${{ }}` expression.",
            "oneOf": [
                schema::expression(),
                {
                    "type": "object",
                    "properties": {
                        // Lists only: the loader refuses an expression here.
                        "include": { "type": "array", "items": row },
                        "exclude": { "type": "array", "items": row }
                    },
                    "additionalProperties": {
                        "oneOf": [{ "type": "array", "minItems": 1 }, schema::expression()]
                    }
                }
            ]
        })
    }
}

/// `gpus:`: which GPUs a job (or a started container) gets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuRequest {
    /// The whole `gpus:` value.
    #[serde(skip)]
    pub span: Span,
    /// How many GPUs, or which ones.
    pub devices: GpuDevices,
    /// Where the GPUs must sit relative to each other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint: Option<Spanned<GpuConstraint>>,
}

/// How many GPUs, or which.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuDevices {
    /// Every GPU of the host.
    All,
    /// This many free GPUs.
    Count(u32),
    /// These devices, by index (`0`) or UUID (`GPU-…`).
    Ids(Vec<Spanned<String>>),
    /// Decided when the job runs (`${{ matrix.gpus }}`).
    Expr(Spanned<String>),
}

/// A placement constraint for a multi-GPU request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GpuConstraint {
    /// All GPUs connected to each other by NVLink.
    SameNvlink,
    /// All GPUs behind one PCIe switch.
    SamePcieSwitch,
    /// All GPUs on one NUMA node.
    SameNuma,
}

impl GpuRequest {
    /// `n` GPUs, anywhere on the host, written nowhere (a planner's input built in code).
    pub fn count(n: u32) -> Self {
        Self {
            span: Span::default(),
            devices: GpuDevices::Count(n),
            constraint: None,
        }
    }
}

/// `gpus` as written, for display: `8`, `all`, `0,1`, `${{ matrix.gpus }}`.
impl std::fmt::Display for GpuRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.devices {
            GpuDevices::All => f.write_str("all"),
            GpuDevices::Count(n) => write!(f, "{n}"),
            GpuDevices::Ids(ids) => {
                let ids: Vec<&str> = ids.iter().map(|i| i.value.as_str()).collect();
                f.write_str(&ids.join(","))
            }
            GpuDevices::Expr(e) => f.write_str(&e.value),
        }
    }
}

impl GpuConstraint {
    pub const NAMES: &[&str] = &["same-nvlink", "same-pcie-switch", "same-numa"];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "same-nvlink" => Self::SameNvlink,
            "same-pcie-switch" => Self::SamePcieSwitch,
            "same-numa" => Self::SameNuma,
            _ => return None,
        })
    }
}

impl JsonSchema for GpuRequest {
    fn schema_name() -> Cow<'static, str> {
        "GpuRequest".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let constraint = generator.subschema_for::<GpuConstraint>();
        let ids = json_schema!({
            "type": "array",
            "minItems": 1,
            "items": { "type": ["string", "integer"] },
            "description": "Device indexes (`0`) or UUIDs (`GPU-…`)."
        });
        json_schema!({
            "description": "`all`, a number of GPUs, a list of device indexes or UUIDs, or `{count | ids, constraint}`.",
            "oneOf": [
                { "const": "all" },
                { "type": "integer", "minimum": 1 },
                ids,
                schema::expression(),
                {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "count": { "oneOf": [{ "const": "all" }, { "type": "integer", "minimum": 1 }] },
                        "ids": ids,
                        "constraint": constraint
                    }
                }
            ]
        })
    }
}

/// A container: `container: image` or `{image, env, ports, volumes, options}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Container {
    /// The image (`nvcr.io/nvidia/pytorch:24.05-py3`).
    pub image: Spanned<String>,
    /// Environment variables inside the container.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub env: Env,
    /// Published ports (`8000:8000`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Spanned<String>>,
    /// Mounted volumes (`/models:/models:ro`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Spanned<String>>,
    /// Extra `docker create` options.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Spanned<String>>,
}

impl JsonSchema for Container {
    fn schema_name() -> Cow<'static, str> {
        "Container".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let env = schema::env(generator);
        let list = json_schema!({ "type": "array", "items": { "type": ["string", "integer"] } });
        json_schema!({
            "description": "An image name, or `{image, env, ports, volumes, options}`.",
            "oneOf": [
                { "type": "string" },
                {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["image"],
                    "properties": {
                        "image": { "type": "string", "description": "The image to run." },
                        "env": env,
                        "ports": list,
                        "volumes": list,
                        "options": { "type": "string", "description": "Extra `docker create` options." },
                        "credentials": {
                            "description": "Accepted for GitHub Actions compatibility; gpuflow ignores it (with a warning)."
                        }
                    }
                }
            ]
        })
    }
}
