//! What a host has: its GPUs and the links between them, and where that knowledge came from
//! (NVML, `nvidia-smi` run on the host, or a stand-in file). "No GPU" is an inventory too, with
//! the reason, never an error.

use serde::Serialize;

/// Where an inventory comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Source {
    /// The NVIDIA driver's library on this machine.
    Nvml,
    /// `nvidia-smi` run in a short-lived container on the host.
    NvidiaSmi,
    /// A stand-in inventory file: no GPU was asked, the file says what the host would have.
    StandIn { path: String },
    /// Nothing found; `reason` says why in words (`no NVIDIA driver on this machine`).
    None { reason: String },
}

/// One GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gpu {
    /// The index NVML and `nvidia-smi` use (PCI bus order).
    pub index: u32,
    /// `GPU-…`: stable across reboots and index reordering; what leases and
    /// `CUDA_VISIBLE_DEVICES` use.
    pub uuid: String,
    pub model: String,
    pub memory_mib: u64,
    /// MIG mode: `Some(true)` enabled, `Some(false)` disabled, `None` unsupported or unknown.
    pub mig: Option<bool>,
    pub numa_node: Option<u32>,
    /// The PCI bus id (`00000000:18:00.0`), when known.
    pub bus_id: Option<String>,
    /// What the before-timing checks read (free memory, processes, ECC, …), when known.
    pub state: GpuState,
}

/// A GPU's current state: what the before-timing checks judge. Each field is `None` where the
/// source cannot tell.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GpuState {
    pub memory_used_mib: Option<u64>,
    /// Processes using the GPU (compute or graphics).
    pub processes: Option<u32>,
    /// Uncorrected ECC errors since the driver loaded.
    pub ecc_errors: Option<u64>,
    pub persistence_mode: Option<bool>,
    pub sm_clock_mhz: Option<u32>,
    pub max_sm_clock_mhz: Option<u32>,
    /// Power drawn now, watts: NVML's reading, or a stand-in file's scripted `power-w` (which
    /// its telemetry samples, docs/gpus.md). No check judges it.
    pub power_w: Option<f64>,
}

/// How data gets from one GPU to another, as `nvidia-smi topo -m` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PciePath {
    /// The GPU itself.
    Same,
    /// At most one PCIe bridge: behind one switch.
    Pix,
    /// Several bridges but no host bridge: still behind one switch tree.
    Pxb,
    /// Through a host bridge (the CPU).
    Phb,
    /// Between host bridges of one NUMA node.
    Node,
    /// Across NUMA nodes (QPI/UPI).
    Sys,
    /// Not reported (e.g. `topo -m` shows `NV#` instead of the PCIe path).
    Unknown,
}

impl PciePath {
    /// `topo -m`'s word for it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Same => "X",
            Self::Pix => "PIX",
            Self::Pxb => "PXB",
            Self::Phb => "PHB",
            Self::Node => "NODE",
            Self::Sys => "SYS",
            Self::Unknown => "?",
        }
    }

    pub fn from_label(label: &str) -> Self {
        match label {
            "X" => Self::Same,
            "PIX" => Self::Pix,
            "PXB" => Self::Pxb,
            "PHB" => Self::Phb,
            "NODE" => Self::Node,
            "SYS" => Self::Sys,
            _ => Self::Unknown,
        }
    }

    /// Behind one PCIe switch (tree) without crossing a host bridge.
    pub fn same_switch(self) -> bool {
        matches!(self, Self::Same | Self::Pix | Self::Pxb)
    }

    /// Within one NUMA node.
    pub fn same_numa(self) -> bool {
        matches!(
            self,
            Self::Same | Self::Pix | Self::Pxb | Self::Phb | Self::Node
        )
    }
}

/// The link between two GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Link {
    /// Bonded NVLinks between them (0: none).
    pub nvlinks: u32,
    pub pcie: PciePath,
}

impl Link {
    pub const SELF: Self = Self {
        nvlinks: 0,
        pcie: PciePath::Same,
    };

