//! Builds the planner's plain input from a loaded workflow, and keeps the spans its errors'
//! tags and indexes refer to, so a cycle or a bad matrix is reported at the right place.

use serde_json::Value as Json;

use super::{JobInput, MatrixInput, NeedsRef, StepInput, StepKind, WorkflowInput};
use crate::diag::Span;
use crate::workflow::model::{BoolOrExpr, Matrix, MatrixDim, NumberOrExpr, Step, Value, Workflow};

/// The planner's input plus where each of its parts was written.
#[derive(Debug)]
pub struct ModelInput {
    pub input: WorkflowInput,
    /// `needs_spans[tag]`: the `needs` entry a [`NeedsRef`]'s tag stands for.
    pub needs_spans: Vec<Span>,
    /// Jobs whose matrix is computed at run time and so could not be expanded here.
    pub dynamic_matrix: Vec<String>,
}

pub fn from_workflow(wf: &Workflow, fallback_name: &str) -> ModelInput {
    let mut needs_spans = Vec::new();
    let mut dynamic_matrix = Vec::new();
    let jobs = wf
        .jobs
        .values()
        .map(|job| {
            let mut input = JobInput::new(job.id.value.clone());
            input.name = job.name.as_ref().map(|n| n.value.clone());
            input.needs = job
                .needs
                .iter()
                .map(|n| {
                    needs_spans.push(n.span);
                    NeedsRef {
                        job: n.value.clone(),
                        tag: needs_spans.len() - 1,
                    }
                })
                .collect();
            let strategy = job.strategy.as_ref();
            input.matrix = match strategy.and_then(|s| s.matrix.as_ref()) {
                None => None,
                Some(Matrix::Expr(_)) => {
                    dynamic_matrix.push(job.id.value.clone());
                    None
                }
                Some(Matrix::Dims(d)) => {
                    if d.dims
                        .values()
                        .any(|v| matches!(v.value, MatrixDim::Expr(_)))
                    {
                        dynamic_matrix.push(job.id.value.clone());
                        None
                    } else {
                        Some(MatrixInput {
                            dimensions: d
                                .dims
                                .iter()
                                .map(|(k, v)| {
                                    let values = match &v.value {
                                        MatrixDim::Values(vs) => {
                                            vs.iter().map(|v| to_json(&v.value)).collect()
                                        }
                                        MatrixDim::Expr(_) => Vec::new(),
                                    };
                                    (k.clone(), values)
                                })
                                .collect(),
                            include: d.include.iter().map(|r| row(&r.value)).collect(),
                            exclude: d.exclude.iter().map(|r| row(&r.value)).collect(),
                        })
                    }
                }
            };
            input.runs_on = (!job.runs_on.is_empty()).then(|| {
                job.runs_on
                    .iter()
                    .map(|r| r.value.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            });
            input.gpus.clone_from(&job.gpus);
            input.steps = job.steps.iter().map(step).collect();
            if let Some(s) = strategy {
                if let Some(NumberOrExpr::Number(n)) = s.max_parallel {
                    // The loader has checked it is a positive whole number.
                    input.max_parallel = Some(n as u32);
                }
                if let Some(BoolOrExpr::Bool(b)) = s.fail_fast {
                    input.fail_fast = b;
                }
            }
            input
        })
        .collect();
    ModelInput {
        input: WorkflowInput {
            name: wf
                .name
                .as_ref()
                .map_or_else(|| fallback_name.to_owned(), |n| n.value.clone()),
            jobs,
        },
        needs_spans,
        dynamic_matrix,
    }
}

fn step(s: &Step) -> StepInput {
    StepInput {
        id: s.id.as_ref().map(|i| i.value.clone()),
        name: s.name.as_ref().map(|n| n.value.clone()),
        kind: match (&s.uses, &s.run) {
            (Some(u), _) => StepKind::Uses(u.value.to_string()),
            (None, Some(r)) => StepKind::Run(r.value.clone()),
            (None, None) => StepKind::Run(String::new()),
        },
    }
}

fn row(
    r: &indexmap::IndexMap<String, crate::diag::Spanned<Value>>,
) -> indexmap::IndexMap<String, Json> {
    r.iter()
        .map(|(k, v)| (k.clone(), to_json(&v.value)))
        .collect()
}

/// Matrix values keep their YAML types, as GitHub's do (`matrix.bs == 128` compares numbers).
pub fn to_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::String(s) => Json::String(s.clone()),
        Value::List(items) => Json::Array(items.iter().map(|i| to_json(&i.value)).collect()),
        Value::Map(m) => Json::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), to_json(&v.value)))
                .collect(),
        ),
    }
}
