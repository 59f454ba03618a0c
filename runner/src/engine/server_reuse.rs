//! A job's side of sharing servers between cells ([`super::server_pool`]): a `start-container`
//! step adopts the server an earlier cell of its group parked under the same key, or starts a
//! fresh one marked reusable; when the cell ends, a reusable server that a later cell of its
//! group may adopt is parked instead of removed.
//!
//! A parked server leaves the job's network (which goes with the job) and keeps Docker's
//! default one, so the adopting cell gives it its own network and name like any container.
//! A server whose step says `keep-warm` is parked at its cell's end whatever comes after, and
//! kept warm past the run ([`super::warm_servers`]); one an earlier run kept warm comes into
//! the pool the same way and is adopted here like any parked server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::containers::{ContainerError, JobContainers, Reuse, Started, log_sink};
use super::server_pool::{Adoption, Parked, ParkedContainer, ServerPool, remove};
use crate::backend::{ContainerSpec, LogStart};
use crate::events::{EventKind, JobRef, Stream};
use crate::steps::StepHost;

/// Docker's default network, which a parked server keeps.
const DEFAULT_NETWORK: &str = "bridge";

/// What a `start-container` step asks of sharing its server.
#[derive(Clone, Copy, Debug)]
pub struct ServerOptions {
    /// `reuse:` (default true): may adopt a parked or warm server, and may be parked.
    pub reuse: bool,
    /// `keep-warm:`: kept running this long after the run.
    pub keep_warm: Option<Duration>,
}

/// How a `start-container` step got its container.
pub struct Obtained {
    pub id: String,
    /// Adopted from an earlier cell or run: the cells it served before, and how long it has
    /// run.
    pub reused: Option<(u32, Duration)>,
    pub key: Option<String>,
}

impl JobContainers {
    /// Starts `spec` as `name`, or, with `reuse` in a cell of a server group, adopts the
    /// running server an earlier cell of the group parked under the same key.
    pub async fn start_or_adopt(
        &mut self,
        host: &Arc<dyn StepHost>,
        job: &JobRef,
        name: &str,
        spec: ContainerSpec,
        options: ServerOptions,
    ) -> Result<Obtained, ContainerError> {
        let pool = self.servers.clone().filter(|_| options.reuse);
        let group = pool
            .as_ref()
            .and_then(|p| p.group_of(job))
            .map(String::from);
        // An image the engine does not have yet has no id to key on: it is pulled by the
        // start, and that server is not shared.
        let key = match (&pool, &group) {
            (Some(_), Some(_)) => super::server_key::server_key(&self.docker, &spec)
                .await
                .ok(),
            _ => None,
        };
        let (Some(pool), Some(group), Some(key)) = (pool, group, key) else {
            let id = self.start(host, job, name, spec).await?.id.clone();
            return Ok(Obtained {
                id,
                reused: None,
                key: None,
            });
        };
        // A cell without GPUs of its own looks for a warm server now (one with GPUs came
        // with them, when they were leased).
        if !pool.has_parked(job) {
            let run_id = self.labels.run_id.clone();
            let holder = crate::gpu::Holder::new(&run_id, &job.display);
            super::warm_servers::pull_warm(&pool, job, &self.docker, None, &run_id, &holder).await;
        }
        match pool.adopt(job, name, &key) {
            Adoption::Reuse(parked) if self.fresh_server.is_some() => {
                let step = self.fresh_server.clone().unwrap_or_default();
                say(
                    host,
                    job,
                    &format!(
                        "the server `{name}` is running already (key {key}), but `{step}` asks for a fresh one (`fresh: true`): removing it, starting a fresh one"
                    ),
                );
                remove(vec![parked]).await;
            }
            Adoption::Reuse(parked) => {
                if let Some(obtained) = self.adopt(host, job, parked, &key, options).await? {
                    return Ok(obtained);
                }
            }
            Adoption::Stale(parked) => {
                say(
                    host,
                    job,
                    &format!(
                        "the server `{name}` an earlier cell kept has another key ({}, this step's is {key}): removing it, starting a fresh one",
                        parked.key
                    ),
                );
                remove(vec![parked]).await;
            }
            Adoption::Fresh => {}
        }
        self.start_shared(host, job, name, spec, (group, key), options)
            .await
    }

