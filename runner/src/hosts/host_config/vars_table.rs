//! `[vars]`: the workspace's configuration variables.

use indexmap::IndexMap;
use toml::Spanned;
use toml::de::DeValue;

use super::reader::Reader;
use crate::diag::{Diagnostic, Span};

impl Reader {
    /// `[vars]`: strings only, as GitHub's configuration variables are, so `vars.N` is the
    /// same text whether it came from here or from `--var N=…` (a workflow wanting a number
    /// reads `fromJSON(vars.N)`).
    pub(super) fn vars(&mut self, value: &Spanned<DeValue<'_>>) -> IndexMap<String, String> {
        let DeValue::Table(table) = value.get_ref() else {
            self.push(
                Diagnostic::error(
                    &self.file,
                    Span::from(value.span()),
                    "`vars` must be a table of `NAME = \"value\"`",
                )
                .hint("write `[vars]` followed by one line per variable: `MODEL = \"llama-3-8b\"`"),
            );
            return IndexMap::new();
        };
        let mut vars: IndexMap<String, String> = IndexMap::new();
        let mut spans: Vec<Span> = Vec::new();
        for (key, entry) in table {
            let name = key.get_ref().as_ref();
            let key_span = Span::from(key.span());
            if let Some(problem) = invalid_var_name(name) {
                self.push(
                    Diagnostic::error(
                        &self.file,
                        key_span,
                        format!("invalid variable name `{name}`"),
                    )
                    .label(problem)
                    .hint("use letters, digits and `_`, starting with a letter or `_`, so that `vars.NAME` reads it"),
                );
                continue;
            }
            // Context property names are case-insensitive: `vars.model` would read either.
            if let Some(i) = vars.keys().position(|k| k.eq_ignore_ascii_case(name)) {
                let first = vars
                    .get_index(i)
                    .map(|(k, _)| k.clone())
                    .unwrap_or_default();
                self.push(
                    Diagnostic::error(
                        &self.file,
                        key_span,
                        format!("variable `{name}` is given twice"),
                    )
                    .label(format!("the same as `{first}`: names are case-insensitive"))
                    .hint("remove one of them, or rename it")
                    .related(&self.file, spans[i], "given here first"),
                );
                continue;
            }
            let text = match entry.get_ref() {
                DeValue::String(text) => text.to_string(),
                other => {
                    let span = Span::from(entry.span());
                    let written = self
                        .file
                        .text
                        .get(span.start..span.end)
                        .unwrap_or("")
                        .trim();
                    let kind = match other {
                        DeValue::Table(_) => "a table",
                        DeValue::Array(_) => "a list",
                        DeValue::Boolean(_) => "a boolean",
                        DeValue::Datetime(_) => "a date",
                        _ => "a number",
                    };
                    let hint = if matches!(other, DeValue::Table(_) | DeValue::Array(_)) {
                        format!(
                            "write it as JSON text, `{name} = '[\"a\", \"b\"]'`, and read it with `fromJSON(vars.{name})`"
                        )
                    } else {
                        format!(
                            "quote it: `{name} = \"{written}\"` (a workflow that needs a number or boolean reads `fromJSON(vars.{name})`)"
                        )
                    };
                    self.push(
                        Diagnostic::error(
                            &self.file,
                            span,
                            format!("`vars.{name}` must be a string"),
                        )
                        .label(format!("{kind}, not a string"))
                        .hint(hint)
                        .note("configuration variables are strings, as on GitHub"),
                    );
                    continue;
                }
            };
            vars.insert(name.to_string(), text);
            spans.push(key_span);
        }
        vars
    }
}

/// Why `name` cannot be a configuration variable's name, if it cannot: GitHub's rule
/// (letters, digits, `_`, not starting with a digit), which also makes `vars.NAME` read it.
fn invalid_var_name(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => Some("it is empty"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => {
            Some("must start with a letter or `_`")
        }
        _ if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            Some("only letters, digits and `_` are allowed")
        }
        _ => None,
    }
}
