//! Static checks of a loaded workflow or action: everything knowable before running that the
//! loader (which checks shapes) cannot see alone — expressions and what they refer to, `needs`
//! cycles, and matrices that cannot expand. Knows the workflow model, the expression language
//! and the planner; knows nothing of Docker, processes or time.

mod availability;
mod expressions;
mod injection;

use std::sync::Arc;

use availability::Place;
use expressions::{ExprChecker, Scope, StepFacts};

use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span};
use crate::plan::{self, GraphError, MatrixError, PlanError};
use crate::workflow::model::{
    Action, BoolOrExpr, Container, GpuDevices, Job, Matrix, MatrixDim, NumberOrExpr, Step, Workflow,
};

/// Checks a workflow and the local actions it uses. Problems in an action point into the
/// action's file.
pub fn check_workflow(wf: &Workflow, file: &Arc<SourceFile>) -> Diagnostics {
    let mut c = ExprChecker::new(file);
    let inputs: Vec<String> = wf
        .on
        .workflow_dispatch
        .as_ref()
        .map(|d| d.inputs.keys().cloned().collect())
        .unwrap_or_default();
    let top = Scope {
        inputs: Some(inputs.clone()),
        inputs_owner: "the `workflow_dispatch` inputs",
        workflow_call: wf.on.workflow_call.is_some(),
        matrix_keys: Some(Vec::new()),
        ..Scope::default()
    };
    if let Some(n) = &wf.run_name {
        c.template(n, Place::RunName, &top);
    }
    for v in wf.env.values() {
        c.template(v, Place::WorkflowEnv, &top);
    }
    if let Some(cc) = &wf.concurrency {
        c.template(&cc.group, Place::WorkflowConcurrency, &top);
    }
    for job in wf.jobs.values() {
        check_job(&mut c, wf, job, &top);
    }
    let mut diags = c.diags;
    // A push-triggered run's `inputs` are not someone's `--input`: untrusted there too.
    let trust = injection::Trust {
        push_inputs: wf.on.push.is_some(),
    };
    for job in wf.jobs.values() {
        diags.extend(check_step_containers(&job.steps, file, &wf.actions));
        let place = injection::Place {
            trust,
            actions: &wf.actions,
            // An action's steps run with the job's default shell: a `python` one gets the
            // action's `${{ inputs.* }}` as text.
            default_shell: [&job.defaults, &wf.defaults]
                .into_iter()
                .find_map(|d| d.run.as_ref().and_then(|r| r.shell.as_ref())),
        };
        diags.extend(injection::check_steps(&job.steps, file, place));
        diags.extend(check_job_shells(wf, job, file));
        // What `gpuflow run` refuses before it starts anything (`docker://` steps): a file
        // that validates must not be refused there. Remote actions are judged by the loader.
        crate::engine::preflight::check_steps(&job.steps, file, None, &mut diags);
    }
    for action in wf.actions.values() {
        diags.extend(check_action_in(action, &wf.actions));
    }
    diags.extend(check_graph(wf, file));
    // `on.push` filter patterns: a pattern GitHub's syntax does not allow is found here, not
    // when the first push is silently matched against it.
    if let Some(push) = &wf.on.push
        && let Err(d) = crate::trigger::on_push::PushFilters::parse(push, file)
    {
        diags.extend(d);
    }
    diags.sorted()
}

/// Checks a composite action's expressions against its own inputs and steps.
pub fn check_action(action: &Action) -> Diagnostics {
    check_action_in(action, &indexmap::IndexMap::new())
}

