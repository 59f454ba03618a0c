//! A connection to one Docker engine, local or remote, with the API version negotiated.
//!
//! Engines in the field speak older APIs than bollard's default (Debian's Docker 20.10 stops
//! at 1.41), so every connection asks the engine its version before the first real call; that
//! first call is also where "no engine there" is found and explained, naming the endpoint.
//! The container, exec, log and clean-up operations live in files of their own
//! (`container.rs`, `exec.rs`, `logs.rs`, `cleanup.rs`) as further `impl DockerBackend` blocks.

use std::sync::Arc;
use std::time::Duration;

use bollard::{API_DEFAULT_VERSION, Docker};

use super::error::describe;
use super::{BackendError, Endpoint, Owner, RegistryLogins};

/// How long one API request may take to answer (bollard's default; streams are not bound by
/// it, only their first response).
const REQUEST_TIMEOUT_S: u64 = 120;
/// How long the first contact may take before the engine counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A Docker engine gpuflow runs containers on.
#[derive(Clone, Debug)]
pub struct DockerBackend {
    docker: Docker,
    endpoint: Endpoint,
    owner: Owner,
    api_version: String,
    /// Credentials per registry for pulls that bring none of their own (`gpuflow.toml`'s
    /// `[registries]`); none by default.
    logins: Arc<RegistryLogins>,
}

impl DockerBackend {
    /// The engine `DOCKER_HOST` names, or the local socket.
    pub async fn connect_local() -> Result<Self, BackendError> {
        Self::connect(Endpoint::from_env()?).await
    }

    /// Connects to `endpoint` and negotiates the API version.
    #[tracing::instrument(level = "debug", name = "docker_connect", skip_all, fields(endpoint = %endpoint))]
    pub async fn connect(endpoint: Endpoint) -> Result<Self, BackendError> {
        let unreachable = |reason: String| BackendError::Unreachable {
            endpoint: endpoint.to_string(),
            hint: unreachable_hint(&endpoint, &reason),
            reason,
        };
        let client = match &endpoint {
            Endpoint::Unix(path) => {
                if !path.exists() {
                    return Err(unreachable(format!(
                        "there is no socket at `{}`",
                        path.display()
                    )));
                }
                Docker::connect_with_unix(&endpoint.url(), REQUEST_TIMEOUT_S, API_DEFAULT_VERSION)
            }
            Endpoint::Tcp { .. } => {
                Docker::connect_with_http(&endpoint.url(), REQUEST_TIMEOUT_S, API_DEFAULT_VERSION)
            }
            Endpoint::Ssh { .. } => Docker::connect_with_ssh(
                &endpoint.url(),
                REQUEST_TIMEOUT_S,
                API_DEFAULT_VERSION,
                None,
            ),
        }
        .map_err(|e| unreachable(describe(&e)))?;

        tracing::debug!(
            target: "gpuflow::backend::docker_api",
            operation = "version",
            "docker API call (negotiating the API version)"
        );
        let docker = match tokio::time::timeout(CONNECT_TIMEOUT, client.negotiate_version()).await {
            Ok(Ok(docker)) => docker,
            Ok(Err(e)) => return Err(unreachable(describe(&e))),
            Err(_) => {
                return Err(unreachable(format!(
                    "no answer within {}s",
                    CONNECT_TIMEOUT.as_secs()
                )));
            }
        };
        let version = docker.client_version();
        tracing::debug!(
            api_version = %format_args!("{}.{}", version.major_version, version.minor_version),
            "connected"
        );
        Ok(Self {
            api_version: format!("{}.{}", version.major_version, version.minor_version),
            docker,
            endpoint,
            owner: Owner::current(),
            logins: Arc::default(),
        })
    }

    /// The owner recorded on everything this backend creates; by default this process.
    /// Tests set another to play a runner that has died.
    #[must_use]
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.owner = owner;
        self
    }

    /// Pulls from a registry of `logins` that bring no credentials of their own send that
    /// registry's.
    #[must_use]
    pub fn with_logins(mut self, logins: Arc<RegistryLogins>) -> Self {
        self.logins = logins;
        self
    }

    pub(crate) fn logins(&self) -> &RegistryLogins {
        &self.logins
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The API version both sides speak (`1.41` on Docker 20.10).
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The client, for one Docker API call: `operation` (bollard's name for it) and the
    /// container, image, network or exec it is about are logged at debug level first, so
    /// `-vv` shows every call gpuflow makes and on which engine. Only names: a call's body
    /// (a command, an environment) may hold secrets.
    pub(crate) fn api(&self, operation: &'static str, target: &str) -> &Docker {
        tracing::debug!(
            target: "gpuflow::backend::docker_api",
            operation,
            object = target,
            endpoint = %self.endpoint,
            "docker API call"
        );
        &self.docker
    }

    pub(crate) fn endpoint_text(&self) -> String {
        self.endpoint.to_string()
    }

    /// Whether the negotiated API has `DeviceRequests` (1.40, Docker 19.03).
    pub(crate) fn supports_device_requests(&self) -> bool {
        let version = self.docker.client_version();
        (version.major_version, version.minor_version) >= (1, 40)
    }
}

/// What to try, by kind of endpoint and by what went wrong.
fn unreachable_hint(endpoint: &Endpoint, reason: &str) -> String {
    match endpoint {
        Endpoint::Unix(path) => {
            if reason.contains("ermission denied") {
                format!(
                    "your user may not use `{}`: add it to the `docker` group (`sudo usermod -aG \
                     docker $USER`, then log in again)",
                    path.display()
                )
            } else {
                "start the Docker engine (`sudo systemctl start docker`), or point `DOCKER_HOST` \
                 at a running one (e.g. `ssh://user@gpu-node`)"
                    .to_string()
            }
        }
        Endpoint::Tcp { host, port } => format!(
            "check that the engine on `{host}` listens on port {port} (`dockerd -H \
             tcp://0.0.0.0:{port}`) and that the port is reachable from here"
        ),
        Endpoint::Ssh { destination } => format!(
            "check that `ssh {destination} docker version` works without a password prompt: \
             gpuflow logs in with the system `ssh` and runs `docker system dial-stdio` there, so \
             the node needs the docker CLI and your user access to its engine"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_socket_is_unreachable_naming_the_endpoint() {
        let endpoint = Endpoint::parse("unix:///nonexistent/gpuflow-test.sock").unwrap();
        let e = DockerBackend::connect(endpoint).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot reach the Docker engine at `unix:///nonexistent/gpuflow-test.sock`: there is \
             no socket at `/nonexistent/gpuflow-test.sock`"
        );
        assert!(e.hint().unwrap().contains("DOCKER_HOST"));
    }

    #[tokio::test]
    async fn a_closed_tcp_port_is_unreachable_naming_the_endpoint() {
        // Port 9 (discard) on loopback: nothing listens there on a test machine.
        let endpoint = Endpoint::parse("tcp://127.0.0.1:9").unwrap();
        let e = DockerBackend::connect(endpoint).await.unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("cannot reach the Docker engine at `tcp://127.0.0.1:9`: "),
            "{text}"
        );
        // The cause, not bollard's wrapper text.
        assert!(text.contains("Connection refused"), "{text}");
        assert!(!text.contains("hyper legacy client"), "{text}");
        assert!(e.hint().unwrap().contains("port 9"));
    }

    #[test]
    fn permission_problems_suggest_the_docker_group() {
        let endpoint = Endpoint::parse("unix:///var/run/docker.sock").unwrap();
        assert!(
            unreachable_hint(&endpoint, "Permission denied (os error 13)")
                .contains("docker` group")
        );
    }
}
