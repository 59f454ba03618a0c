//! Evaluation of a parsed [`Expr`] over a [`Context`]: GitHub's operator semantics (operands
//! returned by `&&`/`||`, loose equality, null on a missed property or index, `*` filters),
//! lazy `case`, the status functions, and GitHub's memory limit on the strings an expression
//! builds. Values read from the context are borrowed, not copied, which is also how arrays and
//! objects keep their identity for `==`.

use std::borrow::Cow;
use std::ops::Range;

use super::ast::{CompareOp, Expr, Key, Node};
use super::context::{Context, JobStatus};
use super::error::ExprError;
use super::function::{self, Function};
use super::value::{Value, loose_cmp, loose_eq};

/// GitHub stops an expression whose strings grow past 1 MiB (counted as .NET does, two bytes
/// per character), so a hostile `format` cannot exhaust memory.
pub const MAX_MEMORY_BYTES: usize = 1024 * 1024;

/// Evaluates an expression. Errors carry spans relative to the expression's source text.
pub fn evaluate(expr: &Expr, ctx: &dyn Context) -> Result<Value, ExprError> {
    let mut ev = Evaluator { ctx, memory: 0 };
    Ok(ev.eval(expr)?.into_owned())
}

struct Evaluator<'a> {
    ctx: &'a dyn Context,
    memory: usize,
}

