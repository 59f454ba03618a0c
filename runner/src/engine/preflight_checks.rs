//! Preflight: before any job starts, every check whose answer cannot change by the time its
//! step runs is run now, so a wrong flag or a missing file costs seconds instead of a model
//! load. `check-cli-interface` and `assert-file` steps on a container that a `start-container`
//! step starts from an image are run in a throw-away container of that image (labelled with
//! the run, removed after); the same steps on the host run on the host; the images of
//! `start-container` steps must be on the engine (or pullable).
//!
//! A check qualifies only when nothing before it can change its answer ([`candidates`]): its
//! job and step have no `if:`, the step has no `continue-on-error`, its inputs read only the
//! contexts known at the start (`matrix`, `inputs`, `vars`, `github`, `secrets`, `strategy`),
//! and no earlier step writes where it looks (a `run:` in its container or, for host checks, a
//! `run:` or action at all, or a job it `needs`). The others run at their place.
//!
//! The checks run through the built-ins' own [`steps::Builtin::run`], exactly as the
//! steps would; this module decides what runs early and where, not how a check works.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use super::container_inputs::start_container_spec;
use super::containers::JobContainers;
use super::evaluate::{eval_string, eval_value};
use super::executor::Shared;
use super::step_inputs;
use crate::backend::ContainerSpec;
use crate::diag::SourceFile;
use crate::events::{EventKind, JobRef, StepOutcome};
use crate::expr::{MapContext, Value, parse_template};
use crate::plan::PlannedJob;
use crate::steps::{self, Effect, StepCall, StepContext, StepHost};
use crate::workflow::model::{Action, Job, Step, Uses, Value as ModelValue, Workflow};

/// Whether the built-in `name` is one preflight may run early ([`steps::Builtin::runs_in_preflight`]).
fn runs_early(name: &str) -> bool {
    steps::registered(name).is_some_and(|b| b.runs_in_preflight())
}

/// Whether the built-in `name` does `effect`.
fn does(name: &str, effect: Effect) -> bool {
    steps::effect(name) == Some(effect)
}

/// Contexts whose values are known before the first step. `env` is too, until a step could
/// have changed it through `$GITHUB_ENV`; `steps`, `needs`, `job` and `runner` are not.
const KNOWN_AT_START: &[&str] = &[
    "matrix", "inputs", "vars", "github", "gpuflow", "secrets", "strategy",
];

/// Where a container comes from: a `start-container` step of the job, or one inside the
/// composite action a job step uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartAt {
    /// Index of the job's step.
    pub step: usize,
    /// Index of the `start-container` step inside that step's action.
    pub inner: Option<usize>,
}

/// A step of a job that preflight runs early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Index of the check step in the job.
    pub step: usize,
    /// Where the container the check looks into is started; `None` on the host.
    pub start: Option<StartAt>,
}

/// How preflight ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreflightReport {
    pub checks: usize,
    pub failed: usize,
}

impl PreflightReport {
    pub fn passed(&self) -> bool {
        self.failed == 0
    }
}

/// What the steps before a check may have changed.
struct Walk {
    /// Container name → where it was started, while nothing touched it since.
    started: HashMap<String, StartAt>,
    host_touched: bool,
    /// No step could have written `$GITHUB_ENV` yet.
    env_known: bool,
}

impl Walk {
    /// After a step that may run anything anywhere (an unknown or conditional action).
    fn opaque(&mut self) {
        self.host_touched = true;
        self.env_known = false;
        self.started.clear();
    }

    /// After a `run:` step: it may write `$GITHUB_ENV` and whatever its place holds.
    fn script(&mut self, container: Option<Option<String>>) {
        self.env_known = false;
        match container {
            Some(Some(name)) => {
                self.started.remove(&name);
            }
            // A container chosen by an expression could be any of them.
            Some(None) => self.started.clear(),
            None => self.host_touched = true,
        }
    }
}

