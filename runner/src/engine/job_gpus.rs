//! A job's `gpus:` evaluated once, when the job starts ([`AskedGpus`]): expressions
//! (`${{ matrix.gpus }}`) with the job's contexts, the devices in the backend's terms (what
//! Docker is asked for where the host's GPUs are not known) and, from them, the allocator's
//! [`Request`]; and the GPUs leased for it as the `runner.gpus` context.

use crate::backend::GpuRequest as Devices;
use crate::diag::SourceFile;
use crate::expr::{MapContext, Value, parse_template};
use crate::gpu::{JobGpus, Placement, Request, Want};
use crate::workflow::model::{GpuConstraint, GpuDevices, GpuRequest};

use super::evaluate::{eval_string, expr_message, object};

/// A job's `gpus:`, evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AskedGpus {
    /// Which GPUs; [`Devices::None`] for a request of none (an expression yielding `0`, `[]`
    /// or nothing).
    pub devices: Devices,
    pub placement: Option<Placement>,
}

impl AskedGpus {
    /// What the allocator leases; `None` when it asks for none.
    pub fn lease_request(&self) -> Option<Request> {
        let want = match &self.devices {
            Devices::None | Devices::Count(0) => return None,
            Devices::Devices(ids) if ids.is_empty() => return None,
            Devices::All => Want::All,
            Devices::Count(n) => Want::Count(*n),
            Devices::Devices(ids) => Want::Ids(ids.clone()),
        };
        Some(Request {
            want,
            placement: self.placement,
        })
    }
}

/// The GPUs a starting job has.
#[derive(Debug, Default)]
pub struct GrantedGpus {
    /// Leased to it on a host whose GPUs are known; freed when dropped.
    pub leased: Option<JobGpus>,
    /// Its `gpus:` evaluated: what its containers get, as asked, where the host's GPUs are
    /// not known (so nothing was leased).
    pub asked: Devices,
}

/// `gpus` (a job's) evaluated with the job's contexts.
pub fn evaluate(
    gpus: &GpuRequest,
    ctx: &MapContext,
    file: &SourceFile,
) -> Result<AskedGpus, String> {
    let devices = match &gpus.devices {
        GpuDevices::All => Devices::All,
        GpuDevices::Count(n) => Devices::Count(*n),
        GpuDevices::Ids(ids) => Devices::Devices(
            ids.iter()
                .map(|id| eval_string(id, ctx, file))
                .collect::<Result<_, _>>()?,
        ),
        GpuDevices::Expr(e) => {
            let value = parse_template(&e.value)
                .and_then(|t| t.evaluate(ctx))
                .map_err(|x| expr_message(e, &x, file))?;
            let located = |m: String| format!("{}: {m}", file.location(e.span));
            super::container_inputs::gpus(&value).map_err(located)?
        }
    };
    Ok(AskedGpus {
        devices,
        placement: gpus.constraint.as_ref().map(|c| match c.value {
            GpuConstraint::SameNvlink => Placement::SameNvlink,
            GpuConstraint::SamePcieSwitch => Placement::SamePcieSwitch,
            GpuConstraint::SameNuma => Placement::SameNuma,
        }),
    })
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
        let asked = evaluate(&expr("${{ matrix.gpus }}"), &ctx, &file).unwrap();
        assert_eq!(asked.devices, Devices::Count(2));
        let r = asked.lease_request().unwrap();
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
        let none = evaluate(&expr("${{ matrix.gpus }}"), &ctx, &file).unwrap();
        assert_eq!(none.lease_request(), None);
    }
}
