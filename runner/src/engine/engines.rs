//! The Docker engines a run's jobs use: the host each job run is on, and one connection per
//! host, made the first time a job there needs Docker and shared by every job there after.
//!
//! The engine does not choose hosts nor know how to reach them: the caller (the CLI, from
//! `runs-on`, `--host` and `gpuflow.toml`) names each host with a way to connect to it and
//! assigns job runs to hosts. A job that never needs Docker never causes a connection, so a
//! workflow of host steps runs without any engine.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;

use crate::backend::{BackendError, DockerBackend, RegistryLogins};
use crate::events::JobRef;
use crate::gpu::HostGpus;

/// How to reach one host's engine; called at most once per run.
pub type Connect =
    Arc<dyn Fn() -> BoxFuture<'static, Result<DockerBackend, BackendError>> + Send + Sync>;

struct HostEngine {
    name: String,
    /// `None` for an engine given already connected.
    connect: Option<Connect>,
    /// The connection, or why there is none (a rendered message, so every job failing for it
    /// says the same thing).
    cell: OnceCell<Result<DockerBackend, String>>,
}

/// The hosts of a run and which job run goes where.
#[derive(Default)]
pub struct Engines {
    hosts: Vec<HostEngine>,
    /// `(job id, cell)` → index in `hosts`.
    assigned: HashMap<(String, usize), usize>,
    /// Where job runs without an assignment go; `None`: they have no engine.
    fallback: Option<usize>,
    /// The GPUs of each host, by host name, for jobs that ask for GPUs (docs/gpus.md).
    gpus: HashMap<String, Arc<HostGpus>>,
    /// The GPUs of job runs on no host (a run with no engine at all: host steps only).
    default_gpus: Option<Arc<HostGpus>>,
    /// Credentials per registry, for every pull on every host that brings none of its own.
    logins: Arc<RegistryLogins>,
}

impl Engines {
    /// No engine at all: a job that needs Docker fails saying so.
    pub fn none() -> Self {
        Self::default()
    }

    /// Every job on one already connected engine, called `host`.
    pub fn single(host: &str, docker: DockerBackend) -> Self {
        let mut engines = Self::default();
        engines.hosts.push(HostEngine {
            name: host.to_string(),
            connect: None,
            cell: OnceCell::new_with(Some(Ok(docker))),
        });
        engines.fallback = Some(0);
        engines
    }

    /// Adds a host (once per name) and returns its index; `connect` runs the first time a
    /// job assigned there needs Docker.
    pub fn add_host(&mut self, name: &str, connect: Connect) -> usize {
        if let Some(i) = self.hosts.iter().position(|h| h.name == name) {
            return i;
        }
        self.hosts.push(HostEngine {
            name: name.to_string(),
            connect: Some(connect),
            cell: OnceCell::new(),
        });
        self.hosts.len() - 1
    }

    /// Runs cell `cell` of job `job` on the host `host` (an index from [`Self::add_host`]).
    pub fn assign(&mut self, job: &str, cell: usize, host: usize) {
        self.assigned.insert((job.to_string(), cell), host);
    }

    fn index_of(&self, job: &JobRef) -> Option<usize> {
        self.assigned
            .get(&(job.job.clone(), job.cell))
            .copied()
            .or(self.fallback)
    }

    /// The name of the host a job run is on, if it has one.
    pub fn host_of(&self, job: &JobRef) -> Option<&str> {
        self.index_of(job).map(|i| self.hosts[i].name.as_str())
    }

    /// Gives every engine's pulls `logins` ([`DockerBackend::with_logins`]).
    pub fn set_logins(&mut self, logins: RegistryLogins) {
        self.logins = Arc::new(logins);
    }

    /// The engine of the host a job run is on, connecting on first use; its pulls send the
    /// run's registry logins.
    pub async fn for_job(&self, job: &JobRef) -> Result<DockerBackend, String> {
        let Some(index) = self.index_of(job) else {
            return Err(
                "this needs a Docker engine, and the run has none (is `DOCKER_HOST` reachable?)"
                    .into(),
            );
        };
        let host = &self.hosts[index];
        host.cell
            .get_or_init(|| async {
                let Some(connect) = &host.connect else {
                    return Err(format!("host `{}`: no way to connect to it", host.name));
                };
                connect().await.map_err(|e| match e.hint() {
                    Some(hint) => format!("host `{}`: {e} (hint: {hint})", host.name),
                    None => format!("host `{}`: {e}", host.name),
                })
            })
            .await
            .clone()
            .map(|docker| docker.with_logins(self.logins.clone()))
    }

