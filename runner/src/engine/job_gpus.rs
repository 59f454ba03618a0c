//! A job's `gpus:` as the allocator's [`Request`]: expressions (`${{ matrix.gpus }}`)
//! evaluated with the job's contexts, the constraint named in the allocator's terms.

use crate::diag::SourceFile;
use crate::expr::{MapContext, parse_template};
use crate::gpu::{Placement, Request, Want};
use crate::workflow::model::{GpuConstraint, GpuDevices, GpuRequest};

use super::evaluate::{eval_string, expr_message};

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
