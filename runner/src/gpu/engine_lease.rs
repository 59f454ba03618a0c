//! GPU leases that every client of one Docker engine sees, taken on top of the lease folder's
//! `flock` ([`super::lease`]), which only the processes of one machine share. Two laptops
//! driving one node over `ssh://` (or a laptop and the node's own worker) each have their own
//! lease folder; the node's engine is what they have in common.
//!
//! A GPU is held on the engine by a container named after it, `gpuflow-lease-<UUID>`: the
//! engine refuses a second container of a name (409 Conflict), so taking one is atomic for
//! all its clients. The name holds no host key: each client names the engine its own way
//! (`ssh://me@node`, `ssh://bob@node`, `local` on the node), the engine is the same. The
//! container runs a loop that exits once its heartbeat file is older than the staleness limit
//! ([`STALE_ENV`], 30 s by default); the holder touches the file every third of that
//! ([`EngineHold`], a task of its own) and removes the container when it lets go. A holder
//! that dies stops beating: its container exits (and the engine removes it) within the limit.
//!
//! A claimant that finds the name taken looks at that container: one that is not running (or
//! a created one never started, long after), or whose holder is a runner of this machine that
//! is gone (its runner lock is free), is stale: removed, and the name tried once more. A live
//! one means taken, and the job waits as for a GPU whose lock file is held.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio::sync::OnceCell;
use tokio::task::JoinHandle;

use super::warm_claim::now_secs;
use crate::backend::{BackendError, DockerBackend, LeaseContainer, LeaseState, RunLabels};

/// The environment variable turning engine leases on (`1`) or off (`0`) for hosts whose
/// `gpuflow.toml` entry does not say (`engine-leases`).
pub const ENGINE_LEASES_ENV: &str = "GPUFLOW_ENGINE_LEASES";
/// The environment variable giving the staleness limit in whole seconds (3 or more).
pub const STALE_ENV: &str = "GPUFLOW_ENGINE_LEASE_STALE_SECS";
/// How long a lease container lives on without a heartbeat, unless [`STALE_ENV`] says.
pub const DEFAULT_STALE: Duration = Duration::from_secs(30);
/// The heartbeat file inside a lease container.
const HEARTBEAT_FILE: &str = "/gpuflow-heartbeat";
/// A created container that never started is a claimant's that died in between, once it is
/// this many staleness limits old (by this machine's clock, which may differ the engine's).
const CREATED_GRACE: u64 = 10;
/// How long one listing of the engine's lease containers answers [`EngineLeases::held`]: jobs
/// waiting for GPUs look every 250 ms each, and over ssh one listing a second serves them all.
/// An answer that is late only delays (taking a GPU is what is atomic); this process's own
/// takes and releases make the next answer fresh.
const SEEN_FOR: Duration = Duration::from_secs(1);
/// Every lease container's name starts so.
pub const NAME_PREFIX: &str = "gpuflow-lease-";

/// Who takes a lease: what its lock files and lease containers say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub run_id: String,
    /// The job run, as the run shows it (`bench (2)`).
    pub job: String,
}

impl Holder {
    pub fn new(run_id: impl Into<String>, job: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            job: job.into(),
        }
    }

    /// `pid 4711, run …, bench (2)`.
    pub fn text(&self) -> String {
        super::lease::holder_text(&self.run_id, &self.job)
    }
}

/// How one host's GPUs are leased on its engine.
#[derive(Debug)]
pub struct EngineLeases {
    image: String,
    stale: Duration,
    /// Filled once the image was found on the engine.
    image_found: OnceCell<()>,
    seen: Seen,
}

/// The last answer of [`EngineLeases::held`] and when it was had, shared with the holds it
/// makes (their releases make it out of date).
#[derive(Clone, Debug, Default)]
struct Seen(Arc<Mutex<Option<Answer>>>);

/// Who holds which GPU (by UUID), and when that was seen.
type Answer = (Instant, HashMap<String, String>);

