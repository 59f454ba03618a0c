//! The containers and network of one job run: services, the job's container and those
//! `start-container` steps start, by the name steps use for them. All of them go when the job
//! ends, whatever happened (unless `--keep-containers`); their output becomes log events.
//!
//! Docker names are global, so each container gets a unique Docker name
//! (`gpuflow-<run>-<job>-<name>`) and answers to its short name on the job's network.
//!
//! The network is made only when a second container joins the job: creating one costs about
//! 100 ms, a third of a container's start, and a lone container has no one to reach by name.
//! Until then the first container is on Docker's default network; when the second comes, the
//! first is connected to the new network under its name (Docker then answers its name
//! lookups too, so it reaches the later containers by name as well).

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use tokio::task::JoinHandle;

use super::container_runner::SharedShell;
use crate::backend::{
    BackendError, ContainerSpec, DockerBackend, LogLine, OutputStream, RunLabels,
};
use crate::events::{EventKind, JobRef, Stream};
use crate::steps::StepHost;

/// Why a job's container could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error("this job already started a container named `{name}`")]
    Duplicate { name: String },
    #[error("no container named `{name}` was started in this job")]
    Unknown { name: String },
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl ContainerError {
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Duplicate { .. } => {
                Some("give the second `start-container` step another `name`".into())
            }
            Self::Unknown { .. } => Some(
                "name a container a `start-container` step of this job started (its `name`, or its `id`)"
                    .into(),
            ),
            Self::Backend(e) => e.hint(),
        }
    }
}

/// A container the job started.
#[derive(Debug)]
pub struct Started {
    pub id: String,
    /// Its Docker name.
    pub docker_name: String,
    /// The shell its `run:` steps go through, started by the first one.
    pub shell: SharedShell,
    /// The memory estimate of the model server it runs, when `start-container` made one:
    /// `wait-for-health` sets the server's own KV cache size beside it.
    pub memory: Option<crate::memory::Estimate>,
    /// Started alone on the default network: to connect to the job's network, as this name,
    /// once it exists.
    pub(super) joins_network_as: Option<String>,
    pub(super) forward: Option<JoinHandle<()>>,
    /// A server other cells of its group may reuse ([`super::server_reuse`]).
    pub(super) reuse: Option<Reuse>,
}

impl Started {
    /// For a server an earlier cell started and this cell adopted: how many cells it served
    /// before, and how long it has run.
    pub fn reused(&self) -> Option<(u32, std::time::Duration)> {
        self.reuse
            .as_ref()
            .filter(|r| r.cells_before > 0)
            .map(|r| (r.cells_before, r.started.elapsed()))
    }

    /// Benchmark requests its server served so far (before this cell, and in it).
    pub fn requests_served(&self) -> u64 {
        self.reuse.as_ref().map_or(0, |r| r.requests_served)
    }
}

/// What a reusable server carries from cell to cell.
#[derive(Debug)]
pub struct Reuse {
    pub group: String,
    pub key: String,
    /// The cells it served before the current one.
    pub cells_before: u32,
    pub started: std::time::Instant,
    /// Created on the job's network (it was not the job's first container), so parking it
    /// must give it the default network to stay reachable.
    pub(super) created_on_job_network: bool,
    /// On a network its step chose (`network: host`): left as it is.
    pub(super) own_network: bool,
    /// The GPU lease that came with an adopted server when this cell leased none of its own:
    /// it lives as long as the server runs, and is parked with it again.
    pub(super) lease: Option<crate::gpu::JobGpus>,
    /// The image its step named.
    pub(super) image: String,
    /// Benchmark requests it served, before this cell and in it.
    pub requests_served: u64,
    /// How long to keep it warm after the run (`keep-warm:`).
    pub(super) keep_warm: Option<Duration>,
    /// Its warm registry entry, held, when it came from an earlier run.
    pub(super) warm: Option<crate::warm::Held>,
}

/// Everything Docker-side of one job run.
pub struct JobContainers {
    pub docker: DockerBackend,
    pub(super) labels: RunLabels,
    prefix: String,
    pub(super) network: Option<String>,
    pub started: IndexMap<String, Started>,
    /// The run's parked servers, for a step that may reuse one.
    pub(super) servers: Option<Arc<super::server_pool::ServerPool>>,
    /// A benchmark step of the job said `fresh: true` (its label): its server is started
    /// anew, never adopted.
    pub(super) fresh_server: Option<String>,
}

