//! [`Reader`]: reads typed values out of the YAML tree of one file, turning every mismatch
//! into a diagnostic and carrying on, so one pass reports every problem in the file.
//!
//! The shape-specific readers (workflow, job, step, action) build on these helpers; the
//! helpers know nothing of workflows beyond the words used in messages.

use std::sync::Arc;

use indexmap::IndexMap;

use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span, Spanned, did_you_mean, join_quoted};
use crate::workflow::model::{BoolOrExpr, Env, NumberOrExpr, Value};
use crate::workflow::yaml::{MapEntry, Node, NodeKind};

pub struct Reader {
    pub file: Arc<SourceFile>,
    pub diags: Diagnostics,
}

/// Whether a string holds an expression, so its value can only be checked when it runs.
pub fn is_expression(s: &str) -> bool {
    s.contains("${{")
}

impl Reader {
    pub fn new(file: &Arc<SourceFile>) -> Self {
        Self {
            file: file.clone(),
            diags: Diagnostics::new(),
        }
    }

    /// A new error in this file, to finish with `.label()`/`.hint()` and [`Self::report`].
    pub fn err(&self, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(&self.file, span, message)
    }

    pub fn warn(&self, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::warning(&self.file, span, message)
    }

    pub fn report(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// "`needs` expects a list of job ids, found a mapping", at the value.
    pub fn wrong_type(&mut self, key: &str, node: &Node, expected: &str) {
        let d = Diagnostic::error(
            &self.file,
            node.span,
            format!("`{key}` expects {expected}, found {}", node.kind_name()),
        )
        .label(format!("expected {expected}"));
        self.diags.push(d);
    }

    /// The entries of a mapping; `None` (after an error) when the node is something else.
    /// An empty value (`key:`) reads as an empty mapping.
    pub fn map<'n>(&mut self, key: &str, node: &'n Node, expected: &str) -> Option<&'n [MapEntry]> {
        match &node.kind {
            NodeKind::Map(entries) => Some(entries),
            NodeKind::Null => Some(&[]),
            _ => {
                self.wrong_type(key, node, expected);
                None
            }
        }
    }

    /// Reports keys not in `allowed` (with a did-you-mean and the list of allowed keys), and
    /// warns about `ignored` keys that GitHub knows but gpuflow does not use.
    pub fn check_keys(
        &mut self,
        entries: &[MapEntry],
        allowed: &[&str],
        ignored: &[&str],
        of_what: &str,
    ) {
        for e in entries {
            let key = e.key.value.as_str();
            if allowed.contains(&key) {
                continue;
            }
            if ignored.contains(&key) {
                self.diags.push(
                    Diagnostic::warning(
                        &self.file,
                        e.key.span,
                        format!("`{key}` is ignored by gpuflow"),
                    )
                    .label("accepted for GitHub Actions compatibility, has no effect"),
                );
                continue;
            }
            self.diags.push(
                Diagnostic::error(
                    &self.file,
                    e.key.span,
                    format!("unknown key `{key}` in {of_what}"),
                )
                .label(format!("not a key of {of_what}"))
                .maybe_hint(did_you_mean(key, allowed))
                .note(format!("{of_what} takes {}", join_quoted(allowed, "and"))),
            );
        }
    }

    /// Any non-null scalar, as the string GitHub would see. Keeps the span of the text, so
    /// expression columns map back into the file.
    pub fn string(&mut self, key: &str, node: &Node) -> Option<Spanned<String>> {
        match node.scalar_string() {
            Some(s) => Some(s),
            None => {
                self.wrong_type(key, node, "a string");
                None
            }
        }
    }

    /// An optional string: an empty value (`name:`) is the same as leaving the key out.
    pub fn optional_string(&mut self, key: &str, node: &Node) -> Option<Spanned<String>> {
        if node.is_null() {
            return None;
        }
        self.string(key, node)
    }

    /// One string or a list of them (`needs: build` / `needs: [build, test]`).
    pub fn string_list(&mut self, key: &str, node: &Node, expected: &str) -> Vec<Spanned<String>> {
        match &node.kind {
            NodeKind::Seq(items) => items
                .iter()
                .filter_map(|item| match item.scalar_string() {
                    Some(s) => Some(s),
                    None => {
                        self.diags.push(
                            Diagnostic::error(
                                &self.file,
                                item.span,
                                format!(
                                    "`{key}` expects {expected}, found {} in the list",
                                    item.kind_name()
                                ),
                            )
                            .label("expected a string"),
                        );
                        None
                    }
                })
                .collect(),
            _ => match node.scalar_string() {
                Some(s) => vec![s],
                None => {
                    self.wrong_type(key, node, expected);
                    Vec::new()
                }
            },
        }
    }

    /// `true`/`false` or an expression.
    pub fn bool_or_expr(&mut self, key: &str, node: &Node) -> Option<BoolOrExpr> {
        match &node.kind {
            NodeKind::Null => None,
            NodeKind::Bool(b) => Some(BoolOrExpr::Bool(*b)),
            NodeKind::String(s) if is_expression(s) => {
                Some(BoolOrExpr::Expr(Spanned::new(s.clone(), node.content)))
            }
            NodeKind::String(s) => {
                self.diags.push(
                    Diagnostic::error(
                        &self.file,
                        node.span,
                        format!("`{key}` expects `true`, `false` or an expression, found `{s}`"),
                    )
                    .label("not a boolean")
                    .maybe_hint(
                        matches!(s.as_str(), "true" | "false")
                            .then(|| format!("remove the quotes: `{key}: {s}`")),
                    ),
                );
                None
            }
            _ => {
                self.wrong_type(key, node, "`true`, `false` or an expression");
                None
            }
        }
    }

    /// A number greater than zero, or an expression. `integer` also refuses fractions.
    pub fn positive_or_expr(
        &mut self,
        key: &str,
        node: &Node,
        unit: &str,
        integer: bool,
    ) -> Option<NumberOrExpr> {
        let n = match &node.kind {
            NodeKind::Null => return None,
            NodeKind::Int(i) => *i as f64,
            NodeKind::Float(f) if !integer => *f,
            NodeKind::String(s) if is_expression(s) => {
                return Some(NumberOrExpr::Expr(Spanned::new(s.clone(), node.content)));
            }
            _ => {
                let expected = if integer {
                    format!("a whole number of {unit} or an expression")
                } else {
                    format!("a number of {unit} or an expression")
                };
                let found = if node.is_scalar() && !node.is_null() {
                    format!("`{}`", node.text)
                } else {
                    node.kind_name().to_owned()
                };
                let mut d = Diagnostic::error(
                    &self.file,
                    node.span,
                    format!("`{key}` expects {expected}, found {found}"),
                )
                .label(format!("expected {expected}"));
                if let Ok(dur) = humantime::parse_duration(&node.text)
                    && unit == "minutes"
                {
                    let minutes = dur.as_secs_f64() / 60.0;
                    d = d.hint(format!("write the number of minutes: `{key}: {minutes}`"));
                }
                self.diags.push(d);
                return None;
            }
        };
        if n.is_finite() && n > 0.0 {
            Some(NumberOrExpr::Number(n))
        } else {
            self.diags.push(
                Diagnostic::error(
                    &self.file,
                    node.span,
                    format!("`{key}` must be greater than zero, found `{}`", node.text),
                )
                .label("not a positive number"),
            );
            None
        }
    }

    /// Environment variables: a mapping of names to scalars (or an expression yielding one).
    pub fn env(&mut self, key: &str, node: &Node) -> Env {
        let mut env = IndexMap::new();
        let Some(entries) = self.map(key, node, "a mapping of variable names to values") else {
            return env;
        };
        for e in entries {
            let value = match &e.value.kind {
                NodeKind::Null => Spanned::new(String::new(), e.value.span),
                _ => match e.value.scalar_string() {
                    Some(s) => s,
                    None => {
                        self.diags.push(
                            Diagnostic::error(
                                &self.file,
                                e.value.span,
                                format!("environment variable `{}` must be a string, found {}", e.key.value, e.value.kind_name()),
                            )
                            .label("expected a string, number or boolean")
                            .hint("write the value as one string; use `${{ toJSON(…) }}` for structured data"),
                        );
                        continue;
                    }
                },
            };
            env.insert(e.key.value.clone(), value);
        }
        env
    }

    /// Names → strings (job `outputs`).
    pub fn string_map(
        &mut self,
        key: &str,
        node: &Node,
        expected: &str,
    ) -> IndexMap<String, Spanned<String>> {
        let mut out = IndexMap::new();
        let Some(entries) = self.map(key, node, expected) else {
            return out;
        };
        for e in entries {
            if let Some(s) = self.string(&e.key.value, &e.value) {
                out.insert(e.key.value.clone(), s);
            }
        }
        out
    }
}

/// A YAML node as a [`Value`]. With `stringify`, scalars become the string GitHub would
/// pass (`with:` inputs); otherwise they keep their YAML type (matrix values).
pub fn to_value(node: &Node, stringify: bool) -> Spanned<Value> {
    let value = match &node.kind {
        NodeKind::Seq(items) => Value::List(items.iter().map(|n| to_value(n, stringify)).collect()),
        NodeKind::Map(entries) => Value::Map(
            entries
                .iter()
                .map(|e| (e.key.value.clone(), to_value(&e.value, stringify)))
                .collect(),
        ),
        _ if stringify => Value::String(node.text.clone()),
        NodeKind::Null => Value::Null,
        NodeKind::Bool(b) => Value::Bool(*b),
        NodeKind::Int(i) => Value::Int(*i),
        NodeKind::Float(f) => Value::Float(*f),
        NodeKind::String(s) => Value::String(s.clone()),
    };
    let span = if node.is_scalar() {
        node.content
    } else {
        node.span
    };
    Spanned::new(value, span)
}

/// Job and step ids: a letter or `_`, then letters, digits, `-` and `_` (GitHub's rule).
pub fn is_valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}
