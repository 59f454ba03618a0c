//! The GPUs of one host during a run: how its inventory is found (a stand-in file, NVML on
//! this machine, or a probe the caller runs on a remote host), found once and kept for the
//! run, the lease folder its GPUs are leased in and, where the host's engine is shared by
//! several machines, the leases on that engine taken with the lease folder's
//! ([`super::engine_lease`]): both or neither, let go together.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;

use super::allocator::{Fit, Request, choose};
use super::engine_lease::{EngineHold, EngineLeases, Holder};
use super::inventory::{Gpu, Inventory};
use super::lease::{Lease, LeaseDir};
use crate::backend::DockerBackend;

/// A way to read a remote host's inventory (the CLI runs `nvidia-smi` in a container there).
pub type Probe = Arc<dyn Fn() -> BoxFuture<'static, Inventory> + Send + Sync>;

/// How a host's inventory is found.
#[derive(Clone)]
pub enum Discovery {
    /// A stand-in inventory file (docs/gpus.md).
    StandIn(PathBuf),
    /// NVML on this machine.
    Local,
    /// Asked of the host by the given probe.
    Remote(Probe),
    /// Already known (tests, tools).
    Known(Arc<Inventory>),
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::StandIn(p) => write!(f, "StandIn({})", p.display()),
            Self::Local => f.write_str("Local"),
            Self::Remote(_) => f.write_str("Remote"),
            Self::Known(_) => f.write_str("Known"),
        }
    }
}

/// What leasing for a job came to.
#[derive(Debug)]
pub enum Leased {
    /// These GPUs are the job's until the lease is dropped.
    Now(JobGpus),
    /// Not enough free GPUs now; try again later.
    Wait,
    /// It can never be met on this host; why.
    Never(String),
}

/// The GPUs leased to one job run.
#[derive(Debug)]
pub struct JobGpus {
    /// Index and UUID of each, in the order chosen.
    pub devices: Vec<(u32, String)>,
    /// Each as the inventory describes it (model, memory), in the order of `devices`: what a
    /// workflow reads as `runner.gpus`.
    pub described: Vec<Gpu>,
    /// The stand-in inventory's source, when these are not real GPUs.
    pub stand_in: bool,
    pub lease: Lease,
    /// The same GPUs held on the host's engine, where its leases are shared by every client
    /// of it: let go with `lease`. (Boxed: it holds the engine's client.)
    pub engine: Option<Box<EngineHold>>,
}

impl JobGpus {
    /// Lets the GPUs go: their hold on the engine first, awaited, then their locks. (Dropping
    /// them lets the engine's hold go in the background.)
    pub async fn release(mut self) {
        if let Some(hold) = self.engine.take() {
            hold.release().await;
        }
    }

    pub fn uuids(&self) -> Vec<String> {
        self.devices.iter().map(|(_, u)| u.clone()).collect()
    }

