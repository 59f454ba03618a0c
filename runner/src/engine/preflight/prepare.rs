//! Preparing the checks that qualify ([`super::qualify`]) for each job run: its contexts
//! before the first step, each check's inputs evaluated as the step would see them, the
//! throw-away container spec of the image it looks into, and the images `start-container`
//! steps will need. A check whose inputs do not evaluate is left to fail at its place, with
//! its location.

use std::collections::HashSet;

use indexmap::IndexMap;

use super::qualify::{
    Candidate, StartAt, candidates, does, memory_checks, path_checks, static_inputs,
};
use crate::backend::{ContainerSpec, PullPolicy, RegistryAuth, VolumeMount};
use crate::diag::SourceFile;
use crate::engine::container_inputs::{credentials, start_container_spec};
use crate::engine::evaluate::{eval_string, eval_value, matrix_value};
use crate::engine::shared::Shared;
use crate::engine::step_inputs;
use crate::events::JobRef;
use crate::expr::{MapContext, Value};
use crate::plan::PlannedJob;
use crate::steps::{self, Effect};
use crate::workflow::model::{Action, Job, Step, Uses, Workflow};

/// Everything preflight will check, prepared.
pub(super) struct Prepared {
    /// Image → how it may be pulled, the first job run using it, and the credentials its step
    /// gives for the pull (`credentials:`).
    pub(super) images: IndexMap<String, (PullPolicy, JobRef, Option<RegistryAuth>)>,
    /// Per job run, its checks in order.
    pub(super) by_run: Vec<Vec<Ready>>,
}

impl Prepared {
    pub(super) fn is_empty(&self) -> bool {
        self.images.is_empty() && self.by_run.iter().all(Vec::is_empty)
    }
}

/// The images and checks of every job run of `runs`. Checks with the same inputs in several
/// matrix cells are kept once.
pub(super) fn prepare_all(shared: &Shared, runs: &[PlannedJob], refs: &[JobRef]) -> Prepared {
    let mut seen = HashSet::new();
    let mut prepared = Prepared {
        images: IndexMap::new(),
        by_run: Vec::new(),
    };
    for (planned, jref) in runs.iter().zip(refs) {
        let job = &shared.wf.jobs[&planned.job_id];
        let (ctx, env) = start_context(shared, planned, job);
        let mut ready = Vec::new();
        if job.condition.is_none() {
            for step in &job.steps {
                let Some(step_ctx) = ctx_for(&ctx, &env, step, &shared.wf.file) else {
                    continue;
                };
                if let Some((image, pull, auth)) = start_image(shared, step, &step_ctx) {
                    prepared
                        .images
                        .entry(image)
                        .or_insert_with(|| (pull, jref.clone(), auth));
                }
            }
        }
        let paths = path_checks(&shared.wf, job)
            .into_iter()
            .filter_map(|at| prepare_paths(shared, job, at, (&ctx, &env), jref));
        let memory = memory_checks(&shared.wf, job)
            .into_iter()
            .filter_map(|at| prepare_memory(shared, planned, job, at, (&ctx, &env), jref));
        let server_cli = memory_checks(&shared.wf, job)
            .into_iter()
            .filter_map(|at| prepare_server_cli(shared, job, at, (&ctx, &env), jref));
        let checks = candidates(&shared.wf, job)
            .into_iter()
            .filter_map(|c| prepare(shared, job, &c, (&ctx, &env), jref).map(|r| (c.step, r)));
        // The paths a server needs first: they are looked for before its command line, its
        // memory and the flags of other programs.
        for (step, r) in paths.chain(server_cli).chain(memory).chain(checks) {
            let key = format!(
                "{}#{step}#{:?}#{:?}#{:?}",
                planned.job_id, r.check, r.inputs, r.container
            );
            if seen.insert(key) {
                ready.push(r);
            }
        }
        prepared.by_run.push(ready);
    }
    prepared
}

