//! Container lifecycle on a [`DockerBackend`]: create (pulling a missing image), start, inspect,
//! wait, stop, remove.
//!
//! A container that was created but could not start is removed before the error is returned,
//! so a failed start never leaves anything behind; the typical case is a GPU request on an
//! engine without the NVIDIA runtime, which Docker accepts at create and refuses at start.

use std::time::Duration;

use bollard::query_parameters::{
    CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};
use futures_util::StreamExt;

use super::error::{describe, status_code};
use super::{BackendError, ContainerSpec, DockerBackend, RunLabels};

/// A container gpuflow created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    pub id: String,
    /// The name asked for; `None` when the engine chose one.
    pub name: Option<String>,
}

impl Container {
    /// The name if there is one, else the short id: what messages show.
    pub fn display_name(&self) -> &str {
        self.name
            .as_deref()
            .unwrap_or_else(|| &self.id[..self.id.len().min(12)])
    }
}

/// A container's state as the engine reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerState {
    /// `created`, `running`, `exited`, …
    pub status: String,
    pub running: bool,
    /// Set once the container has exited.
    pub exit_code: Option<i64>,
    /// The kernel killed it for running out of memory (its cgroup limit).
    pub oom_killed: bool,
    /// The engine's error, e.g. why it could not start.
    pub error: Option<String>,
    /// The image's own healthcheck: `starting`, `healthy` or `unhealthy`; `None` without one.
    pub health: Option<String>,
    /// How often a restart policy has restarted it.
    pub restart_count: i64,
}

/// The text Docker gives when no runtime provides the `nvidia` device driver.
const NO_NVIDIA_DRIVER: &str = "could not select device driver";
/// The text Docker gives when a bind mount's host path is missing, followed by the path
/// (`invalid mount config for type "bind": bind source path does not exist: /data/models`).
const BIND_SOURCE_MISSING: &str = "bind source path does not exist: ";

impl DockerBackend {
    /// Creates and starts a container of `run`. On any start failure the container is removed
    /// before the error is returned.
    pub async fn start_container(
        &self,
        run: &RunLabels,
        spec: &ContainerSpec,
    ) -> Result<Container, BackendError> {
        let container = self.create_container(run, spec).await?;
        self.start(&container).await?;
        Ok(container)
    }

    /// Creates a container without starting it, pulling its image first when the engine does
    /// not have it.
    pub async fn create_container(
        &self,
        run: &RunLabels,
        spec: &ContainerSpec,
    ) -> Result<Container, BackendError> {
        if spec.gpus.is_requested() && !self.supports_device_requests() {
            return Err(BackendError::ApiTooOldForGpus {
                endpoint: self.endpoint_text(),
                version: self.api_version().to_string(),
            });
        }
        let body = spec.to_create_body(run.to_labels(self.owner()))?;
        let options = || {
            let mut builder = CreateContainerOptionsBuilder::new();
            if let Some(name) = &spec.name {
                builder = builder.name(name);
            }
            Some(builder.build())
        };
        // The container's name (or "unnamed") and image, for the diagnostic of each try.
        let create_target = format!(
            "{} ({})",
            spec.name.as_deref().unwrap_or("unnamed"),
            spec.image
        );
        let mut pulled = false;
        loop {
            match self
                .api("create_container", &create_target)
                .create_container(options(), body.clone())
                .await
            {
                Ok(created) => {
                    return Ok(Container {
                        id: created.id,
                        name: spec.name.clone(),
                    });
                }
                // Only a missing image is pulled: a missing network is a 404 too. An image the
                // run resolved to an id is not pulled again by its tag, which may have moved.
                Err(e)
                    if status_code(&e) == Some(404)
                        && describe(&e).contains("No such image")
                        && spec.image_id.is_none()
                        && !pulled =>
                {
                    tracing::debug!(image = %spec.image, "image missing: pulling it, then creating again");
                    self.pull_image_as(&spec.image, spec.registry_auth.as_ref())
                        .await?;
                    pulled = true;
                }
                Err(e)
                    if status_code(&e) == Some(400)
                        && describe(&e).contains(BIND_SOURCE_MISSING) =>
                {
                    return Err(self.bind_source_missing(spec, &describe(&e)));
                }
                Err(e) if status_code(&e) == Some(409) && spec.name.is_some() => {
                    return Err(BackendError::NameInUse {
                        name: spec.name.clone().unwrap_or_default(),
                        endpoint: self.endpoint_text(),
                    });
                }
                Err(e) => return Err(self.engine_error("create a container", &e)),
            }
        }
    }

    /// Starts a created container; when that fails, removes it and says why.
    pub async fn start(&self, container: &Container) -> Result<(), BackendError> {
        let Err(e) = self
            .api("start_container", container.display_name())
            .start_container(&container.id, None)
            .await
        else {
            return Ok(());
        };
        let reason = describe(&e);
        // Awaited, not left to a destructor: the caller must be able to rely on nothing being
        // left once this returns. Should the removal itself fail (the engine went away), the
        // start failure is still the news; the run's final `remove_run` tries again.
        let _ = self.remove_container(&container.id).await;
        if reason.contains(NO_NVIDIA_DRIVER) {
            return Err(BackendError::NvidiaRuntimeMissing {
                endpoint: self.endpoint_text(),
                detail: reason,
            });
        }
        Err(BackendError::StartFailed {
            container: container.display_name().to_string(),
            reason,
        })
    }

