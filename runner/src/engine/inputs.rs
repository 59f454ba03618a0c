//! `--input name=value` checked against the workflow's `workflow_dispatch` inputs: unknown
//! names, missing required ones, types (`boolean`, `number`, `choice`), and defaults filled
//! in. The result is the `inputs` context.

use indexmap::IndexMap;

use crate::diag::{did_you_mean, join_quoted};
use crate::expr::Value;
use crate::workflow::model::{DispatchInputType, Workflow};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InputError {
    pub message: String,
    pub hint: Option<String>,
}

/// The `inputs` context for a run given `given` on the command line.
pub fn resolve(wf: &Workflow, given: &IndexMap<String, String>) -> Result<Value, InputError> {
    let declared = wf
        .on
        .workflow_dispatch
        .as_ref()
        .map(|d| &d.inputs)
        .cloned()
        .unwrap_or_default();
    if let Some(name) = given.keys().find(|k| !declared.contains_key(*k)) {
        let names: Vec<&str> = declared.keys().map(String::as_str).collect();
        return Err(InputError {
            message: format!("unknown input `{name}`"),
            hint: did_you_mean(name, &names).or_else(|| {
                Some(if names.is_empty() {
                    "this workflow declares no inputs (`on.workflow_dispatch.inputs`)".into()
                } else {
                    format!("the workflow's inputs are {}", join_quoted(&names, "and"))
                })
            }),
        });
    }
    let mut out = IndexMap::new();
    for (name, input) in &declared {
        let text = match (given.get(name), &input.default) {
            (Some(v), _) => v.clone(),
            (None, Some(d)) => d.value.clone(),
            (None, None) if input.required => {
                return Err(InputError {
                    message: format!("the input `{name}` is required"),
                    hint: Some(format!("pass it with `--input {name}=VALUE`")),
                });
            }
            (None, None) => {
                out.insert(
                    name.clone(),
                    match input.ty {
                        DispatchInputType::Boolean => Value::Bool(false),
                        _ => Value::String(String::new()),
                    },
                );
                continue;
            }
        };
        let value = match input.ty {
            DispatchInputType::Boolean => match text.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => {
                    return Err(InputError {
                        message: format!("the input `{name}` is a boolean, not `{text}`"),
                        hint: Some(format!(
                            "pass `--input {name}=true` or `--input {name}=false`"
                        )),
                    });
                }
            },
            DispatchInputType::Number => match crate::expr::parse_number(&text) {
                n if !n.is_nan() && !text.trim().is_empty() => Value::Number(n),
                _ => {
                    return Err(InputError {
                        message: format!("the input `{name}` is a number, not `{text}`"),
                        hint: None,
                    });
                }
            },
            DispatchInputType::Choice => {
                let options: Vec<&str> = input.options.iter().map(|o| o.value.as_str()).collect();
                if !options.contains(&text.as_str()) {
                    return Err(InputError {
                        message: format!("`{text}` is not one of the choices of input `{name}`"),
                        hint: did_you_mean(&text, &options)
                            .or_else(|| Some(format!("choose {}", join_quoted(&options, "or")))),
                    });
                }
                Value::String(text)
            }
            DispatchInputType::String | DispatchInputType::Environment => Value::String(text),
        };
        out.insert(name.clone(), value);
    }
    Ok(Value::Object(out))
}
