//! The JSON Schemas of workflow and action files (`schemas/*.schema.json`), generated from the
//! model types (field shapes and doc comments) and the built-in step declarations (each
//! built-in's `with:` inputs, their types, defaults and docs). Editors use them through
//! yaml-language-server; `gpuflow validate` stays the authority for what a schema cannot say
//! (references, cycles, expressions).

use schemars::schema_for;
use serde_json::{Map, Value, json};

use crate::steps::{self, BuiltinSpec, InputType};
use crate::workflow::model::{Action, Workflow};

/// Where the generated files live, relative to the repository root.
pub const WORKFLOW_SCHEMA_FILE: &str = "workflow.schema.json";
pub const ACTION_SCHEMA_FILE: &str = "action.schema.json";

/// The workflow file schema.
pub fn workflow_schema() -> Value {
    let mut schema = serde_json::to_value(schema_for!(Workflow)).expect("schemas serialize");
    finish(
        &mut schema,
        "https://gpuflow.dev/schemas/workflow.schema.json",
    );
    schema
}

/// The action file (`action.yml`) schema.
pub fn action_schema() -> Value {
    let mut schema = serde_json::to_value(schema_for!(Action)).expect("schemas serialize");
    finish(
        &mut schema,
        "https://gpuflow.dev/schemas/action.schema.json",
    );
    schema
}

/// The schema as committed: pretty, with a trailing newline, so diffs read well.
pub fn to_file_text(schema: &Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).expect("schemas serialize");
    text.push('\n');
    text
}

fn finish(schema: &mut Value, id: &str) {
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("$id".into(), json!(id));
    }
    if let Some(step) = schema
        .pointer_mut("/$defs/Step")
        .and_then(Value::as_object_mut)
    {
        let rules: Vec<Value> = steps::builtins().map(builtin_rule).collect();
        step.insert("allOf".into(), Value::Array(rules));
    }
    if let Some(uses) = schema
        .pointer_mut("/$defs/Uses")
        .and_then(Value::as_object_mut)
    {
        let names: Vec<&str> = steps::builtins().map(|b| b.name).collect();
        uses.insert("examples".into(), json!(names));
    }
}

/// `if uses == <name> then with: {its inputs}`: an editor completes and checks a built-in's
/// inputs, and shows each input's doc on hover.
fn builtin_rule(b: &BuiltinSpec) -> Value {
    let mut properties = Map::new();
    for input in b.inputs {
        let mut s = input_type_schema(input.ty);
        let obj = s.as_object_mut().expect("object schema");
        obj.insert("description".into(), json!(input.doc));
        if let Some(default) = input.default {
            obj.insert("default".into(), json!(default));
        }
        properties.insert(input.name.into(), s);
    }
    let required: Vec<&str> = b
        .inputs
        .iter()
        .filter(|i| i.required)
        .map(|i| i.name)
        .collect();
    let mut with = json!({
        "type": "object",
        "description": b.summary,
        "properties": properties,
        "additionalProperties": false,
    });
    let mut then = json!({ "properties": { "with": with.clone() } });
    if !required.is_empty() {
        with["required"] = json!(required);
        then = json!({ "properties": { "with": with }, "required": ["with"] });
    }
    json!({
        "if": { "properties": { "uses": { "const": b.name } }, "required": ["uses"] },
        "then": then,
    })
}

fn expression() -> Value {
    json!({ "type": "string", "pattern": "\\$\\{\\{" })
}

fn or_expression(s: Value) -> Value {
    json!({ "anyOf": [s, expression()] })
}

fn input_type_schema(ty: InputType) -> Value {
    match ty {
        InputType::String => json!({ "type": ["string", "number", "boolean"] }),
        InputType::Integer => or_expression(json!({ "type": "integer", "minimum": 0 })),
        InputType::Number => or_expression(json!({ "type": "number" })),
        InputType::Bool => or_expression(json!({ "type": "boolean" })),
        InputType::Enum(values) => or_expression(json!({ "enum": values })),
        InputType::Duration => or_expression(json!({
            "type": "string",
            "pattern": "^\\s*([0-9]+(\\.[0-9]+)?\\s*[a-zA-Zµ]+\\s*)+$",
        })),
        InputType::Percent => or_expression(json!({
            "anyOf": [
                { "type": "number", "minimum": 0 },
                { "type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*%?\\s*$" }
            ]
        })),
        InputType::ByteSize => or_expression(json!({
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?\\s*([kKmMgGtT]([iI]?[bB])?|[bB])?$" }
            ]
        })),
        InputType::IntegerOrList => or_expression(json!({
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "array", "items": { "type": "integer", "minimum": 0 }, "minItems": 1 }
            ]
        })),
        InputType::List => json!({
            "anyOf": [
                { "type": "string" },
                { "type": "array", "items": { "type": ["string", "number", "boolean"] } }
            ]
        }),
        InputType::Map => or_expression(json!({
            "type": "object",
            "additionalProperties": { "type": ["string", "number", "boolean"] }
        })),
        InputType::Object => or_expression(json!({ "type": "object" })),
        InputType::Fields(keys) => or_expression(json!({
            "type": "object",
            "properties": keys
                .iter()
                .map(|k| ((*k).to_string(), json!({ "type": ["string", "number", "boolean"] })))
                .collect::<serde_json::Map<String, Value>>(),
            "required": keys,
            "additionalProperties": false
        })),
        InputType::Gpus => json!({
            "anyOf": [
                { "const": "all" },
                { "type": "integer", "minimum": 1 },
                { "type": "array", "items": { "type": ["string", "integer"] }, "minItems": 1 },
                expression()
            ]
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_gets_a_with_rule_with_its_required_inputs() {
        let schema = workflow_schema();
        let rules = schema
            .pointer("/$defs/Step/allOf")
            .and_then(Value::as_array)
            .unwrap();
        assert_eq!(rules.len(), steps::builtins().count());
        let start = rules
            .iter()
            .find(|r| r.pointer("/if/properties/uses/const") == Some(&json!("start-container")))
            .unwrap();
        let required = start.pointer("/then/properties/with/required").unwrap();
        assert!(required.as_array().unwrap().contains(&json!("image")));
    }
}
