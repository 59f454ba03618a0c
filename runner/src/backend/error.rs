//! The one error type of the backend, with a hint per case.
//!
//! bollard's errors say what HTTP or the socket did, not what the user should do; every engine
//! failure names the operation and the endpoint ([`BackendError::Engine`]), and
//! the cases a user can act on (no engine, no NVIDIA runtime, an image that cannot be pulled, a
//! name in use) get their own variant and a hint.

use crate::diag::Diagnostic;

/// Why a backend operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// `DOCKER_HOST` (or a host file entry) is not an endpoint gpuflow can use.
    #[error("invalid Docker endpoint `{value}`: {reason}")]
    InvalidEndpoint {
        value: String,
        reason: String,
        hint: String,
    },
    /// Nothing answered at the endpoint, or it did not speak the Docker API.
    #[error("cannot reach the Docker engine at `{endpoint}`: {reason}")]
    Unreachable {
        endpoint: String,
        reason: String,
        hint: String,
    },
    /// GPUs were requested from an engine that has no NVIDIA runtime (the created container
    /// has already been removed).
    #[error("the Docker engine at `{endpoint}` cannot give containers GPUs: {detail}")]
    NvidiaRuntimeMissing { endpoint: String, detail: String },
    /// The engine is older than the GPU request API (`DeviceRequests`, API 1.40).
    #[error(
        "the Docker engine at `{endpoint}` speaks API {version}, but GPU requests need API 1.40 or later"
    )]
    ApiTooOldForGpus { endpoint: String, version: String },
    /// The image is not on the engine and pulling it failed.
    #[error("image `{image}` is not on the engine at `{endpoint}` and pulling it failed: {reason}")]
    ImagePullFailed {
        image: String,
        endpoint: String,
        reason: String,
    },
    /// The registry refused the credentials the pull sent: its words, and the HTTP status they
    /// stand for.
    #[error(
        "the registry `{registry}` refused the credentials for `{image}`: {answer} (HTTP {status})"
    )]
    RegistryLoginRefused {
        image: String,
        registry: String,
        answer: String,
        status: u16,
        /// Where the credentials were given (`the step's `credentials:``, `gpuflow.toml:3:1`).
        given_by: String,
    },
    /// The registry asks for a login, and the pull had no credentials to send.
    #[error(
        "the registry `{registry}` asks for a login to pull `{image}`: {answer} (HTTP {status})"
    )]
    RegistryLoginRequired {
        image: String,
        registry: String,
        answer: String,
        status: u16,
    },
    /// `gpuflow.toml` gives the registry credentials whose password cannot be had (its secret
    /// was not given to the run).
    #[error("no credentials for the registry `{registry}` to pull `{image}`: {why}")]
    RegistryCredentialsMissing {
        image: String,
        registry: String,
        why: String,
    },
    /// A pull whose progress did not change for the stall time.
    #[error(
        "pulling `{image}` on {endpoint} made no progress for {}: it stopped at {at}, after {done}",
        humantime::format_duration(*stalled)
    )]
    ImagePullStalled {
        image: String,
        endpoint: String,
        stalled: std::time::Duration,
        at: String,
        done: String,
    },
    /// `NVIDIA_VISIBLE_DEVICES` in the container's env disagrees with its GPU request.
    #[error(
        "`NVIDIA_VISIBLE_DEVICES={value}` in the container's env conflicts with its GPU request ({requested})"
    )]
    VisibleDevicesConflict { value: String, requested: String },
    /// A label under gpuflow's own prefix, which clean-up relies on.
    #[error("label `{key}` is reserved for gpuflow's own bookkeeping")]
    ReservedLabel { key: String },
    /// An environment variable name Docker would misread (empty or containing `=`).
    #[error("environment variable name `{name}` is invalid")]
    InvalidEnvName { name: String },
    /// A bind mount's host path does not exist where the engine runs. Docker refuses it (the
    /// volumes are `Mounts`) rather than creating it empty and owned by root.
    #[error(
        "the host path `{path}`{} does not exist on the Docker engine's host (`{endpoint}`)",
        target.as_ref().map(|t| format!(" to mount at `{t}`")).unwrap_or_default()
    )]
    BindSourceMissing {
        path: String,
        /// Where it was to be mounted, when the spec has that path (Docker names it as given).
        target: Option<String>,
        endpoint: String,
    },
    /// Another container already has the requested name.
    #[error("a container named `{name}` already exists on the engine at `{endpoint}`")]
    NameInUse { name: String, endpoint: String },
    /// The container is gone (removed, or never created).
    #[error("container `{container}` does not exist")]
    NoSuchContainer { container: String },
    /// An exec was asked of a container that has stopped.
    #[error("container `{container}` is not running")]
    NotRunning { container: String },
    /// The container was created but did not start (it has been removed again).
    #[error("container `{container}` could not start: {reason}")]
    StartFailed { container: String, reason: String },
    /// Any other answer of the engine.
    #[error("failed to {operation} on the Docker engine at `{endpoint}`: {message}")]
    Engine {
        operation: String,
        endpoint: String,
        message: String,
    },
}