impl Seen {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Answer>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The last answer, when it is younger than [`SEEN_FOR`].
    fn fresh(&self) -> Option<HashMap<String, String>> {
        self.slot()
            .as_ref()
            .filter(|(at, _)| at.elapsed() < SEEN_FOR)
            .map(|(_, held)| held.clone())
    }

    fn put(&self, held: HashMap<String, String>) {
        *self.slot() = Some((Instant::now(), held));
    }

    fn forget(&self) {
        *self.slot() = None;
    }
}

impl EngineLeases {
    /// Lease containers of `image`, stale after [`STALE_ENV`] seconds without a heartbeat.
    pub fn new(image: impl Into<String>) -> Self {
        Self::with_stale(image, stale_from_env())
    }

    pub fn with_stale(image: impl Into<String>, stale: Duration) -> Self {
        Self {
            image: image.into(),
            stale,
            image_found: OnceCell::new(),
            seen: Seen::default(),
        }
    }

    pub fn image(&self) -> &str {
        &self.image
    }

    /// The GPUs held on the engine now, by UUID, each with who holds it (stale lease containers
    /// hold nothing).
    pub async fn held(&self, docker: &DockerBackend) -> Result<HashMap<String, String>, String> {
        if let Some(held) = self.seen.fresh() {
            return Ok(held);
        }
        let now = now_secs();
        let listed = docker
            .lease_containers(None)
            .await
            .map_err(|e| unusable(&e))?;
        let held: HashMap<String, String> = listed
            .into_iter()
            .filter(|c| !self.is_stale(c, now))
            .map(|c| (c.gpu().to_string(), describe(&c, now)))
            .collect();
        self.seen.put(held.clone());
        Ok(held)
    }

    /// Takes every GPU of `uuids` on the engine, or none: `Ok(None)` when one of them is held
    /// there by someone else.
    pub async fn try_take(
        &self,
        docker: &DockerBackend,
        uuids: &[String],
        holder: &Holder,
    ) -> Result<Option<EngineHold>, String> {
        self.find_image(docker).await?;
        let taken = join_all(uuids.iter().map(|u| self.take_one(docker, u, holder))).await;
        self.seen.forget();
        let mut hold = EngineHold {
            docker: docker.clone(),
            containers: Vec::new(),
            heartbeat: None,
            seen: self.seen.clone(),
        };
        let mut outcome = Ok(true);
        for one in taken {
            match one {
                Ok(Some(id)) => hold.containers.push(id),
                Ok(None) => outcome = outcome.map(|_| false),
                Err(e) => outcome = Err(e),
            }
        }
        match outcome {
            Ok(true) => {
                hold.start_heartbeat(self.heartbeat_every());
                Ok(Some(hold))
            }
            // All or nothing: what was taken goes again before the answer.
            Ok(false) => {
                hold.release().await;
                Ok(None)
            }
            Err(e) => {
                hold.release().await;
                Err(e)
            }
        }
    }

