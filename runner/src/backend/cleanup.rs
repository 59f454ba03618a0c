//! Removing what gpuflow created, found by label: everything of one run (at job or run end,
//! on Ctrl-C), and everything whose owning runner process is gone (a runner that was killed
//! cannot clean up after itself; the next one does, at start or on `gpuflow gc`).
//!
//! Every removal is awaited here; nothing relies on a destructor.

use std::collections::HashMap;

use bollard::query_parameters::{ListContainersOptionsBuilder, ListNetworksOptionsBuilder};

use super::labels::{LABEL_MANAGED, LABEL_OWNER_HOST, LABEL_RUN_ID, label_filter};
use super::{BackendError, DockerBackend, Owner};

/// What a clean-up removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub containers: usize,
    pub networks: usize,
}

/// A container or network found by label.
struct Labelled {
    id: String,
    labels: HashMap<String, String>,
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
        let filter = [(LABEL_MANAGED, "true"), (LABEL_RUN_ID, run_id)];
        let containers = self.labelled_containers(&filter).await?;
        let networks = self.labelled_networks(&filter).await?;
        self.remove_all(&containers, &networks).await
    }

    /// Removes the containers and networks created from this host by runner processes that no
    /// longer run. Those of live runners, and of other hosts (which may share a remote
    /// engine), are left alone.
    pub async fn sweep_orphans(&self) -> Result<Removed, BackendError> {
        let host = self.owner().host.clone();
        let filter = [(LABEL_MANAGED, "true"), (LABEL_OWNER_HOST, host.as_str())];
        let orphaned = |thing: &Labelled| {
            // Without a readable owner there is nothing to compare against: keep it.
            Owner::from_labels(&thing.labels).is_some_and(|owner| !owner.is_alive())
        };
        let containers: Vec<Labelled> = self
            .labelled_containers(&filter)
            .await?
            .into_iter()
            .filter(orphaned)
            .collect();
        let networks: Vec<Labelled> = self
            .labelled_networks(&filter)
            .await?
            .into_iter()
            .filter(orphaned)
            .collect();
        self.remove_all(&containers, &networks).await
    }

    /// Containers first: a network with containers attached cannot be removed.
    async fn remove_all(
        &self,
        containers: &[Labelled],
        networks: &[Labelled],
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
        })
    }

    async fn labelled_containers(
        &self,
        pairs: &[(&str, &str)],
    ) -> Result<Vec<Labelled>, BackendError> {
        // `all`: stopped and never-started containers are listed too.
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&label_filter(pairs))
            .build();
        let listed = self
            .client()
            .list_containers(Some(options))
            .await
            .map_err(|e| self.engine_error("list containers", &e))?;
        Ok(listed
            .into_iter()
            .filter_map(|c| {
                Some(Labelled {
                    id: c.id?,
                    labels: c.labels.unwrap_or_default(),
                })
            })
            .collect())
    }

    async fn labelled_networks(
        &self,
        pairs: &[(&str, &str)],
    ) -> Result<Vec<Labelled>, BackendError> {
        let options = ListNetworksOptionsBuilder::new()
            .filters(&label_filter(pairs))
            .build();
        let listed = self
            .client()
            .list_networks(Some(options))
            .await
            .map_err(|e| self.engine_error("list networks", &e))?;
        Ok(listed
            .into_iter()
            .filter_map(|n| {
                Some(Labelled {
                    id: n.id?,
                    labels: n.labels.unwrap_or_default(),
                })
            })
            .collect())
    }
}
