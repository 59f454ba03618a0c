//! The run's side of warm servers ([`crate::warm`]): a cell whose server group has a warm
//! server of an earlier run takes it over, with its GPUs, into the run's pool of parked servers
//! ([`super::server_pool`]), where its `start-container` step adopts it like a server an
//! earlier cell of the same run parked (or removes it, when its key differs). When the run is
//! done with a parked server, it is kept warm (its step said `keep-warm`) or removed.

use std::time::{Duration, Instant};

use super::server_pool::{Parked, ParkedContainer, ServerPool};
use crate::backend::DockerBackend;
use crate::events::JobRef;
use crate::gpu::warm_claim::{WarmClaim, now_secs};
use crate::gpu::{Holder, HostGpus, LeaseDir};
use crate::warm::{Registry, WarmEntry, engine_key};

/// Takes a warm server of `job`'s group over into `pool`, when one waits on `docker`'s engine
/// and nothing of the group is parked yet. With `gpus` (the job's host's GPUs are known) only
/// a server holding GPUs is taken, and its GPUs are leased as the job's; without, only one
/// that holds none. Whether one was taken.
pub async fn pull_warm(
    pool: &ServerPool,
    job: &JobRef,
    docker: &DockerBackend,
    gpus: Option<&HostGpus>,
    run_id: &str,
    holder: &Holder,
) -> bool {
    let (Some(registry), Some(group)) = (pool.registry(), pool.group_of(job)) else {
        return false;
    };
    if pool.has_parked(job) {
        return false;
    }
    let engine = engine_key(docker);
    let now = now_secs();
    let candidates = registry.list(Some(&engine)).into_iter().filter(|e| {
        e.group == group
            && e.expires_at > now
            && e.in_use_by.is_none()
            && e.gpus.is_empty() == gpus.is_none()
    });
    for entry in candidates {
        let Ok(Some(mut held)) = registry.hold(&entry) else {
            continue;
        };
        let running = docker
            .inspect_state(&entry.container)
            .await
            .is_ok_and(|s| s.running);
        if !running {
            continue;
        }
        let lease = match gpus {
            Some(host) => match host
                .take_over(&entry.gpus, holder, &entry.container, Some(docker))
                .await
            {
                Ok(Some(lease)) => Some(lease),
                _ => continue,
            },
            None => None,
        };
        // From now on it is this run's: a run killed while using it leaves it marked so
        // (orphaned), and its GPUs stay claimed for as long as it could be kept again.
        let e = &mut held.entry;
        e.in_use_by = Some(run_id.to_string());
        e.expires_at = now + e.keep_warm_secs;
        if let Some(lease) = &lease {
            let claim = WarmClaim {
                container: e.container.clone(),
                until: e.expires_at,
            };
            let _ = lease.lease.dir.claim(&e.gpus, &claim);
        }
        if registry.put(&held.entry).is_err() {
            continue;
        }
        let e = &held.entry;
        let age = Duration::from_secs(now.saturating_sub(e.started_at));
        pool.park(Parked {
            group: e.group.clone(),
            key: e.key.clone(),
            name: e.name.clone(),
            container: ParkedContainer {
                id: e.container.clone(),
                docker_name: e.docker_name.clone(),
                docker: docker.clone(),
                created_on_job_network: e.created_on_job_network,
                own_network: e.own_network,
                image: e.image.clone(),
            },
            lease,
            cells_served: e.cells_served,
            requests_served: e.requests_served,
            started: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            keep_warm: Some(Duration::from_secs(e.keep_warm_secs)),
            warm: Some(held),
        });
        return true;
    }
    false
}

