//! A built-in step's `with:` evaluated for the step to run with: the typed values, with the
//! declared defaults for what it leaves out, and its shell-text inputs as the shell will read
//! them. The step itself lives in [`crate::steps`].

use indexmap::IndexMap;

use super::evaluate::eval_value;
use super::script::{RenderedScript, render};
use crate::diag::SourceFile;
use crate::expr::{MapContext, Value};
use crate::steps::StepError;
use crate::workflow::model::{Step, Value as ModelValue};

/// Where each input of the step's `with:` is written (`file:line:col`), so a step's failure
/// about one of them points there.
pub fn places(step: &Step, file: &SourceFile) -> IndexMap<String, String> {
    step.with
        .iter()
        .map(|(name, value)| (name.clone(), file.location(value.span)))
        .collect()
}

/// The line a built-in's failure is said with: at the place of the input it concerns, when
/// the step gives that input (a declared default has no place), with its hint.
pub fn error_text(error: &StepError, places: &IndexMap<String, String>) -> String {
    error.render(
        error
            .input_name()
            .and_then(|input| places.get(input))
            .map(String::as_str),
    )
}

/// The step's `with:` evaluated, with the declared defaults for what it leaves out.
pub fn inputs(
    name: &str,
    step: &Step,
    ctx: &MapContext,
    file: &SourceFile,
) -> Result<IndexMap<String, Value>, String> {
    let spec = crate::steps::builtin(name).ok_or_else(|| format!("unknown built-in `{name}`"))?;
    let mut out = IndexMap::new();
    for input in spec.inputs {
        if let Some(v) = step.with.get(input.name) {
            out.insert(input.name.to_string(), eval_value(v, ctx, file)?);
        } else if let Some(d) = input.default {
            out.insert(input.name.to_string(), Value::String(d.to_string()));
        } else if input.required {
            return Err(format!(
                "{}: `{name}` needs the input `{}`",
                file.location(step.span),
                input.name
            ));
        }
    }
    Ok(out)
}

/// The step's shell-text inputs ([`crate::steps::BuiltinSpec::shell_inputs`]) as the shell will read them:
/// every `${{ }}` replaced by a reference to an environment variable holding its value, as
/// for a `run:` script ([`crate::engine::script`]). The evaluated text in [`inputs`] is for
/// messages and the recorded result; this is what runs, so a branch named
/// `x$(touch /tmp/p)` is an argument, not a command.
pub fn shell_inputs(
    name: &str,
    step: &Step,
    ctx: &MapContext,
    file: &SourceFile,
) -> Result<IndexMap<String, RenderedScript>, String> {
    let mut out = IndexMap::new();
    for (input, v) in &step.with {
        if !crate::steps::is_shell_input(name, input) {
            continue;
        }
        let rendered = match &v.value {
            ModelValue::String(source) => render(source, true, ctx).map_err(|e| {
                let mut m = format!("{}: {e}", file.location(v.span));
                if let Some(h) = e.hint() {
                    m.push_str(&format!(" (help: {h})"));
                }
                m
            })?,
            // A number or a list has no `${{ }}` to turn into variables.
            _ => RenderedScript {
                text: eval_value(v, ctx, file)?.to_expr_string(),
                env: IndexMap::new(),
            },
        };
        out.insert(input.clone(), rendered);
    }
    Ok(out)
}