    /// One GPU's lease container, made; `None` when a live one holds the name.
    async fn take_one(
        &self,
        docker: &DockerBackend,
        uuid: &str,
        holder: &Holder,
    ) -> Result<Option<String>, String> {
        let lease = LeaseContainer {
            name: container_name(uuid),
            image: self.image.clone(),
            script: self.loop_script(),
            gpu: uuid.to_string(),
            holder: holder.text(),
            user: user_name(),
            since: now_secs(),
            run: RunLabels::new(&holder.run_id, &holder.job),
        };
        for retry in [false, true] {
            if let Some(id) = docker
                .create_lease(&lease)
                .await
                .map_err(|e| unusable(&e))?
            {
                self.check_beats(docker, &id).await?;
                return Ok(Some(id));
            }
            if retry {
                break;
            }
            let found = docker
                .lease_containers(Some(&lease.name))
                .await
                .map_err(|e| unusable(&e))?;
            match found.first() {
                // Gone meanwhile: try again.
                None => {}
                // By id: a new container of that name made meanwhile is not touched.
                Some(c) if self.is_stale(c, now_secs()) => {
                    tracing::debug!(gpu = uuid, container = %c.id, status = %c.status, "engine lease: removing a stale lease container");
                    docker
                        .remove_container(&c.id)
                        .await
                        .map_err(|e| unusable(&e))?;
                }
                Some(_) => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Proves the new lease container `id` keeps its lease: the loop's own test, run once
    /// (an image without `stat` or `date` would end the loop at once and hold nothing).
    async fn check_beats(&self, docker: &DockerBackend, id: &str) -> Result<(), String> {
        let checked = docker.lease_exec(id, &self.check_script()).await;
        if matches!(checked, Ok(0)) {
            return Ok(());
        }
        let _ = docker.remove_container(id).await;
        let why = match checked {
            Ok(code) => format!("its test exited {code}"),
            Err(e) => e.to_string(),
        };
        Err(format!(
            "the GPU lease container (image `{}`) on the engine at `{}` cannot keep its heartbeat ({why}): the image needs `sh`, `touch`, `sleep`, `date +%s` and `stat -c %Y` (busybox or coreutils); set `lease-image` of the host in gpuflow.toml to such an image (docs/gpus.md)",
            self.image,
            docker.endpoint()
        ))
    }

    /// Fails, saying which image and how to get it, when the engine does not have the image
    /// (a lease is not the moment to pull one: its GPUs' locks are held meanwhile).
    async fn find_image(&self, docker: &DockerBackend) -> Result<(), String> {
        let image = &self.image;
        self.image_found
            .get_or_try_init(|| async {
                match docker.has_image(image).await {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(format!(
                        "the GPU lease image `{image}` is not on the engine at `{0}`: pull it there (`docker pull {image}` on that machine, or `DOCKER_HOST={0} docker pull {image}` from here), or set `lease-image` of the host in gpuflow.toml to an image it has (docs/gpus.md#leases-across-clients-of-one-engine)",
                        docker.endpoint()
                    )),
                    Err(e) => Err(unusable(&e)),
                }
            })
            .await
            .map(|_| ())
    }

    fn is_stale(&self, c: &LeaseState, now: u64) -> bool {
        is_stale(c, now, self.stale)
    }

    fn heartbeat_every(&self) -> Duration {
        (self.stale / 3).max(Duration::from_secs(1))
    }

    /// `sh -c` text: runs while the heartbeat file is younger than the limit.
    fn loop_script(&self) -> String {
        let nap = if self.stale.as_secs() >= 10 { 2 } else { 1 };
        format!(
            "touch {HEARTBEAT_FILE} && while {}; do sleep {nap}; done",
            self.fresh_test()
        )
    }

    fn check_script(&self) -> String {
        format!("touch {HEARTBEAT_FILE} && {}", self.fresh_test())
    }

    fn fresh_test(&self) -> String {
        format!(
            "[ $(( $(date +%s) - $(stat -c %Y {HEARTBEAT_FILE}) )) -lt {} ]",
            self.stale.as_secs()
        )
    }
}

/// Whether the lease container `c` holds nothing any more at `now` (seconds since the epoch),
/// with `stale` its heartbeat's limit.
fn is_stale(c: &LeaseState, now: u64, stale: Duration) -> bool {
    // Its holder ran on this machine and is gone: its runner lock is free.
    if c.owner().is_some_and(|o| o.is_gone()) {
        return true;
    }
    match c.status.as_str() {
        "exited" | "dead" | "removing" => true,
        // Between a claimant's create and start, or left by one that died in between.
        "created" => {
            let age = now.saturating_sub(u64::try_from(c.created).unwrap_or(0));
            age > CREATED_GRACE * stale.as_secs()
        }
        _ => false,
    }
}

/// The lease containers on `docker`'s engine that hold nothing any more (what `gpuflow gc`
/// removes; a claimant removes one in its way by itself).
pub async fn stale_containers(docker: &DockerBackend) -> Result<Vec<LeaseState>, BackendError> {
    let now = now_secs();
    let stale = stale_from_env();
    Ok(docker
        .lease_containers(None)
        .await?
        .into_iter()
        .filter(|c| is_stale(c, now, stale))
        .collect())
}

/// GPUs held on an engine until released or dropped: the lease containers, kept alive by a
/// heartbeat task.
#[derive(Debug)]
pub struct EngineHold {
    docker: DockerBackend,
    /// The lease containers' ids.
    containers: Vec<String>,
    heartbeat: Option<JoinHandle<()>>,
    /// Its leases' last listing, out of date once it lets go.
    seen: Seen,
}

impl EngineHold {
    fn start_heartbeat(&mut self, every: Duration) {
        let (docker, ids) = (self.docker.clone(), self.containers.clone());
        self.heartbeat = Some(tokio::spawn(async move {
            let mut lost = vec![false; ids.len()];
            loop {
                tokio::time::sleep(every).await;
                let beats = ids.iter().zip(&lost).filter(|(_, l)| !**l).map(|(id, _)| {
                    let docker = docker.clone();
                    async move {
                        let touch = format!("touch {HEARTBEAT_FILE}");
                        let beat = docker.lease_exec(id, &touch);
                        (id, tokio::time::timeout(every, beat).await)
                    }
                });
                for (id, beat) in join_all(beats).await {
                    match beat {
                        Ok(Ok(0)) => {}
                        Ok(Err(
                            e @ (BackendError::NoSuchContainer { .. }
                            | BackendError::NotRunning { .. }),
                        )) => {
                            // Removed by someone (`gpuflow gc --all-runs`, `docker rm`) or the
                            // engine restarted: the GPU is no longer held on the engine.
                            tracing::warn!(container = %id, "a GPU lease container is gone ({e}): other clients of the engine may take its GPU");
                            if let Some(i) = ids.iter().position(|x| x == id) {
                                lost[i] = true;
                            }
                        }
                        other => {
                            tracing::debug!(container = %id, outcome = ?other.map(|r| r.map_err(|e| e.to_string())), "GPU lease heartbeat failed; trying again")
                        }
                    }
                }
            }
        }));
    }

    fn stop_heartbeat(&mut self) {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
    }

    /// Removes the lease containers (awaited): the GPUs are free on the engine once it returns.
    pub async fn release(mut self) {
        self.stop_heartbeat();
        let ids = std::mem::take(&mut self.containers);
        remove_all(&self.docker, &ids).await;
        self.seen.forget();
    }
}

impl Drop for EngineHold {
    /// Not released: the removal goes on in a task of its own. Without a runtime (or should
    /// the process end first) the containers, no longer beaten, exit within the limit and the
    /// engine removes them.
    fn drop(&mut self) {
        self.stop_heartbeat();
        let ids = std::mem::take(&mut self.containers);
        if ids.is_empty() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (docker, seen) = (self.docker.clone(), self.seen.clone());
            runtime.spawn(async move {
                remove_all(&docker, &ids).await;
                seen.forget();
            });
        }
    }
}

async fn remove_all(docker: &DockerBackend, ids: &[String]) {
    for (id, removed) in ids
        .iter()
        .zip(join_all(ids.iter().map(|id| docker.remove_container(id))).await)
    {
        if let Err(e) = removed {
            tracing::warn!(container = %id, "could not remove a GPU lease container ({e}); without its heartbeat it exits by itself");
        }
    }
}

/// The lease container of the GPU `uuid`: a name Docker accepts (`[A-Za-z0-9_.-]`).
pub fn container_name(uuid: &str) -> String {
    format!("{NAME_PREFIX}{}", super::lease::name_part(uuid))
}

/// "bob@laptop-b: pid 4711, run …, bench (2), for 3m 12s".
fn describe(c: &LeaseState, now: u64) -> String {
    let user = Some(c.user()).filter(|u| !u.is_empty()).unwrap_or("?");
    let who = match c.owner() {
        Some(owner) => format!("{user}@{}", owner.host),
        None => user.to_string(),
    };
    let mut text = format!("{who}: {}", c.holder());
    if let Some(since) = c.since() {
        let held = Duration::from_secs(now.saturating_sub(since));
        text.push_str(&format!(", for {}", humantime::format_duration(held)));
    }
    text
}

/// An engine failure while leasing, with what to do.
fn unusable(e: &BackendError) -> String {
    let text = format!("could not lease GPUs on the engine: {e}");
    match e.hint() {
        Some(hint) => format!("{text} (hint: {hint})"),
        None => text,
    }
}

/// The user running gpuflow, for the lease containers' labels.
fn user_name() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| format!("uid {}", rustix::process::geteuid().as_raw()))
}