impl JobContainers {
    pub fn new(docker: DockerBackend, run_id: &str, job: &JobRef) -> Self {
        let job_part = crate::run_logs::slug(&job.job).to_ascii_lowercase();
        Self {
            docker,
            labels: RunLabels::new(run_id, job.job.clone()),
            prefix: format!("gpuflow-{}-{job_part}-{}", run_stamp(run_id), job.cell + 1),
            network: None,
            started: IndexMap::new(),
            servers: None,
            fresh_server: None,
        }
    }

    /// The labels of what the job creates: a step's own throw-away container carries them, so
    /// a run killed meanwhile leaves it to the next run's sweep.
    pub fn labels(&self) -> &RunLabels {
        &self.labels
    }

    /// With the run's parked servers, so a `start-container` step may adopt one.
    pub fn with_servers(mut self, servers: Arc<super::server_pool::ServerPool>) -> Self {
        self.servers = Some(servers);
        self
    }

    /// Counts `requests` a benchmark sent as served by the server `measured` (a container this
    /// job started), or, when the target was not one by name, by the job's only shared
    /// server.
    pub fn count_served(&mut self, measured: Option<&str>, requests: u64) {
        let servers: Vec<&mut Reuse> = self
            .started
            .iter_mut()
            .filter(|(name, _)| measured.is_none_or(|m| m == name.as_str()))
            .filter_map(|(_, s)| s.reuse.as_mut())
            .collect();
        if servers.len() == 1
            && let Some(reuse) = servers.into_iter().next()
        {
            reuse.requests_served += requests;
        }
    }

    /// With a benchmark step that asked for a fresh server (`fresh: true`; its label).
    pub fn with_fresh_server(mut self, step: Option<String>) -> Self {
        self.fresh_server = step;
        self
    }

    /// Marks what it creates from now on as kept (`--keep-containers`), so the next run's
    /// sweep leaves it to `gpuflow gc`.
    pub fn kept(mut self, kept: bool) -> Self {
        self.labels = self.labels.kept(kept);
        self
    }

    /// The job's network, created on first use; a container that was started alone before
    /// is connected to it then.
    pub async fn network(&mut self) -> Result<String, BackendError> {
        if let Some(n) = &self.network {
            return Ok(n.clone());
        }
        let name = format!("{}-net", self.prefix);
        self.docker.create_network(&self.labels, &name).await?;
        self.network = Some(name.clone());
        for started in self.started.values_mut() {
            if let Some(alias) = started.joins_network_as.take() {
                self.docker
                    .connect_network(&name, &started.id, &[alias])
                    .await?;
            }
        }
        Ok(name)
    }

    /// Starts `spec` as `name`: on the job's network (answering to `name`) unless the spec
    /// names another network, its output forwarded as log events.
    pub async fn start(
        &mut self,
        host: &Arc<dyn StepHost>,
        job: &JobRef,
        name: &str,
        spec: ContainerSpec,
    ) -> Result<&Started, ContainerError> {
        let labels = self.labels.clone();
        self.start_labelled(host, job, name, spec, &labels).await
    }

    /// [`Self::start`], labelled with `labels` (the job's, or marked as a server to keep
    /// warm).
    pub(super) async fn start_labelled(
        &mut self,
        host: &Arc<dyn StepHost>,
        job: &JobRef,
        name: &str,
        mut spec: ContainerSpec,
        labels: &RunLabels,
    ) -> Result<&Started, ContainerError> {
        if self.started.contains_key(name) {
            return Err(ContainerError::Duplicate {
                name: name.to_string(),
            });
        }
        let mut joins_network_as = None;
        if spec.network.is_none() {
            if self.network.is_some() || !self.started.is_empty() {
                spec.network = Some(self.network().await?);
                spec.network_aliases = vec![name.to_string()];
            } else {
                joins_network_as = Some(name.to_string());
            }
        }
        let docker_name = format!(
            "{}-{}",
            self.prefix,
            crate::run_logs::slug(name).to_ascii_lowercase()
        );
        spec.name = Some(docker_name.clone());
        let (container, output) = self.docker.start_container_attached(labels, &spec).await?;
        let forward = {
            let sink = log_sink(host, job, name);
            tokio::spawn(async move {
                let _ = output.forward(sink).await;
            })
        };
        host.emit(EventKind::ContainerStarted {
            job: job.clone(),
            name: name.to_string(),
            id: container.id.clone(),
            image: spec.image.clone(),
            host: host.host_of(job).unwrap_or_default().to_string(),
            endpoint: self.docker.endpoint().to_string(),
        });
        self.started.insert(
            name.to_string(),
            Started {
                id: container.id,
                docker_name,
                shell: SharedShell::default(),
                memory: None,
                joins_network_as,
                forward: Some(forward),
                reuse: None,
            },
        );
        Ok(&self.started[name])
    }

