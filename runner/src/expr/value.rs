//! The values expressions compute with, and GitHub's coercions between them: truthiness,
//! string and number conversion, loose equality and ordering. It knows nothing about syntax.

use std::cmp::Ordering;

use indexmap::IndexMap;

use super::number::{format_number, parse_number};
use super::text::{cmp_ignore_case, eq_ignore_case};

/// A value of the expression language: JSON's six kinds, with every number a double.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    /// Keys keep their order (for `toJSON` and `.*`); look-ups are case-insensitive.
    Object(IndexMap<String, Value>),
}

impl Value {
    /// The kind's name as GitHub spells it: `Null`, `Boolean`, `Number`, `String`, `Array` or
    /// `Object`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Null => "Null",
            Self::Bool(_) => "Boolean",
            Self::Number(_) => "Number",
            Self::String(_) => "String",
            Self::Array(_) => "Array",
            Self::Object(_) => "Object",
        }
    }

    /// False for `null`, `false`, `0`, `-0`, `NaN` and `''`; true for everything else,
    /// including empty arrays and objects.
    pub fn is_truthy(&self) -> bool {
        match self {
            Self::Null => false,
            Self::Bool(b) => *b,
            Self::Number(n) => *n != 0.0 && !n.is_nan(),
            Self::String(s) => !s.is_empty(),
            Self::Array(_) | Self::Object(_) => true,
        }
    }

    /// GitHub's string coercion: `null` → `''`, booleans → `true`/`false`, numbers as GitHub
    /// prints them, and the kind name (`Array`, `Object`) for containers.
    pub fn to_expr_string(&self) -> String {
        match self {
            Self::Null => String::new(),
            Self::Bool(b) => b.to_string(),
            Self::Number(n) => format_number(*n),
            Self::String(s) => s.clone(),
            Self::Array(_) | Self::Object(_) => self.kind().to_string(),
        }
    }

    /// GitHub's number coercion: `null` → 0, booleans → 0/1, strings read like JavaScript's
    /// `Number()` (`''` → 0, `' 0x1F '` → 31, `'abc'` → NaN), containers → NaN.
    pub fn to_number(&self) -> f64 {
        match self {
            Self::Null => 0.0,
            Self::Bool(b) => f64::from(u8::from(*b)),
            Self::Number(n) => *n,
            Self::String(s) => parse_number(s),
            Self::Array(_) | Self::Object(_) => f64::NAN,
        }
    }

    pub fn from_json(json: serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Self::Null,
            serde_json::Value::Bool(b) => Self::Bool(b),
            serde_json::Value::Number(n) => Self::Number(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => Self::String(s),
            serde_json::Value::Array(a) => {
                Self::Array(a.into_iter().map(Self::from_json).collect())
            }
            serde_json::Value::Object(o) => Self::Object(
                o.into_iter()
                    .map(|(k, v)| (k, Self::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// The value as JSON. JSON has no NaN or infinities, so those become `null`; integral
    /// numbers become JSON integers so they print without `.0`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Self::Null => serde_json::Value::Null,
            Self::Bool(b) => serde_json::Value::Bool(*b),
            Self::Number(n) => number_to_json(*n),
            Self::String(s) => serde_json::Value::String(s.clone()),
            Self::Array(a) => serde_json::Value::Array(a.iter().map(Self::to_json).collect()),
            Self::Object(o) => {
                serde_json::Value::Object(o.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
        }
    }

    /// A property of an object, matched case-insensitively (an exact match wins).
    pub fn get_property(&self, name: &str) -> Option<&Value> {
        match self {
            Self::Object(map) => map.get(name).or_else(|| {
                map.iter()
                    .find(|(k, _)| eq_ignore_case(k, name))
                    .map(|(_, v)| v)
            }),
            _ => None,
        }
    }

    /// `toJSON`'s text: two-space indented, numbers printed the GitHub way.
    pub fn to_json_pretty(&self) -> String {
        let mut out = String::new();
        write_json(self, 0, &mut out);
        out
    }
}

fn number_to_json(n: f64) -> serde_json::Value {
    if !n.is_finite() {
        return serde_json::Value::Null;
    }
    // Exactly representable integers print as integers; -0 as 0.
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        #[allow(clippy::cast_possible_truncation)]
        return serde_json::Value::from(n as i64);
    }
    serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

fn write_json(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&format_number(*n)),
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                push_indent(indent + 1, out);
                write_json(item, indent + 1, out);
            }
            out.push('\n');
            push_indent(indent, out);
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                push_indent(indent + 1, out);
                write_json_string(k, out);
                out.push_str(": ");
                write_json(item, indent + 1, out);
            }
            out.push('\n');
            push_indent(indent, out);
            out.push('}');
        }
    }
}