impl BackendError {
    /// A line saying how to fix it, for the diagnostic's `help:`.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::InvalidEndpoint { hint, .. } | Self::Unreachable { hint, .. } => {
                Some(hint.clone())
            }
            Self::NvidiaRuntimeMissing { .. } => Some(
                "install the NVIDIA Container Toolkit on that host (`nvidia-container-toolkit`), \
                 run `nvidia-ctk runtime configure --runtime=docker` and restart Docker; or run \
                 the job without `gpus`"
                    .into(),
            ),
            Self::ApiTooOldForGpus { .. } => {
                Some("upgrade Docker on that host to 19.03 or later".into())
            }
            Self::ImagePullFailed { image, .. } => Some(pull_hint(image)),
            Self::RegistryLoginRefused { given_by, .. } => Some(format!(
                "check the username and the password {given_by} gives: a password written as \
                 `${{{{ secrets.NAME }}}}` (or a `password-secret`) is the value given with \
                 `--secret NAME` or `--secrets-file`"
            )),
            Self::RegistryLoginRequired { registry, .. } => Some(format!(
                "give the step `credentials: {{ username: …, password: ${{{{ secrets.NAME }}}} }}`, or \
                 give the registry a table in gpuflow.toml (`[registries.\"{registry}\"]` with \
                 `username` and `password-secret = \"NAME\"`), and run with `--secret NAME`"
            )),
            Self::RegistryCredentialsMissing { .. } => Some(
                "give the secret to the run: `--secret NAME` (read from the environment \
                 variable NAME) or a line `NAME=…` of `--secrets-file`"
                    .into(),
            ),
            Self::ImagePullStalled { .. } => Some(
                "check that the registry answers (`curl https://REGISTRY/v2/`) and the node's network; \
                 a slow registry may need a longer stall time: GPUFLOW_PULL_STALL=15m"
                    .into(),
            ),
            Self::VisibleDevicesConflict { .. } => Some(
                "remove `NVIDIA_VISIBLE_DEVICES` from `env`: gpuflow sets the devices from \
                 `gpus`, and the NVIDIA runtime would otherwise expose other GPUs than those \
                 allocated to the job"
                    .into(),
            ),
            Self::ReservedLabel { .. } => {
                Some("use a label outside the `dev.gpuflow.` prefix".into())
            }
            Self::InvalidEnvName { .. } => {
                Some("names must be non-empty and must not contain `=` (e.g. `MODEL_PATH`)".into())
            }
            Self::BindSourceMissing { path, .. } => Some(format!(
                "create it on that host (`mkdir -p {path}`), or give the path of the folder that \
                 holds the files; gpuflow does not let Docker create it, empty and owned by root"
            )),
            Self::NameInUse { name, .. } => Some(format!(
                "choose another name, or remove the old container (`docker rm -f {name}`)"
            )),
            Self::NotRunning { container } => Some(format!(
                "the container stopped before this step; its log says why (`docker logs {container}`)"
            )),
            Self::NoSuchContainer { .. } | Self::StartFailed { .. } | Self::Engine { .. } => None,
        }
    }

    /// The error as a diagnostic with no place in a file.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let diagnostic = Diagnostic::unlocated(self.to_string());
        match self.hint() {
            Some(hint) => diagnostic.hint(hint),
            None => diagnostic,
        }
    }
}

/// gpuflow's own test images are never in a registry: they are built by `make test-images`.
fn pull_hint(image: &str) -> String {
    let name = image.rsplit('/').next().unwrap_or(image);
    if name.starts_with("gpuflow-") {
        format!("`{image}` is one of gpuflow's test images: build it with `make test-images`")
    } else {
        format!(
            "check the image name and that the host can reach its registry (a private one \
             takes the step's `credentials:` or gpuflow.toml's `[registries]`: a `docker login` \
             on the host is not sent), or build/load it on the host (`docker build -t {image} …` \
             / `docker load`)"
        )
    }
}

/// The engine's own message for a server error. Otherwise the last two causes of bollard's
/// error: its top level is a wrapper ("Error in the hyper legacy client: client error
/// (Connect)"), the cause says what happened ("tcp connect error: Connection refused").
pub(crate) fn describe(e: &bollard::errors::Error) -> String {
    use bollard::errors::Error as E;
    match e {
        E::DockerResponseServerError { message, .. } => message.trim().to_string(),
        E::DockerStreamError { error } => error.trim().to_string(),
        other => {
            let mut chain = vec![other.to_string()];
            let mut source = std::error::Error::source(other);
            while let Some(cause) = source {
                chain.push(cause.to_string());
                source = cause.source();
            }
            let mut text = String::new();
            for part in &chain[chain.len().saturating_sub(2)..] {
                if !text.contains(part.as_str()) {
                    if !text.is_empty() {
                        text.push_str(": ");
                    }
                    text.push_str(part);
                }
            }
            text
        }
    }
}

/// The HTTP status of an engine answer, when the engine answered.
pub(crate) fn status_code(e: &bollard::errors::Error) -> Option<u16> {
    match e {
        bollard::errors::Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_hint_names_make_test_images_for_gpuflow_images_only() {
        assert!(pull_hint("gpuflow-base:test").contains("make test-images"));
        assert!(pull_hint("localhost:5000/gpuflow-sim:test").contains("make test-images"));
        assert!(!pull_hint("lmsysorg/sglang:latest").contains("make test-images"));
    }

    #[test]
    fn server_errors_show_the_engines_message() {
        let e = bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            message: "No such image: x:y\n".into(),
        };
        assert_eq!(describe(&e), "No such image: x:y");
        assert_eq!(status_code(&e), Some(404));
    }

    #[test]
    fn every_user_facing_case_says_how_to_fix_it() {
        let e = BackendError::NvidiaRuntimeMissing {
            endpoint: "unix:///var/run/docker.sock".into(),
            detail: "x".into(),
        };
        let d = e.to_diagnostic();
        assert!(
            d.message
                .starts_with("the Docker engine at `unix:///var/run/docker.sock`")
        );
        assert!(d.hints[0].contains("NVIDIA Container Toolkit"));
    }
}
