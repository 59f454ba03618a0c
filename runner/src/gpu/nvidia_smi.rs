//! Reading what `nvidia-smi` prints, for hosts gpuflow reaches only through Docker: the
//! per-GPU query (`--query-gpu=… --format=csv,noheader,nounits`), the link matrix
//! (`nvidia-smi topo -m`) and the banner's CUDA version. Pure text in, [`Inventory`] out; the
//! caller runs the commands (in a short-lived container on the host).

use super::inventory::{Gpu, GpuState, Inventory, Link, PciePath, Source};

/// The fields asked of `nvidia-smi --query-gpu`, in the order [`parse_query`] reads them.
pub const QUERY_FIELDS: &str = "index,uuid,name,memory.total,memory.used,mig.mode.current,pci.bus_id,driver_version,persistence_mode,clocks.sm,clocks.max.sm";

/// The shell script run on the host: the three outputs, separated by marker lines.
pub fn probe_script() -> String {
    format!(
        "nvidia-smi --query-gpu={QUERY_FIELDS} --format=csv,noheader,nounits && echo {MARK} && \
         nvidia-smi topo -m && echo {MARK} && nvidia-smi"
    )
}

const MARK: &str = "----gpuflow----";

/// Why the probe's output could not be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("line {line} of `nvidia-smi --query-gpu`: {problem}: `{text}`")]
    Query {
        line: usize,
        problem: String,
        text: String,
    },
    #[error("the probe printed {0} sections, expected 3 (query, `topo -m`, banner)")]
    Sections(usize),
}

/// The whole probe's output (see [`probe_script`]) as an inventory.
pub fn parse_probe(output: &str) -> Result<Inventory, ParseError> {
    let sections: Vec<&str> = output.split(&format!("{MARK}\n")).collect();
    let [query, topo, banner] = sections[..] else {
        return Err(ParseError::Sections(sections.len()));
    };
    let (mut gpus, driver) = parse_query(query)?;
    let topo = parse_topology(topo);
    for g in &mut gpus {
        if let Some(numa) = topo.numa.get(&g.index) {
            g.numa_node = Some(*numa);
        }
    }
    let links = gpus
        .iter()
        .map(|a| {
            gpus.iter()
                .map(|b| topo.link(a.index, b.index))
                .collect::<Vec<_>>()
        })
        .collect();
    Ok(Inventory {
        source: Source::NvidiaSmi,
        driver,
        cuda: parse_cuda(banner),
        gpus,
        links,
    })
}

/// One GPU per line, fields as [`QUERY_FIELDS`]; `[N/A]` and `N/A` read as unknown. Returns
/// the GPUs and the driver version.
pub fn parse_query(text: &str) -> Result<(Vec<Gpu>, Option<String>), ParseError> {
    let mut gpus = Vec::new();
    let mut driver = None;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let error = |problem: &str| ParseError::Query {
            line: n + 1,
            problem: problem.into(),
            text: line.into(),
        };
        if fields.len() < 8 {
            return Err(error("expected at least 8 comma-separated fields"));
        }
        let known = |v: &str| (!v.contains("N/A") && !v.is_empty()).then(|| v.to_string());
        let number = |v: &str| known(v).and_then(|v| v.parse::<u64>().ok());
        let index = fields[0]
            .parse::<u32>()
            .map_err(|_| error("the index is not a number"))?;
        let mig = match fields[5] {
            "Enabled" => Some(true),
            "Disabled" => Some(false),
            _ => None,
        };
        driver = driver.or_else(|| known(fields[7]));
        let field = |i: usize| fields.get(i).copied().unwrap_or("");
        gpus.push(Gpu {
            index,
            uuid: fields[1].to_string(),
            model: fields[2].to_string(),
            memory_mib: number(fields[3]).unwrap_or(0),
            mig,
            numa_node: None,
            bus_id: known(fields[6]),
            state: GpuState {
                memory_used_mib: number(fields[4]),
                processes: None,
                ecc_errors: None,
                persistence_mode: match field(8) {
                    "Enabled" => Some(true),
                    "Disabled" => Some(false),
                    _ => None,
                },
                sm_clock_mhz: number(field(9)).map(|v| v as u32),
                max_sm_clock_mhz: number(field(10)).map(|v| v as u32),
                power_w: None,
            },
        });
    }
    gpus.sort_by_key(|g| g.index);
    Ok((gpus, driver))
}