    /// Starts a fresh server that later cells (or, with `keep-warm`, later runs) may adopt.
    async fn start_shared(
        &mut self,
        host: &Arc<dyn StepHost>,
        job: &JobRef,
        name: &str,
        spec: ContainerSpec,
        (group, key): (String, String),
        options: ServerOptions,
    ) -> Result<Obtained, ContainerError> {
        let created_on_job_network =
            spec.network.is_none() && (self.network.is_some() || !self.started.is_empty());
        let own_network = spec.network.is_some();
        let image = spec.image.clone();
        // Labelled as a server to keep warm: the sweep of dead runners' things leaves it to
        // the warm servers' sweep, which knows its expiry.
        let labels = self.labels.clone().warm(options.keep_warm.is_some());
        let id = self
            .start_labelled(host, job, name, spec, &labels)
            .await?
            .id
            .clone();
        if let Some(started) = self.started.get_mut(name) {
            started.reuse = Some(Reuse {
                group,
                key: key.clone(),
                cells_before: 0,
                started: Instant::now(),
                created_on_job_network,
                own_network,
                lease: None,
                image,
                requests_served: 0,
                keep_warm: options.keep_warm,
                warm: None,
            });
        }
        Ok(Obtained {
            id,
            reused: None,
            key: Some(key),
        })
    }

    /// Takes the parked server over, if it still runs; `None` (and it removed) if it died.
    async fn adopt(
        &mut self,
        host: &Arc<dyn StepHost>,
        job: &JobRef,
        parked: Parked,
        key: &str,
        options: ServerOptions,
    ) -> Result<Option<Obtained>, ContainerError> {
        let (name, id) = (parked.name.clone(), parked.container.id.clone());
        let running = self
            .docker
            .inspect_state(&id)
            .await
            .is_ok_and(|s| s.running);
        if !running {
            say(
                host,
                job,
                &format!(
                    "the server `{name}` an earlier cell kept is no longer running: starting a fresh one"
                ),
            );
            remove(vec![parked]).await;
            return Ok(None);
        }
        let mut joins_network_as = None;
        if !parked.container.own_network {
            if self.network.is_some() || !self.started.is_empty() {
                let network = self.network().await?;
                self.docker
                    .connect_network(&network, &id, std::slice::from_ref(&name))
                    .await?;
            } else {
                joins_network_as = Some(name.clone());
            }
        }
        // From now on: what the server prints is this cell's.
        let forward = {
            let (docker, id, sink) = (self.docker.clone(), id.clone(), log_sink(host, job, &name));
            tokio::spawn(async move {
                let _ = docker.follow_logs(&id, LogStart::Tail(0), sink).await;
            })
        };
        let cells_before = parked.cells_served;
        let age = parked.started.elapsed();
        // Kept warm by an earlier run, or by an earlier round of a search in this one.
        let by = if parked.warm.is_some() {
            "that was kept warm"
        } else {
            "an earlier cell started"
        };
        say(
            host,
            job,
            &format!(
                "reusing the server `{name}` {by} (key {key}, up {:.0}s, {cells_before} cell{} and {} request{} served): no new container",
                age.as_secs_f64(),
                if cells_before == 1 { "" } else { "s" },
                parked.requests_served,
                if parked.requests_served == 1 { "" } else { "s" },
            ),
        );
        self.started.insert(
            name.clone(),
            Started {
                id: id.clone(),
                docker_name: parked.container.docker_name.clone(),
                shell: Default::default(),
                joins_network_as,
                forward: Some(forward),
                // Estimated again by the step that adopts it, with this cell's GPUs.
                memory: None,
                reuse: Some(Reuse {
                    group: parked.group.clone(),
                    key: key.to_string(),
                    cells_before,
                    started: parked.started,
                    created_on_job_network: parked.container.created_on_job_network,
                    own_network: parked.container.own_network,
                    // Its GPU lease, when this cell did not take it over at its start: held
                    // while the server runs on those GPUs.
                    lease: parked.lease,
                    image: parked.container.image.clone(),
                    requests_served: parked.requests_served,
                    // As this cell's step says now; a step that says nothing keeps a warm
                    // server warm as long as the run that kept it asked.
                    keep_warm: options.keep_warm.or(parked.keep_warm),
                    warm: parked.warm,
                }),
            },
        );
        Ok(Some(Obtained {
            id,
            reused: Some((cells_before, age)),
            key: Some(key.to_string()),
        }))
    }