    /// `0,3` for messages.
    pub fn indexes_text(&self) -> String {
        self.devices
            .iter()
            .map(|(i, _)| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// One host's GPUs for a run.
#[derive(Debug)]
pub struct HostGpus {
    discovery: Discovery,
    inventory: OnceCell<Arc<Inventory>>,
    leases: LeaseDir,
    /// Where the host's GPUs are also leased on its engine.
    engine: Option<EngineLeases>,
}

/// The engine a host's shared leases need, when the caller has none.
const NO_ENGINE: &str = "this host's GPUs are leased on its Docker engine too (its leases are shared by every machine using that engine), and the run has no engine";

impl HostGpus {
    pub fn new(discovery: Discovery, leases: LeaseDir) -> Self {
        Self {
            discovery,
            inventory: OnceCell::new(),
            leases,
            engine: None,
        }
    }

    /// The same, its GPUs also leased on the host's engine ([`super::engine_lease`]).
    #[must_use]
    pub fn with_engine_leases(mut self, engine: EngineLeases) -> Self {
        self.engine = Some(engine);
        self
    }

    /// How the GPUs are leased on the engine, when they are: the callers of
    /// [`Self::try_lease`] then pass the host's engine.
    pub fn engine_leases(&self) -> Option<&EngineLeases> {
        self.engine.as_ref()
    }

    /// The host's inventory, found the first time it is asked for. A stand-in file that
    /// cannot be read is an inventory without GPUs saying why (its problems were reported
    /// when the host file was checked).
    pub async fn inventory(&self) -> Arc<Inventory> {
        self.inventory
            .get_or_init(|| async {
                Arc::new(match &self.discovery {
                    Discovery::StandIn(path) => match super::stand_in::load(path) {
                        Ok(inv) => inv,
                        // Changed since it was checked: each problem still says where.
                        Err(d) => Inventory::none(format!(
                            "the stand-in inventory `{}` is invalid: {}",
                            path.display(),
                            d.iter()
                                .map(|d| match d.location().as_str() {
                                    "" => d.message.clone(),
                                    at => format!("{at}: {}", d.message),
                                })
                                .collect::<Vec<_>>()
                                .join("; ")
                        )),
                    },
                    Discovery::Local => tokio::task::spawn_blocking(super::nvml::discover)
                        .await
                        .unwrap_or_else(|e| Inventory::none(format!("NVML discovery failed: {e}"))),
                    Discovery::Remote(probe) => probe().await,
                    Discovery::Known(inv) => return inv.clone(),
                })
            })
            .await
            .clone()
    }

    pub fn leases(&self) -> &LeaseDir {
        &self.leases
    }

    /// Tries to lease GPUs meeting `request` for `holder`: their lock files and, where the
    /// host's leases are shared on its engine, their lease containers on `docker`.
    pub async fn try_lease(
        &self,
        request: &Request,
        holder: &Holder,
        docker: Option<&DockerBackend>,
    ) -> Result<Leased, String> {
        let inv = self.inventory().await;
        let elsewhere = self.held_on_engine(docker).await?;
        let free: Vec<bool> = inv
            .gpus
            .iter()
            .map(|g| Ok(self.leases.is_free(&g.uuid)? && !elsewhere.contains_key(&g.uuid)))
            .collect::<Result<_, std::io::Error>>()
            .map_err(|e| self.unusable(e))?;
        let free_now = free.iter().filter(|f| **f).count();
        match choose(&inv, &free, request) {
            Fit::Never(why) => Ok(Leased::Never(why)),
            Fit::Wait => {
                // Called again on every poll of a waiting job: each try is a line at debug.
                tracing::debug!(
                    wanted = %request.describe(),
                    free = free_now,
                    total = inv.gpus.len(),
                    "GPU lease: not enough free, waiting"
                );
                Ok(Leased::Wait)
            }
            Fit::Now(positions) => {
                let devices: Vec<(u32, String)> = positions
                    .iter()
                    .map(|&p| (inv.gpus[p].index, inv.gpus[p].uuid.clone()))
                    .collect();
                let described: Vec<Gpu> = positions.iter().map(|&p| inv.gpus[p].clone()).collect();
                let uuids: Vec<String> = devices.iter().map(|(_, u)| u.clone()).collect();
                let lease = self
                    .leases
                    .try_lease(&uuids, &holder.text())
                    .map_err(|e| self.unusable(e))?;
                let held = match lease {
                    Some(lease) => self.also_on_engine(lease, &uuids, holder, docker).await?,
                    None => None,
                };
                // Taken by another runner between looking and leasing: wait like any other.
                match &held {
                    Some(_) => tracing::debug!(gpus = ?uuids, "GPU lease: leased"),
                    None => tracing::debug!(
                        gpus = ?uuids,
                        "GPU lease: taken by another runner meanwhile, waiting"
                    ),
                }
                Ok(held.map_or(Leased::Wait, |(lease, engine)| {
                    Leased::Now(JobGpus {
                        devices,
                        described,
                        stand_in: inv.is_stand_in(),
                        lease,
                        engine,
                    })
                }))
            }
        }
    }

    /// A lease folder this runner cannot use, said with what to do.
    fn unusable(&self, e: std::io::Error) -> String {
        // gpuflow's own refusals (an unsafe folder, a planted lock file) already name the
        // path and the fix.
        if e.kind() == std::io::ErrorKind::Other {
            return e.to_string();
        }
        format!(
            "could not use the GPU lease folder `{}`: {e} (set {} to a folder every runner of this machine can write)",
            self.leases.path().display(),
            super::lease::LEASE_DIR_ENV
        )
    }

    /// The GPUs of this host held on its engine now, by UUID, with who holds each; none
    /// where its leases are not shared on the engine.
    async fn held_on_engine(
        &self,
        docker: Option<&DockerBackend>,
    ) -> Result<HashMap<String, String>, String> {
        match (&self.engine, docker) {
            (None, _) => Ok(HashMap::new()),
            (Some(engine), Some(docker)) => engine.held(docker).await,
            (Some(_), None) => Err(NO_ENGINE.into()),
        }
    }

    /// The GPUs `uuids`, whose locks `lease` holds, taken on the engine too where the host's
    /// leases are shared there; `None` when another client of the engine holds one of them
    /// (and then, as on an error, the locks go again).
    async fn also_on_engine(
        &self,
        lease: Lease,
        uuids: &[String],
        holder: &Holder,
        docker: Option<&DockerBackend>,
    ) -> Result<Option<(Lease, Option<Box<EngineHold>>)>, String> {
        let Some(engine) = &self.engine else {
            return Ok(Some((lease, None)));
        };
        let docker = docker.ok_or(NO_ENGINE)?;
        Ok(engine
            .try_take(docker, uuids, holder)
            .await?
            .map(|hold| (lease, Some(Box::new(hold)))))
    }

    /// Takes over the GPUs `uuids` of the warm server `container` (its claims stay until it is
    /// kept warm again or stopped); `Ok(None)` when one is held by someone else now or is no
    /// longer in the inventory.
    pub async fn take_over(
        &self,
        uuids: &[String],
        holder: &Holder,
        container: &str,
        docker: Option<&DockerBackend>,
    ) -> Result<Option<JobGpus>, String> {
        let inv = self.inventory().await;
        let Some(described) = uuids
            .iter()
            .map(|u| inv.gpus.iter().find(|g| &g.uuid == u).cloned())
            .collect::<Option<Vec<Gpu>>>()
        else {
            return Ok(None);
        };
        let lease = self
            .leases
            .try_lease_adopting(uuids, &holder.text(), container)
            .map_err(|e| e.to_string())?;
        let held = match lease {
            Some(lease) => self.also_on_engine(lease, uuids, holder, docker).await?,
            None => None,
        };
        Ok(held.map(|(lease, engine)| JobGpus {
            devices: described
                .iter()
                .map(|g| (g.index, g.uuid.clone()))
                .collect(),
            described,
            stand_in: inv.is_stand_in(),
            lease,
            engine,
        }))
    }

    /// How many GPUs are free now, and the host's total, for waiting messages.
    pub async fn free_count(&self, docker: Option<&DockerBackend>) -> (usize, usize) {
        let inv = self.inventory().await;
        let elsewhere = self.held_on_engine(docker).await.unwrap_or_default();
        let free = inv
            .gpus
            .iter()
            .filter(|g| {
                self.leases.is_free(&g.uuid).unwrap_or(false) && !elsewhere.contains_key(&g.uuid)
            })
            .count();
        (free, inv.gpus.len())
    }

    /// Who holds each GPU of the inventory, in its order (`None`: free): the holder this
    /// machine's lock file names, else the one the engine's lease container names (another
    /// machine's). Without `docker`, only this machine's.
    pub async fn holders(&self, docker: Option<&DockerBackend>) -> Vec<Option<String>> {
        let inv = self.inventory().await;
        let elsewhere = match docker {
            Some(_) => self.held_on_engine(docker).await.unwrap_or_default(),
            None => HashMap::new(),
        };
        inv.gpus
            .iter()
            .map(|g| {
                self.leases
                    .holder(&g.uuid)
                    .or_else(|| elsewhere.get(&g.uuid).cloned())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::allocator::Want;
    use crate::gpu::inventory::tests::pcie_node;

    #[tokio::test]
    async fn two_hosts_objects_on_one_folder_share_leases() {
        let root = tempfile::tempdir().unwrap();
        let inv = Arc::new(pcie_node());
        let a = HostGpus::new(
            Discovery::Known(inv.clone()),
            LeaseDir::at(root.path(), "local"),
        );
        let b = HostGpus::new(Discovery::Known(inv), LeaseDir::at(root.path(), "local"));
        let four = Request {
            want: Want::Count(4),
            placement: None,
        };
        let holder = |job: &str| Holder::new("run", job);
        let Leased::Now(first) = a.try_lease(&four, &holder("a"), None).await.unwrap() else {
            panic!()
        };
        let Leased::Now(second) = b.try_lease(&four, &holder("b"), None).await.unwrap() else {
            panic!()
        };
        assert_eq!(first.indexes_text(), "0,1,2,3");
        assert_eq!(second.indexes_text(), "4,5,6,7");
        assert!(matches!(
            a.try_lease(&four, &holder("c"), None).await.unwrap(),
            Leased::Wait
        ));
        assert_eq!(a.free_count(None).await, (0, 8));
        drop(first);
        assert_eq!(b.free_count(None).await, (4, 8));
    }
}
