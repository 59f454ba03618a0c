//! GPUs are leased before a job starts and held for its whole life: a ready job that does not
//! fit now waits (others that fit start meanwhile), one that can never fit fails at once.

use std::time::Duration;

use crate::backend::DockerBackend;
use crate::engine::job_gpus::GrantedGpus;
use crate::engine::shared::Shared;
use crate::events::JobRef;
use crate::events::{EventKind, Stream};
use crate::expr::MapContext;
use crate::gpu::{Holder, HostGpus, Leased, Request, Want};
use crate::plan::PlannedJob;

/// How often a run with jobs waiting for GPUs looks whether another process freed some.
pub(super) const GPU_POLL: Duration = Duration::from_millis(250);

/// What a ready job's GPUs allow.
pub(super) enum GpuStart {
    /// Start, with these GPUs leased (none: it asks for none, or nobody said what its host
    /// has, in which case its `gpus:` goes to Docker as evaluated).
    Go(GrantedGpus),
    /// Wait; why, in words.
    Wait(String),
    /// It cannot ever start; why.
    Fail(String),
}

/// The planned run's `gpus:`, evaluated with its contexts, leased where its host's GPUs are
/// known.
pub(super) async fn lease_gpus(
    shared: &Shared,
    planned: &PlannedJob,
    ctx: &MapContext,
    jref: &JobRef,
) -> GpuStart {
    let Some(gpus) = &planned.gpus else {
        return GpuStart::Go(GrantedGpus::default());
    };
    let asked = match crate::engine::job_gpus::evaluate(gpus, ctx, &shared.wf.file) {
        Ok(asked) => asked,
        Err(message) => return GpuStart::Fail(format!("its `gpus` failed: {message}")),
    };
    let holder = Holder::new(&shared.opts.run_id, &jref.display);
    // A server an earlier run kept warm for this cell's group comes with its GPUs.
    // Only then is the engine reached: a job that starts no server may run without one.
    if let Some(host) = shared.engines.gpus_for(jref)
        && shared.servers.group_of(jref).is_some()
        && has_warm_servers(shared)
        && let Ok(docker) = shared.engines.for_job(jref).await
    {
        let run_id = &shared.opts.run_id;
        crate::engine::warm_servers::pull_warm(
            &shared.servers,
            jref,
            &docker,
            Some(&host),
            run_id,
            &holder,
        )
        .await;
    }
    // The GPUs a server an earlier cell of its group kept runs on: this run takes them over
    // with the server.
    if let Some(leased) = shared.servers.take_lease(jref) {
        return GpuStart::Go(GrantedGpus {
            leased: Some(leased),
            asked: asked.devices,
        });
    }
    let (Some(request), Some(host)) = (asked.lease_request(), shared.engines.gpus_for(jref)) else {
        return GpuStart::Go(GrantedGpus {
            leased: None,
            asked: asked.devices,
        });
    };
    let docker = match engine_of_leases(shared, jref, &host).await {
        Ok(docker) => docker,
        Err(why) => return GpuStart::Fail(why),
    };
    match host.try_lease(&request, &holder, docker.as_ref()).await {
        Ok(Leased::Now(gpus)) => GpuStart::Go(GrantedGpus {
            leased: Some(gpus),
            asked: asked.devices,
        }),
        Ok(Leased::Wait) => {
            evict_warm_server(shared, jref, &host, &request).await;
            let (free, total) = host.free_count(docker.as_ref()).await;
            GpuStart::Wait(format!(
                "waiting for {} ({free} of {total} free)",
                request.describe()
            ))
        }
        // "cannot run: the job asks for 9 GPUs, and the host has 8 (host `local`)".
        Ok(Leased::Never(why)) => GpuStart::Fail(match shared.engines.host_of(jref) {
            Some(name) => format!("{why} (host `{name}`)"),
            None => why,
        }),
        Err(why) => GpuStart::Fail(why),
    }
}

/// The engine the host's GPUs are also leased on, where they are ([`crate::gpu::engine_lease`]):
/// reached now, as the lease needs it.
async fn engine_of_leases(
    shared: &Shared,
    jref: &JobRef,
    host: &HostGpus,
) -> Result<Option<DockerBackend>, String> {
    if host.engine_leases().is_none() {
        return Ok(None);
    }
    shared.engines.for_job(jref).await.map(Some).map_err(|e| {
        format!("its GPUs are leased on its host's engine, shared with other machines, which cannot be reached: {e}")
    })
}

/// A warm server of this user is a cache: when the GPUs it holds would let a waiting job start,
/// it gives them up (the one that expires first goes), said in the job's log.
async fn evict_warm_server(shared: &Shared, jref: &JobRef, host: &HostGpus, request: &Request) {
    let Some(registry) = shared.servers.registry() else {
        return;
    };
    // The engine is reached only when there is something to stop on it.
    if !has_warm_servers(shared) {
        return;
    }
    let Ok(docker) = shared.engines.for_job(jref).await else {
        return;
    };
    let (free, total) = host.free_count(Some(&docker)).await;
    let needed = match &request.want {
        Want::All => total,
        Want::Count(n) => *n as usize,
        Want::Ids(ids) => ids.len(),
    };
    let short = needed.saturating_sub(free);
    if let Some(said) = crate::engine::warm_servers::evict_one(&docker, registry, short).await {
        shared.emit(EventKind::LogLine {
            job: jref.clone(),
            step: None,
            container: None,
            stream: Stream::Runner,
            text: said,
        });
    }
}

/// Whether this user has warm servers holding GPUs anywhere (their registry says so without
/// reaching any engine).
fn has_warm_servers(shared: &Shared) -> bool {
    shared
        .servers
        .registry()
        .is_some_and(|r| r.list(None).iter().any(|e| !e.gpus.is_empty()))
}