    /// Gives the host `host` its GPUs: jobs there that ask for GPUs lease them from `gpus`.
    pub fn set_gpus(&mut self, host: &str, gpus: HostGpus) {
        self.gpus.insert(host.to_string(), Arc::new(gpus));
    }

    /// The GPUs given to the host named `host`, if any.
    pub fn gpus_for_host(&self, host: &str) -> Option<Arc<HostGpus>> {
        self.gpus.get(host).cloned()
    }

    /// The GPUs of job runs that have no host (a run without any engine).
    pub fn set_default_gpus(&mut self, gpus: HostGpus) {
        self.default_gpus = Some(Arc::new(gpus));
    }

    /// The GPUs of the host a job run is on; `None` when nobody said what that host has.
    pub fn gpus_for(&self, job: &JobRef) -> Option<Arc<HostGpus>> {
        match self.host_of(job) {
            Some(host) => self.gpus.get(host).cloned(),
            None => self.default_gpus.clone(),
        }
    }

    /// The engines connected so far, with their host names.
    pub fn connected(&self) -> impl Iterator<Item = (&str, &DockerBackend)> {
        self.hosts.iter().filter_map(|h| match h.cell.get() {
            Some(Ok(docker)) => Some((h.name.as_str(), docker)),
            _ => None,
        })
    }

    /// Why connecting to a host failed, for each host that could not be reached.
    pub fn failures(&self) -> Vec<String> {
        self.hosts
            .iter()
            .filter_map(|h| match h.cell.get() {
                Some(Err(e)) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }
}

impl From<Option<DockerBackend>> for Engines {
    fn from(docker: Option<DockerBackend>) -> Self {
        docker.map_or_else(Self::none, |d| Self::single(crate::hosts::LOCAL, d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn job(name: &str, cell: usize) -> JobRef {
        JobRef {
            job: name.into(),
            cell,
            display: name.into(),
        }
    }

    fn failing(count: Arc<AtomicUsize>, endpoint: &'static str) -> Connect {
        Arc::new(move || {
            count.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                Err(BackendError::Unreachable {
                    endpoint: endpoint.into(),
                    reason: "no answer".into(),
                    hint: "start it".into(),
                })
            })
        })
    }

    #[tokio::test]
    async fn connects_once_per_host_and_only_when_asked() {
        let (a, b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut engines = Engines::none();
        let ha = engines.add_host("a", failing(a.clone(), "tcp://a:2375"));
        let hb = engines.add_host("b", failing(b.clone(), "tcp://b:2375"));
        engines.assign("x", 0, ha);
        engines.assign("x", 1, ha);
        engines.assign("y", 0, hb);
        assert_eq!(engines.host_of(&job("x", 1)), Some("a"));
        assert_eq!(engines.host_of(&job("y", 0)), Some("b"));
        assert_eq!(a.load(Ordering::SeqCst), 0, "nothing connects up front");

        let e = engines.for_job(&job("x", 0)).await.unwrap_err();
        assert!(e.starts_with("host `a`: "), "{e}");
        assert!(e.contains("tcp://a:2375"), "{e}");
        engines.for_job(&job("x", 1)).await.unwrap_err();
        assert_eq!(a.load(Ordering::SeqCst), 1);
        assert_eq!(b.load(Ordering::SeqCst), 0);
        assert_eq!(engines.failures().len(), 1);
    }

    #[tokio::test]
    async fn without_engines_a_job_is_told_there_is_none() {
        let engines = Engines::none();
        assert_eq!(engines.host_of(&job("x", 0)), None);
        let e = engines.for_job(&job("x", 0)).await.unwrap_err();
        assert!(e.contains("has none"), "{e}");
        assert!(engines.failures().is_empty());
    }
}