/// The checks of `job` (of `wf`) preflight may run, in step order.
pub fn candidates(wf: &Workflow, job: &Job) -> Vec<Candidate> {
    if job.condition.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut walk = Walk {
        started: HashMap::new(),
        host_touched: !job.needs.is_empty(),
        env_known: true,
    };
    for (i, step) in job.steps.iter().enumerate() {
        match step.uses.as_ref().map(|u| &u.value) {
            None => walk.script(step.container.as_ref().map(|c| literal(&c.value))),
            Some(Uses::Builtin(name)) if does(name, Effect::StartsContainer) => {
                let container = with_literal(step, "name")
                    .or_else(|| step.id.as_ref().map(|i| i.value.clone()));
                if let Some(c) = container {
                    if step.condition.is_none() && static_inputs(step, walk.env_known) {
                        walk.started.insert(
                            c,
                            StartAt {
                                step: i,
                                inner: None,
                            },
                        );
                    } else {
                        walk.started.remove(&c);
                    }
                }
            }
            Some(Uses::Builtin(name)) if does(name, Effect::StopsContainer) => {
                match with_literal(step, "container") {
                    Some(c) => {
                        walk.started.remove(&c);
                    }
                    None => walk.started.clear(),
                }
            }
            Some(Uses::Builtin(name)) if runs_early(name) => {
                let eligible = step.condition.is_none()
                    && step.continue_on_error.is_none()
                    && static_inputs(step, walk.env_known);
                if !eligible {
                    continue;
                }
                match step.with.get("container") {
                    None if !walk.host_touched => out.push(Candidate {
                        step: i,
                        start: None,
                    }),
                    None => {}
                    Some(_) => {
                        if let Some(start) =
                            with_literal(step, "container").and_then(|c| walk.started.get(&c))
                        {
                            out.push(Candidate {
                                step: i,
                                start: Some(*start),
                            });
                        }
                    }
                }
            }
            Some(Uses::Builtin(_)) => {}
            Some(uses @ (Uses::Local(_) | Uses::Remote { .. })) => match uses
                .action_key()
                .and_then(|k| wf.actions.get(&k))
            {
                Some(action) if step.condition.is_none() && static_inputs(step, walk.env_known) => {
                    follow_action(step, i, action, &mut walk);
                }
                _ => walk.opaque(),
            },
            Some(_) => walk.opaque(),
        }
    }
    out
}

/// The steps of a composite action used by job step `i`: the containers it starts (by the
/// names its inputs give them) and what its scripts may change. Actions inside it are opaque.
fn follow_action(call: &Step, i: usize, action: &Action, walk: &mut Walk) {
    let resolve = |v: &str| action_literal(call, action, v);
    for (j, inner) in action.runs.steps.iter().enumerate() {
        match inner.uses.as_ref().map(|u| &u.value) {
            None => walk.script(inner.container.as_ref().map(|c| resolve(&c.value))),
            Some(Uses::Builtin(name)) if does(name, Effect::StartsContainer) => {
                let container = match inner.with.get("name").map(|v| &v.value) {
                    Some(ModelValue::String(s)) => resolve(s.as_str()),
                    Some(_) => None,
                    None => inner.id.as_ref().map(|i| i.value.clone()),
                };
                if let Some(c) = container {
                    if inner.condition.is_none() && static_inputs(inner, walk.env_known) {
                        walk.started.insert(
                            c,
                            StartAt {
                                step: i,
                                inner: Some(j),
                            },
                        );
                    } else {
                        walk.started.remove(&c);
                    }
                }
            }
            Some(Uses::Builtin(name)) if does(name, Effect::StopsContainer) => {
                match inner.with.get("container").map(|v| &v.value) {
                    Some(ModelValue::String(s)) if resolve(s).is_some() => {
                        walk.started.remove(&resolve(s).unwrap_or_default());
                    }
                    _ => walk.started.clear(),
                }
            }
            Some(Uses::Builtin(_)) => {}
            Some(_) => walk.opaque(),
        }
    }
}

