//! Servers shared between the cells of a job. A tuning matrix serves the same model again and
//! again; cells whose `start-container` steps would start the same server (the same server
//! key, [`super::server_key`]) share one: when a cell ends, its server is parked here instead
//! of removed, as long as a later cell of its group has yet to run, and the next cell of the
//! group adopts it instead of paying the load again. The server's GPU lease is parked with it
//! and handed to that next cell, so no other job is given GPUs a parked server still holds.
//!
//! Groups ([`super::server_groups`]) are known before the run: the dispatcher runs the cells
//! of a group one after another (a shared server serves one cell at a time, or the cells'
//! measurements would disturb each other) and prefers a cell whose server is parked.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::backend::DockerBackend;
use crate::events::JobRef;
use crate::gpu::JobGpus;

/// The container of a parked server.
pub struct ParkedContainer {
    pub id: String,
    pub docker_name: String,
    pub docker: DockerBackend,
    /// Created on its first job's network, so it was given the default one when parked.
    pub created_on_job_network: bool,
    /// On a network its step chose (`network: host`), which no cell changes.
    pub own_network: bool,
    /// The image it was started from, as the step named it.
    pub image: String,
}

/// A server kept running between two cells of its group (`C`: its container; the pool's
/// bookkeeping does not look into it).
pub struct Parked<C = ParkedContainer> {
    /// The group of the cells that can adopt it.
    pub group: String,
    /// The server key it was started with; a cell adopts it only under the same key.
    pub key: String,
    /// The name the job's steps use for it (`with: { name }`).
    pub name: String,
    pub container: C,
    /// The GPUs it runs on, leased until a cell of its group takes them over.
    pub lease: Option<JobGpus>,
    /// How many cells it has served so far, and how many benchmark requests.
    pub cells_served: u32,
    pub requests_served: u64,
    pub started: Instant,
    /// How long to keep it warm after the run (`keep-warm:`); `None`: removed with the run.
    pub keep_warm: Option<std::time::Duration>,
    /// Its registry entry, held, when it came warm from an earlier run ([`crate::warm`]).
    pub warm: Option<crate::warm::Held>,
}

/// What a cell finds for its server.
pub enum Adoption<C = ParkedContainer> {
    /// A parked server with the same key: adopt it.
    Reuse(Parked<C>),
    /// A parked server of the group that the cell's step would not start as it is (another
    /// key): to be removed before a fresh one starts on its GPUs.
    Stale(Parked<C>),
    /// Nothing parked.
    Fresh,
}

/// The run's parked servers and the groups of its cells.
pub struct ServerPool<C = ParkedContainer> {
    /// Per job run (`job`, cell): its group, for the cells that can share a server.
    groups: HashMap<(String, usize), String>,
    /// This user's warm servers, where the run finds servers of earlier runs and keeps its
    /// own warm; `None`: no warm servers (tests of the pool itself).
    registry: Option<crate::warm::Registry>,
    state: Mutex<PoolState<C>>,
}

impl<C> Default for ServerPool<C> {
    fn default() -> Self {
        Self::new(HashMap::new())
    }
}

struct PoolState<C> {
    parked: Vec<Parked<C>>,
    /// Per group, how many of its cells have not ended yet (a running cell may still adopt a
    /// parked server: it is not removed under it).
    pending: HashMap<String, usize>,
}

impl<C> ServerPool<C> {
    pub fn new(groups: HashMap<(String, usize), String>) -> Self {
        let mut pending: HashMap<String, usize> = HashMap::new();
        for group in groups.values() {
            *pending.entry(group.clone()).or_default() += 1;
        }
        Self {
            groups,
            registry: None,
            state: Mutex::new(PoolState {
                parked: Vec::new(),
                pending,
            }),
        }
    }

