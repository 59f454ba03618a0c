//! The memory check of a model server before any job starts (docs/memory.md): for a
//! `start-container` whose command is an SGLang or vLLM server with its model in a folder, the
//! model's `config.json` is read in the throw-away container (the same volumes), the GPUs the
//! job will lease are the ones of its `gpus:` on its host's inventory, and a server whose
//! weights alone exceed its budget is refused with the estimate. The estimate itself is
//! `start-container`'s ([`crate::steps::server_memory`]).

use indexmap::IndexMap;

use super::prepare::{Check, Ready, ctx_for, start_inputs};
use super::qualify::StartAt;
use crate::engine::container_inputs::start_container_spec;
use crate::engine::containers::JobContainers;
use crate::engine::shared::Shared;
use crate::events::{EventKind, JobRef};
use crate::expr::MapContext;
use crate::gpu::Request;
use crate::memory::ServerFlags;
use crate::plan::PlannedJob;
use crate::steps::server_memory;
use crate::workflow::model::Job;

/// The memory check of the `start-container` at `at`, when it starts a model server and the
/// job asks for GPUs on a host whose GPUs are known.
pub(super) fn prepare(
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
    let flags = server_memory::server_flags(&spec)?;
    let step = &job.steps[at.step];
    let step_name = step
        .name
        .as_ref()
        .map(|n| n.value.clone())
        .or_else(|| step.id.as_ref().map(|i| i.value.clone()))
        .unwrap_or_else(|| (at.step + 1).to_string());
    // Where the flags are written: the action's `args`, else the step's `command`.
    let span = ["args", "command"]
        .iter()
        .find_map(|k| step.with.get(*k).map(|v| v.span))
        .unwrap_or(step.span);
    let at_text = format!("{} (the step `{step_name}`)", shared.wf.file.location(span));
    Some((
        at.step,
        Ready {
            jref: jref.clone(),
            step_key: (at.step + 1).to_string(),
            check: Check::Memory {
                flags,
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

/// Runs the check in the started throw-away container `name`: `Ok` with the estimate (or why
/// there is none), `Err` with the refusal.
pub(super) async fn run(
    shared: &Shared,
    jref: &JobRef,
    containers: &JobContainers,
    name: &str,
    (flags, request, at): (&ServerFlags, &Request, &str),
) -> Result<Option<String>, String> {
    let Some(host) = shared.engines.gpus_for(jref) else {
        return Ok(None);
    };
    let inventory = host.inventory().await;
    let Some(gpus) = server_memory::for_request(&inventory, request) else {
        // The job cannot lease them: it says so itself when it would start.
        return Ok(Some(
            "not estimated: the job's GPUs cannot be leased on its host".into(),
        ));
    };
    let Some(started) = containers.started.get(name) else {
        return Err(format!("the throw-away container `{name}` was not started"));
    };
    let place = crate::steps::FileInContainer {
        docker: containers.docker.clone(),
        id: started.id.clone(),
        name: name.to_string(),
    };
    let Some(estimate) = server_memory::estimate(&place, flags, gpus.mib)
        .await
        .map_err(|e| format!("{e}\n  --> {at}"))?
    else {
        return Ok(Some(format!(
            "not estimated: `{}` has no `config.json`",
            flags.model
        )));
    };
    if !estimate.fits() {
        return Err(format!(
            "{}\n  --> {at}",
            server_memory::refusal(&estimate, flags, &gpus, name)
        ));
    }
    if let Some(warning) = estimate.context_warning() {
        shared.emit(EventKind::Warning {
            job: Some(jref.clone()),
            message: format!("container `{name}`: {warning}\n  --> {at}"),
        });
    }
    Ok(Some(server_memory::summary(&estimate, &gpus)))
}
