//! Networks gpuflow creates for a run (so a job's containers reach each other by name); they
//! carry the same labels as containers and go with them.

use bollard::models::{EndpointSettings, NetworkConnectRequest, NetworkCreateRequest};

use super::{BackendError, DockerBackend, RunLabels};

impl DockerBackend {
    /// Creates a bridge network `name` for `run`; returns its id.
    pub async fn create_network(
        &self,
        run: &RunLabels,
        name: &str,
    ) -> Result<String, BackendError> {
        let request = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".to_string()),
            labels: Some(run.to_labels(self.owner())),
            ..Default::default()
        };
        let created = self
            .api("create_network", name)
            .create_network(request)
            .await
            .map_err(|e| self.engine_error("create a network", &e))?;
        Ok(created.id)
    }

    /// Connects a container (running or not) to `network`, where it answers to `aliases` too.
    pub async fn connect_network(
        &self,
        network: &str,
        container: &str,
        aliases: &[String],
    ) -> Result<(), BackendError> {
        let request = NetworkConnectRequest {
            container: container.to_string(),
            endpoint_config: Some(EndpointSettings {
                aliases: Some(aliases.to_vec()),
                ..Default::default()
            }),
        };
        self.api("connect_network", container)
            .connect_network(network, request)
            .await
            .map_err(|e| self.not_found_or(container, "connect a container to a network", &e))
    }

    /// Disconnects a running container from `network`; one no longer on it is fine.
    pub async fn disconnect_network(
        &self,
        network: &str,
        container: &str,
    ) -> Result<(), BackendError> {
        let request = bollard::models::NetworkDisconnectRequest {
            container: container.to_string(),
            force: Some(true),
        };
        match self
            .api("disconnect_network", container)
            .disconnect_network(network, request)
            .await
        {
            Err(e) if super::error::status_code(&e) == Some(404) => Ok(()),
            Err(e) => {
                Err(self.not_found_or(container, "disconnect a container from a network", &e))
            }
            Ok(()) => Ok(()),
        }
    }

    /// Removes a network; one that is already gone is fine.
    pub async fn remove_network(&self, network: &str) -> Result<(), BackendError> {
        match self
            .api("remove_network", network)
            .remove_network(network)
            .await
        {
            Err(e) if super::error::status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(self.engine_error("remove a network", &e)),
            Ok(()) => Ok(()),
        }
    }
}