    /// The container's current state.
    pub async fn inspect_state(&self, container: &str) -> Result<ContainerState, BackendError> {
        let inspected = self
            .api("inspect_container", container)
            .inspect_container(container, None)
            .await
            .map_err(|e| self.not_found_or(container, "inspect a container", &e))?;
        let state = inspected.state.unwrap_or_default();
        let running = state.running.unwrap_or(false);
        let status = state
            .status
            .map_or_else(|| "unknown".to_string(), |s| s.to_string());
        Ok(ContainerState {
            exit_code: state.exit_code.filter(|_| !running && status != "created"),
            status,
            running,
            oom_killed: state.oom_killed.unwrap_or(false),
            error: state.error.filter(|e| !e.is_empty()),
            health: state
                .health
                .and_then(|h| h.status)
                .map(|s| s.to_string())
                .filter(|s| !s.is_empty() && s != "none"),
            restart_count: inspected.restart_count.unwrap_or(0),
        })
    }

    /// The container's address on its first network, as the host reaches it (`None` on the
    /// host network, or when it is not running).
    pub async fn container_ip(&self, container: &str) -> Result<Option<String>, BackendError> {
        let inspected = self
            .api("inspect_container", container)
            .inspect_container(container, None)
            .await
            .map_err(|e| self.not_found_or(container, "inspect a container", &e))?;
        Ok(inspected
            .network_settings
            .and_then(|n| n.networks)
            .and_then(|networks| {
                networks
                    .into_values()
                    .filter_map(|n| n.ip_address)
                    .find(|ip| !ip.is_empty())
            }))
    }

    /// Waits until the container exits; returns its exit code. A non-zero exit is a result,
    /// not an error (bollard reports it as `DockerContainerWaitError`).
    pub async fn wait_exit(&self, container: &str) -> Result<i64, BackendError> {
        let mut stream = self
            .api("wait_container", container)
            .wait_container(container, None);
        match stream.next().await {
            Some(Ok(response)) => Ok(response.status_code),
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) => Err(self.not_found_or(container, "wait for a container", &e)),
            None => Err(BackendError::Engine {
                operation: "wait for a container".into(),
                endpoint: self.endpoint_text(),
                message: "the engine closed the wait without an exit status".into(),
            }),
        }
    }

    /// Stops the container: SIGTERM, then SIGKILL after `grace`. A container that already
    /// stopped is fine.
    pub async fn stop_container(
        &self,
        container: &str,
        grace: Duration,
    ) -> Result<(), BackendError> {
        let seconds = i32::try_from(grace.as_secs()).unwrap_or(i32::MAX);
        let options = StopContainerOptionsBuilder::new().t(seconds).build();
        match self
            .api("stop_container", container)
            .stop_container(container, Some(options))
            .await
        {
            // 304: already stopped.
            Err(e) if status_code(&e) == Some(304) => Ok(()),
            Err(e) => Err(self.not_found_or(container, "stop a container", &e)),
            Ok(()) => Ok(()),
        }
    }

    /// Removes the container whatever its state (and its anonymous volumes). A container that
    /// is already gone, or already being removed, is fine.
    pub async fn remove_container(&self, container: &str) -> Result<(), BackendError> {
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        match self
            .api("remove_container", container)
            .remove_container(container, Some(options))
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) if status_code(&e) == Some(409) && describe(&e).contains("in progress") => {
                Ok(())
            }
            Err(e) => Err(self.engine_error("remove a container", &e)),
        }
    }

    /// The refusal of a bind mount whose host path is missing, with the target it was for.
    fn bind_source_missing(&self, spec: &ContainerSpec, message: &str) -> BackendError {
        let path = message
            .split_once(BIND_SOURCE_MISSING)
            .map_or(message, |(_, p)| p)
            .trim()
            .to_string();
        // Docker names the path as given, or cleaned (`/a//b/` as `/a/b`): compared as paths.
        let target = spec
            .volumes
            .iter()
            .find(|v| v.is_bind() && std::path::Path::new(&v.source) == std::path::Path::new(&path))
            .map(|v| v.target.clone());
        BackendError::BindSourceMissing {
            path,
            target,
            endpoint: self.endpoint_text(),
        }
    }

    /// Any other failure of an engine call, naming the operation (as it fits after "failed
    /// to") and the endpoint.
    pub(crate) fn engine_error(&self, operation: &str, e: &bollard::errors::Error) -> BackendError {
        BackendError::Engine {
            operation: operation.to_string(),
            endpoint: self.endpoint_text(),
            message: describe(e),
        }
    }

    pub(crate) fn not_found_or(
        &self,
        container: &str,
        operation: &str,
        e: &bollard::errors::Error,
    ) -> BackendError {
        if status_code(e) == Some(404) {
            BackendError::NoSuchContainer {
                container: container.to_string(),
            }
        } else {
            self.engine_error(operation, e)
        }
    }
}