    /// The same pool, finding and keeping warm servers in `registry`.
    pub fn with_registry(mut self, registry: crate::warm::Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    pub fn registry(&self) -> Option<&crate::warm::Registry> {
        self.registry.as_ref()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PoolState<C>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The group of a job run; `None` for one that shares no server.
    pub fn group_of(&self, job: &JobRef) -> Option<&str> {
        self.groups
            .get(&(job.job.clone(), job.cell))
            .map(String::as_str)
    }

    /// A run of `job` ended, or will never start: one cell fewer of its group may adopt.
    pub fn settled(&self, job: &JobRef) {
        if let Some(group) = self.group_of(job) {
            let mut state = self.state();
            if let Some(n) = state.pending.get_mut(group) {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// Whether a cell of `group` other than the one ending now has yet to end: the server
    /// that cell started is worth keeping for it.
    pub fn wanted_after(&self, group: &str) -> bool {
        self.state().pending.get(group).is_some_and(|n| *n > 1)
    }

    /// Whether a server of `job`'s group is parked.
    pub fn has_parked(&self, job: &JobRef) -> bool {
        self.group_of(job)
            .is_some_and(|g| self.state().parked.iter().any(|p| p.group == g))
    }

    pub fn park(&self, parked: Parked<C>) {
        self.state().parked.push(parked);
    }

    /// The GPUs of a server parked for `job`'s group, for `job` to lease: the same devices
    /// the server runs on.
    pub fn take_lease(&self, job: &JobRef) -> Option<JobGpus> {
        let group = self.group_of(job)?;
        let mut state = self.state();
        state
            .parked
            .iter_mut()
            .find(|p| p.group == group)
            .and_then(|p| p.lease.take())
    }

    /// A cell that leased a parked server's GPUs and ends without adopting it gives them back
    /// to it; `None` when they went back, else the lease to release.
    pub fn give_back_lease(&self, job: &JobRef, lease: JobGpus) -> Option<JobGpus> {
        let Some(group) = self.group_of(job) else {
            return Some(lease);
        };
        let mut state = self.state();
        match state
            .parked
            .iter_mut()
            .find(|p| p.group == group && p.lease.is_none())
        {
            Some(parked) => {
                parked.lease = Some(lease);
                None
            }
            None => Some(lease),
        }
    }

    /// Hands the cell `job`'s step `name` the server parked for it under `key`.
    pub fn adopt(&self, job: &JobRef, name: &str, key: &str) -> Adoption<C> {
        let Some(group) = self.group_of(job) else {
            return Adoption::Fresh;
        };
        let mut state = self.state();
        let Some(at) = state
            .parked
            .iter()
            .position(|p| p.group == group && p.name == name)
        else {
            return Adoption::Fresh;
        };
        let parked = state.parked.remove(at);
        if parked.key == key {
            Adoption::Reuse(parked)
        } else {
            Adoption::Stale(parked)
        }
    }

    /// The parked servers no cell will adopt any more (every cell of their group ended),
    /// taken out to be removed.
    pub fn unwanted(&self) -> Vec<Parked<C>> {
        let mut state = self.state();
        let pending = state.pending.clone();
        let (unwanted, kept) = std::mem::take(&mut state.parked)
            .into_iter()
            .partition(|p| pending.get(&p.group).is_none_or(|n| *n == 0));
        state.parked = kept;
        unwanted
    }

    /// Every parked server, taken out to be removed (the run is over).
    pub fn drain(&self) -> Vec<Parked<C>> {
        std::mem::take(&mut self.state().parked)
    }
}

/// Removes parked servers (their leases go with them, and a warm one's claims and entry);
/// what could not be removed, in words.
pub async fn remove(parked: Vec<Parked>) -> Vec<String> {
    let mut problems = Vec::new();
    for mut p in parked {
        let c = &p.container;
        if let Err(e) = c.docker.remove_container(&c.id).await {
            problems.push(format!("server `{}` ({}): {e}", p.name, c.docker_name));
        }
        if let Some(lease) = p.lease.take() {
            lease.lease.dir.unclaim(&lease.uuids(), &c.id);
            lease.release().await;
        }
        // A warm one's claims name its GPUs also when a cell holds their lease now.
        if let Some(held) = &p.warm {
            crate::warm::claims_of(&c.docker, &held.entry).unclaim(&held.entry.gpus, &c.id);
            held.forget();
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(n: usize) -> JobRef {
        JobRef {
            job: "bench".into(),
            cell: n,
            display: format!("bench ({n})"),
        }
    }

    fn parked(group: &str, key: &str) -> Parked<()> {
        Parked {
            group: group.into(),
            key: key.into(),
            name: "server".into(),
            container: (),
            lease: None,
            cells_served: 1,
            requests_served: 0,
            started: Instant::now(),
            keep_warm: None,
            warm: None,
        }
    }

    fn pool() -> ServerPool<()> {
        ServerPool::new(HashMap::from([
            (("bench".to_string(), 0), "g1".to_string()),
            (("bench".to_string(), 1), "g1".to_string()),
            (("bench".to_string(), 2), "g2".to_string()),
        ]))
    }

    #[test]
    fn a_server_is_adopted_only_by_its_group_under_its_key() {
        let pool = pool();
        assert!(pool.wanted_after("g1"), "cell 0 ends, cell 1 is to come");
        assert!(!pool.wanted_after("g2"), "cell 2 is the group's only one");
        pool.settled(&cell(0));
        assert!(!pool.wanted_after("g1"), "cell 1 is the group's last");
        pool.park(parked("g1", "k1"));
        assert!(pool.has_parked(&cell(1)) && !pool.has_parked(&cell(2)));
        assert!(matches!(
            pool.adopt(&cell(2), "server", "k1"),
            Adoption::Fresh
        ));
        assert!(matches!(
            pool.adopt(&cell(1), "server", "k2"),
            Adoption::Stale(_)
        ));
        pool.park(parked("g1", "k1"));
        assert!(matches!(
            pool.adopt(&cell(1), "server", "k1"),
            Adoption::Reuse(_)
        ));
    }

    #[test]
    fn a_server_no_cell_will_adopt_is_unwanted() {
        let pool = pool();
        pool.park(parked("g1", "k1"));
        pool.settled(&cell(0));
        assert!(pool.unwanted().is_empty(), "cell 1 of g1 has yet to end");
        pool.settled(&cell(1));
        assert_eq!(pool.unwanted().len(), 1);
        assert!(pool.drain().is_empty());
    }
}
