//! Small value types shared by the model: settings that may be a literal or an expression,
//! the free-form values of `with:` and matrix entries, and `env:` maps.

use std::borrow::Cow;

use indexmap::IndexMap;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use crate::diag::Spanned;

/// Environment variables: name → value (numbers and booleans are kept as written).
pub type Env = IndexMap<String, Spanned<String>>;

/// `true`/`false`, or an expression that decides when the workflow runs
/// (`continue-on-error: ${{ matrix.experimental }}`).
#[derive(Clone, Debug, PartialEq)]
pub enum BoolOrExpr {
    /// Written as `true` or `false`.
    Bool(bool),
    /// Decided when the workflow runs.
    Expr(Spanned<String>),
}

/// A number, or an expression (`timeout-minutes: ${{ inputs.timeout }}`).
#[derive(Clone, Debug, PartialEq)]
pub enum NumberOrExpr {
    /// Written as a number.
    Number(f64),
    /// Decided when the workflow runs.
    Expr(Spanned<String>),
}

impl Serialize for BoolOrExpr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Bool(b) => s.serialize_bool(*b),
            Self::Expr(e) => s.serialize_str(e),
        }
    }
}

impl Serialize for NumberOrExpr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Number(n) => s.serialize_f64(*n),
            Self::Expr(e) => s.serialize_str(e),
        }
    }
}

impl JsonSchema for BoolOrExpr {
    fn schema_name() -> Cow<'static, str> {
        "BoolOrExpr".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "oneOf": [{ "type": "boolean" }, super::schema::expression()] })
    }
}

impl JsonSchema for NumberOrExpr {
    fn schema_name() -> Cow<'static, str> {
        "NumberOrExpr".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "oneOf": [{ "type": "number", "exclusiveMinimum": 0 }, super::schema::expression()]
        })
    }
}

/// A free-form YAML value with spans all the way down: a `with:` input of a built-in that
/// takes a list or mapping (`ports`, `env`), or a matrix value.
///
/// In `with:`, scalars are always [`Value::String`] holding the text as written, because
/// GitHub passes inputs as strings (`runs: 5` is the string `5`); matrix values keep their
/// YAML type, since `matrix.x == 5` compares numbers.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `~`, `null` or nothing.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number with a fraction or exponent.
    Float(f64),
    /// Text (and, in `with:`, every scalar).
    String(String),
    /// A list.
    List(Vec<Spanned<Value>>),
    /// A mapping, in file order.
    Map(IndexMap<String, Spanned<Value>>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// "a string", "a list"…, for "expected X, found Y".
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Null => "nothing (null)",
            Self::Bool(_) => "a boolean",
            Self::Int(_) | Self::Float(_) => "a number",
            Self::String(_) => "a string",
            Self::List(_) => "a list",
            Self::Map(_) => "a mapping",
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Null => s.serialize_unit(),
            Self::Bool(b) => s.serialize_bool(*b),
            Self::Int(i) => s.serialize_i64(*i),
            Self::Float(f) => s.serialize_f64(*f),
            Self::String(v) => s.serialize_str(v),
            Self::List(items) => s.collect_seq(items),
            Self::Map(map) => s.collect_map(map),
        }
    }
}

impl JsonSchema for Value {
    fn schema_name() -> Cow<'static, str> {
        "Value".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["string", "number", "boolean", "array", "object", "null"]
        })
    }
}