/// The result of a chain of property accesses: after a `*` the chain works on every element.
enum Access<'a> {
    One(Cow<'a, Value>),
    Filtered(Vec<Cow<'a, Value>>),
}

enum KeyValue<'k> {
    Name(&'k str),
    Value(&'k Value),
}

impl<'a> Evaluator<'a> {
    fn eval(&mut self, e: &'a Expr) -> Result<Cow<'a, Value>, ExprError> {
        Ok(match &e.node {
            Node::Literal(v) => Cow::Borrowed(v),
            Node::Context(name) => self
                .ctx
                .lookup(name)
                .map_or(Cow::Owned(Value::Null), Cow::Borrowed),
            Node::Index { .. } => match self.access(e)? {
                Access::One(v) => v,
                Access::Filtered(items) => Cow::Owned(Value::Array(
                    items.into_iter().map(Cow::into_owned).collect(),
                )),
            },
            Node::Not(inner) => Cow::Owned(Value::Bool(!self.eval(inner)?.is_truthy())),
            Node::Compare { op, left, right } => {
                let (l, r) = (self.eval(left)?, self.eval(right)?);
                let same = matches!((&l, &r), (Cow::Borrowed(a), Cow::Borrowed(b)) if std::ptr::eq(*a, *b));
                let ord = || loose_cmp(&l, &r);
                Cow::Owned(Value::Bool(match op {
                    CompareOp::Eq => loose_eq(&l, &r, same),
                    CompareOp::Ne => !loose_eq(&l, &r, same),
                    CompareOp::Lt => ord().is_some_and(|o| o.is_lt()),
                    CompareOp::Le => ord().is_some_and(|o| o.is_le()),
                    CompareOp::Gt => ord().is_some_and(|o| o.is_gt()),
                    CompareOp::Ge => ord().is_some_and(|o| o.is_ge()),
                }))
            }
            Node::And(items) => self.logical(items, false)?,
            Node::Or(items) => self.logical(items, true)?,
            Node::Call { func, args } => self.call(*func, args, &e.span)?,
        })
    }

    /// `&&` returns the first falsy operand (or the last), `||` the first truthy one (or the
    /// last); later operands are not evaluated.
    fn logical(&mut self, items: &'a [Expr], stop_when: bool) -> Result<Cow<'a, Value>, ExprError> {
        let mut last = Cow::Owned(Value::Null);
        for item in items {
            last = self.eval(item)?;
            if last.is_truthy() == stop_when {
                break;
            }
        }
        Ok(last)
    }

    fn access(&mut self, e: &'a Expr) -> Result<Access<'a>, ExprError> {
        let Node::Index { target, key } = &e.node else {
            return Ok(Access::One(self.eval(e)?));
        };
        let base = self.access(target)?;
        let key_value = match key {
            Key::Index(k) => Some(self.eval(k)?),
            _ => None,
        };
        let key_ref = match (key, &key_value) {
            (Key::Property(name), _) => Some(KeyValue::Name(name)),
            (_, Some(v)) => Some(KeyValue::Value(v)),
            _ => None,
        };
        Ok(match (base, key_ref) {
            (Access::One(v), None) => Access::Filtered(children(v)),
            (Access::One(v), Some(k)) => {
                Access::One(index(v, &k).unwrap_or(Cow::Owned(Value::Null)))
            }
            (Access::Filtered(items), None) => {
                Access::Filtered(items.into_iter().flat_map(children).collect())
            }
            (Access::Filtered(items), Some(k)) => {
                Access::Filtered(items.into_iter().filter_map(|v| index(v, &k)).collect())
            }
        })
    }

    fn call(
        &mut self,
        func: Function,
        args: &'a [Expr],
        span: &Range<usize>,
    ) -> Result<Cow<'a, Value>, ExprError> {
        let status = || self.ctx.job_status();
        let result = match func {
            Function::Success => Value::Bool(status() == JobStatus::Success),
            Function::Failure => Value::Bool(status() == JobStatus::Failure),
            Function::Cancelled => Value::Bool(status() == JobStatus::Cancelled),
            Function::Always => Value::Bool(true),
            Function::Case => return self.case(args),
            _ => {
                let values = args
                    .iter()
                    .map(|a| self.eval(a))
                    .collect::<Result<Vec<_>, _>>()?;
                self.apply(func, &values, args, span)?
            }
        };
        if let Value::String(s) = &result {
            self.charge(s.len(), span)?;
        }
        Ok(Cow::Owned(result))
    }

    fn apply(
        &mut self,
        func: Function,
        values: &[Cow<'a, Value>],
        args: &[Expr],
        span: &Range<usize>,
    ) -> Result<Value, ExprError> {
        Ok(match func {
            Function::Contains => Value::Bool(function::contains(&values[0], &values[1])),
            Function::StartsWith => Value::Bool(function::starts_with(&values[0], &values[1])),
            Function::EndsWith => Value::Bool(function::ends_with(&values[0], &values[1])),
            Function::Join => {
                Value::String(function::join(&values[0], values.get(1).map(AsRef::as_ref)))
            }
            Function::ToJson => Value::String(values[0].to_json_pretty()),
            Function::FromJson => {
                function::from_json(&values[0].to_expr_string(), args[0].span.clone())?
            }
            Function::Format => Value::String(function::format(
                &values[0].to_expr_string(),
                &values[1..],
                args[0].span.clone(),
            )?),
            Function::HashFiles => {
                let Some(workspace) = self.ctx.workspace() else {
                    return Err(ExprError::eval(
                        "`hashFiles` has no workspace directory to search here",
                        span.clone(),
                    ));
                };
                let patterns: Vec<String> = values.iter().map(|v| v.to_expr_string()).collect();
                Value::String(function::hash_files(workspace, &patterns, span.clone())?)
            }
            Function::Case
            | Function::Success
            | Function::Failure
            | Function::Always
            | Function::Cancelled => unreachable!("evaluated in `call`"),
        })
    }

    /// `case(pred1, value1, …, default)`: the value after the first true predicate; predicates
    /// must be booleans, and only what is needed is evaluated.
    fn case(&mut self, args: &'a [Expr]) -> Result<Cow<'a, Value>, ExprError> {
        let (default, pairs) = args.split_last().expect("arity checked at parse time");
        for pair in pairs.chunks(2) {
            match self.eval(&pair[0])?.as_ref() {
                Value::Bool(true) => return self.eval(&pair[1]),
                Value::Bool(false) => {}
                other => {
                    return Err(ExprError::eval(
                        format!(
                            "a `case` predicate must be a boolean, but this is {} `{}`",
                            article(other.kind()),
                            other.to_expr_string()
                        ),
                        pair[0].span.clone(),
                    )
                    .with_hint(Some(
                        "compare it, e.g. `x == 'value'`, or convert with `!!x`".into(),
                    )));
                }
            }
        }
        self.eval(default)
    }

    fn charge(&mut self, chars: usize, span: &Range<usize>) -> Result<(), ExprError> {
        self.memory = self.memory.saturating_add(chars.saturating_mul(2));
        if self.memory > MAX_MEMORY_BYTES {
            return Err(ExprError::eval(
                "the expression builds strings larger than the 1 MiB limit",
                span.clone(),
            ));
        }
        Ok(())
    }
}

fn article(kind: &str) -> String {
    let an = matches!(kind.as_bytes().first(), Some(b'A' | b'O'));
    format!("{} {kind}", if an { "an" } else { "a" })
}

/// The elements of an array or the values of an object; nothing for anything else.
fn children(v: Cow<'_, Value>) -> Vec<Cow<'_, Value>> {
    match v {
        Cow::Borrowed(Value::Array(a)) => a.iter().map(Cow::Borrowed).collect(),
        Cow::Borrowed(Value::Object(o)) => o.values().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Array(a)) => a.into_iter().map(Cow::Owned).collect(),
        Cow::Owned(Value::Object(o)) => o.into_values().map(Cow::Owned).collect(),
        _ => Vec::new(),
    }
}

/// `v.name` or `v[key]`: arrays take numbers (`'1'` and `true` coerce), objects take strings
/// (matched case-insensitively); a miss is `None`.
fn index<'a>(v: Cow<'a, Value>, key: &KeyValue<'_>) -> Option<Cow<'a, Value>> {
    match v.as_ref() {
        Value::Array(items) => {
            let KeyValue::Value(k) = key else {
                return None;
            };
            if matches!(k, Value::Array(_) | Value::Object(_)) {
                return None;
            }
            let n = k.to_number();
            if !n.is_finite() || n < 0.0 || n.floor() >= items.len() as f64 {
                return None;
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let i = n.floor() as usize;
            Some(match v {
                Cow::Borrowed(Value::Array(items)) => Cow::Borrowed(&items[i]),
                Cow::Owned(Value::Array(items)) => Cow::Owned(items.into_iter().nth(i)?),
                _ => return None,
            })
        }
        Value::Object(map) => {
            let name: Cow<'_, str> = match key {
                KeyValue::Name(n) => Cow::Borrowed(n),
                KeyValue::Value(Value::Array(_) | Value::Object(_)) => return None,
                KeyValue::Value(k) => Cow::Owned(k.to_expr_string()),
            };
            let i = map.get_index_of(name.as_ref()).or_else(|| {
                map.keys()
                    .position(|k| super::text::eq_ignore_case(k, &name))
            })?;
            Some(match v {
                Cow::Borrowed(Value::Object(map)) => Cow::Borrowed(map.get_index(i)?.1),
                Cow::Owned(Value::Object(mut map)) => Cow::Owned(map.swap_remove_index(i)?.1),
                _ => return None,
            })
        }
        _ => None,
    }
}