/// `nvidia-smi topo -m`, read: the link between GPU indexes and each GPU's NUMA node.
#[derive(Debug, Default, PartialEq)]
pub struct Topology {
    /// `(from, to)` GPU indexes → the link.
    pub links: std::collections::HashMap<(u32, u32), Link>,
    pub numa: std::collections::HashMap<u32, u32>,
}

impl Topology {
    fn link(&self, a: u32, b: u32) -> Link {
        if a == b {
            return Link::SELF;
        }
        self.links.get(&(a, b)).copied().unwrap_or(Link {
            nvlinks: 0,
            pcie: PciePath::Unknown,
        })
    }
}

/// The matrix of `topo -m`: a header of device columns (`GPU0 … GPU7`, NICs like `mlx5_0`
/// or `NIC0`), then `CPU Affinity`, and on newer drivers `NUMA Affinity` and `GPU NUMA ID`;
/// one row per device. Rows other than GPUs and the legend are skipped.
pub fn parse_topology(text: &str) -> Topology {
    let mut topo = Topology::default();
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("GPU"));
    let Some(header) = lines.next() else {
        return topo;
    };
    let columns: Vec<&str> = header
        .split_whitespace()
        .take_while(|w| *w != "CPU")
        .collect();
    let has_numa = header.contains("NUMA Affinity");
    let gpu_column = |c: &str| c.strip_prefix("GPU").and_then(|n| n.parse::<u32>().ok());
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(from) = words.first().and_then(|w| gpu_column(w)) else {
            if line.trim_start().starts_with("Legend") {
                break;
            }
            continue;
        };
        for (column, value) in columns.iter().zip(words.iter().skip(1)) {
            let Some(to) = gpu_column(column) else {
                continue;
            };
            let link = match value.strip_prefix("NV").and_then(|n| n.parse::<u32>().ok()) {
                Some(n) => Link {
                    nvlinks: n,
                    pcie: PciePath::Unknown,
                },
                None => Link {
                    nvlinks: 0,
                    pcie: PciePath::from_label(value),
                },
            };
            topo.links.insert((from, to), link);
        }
        // After the device columns: CPU affinity, then the NUMA node.
        if has_numa
            && let Some(node) = words
                .get(columns.len() + 2)
                .and_then(|w| w.parse::<u32>().ok())
        {
            topo.numa.insert(from, node);
        }
    }
    topo
}