/// [`check_action`] where the actions it uses are known (a workflow's `actions`): an
/// untrusted value it hands one of them is followed into that action.
fn check_action_in(action: &Action, actions: &indexmap::IndexMap<String, Action>) -> Diagnostics {
    let mut c = ExprChecker::new(&action.file);
    let no_actions = indexmap::IndexMap::new();
    let facts = StepFacts::of_steps(&action.runs.steps, &no_actions);
    let mut scope = Scope {
        steps: facts,
        inputs: Some(action.inputs.keys().cloned().collect()),
        inputs_owner: "the action's `inputs`",
        // The caller's matrix is not known here: any key may exist.
        matrix_keys: None,
        ..Scope::default()
    };
    for (i, step) in action.runs.steps.iter().enumerate() {
        scope.steps_before = i;
        check_step(&mut c, step, &scope, Place::ActionStep, Place::ActionStepIf);
    }
    scope.steps_before = action.runs.steps.len();
    for output in action.outputs.values() {
        c.template(&output.value, Place::ActionOutput, &scope);
    }
    let mut diags = c.diags;
    diags.extend(check_step_containers(
        &action.runs.steps,
        &action.file,
        &indexmap::IndexMap::new(),
    ));
    let place = injection::Place {
        trust: injection::Trust { push_inputs: false },
        actions,
        default_shell: None,
    };
    diags.extend(injection::check_steps(
        &action.runs.steps,
        &action.file,
        place,
    ));
    diags.extend(injection::check_defaults(action, place));
    diags.extend(injection::check_shells(
        &action.runs.steps,
        &action.file,
        None,
    ));
    crate::engine::preflight::check_steps(&action.runs.steps, &action.file, None, &mut diags);
    diags
}

/// The shells of a job's `run:` steps, and of the steps of the local actions it uses: a step
/// without `shell:` runs with the job's `defaults.run.shell`, else the workflow's (an
/// action's steps too, as the executor runs them).
fn check_job_shells(wf: &Workflow, job: &Job, file: &Arc<SourceFile>) -> Diagnostics {
    let default = job
        .defaults
        .run
        .as_ref()
        .and_then(|d| d.shell.as_ref())
        .or_else(|| wf.defaults.run.as_ref().and_then(|d| d.shell.as_ref()))
        .map(|shell| injection::DefaultShell { shell, file });
    let mut diags = injection::check_shells(&job.steps, file, default);
    if default.is_some() {
        for step in &job.steps {
            let Some(action) = step
                .uses
                .as_ref()
                .and_then(|u| u.value.action_key())
                .and_then(|k| wf.actions.get(&k))
            else {
                continue;
            };
            diags.extend(injection::check_shells(
                &action.runs.steps,
                &action.file,
                default,
            ));
        }
    }
    diags
}

/// A `run:` step's `container: NAME` must name a container an earlier `start-container` step
/// of the same job (or action) starts. A name computed by an expression is known only when
/// the job runs, so from the first such step on any name is accepted. A local action's own
/// `start-container` steps count too (an action not in `actions` could start anything).
fn check_step_containers(
    steps: &[Step],
    file: &Arc<SourceFile>,
    actions: &indexmap::IndexMap<String, Action>,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let mut started: Vec<String> = Vec::new();
    let mut dynamic = false;
    for (i, step) in steps.iter().enumerate() {
        if let Some(wanted) = &step.container
            && !dynamic
            && !wanted.value.contains("${{")
            && !started.contains(&wanted.value)
        {
            let later = steps[i + 1..]
                .iter()
                .any(|s| started_name(s).as_deref() == Some(wanted.value.as_str()));
            let d = Diagnostic::error(
                file,
                wanted.span,
                format!("unknown container `{}`", wanted.value),
            );
            let d = if later {
                d.label("started by a later step")
                    .hint("move the `start-container` step before this one")
            } else if let Some(hint) = crate::diag::did_you_mean(&wanted.value, &started) {
                d.label("no earlier `start-container` step starts it")
                    .hint(hint)
            } else if started.is_empty() {
                d.label("no earlier `start-container` step starts it")
                    .hint("start it first with `uses: start-container` (its `name`, or its `id`)")
            } else {
                d.label("no earlier `start-container` step starts it")
                    .note(format!(
                        "containers started before this step: {}",
                        crate::diag::join_quoted(&started, "and")
                    ))
            };
            diags.push(d);
        }
        let from_action: Vec<&Step> = match step.uses.as_ref().map(|u| &u.value) {
            Some(
                uses @ (crate::workflow::model::Uses::Local(_)
                | crate::workflow::model::Uses::Remote { .. }),
            ) => match uses.action_key().and_then(|k| actions.get(&k)) {
                Some(action) => action.runs.steps.iter().collect(),
                None => {
                    dynamic = true;
                    Vec::new()
                }
            },
            _ => vec![step],
        };
        for s in from_action {
            match started_name(s) {
                Some(name) if name.contains("${{") => dynamic = true,
                Some(name) => started.push(name),
                None => {}
            }
        }
    }
    diags
}

