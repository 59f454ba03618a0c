//! Choosing which GPUs a job gets: pure, over an [`Inventory`] and which of its GPUs are free.
//!
//! A request that could never be met on this host (more GPUs than it has, an unknown id, a
//! constraint no set of its GPUs meets) is told apart from one that must wait for GPUs to be
//! freed, so a job never waits forever. Among the sets that fit, the allocator takes the
//! tightest group (the PCIe switch, else the NUMA node with the fewest free GPUs that still
//! fits), so a later request for a whole switch still finds one: the usual best-fit rule
//! against fragmentation.

use super::inventory::{Inventory, components};

/// Where the GPUs of one request must sit relative to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    SameNvlink,
    SamePcieSwitch,
    SameNuma,
}

impl Placement {
    fn holds(self, inv: &Inventory, a: usize, b: usize) -> bool {
        let link = inv.link(a, b);
        match self {
            Self::SameNvlink => a == b || link.nvlinks > 0,
            Self::SamePcieSwitch => link.pcie.same_switch(),
            Self::SameNuma => match (inv.gpus[a].numa_node, inv.gpus[b].numa_node) {
                (Some(x), Some(y)) => x == y,
                _ => link.pcie.same_numa(),
            },
        }
    }

    fn words(self) -> &'static str {
        match self {
            Self::SameNvlink => "connected by NVLink",
            Self::SamePcieSwitch => "behind one PCIe switch",
            Self::SameNuma => "on one NUMA node",
        }
    }
}

/// How many GPUs, or which.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    All,
    Count(u32),
    /// Indexes (`3`) or UUIDs (`GPU-…`).
    Ids(Vec<String>),
}

/// One job's GPU request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub want: Want,
    pub placement: Option<Placement>,
}

impl Request {
    /// In words, for waiting messages: `2 GPUs behind one PCIe switch`.
    pub fn describe(&self) -> String {
        let what = match &self.want {
            Want::All => "all GPUs".to_string(),
            Want::Count(1) => "1 GPU".to_string(),
            Want::Count(n) => format!("{n} GPUs"),
            Want::Ids(ids) => format!("GPU {}", ids.join(", ")),
        };
        match self.placement {
            Some(p) => format!("{what} {}", p.words()),
            None => what,
        }
    }
}

/// What the allocator decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fit {
    /// These positions of `inventory.gpus`, free now.
    Now(Vec<usize>),
    /// It fits the host, but not the GPUs free now.
    Wait,
    /// It can never be met on this host; why, with what the host has.
    Never(String),
}

/// Chooses GPUs for `request` among those `free` (by position in `inv.gpus`).
pub fn choose(inv: &Inventory, free: &[bool], request: &Request) -> Fit {
    let n = inv.gpus.len();
    if n == 0 {
        return Fit::Never(format!(
            "the host has no GPU ({}), and the job asks for {}",
            inv.source_text(),
            request.describe()
        ));
    }
    let fixed = |set: Vec<usize>| -> Fit {
        if let Some(p) = request.placement
            && !pairwise(inv, &set, p)
        {
            return Fit::Never(format!(
                "{} are not all {} on this host",
                request.describe(),
                p.words()
            ));
        }
        if set.iter().all(|&i| free[i]) {
            Fit::Now(set)
        } else {
            Fit::Wait
        }
    };
    match &request.want {
        Want::All => fixed((0..n).collect()),
        Want::Ids(ids) => match positions_of(inv, ids) {
            Ok(set) => fixed(set),
            Err(why) => Fit::Never(why),
        },
        Want::Count(k) => {
            let k = *k as usize;
            if k > n {
                return Fit::Never(format!(
                    "the job asks for {}, and the host has {n}",
                    request.describe()
                ));
            }
            match request.placement {
                Some(p) => {
                    let groups = components(n, &|a, b| p.holds(inv, a, b));
                    if !groups.iter().any(|g| g.len() >= k) {
                        return Fit::Never(format!(
                            "no {k} GPUs of this host are {} (groups: {})",
                            p.words(),
                            groups
                                .iter()
                                .map(|g| format!(
                                    "{{{}}}",
                                    g.iter()
                                        .map(|&i| inv.gpus[i].index.to_string())
                                        .collect::<Vec<_>>()
                                        .join(",")
                                ))
                                .collect::<Vec<_>>()
                                .join(" ")
                        ));
                    }
                    best_fit(inv, free, &groups, k, Some(p)).map_or(Fit::Wait, Fit::Now)
                }
                None => {
                    // Any free GPUs do; close ones are better for the job and keep whole
                    // switches free for others.
                    for p in [Placement::SamePcieSwitch, Placement::SameNuma] {
                        let groups = components(n, &|a, b| p.holds(inv, a, b));
                        if let Some(set) = best_fit(inv, free, &groups, k, Some(p)) {
                            return Fit::Now(set);
                        }
                    }
                    let set: Vec<usize> = (0..n).filter(|&i| free[i]).take(k).collect();
                    if set.len() == k {
                        Fit::Now(set)
                    } else {
                        Fit::Wait
                    }
                }
            }
        }
    }
}