/// One check ready to run: its inputs evaluated for one job run.
pub(super) struct Ready {
    pub(super) jref: JobRef,
    pub(super) step_key: String,
    pub(super) check: Check,
    pub(super) label: String,
    pub(super) inputs: IndexMap<String, Value>,
    /// Where each of the step's inputs is written ([`step_inputs::places`]).
    pub(super) places: IndexMap<String, String>,
    /// The container's name and the throw-away spec of its image.
    pub(super) container: Option<(String, ContainerSpec)>,
}

/// What a preflight check runs.
#[derive(Debug)]
pub(super) enum Check {
    /// A built-in step (`check-cli-interface`, `assert-file`), through the engine's dispatch.
    Builtin(String),
    /// The `required-paths` of a `start-container`, with its volumes as written, and where the
    /// job gives them (`file:line:col`).
    Paths {
        paths: Vec<String>,
        volumes: Vec<VolumeMount>,
        at: String,
        /// Per host folder the volumes mount: the input of the job's step that gives it and
        /// where (`file:line:col`), for a folder that does not exist.
        sources: Vec<MountSource>,
    },
    /// The memory estimate of the model server a `start-container` starts: its flags, the
    /// GPUs the job asks for, and where the job writes the flags (`file:line:col`).
    Memory {
        /// Boxed: the flags are the largest of the checks' fields.
        flags: Box<crate::memory::ServerFlags>,
        request: crate::gpu::Request,
        at: String,
    },
    /// The command line of the SGLang or vLLM server a `start-container` starts, against its
    /// program's own help in the image: the container's entrypoint as the step gives it
    /// (`None`: the image's), its command, and where the job writes them (`file:line:col`).
    ServerCli {
        image: String,
        entrypoint: Option<Vec<String>>,
        command: Vec<String>,
        at: String,
    },
}

/// Where the job gives a bind mount's host folder.
#[derive(Debug)]
pub(super) struct MountSource {
    pub(super) path: String,
    /// `the input `models` of the step gives it`.
    pub(super) given: String,
    pub(super) at: String,
}

/// The contexts a job run has before its first step, and its `env` (the workflow's, then the
/// job's) as far as it evaluates.
fn start_context(
    shared: &Shared,
    planned: &PlannedJob,
    job: &Job,
) -> (MapContext, IndexMap<String, String>) {
    start_context_of(
        &shared.wf,
        &shared.base,
        &shared.opts.workspace,
        planned,
        job,
    )
}

/// [`start_context`] from its parts: the run's base contexts and workspace.
pub(super) fn start_context_of(
    wf: &Workflow,
    base: &IndexMap<String, Value>,
    workspace: &std::path::Path,
    planned: &PlannedJob,
    job: &Job,
) -> (MapContext, IndexMap<String, String>) {
    let mut ctx = MapContext::new();
    for (k, v) in base {
        ctx.insert(k.clone(), v.clone());
    }
    ctx.insert("matrix", matrix_value(planned));
    ctx.insert(
        "strategy",
        crate::engine::evaluate::object([
            ("fail-fast", Value::Bool(planned.fail_fast)),
            ("job-index", Value::Number(planned.cell as f64)),
            ("job-total", Value::Number(planned.cells as f64)),
        ]),
    );
    let mut ctx = ctx.with_workspace(workspace);
    let mut env = IndexMap::new();
    for (k, v) in wf.env.iter().chain(&job.env) {
        ctx.insert("env", env_value(&env));
        // One that does not evaluate fails the job at its start, with its location.
        if let Ok(value) = eval_string(v, &ctx, &wf.file) {
            env.insert(k.clone(), value);
        }
    }
    ctx.insert("env", env_value(&env));
    (ctx, env)
}

