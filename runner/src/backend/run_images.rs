//! The images of one run: each reference (`lmsysorg/sglang:latest`) is resolved once per
//! engine to the local image id it names at that moment, and every container of the run is
//! created from that id. A tag that moves while the run goes on (a `docker pull` by a
//! colleague, a push to the registry and another run's pull) changes nothing for this run:
//! its cells all measure one image.
//!
//! Resolving may pull: `pull: missing` pulls what the engine lacks, `always` pulls once per
//! run (the first to ask pulls, later ones share that pull), `never` refuses what the engine
//! lacks. Pulls run a bounded number at once ([`pulls_at_once`]), so preflight can start every
//! image a run needs as soon as the plan is known without flooding the node's link; one
//! reference asked for by several jobs at once is pulled once, the others wait for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OnceCell, Semaphore};

use super::pull_progress::PullProgress;
use super::{BackendError, DockerBackend, RegistryAuth};

/// When the engine lacks an image: `pull:` of `start-container`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PullPolicy {
    /// Pull it if the engine does not have it (the default).
    #[default]
    Missing,
    /// Pull it at the run's first use, even if the engine has it.
    Always,
    /// Never pull: an image the engine lacks is an error.
    Never,
}

impl PullPolicy {
    /// `pull:` as written (`missing`, `always`, `never`); anything else is `missing`, as the
    /// step's input is validated where it is read.
    pub fn from_input(text: Option<&str>) -> Self {
        match text {
            Some("always") => Self::Always,
            Some("never") => Self::Never,
            _ => Self::Missing,
        }
    }
}

/// What a reference was resolved to for the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The local image id (`sha256:…`): what the run's containers are created from.
    pub id: String,
}

/// Why a reference could not be resolved; kept (and cloned to everyone who asks) so the
/// run's other users of the image get the same answer without trying again.
#[derive(Clone, Debug)]
pub enum Unresolved {
    /// `pull: never`, and the engine does not have it.
    NotOnEngine,
    /// The pull failed: the engine's or registry's reason, with its help where there is one.
    PullFailed(Arc<BackendError>),
    /// The engine's disk has no room for the download ([`super::pull_room`]): said with
    /// the numbers, nothing pulled.
    NoRoom(String),
    /// A pinned digest ([`ImagePins`]) the run cannot have: both digests and the fix.
    Pinned(String),
    /// The engine could not be asked.
    Engine(String),
}

/// The digests images are pinned to (`gpuflow.lock`'s `[[image]]` tables): a pinned image is
/// pulled and run as `repository@digest`, whatever its tag names now.
pub trait ImagePins: Send + Sync {
    /// `repository@sha256:…` for a pinned `image`; `None` when it is not pinned.
    fn pinned_reference(&self, image: &str) -> Option<String>;
    /// Why the pinned `image` cannot be had (`why`: the engine's reason; `now`: the digest the
    /// tag names in the registry now, when known).
    fn refusal(&self, image: &str, now: Option<&str>, why: &str) -> String;
}

impl Unresolved {
    /// One sentence naming `image`.
    pub fn describe(&self, image: &str) -> String {
        match self {
            Self::NotOnEngine => {
                format!("the image `{image}` is not on the engine and `pull: never` was asked")
            }
            Self::PullFailed(e) => {
                let mut m = format!(
                    "the image `{image}` is not on the engine and could not be pulled: {e}"
                );
                if let Some(h) = e.hint() {
                    m.push_str(&format!(" (help: {h})"));
                }
                m
            }
            Self::NoRoom(text) | Self::Pinned(text) | Self::Engine(text) => text.clone(),
        }
    }
}

type Slot = Arc<OnceCell<Result<Resolved, Unresolved>>>;

/// The run's resolved images, per engine.
pub struct RunImages {
    /// (engine, reference) → its resolution, made once.
    slots: Mutex<HashMap<(String, String), Slot>>,
    /// Pulls at once, over all engines of the run.
    pulls: Semaphore,
    pins: Option<Arc<dyn ImagePins>>,
}

impl Default for RunImages {
    fn default() -> Self {
        Self::new(pulls_at_once())
    }
}

