//! Every server command line a workflow's jobs would start, one per matrix cell and
//! `start-container` step (inside composite actions too), evaluated with the contexts known
//! before the run: what the contract test (runner/tests/server_contract.rs) hands to the
//! servers' own parsers, so a flag a server no longer takes fails CI rather than a GPU node.
//! The same walk gives every image those steps start ([`start_images`]), which
//! `gpuflow images lock` pins.
//!
//! Unlike the preflight checks themselves, this reads every job, `needs` and `if:` included: a
//! line whose inputs need what only the run knows (`steps.*`, `needs.*`) is left out, and said.

use super::prepare::{start_context_of, start_inputs_of};
use super::qualify::{StartAt, does};
use crate::backend::ContainerSpec;
use crate::engine::container_inputs::start_container_spec;
use crate::engine::options::RunOptions;
use crate::expr::Value;
use crate::plan::Plan;
use crate::steps::{self, Effect};
use crate::workflow::model::{Step, Uses, Workflow};

/// One server's command line in one job run.
#[derive(Clone, Debug)]
pub struct ServerLine {
    /// The job run, as the plan names it (`bench (nccl, 128, none)`).
    pub job: String,
    /// Where the step is: `file:line:col`.
    pub at: String,
    /// The whole command line: the image's entrypoint if the step sets one, then `command`.
    pub argv: Vec<String>,
}

/// What [`server_lines`] found, and the steps it could not evaluate before the run.
#[derive(Clone, Debug, Default)]
pub struct ServerLines {
    pub lines: Vec<ServerLine>,
    /// `job at`: a `start-container` whose inputs need the run (`steps.*`, `needs.*`).
    pub not_evaluated: Vec<String>,
}

/// One image a `start-container` step starts in one job run.
#[derive(Clone, Debug)]
pub struct StartImage {
    /// The job run, as the plan names it.
    pub job: String,
    /// Where the step is: `file:line:col`.
    pub at: String,
    /// The image as the step names it, evaluated.
    pub image: String,
}

/// What [`start_images`] found, and the steps it could not evaluate before the run.
#[derive(Clone, Debug, Default)]
pub struct StartImages {
    pub images: Vec<StartImage>,
    /// `job at`: a `start-container` whose inputs need the run (`steps.*`, `needs.*`).
    pub not_evaluated: Vec<String>,
}

/// The server command lines of every job run of `plan` (workflow inputs `inputs`, as
/// `engine::inputs::resolve` gives them), as preflight would evaluate them.
pub fn server_lines(wf: &Workflow, plan: &Plan, opts: &RunOptions, inputs: Value) -> ServerLines {
    let mut out = ServerLines::default();
    each_start(wf, plan, opts, inputs, |job, at, spec| {
        let Some(spec) = spec else {
            out.not_evaluated.push(format!("{job} {at}"));
            return;
        };
        let Some(command) = spec.command else {
            return;
        };
        let argv: Vec<String> = spec
            .entrypoint
            .unwrap_or_default()
            .into_iter()
            .chain(command)
            .collect();
        if steps::server_cli::recognise(&argv).is_ok() {
            out.lines.push(ServerLine { job, at, argv });
        }
    });
    out
}

/// The image of every `start-container` step of every job run of `plan`, evaluated as
/// preflight would evaluate it (with the inputs' defaults for `inputs.*`).
pub fn start_images(wf: &Workflow, plan: &Plan, opts: &RunOptions, inputs: Value) -> StartImages {
    let mut out = StartImages::default();
    each_start(wf, plan, opts, inputs, |job, at, spec| match spec {
        Some(spec) => out.images.push(StartImage {
            job,
            at,
            image: spec.image,
        }),
        None => out.not_evaluated.push(format!("{job} {at}")),
    });
    out
}

/// Calls `found` with each job run's name, each `start-container` step's place and its
/// container spec, `None` when its inputs need what only the run knows. A step whose inputs
/// evaluate to no valid spec is left out: validation or the run says why.
fn each_start(
    wf: &Workflow,
    plan: &Plan,
    opts: &RunOptions,
    inputs: Value,
    mut found: impl FnMut(String, String, Option<ContainerSpec>),
) {
    let base = crate::engine::dispatcher::base_contexts(wf, plan, opts, inputs);
    for planned in &plan.jobs {
        let job = &wf.jobs[&planned.job_id];
        let (ctx, env) = start_context_of(wf, &base, &opts.workspace, planned, job);
        for at in starts(wf, &job.steps) {
            let step = &job.steps[at.step];
            let where_ = wf.file.location(step.span).to_string();
            let name = planned.display_name.clone();
            let Some((_, inputs)) = start_inputs_of(wf, job, at, (&ctx, &env)) else {
                found(name, where_, None);
                continue;
            };
            if let Ok(spec) = start_container_spec(&inputs, None) {
                found(name, where_, Some(spec));
            }
        }
    }
}

/// The `start-container` steps of `steps`, and those inside the composite actions they use.
fn starts(wf: &Workflow, steps: &[Step]) -> Vec<StartAt> {
    let starts_container = |step: &Step| matches!(step.uses.as_ref().map(|u| &u.value), Some(Uses::Builtin(name)) if does(name, Effect::StartsContainer));
    let mut out = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if starts_container(step) {
            out.push(StartAt {
                step: i,
                inner: None,
            });
        } else if let Some(action) = step
            .uses
            .as_ref()
            .and_then(|u| u.value.action_key())
            .and_then(|k| wf.actions.get(&k))
        {
            for (j, inner) in action.runs.steps.iter().enumerate() {
                if starts_container(inner) {
                    out.push(StartAt {
                        step: i,
                        inner: Some(j),
                    });
                }
            }
        }
    }
    out
}