/// [`STALE_ENV`] when it is a whole number of seconds, 3 or more; else [`DEFAULT_STALE`].
pub fn stale_from_env() -> Duration {
    std::env::var(STALE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s >= 3)
        .map_or(DEFAULT_STALE, Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(status: &str, created: i64) -> LeaseState {
        LeaseState {
            id: "abc".into(),
            name: container_name("GPU-0"),
            status: status.into(),
            created,
            labels: HashMap::new(),
        }
    }

    #[test]
    fn only_a_container_that_cannot_beat_any_more_is_stale() {
        let leases = EngineLeases::with_stale("busybox", Duration::from_secs(30));
        let now = 1_000_000;
        assert!(!leases.is_stale(&state("running", 0), now));
        assert!(!leases.is_stale(&state("paused", 0), now));
        assert!(leases.is_stale(&state("exited", 0), now));
        assert!(leases.is_stale(&state("dead", 0), now));
        // A claimant between create and start, unless it has been so for long.
        assert!(!leases.is_stale(&state("created", now as i64 - 5), now));
        assert!(leases.is_stale(&state("created", now as i64 - 301), now));
    }

    #[test]
    fn names_and_scripts() {
        assert_eq!(container_name("GPU-1a/../b"), "gpuflow-lease-GPU-1a_.._b");
        let leases = EngineLeases::with_stale("busybox", Duration::from_secs(30));
        assert_eq!(
            leases.loop_script(),
            "touch /gpuflow-heartbeat && while [ $(( $(date +%s) - $(stat -c %Y /gpuflow-heartbeat) )) -lt 30 ]; do sleep 2; done"
        );
        assert_eq!(leases.heartbeat_every(), Duration::from_secs(10));
        let fast = EngineLeases::with_stale("busybox", Duration::from_secs(3));
        assert_eq!(fast.heartbeat_every(), Duration::from_secs(1));
        assert!(fast.loop_script().ends_with("-lt 3 ]; do sleep 1; done"));
    }

    #[test]
    fn a_holder_is_described_with_its_user_machine_and_time() {
        let mut c = state("running", 0);
        c.labels = HashMap::from([
            (
                crate::backend::LABEL_LEASE_USER.to_string(),
                "bob".to_string(),
            ),
            (
                crate::backend::LABEL_LEASE_HOLDER.to_string(),
                "pid 7, run r, bench".to_string(),
            ),
            (
                crate::backend::LABEL_LEASE_SINCE.to_string(),
                "100".to_string(),
            ),
            (crate::backend::LABEL_OWNER_PID.to_string(), "7".to_string()),
            (
                crate::backend::LABEL_OWNER_HOST.to_string(),
                "laptop-b".to_string(),
            ),
        ]);
        assert_eq!(
            describe(&c, 292),
            "bob@laptop-b: pid 7, run r, bench, for 3m 12s"
        );
    }
}
