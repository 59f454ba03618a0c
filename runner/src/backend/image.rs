//! Images on the engine: pulling one that is missing, watched (progress, stalls), and saying
//! why a pull failed.
//!
//! A pull of gpuflow's own test images (`gpuflow-*`) can only fail (they are in no registry),
//! so their error points at `make test-images` rather than at registry access.

use std::time::{Duration, Instant};

use bollard::query_parameters::CreateImageOptionsBuilder;
use futures_util::StreamExt;

use super::error::describe;
use super::pull_progress::PullProgress;
use super::registry_auth::{Refusal, refusal};
use super::{BackendError, DockerBackend, RegistryAuth, registry_of};

impl DockerBackend {
    /// Whether the engine has `image` locally.
    pub async fn has_image(&self, image: &str) -> Result<bool, BackendError> {
        match self.api("inspect_image", image).inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(e) if super::error::status_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(self.engine_error("inspect an image", &e)),
        }
    }

    /// The id (`sha256:…`) of the local image `image` names, or `None` when the engine does
    /// not have it.
    pub async fn local_image_id(&self, image: &str) -> Result<Option<String>, BackendError> {
        match self.api("inspect_image", image).inspect_image(image).await {
            Ok(inspected) => Ok(Some(inspected.id.unwrap_or_else(|| image.to_string()))),
            Err(e) if super::error::status_code(&e) == Some(404) => Ok(None),
            Err(e) => Err(self.engine_error("inspect an image", &e)),
        }
    }

    /// The id (`sha256:…`) of the local image `image` names: what a tag points at now, so a
    /// server key changes when the image is rebuilt under the same tag.
    pub async fn image_id(&self, image: &str) -> Result<String, BackendError> {
        let inspected = self
            .api("inspect_image", image)
            .inspect_image(image)
            .await
            .map_err(|e| self.engine_error("inspect an image", &e))?;
        Ok(inspected.id.unwrap_or_else(|| image.to_string()))
    }

    /// The id (`sha256:…`) of the local image `image` and its entrypoint (empty for none): what
    /// a container of it runs before its command.
    pub async fn image_entrypoint(
        &self,
        image: &str,
    ) -> Result<(String, Vec<String>), BackendError> {
        let inspected = self
            .api("inspect_image", image)
            .inspect_image(image)
            .await
            .map_err(|e| self.engine_error("inspect an image", &e))?;
        let entrypoint = inspected
            .config
            .and_then(|c| c.entrypoint)
            .unwrap_or_default();
        Ok((
            inspected.id.unwrap_or_else(|| image.to_string()),
            entrypoint,
        ))
    }

    /// What the local image `image` says of itself ([`ImageFacts`]).
    pub async fn image_facts(&self, image: &str) -> Result<ImageFacts, BackendError> {
        let inspected = self
            .api("inspect_image", image)
            .inspect_image(image)
            .await
            .map_err(|e| self.engine_error("inspect an image", &e))?;
        let config = inspected.config.unwrap_or_default();
        Ok(ImageFacts {
            id: inspected.id.unwrap_or_else(|| image.to_string()),
            repo_digests: inspected.repo_digests.unwrap_or_default(),
            labels: config.labels.unwrap_or_default().into_iter().collect(),
            env: config.env.unwrap_or_default(),
        })
    }

    /// The digest (`sha256:…`) the registry of `image` gives for it now: of its manifest, or
    /// of its index for a multi-platform image, as a pull of it records. Asked through the
    /// engine (`/distribution/NAME/json`), so the engine's own way to the registry is used,
    /// its mirrors and proxies included; nothing is pulled.
    pub async fn registry_digest(&self, image: &str) -> Result<String, BackendError> {
        let found = self
            .api("inspect_registry_image", image)
            .inspect_registry_image(image, None)
            .await
            .map_err(|e| {
                self.engine_error(&format!("ask the registry what `{image}` names"), &e)
            })?;
        found
            .descriptor
            .digest
            .filter(|d| d.starts_with("sha256:"))
            .ok_or_else(|| BackendError::Engine {
                operation: format!("ask the registry what `{image}` names"),
                endpoint: self.endpoint_text(),
                message: "the answer named no sha256 digest".into(),
            })
    }

    /// Pulls `image` from its registry, nothing shown, with the credentials the backend has for
    /// that registry (if any); a pull that makes no progress for [`PULL_STALL`] fails.
    pub async fn pull_image(&self, image: &str) -> Result<(), BackendError> {
        self.pull_image_as(image, None).await
    }

    /// [`Self::pull_image`] with `auth` when given, else the backend's login for the registry.
    pub async fn pull_image_as(
        &self,
        image: &str,
        auth: Option<&RegistryAuth>,
    ) -> Result<(), BackendError> {
        self.pull_image_watched(image, auth, &mut |_, _, _| {})
            .await
            .map(|_| ())
    }

    /// Pulls `image`, handing `on` what is done so far at most every [`PULL_REPORT_EVERY`]
    /// and once at the end (`true`), with the time since the pull began. The registry is sent
    /// `auth`, else the backend's login for it ([`Self::with_logins`]), else nothing; one that
    /// refuses them (or asks for a login) fails the pull at once, saying what it answered. A
    /// pull whose progress does not change for [`pull_stall`] fails, naming the layer it
    /// stopped at. A failure of the connection to the registry (refused, reset, cut short, a
    /// 5xx) is tried again, [`PULL_TRIES`] times in all, after 2, then 4 seconds, each retry
    /// said in the progress; the engine keeps the layers it finished, so a retry resumes.
    pub async fn pull_image_watched(
        &self,
        image: &str,
        auth: Option<&RegistryAuth>,
        on: &mut (dyn FnMut(&PullProgress, Duration, bool) + Send),
    ) -> Result<PullProgress, BackendError> {
        let auth = self.auth_for(image, auth)?;
        let started = Instant::now();
        let mut retry = None;
        for attempt in 1..=PULL_TRIES {
            let pulled = self
                .pull_once(image, auth.as_ref(), started, retry.take(), on)
                .await;
            // A refused login is the registry's answer, not the connection's: never retried.
            if let Err(BackendError::ImagePullFailed { reason, .. }) = &pulled
                && let Some(refused) = refusal(reason, auth.is_some())
            {
                return Err(self.login_error(image, refused, auth.as_ref()));
            }
            match pulled {
                Err(BackendError::ImagePullFailed { reason, .. })
                    if attempt < PULL_TRIES && transient(&reason) =>
                {
                    let wait = Duration::from_secs(2 << (attempt - 1));
                    let said = PullProgress::new(Some((attempt + 1, reason.clone())));
                    on(&said, started.elapsed(), false);
                    tokio::time::sleep(wait).await;
                    retry = Some((attempt + 1, reason));
                }
                Err(BackendError::ImagePullFailed {
                    image,
                    endpoint,
                    reason,
                }) if attempt > 1 => {
                    return Err(BackendError::ImagePullFailed {
                        image,
                        endpoint,
                        reason: format!("{reason} (tried {attempt} times)"),
                    });
                }
                other => return other,
            }
        }
        unreachable!("the last try returns")
    }

    /// The credentials a pull of `image` sends: `given`, else the backend's login for its
    /// registry; an error when that login cannot be made (its secret was not given).
    fn auth_for(
        &self,
        image: &str,
        given: Option<&RegistryAuth>,
    ) -> Result<Option<RegistryAuth>, BackendError> {
        if let Some(auth) = given {
            return Ok(Some(auth.clone()));
        }
        match self.logins().for_image(image) {
            None => Ok(None),
            Some(Ok(auth)) => Ok(Some(auth.clone())),
            Some(Err(why)) => Err(BackendError::RegistryCredentialsMissing {
                image: image.to_string(),
                registry: registry_of(image),
                why: why.clone(),
            }),
        }
    }

    /// The registry's refusal of a pull of `image`, as the error that names it.
    fn login_error(
        &self,
        image: &str,
        refused: Refusal,
        auth: Option<&RegistryAuth>,
    ) -> BackendError {
        let registry = registry_of(image);
        match auth {
            Some(auth) => BackendError::RegistryLoginRefused {
                image: image.to_string(),
                registry,
                answer: refused.answer,
                status: refused.status,
                given_by: auth.given_by.clone(),
            },
            None => BackendError::RegistryLoginRequired {
                image: image.to_string(),
                registry,
                answer: refused.answer,
                status: refused.status,
            },
        }
    }

    /// One try of [`Self::pull_image_watched`].
    async fn pull_once(
        &self,
        image: &str,
        auth: Option<&RegistryAuth>,
        started: Instant,
        retry: Option<(u32, String)>,
        on: &mut (dyn FnMut(&PullProgress, Duration, bool) + Send),
    ) -> Result<PullProgress, BackendError> {
        let (repository, tag) = split_reference(image);
        let options = CreateImageOptionsBuilder::new()
            .from_image(repository)
            .tag(tag)
            .build();
        // The credentials go in the request's `X-Registry-Auth` header only.
        let credentials = auth.map(|a| a.to_docker(&registry_of(image)));
        let mut stream =
            self.api("create_image", image)
                .create_image(Some(options), None, credentials);
        let stall = pull_stall();
        let mut progress = PullProgress::new(retry);
        let mut changed_at = Instant::now();
        let mut reported_at: Option<Instant> = None;
        loop {
            let left = stall.saturating_sub(changed_at.elapsed());
            let item = match tokio::time::timeout(left, stream.next()).await {
                Ok(Some(item)) => item,
                Ok(None) => break,
                Err(_) => {
                    return Err(BackendError::ImagePullStalled {
                        image: image.to_string(),
                        endpoint: self.endpoint_text(),
                        stalled: stall,
                        at: progress
                            .stuck_layer()
                            .unwrap_or_else(|| "before the first layer".into()),
                        done: progress.line(started.elapsed()),
                    });
                }
            };
            let info = match item {
                Ok(info) => info,
                Err(e) => {
                    return Err(BackendError::ImagePullFailed {
                        image: image.to_string(),
                        endpoint: self.endpoint_text(),
                        reason: describe(&e),
                    });
                }
            };
            if let Some(reason) = info
                .error_detail
                .as_ref()
                .and_then(|d| d.message.clone())
                .filter(|m| !m.is_empty())
            {
                return Err(BackendError::ImagePullFailed {
                    image: image.to_string(),
                    endpoint: self.endpoint_text(),
                    reason,
                });
            }
            if progress.take(&info) {
                changed_at = Instant::now();
                if reported_at.is_none_or(|t| t.elapsed() >= PULL_REPORT_EVERY) {
                    reported_at = Some(Instant::now());
                    on(&progress, started.elapsed(), false);
                }
            }
        }
        on(&progress, started.elapsed(), true);
        Ok(progress)
    }
}