/// The `start-container` steps (of the job, or inside the composite actions it uses) whose
/// `required-paths` preflight looks for, in step order. Only while nothing before them could
/// have put the paths there: no `run:` step, no `benchmark` (it may run a command), no action
/// gpuflow cannot see into, no earlier container with a writable volume (a downloader), no
/// `services:` and no job this one `needs`. The others are looked for at their place.
pub fn path_checks(wf: &Workflow, job: &Job) -> Vec<StartAt> {
    let mut out = Vec::new();
    if job.condition.is_some() || !job.needs.is_empty() || !job.services.is_empty() {
        return out;
    }
    // Whether a step may have written somewhere a later container mounts; `false` ends the walk.
    let step_keeps = |step: &Step, at: StartAt, out: &mut Vec<StartAt>| -> bool {
        match step.uses.as_ref().map(|u| &u.value) {
            Some(Uses::Builtin(name)) if does(name, Effect::StartsContainer) => {
                if step.condition.is_none()
                    && static_inputs(step, true)
                    && step.with.contains_key("required-paths")
                {
                    out.push(at);
                }
                !writable_volumes(step)
            }
            Some(Uses::Builtin(name)) => !does(name, Effect::MayWrite),
            _ => false,
        }
    };
    for (i, step) in job.steps.iter().enumerate() {
        let keeps = match step.uses.as_ref().map(|u| &u.value) {
            Some(uses @ (Uses::Local(_) | Uses::Remote { .. })) => {
                match uses.action_key().and_then(|k| wf.actions.get(&k)) {
                    Some(action) if step.condition.is_none() && static_inputs(step, true) => {
                        action.runs.steps.iter().enumerate().all(|(j, inner)| {
                            step_keeps(
                                inner,
                                StartAt {
                                    step: i,
                                    inner: Some(j),
                                },
                                &mut out,
                            )
                        })
                    }
                    _ => false,
                }
            }
            _ => step_keeps(
                step,
                StartAt {
                    step: i,
                    inner: None,
                },
                &mut out,
            ),
        };
        if !keeps {
            break;
        }
    }
    out
}

/// Whether a `start-container` step may mount something writable: a `volumes` item that is
/// not a literal ending in `:ro`.
fn writable_volumes(step: &Step) -> bool {
    match step.with.get("volumes").map(|v| &v.value) {
        None => false,
        Some(ModelValue::List(items)) => items.iter().any(|i| match &i.value {
            ModelValue::String(s) => literal(s).is_none_or(|s| !s.trim_end().ends_with(":ro")),
            _ => true,
        }),
        Some(_) => true,
    }
}

/// A value inside an action that is a literal, or exactly `${{ inputs.NAME }}` with `NAME`
/// given literally by the calling step or by the input's default.
fn action_literal(call: &Step, action: &Action, value: &str) -> Option<String> {
    if let Some(l) = literal(value) {
        return Some(l);
    }
    let name = value
        .trim()
        .strip_prefix("${{")?
        .strip_suffix("}}")?
        .trim()
        .strip_prefix("inputs.")?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    match call.with.get(name) {
        Some(v) => match &v.value {
            ModelValue::String(s) => literal(s),
            _ => None,
        },
        None => literal(&action.inputs.get(name)?.default.as_ref()?.value),
    }
}

/// The text of a `with:` input without expressions.
fn with_literal(step: &Step, input: &str) -> Option<String> {
    match &step.with.get(input)?.value {
        ModelValue::String(s) => literal(s),
        _ => None,
    }
}

fn literal(s: &str) -> Option<String> {
    (!s.contains("${{")).then(|| s.to_string())
}

/// Whether every `with:` and `env:` value of the step reads only contexts known at the start
/// (`env` among them while `env_known`).
fn static_inputs(step: &Step, env_known: bool) -> bool {
    step.with
        .values()
        .all(|v| static_value(&v.value, env_known))
        && step.env.values().all(|v| static_text(&v.value, env_known))
}

