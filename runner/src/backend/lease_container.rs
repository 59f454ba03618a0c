//! Containers that stand for GPU leases on one engine (`crate::gpu::engine_lease` says when
//! and why): one per GPU, named after it, so the engine's refusal of a second container of one
//! name (409 Conflict) makes taking a GPU atomic for every client of that engine, whichever
//! machine it runs on.
//!
//! Such a container only runs a shell loop that ends once its heartbeat file is older than the
//! staleness limit; its holder touches the file (`docker exec`) to keep it going. The engine
//! removes it when it exits (`AutoRemove`), so the lease of a holder that died goes away by
//! itself. It carries gpuflow's usual labels (run, job, owner: the run's end, the sweep of
//! dead runners and `gpuflow gc` find it like any other container) and its own: which GPU, who
//! holds it and since when, for `gpuflow hosts` on other machines.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, ContainerSummaryStateEnum, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, ListContainersOptionsBuilder};

use super::error::{describe, status_code};
use super::exec::ExecSpec;
use super::labels::LABEL_RUN_ID;
use super::{BackendError, DockerBackend, Owner, RunLabels};

/// The GPU (its UUID) a lease container holds; present on every lease container.
pub const LABEL_LEASE_GPU: &str = "dev.gpuflow.lease-gpu";
/// Who holds it, as the holder describes itself (`pid 4711, run …, bench (2)`).
pub const LABEL_LEASE_HOLDER: &str = "dev.gpuflow.lease-holder";
/// The holder's user name on its machine.
pub const LABEL_LEASE_USER: &str = "dev.gpuflow.lease-user";
/// When it was taken, seconds since the epoch by the holder's clock.
pub const LABEL_LEASE_SINCE: &str = "dev.gpuflow.lease-since";

/// One GPU's lease container, to be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseContainer {
    /// Its name: what makes it exclusive.
    pub name: String,
    pub image: String,
    /// The `sh -c` script it runs (the heartbeat loop).
    pub script: String,
    /// The GPU's UUID.
    pub gpu: String,
    pub holder: String,
    pub user: String,
    /// Seconds since the epoch.
    pub since: u64,
    /// The run and job of the holder (gpuflow's usual labels).
    pub run: RunLabels,
}

/// A lease container as the engine lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseState {
    pub id: String,
    pub name: String,
    /// `running`, `created`, `exited`, …
    pub status: String,
    /// When the engine created it, seconds since the epoch by the engine's clock.
    pub created: i64,
    pub labels: HashMap<String, String>,
}

impl LeaseState {
    pub fn gpu(&self) -> &str {
        self.label(LABEL_LEASE_GPU)
    }

    pub fn holder(&self) -> &str {
        self.label(LABEL_LEASE_HOLDER)
    }

    pub fn user(&self) -> &str {
        self.label(LABEL_LEASE_USER)
    }

    pub fn since(&self) -> Option<u64> {
        self.labels.get(LABEL_LEASE_SINCE)?.parse().ok()
    }

    /// The runner process that holds it, when its labels say.
    pub fn owner(&self) -> Option<Owner> {
        Owner::from_labels(&self.labels)
    }

    fn label(&self, key: &str) -> &str {
        self.labels.get(key).map_or("", String::as_str)
    }
}

