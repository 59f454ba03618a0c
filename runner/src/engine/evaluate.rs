//! Evaluating the model's values with `${{ }}` against a context, with errors that say
//! `file:line:col: message (help: …)`: strings, `with:` values, numbers of minutes.

use crate::diag::{SourceFile, Spanned};
use crate::expr::{ExprError, MapContext, Value, parse_template};
use crate::plan::PlannedJob;
use crate::workflow::model::{NumberOrExpr, Value as ModelValue};

/// `{k: v, …}` from pairs.
pub fn object<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// A `file:line:col: message (help: …)` for an expression error in `s`.
pub(crate) fn expr_message(s: &Spanned<String>, e: &ExprError, file: &SourceFile) -> String {
    let mut m = format!(
        "{}: {}",
        file.location(s.span.inner(e.span.clone())),
        e.message
    );
    if let Some(h) = &e.hint {
        m.push_str(&format!(" (help: {h})"));
    }
    m
}

/// A string value with `${{ }}` evaluated.
pub(crate) fn eval_string(
    s: &Spanned<String>,
    ctx: &MapContext,
    file: &SourceFile,
) -> Result<String, String> {
    parse_template(&s.value)
        .and_then(|t| t.evaluate(ctx))
        .map(|v| v.to_expr_string())
        .map_err(|e| expr_message(s, &e, file))
}

/// A `with:` value: scalars with `${{ }}` evaluated (one whole expression keeps its type),
/// lists and mappings evaluated inside.
pub(crate) fn eval_value(
    v: &Spanned<ModelValue>,
    ctx: &MapContext,
    file: &SourceFile,
) -> Result<Value, String> {
    Ok(match &v.value {
        ModelValue::Null => Value::Null,
        ModelValue::Bool(b) => Value::Bool(*b),
        ModelValue::Int(i) => Value::Number(*i as f64),
        ModelValue::Float(f) => Value::Number(*f),
        ModelValue::String(s) => {
            let spanned = Spanned::new(s.clone(), v.span);
            parse_template(s)
                .and_then(|t| t.evaluate(ctx))
                .map_err(|e| expr_message(&spanned, &e, file))?
        }
        ModelValue::List(items) => Value::Array(
            items
                .iter()
                .map(|i| eval_value(i, ctx, file))
                .collect::<Result<_, _>>()?,
        ),
        ModelValue::Map(m) => Value::Object(
            m.iter()
                .map(|(k, i)| Ok((k.clone(), eval_value(i, ctx, file)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

pub(crate) fn number(n: &NumberOrExpr, ctx: &MapContext, file: &SourceFile) -> Result<f64, String> {
    match n {
        NumberOrExpr::Number(n) => Ok(*n),
        NumberOrExpr::Expr(e) => {
            let v = parse_template(&e.value)
                .and_then(|t| t.evaluate(ctx))
                .map_err(|x| expr_message(e, &x, file))?;
            let n = v.to_number();
            if n.is_nan() || n <= 0.0 {
                return Err(format!(
                    "{}: `{}` is not a positive number of minutes",
                    file.location(e.span),
                    v.to_expr_string()
                ));
            }
            Ok(n)
        }
    }
}

/// A cell's matrix values as `${{ matrix.x }}` and the results store write them.
pub(crate) fn matrix_text(planned: &PlannedJob) -> indexmap::IndexMap<String, String> {
    planned
        .matrix
        .iter()
        .map(|(k, v)| (k.clone(), Value::from_json(v.clone()).to_expr_string()))
        .collect()
}

/// The `matrix` context of a planned job run: its cell's values.
pub(crate) fn matrix_value(planned: &PlannedJob) -> Value {
    Value::Object(
        planned
            .matrix
            .iter()
            .map(|(k, v)| (k.clone(), Value::from_json(v.clone())))
            .collect(),
    )
}
