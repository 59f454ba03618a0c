//! Checking a `with:` value against the type a built-in declares for it. Values holding
//! `${{` are left for when they are evaluated.

use std::sync::Arc;

use indexmap::IndexMap;

use super::reader::is_expression;
use crate::diag::{Diagnostic, SourceFile, Spanned, did_you_mean};
use crate::steps::InputType;
use crate::workflow::model::Value;

/// A diagnostic when `value` cannot be of type `ty`; `None` when it fits (or is an expression).
pub fn check_input_value(
    file: &Arc<SourceFile>,
    input: &str,
    ty: InputType,
    value: &Spanned<Value>,
) -> Option<Diagnostic> {
    let check = Check {
        file,
        input,
        ty,
        value,
    };
    match &value.value {
        Value::String(text) if is_expression(text) => None,
        Value::String(text) => check.text(text),
        Value::List(items) => check.list(items),
        Value::Map(entries) => check.map(entries),
        _ => None,
    }
}

/// One input's value checked against its declared type.
struct Check<'a> {
    file: &'a Arc<SourceFile>,
    input: &'a str,
    ty: InputType,
    value: &'a Spanned<Value>,
}

impl Check<'_> {
    /// `input `x` expects a number, found a list`.
    fn wrong_shape(&self) -> Diagnostic {
        let expected = self.ty.describe();
        Diagnostic::error(
            self.file,
            self.value.span,
            format!(
                "input `{}` expects {expected}, found {}",
                self.input,
                self.value.kind_name()
            ),
        )
        .label(format!("expected {expected}"))
    }

    /// `input `x` expects a number, found `abc``, with a hint when one helps.
    fn bad(&self, text: &str, hint: Option<String>) -> Diagnostic {
        let expected = self.ty.describe();
        Diagnostic::error(
            self.file,
            self.value.span,
            format!("input `{}` expects {expected}, found `{text}`", self.input),
        )
        .label(format!("expected {expected}"))
        .maybe_hint(hint)
    }

    /// A list is a list of strings, a sweep of whole numbers, or GPUs; each item is checked.
    fn list(&self, items: &[Spanned<Value>]) -> Option<Diagnostic> {
        let input = self.input;
        match self.ty {
            InputType::List => items.iter().find(|i| i.as_str().is_none()).map(|bad| {
                Diagnostic::error(
                    self.file,
                    bad.span,
                    format!(
                        "input `{input}` expects a list of strings, found {} in the list",
                        bad.kind_name()
                    ),
                )
                .label("expected a string")
            }),
            InputType::IntegerOrList => items
                .iter()
                .find_map(|i| check_input_value(self.file, input, InputType::Integer, i)),
            InputType::Gpus => items
                .iter()
                .find_map(|i| check_input_value(self.file, input, InputType::String, i)),
            _ => Some(self.wrong_shape()),
        }
    }

    /// An object takes anything; a map only scalars; fields only their keys, each given.
    fn map(&self, entries: &IndexMap<String, Spanned<Value>>) -> Option<Diagnostic> {
        match self.ty {
            InputType::Object => None,
            InputType::Fields(keys) => self.fields(keys, entries),
            InputType::Map => entries
                .iter()
                .find(|(_, v)| v.as_str().is_none())
                .map(|(k, v)| {
                    Diagnostic::error(
                        self.file,
                        v.span,
                        format!(
                            "`{}.{k}` must be a string, number or boolean, found {}",
                            self.input,
                            v.kind_name()
                        ),
                    )
                    .label("expected a scalar")
                }),
            _ => Some(self.wrong_shape()),
        }
    }

    /// A mapping of `keys`: an unknown key (with the closest known one), a value that is not a
    /// scalar, or a key left out.
    fn fields(
        &self,
        keys: &[&str],
        entries: &IndexMap<String, Spanned<Value>>,
    ) -> Option<Diagnostic> {
        let input = self.input;
        let keys_text = crate::diag::join_quoted(keys, "and");
        let bad_key = entries.iter().find(|(k, _)| !keys.contains(&k.as_str()));
        if let Some((k, v)) = bad_key {
            return Some(
                Diagnostic::error(self.file, v.span, format!("`{input}` has no key `{k}`"))
                    .label(format!("expected {keys_text}"))
                    .maybe_hint(did_you_mean(k, keys)),
            );
        }
        if let Some((k, v)) = entries.iter().find(|(_, v)| v.as_str().is_none()) {
            return Some(
                Diagnostic::error(
                    self.file,
                    v.span,
                    format!("`{input}.{k}` must be a string, found {}", v.kind_name()),
                )
                .label("expected a string"),
            );
        }
        let missing: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| !entries.contains_key(*k))
            .collect();
        (!missing.is_empty()).then(|| {
            Diagnostic::error(
                self.file,
                self.value.span,
                format!(
                    "`{input}` has no {}",
                    crate::diag::join_quoted(&missing, "and")
                ),
            )
            .label(format!("expected {keys_text}"))
        })
    }

    /// Text, read as the declared type.
    fn text(&self, text: &str) -> Option<Diagnostic> {
        match self.ty {
            InputType::String | InputType::List => None,
            InputType::Integer => (text.parse::<u64>().is_err()).then(|| {
                self.bad(
                    text,
                    text.parse::<f64>()
                        .ok()
                        .map(|f| format!("use a whole number, such as `{}`", f.round().max(0.0))),
                )
            }),
            InputType::Number => {
                (!text.parse::<f64>().is_ok_and(f64::is_finite)).then(|| self.bad(text, None))
            }
            InputType::Bool => self.boolean(text),
            InputType::Enum(values) => {
                (!values.contains(&text)).then(|| self.bad(text, did_you_mean(text, values)))
            }
            InputType::Duration => self.duration(text),
            InputType::Percent => self.percent(text),
            InputType::ByteSize => (!is_byte_size(text)).then(|| {
                self.bad(
                    text,
                    Some("a number with an optional unit `k`, `m`, `g` or `t` (`16g`)".to_owned()),
                )
            }),
            InputType::IntegerOrList => {
                (text.parse::<u64>().is_err()).then(|| self.bad(text, None))
            }
            InputType::Map | InputType::Object => Some(self.wrong_shape().hint(format!(
                "write a mapping: `{}: {{ NAME: value }}`",
                self.input
            ))),
            InputType::Fields(keys) => Some(self.wrong_shape().hint(format!(
                "write a mapping: `{}: {{ {} }}`",
                self.input,
                keys.iter()
                    .map(|k| format!("{k}: …"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            InputType::Gpus => {
                let ok = matches!(text, "all" | "none") || text.parse::<u32>().is_ok_and(|n| n > 0);
                (!ok).then(|| self.bad(text, None))
            }
        }
    }

    fn boolean(&self, text: &str) -> Option<Diagnostic> {
        (!matches!(text, "true" | "false" | "True" | "False" | "TRUE" | "FALSE")).then(|| {
            self.bad(
                text,
                matches!(text, "yes" | "no" | "on" | "off" | "1" | "0")
                    .then(|| "write `true` or `false`".to_owned()),
            )
        })
    }

    fn duration(&self, text: &str) -> Option<Diagnostic> {
        humantime::parse_duration(text).err().map(|_| {
            let hint = if text.parse::<f64>().is_ok() {
                format!("add a unit: `{text}s` or `{text}m`")
            } else {
                "write a number and a unit: `ms`, `s`, `m` or `h` (`1h30m`)".to_owned()
            };
            self.bad(text, Some(hint))
        })
    }

    fn percent(&self, text: &str) -> Option<Diagnostic> {
        let with_sign = text.trim().ends_with('%');
        let number = text.trim().trim_end_matches('%').trim();
        match number.parse::<f64>() {
            Ok(f) if f.is_finite() && f >= 0.0 => {
                // A bare number is a fraction (`0.03`); `3` would mean 300%, which is almost
                // always a forgotten `%`.
                (!with_sign && f > 1.0).then(|| {
                    Diagnostic::error(
                        self.file,
                        self.value.span,
                        format!(
                            "input `{}` is `{text}`, a fraction of {}%",
                            self.input,
                            f * 100.0
                        ),
                    )
                    .label("a bare number is a fraction: `0.03` means 3%")
                    .hint(format!("write `{text}%` for {text} percent"))
                })
            }
            _ => Some(self.bad(text, None)),
        }
    }
}

/// `512`, `512m`, `16g`, `1.5GB`, `64KiB`.
fn is_byte_size(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(digits_end);
    number.parse::<f64>().is_ok()
        && matches!(
            unit,
            "" | "b"
                | "k"
                | "kb"
                | "kib"
                | "m"
                | "mb"
                | "mib"
                | "g"
                | "gb"
                | "gib"
                | "t"
                | "tb"
                | "tib"
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Span;
    use test_case::test_case;

    fn check(ty: InputType, text: &str) -> bool {
        let f = SourceFile::new("t.yml", text);
        let v = Spanned::new(Value::String(text.to_owned()), Span::new(0, text.len()));
        check_input_value(&f, "x", ty, &v).is_none()
    }

    #[test_case(InputType::Duration, "30s", true)]
    #[test_case(InputType::Duration, "1h30m", true)]
    #[test_case(InputType::Duration, "100ms", true)]
    #[test_case(InputType::Duration, "2h", true)]
    #[test_case(InputType::Duration, "30", false)]
    #[test_case(InputType::Duration, "soon", false)]
    #[test_case(InputType::Duration, "${{ inputs.t }}", true; "expressions wait")]
    #[test_case(InputType::Integer, "5", true)]
    #[test_case(InputType::Integer, "5.5", false)]
    #[test_case(InputType::Integer, "-1", false)]
    #[test_case(InputType::Number, "0.5", true)]
    #[test_case(InputType::Number, "fast", false)]
    #[test_case(InputType::Bool, "true", true)]
    #[test_case(InputType::Bool, "yes", false)]
    #[test_case(InputType::Enum(&["http", "tcp"]), "tcp", true)]
    #[test_case(InputType::Enum(&["http", "tcp"]), "https", false)]
    #[test_case(InputType::Percent, "3%", true)]
    #[test_case(InputType::Percent, "0.03", true)]
    #[test_case(InputType::Percent, "three", false)]
    #[test_case(InputType::Percent, "3", false)]
    #[test_case(InputType::Percent, "1", true)]
    #[test_case(InputType::ByteSize, "16g", true)]
    #[test_case(InputType::ByteSize, "1.5GB", true)]
    #[test_case(InputType::ByteSize, "16q", false)]
    #[test_case(InputType::Gpus, "all", true)]
    #[test_case(InputType::Gpus, "0", false)]
    #[test_case(InputType::Gpus, "none", true)]
    #[test_case(InputType::Map, "a=b", false)]
    #[test_case(InputType::Fields(&["username", "password"]), "me:pw", false)]
    fn scalar_values(ty: InputType, text: &str, ok: bool) {
        assert_eq!(check(ty, text), ok, "{ty:?} {text}");
    }

    #[test]
    fn every_declared_default_fits_its_type() {
        for b in crate::steps::builtins() {
            for i in b.inputs {
                if let Some(d) = i.default {
                    assert!(check(i.ty, d), "{}.{} default `{d}`", b.name, i.name);
                }
            }
        }
    }

    /// `credentials:`-like fields, as a mapping of `keys` written `k: v`.
    fn fields(entries: &[(&str, Value)]) -> Option<String> {
        let f = SourceFile::new("t.yml", "x");
        let map = entries
            .iter()
            .map(|(k, v)| ((*k).to_string(), Spanned::new(v.clone(), Span::new(0, 1))))
            .collect();
        let v = Spanned::new(Value::Map(map), Span::new(0, 1));
        let ty = InputType::Fields(&["username", "password"]);
        check_input_value(&f, "credentials", ty, &v).map(|d| {
            let hints = d.hints.join("; ");
            format!("{} {hints}", d.message)
        })
    }

    #[test]
    fn fields_take_their_keys_only_each_given_and_a_scalar() {
        let s = |t: &str| Value::String(t.into());
        assert_eq!(
            fields(&[("username", s("me")), ("password", s("${{ secrets.P }}"))]),
            None
        );
        let e = fields(&[("username", s("me")), ("pasword", s("x"))]).unwrap();
        assert!(e.contains("`credentials` has no key `pasword`"), "{e}");
        assert!(e.contains("did you mean `password`"), "{e}");
        let e = fields(&[("username", s("me"))]).unwrap();
        assert!(e.contains("`credentials` has no `password`"), "{e}");
        let e = fields(&[("username", s("me")), ("password", Value::List(vec![]))]).unwrap();
        assert!(e.contains("`credentials.password` must be a string"), "{e}");
    }
}