/// The positions in `inv.gpus` of the GPUs `ids` names (indexes or UUIDs), or why they
/// cannot be given.
fn positions_of(inv: &Inventory, ids: &[String]) -> Result<Vec<usize>, String> {
    let mut set = Vec::new();
    for id in ids {
        match inv.position(id) {
            // The same GPU by index and by UUID would be locked twice and wait for ever.
            Some(p) if set.contains(&p) => {
                return Err(format!(
                    "`{id}` names GPU {} again: each GPU can be asked for once",
                    inv.gpus[p].index
                ));
            }
            Some(p) => set.push(p),
            None => {
                return Err(format!(
                    "the host has no GPU `{id}`; it has {}",
                    inv.gpus
                        .iter()
                        .map(|g| g.index.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    Ok(set)
}

/// From the group with the fewest free GPUs that still has `k`, its first `k` free ones.
fn best_fit(
    inv: &Inventory,
    free: &[bool],
    groups: &[Vec<usize>],
    k: usize,
    placement: Option<Placement>,
) -> Option<Vec<usize>> {
    groups
        .iter()
        .filter_map(|g| {
            let free_here: Vec<usize> = g.iter().copied().filter(|&i| free[i]).collect();
            (free_here.len() >= k).then_some(free_here)
        })
        .min_by_key(|f| f.len())
        .map(|f| f.into_iter().take(k).collect::<Vec<_>>())
        .filter(|set| placement.is_none_or(|p| pairwise(inv, set, p)))
}

fn pairwise(inv: &Inventory, set: &[usize], p: Placement) -> bool {
    set.iter()
        .all(|&a| set.iter().all(|&b| a == b || p.holds(inv, a, b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::inventory::tests::pcie_node;
    use proptest::prelude::*;

    fn count(k: u32, placement: Option<Placement>) -> Request {
        Request {
            want: Want::Count(k),
            placement,
        }
    }

    #[test]
    fn two_gpus_come_from_one_switch() {
        let inv = pcie_node();
        let mut free = vec![true; 8];
        free[0] = false;
        free[1] = false;
        free[2] = false;
        // Switch 0 has one free GPU: both go to switch 1.
        assert_eq!(choose(&inv, &free, &count(2, None)), Fit::Now(vec![4, 5]));
        free[4] = false;
        // Best fit: switch 1 has 3 free, switch 0 has 1: a pair from switch 1.
        assert_eq!(choose(&inv, &free, &count(2, None)), Fit::Now(vec![5, 6]));
        // One GPU goes where it leaves the biggest hole intact: switch 0's last one.
        assert_eq!(choose(&inv, &free, &count(1, None)), Fit::Now(vec![3]));
    }

    #[test]
    fn constraints_wait_or_never() {
        let inv = pcie_node();
        let mut free = vec![true; 8];
        free[0] = false;
        free[4] = false;
        let same_switch = count(4, Some(Placement::SamePcieSwitch));
        assert_eq!(choose(&inv, &free, &same_switch), Fit::Wait);
        // Without the constraint, four free GPUs spread over both switches are fine.
        assert!(matches!(choose(&inv, &free, &count(4, None)), Fit::Now(s) if s.len() == 4));
        let Fit::Never(why) = choose(&inv, &free, &count(5, Some(Placement::SameNuma))) else {
            panic!()
        };
        assert!(why.contains("{0,1,2,3} {4,5,6,7}"), "{why}");
        let Fit::Never(why) = choose(&inv, &free, &count(2, Some(Placement::SameNvlink))) else {
            panic!()
        };
        assert!(why.contains("connected by NVLink"), "{why}");
        assert!(matches!(
            choose(&inv, &free, &count(9, None)),
            Fit::Never(_)
        ));
    }

    #[test]
    fn ids_and_all() {
        let inv = pcie_node();
        let mut free = vec![true; 8];
        let ids = |v: &[&str]| Request {
            want: Want::Ids(v.iter().map(ToString::to_string).collect()),
            placement: None,
        };
        assert_eq!(
            choose(&inv, &free, &ids(&["GPU-test-6", "1"])),
            Fit::Now(vec![6, 1])
        );
        free[1] = false;
        assert_eq!(choose(&inv, &free, &ids(&["1"])), Fit::Wait);
        assert!(
            matches!(choose(&inv, &free, &ids(&["12"])), Fit::Never(m) if m.contains("0, 1, 2"))
        );
        assert!(
            matches!(choose(&inv, &[true; 8], &ids(&["6", "GPU-test-6"])), Fit::Never(m) if m.contains("names GPU 6 again"))
        );
        let all = Request {
            want: Want::All,
            placement: None,
        };
        assert_eq!(choose(&inv, &free, &all), Fit::Wait);
        assert_eq!(choose(&inv, &[true; 8], &all), Fit::Now((0..8).collect()));
        let all_one_switch = Request {
            want: Want::All,
            placement: Some(Placement::SamePcieSwitch),
        };
        assert!(matches!(
            choose(&inv, &[true; 8], &all_one_switch),
            Fit::Never(_)
        ));
    }

    proptest! {
        /// Whatever is free, a `Now` answer takes only free GPUs, as many as asked, distinct,
        /// meeting the constraint; and `Wait` only when fewer than asked are free or the
        /// constraint cannot be met by the free ones.
        #[test]
        fn answers_respect_what_is_free(
            free in proptest::collection::vec(any::<bool>(), 8),
            k in 1u32..=8,
            c in 0usize..4,
        ) {
            let inv = pcie_node();
            let placement = [None, Some(Placement::SamePcieSwitch), Some(Placement::SameNuma), Some(Placement::SameNvlink)][c];
            match choose(&inv, &free, &count(k, placement)) {
                Fit::Now(set) => {
                    prop_assert_eq!(set.len(), k as usize);
                    let mut sorted = set.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    prop_assert_eq!(sorted.len(), set.len());
                    prop_assert!(set.iter().all(|&i| free[i]));
                    if let Some(p) = placement {
                        prop_assert!(pairwise(&inv, &set, p));
                    }
                }
                Fit::Wait => {
                    let free_count = free.iter().filter(|f| **f).count();
                    if placement.is_none() {
                        prop_assert!(free_count < k as usize);
                    }
                }
                Fit::Never(_) => prop_assert!(placement.is_some() || k > 8),
            }
        }
    }
}