/// The name a `start-container` step gives its container: `with.name`, else the step's id.
fn started_name(step: &Step) -> Option<String> {
    let is_start = step.uses.as_ref().is_some_and(
        |u| matches!(&u.value, crate::workflow::model::Uses::Builtin(b) if b == "start-container"),
    );
    if !is_start {
        return None;
    }
    match step.with.get("name").map(|v| &v.value) {
        Some(crate::workflow::model::Value::String(s)) => Some(s.clone()),
        _ => step.id.as_ref().map(|id| id.value.clone()),
    }
}

fn check_job(c: &mut ExprChecker<'_>, wf: &Workflow, job: &Job, top: &Scope) {
    let matrix_keys = match job.strategy.as_ref().and_then(|s| s.matrix.as_ref()) {
        None => Some(Vec::new()),
        Some(Matrix::Expr(_)) => None,
        // A matrix whose dimensions all failed to load is unknown, not empty: its errors are
        // reported already, and "no key" would only add noise.
        Some(Matrix::Dims(d)) if d.dims.is_empty() && d.include.is_empty() => None,
        Some(Matrix::Dims(d)) => {
            let mut keys: Vec<String> = d.dims.keys().cloned().collect();
            for row in &d.include {
                for k in row.value.keys() {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
            }
            Some(keys)
        }
    };
    let needs = job
        .needs
        .iter()
        .map(|n| (n.value.clone(), job_outputs(wf, &n.value)))
        .collect();
    let mut scope = Scope {
        steps: StepFacts::of_steps(&job.steps, &wf.actions),
        steps_before: 0,
        matrix_keys,
        needs,
        ..top.clone()
    };

    if let Some(n) = &job.name {
        c.template(n, Place::JobName, &scope);
    }
    if let Some(cond) = &job.condition {
        c.condition(cond, Place::JobIf, &scope);
    }
    for r in &job.runs_on {
        c.template(r, Place::JobSetting, &scope);
    }
    if let Some(g) = &job.gpus {
        match &g.devices {
            GpuDevices::Expr(e) => c.template(e, Place::JobSetting, &scope),
            GpuDevices::Ids(ids) => ids
                .iter()
                .for_each(|i| c.template(i, Place::JobSetting, &scope)),
            GpuDevices::All | GpuDevices::Count(_) => {}
        }
    }
    for v in job.env.values() {
        c.template(v, Place::JobEnv, &scope);
    }
    if let Some(s) = &job.strategy {
        match &s.matrix {
            Some(Matrix::Expr(e)) => c.template(e, Place::JobStrategy, &scope),
            Some(Matrix::Dims(d)) => {
                for dim in d.dims.values() {
                    if let MatrixDim::Expr(e) = &dim.value {
                        c.template(e, Place::JobStrategy, &scope);
                    }
                }
            }
            None => {}
        }
        if let Some(BoolOrExpr::Expr(e)) = &s.fail_fast {
            c.template(e, Place::JobStrategy, &scope);
        }
        if let Some(NumberOrExpr::Expr(e)) = &s.max_parallel {
            c.template(e, Place::JobStrategy, &scope);
        }
    }
    if let Some(NumberOrExpr::Expr(e)) = &job.timeout_minutes {
        c.template(e, Place::JobSetting, &scope);
    }
    if let Some(BoolOrExpr::Expr(e)) = &job.continue_on_error {
        c.template(e, Place::JobSetting, &scope);
    }
    for container in job.container.iter().chain(job.services.values()) {
        check_container(c, container, &scope);
    }
    for (i, step) in job.steps.iter().enumerate() {
        scope.steps_before = i;
        check_step(c, step, &scope, Place::Step, Place::StepIf);
    }
    scope.steps_before = job.steps.len();
    for v in job.outputs.values() {
        c.template(v, Place::JobOutputs, &scope);
    }
}

fn check_container(c: &mut ExprChecker<'_>, container: &Container, scope: &Scope) {
    c.template(&container.image, Place::JobSetting, scope);
    for v in container
        .env
        .values()
        .chain(&container.ports)
        .chain(&container.volumes)
        .chain(&container.options)
    {
        c.template(v, Place::JobSetting, scope);
    }
}

fn check_step(c: &mut ExprChecker<'_>, step: &Step, scope: &Scope, place: Place, if_place: Place) {
    if let Some(cond) = &step.condition {
        c.condition(cond, if_place, scope);
    }
    for s in [
        &step.name,
        &step.run,
        &step.shell,
        &step.working_directory,
        &step.container,
    ]
    .into_iter()
    .flatten()
    {
        c.template(s, place, scope);
    }
    for v in step.with.values() {
        c.value(v, place, scope);
    }
    for v in step.env.values() {
        c.template(v, place, scope);
    }
    if let Some(NumberOrExpr::Expr(e)) = &step.timeout_minutes {
        c.template(e, place, scope);
    }
    if let Some(BoolOrExpr::Expr(e)) = &step.continue_on_error {
        c.template(e, place, scope);
    }
}

/// `needs` cycles and matrices that cannot expand, found by planning the workflow.
/// Unknown `needs` are the loader's (it reports them with the job list at hand).
fn check_graph(wf: &Workflow, file: &Arc<SourceFile>) -> Diagnostics {
    let model = plan::from_workflow(wf, &file.name);
    let mut diags = Diagnostics::new();
    for error in plan::problems(&model.input) {
        let d = match error {
            PlanError::Graph(g @ GraphError::Cycle { .. }) => {
                let GraphError::Cycle { path, tags } = &g else {
                    unreachable!()
                };
                let first = model.needs_spans[tags[0]];
                let mut d = Diagnostic::error(file, first, g.to_string())
                    .label(format!("`{}` needs `{}`", path[0], path[1]))
                    .maybe_hint(g.hint());
                for (i, tag) in tags.iter().enumerate().skip(1) {
                    d = d.related(
                        file,
                        model.needs_spans[*tag],
                        format!("`{}` needs `{}`", path[i], path[i + 1]),
                    );
                }
                d
            }
            PlanError::Graph(g @ GraphError::SelfNeed { tag, .. }) => {
                Diagnostic::error(file, model.needs_spans[tag], g.to_string())
                    .label("a job cannot wait for itself")
                    .maybe_hint(g.hint())
            }
            // Reported by the loader, which knows the spans of job keys.
            PlanError::Graph(GraphError::UnknownNeed { .. } | GraphError::DuplicateJob { .. }) => {
                continue;
            }
            // The loader reports empty matrices and dimensions where they are written.
            PlanError::Matrix {
                error: MatrixError::Empty | MatrixError::EmptyDimension { .. },
                ..
            } => continue,
            PlanError::Matrix { job, error, .. } => {
                let Some(j) = wf.jobs.get(&job) else { continue };
                let span = matrix_error_span(j, &error);
                Diagnostic::error(file, span, format!("job `{job}`: {error}"))
                    .label(match &error {
                        MatrixError::TooManyCells { .. } | MatrixError::ProductTooLarge { .. } => {
                            "too many combinations"
                        }
                        _ => "cannot expand",
                    })
                    .maybe_hint(error.hint())
            }
        };
        diags.push(d);
    }
    diags
}

fn matrix_error_span(job: &Job, error: &MatrixError) -> Span {
    let Some(Matrix::Dims(d)) = job.strategy.as_ref().and_then(|s| s.matrix.as_ref()) else {
        return job.id.span;
    };
    match error {
        MatrixError::EmptyDimension { index, .. } => d.dims.get_index(*index).map(|(_, v)| v.span),
        MatrixError::EmptyInclude { entry } => d.include.get(*entry).map(|r| r.span),
        MatrixError::EmptyExclude { entry } => d.exclude.get(*entry).map(|r| r.span),
        MatrixError::UnknownExcludeKey { entry, key, .. } => d
            .exclude
            .get(*entry)
            .map(|r| r.value.get(key).map_or(r.span, |v| v.span)),
        _ => None,
    }
    .unwrap_or(job.id.span)
}

/// Loads a workflow or action file and runs every static check on it: what `gpuflow
/// validate` reports, and what `plan`/`run` require to be clean before doing anything.
/// Remote actions are fetched and pinned through the `gpuflow.toml` and `gpuflow.lock` of
/// the file's workspace.
pub fn load_and_check(
    path: &std::path::Path,
) -> Result<(crate::workflow::Loaded, Diagnostics), Box<Diagnostic>> {
    load_and_check_with(path, &mut crate::actions::ActionResolver::for_file(path))
}

/// [`load_and_check`] with remote actions fetched by `remote` (one for many files of a
/// workspace, so each action is fetched once).
pub fn load_and_check_with(
    path: &std::path::Path,
    remote: &mut dyn crate::workflow::RemoteActionSource,
) -> Result<(crate::workflow::Loaded, Diagnostics), Box<Diagnostic>> {
    use crate::workflow::Loaded;
    let (loaded, mut diags) = crate::workflow::load_path_with(path, remote)?;
    match &loaded {
        Loaded::Workflow(Some(wf)) => diags.extend(check_workflow(wf, &wf.file)),
        Loaded::Action(Some(action)) => diags.extend(check_action(action)),
        _ => {}
    }
    Ok((loaded, diags.sorted()))
}

/// The outputs job `id` gives the jobs that need it: those it declares, and a search's
/// boundary (`strategy.search`, docs/campaigns.md).
fn job_outputs(wf: &Workflow, id: &str) -> Vec<String> {
    let Some(job) = wf.jobs.get(id) else {
        return Vec::new();
    };
    let mut outputs: Vec<String> = job.outputs.keys().cloned().collect();
    if let Some(search) = job.strategy.as_ref().and_then(|s| s.search.as_ref()) {
        outputs.extend(["best".to_string(), "best-cell".to_string()]);
        if search.objective().is_some() {
            outputs.push("best-score".to_string());
        }
    }
    outputs
}

#[cfg(test)]
mod tests {
    use crate::diag::SourceFile;

    fn errors(yaml: &str) -> Vec<String> {
        let file = SourceFile::new("w.yml", yaml);
        let (wf, mut diags) = crate::workflow::load_workflow_in(&file, std::path::Path::new("."));
        if let Some(wf) = wf {
            diags.extend(super::check_workflow(&wf, &file));
        }
        diags
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{} {} {:?}", d.location(), d.message, d.hints))
            .collect()
    }

    const START: &str = "on: push\njobs:\n  j:\n    steps:\n";

    fn repo_root() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf()
    }

    #[test]
    fn a_step_container_must_be_started_by_an_earlier_step() {
        let ok = format!(
            "{START}      - id: server\n        uses: start-container\n        with: {{ image: x }}\n      - container: server\n        run: echo\n"
        );
        assert_eq!(errors(&ok), Vec::<String>::new());
        let typo = format!(
            "{START}      - id: server\n        uses: start-container\n        with: {{ image: x }}\n      - container: sever\n        run: echo\n"
        );
        let e = errors(&typo);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("w.yml:8:") && e[0].contains("unknown container `sever`"),
            "{e:?}"
        );
        assert!(e[0].contains("did you mean `server`"), "{e:?}");
        let from_action = format!(
            "{START}      - uses: ./actions/sglang-server\n        with: {{ model: /m }}\n      - container: server\n        run: echo\n"
        );
        let file = SourceFile::new("w.yml", from_action);
        let (wf, diags) = crate::workflow::load_workflow_in(&file, &repo_root());
        assert!(!diags.has_errors(), "{diags:?}");
        assert!(!super::check_workflow(&wf.unwrap(), &file).has_errors());
        let later = format!(
            "{START}      - container: box\n        run: echo\n      - uses: start-container\n        with: {{ image: x, name: box }}\n"
        );
        assert!(
            errors(&later)[0].contains("start-container"),
            "{:?}",
            errors(&later)
        );
    }

    #[test]
    fn container_belongs_to_run_steps_only() {
        let e = errors(&format!(
            "{START}      - uses: stop-container\n        container: x\n        with: {{ container: x }}\n"
        ));
        assert!(
            e.iter()
                .any(|m| m.contains("`container` only applies to `run` steps")),
            "{e:?}"
        );
    }
}
