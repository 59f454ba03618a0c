//! The stand-in inventory file: on a machine without GPUs (CI, a laptop), a TOML file says
//! what a host would have, so the allocator, waiting, leases and checks run for real on
//! made-up devices. Whatever shows such an inventory labels it "stand-in".
//!
//! The links between GPUs follow from each GPU's `pcie-switch`, `numa-node` and
//! `nvlink-group`: same switch → `PIX`, same NUMA node → `NODE`, else `SYS`; same NVLink group →
//! `nvlinks` bonded links. The format is in docs/gpus.md; `examples/stand-in-8gpu-pcie.toml` is
//! an 8-GPU PCIe node.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::inventory::{Gpu, GpuState, Inventory, Link, PciePath, Source};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct File {
    driver: Option<String>,
    cuda: Option<String>,
    /// The model of every GPU that does not name its own.
    model: Option<String>,
    /// The memory of every GPU that does not give its own.
    memory_mib: Option<u64>,
    /// Bonded links between two GPUs of one `nvlink-group` (default 1).
    nvlinks: Option<u32>,
    #[serde(default)]
    gpus: Vec<toml::Spanned<FileGpu>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct FileGpu {
    index: u32,
    uuid: Option<String>,
    model: Option<String>,
    memory_mib: Option<u64>,
    #[serde(default)]
    mig: Option<bool>,
    numa_node: Option<u32>,
    pcie_switch: Option<u32>,
    nvlink_group: Option<u32>,
    bus_id: Option<String>,
    // What the before-timing checks read.
    memory_used_mib: Option<u64>,
    processes: Option<u32>,
    ecc_errors: Option<u64>,
    persistence_mode: Option<bool>,
    sm_clock_mhz: Option<u32>,
    max_sm_clock_mhz: Option<u32>,
}

/// Reads a stand-in file; problems come with `file:line:col` and a fix.
pub fn load(path: &Path) -> Result<Inventory, Diagnostics> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Diagnostics::from(
            Diagnostic::unlocated(format!(
                "cannot read the stand-in GPU inventory `{}`: {e}",
                path.display()
            ))
            .hint("fix the path (`gpu-inventory` in gpuflow.toml, or GPUFLOW_GPU_INVENTORY); docs/gpus.md shows the format"),
        )
    })?;
    parse(&SourceFile::new(path.display().to_string(), text))
}