/// What a local image says of itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageFacts {
    /// Its id (`sha256:…` of its config).
    pub id: String,
    /// `repository@sha256:…` for each repository it was pulled from or pushed to; empty for an
    /// image built here and never pushed.
    pub repo_digests: Vec<String>,
    /// Its config's labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Its config's environment, `NAME=VALUE`.
    pub env: Vec<String>,
}

/// How many times a pull is tried when the connection to the registry fails.
pub const PULL_TRIES: u32 = 3;

/// Whether the engine's reason for a failed pull is the connection's, not the image's: worth
/// another try. A missing tag, a refused login or a full disk is not.
fn transient(reason: &str) -> bool {
    let reason = reason.to_ascii_lowercase();
    [
        "connection refused",
        "connection reset",
        "unexpected eof",
        "broken pipe",
        "i/o timeout",
        "tls handshake timeout",
        "502 bad gateway",
        "503 service unavailable",
        "504 gateway timeout",
    ]
    .iter()
    .any(|t| reason.contains(t))
}

/// How often a watched pull reports: live views redraw at this rate, `--plain` prints a line.
pub const PULL_REPORT_EVERY: Duration = Duration::from_secs(1);

/// A pull whose progress has not changed for this long fails (`GPUFLOW_PULL_STALL`, a duration
/// such as `90s` or `10m`, changes it): long enough for a registry under load, short enough
/// that a dead connection is not mistaken for a large image.
pub const PULL_STALL: Duration = Duration::from_secs(300);