fn push_indent(level: usize, out: &mut String) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write_json_string(s: &str, out: &mut String) {
    // serde_json escapes exactly what JSON requires (quotes, backslashes, control characters).
    out.push_str(&serde_json::Value::String(s.to_string()).to_string());
}

/// Converts both sides the way GitHub does before comparing values of different kinds:
/// strings and numbers meet as numbers; booleans and `null` become numbers first.
fn coerce_pair<'a>(a: &'a Value, b: &'a Value) -> (Coerced<'a>, Coerced<'a>) {
    match (a, b) {
        (Value::String(x), Value::String(y)) => (Coerced::Str(x), Coerced::Str(y)),
        _ if std::mem::discriminant(a) == std::mem::discriminant(b) => {
            (Coerced::Same(a), Coerced::Same(b))
        }
        _ => (scalar_number(a), scalar_number(b)),
    }
}

enum Coerced<'a> {
    Str(&'a str),
    Num(f64),
    Same(&'a Value),
    /// An array or object facing a value of another kind: never equal, never ordered.
    Container,
}

fn scalar_number(v: &Value) -> Coerced<'_> {
    match v {
        Value::Array(_) | Value::Object(_) => Coerced::Container,
        other => Coerced::Num(other.to_number()),
    }
}

/// Loose equality (`==`). Arrays and objects are equal only when they are the same instance;
/// `same_instance` says whether they are (the evaluator knows, plain values do not).
pub fn loose_eq(a: &Value, b: &Value, same_instance: bool) -> bool {
    match coerce_pair(a, b) {
        (Coerced::Str(x), Coerced::Str(y)) => eq_ignore_case(x, y),
        (Coerced::Num(x), Coerced::Num(y)) => x == y,
        (Coerced::Same(x), Coerced::Same(_)) => match x {
            Value::Null => true,
            Value::Bool(_) | Value::Number(_) => x.to_number() == b.to_number(),
            Value::Array(_) | Value::Object(_) => same_instance,
            Value::String(_) => false,
        },
        _ => false,
    }
}

/// Ordering for `<`, `<=`, `>`, `>=`: strings compare case-insensitively, everything else as
/// numbers; `None` (every comparison false) for NaN or an array/object operand.
pub fn loose_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(cmp_ignore_case(x, y)),
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => None,
        _ => a.to_number().partial_cmp(&b.to_number()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trip_keeps_order_and_integers() {
        let j = json!({"b": [1, 2.5, null, true], "a": {"x": "y"}});
        let v = Value::from_json(j.clone());
        assert_eq!(v.to_json(), j);
        assert_eq!(v.kind(), "Object");
    }

    #[test]
    fn pretty_json_matches_github_layout() {
        let v = Value::from_json(json!({"a": [1, {}], "b": "q\""}));
        assert_eq!(
            v.to_json_pretty(),
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": \"q\\\"\"\n}"
        );
    }

    #[test]
    fn properties_are_case_insensitive_exact_first() {
        let v = Value::from_json(json!({"Foo": 1, "foo": 2}));
        assert_eq!(v.get_property("foo"), Some(&Value::Number(2.0)));
        assert_eq!(v.get_property("FOO"), Some(&Value::Number(1.0)));
        assert_eq!(v.get_property("bar"), None);
    }
}
