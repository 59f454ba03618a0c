//! What a ready job run is judged with: the `needs` context (the results and outputs of the
//! jobs it needs), its `matrix`, its `if:` (default `success()`) and, once it failed, its
//! `continue-on-error`.

use std::collections::HashMap;

use indexmap::IndexMap;

use crate::engine::evaluate::{matrix_value, object};
use crate::engine::shared::Shared;
use crate::events::{JobResult, JobSummary};
use crate::expr::{JobStatus, MapContext, Value, parse_condition, parse_template};
use crate::plan::PlannedJob;
use crate::workflow::model::BoolOrExpr;

/// Whether every job `planned` needs succeeded, as `needs` tells.
pub(super) fn needs_succeeded(planned: &PlannedJob, needs: &Value) -> bool {
    planned.needs.iter().all(|n| {
        needs
            .get_property(n)
            .and_then(|j| j.get_property("result"))
            .is_some_and(|r| r.to_expr_string() == "success")
    })
}

/// The context a ready job's `if:` and `gpus:` are evaluated in: the run's, `needs` and
/// `matrix`, with the status its needs left.
pub(super) fn job_context(
    shared: &Shared,
    planned: &PlannedJob,
    needs: &Value,
    needs_ok: bool,
) -> MapContext {
    let mut ctx = MapContext::new().with_status(if needs_ok {
        JobStatus::Success
    } else {
        JobStatus::Failure
    });
    for (k, v) in &shared.base {
        ctx.insert(k.clone(), v.clone());
    }
    ctx.insert("needs", needs.clone());
    ctx.insert("matrix", matrix_value(planned));
    ctx
}

/// Whether the job's `if:` holds in `ctx` (without one: whether its needs succeeded), or why
/// it could not be evaluated.
pub(super) fn condition_holds(
    shared: &Shared,
    planned: &PlannedJob,
    ctx: &MapContext,
    needs_ok: bool,
) -> Result<bool, String> {
    let wf = &shared.wf;
    match &wf.jobs[&planned.job_id].condition {
        None => Ok(needs_ok),
        Some(c) => parse_condition(&c.value)
            .and_then(|cond| cond.evaluate(ctx))
            .map_err(|e| {
                format!(
                    "{}: `if` failed: {}",
                    wf.file.location(c.span.inner(e.span.clone())),
                    e.message
                )
            }),
    }
}

/// `needs.<job>.result` and `.outputs` for the jobs `planned` needs. A matrix job's result is
/// `failure` if any cell failed, `cancelled` if any was cancelled, `skipped` if all were.
pub fn needs_context(
    planned: &PlannedJob,
    runs: &[PlannedJob],
    results: &[Option<JobSummary>],
    outputs: &HashMap<String, IndexMap<String, String>>,
    skipped_jobs: &[String],
) -> Value {
    let mut needs = IndexMap::new();
    for need in &planned.needs {
        let cells: Vec<JobResult> = runs
            .iter()
            .zip(results)
            .filter(|(r, _)| &r.job_id == need)
            .filter_map(|(_, s)| {
                s.as_ref().map(|s| {
                    if s.failure_allowed {
                        JobResult::Success
                    } else {
                        s.result
                    }
                })
            })
            .collect();
        let result = if cells.contains(&JobResult::Failure) {
            JobResult::Failure
        } else if cells.contains(&JobResult::Cancelled) {
            JobResult::Cancelled
        } else if cells.is_empty() && skipped_jobs.contains(need)
            || !cells.is_empty() && cells.iter().all(|c| *c == JobResult::Skipped)
        {
            JobResult::Skipped
        } else {
            JobResult::Success
        };
        let outs = outputs
            .get(need)
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect()
            })
            .unwrap_or_default();
        needs.insert(
            need.clone(),
            object([
                ("result", Value::String(result.as_str().into())),
                ("outputs", Value::Object(outs)),
            ]),
        );
    }
    Value::Object(needs)
}

pub(super) fn job_continue_on_error(
    c: Option<&BoolOrExpr>,
    shared: &Shared,
    planned: &PlannedJob,
) -> bool {
    match c {
        None => false,
        Some(BoolOrExpr::Bool(b)) => *b,
        Some(BoolOrExpr::Expr(e)) => {
            let mut ctx = MapContext::new();
            for (k, v) in &shared.base {
                ctx.insert(k.clone(), v.clone());
            }
            ctx.insert("matrix", matrix_value(planned));
            parse_template(&e.value)
                .and_then(|t| t.evaluate(&ctx))
                .is_ok_and(|v| v.is_truthy())
        }
    }
}
