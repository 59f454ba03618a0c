//! GitHub's matching of `include` and `exclude` entries against a cell: leaf by leaf, with
//! the expression language's loose `==`.

use indexmap::IndexMap;
use serde_json::Value;

/// Whether a cell matches every key of a filter (an `exclude` entry).
pub(super) fn filter_matches(
    filter: &IndexMap<String, Value>,
    cell: &IndexMap<String, Value>,
) -> bool {
    filter.iter().all(|(k, v)| leaf_match(cell, k, v))
}

/// GitHub compiles each scalar leaf of a filter value into `matrix[key]…[path] == leaf`: so a
/// pattern object or array matches any value that has at least those leaves, and an empty
/// object or array in a pattern matches anything.
pub(super) fn leaf_match(cell: &IndexMap<String, Value>, key: &str, pattern: &Value) -> bool {
    fn walk(actual: Option<&Value>, pattern: &Value) -> bool {
        match pattern {
            Value::Object(fields) => fields.iter().all(|(k, p)| {
                let inner = match actual {
                    Some(Value::Object(o)) => o.get(k),
                    _ => None,
                };
                walk(inner, p)
            }),
            Value::Array(items) => items.iter().enumerate().all(|(i, p)| {
                let inner = match actual {
                    Some(Value::Array(a)) => a.get(i),
                    _ => None,
                };
                walk(inner, p)
            }),
            leaf => loose_eq(actual.unwrap_or(&Value::Null), leaf),
        }
    }
    walk(cell.get(key), pattern)
}

/// The expression language's `==`: same kinds compare directly (strings ignoring case, the
/// way .NET's ordinal-ignore-case does it); different kinds are both converted to numbers.
/// Objects and arrays never equal a scalar.
pub(super) fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(_), Value::Number(_)) => to_number(a) == to_number(b),
        (Value::String(x), Value::String(y)) => x
            .chars()
            .flat_map(char::to_uppercase)
            .eq(y.chars().flat_map(char::to_uppercase)),
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => false,
        _ => to_number(a) == to_number(b),
    }
}

/// The expression language's conversion of a scalar to a number (NaN when it is not one).
fn to_number(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) => parse_number(s),
        Value::Array(_) | Value::Object(_) => f64::NAN,
    }
}

fn parse_number(s: &str) -> f64 {
    let t = s.trim();
    if t.is_empty() {
        return 0.0;
    }
    if let Some(hex) = t.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).map_or(f64::NAN, |n| n as f64);
    }
    if let Some(oct) = t.strip_prefix("0o") {
        return i64::from_str_radix(oct, 8).map_or(f64::NAN, |n| n as f64);
    }
    match t {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    // Rust also accepts `inf`, `nan` and friends, which the expression language does not.
    if !t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | '+' | '-' | 'e' | 'E'))
    {
        return f64::NAN;
    }
    t.parse().unwrap_or(f64::NAN)
}
