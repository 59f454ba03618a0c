//! A job's `gpus:` as the allocator's [`Request`]: expressions (`${{ matrix.gpus }}`)
//! evaluated with the job's contexts, the constraint named in the allocator's terms; and the
//! GPUs leased for it as the `runner.gpus` context.

use crate::diag::SourceFile;
use crate::expr::{MapContext, Value, parse_template};
use crate::gpu::{JobGpus, Placement, Request, Want};
use crate::workflow::model::{GpuConstraint, GpuDevices, GpuRequest};

use super::evaluate::{eval_string, expr_message, object};

/// The request of `gpus` (a job's), evaluated; `None` when it asks for none (an expression
/// yielding `0` or nothing).
pub fn request(
    gpus: &GpuRequest,
    ctx: &MapContext,
    file: &SourceFile,
) -> Result<Option<Request>, String> {
    let want = match &gpus.devices {
        GpuDevices::All => Want::All,
        GpuDevices::Count(n) => Want::Count(*n),
        GpuDevices::Ids(ids) => Want::Ids(
            ids.iter()
                .map(|id| eval_string(id, ctx, file))
                .collect::<Result<_, _>>()?,
        ),
        GpuDevices::Expr(e) => {
            let value = parse_template(&e.value)
                .and_then(|t| t.evaluate(ctx))
                .map_err(|x| expr_message(e, &x, file))?;
            let located = |m: String| format!("{}: {m}", file.location(e.span));
            match super::container_inputs::gpus(&value).map_err(located)? {
                crate::backend::GpuRequest::None => return Ok(None),
                crate::backend::GpuRequest::All => Want::All,
                crate::backend::GpuRequest::Count(0) => return Ok(None),
                crate::backend::GpuRequest::Count(n) => Want::Count(n),
                crate::backend::GpuRequest::Devices(ids) if ids.is_empty() => return Ok(None),
                crate::backend::GpuRequest::Devices(ids) => Want::Ids(ids),
            }
        }
    };
    Ok(Some(Request {
        want,
        placement: gpus.constraint.as_ref().map(|c| match c.value {
            GpuConstraint::SameNvlink => Placement::SameNvlink,
            GpuConstraint::SamePcieSwitch => Placement::SamePcieSwitch,
            GpuConstraint::SameNuma => Placement::SameNuma,
        }),
    }))
}

/// `runner.gpus`: the GPUs leased to the job, in the order `CUDA_VISIBLE_DEVICES` lists them,
/// each `{index, uuid, model, memory_mib}`. An empty list when the job has none leased (it asks
/// for none, or runs where the host's GPUs are not known), so `runner.gpus[0]` is `null` and
/// `toJSON(runner.gpus)` is `[]` rather than a missing property.
pub fn context(gpus: Option<&JobGpus>) -> Value {
    let Some(gpus) = gpus else {
        return Value::Array(Vec::new());
    };
    Value::Array(
        gpus.described
            .iter()
            .map(|g| {
                object([
                    ("index", Value::Number(f64::from(g.index))),
                    ("uuid", Value::String(g.uuid.clone())),
                    ("model", Value::String(g.model.clone())),
                    // Exact: an f64 holds every whole number below 2^53 MiB.
                    ("memory_mib", Value::Number(g.memory_mib as f64)),
                ])
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::{Span, Spanned};
    use crate::expr::Value;

    fn expr(text: &str) -> GpuRequest {
        GpuRequest {
            span: Span::default(),
            devices: GpuDevices::Expr(Spanned::new(text.into(), Span::default())),
            constraint: Some(Spanned::new(GpuConstraint::SamePcieSwitch, Span::default())),
        }
    }

    #[test]
    fn expressions_are_evaluated_with_the_matrix() {
        let file = SourceFile::new("w.yml", "x");
        let mut ctx = MapContext::new();
        ctx.insert(
            "matrix",
            Value::Object(
                [("gpus".to_string(), Value::Number(2.0))]
                    .into_iter()
                    .collect(),
            ),
        );
        let r = request(&expr("${{ matrix.gpus }}"), &ctx, &file)
            .unwrap()
            .unwrap();
        assert_eq!(r.want, Want::Count(2));
        assert_eq!(r.placement, Some(Placement::SamePcieSwitch));
        ctx.insert(
            "matrix",
            Value::Object(
                [("gpus".to_string(), Value::Number(0.0))]
                    .into_iter()
                    .collect(),
            ),
        );
        assert_eq!(
            request(&expr("${{ matrix.gpus }}"), &ctx, &file).unwrap(),
            None
        );
    }
}