/// How many pulls a run makes at once: [`PULLS_AT_ONCE`], or `GPUFLOW_PULLS_AT_ONCE`.
pub fn pulls_at_once() -> usize {
    std::env::var("GPUFLOW_PULLS_AT_ONCE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(PULLS_AT_ONCE)
}

/// Pulls a run makes at once by default: each pull already fetches three layers at a time
/// (the engine's own limit), so a few images together fill a node's link without making
/// every pull crawl.
pub const PULLS_AT_ONCE: usize = 3;

impl RunImages {
    /// The refusal of the pinned `image`, with what its tag names in the registry now.
    async fn pin_refusal(&self, docker: &DockerBackend, image: &str, why: &str) -> Unresolved {
        let now = docker.registry_digest(image).await.ok();
        let pins = self
            .pins
            .as_ref()
            .expect("only pinned images are refused as pinned");
        Unresolved::Pinned(pins.refusal(image, now.as_deref(), why))
    }

    pub fn new(pulls_at_once: usize) -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
            pulls: Semaphore::new(pulls_at_once.max(1)),
            pins: None,
        }
    }

    /// Pulls and runs pinned images by their pinned digests.
    pub fn with_pins(mut self, pins: Arc<dyn ImagePins>) -> Self {
        self.pins = Some(pins);
        self
    }

    /// Resolves `image` on `docker` for the run: the first call decides (pulling as `policy`
    /// says, handing `on` the pull's progress), every later call gets its answer. A pull waits
    /// for its turn among the run's pulls.
    pub async fn resolve(
        &self,
        docker: &DockerBackend,
        image: &str,
        (policy, auth): (PullPolicy, Option<&RegistryAuth>),
        on: &mut (dyn FnMut(&PullProgress, Duration, bool) + Send),
    ) -> Result<Resolved, Unresolved> {
        let slot = self.slot(docker, image);
        slot.get_or_init(|| self.first_resolve(docker, image, (policy, auth), on))
            .await
            .clone()
    }

    fn slot(&self, docker: &DockerBackend, image: &str) -> Slot {
        let key = (docker.endpoint_text(), image.to_string());
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(key).or_default().clone()
    }

    async fn first_resolve(
        &self,
        docker: &DockerBackend,
        image: &str,
        (policy, auth): (PullPolicy, Option<&RegistryAuth>),
        on: &mut (dyn FnMut(&PullProgress, Duration, bool) + Send),
    ) -> Result<Resolved, Unresolved> {
        let engine = |e: BackendError| Unresolved::Engine(e.to_string());
        let pinned = self.pins.as_ref().and_then(|p| p.pinned_reference(image));
        // A pinned image is looked for, pulled and run by its digest only.
        let reference = pinned.as_deref().unwrap_or(image);
        let present = docker.local_image_id(reference).await.map_err(engine)?;
        match (present, policy) {
            (Some(id), PullPolicy::Missing | PullPolicy::Never) => {
                return Ok(Resolved { id });
            }
            (None, PullPolicy::Never) if pinned.is_some() => {
                let why = "the engine does not have it and `pull: never` was asked";
                return Err(self.pin_refusal(docker, image, why).await);
            }
            (None, PullPolicy::Never) => return Err(Unresolved::NotOnEngine),
            _ => {}
        }
        let _turn = self.pulls.acquire().await.ok();
        if let super::pull_room::Room::Short(text) = docker.room_for_pull(reference).await {
            return Err(Unresolved::NoRoom(text));
        }
        let pulled = docker.pull_image_watched(reference, auth, on).await;
        match pulled {
            Err(e) if pinned.is_some() => {
                return Err(self.pin_refusal(docker, image, &e.to_string()).await);
            }
            Err(e) => return Err(Unresolved::PullFailed(Arc::new(e))),
            Ok(_) => {}
        }
        let id = docker.local_image_id(reference).await.map_err(engine)?;
        let id = id.ok_or_else(|| {
            Unresolved::Engine(format!(
                "the image `{reference}` was pulled, but the engine does not have it"
            ))
        })?;
        Ok(Resolved { id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_reads_as_written() {
        assert_eq!(PullPolicy::from_input(Some("always")), PullPolicy::Always);
        assert_eq!(PullPolicy::from_input(Some("never")), PullPolicy::Never);
        assert_eq!(PullPolicy::from_input(Some("missing")), PullPolicy::Missing);
        assert_eq!(PullPolicy::from_input(None), PullPolicy::Missing);
    }

    #[test]
    fn an_unresolved_image_is_named_with_its_help() {
        let failed = Unresolved::PullFailed(Arc::new(BackendError::ImagePullFailed {
            image: "r/x:1".into(),
            endpoint: "unix:///var/run/docker.sock".into(),
            reason: "manifest unknown".into(),
        }));
        assert!(
            failed
                .describe("r/x:1")
                .starts_with("the image `r/x:1` is not on the engine and could not be pulled: "),
            "{failed:?}"
        );
        assert!(
            Unresolved::NotOnEngine
                .describe("r/x:1")
                .contains("`pull: never`")
        );
    }
}