fn static_value(v: &ModelValue, env_known: bool) -> bool {
    match v {
        ModelValue::String(s) => static_text(s, env_known),
        ModelValue::List(items) => items.iter().all(|i| static_value(&i.value, env_known)),
        ModelValue::Map(m) => m.values().all(|i| static_value(&i.value, env_known)),
        _ => true,
    }
}

fn static_text(s: &str, env_known: bool) -> bool {
    parse_template(s).is_ok_and(|t| {
        t.expressions().all(|(e, _)| {
            e.context_accesses().iter().all(|a| {
                a.path.first().is_some_and(|root| {
                    let root = root.to_ascii_lowercase();
                    KNOWN_AT_START.contains(&root.as_str()) || env_known && root == "env"
                })
            })
        })
    })
}

/// One check ready to run: its inputs evaluated for one job run.
struct Ready {
    jref: JobRef,
    step_key: String,
    check: Check,
    label: String,
    inputs: IndexMap<String, Value>,
    /// The container's name and the throw-away spec of its image.
    container: Option<(String, ContainerSpec)>,
}

/// What a preflight check runs.
#[derive(Debug)]
enum Check {
    /// A built-in step (`check-cli-interface`, `assert-file`), through the engine's dispatch.
    Builtin(String),
    /// The `required-paths` of a `start-container`, with its volumes as written, and where the
    /// job gives them (`file:line:col`).
    Paths {
        paths: Vec<String>,
        volumes: Vec<crate::backend::VolumeMount>,
        at: String,
        /// Per host folder the volumes mount: the input of the job's step that gives it and
        /// where (`file:line:col`), for a folder that does not exist.
        sources: Vec<MountSource>,
    },
}

/// Where the job gives a bind mount's host folder.
#[derive(Debug)]
struct MountSource {
    path: String,
    /// `the input `models` of the step gives it`.
    given: String,
    at: String,
}

/// Runs every preflight check of `runs`; says what it does through events. Checks with the
/// same inputs in several matrix cells run once.
pub async fn run(
    shared: &Arc<Shared>,
    runs: &[PlannedJob],
    refs: &[JobRef],
    cancel: &CancellationToken,
) -> PreflightReport {
    let started = Instant::now();
    let mut report = PreflightReport::default();
    let mut seen = HashSet::new();
    let mut by_run: Vec<Vec<Ready>> = Vec::new();
    // Image → whether it may be pulled, and the first job run using it.
    let mut images: IndexMap<String, (bool, JobRef)> = IndexMap::new();
    for (planned, jref) in runs.iter().zip(refs) {
        let job = &shared.wf.jobs[&planned.job_id];
        let (ctx, env) = start_context(shared, planned, job);
        let mut ready = Vec::new();
        if job.condition.is_none() {
            for step in &job.steps {
                let Some(step_ctx) = ctx_for(&ctx, &env, step, &shared.wf.file) else {
                    continue;
                };
                if let Some((image, pull)) = start_image(shared, step, &step_ctx) {
                    images.entry(image).or_insert_with(|| (pull, jref.clone()));
                }
            }
        }
        let paths = path_checks(&shared.wf, job)
            .into_iter()
            .filter_map(|at| prepare_paths(shared, job, at, (&ctx, &env), jref));
        let checks = candidates(&shared.wf, job)
            .into_iter()
            .filter_map(|c| prepare(shared, job, &c, (&ctx, &env), jref).map(|r| (c.step, r)));
        // The paths a server needs first: they are looked for before its flags.
        for (step, r) in paths.chain(checks) {
            let key = format!(
                "{}#{step}#{:?}#{:?}#{:?}",
                planned.job_id, r.check, r.inputs, r.container
            );
            if seen.insert(key) {
                ready.push(r);
            }
        }
        by_run.push(ready);
    }
    if images.is_empty() && by_run.iter().all(Vec::is_empty) {
        return report;
    }

    for (image, (pull, jref)) in &images {
        report.checks += 1;
        let t = Instant::now();
        // Each image is looked for on the engine of the host its job runs on.
        let problem = match shared.engines.for_job(jref).await {
            Err(e) => Some(e),
            Ok(docker) => match docker.has_image(image).await {
                Ok(true) => None,
                Ok(false) if !pull => Some(format!(
                    "the image `{image}` is not on the engine and `pull: never` was asked"
                )),
                Ok(false) => docker.pull_image(image).await.err().map(|e| {
                    let mut m = format!(
                        "the image `{image}` is not on the engine and could not be pulled: {e}"
                    );
                    if let Some(h) = e.hint() {
                        m.push_str(&format!(" (help: {h})"));
                    }
                    m
                }),
                Err(e) => Some(e.to_string()),
            },
        };
        if problem.is_some() {
            report.failed += 1;
        }
        shared.emit(EventKind::PreflightCheck {
            job: jref.clone(),
            step: None,
            name: format!("image `{image}`"),
            outcome: if problem.is_some() {
                StepOutcome::Failure
            } else {
                StepOutcome::Success
            },
            message: problem,
            duration: t.elapsed(),
        });
    }
    for ready in by_run {
        run_job_checks(shared, ready, &mut report, cancel).await;
    }
    shared.emit(EventKind::PreflightFinished {
        checks: report.checks,
        failed: report.failed,
        duration: started.elapsed(),
    });
    report
}