fn env_value(env: &IndexMap<String, String>) -> Value {
    Value::Object(
        env.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// `ctx` with the step's own `env:` over `env`, as the step sees it.
fn ctx_for(
    ctx: &MapContext,
    env: &IndexMap<String, String>,
    step: &Step,
    file: &SourceFile,
) -> Option<MapContext> {
    let mut ctx = ctx.clone();
    let mut env = env.clone();
    for (k, v) in &step.env {
        ctx.insert("env", env_value(&env));
        env.insert(k.clone(), eval_string(v, &ctx, file).ok()?);
    }
    ctx.insert("env", env_value(&env));
    Some(ctx)
}

/// The image an unconditional `start-container` step with inputs known at the start uses,
/// how it may be pulled, and the credentials it gives for the pull.
fn start_image(
    shared: &Shared,
    step: &Step,
    ctx: &MapContext,
) -> Option<(String, PullPolicy, Option<RegistryAuth>)> {
    let Some(Uses::Builtin(name)) = step.uses.as_ref().map(|u| &u.value) else {
        return None;
    };
    // `env` may have changed by then: an image read from it is checked at its place.
    if !does(name, Effect::StartsContainer)
        || step.condition.is_some()
        || !static_inputs(step, false)
    {
        return None;
    }
    let inputs = step_inputs::inputs(name, step, ctx, &shared.wf.file).ok()?;
    // `always` is pulled here too: once per run, the step then uses what this pull got.
    let pull = PullPolicy::from_input(inputs.get("pull").map(|p| p.to_expr_string()).as_deref());
    // Credentials that do not read are the step's to refuse, at its place.
    let auth = credentials(inputs.get("credentials")).ok()?;
    if let Some(auth) = &auth {
        shared.masker.add(auth.password());
    }
    inputs
        .get("image")
        .map(|i| (i.to_expr_string(), pull, auth))
}

fn prepare(
    shared: &Shared,
    job: &Job,
    c: &Candidate,
    (ctx, env): (&MapContext, &IndexMap<String, String>),
    jref: &JobRef,
) -> Option<Ready> {
    let wf = &shared.wf;
    let step = &job.steps[c.step];
    let Some(Uses::Builtin(name)) = step.uses.as_ref().map(|u| &u.value) else {
        return None;
    };
    // An input that does not evaluate fails the step at its place, with its location.
    let step_ctx = ctx_for(ctx, env, step, &wf.file)?;
    let inputs = step_inputs::inputs(name, step, &step_ctx, &wf.file).ok()?;
    let container = match c.start {
        None => None,
        Some(at) => {
            let (_, start_inputs) = start_inputs(shared, job, at, (ctx, env))?;
            let spec = start_container_spec(&start_inputs, None).ok()?.harmless();
            let name = inputs.get("container")?.to_expr_string();
            Some((name, spec))
        }
    };
    let label = step
        .name
        .as_ref()
        .map_or_else(|| name.clone(), |n| n.value.clone());
    Some(Ready {
        jref: jref.clone(),
        step_key: (c.step + 1).to_string(),
        check: Check::Builtin(name.clone()),
        label,
        inputs,
        places: step_inputs::places(step, &wf.file),
        container,
    })
}

/// The built-in a step uses (`None` for a script or an action).
fn builtin_name(step: &Step) -> Option<&str> {
    match step.uses.as_ref().map(|u| &u.value) {
        Some(Uses::Builtin(name)) => Some(name),
        _ => None,
    }
}

/// The evaluated inputs of the `start-container` step at `at`, and the name its container gets
/// (`name`, else the step's `id`).
fn start_inputs(
    shared: &Shared,
    job: &Job,
    at: StartAt,
    (ctx, env): (&MapContext, &IndexMap<String, String>),
) -> Option<(String, IndexMap<String, Value>)> {
    start_inputs_of(&shared.wf, job, at, (ctx, env))
}

/// [`start_inputs`] of the workflow `wf`.
pub(super) fn start_inputs_of(
    wf: &Workflow,
    job: &Job,
    at: StartAt,
    (ctx, env): (&MapContext, &IndexMap<String, String>),
) -> Option<(String, IndexMap<String, Value>)> {
    let call = &job.steps[at.step];
    let call_ctx = ctx_for(ctx, env, call, &wf.file)?;
    let (inputs, id) = match at.inner {
        None => (
            step_inputs::inputs(builtin_name(call)?, call, &call_ctx, &wf.file).ok()?,
            call.id.as_ref(),
        ),
        Some(j) => {
            let key = call.uses.as_ref()?.value.action_key()?;
            let action = wf.actions.get(&key)?;
            let mut action_ctx = call_ctx.clone();
            action_ctx.insert("inputs", action_inputs(call, action, &call_ctx, &wf.file)?);
            let inner = &action.runs.steps[j];
            let inner_ctx = ctx_for(&action_ctx, env, inner, &action.file)?;
            (
                step_inputs::inputs(builtin_name(inner)?, inner, &inner_ctx, &action.file).ok()?,
                inner.id.as_ref(),
            )
        }
    };
    let name = inputs
        .get("name")
        .map(Value::to_expr_string)
        .filter(|n| !n.is_empty())
        .or_else(|| id.map(|i| i.value.clone()))?;
    Some((name, inputs))
}

/// The `required-paths` check of the `start-container` at `at`, when it names any.
fn prepare_paths(
    shared: &Shared,
    job: &Job,
    at: StartAt,
    (ctx, env): (&MapContext, &IndexMap<String, String>),
    jref: &JobRef,
) -> Option<(usize, Ready)> {
    let (name, inputs) = start_inputs(shared, job, at, (ctx, env))?;
    let paths = steps::required_paths::paths(&inputs);
    if paths.is_empty() {
        return None;
    }
    let spec = start_container_spec(&inputs, None).ok()?;
    let volumes = spec.volumes.clone();
    // Where the job says where the model is: the folder mounted, else the path, else the step.
    let step = &job.steps[at.step];
    let step_name = step_label(step, at.step);
    let at_span = |span| format!("{} (the step `{step_name}`)", shared.wf.file.location(span));
    let span = ["models", "volumes", "model", "required-paths"]
        .iter()
        .find_map(|k| step.with.get(*k).map(|v| v.span))
        .unwrap_or(step.span);
    let at_text = at_span(span);
    // A host folder that does not exist is named by the job's input that gives it: the
    // action's (`models`), else the step's own `volumes`.
    let given: IndexMap<String, String> = match at.inner {
        None => IndexMap::new(),
        Some(_) => {
            let key = step.uses.as_ref()?.value.action_key()?;
            let action = shared.wf.actions.get(&key)?;
            let step_ctx = ctx_for(ctx, env, step, &shared.wf.file)?;
            match action_inputs(step, action, &step_ctx, &shared.wf.file)? {
                Value::Object(m) => m
                    .into_iter()
                    .map(|(k, v)| (k, v.to_expr_string()))
                    .collect(),
                _ => IndexMap::new(),
            }
        }
    };
    let sources = volumes
        .iter()
        .filter(|v| v.is_bind())
        .map(|v| {
            let (input, given) = match steps::required_paths::input_giving(&given, &v.source) {
                Some(input) => (input, format!("the input `{input}` of the step gives it")),
                None => (
                    "volumes",
                    format!("the step's `volumes` gives it as `{}`", v.written()),
                ),
            };
            MountSource {
                path: v.source.clone(),
                given,
                at: at_span(step.with.get(input).map_or(step.span, |w| w.span)),
            }
        })
        .collect();
    Some((
        at.step,
        Ready {
            jref: jref.clone(),
            step_key: (at.step + 1).to_string(),
            check: Check::Paths {
                paths,
                volumes,
                at: at_text,
                sources,
            },
            label: format!("the paths container `{name}` needs"),
            inputs: IndexMap::new(),
            places: IndexMap::new(),
            container: Some((name, spec.harmless())),
        },
    ))
}

/// The memory check of the `start-container` at `at`, when it starts a model server and the
/// job asks for GPUs on a host whose GPUs are known.
fn prepare_memory(
    shared: &Shared,
    planned: &PlannedJob,
    job: &Job,
    at: StartAt,
    (ctx, env): (&MapContext, &IndexMap<String, String>),
    jref: &JobRef,
) -> Option<(usize, Ready)> {
    let request = {
        let gpus = planned.gpus.as_ref()?;
        shared.engines.gpus_for(jref)?;
        let ctx = ctx_for(ctx, env, &job.steps[at.step], &shared.wf.file)?;
        crate::engine::job_gpus::evaluate(gpus, &ctx, &shared.wf.file)
            .ok()?
            .lease_request()?
    };
    let (name, inputs) = start_inputs(shared, job, at, (ctx, env))?;
    let spec = start_container_spec(&inputs, None).ok()?;
    // A `preload-overhead` that does not read is the step's to refuse when it runs (before
    // its server starts); preflight does not estimate without it.
    let flags = steps::server_memory::server_flags(&spec, &inputs).ok()??;
    let at_text = flags_location(shared, job, at);
    Some((
        at.step,
        Ready {
            jref: jref.clone(),
            step_key: (at.step + 1).to_string(),
            check: Check::Memory {
                flags: Box::new(flags),
                request,
                at: at_text,
            },
            label: format!("the memory of the server in container `{name}`"),
            inputs: IndexMap::new(),
            places: IndexMap::new(),
            container: Some((name, spec.harmless())),
        },
    ))
}

/// The command-line check of the `start-container` at `at`, when it starts a server program
/// whose help gpuflow runs ([`steps::server_cli::recognise`]). Another command is not run
/// with `--help` (a wrapper may start a server instead): said at the info level, not checked.
fn prepare_server_cli(
    shared: &Shared,
    job: &Job,
    at: StartAt,
    (ctx, env): (&MapContext, &IndexMap<String, String>),
    jref: &JobRef,
) -> Option<(usize, Ready)> {
    let (name, inputs) = start_inputs(shared, job, at, (ctx, env))?;
    let spec = start_container_spec(&inputs, None).ok()?;
    let command = spec.command.clone()?;
    let at_text = flags_location(shared, job, at);
    // The whole command line is known unless the image's entrypoint comes before a command
    // of bare arguments; then it is read from the image when the check runs.
    let known = match &spec.entrypoint {
        Some(e) => Some(e.iter().chain(&command).cloned().collect::<Vec<_>>()),
        None if command.first().is_none_or(|w| w.starts_with('-')) => None,
        None => Some(command.clone()),
    };
    if let Some(argv) = known
        && let Err(why) = steps::server_cli::recognise(&argv)
    {
        tracing::info!(
            "preflight: the command of container `{name}` is not checked against its help: {why}; only {} are run with `--help` (a wrapper may ignore it and start a server) ({at_text})",
            steps::server_cli::KNOWN
        );
        return None;
    }
    Some((
        at.step,
        Ready {
            jref: jref.clone(),
            step_key: (at.step + 1).to_string(),
            check: Check::ServerCli {
                image: spec.image.clone(),
                entrypoint: spec.entrypoint.clone(),
                command,
                at: at_text,
            },
            label: format!("the command line of the server in container `{name}`"),
            inputs: IndexMap::new(),
            places: IndexMap::new(),
            container: Some((name, spec.harmless())),
        },
    ))
}

/// Where the server's flags of the `start-container` at `at` are written, for messages: the
/// action's `args`, else the step's `command`, with the step's name.
fn flags_location(shared: &Shared, job: &Job, at: StartAt) -> String {
    let step = &job.steps[at.step];
    let span = ["args", "command"]
        .iter()
        .find_map(|k| step.with.get(*k).map(|v| v.span))
        .unwrap_or(step.span);
    format!(
        "{} (the step `{}`)",
        shared.wf.file.location(span),
        step_label(step, at.step)
    )
}

/// How messages name the step at `index`: its `name`, else its `id`, else its number.
fn step_label(step: &Step, index: usize) -> String {
    step.name
        .as_ref()
        .map(|n| n.value.clone())
        .or_else(|| step.id.as_ref().map(|i| i.value.clone()))
        .unwrap_or_else(|| (index + 1).to_string())
}

/// The `inputs` an action's steps see, as the engine gives them (`with:`, else the default).
fn action_inputs(
    call: &Step,
    action: &Action,
    ctx: &MapContext,
    file: &SourceFile,
) -> Option<Value> {
    let mut inputs = IndexMap::new();
    for (name, input) in &action.inputs {
        let value = match (call.with.get(name), &input.default) {
            (Some(v), _) => eval_value(v, ctx, file).ok()?.to_expr_string(),
            (None, Some(d)) => eval_string(d, ctx, &action.file).ok()?,
            (None, None) => String::new(),
        };
        inputs.insert(name.clone(), Value::String(value));
    }
    Some(Value::Object(inputs))
}
