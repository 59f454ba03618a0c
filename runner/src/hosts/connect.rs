//! Connecting to a host's engine: for `ssh://` nodes, the node check first (see
//! `node_check.rs`), then the backend's own connection and API negotiation.

use super::host::Host;
use super::node_check::check_ssh_node;
use crate::backend::{BackendError, DockerBackend, Endpoint};

impl Host {
    /// A backend connected to this host's engine, or an error naming the endpoint and saying
    /// what is missing.
    #[tracing::instrument(level = "debug", name = "connect", skip_all, fields(host = %self.name))]
    pub async fn connect(&self) -> Result<DockerBackend, BackendError> {
        let endpoint = self.endpoint()?;
        if let Endpoint::Ssh { destination } = &endpoint {
            check_ssh_node(destination).await?;
        }
        DockerBackend::connect(endpoint).await
    }
}
