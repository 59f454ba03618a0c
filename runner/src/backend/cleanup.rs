//! Removing what gpuflow created, found by label: everything of one run (at job or run end,
//! on Ctrl-C), and everything whose owning runner process is gone (a runner that was killed
//! cannot clean up after itself; the next one does, at start or on `gpuflow gc`).
//!
//! Every removal is awaited here; nothing relies on a destructor. Listing is separate from
//! removing so `gpuflow gc --dry-run` shows exactly what a removal would take.

use std::collections::HashMap;

use bollard::query_parameters::{ListContainersOptionsBuilder, ListNetworksOptionsBuilder};

use super::labels::{
    LABEL_JOB, LABEL_KEEP_WARM, LABEL_KEPT, LABEL_MANAGED, LABEL_OWNER_HOST, LABEL_OWNER_UID,
    LABEL_RUN_ID, label_filter,
};
use super::{BackendError, DockerBackend, Owner};

/// What a clean-up removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub containers: usize,
    pub networks: usize,
    /// Each thing removed, containers first, for reports such as `gpuflow gc`'s.
    pub things: Vec<Managed>,
}

/// Whether a [`Managed`] thing is a container or a network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManagedKind {
    Container,
    Network,
}

/// A container or network gpuflow created, found by its labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Managed {
    pub kind: ManagedKind,
    pub id: String,
    /// The engine's name for it (without Docker's leading `/`); the id when it has none.
    pub name: String,
    pub labels: HashMap<String, String>,
}

impl Managed {
    pub fn run_id(&self) -> Option<&str> {
        self.labels.get(LABEL_RUN_ID).map(String::as_str)
    }

    pub fn job(&self) -> Option<&str> {
        self.labels.get(LABEL_JOB).map(String::as_str)
    }

    /// The runner process that created it, when its labels say.
    pub fn owner(&self) -> Option<Owner> {
        Owner::from_labels(&self.labels)
    }

    /// Kept on purpose (`gpuflow run --keep-containers`).
    pub fn kept(&self) -> bool {
        self.labels.get(LABEL_KEPT).is_some_and(|v| v == "true")
    }

    /// Started to be kept warm (`keep-warm:`): its life is the warm servers' sweep's.
    pub fn warm(&self) -> bool {
        self.labels
            .get(LABEL_KEEP_WARM)
            .is_some_and(|v| v == "true")
    }
}

impl DockerBackend {
    /// Ids of the run's containers, stopped ones included.
    pub async fn run_containers(&self, run_id: &str) -> Result<Vec<String>, BackendError> {
        let found = self
            .labelled_containers(&[(LABEL_MANAGED, "true"), (LABEL_RUN_ID, run_id)])
            .await?;
        Ok(found.into_iter().map(|c| c.id).collect())
    }

    /// Removes every container (force, whatever its state) and then every network of the run.
    pub async fn remove_run(&self, run_id: &str) -> Result<Removed, BackendError> {
        self.remove_run_except(run_id, &[]).await
    }

    /// [`Self::remove_run`], but for the containers `keep` (by id): the servers the run kept
    /// warm for later runs (`crate::warm`).
    pub async fn remove_run_except(
        &self,
        run_id: &str,
        keep: &[String],
    ) -> Result<Removed, BackendError> {
        let filter = [(LABEL_MANAGED, "true"), (LABEL_RUN_ID, run_id)];
        let mut containers = self.labelled_containers(&filter).await?;
        containers.retain(|c| !keep.contains(&c.id));
        let networks = self.labelled_networks(&filter).await?;
        self.remove_all(&containers, &networks).await
    }

    /// Removes the containers and networks created from this host by runner processes that no
    /// longer run: what `gpuflow run` does as it connects. Those of live runners, of other
    /// hosts (which may share a remote engine), and those a run was asked to keep
    /// (`--keep-containers`: the user is looking at them; `gpuflow gc` removes them) are left
    /// alone.
    pub async fn sweep_orphans(&self) -> Result<Removed, BackendError> {
        let (containers, networks) = self.orphans(false).await?;
        self.remove_all(&containers, &networks).await
    }

    /// Every container and network gpuflow created on this engine, whoever created it and
    /// whether or not its runner still runs (what `gpuflow gc --all-runs` removes).
    pub async fn all_managed(&self) -> Result<Vec<Managed>, BackendError> {
        let filter = [(LABEL_MANAGED, "true")];
        let mut all = self.labelled_containers(&filter).await?;
        all.extend(self.labelled_networks(&filter).await?);
        Ok(all)
    }

    /// What `gpuflow gc` removes: what [`Self::sweep_orphans`] would, and what runs that are
    /// over kept with `--keep-containers`; containers first.
    pub async fn orphaned(&self) -> Result<Vec<Managed>, BackendError> {
        let (mut containers, networks) = self.orphans(true).await?;
        containers.extend(networks);
        Ok(containers)
    }

