//! The GPUs of one host during a run: how its inventory is found (a stand-in file, NVML on
//! this machine, or a probe the caller runs on a remote host), found once and kept for the
//! run, and the lease folder its GPUs are leased in.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;

use super::allocator::{Fit, Request, choose};
use super::inventory::{Gpu, Inventory};
use super::lease::{Lease, LeaseDir};

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
}

impl JobGpus {
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
}

impl HostGpus {
    pub fn new(discovery: Discovery, leases: LeaseDir) -> Self {
        Self {
            discovery,
            inventory: OnceCell::new(),
            leases,
        }
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

    /// Tries to lease GPUs meeting `request`, written to the lease files as `holder`.
    pub async fn try_lease(&self, request: &Request, holder: &str) -> Result<Leased, String> {
        let inv = self.inventory().await;
        let unusable = |e: std::io::Error| {
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
        };
        let free: Vec<bool> = inv
            .gpus
            .iter()
            .map(|g| self.leases.is_free(&g.uuid))
            .collect::<Result<_, _>>()
            .map_err(unusable)?;
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
                let lease = self.leases.try_lease(&uuids, holder).map_err(unusable)?;
                // Taken by another runner between looking and leasing: wait like any other.
                match &lease {
                    Some(_) => tracing::debug!(gpus = ?uuids, "GPU lease: leased"),
                    None => tracing::debug!(
                        gpus = ?uuids,
                        "GPU lease: taken by another runner meanwhile, waiting"
                    ),
                }
                Ok(lease.map_or(Leased::Wait, |lease| {
                    Leased::Now(JobGpus {
                        devices,
                        described,
                        stand_in: inv.is_stand_in(),
                        lease,
                    })
                }))
            }
        }
    }

    /// Takes over the GPUs `uuids` of the warm server `container` (its claims stay until it is
    /// kept warm again or stopped); `Ok(None)` when one is held by someone else now or is no
    /// longer in the inventory.
    pub async fn take_over(
        &self,
        uuids: &[String],
        holder: &str,
        container: &str,
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
            .try_lease_adopting(uuids, holder, container)
            .map_err(|e| e.to_string())?;
        Ok(lease.map(|lease| JobGpus {
            devices: described
                .iter()
                .map(|g| (g.index, g.uuid.clone()))
                .collect(),
            described,
            stand_in: inv.is_stand_in(),
            lease,
        }))
    }

    /// How many GPUs are free now, and the host's total, for waiting messages.
    pub async fn free_count(&self) -> (usize, usize) {
        let inv = self.inventory().await;
        let free = inv
            .gpus
            .iter()
            .filter(|g| self.leases.is_free(&g.uuid).unwrap_or(false))
            .count();
        (free, inv.gpus.len())
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
        let Leased::Now(first) = a.try_lease(&four, "a").await.unwrap() else {
            panic!()
        };
        let Leased::Now(second) = b.try_lease(&four, "b").await.unwrap() else {
            panic!()
        };
        assert_eq!(first.indexes_text(), "0,1,2,3");
        assert_eq!(second.indexes_text(), "4,5,6,7");
        assert!(matches!(
            a.try_lease(&four, "c").await.unwrap(),
            Leased::Wait
        ));
        assert_eq!(a.free_count().await, (0, 8));
        drop(first);
        assert_eq!(b.free_count().await, (4, 8));
    }
}