    /// As `topo -m` prints it: `NV4` when NVLinked, else the PCIe path.
    pub fn label(self) -> String {
        if self.pcie == PciePath::Same {
            "X".into()
        } else if self.nvlinks > 0 {
            format!("NV{}", self.nvlinks)
        } else {
            self.pcie.label().into()
        }
    }
}

/// A host's GPUs, their links, and where this came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Inventory {
    pub source: Source,
    pub driver: Option<String>,
    pub cuda: Option<String>,
    /// In index order.
    pub gpus: Vec<Gpu>,
    /// `links[i][j]`: between `gpus[i]` and `gpus[j]`; square, of `gpus.len()`.
    pub links: Vec<Vec<Link>>,
}

impl Inventory {
    /// No GPU, and why.
    pub fn none(reason: impl Into<String>) -> Self {
        Self {
            source: Source::None {
                reason: reason.into(),
            },
            driver: None,
            cuda: None,
            gpus: Vec::new(),
            links: Vec::new(),
        }
    }

    pub fn is_stand_in(&self) -> bool {
        matches!(self.source, Source::StandIn { .. })
    }

    /// Where this came from, in words for listings: `NVML`, `nvidia-smi`, `stand-in file x`.
    pub fn source_text(&self) -> String {
        match &self.source {
            Source::Nvml => "NVML".into(),
            Source::NvidiaSmi => "nvidia-smi on the host".into(),
            Source::StandIn { path } => format!("STAND-IN inventory file `{path}` (not real GPUs)"),
            Source::None { reason } => format!("no GPU: {reason}"),
        }
    }

    /// The link between positions `a` and `b` of `gpus`.
    pub fn link(&self, a: usize, b: usize) -> Link {
        if a == b {
            return Link::SELF;
        }
        self.links
            .get(a)
            .and_then(|row| row.get(b))
            .copied()
            .unwrap_or(Link {
                nvlinks: 0,
                pcie: PciePath::Unknown,
            })
    }

    /// The position in `gpus` of a device named by index (`3`) or UUID (`GPU-…`).
    pub fn position(&self, id: &str) -> Option<usize> {
        let id = id.trim();
        match id.parse::<u32>() {
            Ok(index) => self.gpus.iter().position(|g| g.index == index),
            Err(_) => self.gpus.iter().position(|g| g.uuid == id),
        }
    }

