//! Hand-written JSON Schema pieces for fields that accept several shapes (a string or a list,
//! a boolean or an expression). Each says exactly what the loader accepts.

use schemars::{Schema, SchemaGenerator, json_schema};

/// A string holding a `${{ }}` expression.
pub fn expression() -> Schema {
    json_schema!({
        "type": "string",
        "pattern": "\\$\\{\\{",
        "description": "A `${{ }}` expression, evaluated when the workflow runs."
    })
}

/// One name, or a list of them (`needs: build` or `needs: [build, test]`).
pub fn string_or_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "oneOf": [
            { "type": "string" },
            { "type": "array", "items": { "type": "string" } }
        ]
    })
}

/// `runs-on`: a host name or label, a list of labels, or GitHub's `{group, labels}` (read as
/// its labels; `group` is ignored with a warning).
pub fn runs_on(generator: &mut SchemaGenerator) -> Schema {
    let labels = string_or_list(generator);
    json_schema!({
        "oneOf": [
            { "type": "string" },
            { "type": "array", "items": { "type": "string" } },
            {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "group": { "type": "string", "description": "A GitHub runner group: ignored by gpuflow (a warning)." },
                    "labels": labels
                }
            }
        ]
    })
}

/// Environment variables: names to scalars (GitHub turns numbers and booleans into strings).
pub fn env(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": { "type": ["string", "number", "boolean"] }
    })
}

/// A mapping of names to strings (job `outputs`).
pub fn string_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": { "type": "string" }
    })
}

/// Adds GitHub keys that the loader accepts with a warning and ignores, so an editor does not
/// flag a GitHub workflow that `gpuflow validate` accepts.
pub fn accept_ignored_keys(schema: &mut Schema, keys: &[&str]) {
    if let Some(properties) = schema
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        for key in keys {
            properties.insert(
                (*key).to_owned(),
                serde_json::json!({
                    "description": "Accepted for GitHub Actions compatibility; gpuflow ignores it (with a warning)."
                }),
            );
        }
    }
}

/// A scalar read as a string (`name: 5` is the name `5`).
pub fn scalar_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": ["string", "number", "boolean"] })
}