/// Reads a stand-in file's text.
pub fn parse(file: &Arc<SourceFile>) -> Result<Inventory, Diagnostics> {
    let parsed: File = toml::from_str(&file.text).map_err(|e| {
        let span = e.span().map(Span::from).unwrap_or_default();
        let message = e.message().trim().trim_end_matches('.').to_string();
        Diagnostics::from(
            Diagnostic::error(file, span, format!("invalid stand-in GPU inventory: {message}"))
                .hint("see docs/gpus.md (\"Stand-in inventory\") for the keys of the file and of each `[[gpus]]`"),
        )
    })?;
    let mut diagnostics = Diagnostics::new();
    if parsed.gpus.is_empty() {
        diagnostics.push(
            Diagnostic::error(file, Span::default(), "the stand-in inventory lists no GPU")
                .hint("add one `[[gpus]]` table per GPU with at least `index = 0`"),
        );
    }
    let mut gpus: Vec<(Gpu, Option<u32>, Option<u32>)> = Vec::new();
    for entry in &parsed.gpus {
        let span = Span::from(entry.span());
        let g = entry.get_ref();
        let uuid = g
            .uuid
            .clone()
            .unwrap_or_else(|| format!("GPU-stand-in-{:04}", g.index));
        if let Some((other, ..)) = gpus
            .iter()
            .find(|(o, ..)| o.index == g.index || o.uuid == uuid)
        {
            let what = if other.index == g.index {
                format!("index `{}`", g.index)
            } else {
                format!("uuid `{uuid}`")
            };
            diagnostics.push(
                Diagnostic::error(file, span, format!("two GPUs have {what}"))
                    .label("listed again here")
                    .hint("give each `[[gpus]]` its own `index` and `uuid`"),
            );
            continue;
        }
        let Some(model) = g.model.clone().or_else(|| parsed.model.clone()) else {
            diagnostics.push(
                Diagnostic::error(file, span, format!("GPU {} has no model", g.index))
                    .hint("add `model = \"NVIDIA L40S\"` to it, or once at the top of the file"),
            );
            continue;
        };
        gpus.push((
            Gpu {
                index: g.index,
                uuid,
                model,
                memory_mib: g.memory_mib.or(parsed.memory_mib).unwrap_or(0),
                mig: g.mig,
                numa_node: g.numa_node,
                bus_id: g.bus_id.clone(),
                state: GpuState {
                    memory_used_mib: g.memory_used_mib,
                    processes: g.processes,
                    ecc_errors: g.ecc_errors,
                    persistence_mode: g.persistence_mode,
                    sm_clock_mhz: g.sm_clock_mhz,
                    max_sm_clock_mhz: g.max_sm_clock_mhz,
                },
            },
            g.pcie_switch,
            g.nvlink_group,
        ));
    }
    if diagnostics.has_errors() {
        return Err(diagnostics);
    }
    gpus.sort_by_key(|(g, ..)| g.index);
    let nvlinks = parsed.nvlinks.unwrap_or(1);
    let links = gpus
        .iter()
        .map(|(a, a_switch, a_nv)| {
            gpus.iter()
                .map(|(b, b_switch, b_nv)| {
                    if a.index == b.index {
                        return Link::SELF;
                    }
                    let pcie = if a_switch.is_some() && a_switch == b_switch {
                        PciePath::Pix
                    } else if a.numa_node.is_some() && a.numa_node == b.numa_node {
                        PciePath::Node
                    } else if a.numa_node.is_none() || b.numa_node.is_none() {
                        PciePath::Phb
                    } else {
                        PciePath::Sys
                    };
                    let nvlinked = a_nv.is_some() && a_nv == b_nv;
                    Link {
                        nvlinks: if nvlinked { nvlinks } else { 0 },
                        pcie,
                    }
                })
                .collect()
        })
        .collect();
    Ok(Inventory {
        source: Source::StandIn {
            path: file.name.clone(),
        },
        driver: parsed.driver,
        cuda: parsed.cuda,
        gpus: gpus.into_iter().map(|(g, ..)| g).collect(),
        links,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::{RenderOptions, render_all};

    const EXAMPLE: &str = include_str!("../../../examples/stand-in-8gpu-pcie.toml");

    #[test]
    fn the_shipped_example_is_an_eight_gpu_pcie_node() {
        let inv = parse(&SourceFile::new("stand-in.toml", EXAMPLE)).unwrap();
        assert_eq!(inv.gpus.len(), 8);
        assert!(inv.is_stand_in());
        assert_eq!(inv.link(0, 3).pcie, PciePath::Pix);
        assert_eq!(inv.link(0, 4).pcie, PciePath::Sys);
        assert_eq!(inv.link(0, 1).nvlinks, 0);
        assert_eq!(
            inv.topology_summary().unwrap(),
            "8 GPUs; NVLink: none; PCIe switches: {0,1,2,3} {4,5,6,7}; NUMA 0: 0,1,2,3; 1: 4,5,6,7 (stand-in)"
        );
    }

    #[test]
    fn nvlink_groups_become_links() {
        let file = SourceFile::new(
            "s.toml",
            "model = \"H100\"\nnvlinks = 18\n[[gpus]]\nindex = 0\nnvlink-group = 0\n[[gpus]]\nindex = 1\nnvlink-group = 0\n[[gpus]]\nindex = 2\n",
        );
        let inv = parse(&file).unwrap();
        assert_eq!(inv.link(0, 1).label(), "NV18");
        assert_eq!(inv.link(0, 2).label(), "PHB");
        assert_eq!(inv.gpus[2].uuid, "GPU-stand-in-0002");
    }

    #[test]
    fn an_unknown_key_is_reported_where_it_is() {
        let file = SourceFile::new(
            "s.toml",
            "model = \"H100\"\n[[gpus]]\nindex = 0\nnuma = 1\n",
        );
        let text = render_all(
            &parse(&file).unwrap_err(),
            RenderOptions {
                color: false,
                unicode: false,
            },
        );
        assert!(text.contains("unknown field `numa`"), "{text}");
        assert!(text.contains("s.toml:4:1"), "{text}");
        assert!(text.contains("docs/gpus.md"), "{text}");
    }

    #[test]
    fn duplicates_and_missing_models_are_errors() {
        let file = SourceFile::new(
            "s.toml",
            "[[gpus]]\nindex = 0\nmodel = \"A\"\n[[gpus]]\nindex = 0\nmodel = \"A\"\n[[gpus]]\nindex = 2\n",
        );
        let text = render_all(
            &parse(&file).unwrap_err(),
            RenderOptions {
                color: false,
                unicode: false,
            },
        );
        assert!(text.contains("two GPUs have index `0`"), "{text}");
        assert!(text.contains("GPU 2 has no model"), "{text}");
    }
}
