//! Starting the container: the image pulled or checked as `pull:` asks, the host folders it
//! mounts checked first (named by the input that gave them), then started on the job's
//! network under its short name.

use indexmap::IndexMap;

use super::{memory, required_paths};
use crate::backend::{BackendError, PullPolicy, RunImages, Unresolved};
use crate::engine::container_inputs::{GIVEN_BY_STEP, start_container_spec};
use crate::engine::server_reuse::ServerOptions;
use crate::gpu::warm_claim::MAX_KEEP_WARM;
use crate::steps::{Outputs, StepCall, StepError};

/// `reuse` and `keep-warm`.
fn server_options(call: &StepCall<'_, '_>) -> Result<ServerOptions, StepError> {
    let reuse = call.text("reuse").is_none_or(|r| r != "false");
    let keep_warm = match call.text("keep-warm") {
        None => None,
        Some(text) => {
            let d = humantime::parse_duration(&text).map_err(|_| {
                StepError::input(
                    "keep-warm",
                    format!("`keep-warm` is `{text}`, not a duration"),
                    Some("write it as `30m` or `2h`".into()),
                )
            })?;
            if d > MAX_KEEP_WARM || d.is_zero() {
                return Err(StepError::input(
                    "keep-warm",
                    format!("`keep-warm` is `{text}`: a server is kept warm for more than nothing and at most 24h"),
                    Some("write a duration up to `24h`; a longer-lived server is a service, not a step's".into()),
                ));
            }
            Some(d)
        }
    };
    if keep_warm.is_some() && !reuse {
        return Err(StepError::input(
            "keep-warm",
            "`keep-warm` keeps a server for later runs to reuse, and this step says `reuse: false`"
                .to_string(),
            Some("drop `reuse: false`, or drop `keep-warm`".into()),
        ));
    }
    Ok(ServerOptions { reuse, keep_warm })
}

/// `spec` with its image resolved for the run ([`crate::backend::RunImages`]): pulled as
/// `pull:` asks (watched, its progress told as the step's), or the id an earlier step or
/// preflight resolved it to, so every container of the run is of one image.
async fn resolve_image(
    containers: &crate::engine::containers::JobContainers,
    host: &std::sync::Arc<dyn crate::steps::StepHost>,
    (job, key): (&crate::events::JobRef, &str),
    spec: &crate::backend::ContainerSpec,
    pull: Option<&str>,
) -> Result<crate::backend::ContainerSpec, StepError> {
    let own;
    let images = match host.images() {
        Some(images) => images,
        None => {
            own = RunImages::new(1);
            &own
        }
    };
    let image = spec.image.clone();
    let resolved = images
        .resolve(
            &containers.docker,
            &image,
            (PullPolicy::from_input(pull), spec.registry_auth.as_ref()),
            &mut |progress, elapsed, finished| {
                host.emit(progress.event(job, Some(key), &image, elapsed, finished));
            },
        )
        .await;
    match resolved {
        Ok(resolved) => {
            let mut run_spec = spec.clone();
            run_spec.image_id = Some(resolved.id);
            Ok(run_spec)
        }
        Err(Unresolved::NotOnEngine) => Err(StepError::input(
            "pull",
            Unresolved::NotOnEngine.describe(&image),
            Some("build or load the image on that engine first, or let it be pulled (`pull: missing`)".into()),
        )),
        Err(Unresolved::PullFailed(e)) => Err(pull_error(&e)),
        Err(other) => Err(other.describe(&image).into()),
    }
}

/// A failed pull as the step's failure, with its fix; a login the registry refused, when the
/// step's `credentials:` gave it, is said at that input.
fn pull_error(e: &BackendError) -> StepError {
    let hint = e.hint();
    match e {
        BackendError::RegistryLoginRefused { given_by, .. } if given_by == GIVEN_BY_STEP => {
            StepError::input("credentials", e.to_string(), hint)
        }
        _ => StepError::Failed {
            message: e.to_string(),
            hint,
        },
    }
}

/// Runs the step; returns `name` and `id`.
pub async fn run(mut call: StepCall<'_, '_>) -> Result<Outputs, StepError> {
    let container = call
        .text("name")
        .or_else(|| call.step.step_id.map(String::from))
        .ok_or("give the container a name: `with: { name: server }`, or give the step an `id`")?;
    let spec = start_container_spec(call.inputs, call.job_gpus.take())?;
    // A password written in the workflow, not taken from a secret, is hidden as well.
    if let Some(auth) = &spec.registry_auth {
        call.host.masker().add(auth.password());
    }
    let pull = call.text("pull");
    let options = server_options(&call)?;
    // Read before the server starts: a `preload-overhead` that does not read fails the step
    // with nothing started.
    let server = memory::server_flags(&spec, call.inputs).map_err(|e| {
        StepError::input(
            "preload-overhead",
            e,
            Some("write it as GPU counts to sizes: `{1: 1g, 8: 3g}`".into()),
        )
    })?;
    let (inputs, host, job) = (call.inputs, call.host, call.job);
    let action_inputs = call.step.action_inputs.clone();
    let (step_gpus, key) = (call.step.gpus.take(), call.step.key.to_string());
    let containers = call.engine()?;
    let run_spec = resolve_image(containers, host, (job, &key), &spec, pull.as_deref()).await?;
    // A missing host folder is named by the action's input that gave it (`models`), else by
    // the step's `volumes`.
    let origin = |path: &str| {
        required_paths::input_giving(&action_inputs, path)
            .map(|input| format!("the action's input `{input}` gives it"))
    };
    let paths = required_paths::paths(inputs);
    if !paths.is_empty() {
        required_paths::check_at_start(containers, host, job, &container, &spec, &paths, &origin)
            .await?;
    }
    let obtained = containers
        .start_or_adopt(host, job, &container, run_spec, options)
        .await
        .map_err(|e| {
            format!(
                "could not start container `{container}`: {}",
                required_paths::start_error(&e, &spec, &origin)
            )
        })?;
    let id = obtained.id.clone();
    let mut outputs = IndexMap::from([
        ("name".to_string(), container.clone()),
        ("id".to_string(), id.clone()),
        ("reused".to_string(), obtained.reused.is_some().to_string()),
        ("server-key".to_string(), obtained.key.unwrap_or_default()),
        (
            "cells-before".to_string(),
            obtained.reused.map_or(0, |(cells, _)| cells).to_string(),
        ),
    ]);
    if let (Some(flags), Some(gpus)) = (server, &step_gpus) {
        let at = memory::Started {
            host,
            job,
            step: &key,
            container: &container,
            id,
        };
        outputs.extend(memory::record(containers, &at, &flags, gpus).await);
    }
    Ok(outputs)
}