/// Stops the warm server of this user on `docker`'s engine that expires first and holds GPUs,
/// for a job that waits for `short` more GPUs than are free: warm servers are a cache, and a
/// job that needs their GPUs comes first. Nothing is stopped when all of them together would
/// not free enough (the job waits for others' GPUs anyway). What was stopped, in words.
pub async fn evict_one(
    docker: &DockerBackend,
    registry: &Registry,
    short: usize,
) -> Option<String> {
    let mut candidates: Vec<WarmEntry> = crate::warm::list(docker, registry)
        .await
        .into_iter()
        .filter(|(e, state)| *state == crate::warm::State::Warm && !e.gpus.is_empty())
        .map(|(e, _)| e)
        .collect();
    if short == 0 || candidates.iter().map(|e| e.gpus.len()).sum::<usize>() < short {
        return None;
    }
    candidates.sort_by_key(|e| e.expires_at);
    let entry = candidates.into_iter().next()?;
    crate::warm::stop(docker, registry, &entry).await.ok()?;
    Some(format!(
        "stopped the warm server `{}` (key {}) to free GPU{} {} for this job",
        entry.docker_name,
        entry.key,
        if entry.gpu_indexes.len() == 1 {
            ""
        } else {
            "s"
        },
        entry
            .gpu_indexes
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    ))
}

/// Ends the run's hold on parked servers: each kept warm when its step asked for it and it
/// still runs, else removed. What could not be done, in words.
pub async fn retire(parked: Vec<Parked>, registry: Option<&Registry>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut removed = Vec::new();
    for p in parked {
        let (Some(keep), Some(registry)) = (p.keep_warm, registry) else {
            removed.push(p);
            continue;
        };
        let c = &p.container;
        let running = c.docker.inspect_state(&c.id).await.is_ok_and(|s| s.running);
        if !running {
            removed.push(p);
            continue;
        }
        match keep_warm(&p, keep, registry) {
            // Its claims hold its GPUs here from now on; on a shared engine they are let go
            // (no process is left to keep a lease container beating).
            Ok(()) => {
                let mut p = p;
                if let Some(lease) = p.lease.take() {
                    lease.release().await;
                }
            }
            Err(e) => {
                problems.push(e);
                removed.push(p);
            }
        }
    }
    problems.extend(super::server_pool::remove(removed).await);
    problems
}

/// Writes the server's entry and its GPUs' claims, then lets its lease go: from now on the
/// claims hold the GPUs.
fn keep_warm(p: &Parked, keep: Duration, registry: &Registry) -> Result<(), String> {
    let now = now_secs();
    let c = &p.container;
    let (gpus, gpu_indexes) = p.lease.as_ref().map_or_else(Default::default, |l| {
        (l.uuids(), l.devices.iter().map(|(i, _)| *i).collect())
    });
    let started_at = now.saturating_sub(p.started.elapsed().as_secs());
    let entry = WarmEntry {
        engine: engine_key(&c.docker),
        container: c.id.clone(),
        docker_name: c.docker_name.clone(),
        name: p.name.clone(),
        key: p.key.clone(),
        group: p.group.clone(),
        image: c.image.clone(),
        gpus,
        gpu_indexes,
        lease_dir: p.lease.as_ref().map(|l| l.lease.dir.path().to_path_buf()),
        keep_warm_secs: keep.as_secs(),
        started_at,
        expires_at: now + keep.as_secs(),
        cells_served: p.cells_served,
        requests_served: p.requests_served,
        created_on_job_network: c.created_on_job_network,
        own_network: c.own_network,
        in_use_by: None,
    };
    let dir: Option<LeaseDir> = p.lease.as_ref().map(|l| l.lease.dir.clone());
    if let Some(dir) = &dir {
        let claim = WarmClaim {
            container: c.id.clone(),
            until: entry.expires_at,
        };
        dir.claim(&entry.gpus, &claim).map_err(|e| {
            format!(
                "could not keep the server `{}` warm: its GPUs' claims could not be written ({e}); removing it",
                p.name
            )
        })?;
    }
    registry.put(&entry).map_err(|e| {
        format!(
            "could not keep the server `{}` warm: its entry could not be written ({e}); removing it",
            p.name
        )
    })?;
    // The entry is written: the claims hold its GPUs from now on (the lease, and the lock of
    // an adopted entry, go when the caller drops `p`).
    Ok(())
}