    /// Stops a container early (`stop-container`); returns its exit code.
    pub async fn stop(
        &mut self,
        host: &Arc<dyn StepHost>,
        job: &JobRef,
        name: &str,
        grace: Duration,
        remove: bool,
    ) -> Result<i64, ContainerError> {
        let Some(started) = self.started.get(name) else {
            return Err(ContainerError::Unknown {
                name: name.to_string(),
            });
        };
        let id = started.id.clone();
        self.docker.stop_container(&id, grace).await?;
        let code = self.docker.wait_exit(&id).await?;
        if remove {
            self.remove_one(host, job, name).await?;
        }
        Ok(code)
    }

    async fn remove_one(
        &mut self,
        host: &Arc<dyn StepHost>,
        job: &JobRef,
        name: &str,
    ) -> Result<(), BackendError> {
        let Some(mut started) = self.started.shift_remove(name) else {
            return Ok(());
        };
        self.docker.remove_container(&started.id).await?;
        if let Some(forward) = started.forward.take() {
            // The output closes with the container; don't wait on a stuck stream for long.
            let _ = tokio::time::timeout(Duration::from_secs(5), forward).await;
        }
        host.emit(EventKind::ContainerRemoved {
            job: job.clone(),
            name: name.to_string(),
        });
        Ok(())
    }

    /// Removes every container of the job, then its network; every removal is tried and
    /// awaited. Returns what could not be removed.
    pub async fn remove_all(&mut self, host: &Arc<dyn StepHost>, job: &JobRef) -> Vec<String> {
        let mut problems = Vec::new();
        let names: Vec<String> = self.started.keys().rev().cloned().collect();
        for name in names {
            if let Err(e) = self.remove_one(host, job, &name).await {
                problems.push(format!("container `{name}`: {e}"));
            }
        }
        if let Some(network) = self.network.take()
            && let Err(e) = self.docker.remove_network(&network).await
        {
            problems.push(format!("network `{network}`: {e}"));
        }
        problems
    }
}

/// Where a container's output goes: masked, as the job's log lines under the container's name.
pub(super) fn log_sink(
    host: &Arc<dyn StepHost>,
    job: &JobRef,
    name: &str,
) -> impl FnMut(LogLine) + Send + 'static {
    let (host, job, name) = (host.clone(), job.clone(), name.to_string());
    // The end of a cut line's piece, per stream, held back until the next piece shows whether
    // a secret straddles the cut (`Masker::mask_piece`).
    let mut held: [String; 2] = Default::default();
    move |line: LogLine| {
        let (stream, held) = match line.stream {
            OutputStream::Stdout => (Stream::Stdout, &mut held[0]),
            OutputStream::Stderr => (Stream::Stderr, &mut held[1]),
        };
        let Some(text) = host.masker().mask_piece(held, &line.text, line.continues) else {
            return;
        };
        host.emit(EventKind::LogLine {
            job: job.clone(),
            step: None,
            container: Some(name.clone()),
            stream,
            text,
        });
    }
}

/// The run id without characters Docker names refuse.
fn run_stamp(run_id: &str) -> String {
    let alnum: Vec<char> = run_id.chars().filter(char::is_ascii_alphanumeric).collect();
    // The end of a run id is what tells runs apart (seconds and a random suffix); a common
    // prefix (`test-engine-…`) must not push it out of the name.
    let s: String = alnum[alnum.len().saturating_sub(20)..].iter().collect();
    s.to_ascii_lowercase()
}