    /// Removes `things` (as listed by [`Self::all_managed`] or [`Self::orphaned`]): containers
    /// first, whatever their order in `things`.
    pub async fn remove_managed(&self, things: &[Managed]) -> Result<Removed, BackendError> {
        let (containers, networks): (Vec<Managed>, Vec<Managed>) = things
            .iter()
            .cloned()
            .partition(|t| t.kind == ManagedKind::Container);
        self.remove_all(&containers, &networks).await
    }

    /// This user's containers started to be kept warm whose runner is gone and which are not
    /// among the warm servers `known`: their run was killed before it could keep them.
    pub async fn unregistered_warm(&self, known: &[String]) -> Result<Vec<Managed>, BackendError> {
        let host = self.owner().host.clone();
        let uid = rustix::process::geteuid().as_raw().to_string();
        let filter = [
            (LABEL_MANAGED, "true"),
            (LABEL_KEEP_WARM, "true"),
            (LABEL_OWNER_HOST, host.as_str()),
            (LABEL_OWNER_UID, uid.as_str()),
        ];
        Ok(self
            .labelled_containers(&filter)
            .await?
            .into_iter()
            .filter(|c| !known.contains(&c.id))
            .filter(|c| Owner::from_labels(&c.labels).is_some_and(|owner| owner.is_gone()))
            .collect())
    }

    /// Things of runners that are gone; with `kept`, also those kept with `--keep-containers`.
    async fn orphans(&self, kept: bool) -> Result<(Vec<Managed>, Vec<Managed>), BackendError> {
        let host = self.owner().host.clone();
        let filter = [(LABEL_MANAGED, "true"), (LABEL_OWNER_HOST, host.as_str())];
        let orphaned = |thing: &Managed| {
            // Only a free runner lock proves the owner gone; anything else is kept. A server
            // kept warm outlives its runner on purpose (`crate::warm` judges it).
            !thing.warm()
                && (kept || !thing.kept())
                && Owner::from_labels(&thing.labels).is_some_and(|owner| owner.is_gone())
        };
        let containers: Vec<Managed> = self
            .labelled_containers(&filter)
            .await?
            .into_iter()
            .filter(orphaned)
            .collect();
        let networks: Vec<Managed> = self
            .labelled_networks(&filter)
            .await?
            .into_iter()
            .filter(orphaned)
            .collect();
        Ok((containers, networks))
    }

    /// Containers first: a network with containers attached cannot be removed.
    async fn remove_all(
        &self,
        containers: &[Managed],
        networks: &[Managed],
    ) -> Result<Removed, BackendError> {
        for container in containers {
            self.remove_container(&container.id).await?;
        }
        for network in networks {
            self.remove_network(&network.id).await?;
        }
        Ok(Removed {
            containers: containers.len(),
            networks: networks.len(),
            things: containers.iter().chain(networks).cloned().collect(),
        })
    }

    async fn labelled_containers(
        &self,
        pairs: &[(&str, &str)],
    ) -> Result<Vec<Managed>, BackendError> {
        // `all`: stopped and never-started containers are listed too.
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&label_filter(pairs))
            .build();
        let listed = self
            .api("list_containers", &label_text(pairs))
            .list_containers(Some(options))
            .await
            .map_err(|e| self.engine_error("list containers", &e))?;
        Ok(listed
            .into_iter()
            .filter_map(|c| {
                let id = c.id?;
                let name = c
                    .names
                    .and_then(|names| names.into_iter().next())
                    .map_or_else(|| id.clone(), |n| n.trim_start_matches('/').to_string());
                Some(Managed {
                    kind: ManagedKind::Container,
                    name,
                    id,
                    labels: c.labels.unwrap_or_default(),
                })
            })
            .collect())
    }

    async fn labelled_networks(
        &self,
        pairs: &[(&str, &str)],
    ) -> Result<Vec<Managed>, BackendError> {
        let options = ListNetworksOptionsBuilder::new()
            .filters(&label_filter(pairs))
            .build();
        let listed = self
            .api("list_networks", &label_text(pairs))
            .list_networks(Some(options))
            .await
            .map_err(|e| self.engine_error("list networks", &e))?;
        Ok(listed
            .into_iter()
            .filter_map(|n| {
                let id = n.id?;
                Some(Managed {
                    kind: ManagedKind::Network,
                    name: n.name.unwrap_or_else(|| id.clone()),
                    id,
                    labels: n.labels.unwrap_or_default(),
                })
            })
            .collect())
    }
}

/// The labels a listing filters on, as its diagnostic names them (`label gpuflow.run=…`).
fn label_text(pairs: &[(&str, &str)]) -> String {
    let pairs: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("label {}", pairs.join(","))
}
