//! The memory check of a model server before any job starts (docs/memory.md): for a
//! `start-container` whose command is an SGLang or vLLM server with its model in a folder, the
//! model's `config.json` is read in the throw-away container (the same volumes), the GPUs the
//! job will lease are the ones of its `gpus:` on its host's inventory, and a server whose
//! weights alone exceed its budget by more than the estimate's confidence margin is refused
//! with the estimate. The estimate itself is
//! `start-container`'s ([`crate::steps::server_memory`]); the check is prepared with the others
//! ([`super::prepare`]).

use crate::engine::containers::JobContainers;
use crate::engine::shared::Shared;
use crate::events::{EventKind, JobRef};
use crate::gpu::Request;
use crate::memory::ServerFlags;
use crate::steps::server_memory;

/// Runs the check in the started throw-away container `name`: `Ok` with the estimate (or why
/// there is none: also when the estimate cannot be made, with a warning), `Err` with the
/// refusal, only for an estimate that was made.
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
    // A refusal only when the estimate is sure: what it cannot read (a method or dtype whose
    // size gpuflow does not know, a config it cannot parse) is said, and the server runs.
    let estimate = match server_memory::estimate(&place, flags, gpus.mib).await {
        Ok(estimate) => estimate,
        Err(why) => {
            shared.emit(EventKind::Warning {
                job: Some(jref.clone()),
                message: format!(
                    "container `{name}`: the memory of the server is not estimated: {why}\n  --> {at}"
                ),
            });
            return Ok(Some(format!("not estimated: {why}")));
        }
    };
    let Some(estimate) = estimate else {
        return Ok(Some(format!(
            "not estimated: `{}` has no `config.json`",
            flags.model
        )));
    };
    if estimate.sure_not_to_fit() {
        return Err(format!(
            "{}\n  --> {at}",
            server_memory::refusal(&estimate, flags, &gpus, name)
        ));
    }
    if !estimate.fits() {
        // Short of the weights by less than the confidence margin: too close to call, so the
        // server is started and speaks for itself.
        let numbers: String = estimate
            .describe()
            .lines()
            .map(|l| format!("\n  {l}"))
            .collect();
        shared.emit(EventKind::Warning {
            job: Some(jref.clone()),
            message: format!(
                "container `{name}`: the weights of `{}` may not fit the memory `{} {}` leaves on {}: too close for the estimate to call, so the server is started{numbers}\n  --> {at}",
                flags.model,
                estimate.kind.fraction_flag(),
                estimate.fraction,
                gpus.described
            ),
        });
        return Ok(Some(format!(
            "too close to call: {}",
            server_memory::summary(&estimate, &gpus)
        )));
    }
    if let Some(warning) = estimate.context_warning() {
        shared.emit(EventKind::Warning {
            job: Some(jref.clone()),
            message: format!("container `{name}`: {warning}\n  --> {at}"),
        });
    }
    Ok(Some(server_memory::summary(&estimate, &gpus)))
}