/// [`PULL_STALL`], or `GPUFLOW_PULL_STALL` when it reads as a duration.
pub fn pull_stall() -> Duration {
    std::env::var("GPUFLOW_PULL_STALL")
        .ok()
        .and_then(|v| humantime::parse_duration(v.trim()).ok())
        .filter(|d| !d.is_zero())
        .unwrap_or(PULL_STALL)
}

/// `registry:5000/name:tag` → (`registry:5000/name`, `tag`); no tag means `latest` (without a
/// tag the engine would pull every tag); a digest is passed as the tag, as the API expects.
fn split_reference(image: &str) -> (&str, &str) {
    if let Some((repository, digest)) = image.split_once('@') {
        return (repository, digest);
    }
    let name_start = image.rfind('/').map_or(0, |i| i + 1);
    match image[name_start..].rfind(':') {
        Some(colon) => (
            &image[..name_start + colon],
            &image[name_start + colon + 1..],
        ),
        None => (image, "latest"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("busybox", "busybox", "latest" ; "no tag")]
    #[test_case("gpuflow-base:test", "gpuflow-base", "test" ; "tag")]
    #[test_case("localhost:5000/team/sglang", "localhost:5000/team/sglang", "latest" ; "registry port is not a tag")]
    #[test_case("localhost:5000/sglang:v0.5", "localhost:5000/sglang", "v0.5" ; "registry port and tag")]
    #[test_case("sglang@sha256:abcd", "sglang", "sha256:abcd" ; "digest")]
    fn splits(image: &str, repository: &str, tag: &str) {
        assert_eq!(split_reference(image), (repository, tag));
    }

    #[test_case("Get \"http://127.0.0.1:5000/v2/\": dial tcp 127.0.0.1:5000: connect: connection refused", true ; "registry gone")]
    #[test_case("unexpected EOF", true ; "cut short")]
    #[test_case("received unexpected HTTP status: 503 Service Unavailable", true ; "unavailable")]
    #[test_case("manifest for 127.0.0.1:5000/big:2 not found: manifest unknown: manifest unknown", false ; "missing tag")]
    #[test_case("unauthorized: authentication required", false ; "refused login")]
    #[test_case("write /var/lib/docker/tmp/x: no space left on device", false ; "full disk")]
    fn retried_only_for_the_connection(reason: &str, retried: bool) {
        assert_eq!(transient(reason), retried);
    }
}
