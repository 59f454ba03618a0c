//! Warm servers: model servers kept running between runs (`keep-warm:` on `start-container`),
//! so a re-run after editing a client-side number does not pay the load again.
//!
//! When the run that used a server with `keep-warm` ends, the server stays up on its GPUs:
//! its registry entry ([`registry`]) says its key, group, expiry and what it served, and a
//! claim beside each of its GPUs' lock files ([`crate::gpu::warm_claim`]) keeps them from other
//! jobs with no gpuflow process alive. A later run whose cell has the same server group takes
//! the server over (its GPUs with it) and adopts it if its step has the same server key.
//!
//! Every server here is in one [`State`]. The next gpuflow command on the host that looks
//! (`gpuflow run`, `gpuflow servers`, `gpuflow gc`) stops expired ones and forgets those whose
//! container is gone; `gpuflow run` and `gpuflow gc` also stop orphaned ones (a run was killed
//! while using it: what it was doing is unknown).

pub mod registry;

use std::time::Duration;

use crate::backend::{DockerBackend, Endpoint};
use crate::gpu::LeaseDir;
use crate::gpu::warm_claim::now_secs;
pub use registry::{Held, Registry, WarmEntry};

/// Where a warm server stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Running, unused, before its expiry: the next run with its group may adopt it.
    Warm,
    /// A run uses it now.
    InUse,
    /// A run took it and was killed while using it.
    Orphaned,
    /// Past its expiry.
    Expired,
    /// Its container no longer runs.
    Gone,
}

impl State {
    pub fn word(self) -> &'static str {
        match self {
            Self::Warm => "warm",
            Self::InUse => "in use",
            Self::Orphaned => "orphaned",
            Self::Expired => "expired",
            Self::Gone => "gone",
        }
    }
}

/// The name warm servers and GPU leases give an engine: `local` for this machine's socket,
/// else the engine's address.
pub fn engine_key(docker: &DockerBackend) -> String {
    match docker.endpoint() {
        Endpoint::Unix(_) => "local".to_string(),
        endpoint => endpoint.to_string(),
    }
}

/// The state of `entry`, whose container `running` or not.
pub fn state_of(registry: &Registry, entry: &WarmEntry, running: bool) -> State {
    if !running {
        State::Gone
    } else if registry.is_held(entry) {
        State::InUse
    } else if entry.in_use_by.is_some() {
        State::Orphaned
    } else if entry.expires_at <= now_secs() {
        State::Expired
    } else {
        State::Warm
    }
}

/// Every warm server of this user on `docker`'s engine, with its state.
pub async fn list(docker: &DockerBackend, registry: &Registry) -> Vec<(WarmEntry, State)> {
    let mut out = Vec::new();
    for entry in registry.list(Some(&engine_key(docker))) {
        let running = docker
            .inspect_state(&entry.container)
            .await
            .is_ok_and(|s| s.running);
        let state = state_of(registry, &entry, running);
        out.push((entry, state));
    }
    out
}

/// The default lease folder of the engine's GPUs.
fn leases(docker: &DockerBackend) -> LeaseDir {
    LeaseDir::for_host(&engine_key(docker))
}

/// Stops `entry`'s server: its container removed, its GPU claims and its entry gone. An
/// error removing the container is returned (and the entry kept, to try again).
pub async fn stop(
    docker: &DockerBackend,
    registry: &Registry,
    entry: &WarmEntry,
) -> Result<(), String> {
    if let Err(e) = docker.remove_container(&entry.container).await
        && docker.inspect_state(&entry.container).await.is_ok()
    {
        return Err(format!("could not remove `{}`: {e}", entry.docker_name));
    }
    forget(docker, registry, entry);
    Ok(())
}

/// Forgets `entry` without touching its container: claims and entry removed.
pub fn forget(docker: &DockerBackend, registry: &Registry, entry: &WarmEntry) {
    claims_of(docker, entry).unclaim(&entry.gpus, &entry.container);
    registry.remove(entry);
}

/// The lease folder `entry`'s GPU claims are in.
pub fn claims_of(docker: &DockerBackend, entry: &WarmEntry) -> LeaseDir {
    match &entry.lease_dir {
        Some(dir) => LeaseDir::at(dir, &entry.engine),
        None => leases(docker),
    }
}

/// What a sweep did, for the command that ran it to say.
#[derive(Debug, Default)]
pub struct Swept {
    pub stopped: Vec<(WarmEntry, State)>,
    pub problems: Vec<String>,
}

/// Stops this user's expired warm servers on the engine and forgets gone ones; with
/// `orphaned`, stops those a killed run left too. Also removes the containers of this user
/// that were started to be kept warm but never were (their run was killed before it ended).
pub async fn sweep(docker: &DockerBackend, registry: &Registry, orphaned: bool) -> Swept {
    let mut swept = Swept::default();
    for (entry, state) in list(docker, registry).await {
        let stop_it = match state {
            State::Expired | State::Gone => true,
            State::Orphaned => orphaned,
            State::Warm | State::InUse => false,
        };
        if !stop_it {
            continue;
        }
        match stop(docker, registry, &entry).await {
            Ok(()) => swept.stopped.push((entry, state)),
            Err(e) => swept.problems.push(e),
        }
    }
    let known: Vec<String> = registry
        .list(None)
        .into_iter()
        .map(|e| e.container)
        .collect();
    match docker.unregistered_warm(&known).await {
        Ok(lost) => {
            for thing in lost {
                if let Err(e) = docker.remove_container(&thing.id).await {
                    swept
                        .problems
                        .push(format!("could not remove `{}`: {e}", thing.name));
                }
            }
        }
        Err(e) => swept.problems.push(e.to_string()),
    }
    swept
}

/// `30m` for messages.
pub fn duration_text(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_still_marked_in_use_whose_lock_is_free_is_orphaned() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::at(dir.path());
        let mut e = registry::tests::entry("abc");
        e.expires_at = now_secs() + 600;
        registry.put(&e).unwrap();
        assert_eq!(state_of(&registry, &e, true), State::Warm);
        assert_eq!(state_of(&registry, &e, false), State::Gone);
        let held = registry.hold(&e).unwrap().unwrap();
        assert_eq!(state_of(&registry, &e, true), State::InUse);
        e.in_use_by = Some("run-2".into());
        registry.put(&e).unwrap();
        drop(held);
        assert_eq!(state_of(&registry, &e, true), State::Orphaned);
        e.in_use_by = None;
        e.expires_at = now_secs() - 1;
        assert_eq!(state_of(&registry, &e, true), State::Expired);
    }
}