    /// Parks every reusable server a later cell of its group may adopt; whether one was.
    pub async fn park_reusable(&mut self, host: &Arc<dyn StepHost>, job: &JobRef) -> bool {
        let Some(pool) = self.servers.clone() else {
            return false;
        };
        let names: Vec<String> = self
            .started
            .iter()
            .filter(|(_, s)| {
                s.reuse
                    .as_ref()
                    .is_some_and(|r| r.keep_warm.is_some() || pool.wanted_after(&r.group))
            })
            .map(|(n, _)| n.clone())
            .collect();
        let mut parked_any = false;
        for name in names {
            let Some(started) = self.started.shift_remove(&name) else {
                continue;
            };
            let keep_warm = started.reuse.as_ref().and_then(|r| r.keep_warm);
            let for_next_cell = started
                .reuse
                .as_ref()
                .is_some_and(|r| pool.wanted_after(&r.group));
            match self.park(&pool, &name, started).await {
                Ok(()) => {
                    parked_any = true;
                    let text = match keep_warm {
                        Some(d) if !for_next_cell => format!(
                            "keeping the server `{name}` warm for {} after the run: a later run with the same server adopts it (`gpuflow servers` lists it)",
                            crate::warm::duration_text(d)
                        ),
                        _ => format!(
                            "kept the server `{name}` running for the next cell of its group"
                        ),
                    };
                    say(host, job, &text);
                }
                Err(message) => say(host, job, &message),
            }
        }
        parked_any
    }

    async fn park(
        &mut self,
        pool: &ServerPool,
        name: &str,
        mut started: Started,
    ) -> Result<(), String> {
        let reuse = started
            .reuse
            .take()
            .expect("only reusable servers are parked");
        if let Some(forward) = started.forward.take() {
            forward.abort();
        }
        let detach = async {
            if reuse.own_network {
                return Ok(());
            }
            // Started alone, it joined no job network (`joins_network_as` is still set).
            if let (Some(network), None) = (&self.network, &started.joins_network_as) {
                self.docker.disconnect_network(network, &started.id).await?;
            }
            if reuse.created_on_job_network {
                self.docker
                    .connect_network(DEFAULT_NETWORK, &started.id, &[])
                    .await?;
            }
            Ok::<(), crate::backend::BackendError>(())
        };
        if let Err(e) = detach.await {
            let _ = self.docker.remove_container(&started.id).await;
            return Err(format!(
                "could not keep the server `{name}` for the next cell ({e}): removed it"
            ));
        }
        pool.park(Parked {
            group: reuse.group,
            key: reuse.key,
            name: name.to_string(),
            container: ParkedContainer {
                id: started.id,
                docker_name: started.docker_name,
                docker: self.docker.clone(),
                created_on_job_network: reuse.created_on_job_network,
                own_network: reuse.own_network,
                image: reuse.image,
            },
            lease: reuse.lease,
            cells_served: reuse.cells_before + 1,
            requests_served: reuse.requests_served,
            started: reuse.started,
            keep_warm: reuse.keep_warm,
            warm: reuse.warm,
        });
        Ok(())
    }
}

fn say(host: &Arc<dyn StepHost>, job: &JobRef, text: &str) {
    host.emit(EventKind::LogLine {
        job: job.clone(),
        step: None,
        container: None,
        stream: Stream::Runner,
        text: text.to_string(),
    });
}