/// The contexts a job run has before its first step, and its `env` (the workflow's, then the
/// job's) as far as it evaluates.
fn start_context(
    shared: &Shared,
    planned: &PlannedJob,
    job: &Job,
) -> (MapContext, IndexMap<String, String>) {
    let mut ctx = MapContext::new();
    for (k, v) in &shared.base {
        ctx.insert(k.clone(), v.clone());
    }
    ctx.insert(
        "matrix",
        Value::Object(
            planned
                .matrix
                .iter()
                .map(|(k, v)| (k.clone(), Value::from_json(v.clone())))
                .collect(),
        ),
    );
    ctx.insert(
        "strategy",
        super::evaluate::object([
            ("fail-fast", Value::Bool(planned.fail_fast)),
            ("job-index", Value::Number(planned.cell as f64)),
            ("job-total", Value::Number(planned.cells as f64)),
        ]),
    );
    let mut ctx = ctx.with_workspace(&shared.opts.workspace);
    let mut env = IndexMap::new();
    for (k, v) in shared.wf.env.iter().chain(&job.env) {
        ctx.insert("env", env_value(&env));
        // One that does not evaluate fails the job at its start, with its location.
        if let Ok(value) = eval_string(v, &ctx, &shared.wf.file) {
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

/// The image an unconditional `start-container` step with inputs known at the start uses, and
/// whether it may be pulled.
fn start_image(shared: &Shared, step: &Step, ctx: &MapContext) -> Option<(String, bool)> {
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
    if inputs
        .get("pull")
        .is_some_and(|p| p.to_expr_string() == "always")
    {
        // It is pulled at its place anyway.
        return None;
    }
    let pull = inputs
        .get("pull")
        .is_none_or(|p| p.to_expr_string() != "never");
    inputs.get("image").map(|i| (i.to_expr_string(), pull))
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
    let wf = &shared.wf;
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
    let step_name = step
        .name
        .as_ref()
        .map(|n| n.value.clone())
        .or_else(|| step.id.as_ref().map(|i| i.value.clone()))
        .unwrap_or_else(|| (at.step + 1).to_string());
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
            container: Some((name, spec.harmless())),
        },
    ))
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

/// The checks of one job run, in one throw-away container per image (started on first use).
async fn run_job_checks(
    shared: &Arc<Shared>,
    ready: Vec<Ready>,
    report: &mut PreflightReport,
    cancel: &CancellationToken,
) {
    let Some(first) = ready.first() else { return };
    let host: Arc<dyn StepHost> = shared.clone();
    let pref = JobRef {
        job: format!("preflight-{}", first.jref.job),
        cell: first.jref.cell,
        display: format!("{} (preflight)", first.jref.display),
    };
    let mut containers = shared
        .engines
        .for_job(&first.jref)
        .await
        .ok()
        .map(|d| JobContainers::new(d, &shared.opts.run_id, &pref));
    // Throw-away name → the name the steps use for it.
    let mut renamed: Vec<(String, String)> = Vec::new();
    for check in ready {
        let t = Instant::now();
        let result = async {
            let Some(containers) = containers.as_mut() else {
                return Err("preflight needs a Docker engine, and the run has none".to_string());
            };
            if let Some((name, spec)) = &check.container
                && !containers.started.contains_key(name)
            {
                let temp = format!("preflight-{name}");
                // A host folder that does not exist stops the container's creation: said with
                // the input that gives it and where, as a missing path is.
                let sources = match &check.check {
                    Check::Paths { sources, .. } => sources.as_slice(),
                    Check::Builtin(_) => &[],
                };
                let source = |path: &str| {
                    sources
                        .iter()
                        .find(|s| std::path::Path::new(&s.path) == std::path::Path::new(path))
                };
                containers
                    .start(&host, &pref, &temp, spec.clone())
                    .await
                    .map_err(|e| {
                        let origin = |path: &str| source(path).map(|s| s.given.clone());
                        let mut m = format!(
                            "could not start a throw-away container of `{}`: {}",
                            spec.image,
                            steps::required_paths::start_error(&e, spec, &origin)
                        );
                        if let crate::engine::containers::ContainerError::Backend(
                            crate::backend::BackendError::BindSourceMissing { path, .. },
                        ) = &e
                            && let Some(s) = source(path)
                        {
                            m.push_str(&format!("\n  --> {}", s.at));
                        }
                        m
                    })?;
                // The step names the container as the job will: `server`, not `preflight-server`.
                if let Some(s) = containers.started.shift_remove(&temp) {
                    containers.started.insert(name.clone(), s);
                    renamed.push((temp, name.clone()));
                }
            }
            // Preflight checks record nothing and read no earlier results: a bare context.
            let env = IndexMap::new();
            let mut recorded = Vec::new();
            let mut step = StepContext {
                key: &check.step_key,
                step_id: None,
                label: &check.label,
                job_id: &check.jref.job,
                matrix: std::collections::BTreeMap::new(),
                env: &env,
                recorded: &mut recorded,
                cancel: cancel.clone(),
                gpus: None,
                // Preflight runs `check-cli-interface` and `assert-file`: no shell text.
                shell: IndexMap::new(),
                action_inputs: IndexMap::new(),
                outputs_on_failure: IndexMap::new(),
            };
            match &check.check {
                Check::Builtin(name) => {
                    let builtin = steps::registered(name)
                        .ok_or_else(|| format!("`{name}` is not a built-in step"))?;
                    builtin
                        .run(StepCall {
                            name: builtin.spec().name,
                            inputs: &check.inputs,
                            containers: Some(containers),
                            host: &host,
                            job: &check.jref,
                            job_gpus: None,
                            step: &mut step,
                        })
                        .await
                        .map(|_| ())
                }
                Check::Paths {
                    paths, volumes, at, ..
                } => {
                    let Some((name, spec)) = &check.container else {
                        return Err("no container to look in".to_string());
                    };
                    let Some(started) = containers.started.get(name) else {
                        return Err(format!("the throw-away container `{name}` was not started"));
                    };
                    let place = steps::FileInContainer {
                        docker: containers.docker.clone(),
                        id: started.id.clone(),
                        name: name.clone(),
                    };
                    steps::required_paths::check(&place, &spec.image, volumes, paths)
                        .await
                        .map_err(|m| format!("{m}\n  --> {at}"))
                }
            }
        }
        .await;
        report.checks += 1;
        let outcome = if result.is_ok() {
            StepOutcome::Success
        } else {
            report.failed += 1;
            StepOutcome::Failure
        };
        shared.emit(EventKind::PreflightCheck {
            job: check.jref.clone(),
            step: Some(check.step_key.clone()),
            name: check.label.clone(),
            outcome,
            message: result.err(),
            duration: t.elapsed(),
        });
    }
    if let Some(mut containers) = containers {
        for (temp, name) in renamed {
            if let Some(s) = containers.started.shift_remove(&name) {
                containers.started.insert(temp, s);
            }
        }
        for problem in containers.remove_all(&host, &pref).await {
            shared.emit(EventKind::Warning {
                job: Some(pref.clone()),
                message: format!("could not remove {problem}"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::Loaded;

    fn workflow(yaml: &str) -> Workflow {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let action = dir.path().join("actions/client");
        std::fs::create_dir_all(&action).unwrap();
        std::fs::write(action.join("action.yml"), ACTION).unwrap();
        let path = dir.path().join("wf.yml");
        std::fs::write(&path, yaml).unwrap();
        let (loaded, diags) = crate::check::load_and_check(&path).unwrap();
        assert!(!diags.has_errors(), "{diags:?}");
        let Loaded::Workflow(Some(wf)) = loaded else {
            panic!("not a workflow")
        };
        *wf
    }

    /// Starts a container named by its input `name` (`client` by default).
    const ACTION: &str = "name: client\ndescription: a client\ninputs:\n  name: { description: its name, default: client }\n  touch: { description: run in it, default: 'no' }\nruns:\n  using: composite\n  steps:\n    - uses: start-container\n      with: { name: \"${{ inputs.name }}\", image: gpuflow-python:test }\n";

    const HEAD: &str = "on: push\njobs:\n  bench:\n";

    fn steps(job: &str) -> Vec<(usize, Option<usize>)> {
        let wf = workflow(&format!("{HEAD}{job}"));
        candidates(&wf, &wf.jobs[0])
            .into_iter()
            .map(|c| (c.step, c.start.map(|s| s.step)))
            .collect()
    }

    const START: &str = "      - uses: start-container\n        with: { name: server, image: gpuflow-python:test }\n";
    const CHECK: &str = "      - uses: check-cli-interface\n        with: { container: server, command: python3 /tmp/b.py, args: --port 1 }\n";

    #[test]
    fn a_check_in_a_started_image_runs_early() {
        assert_eq!(
            steps(&format!("    steps:\n{START}{CHECK}")),
            [(1, Some(0))]
        );
    }

    #[test]
    fn a_run_in_the_container_before_the_check_keeps_it_in_place() {
        let touch = "      - run: touch /tmp/x\n        container: server\n";
        assert_eq!(steps(&format!("    steps:\n{START}{touch}{CHECK}")), []);
    }

    #[test]
    fn a_check_reading_an_earlier_step_stays_in_place() {
        let check = "      - uses: check-cli-interface\n        with: { container: server, command: python3, args: \"${{ steps.a.outputs.x }}\" }\n";
        let by_matrix = "      - uses: check-cli-interface\n        with: { container: server, command: python3, args: \"${{ matrix.x }}\" }\n";
        assert_eq!(
            steps(&format!(
                "    strategy: {{ matrix: {{ x: [a] }} }}\n    steps:\n{START}      - id: a\n        run: echo x=1\n{check}{by_matrix}"
            )),
            [(3, Some(0))]
        );
    }

    #[test]
    fn conditions_and_continue_on_error_keep_checks_in_place() {
        let cond = "      - if: github.ref == 'x'\n        uses: assert-file\n        with: { path: /x }\n";
        let coe = "      - uses: assert-file\n        continue-on-error: true\n        with: { path: /x }\n";
        let plain = "      - uses: assert-file\n        with: { path: /x }\n";
        assert_eq!(
            steps(&format!("    steps:\n{cond}{coe}{plain}")),
            [(2, None)]
        );
    }

    #[test]
    fn host_checks_after_a_host_script_stay_in_place() {
        let host = "      - uses: assert-file\n        with: { path: /x }\n";
        let run = "      - run: echo hi > /x\n";
        assert_eq!(
            steps(&format!("    steps:\n{host}{run}{host}")),
            [(0, None)]
        );
    }

    #[test]
    fn a_job_with_a_condition_has_no_early_checks() {
        assert_eq!(
            steps(&format!("    if: false\n    steps:\n{START}{CHECK}")),
            []
        );
    }

    #[test]
    fn env_is_known_until_a_script_could_change_it() {
        let check = "      - uses: check-cli-interface\n        with: { container: server, command: \"python3 ${{ env.SCRIPT }}\" }\n";
        let run = "      - run: echo SCRIPT=/b.py >> \"$GITHUB_ENV\"\n";
        assert_eq!(
            steps(&format!(
                "    env: {{ SCRIPT: /tmp/b.py }}\n    steps:\n{START}{check}{run}{check}"
            )),
            [(1, Some(0))]
        );
    }

    #[test]
    fn a_container_started_inside_an_action_is_followed() {
        let using = "      - uses: ./actions/client\n";
        let named = "      - uses: ./actions/client\n        with: { name: bench }\n";
        let check = |c: &str| {
            format!(
                "      - uses: check-cli-interface\n        with: {{ container: {c}, command: python3 }}\n"
            )
        };
        let wf = workflow(&format!(
            "{HEAD}    steps:\n{using}{named}{}{}{}",
            check("client"),
            check("bench"),
            check("other")
        ));
        let found = candidates(&wf, &wf.jobs[0]);
        assert_eq!(
            found,
            [
                Candidate {
                    step: 2,
                    start: Some(StartAt {
                        step: 0,
                        inner: Some(0)
                    })
                },
                Candidate {
                    step: 3,
                    start: Some(StartAt {
                        step: 1,
                        inner: Some(0)
                    })
                },
            ]
        );
    }

    #[test]
    fn an_unknown_action_hides_what_came_before() {
        let conditional = "      - if: github.ref == 'x'\n        uses: ./actions/client\n        with: { name: server }\n";
        assert_eq!(
            steps(&format!("    steps:\n{START}{conditional}{CHECK}")),
            []
        );
    }

    #[test]
    fn required_paths_are_looked_for_early_until_something_could_write_them() {
        let server = |name: &str, volumes: &str| {
            format!(
                "      - uses: start-container\n        with: {{ name: {name}, image: gpuflow-python:test, volumes: [{volumes}], required-paths: [/models/m] }}\n"
            )
        };
        let found = |job: &str| {
            let wf = workflow(&format!("{HEAD}{job}"));
            path_checks(&wf, &wf.jobs[0])
                .into_iter()
                .map(|s| s.step)
                .collect::<Vec<_>>()
        };
        let ro = server("a", "'/m:/models:ro'");
        let rw = server("a", "'/m:/models'");
        let b = server("b", "'/m:/models:ro'");
        // Read-only mounts cannot have written the second server's model.
        assert_eq!(found(&format!("    steps:\n{ro}{b}")), [0, 1]);
        // A writable one could (a downloader), and so could a script.
        assert_eq!(found(&format!("    steps:\n{rw}{b}")), [0]);
        assert_eq!(
            found(&format!("    steps:\n      - run: echo get\n{b}")),
            Vec::<usize>::new()
        );
        // A job that needs another: the other may have downloaded it.
        let wf = workflow(&format!(
            "{HEAD}    steps:\n{b}  second:\n    needs: bench\n    steps:\n{b}"
        ));
        assert_eq!(path_checks(&wf, &wf.jobs[0]).len(), 1);
        assert!(path_checks(&wf, &wf.jobs[1]).is_empty());
    }
}
