//! Strings that embed `${{ }}`: any workflow string value, and `if:` conditions. Splits text
//! into literal and expression segments with spans relative to the string, and evaluates them
//! the way GitHub does (a string that is exactly one expression keeps the value's type).

use std::ops::Range;

use super::ast::Expr;
use super::context::Context;
use super::error::ExprError;
use super::eval::evaluate;
use super::parser::{Contexts, parse};
use super::value::Value;

#[derive(Clone, Debug, PartialEq)]
enum Segment {
    Literal(String),
    /// The parsed expression and the span of its source between `${{` and `}}`, without the
    /// surrounding blanks.
    Expr(Expr, Range<usize>),
}

/// A string value that may embed `${{ }}` expressions.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    segments: Vec<Segment>,
}

/// Parses a string with embedded `${{ }}`. Expression spans (and error spans) are relative to
/// `s`. An unclosed `${{` is an error at its position.
pub fn parse_template(s: &str) -> Result<Template, ExprError> {
    let mut segments = Vec::new();
    let mut rest_start = 0;
    while let Some(found) = s[rest_start..].find("${{") {
        let open = rest_start + found;
        if open > rest_start {
            segments.push(Segment::Literal(s[rest_start..open].to_string()));
        }
        let body_start = open + 3;
        let Some(body_end) = find_close(&s[body_start..]).map(|i| body_start + i) else {
            return Err(ExprError::parse("unclosed `${{`", open..body_start)
                .with_hint(Some("close the expression with `}}`".into())));
        };
        let body = &s[body_start..body_end];
        if body.trim().is_empty() {
            return Err(
                ExprError::parse("empty `${{ }}`", open..body_end + 2).with_hint(Some(
                    "put an expression inside, or remove the braces".into(),
                )),
            );
        }
        let expr = parse(body, Contexts::Any).map_err(|e| e.shifted(body_start))?;
        let expr = shift_expr(expr, body_start);
        let lead = body.len() - body.trim_start().len();
        let source = body_start + lead..body_start + lead + body.trim().len();
        segments.push(Segment::Expr(expr, source));
        rest_start = body_end + 2;
    }
    if rest_start < s.len() || segments.is_empty() {
        segments.push(Segment::Literal(s[rest_start..].to_string()));
    }
    Ok(Template { segments })
}

/// The first `}}` outside a string literal.
fn find_close(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => in_string = !in_string,
            b'}' if !in_string && bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Moves every span in a tree by `offset`, so they are relative to the whole string.
fn shift_expr(mut e: Expr, offset: usize) -> Expr {
    e.shift(offset);
    e
}

impl Template {
    /// Each embedded expression with the span of its source within the string.
    pub fn expressions(&self) -> impl Iterator<Item = (&Expr, Range<usize>)> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Expr(e, span) => Some((e, span.clone())),
            Segment::Literal(_) => None,
        })
    }

    /// True when the string has no `${{ }}`.
    pub fn is_literal(&self) -> bool {
        self.expressions().next().is_none()
    }

    /// A string that is exactly one `${{ expr }}` yields the value itself (typed, as GitHub does
    /// for e.g. `matrix: ${{ fromJSON(..) }}`); otherwise segments are joined as strings.
    pub fn evaluate(&self, ctx: &dyn Context) -> Result<Value, ExprError> {
        if let [Segment::Expr(e, _)] = self.segments.as_slice() {
            return evaluate(e, ctx);
        }
        let mut out = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Literal(text) => out.push_str(text),
                Segment::Expr(e, _) => out.push_str(&evaluate(e, ctx)?.to_expr_string()),
            }
        }
        Ok(Value::String(out))
    }
}

/// An `if:` condition.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    expr: Expr,
    /// No status function was called, so the condition means `success() && (…)`.
    implicit_success: bool,
}

/// Parses an `if:` value: an optional `${{ }}` around the whole value is stripped, and without
/// a status function the condition means `success() && (…)`. Spans are relative to `s`.
pub fn parse_condition(s: &str) -> Result<Condition, ExprError> {
    let trimmed = s.trim();
    let lead = s.len() - s.trim_start().len();
    let expr = if trimmed.starts_with("${{")
        && trimmed.ends_with("}}")
        && find_close(&trimmed[3..]).map(|i| i + 3) == Some(trimmed.len() - 2)
    {
        let template = parse_template(s)?;
        let (e, _) = template
            .expressions()
            .next()
            .expect("a wrapped condition has one expression");
        e.clone()
    } else {
        let e = parse(trimmed, Contexts::Any).map_err(|e| {
            let e = e.shifted(lead);
            if trimmed.contains("${{") {
                e.with_hint(Some(
                    "wrap the whole condition in one `${{ }}`, or leave the braces out".into(),
                ))
            } else {
                e
            }
        })?;
        shift_expr(e, lead)
    };
    Ok(Condition {
        implicit_success: !expr.calls_status_function(),
        expr,
    })
}

impl Condition {
    pub fn expr(&self) -> &Expr {
        &self.expr
    }

    /// Whether the step or job should run.
    pub fn evaluate(&self, ctx: &dyn Context) -> Result<bool, ExprError> {
        if self.implicit_success && ctx.job_status() != super::context::JobStatus::Success {
            return Ok(false);
        }
        Ok(evaluate(&self.expr, ctx)?.is_truthy())
    }
}