    /// One line about the topology, for the results store's fingerprint and listings:
    /// `8 GPUs; NVLink: none; PCIe switches: {0,1,2,3} {4,5,6,7}; NUMA: 0: 0-3, 1: 4-7`.
    pub fn topology_summary(&self) -> Option<String> {
        if self.gpus.is_empty() {
            return None;
        }
        let n = self.gpus.len();
        let groups = |same: &dyn Fn(usize, usize) -> bool| -> Vec<Vec<u32>> {
            components(n, same)
                .into_iter()
                .map(|c| c.into_iter().map(|i| self.gpus[i].index).collect())
                .collect()
        };
        let show = |gs: Vec<Vec<u32>>| {
            gs.iter()
                .map(|g| {
                    format!(
                        "{{{}}}",
                        g.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let nv = groups(&|a, b| self.link(a, b).nvlinks > 0);
        let nvlink = if nv.iter().all(|g| g.len() == 1) {
            "none".to_string()
        } else {
            show(nv)
        };
        let switches = show(groups(&|a, b| self.link(a, b).pcie.same_switch()));
        let mut numa: Vec<(u32, Vec<u32>)> = Vec::new();
        for g in &self.gpus {
            let node = g.numa_node.unwrap_or(u32::MAX);
            match numa.iter_mut().find(|(n, _)| *n == node) {
                Some((_, v)) => v.push(g.index),
                None => numa.push((node, vec![g.index])),
            }
        }
        let numa = numa
            .iter()
            .map(|(node, v)| {
                let node = if *node == u32::MAX {
                    "?".to_string()
                } else {
                    node.to_string()
                };
                format!(
                    "{node}: {}",
                    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let mut s = format!(
            "{n} GPU{}; NVLink: {nvlink}; PCIe switches: {switches}; NUMA {numa}",
            if n == 1 { "" } else { "s" }
        );
        if self.is_stand_in() {
            s.push_str(" (stand-in)");
        }
        Some(s)
    }

    /// The link matrix as `topo -m` prints it, one row per GPU.
    pub fn matrix_text(&self) -> String {
        let n = self.gpus.len();
        let mut rows = vec![{
            let mut r = vec![String::new()];
            r.extend(self.gpus.iter().map(|g| format!("GPU{}", g.index)));
            r.push("NUMA".into());
            r
        }];
        for (a, g) in self.gpus.iter().enumerate() {
            let mut r = vec![format!("GPU{}", g.index)];
            r.extend((0..n).map(|b| self.link(a, b).label()));
            r.push(g.numa_node.map_or_else(|| "-".into(), |n| n.to_string()));
            rows.push(r);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for r in rows {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}

/// Connected components of positions `0..n` under `same`, each sorted, in order of their
/// smallest member.
pub(crate) fn components(n: usize, same: &dyn Fn(usize, usize) -> bool) -> Vec<Vec<usize>> {
    let mut group: Vec<Option<usize>> = vec![None; n];
    let mut out: Vec<Vec<usize>> = Vec::new();
    for start in 0..n {
        if group[start].is_some() {
            continue;
        }
        let id = out.len();
        let mut members = vec![start];
        group[start] = Some(id);
        let mut i = 0;
        while i < members.len() {
            let a = members[i];
            for (b, slot) in group.iter_mut().enumerate() {
                if slot.is_none() && same(a, b) {
                    *slot = Some(id);
                    members.push(b);
                }
            }
            i += 1;
        }
        members.sort_unstable();
        out.push(members);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Eight GPUs: two NUMA nodes, each with one PCIe switch of four GPUs.
    pub(crate) fn pcie_node() -> Inventory {
        let gpus: Vec<Gpu> = (0..8)
            .map(|i| Gpu {
                index: i,
                uuid: format!("GPU-test-{i}"),
                model: "NVIDIA L40S".into(),
                memory_mib: 46068,
                mig: None,
                numa_node: Some(i / 4),
                bus_id: None,
                state: GpuState::default(),
            })
            .collect();
        let links = (0..8)
            .map(|a| {
                (0..8)
                    .map(|b| Link {
                        nvlinks: 0,
                        pcie: if a == b {
                            PciePath::Same
                        } else if a / 4 == b / 4 {
                            PciePath::Pix
                        } else {
                            PciePath::Sys
                        },
                    })
                    .collect()
            })
            .collect();
        Inventory {
            source: Source::StandIn {
                path: "test.toml".into(),
            },
            driver: Some("570.86.15".into()),
            cuda: Some("12.8".into()),
            gpus,
            links,
        }
    }

    #[test]
    fn the_summary_names_switches_and_numa_nodes() {
        assert_eq!(
            pcie_node().topology_summary().unwrap(),
            "8 GPUs; NVLink: none; PCIe switches: {0,1,2,3} {4,5,6,7}; NUMA 0: 0,1,2,3; 1: 4,5,6,7 (stand-in)"
        );
        assert_eq!(Inventory::none("x").topology_summary(), None);
    }

    #[test]
    fn devices_are_found_by_index_or_uuid() {
        let inv = pcie_node();
        assert_eq!(inv.position("3"), Some(3));
        assert_eq!(inv.position("GPU-test-5"), Some(5));
        assert_eq!(inv.position("9"), None);
    }

    #[test]
    fn the_matrix_prints_like_topo_m() {
        let text = pcie_node().matrix_text();
        let first = text.lines().nth(1).unwrap();
        assert!(
            first.starts_with("GPU0  X     PIX   PIX   PIX   SYS"),
            "{text}"
        );
        assert!(first.ends_with('0'), "{text}");
    }
}