impl DockerBackend {
    /// Creates and starts the lease container `lease`; its id, or `None` when a container of
    /// that name exists already (taken, or stale: see [`Self::lease_containers`]). A container
    /// that was created but could not start is removed before the error is returned.
    pub async fn create_lease(
        &self,
        lease: &LeaseContainer,
    ) -> Result<Option<String>, BackendError> {
        let mut labels = lease.run.to_labels(self.owner());
        labels.extend([
            (LABEL_LEASE_GPU.to_string(), lease.gpu.clone()),
            (LABEL_LEASE_HOLDER.to_string(), lease.holder.clone()),
            (LABEL_LEASE_USER.to_string(), lease.user.clone()),
            (LABEL_LEASE_SINCE.to_string(), lease.since.to_string()),
        ]);
        let body = ContainerCreateBody {
            image: Some(lease.image.clone()),
            entrypoint: Some(vec!["sh".into(), "-c".into()]),
            cmd: Some(vec![lease.script.clone()]),
            // Root inside, whatever the image's user: the heartbeat file is written at `/`.
            user: Some("0:0".into()),
            labels: Some(labels),
            tty: Some(false),
            host_config: Some(HostConfig {
                auto_remove: Some(true),
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::new()
            .name(&lease.name)
            .build();
        let created = match self
            .api("create_container", &lease.name)
            .create_container(Some(options), body)
            .await
        {
            Ok(created) => created,
            Err(e) if status_code(&e) == Some(409) => return Ok(None),
            Err(e) if status_code(&e) == Some(404) && describe(&e).contains("No such image") => {
                return Err(BackendError::Engine {
                    operation: "create a GPU lease container".into(),
                    endpoint: self.endpoint_text(),
                    message: format!("the image `{}` is not on the engine", lease.image),
                });
            }
            Err(e) => return Err(self.engine_error("create a GPU lease container", &e)),
        };
        if let Err(e) = self
            .api("start_container", &lease.name)
            .start_container(&created.id, None)
            .await
        {
            // Removed by a claimant that took it for a dead one (a created container that
            // never started): lost the race, so taken.
            if status_code(&e) == Some(404) {
                return Ok(None);
            }
            let _ = self.remove_container(&created.id).await;
            return Err(self.engine_error("start a GPU lease container", &e));
        }
        Ok(Some(created.id))
    }

    /// The lease containers on the engine, whatever their state; with `name`, only the one
    /// of that name.
    pub async fn lease_containers(
        &self,
        name: Option<&str>,
    ) -> Result<Vec<LeaseState>, BackendError> {
        let mut filters = HashMap::from([("label".to_string(), vec![LABEL_LEASE_GPU.to_string()])]);
        if let Some(name) = name {
            // A pattern: anchored, so `gpuflow-lease-GPU-1` does not find `…-GPU-10`.
            filters.insert("name".into(), vec![format!("^/{name}$")]);
        }
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let listed = self
            .api("list_containers", name.unwrap_or("GPU lease containers"))
            .list_containers(Some(options))
            .await
            .map_err(|e| self.engine_error("list GPU lease containers", &e))?;
        Ok(listed
            .into_iter()
            .filter_map(|c| {
                let id = c.id?;
                let name = c
                    .names
                    .and_then(|n| n.into_iter().next())
                    .map_or_else(|| id.clone(), |n| n.trim_start_matches('/').to_string());
                Some(LeaseState {
                    id,
                    name,
                    status: c
                        .state
                        .unwrap_or(ContainerSummaryStateEnum::EMPTY)
                        .to_string(),
                    created: c.created.unwrap_or(0),
                    labels: c.labels.unwrap_or_default(),
                })
            })
            .collect())
    }

    /// Removes the lease containers of the run `run_id` (its jobs let theirs go already; this
    /// catches what a failure left): how many there were.
    pub async fn remove_run_leases(&self, run_id: &str) -> Result<usize, BackendError> {
        let leases: Vec<LeaseState> = self
            .lease_containers(None)
            .await?
            .into_iter()
            .filter(|c| c.labels.get(LABEL_RUN_ID).is_some_and(|r| r == run_id))
            .collect();
        for lease in &leases {
            self.remove_container(&lease.id).await?;
        }
        Ok(leases.len())
    }

    /// Runs `sh -c script` in the lease container `id`; its exit code. A container that is
    /// gone or stopped is an error ([`BackendError::NoSuchContainer`], `NotRunning`).
    pub async fn lease_exec(&self, id: &str, script: &str) -> Result<i64, BackendError> {
        let spec = ExecSpec::new(["sh", "-c", script]);
        self.exec(id, &spec, |_line| {}).await
    }
}
