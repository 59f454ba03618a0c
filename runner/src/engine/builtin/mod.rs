//! Executing the built-in steps the engine runs: `start-container` and `stop-container` here,
//! the others in files of their own. Their inputs come from the declarations in
//! [`crate::steps`] (defaults included), so what runs is what `gpuflow docs` describes.

pub mod assert_file;
mod benchmark;
pub mod causes;
mod check_cli_interface;
pub mod cli_usage;
mod compare_to_baseline;
pub mod flag_check;
mod gpu_timing;
mod recording;
mod report;
pub mod required_paths;
mod script_metrics;
mod step_context;
pub mod wait_for_health;

pub use step_context::{Recorded, StepContext, StepGpus};

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use super::container_inputs::start_container_spec;
use super::containers::JobContainers;
use super::evaluate::eval_value;
use super::event::JobRef;
use super::executor::Shared;
use super::script::{RenderedScript, render};
use crate::backend::GpuRequest;
use crate::diag::SourceFile;
use crate::expr::{MapContext, Value};
use crate::workflow::model::{Step, Value as ModelValue};

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

/// The step's shell-text inputs ([`crate::steps::SHELL_INPUTS`]) as the shell will read them:
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

/// Whether the built-in `name` may need the job's Docker engine. The others (judging results,
/// writing reports, checking host files) run on a GPU machine without Docker too, and so do
/// `benchmark` and `wait-for-health`: they use the job's containers when an earlier step
/// reached the engine (a server it started, to watch for crashes or to run a script in) and
/// need none against a server on the host, so no connection is tried for them.
pub fn needs_engine(name: &str) -> bool {
    !matches!(
        name,
        "compare-to-baseline" | "report" | "assert-file" | "benchmark" | "wait-for-health"
    )
}

/// Runs the built-in `name` (its place, cancellation and recorded results are in `step`);
/// returns its outputs. `containers` is `None` when the job's host has no reachable engine.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    name: &str,
    inputs: &IndexMap<String, Value>,
    containers: Option<&mut JobContainers>,
    shared: &Arc<Shared>,
    job: &JobRef,
    job_gpus: Option<GpuRequest>,
    step: &mut StepContext<'_>,
) -> Result<IndexMap<String, String>, String> {
    let step_id = step.step_id;
    // `None` when the job's host has no reachable engine: only the steps that touch
    // containers need one (see `needs_engine`).
    let engine_error = || format!("`{name}` needs a Docker engine, and this job's host has none");
    let text = |k: &str| {
        inputs
            .get(k)
            .map(Value::to_expr_string)
            .filter(|s| !s.is_empty())
    };
    match name {
        "start-container" => {
            let containers = containers.ok_or_else(engine_error)?;
            let container = text("name").or_else(|| step_id.map(String::from)).ok_or(
                "give the container a name: `with: { name: server }`, or give the step an `id`",
            )?;
            let spec = start_container_spec(inputs, job_gpus)?;
            match text("pull").as_deref() {
                Some("always") => containers
                    .docker
                    .pull_image(&spec.image)
                    .await
                    .map_err(|e| e.to_string())?,
                Some("never") => {
                    let has = containers
                        .docker
                        .has_image(&spec.image)
                        .await
                        .map_err(|e| e.to_string())?;
                    if !has {
                        return Err(format!(
                            "the image `{}` is not on the engine and `pull: never` was asked",
                            spec.image
                        ));
                    }
                }
                _ => {}
            }
            // A missing host folder is named by the action's input that gave it (`models`),
            // else by the step's `volumes`.
            let action_inputs = &step.action_inputs;
            let origin = |path: &str| {
                required_paths::input_giving(action_inputs, path)
                    .map(|input| format!("the action's input `{input}` gives it"))
            };
            let paths = required_paths::paths(inputs);
            if !paths.is_empty() {
                required_paths::check_at_start(
                    containers, shared, job, &container, &spec, &paths, &origin,
                )
                .await?;
            }
            let started = containers
                .start(shared, job, &container, spec.clone())
                .await
                .map_err(|e| {
                    format!(
                        "could not start container `{container}`: {}",
                        required_paths::start_error(&e, &spec, &origin)
                    )
                })?;
            Ok(IndexMap::from([
                ("name".to_string(), container.clone()),
                ("id".to_string(), started.id.clone()),
            ]))
        }
        "stop-container" => {
            let container = text("container").ok_or("the input `container` is required")?;
            let timeout = text("timeout").unwrap_or_else(|| "10s".into());
            let grace = humantime::parse_duration(&timeout)
                .map_err(|_| format!("`timeout` is `{timeout}`, not a duration such as `30s`"))?;
            let remove = text("remove").is_none_or(|r| r != "false");
            let containers = containers.ok_or_else(engine_error)?;
            let code = containers
                .stop(
                    shared,
                    job,
                    &container,
                    grace.max(Duration::from_secs(0)),
                    remove,
                )
                .await
                .map_err(|e| {
                    let mut m = format!("could not stop container `{container}`: {e}");
                    if let Some(h) = e.hint() {
                        m.push_str(&format!(" (help: {h})"));
                    }
                    m
                })?;
            Ok(IndexMap::from([(
                "exit-code".to_string(),
                code.to_string(),
            )]))
        }
        "wait-for-health" => {
            let call = wait_for_health::Call {
                containers: containers.map(|c| &*c),
                shared,
                job,
                step: step.key,
                cancel: &step.cancel,
                env: step.env,
                shell: step.shell.get("command"),
            };
            wait_for_health::run(inputs, call).await
        }
        "assert-file" => {
            assert_file::run(inputs, containers.map(|c| &*c), &shared.opts.workspace).await
        }
        "check-cli-interface" => {
            let warn = |message: String| {
                shared.emit(super::event::EventKind::Warning {
                    job: Some(job.clone()),
                    message,
                });
            };
            let containers = containers.ok_or_else(engine_error)?;
            check_cli_interface::run(inputs, containers, &shared.opts.workspace, &warn).await
        }
        "benchmark" => benchmark::run(inputs, containers, shared, job, step).await,
        "compare-to-baseline" => compare_to_baseline::run(inputs, shared, job, step),
        "report" => {
            let outputs = report::run(inputs, shared, job, step.key).await?;
            if let Some(path) = outputs.get("path") {
                shared.emit(super::event::EventKind::ReportWritten(
                    super::event::ReportFile {
                        job: job.clone(),
                        step: step.key.to_string(),
                        path: path.clone(),
                        commit: outputs.get("commit").cloned(),
                    },
                ));
            }
            Ok(outputs)
        }
        other => Err(format!(
            "the built-in step `{other}` is not available yet (refused before the run)"
        )),
    }
}