/// `CUDA Version: 12.8` from the banner of plain `nvidia-smi`.
pub fn parse_cuda(banner: &str) -> Option<String> {
    let rest = banner.split("CUDA Version:").nth(1)?;
    rest.split_whitespace()
        .next()
        .map(|v| v.trim_end_matches('|').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real `topo -m` outputs, as posted in public issues (whitespace as printed).

    /// kubernetes/kubernetes#53497: 8 GPUs in pairs behind PCIe switches, two CPU sockets,
    /// one NIC column, no NUMA column (older driver).
    const K8S_8_PCIE: &str = "        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    mlx4_0  CPU Affinity
GPU0     X      PIX     PHB     PHB     SYS     SYS     SYS     SYS     PHB     0-9,20-29
GPU1    PIX      X      PHB     PHB     SYS     SYS     SYS     SYS     PHB     0-9,20-29
GPU2    PHB     PHB      X      PIX     SYS     SYS     SYS     SYS     PHB     0-9,20-29
GPU3    PHB     PHB     PIX      X      SYS     SYS     SYS     SYS     PHB     0-9,20-29
GPU4    SYS     SYS     SYS     SYS      X      PIX     PHB     PHB     SYS     10-19,30-39
GPU5    SYS     SYS     SYS     SYS     PIX      X      PHB     PHB     SYS     10-19,30-39
GPU6    SYS     SYS     SYS     SYS     PHB     PHB      X      PIX     SYS     10-19,30-39
GPU7    SYS     SYS     SYS     SYS     PHB     PHB     PIX      X      SYS     10-19,30-39
mlx4_0  PHB     PHB     PHB     PHB     SYS     SYS     SYS     SYS      X

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
";

    /// noonghunna/club-3090#1229: two GPUs, tab-separated, with NUMA columns.
    const TWO_5090: &str = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tPHB\t0-63\t0\t\tN/A
GPU1\tPHB\t X \t0-63\t0\t\tN/A

Legend:

  X    = Self
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
";

    /// NVIDIA/nccl-tests#78 (first rows): NVLink everywhere (NV6), NICs after the GPUs.
    const NV6_ROWS: &str = "        GPU0    GPU1    GPU2    mlx5_0  mlx5_1  CPU Affinity
GPU0     X      NV6     NV6     PIX     PXB     0-23,48-71
GPU1    NV6      X      NV6     PIX     PXB     0-23,48-71
GPU2    NV6     NV6      X      PXB     PIX     0-23,48-71
";

    #[test]
    fn an_eight_gpu_pcie_node_is_read_pair_by_pair() {
        let t = parse_topology(K8S_8_PCIE);
        assert_eq!(t.links[&(0, 1)].pcie, PciePath::Pix);
        assert_eq!(t.links[&(0, 2)].pcie, PciePath::Phb);
        assert_eq!(t.links[&(3, 4)].pcie, PciePath::Sys);
        assert_eq!(t.links[&(7, 6)].pcie, PciePath::Pix);
        assert_eq!(t.links[&(5, 5)].pcie, PciePath::Same);
        assert_eq!(t.links.len(), 64, "NIC columns and rows are left out");
        assert!(t.numa.is_empty());
    }

    #[test]
    fn tabs_and_the_numa_column_are_read() {
        let t = parse_topology(TWO_5090);
        assert_eq!(t.links[&(0, 1)].pcie, PciePath::Phb);
        assert_eq!(t.numa, [(0, 0), (1, 0)].into());
    }

    #[test]
    fn nvlink_counts_are_read() {
        let t = parse_topology(NV6_ROWS);
        assert_eq!(t.links[&(0, 2)].nvlinks, 6);
        assert_eq!(t.links[&(2, 1)].label(), "NV6");
    }

    #[test]
    fn query_lines_become_gpus() {
        let (gpus, driver) = parse_query(
            "0, GPU-22b2c6ac-2d49-4863-197c-9c469071178a, NVIDIA H200, 143771, 1, [N/A], 00000000:18:00.0, 570.86.15, Enabled, 1980, 1980\n\
             1, GPU-aaaa, NVIDIA H200, 143771, 0, Disabled, 00000000:2A:00.0, 570.86.15, Disabled, N/A, 1980\n",
        )
        .unwrap();
        assert_eq!(driver.as_deref(), Some("570.86.15"));
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].model, "NVIDIA H200");
        assert_eq!(gpus[0].memory_mib, 143_771);
        assert_eq!(gpus[0].mig, None);
        assert_eq!(gpus[1].mig, Some(false));
        assert_eq!(gpus[0].state.persistence_mode, Some(true));
        assert_eq!(gpus[1].state.sm_clock_mhz, None);
        assert_eq!(gpus[1].bus_id.as_deref(), Some("00000000:2A:00.0"));
    }

    #[test]
    fn a_short_query_line_is_an_error_naming_the_line() {
        let e = parse_query("0, GPU-a\n").unwrap_err();
        assert!(e.to_string().starts_with("line 1 of"), "{e}");
    }

    #[test]
    fn the_whole_probe_joins_query_topology_and_banner() {
        let query = (0..8)
            .map(|i| format!("{i}, GPU-{i}, Tesla P100, 16280, 0, [N/A], 0000:0{i}:00.0, 535.54.03, Enabled, 1328, 1480\n"))
            .collect::<String>();
        let out = format!(
            "{query}{MARK}\n{K8S_8_PCIE}{MARK}\n| NVIDIA-SMI 535.54.03   Driver Version: 535.54.03   CUDA Version: 12.2     |\n"
        );
        let inv = parse_probe(&out).unwrap();
        assert_eq!(inv.cuda.as_deref(), Some("12.2"));
        assert_eq!(inv.gpus.len(), 8);
        assert_eq!(inv.link(0, 1).pcie, PciePath::Pix);
        assert_eq!(inv.link(1, 4).pcie, PciePath::Sys);
        assert_eq!(
            inv.topology_summary().unwrap(),
            "8 GPUs; NVLink: none; PCIe switches: {0,1} {2,3} {4,5} {6,7}; NUMA ?: 0,1,2,3,4,5,6,7"
        );
        assert_eq!(parse_probe("x").unwrap_err(), ParseError::Sections(1));
    }
}
