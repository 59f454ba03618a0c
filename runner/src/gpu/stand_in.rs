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

use toml::de::{DeTable, DeValue};

use super::inventory::{Gpu, GpuState, Inventory, Link, PciePath, Source};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span, did_you_mean, join_quoted};

/// The environment variable naming a stand-in inventory file for the `local` host.
pub const STAND_IN_ENV: &str = "GPUFLOW_GPU_INVENTORY";

/// Keys of the file's top level, and of each `[[gpus]]` table.
const TOP_KEYS: &[&str] = &[
    "driver",
    "cuda",
    "model",
    "memory-mib",
    "nvlinks",
    "power-w",
    "gpus",
];
const GPU_KEYS: &[&str] = &[
    "index",
    "uuid",
    "model",
    "memory-mib",
    "mig",
    "numa-node",
    "pcie-switch",
    "nvlink-group",
    "bus-id",
    "memory-used-mib",
    "processes",
    "ecc-errors",
    "persistence-mode",
    "sm-clock-mhz",
    "max-sm-clock-mhz",
    "power-w",
];

const FORMAT_HINT: &str =
    "see docs/gpus.md (\"Stand-in inventory\") for the keys of the file and of each `[[gpus]]`";

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

/// Checks the stand-in inventory `GPUFLOW_GPU_INVENTORY` names, if any: every problem of the
/// file at its place, after one line saying which file they make unusable and where it was
/// named (an environment variable has no place to point at).
pub fn check_env() -> Result<(), Diagnostics> {
    let Some(path) = std::env::var_os(STAND_IN_ENV).filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let path = std::path::PathBuf::from(path);
    let problems = match load(&path) {
        Ok(_) => return Ok(()),
        Err(problems) => problems,
    };
    let located = problems.iter().filter(|d| d.file.is_some()).count();
    if located == 0 {
        // The file cannot be read: its one diagnostic names the path and the variable.
        return Err(problems);
    }
    let mut out = Diagnostics::from(
        Diagnostic::unlocated(format!(
            "the stand-in GPU inventory `{}` (set by {}) cannot be used: {located} problem{} in it, each reported at its place",
            path.display(),
            STAND_IN_ENV,
            if located == 1 { "" } else { "s" }
        ))
        .hint(format!(
            "fix the file (docs/gpus.md shows the format), or unset {} to use the machine's real GPUs",
            STAND_IN_ENV
        )),
    );
    out.extend(problems);
    Err(out)
}

/// Reads a stand-in file's text. The file is walked as spanned TOML rather than deserialised
/// through serde, which stops at the first problem: every problem (each syntax error, unknown
/// key, value of the wrong type, repeated or unnamed GPU) is reported at once, at its place.
pub fn parse(file: &Arc<SourceFile>) -> Result<Inventory, Diagnostics> {
    let (root, errors) = DeTable::parse_recoverable(&file.text);
    let mut r = Reader {
        file: file.clone(),
        diagnostics: Diagnostics::new(),
    };
    if !errors.is_empty() {
        // What the parser recovered may be missing pieces: judging it would add noise.
        for e in errors {
            let span = e.span().map(Span::from).unwrap_or_default();
            let message = e.message().trim().trim_end_matches('.').to_string();
            r.diagnostics.push(
                Diagnostic::error(
                    file,
                    span,
                    format!("invalid stand-in GPU inventory: {message}"),
                )
                .hint(FORMAT_HINT),
            );
        }
        return Err(r.diagnostics);
    }
    let (top, entries) = r.top_level(&root.into_inner());
    let mut gpus = r.gpus_of(&top, entries);
    if r.diagnostics.has_errors() {
        return Err(r.diagnostics.sorted());
    }
    gpus.sort_by_key(|g| g.gpu.index);
    let links = links(&gpus, top.nvlinks.unwrap_or(1));
    Ok(Inventory {
        source: Source::StandIn {
            path: file.name.clone(),
        },
        driver: top.driver,
        cuda: top.cuda,
        gpus: gpus.into_iter().map(|g| g.gpu).collect(),
        links,
    })
}

/// A GPU with where it sits, which decides its links to the others.
struct Placed {
    gpu: Gpu,
    pcie_switch: Option<u32>,
    nvlink_group: Option<u32>,
}

/// The link between every two GPUs: `nvlinks` bonded links within an `nvlink-group`, and a
/// PCIe path by switch and NUMA node (`nvidia-smi topo -m`'s PIX, NODE, PHB or SYS).
fn links(gpus: &[Placed], nvlinks: u32) -> Vec<Vec<Link>> {
    gpus.iter()
        .map(|a| gpus.iter().map(|b| link(a, b, nvlinks)).collect())
        .collect()
}

fn link(a: &Placed, b: &Placed, nvlinks: u32) -> Link {
    if a.gpu.index == b.gpu.index {
        return Link::SELF;
    }
    let (a_numa, b_numa) = (a.gpu.numa_node, b.gpu.numa_node);
    let pcie = if a.pcie_switch.is_some() && a.pcie_switch == b.pcie_switch {
        PciePath::Pix
    } else if a_numa.is_some() && a_numa == b_numa {
        PciePath::Node
    } else if a_numa.is_none() || b_numa.is_none() {
        PciePath::Phb
    } else {
        PciePath::Sys
    };
    let nvlinked = a.nvlink_group.is_some() && a.nvlink_group == b.nvlink_group;
    Link {
        nvlinks: if nvlinked { nvlinks } else { 0 },
        pcie,
    }
}

/// The top level's values that each GPU may override.
#[derive(Default)]
struct Top {
    driver: Option<String>,
    cuda: Option<String>,
    /// The model of every GPU that does not name its own.
    model: Option<String>,
    /// The memory of every GPU that does not give its own.
    memory_mib: Option<u64>,
    /// Bonded links between two GPUs of one `nvlink-group` (default 1).
    nvlinks: Option<u32>,
    /// The scripted power draw of every GPU that does not give its own.
    power_w: Option<f64>,
}

/// One `[[gpus]]` table as written; `index` is `None` when it is missing or invalid (reported).
#[derive(Default)]
struct FileGpu {
    index: Option<u32>,
    uuid: Option<String>,
    model: Option<String>,
    memory_mib: Option<u64>,
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
    /// What its telemetry reads as power drawn, watts (made up, constant).
    power_w: Option<f64>,
}

type Key<'i> = toml::Spanned<std::borrow::Cow<'i, str>>;
type Value<'i> = toml::Spanned<DeValue<'i>>;

/// The value as a whole number without a sign, when it is one.
fn whole(value: &Value<'_>) -> Option<u64> {
    match value.get_ref() {
        DeValue::Integer(n) => u64::from_str_radix(&n.as_str().replace('_', ""), n.radix()).ok(),
        _ => None,
    }
}

/// Walks the parsed file, collecting diagnostics.
struct Reader {
    file: Arc<SourceFile>,
    diagnostics: Diagnostics,
}

impl Reader {
    /// The top-level values and the `[[gpus]]` tables; says when there is no GPU (unless
    /// `gpus` was no list of tables, which is reported as that).
    fn top_level(&mut self, root: &DeTable<'_>) -> (Top, Vec<(Span, FileGpu)>) {
        let mut top = Top::default();
        let mut entries: Vec<(Span, FileGpu)> = Vec::new();
        let mut gpus_had_problems = false;
        for (key, value) in root {
            match key.get_ref().as_ref() {
                "driver" => top.driver = self.string(value, "driver", "570.86.15"),
                "cuda" => top.cuda = self.string(value, "cuda", "12.8"),
                "model" => top.model = self.string(value, "model", "NVIDIA L40S"),
                "memory-mib" => top.memory_mib = self.number(value, "memory-mib", "46068"),
                "nvlinks" => top.nvlinks = self.number(value, "nvlinks", "18"),
                "power-w" => top.power_w = self.watts(value, "power-w"),
                "gpus" => {
                    let before = self.diagnostics.len();
                    entries = self.gpus(value);
                    gpus_had_problems = self.diagnostics.len() > before;
                }
                _ => self.unknown_key(key, TOP_KEYS, "a top-level key"),
            }
        }
        if entries.is_empty() && !gpus_had_problems {
            self.diagnostics.push(
                Diagnostic::error(
                    &self.file,
                    Span::default(),
                    "the stand-in inventory lists no GPU",
                )
                .hint("add one `[[gpus]]` table per GPU with at least `index = 0`"),
            );
        }
        (top, entries)
    }

    /// The GPUs the tables describe, with the top level's values where they give none;
    /// a table without a valid index (already reported), a repeated index or uuid, or no
    /// model is left out.
    fn gpus_of(&mut self, top: &Top, entries: Vec<(Span, FileGpu)>) -> Vec<Placed> {
        let mut gpus: Vec<Placed> = Vec::new();
        for (span, g) in entries {
            let Some(index) = g.index else {
                continue;
            };
            let uuid = g
                .uuid
                .clone()
                .unwrap_or_else(|| format!("GPU-stand-in-{index:04}"));
            if let Some(other) = gpus
                .iter()
                .find(|o| o.gpu.index == index || o.gpu.uuid == uuid)
            {
                let what = if other.gpu.index == index {
                    format!("index `{index}`")
                } else {
                    format!("uuid `{uuid}`")
                };
                self.diagnostics.push(
                    Diagnostic::error(&self.file, span, format!("two GPUs have {what}"))
                        .label("listed again here")
                        .hint("give each `[[gpus]]` its own `index` and `uuid`"),
                );
                continue;
            }
            let Some(model) = g.model.clone().or_else(|| top.model.clone()) else {
                self.diagnostics.push(
                    Diagnostic::error(&self.file, span, format!("GPU {index} has no model")).hint(
                        "add `model = \"NVIDIA L40S\"` to it, or once at the top of the file",
                    ),
                );
                continue;
            };
            gpus.push(Placed {
                gpu: Gpu {
                    index,
                    uuid,
                    model,
                    memory_mib: g.memory_mib.or(top.memory_mib).unwrap_or(0),
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
                        power_w: g.power_w.or(top.power_w),
                    },
                },
                pcie_switch: g.pcie_switch,
                nvlink_group: g.nvlink_group,
            });
        }
        gpus
    }

    fn error(&mut self, span: Span, message: String, hint: String) {
        let label = match message.split_once(" must be ") {
            Some((_, what)) => format!("expected {what}"),
            None => "here".to_string(),
        };
        self.diagnostics.push(
            Diagnostic::error(&self.file, span, message)
                .label(label)
                .hint(hint),
        );
    }

    fn unknown_key(&mut self, key: &Key<'_>, known: &[&str], what: &str) {
        let name = key.get_ref().as_ref();
        self.diagnostics.push(
            Diagnostic::error(
                &self.file,
                Span::from(key.span()),
                format!("unknown key `{name}` in the stand-in GPU inventory"),
            )
            .label(format!("not {what}"))
            .maybe_hint(did_you_mean(name, known))
            .note(format!("expected {}", join_quoted(known, "or")))
            .hint(FORMAT_HINT),
        );
    }

    fn string(&mut self, value: &Value<'_>, key: &str, example: &str) -> Option<String> {
        match value.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            _ => {
                self.error(
                    Span::from(value.span()),
                    format!("`{key}` must be a string"),
                    format!("write e.g. `{key} = \"{example}\"`"),
                );
                None
            }
        }
    }

    fn boolean(&mut self, value: &Value<'_>, key: &str) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.error(
                    Span::from(value.span()),
                    format!("`{key}` must be `true` or `false`"),
                    format!("write e.g. `{key} = true`"),
                );
                None
            }
        }
    }

    /// A whole number that fits `T` (no sign, no fraction).
    fn number<T: TryFrom<u64>>(
        &mut self,
        value: &Value<'_>,
        key: &str,
        example: &str,
    ) -> Option<T> {
        let parsed = whole(value).and_then(|n| T::try_from(n).ok());
        if parsed.is_none() {
            self.error(
                Span::from(value.span()),
                format!("`{key}` must be a whole number, 0 or more"),
                format!("write e.g. `{key} = {example}`"),
            );
        }
        parsed
    }

    /// A power in watts: a number, whole or not, 0 or more.
    fn watts(&mut self, value: &Value<'_>, key: &str) -> Option<f64> {
        let parsed = match value.get_ref() {
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            _ => whole(value).map(|n| n as f64),
        }
        .filter(|w| w.is_finite() && *w >= 0.0);
        if parsed.is_none() {
            self.error(
                Span::from(value.span()),
                format!("`{key}` must be a number of watts, 0 or more"),
                format!("write e.g. `{key} = 300` or `{key} = 287.5`"),
            );
        }
        parsed
    }

    /// The `[[gpus]]` tables, each with its span.
    fn gpus(&mut self, value: &Value<'_>) -> Vec<(Span, FileGpu)> {
        let DeValue::Array(items) = value.get_ref() else {
            self.error(
                Span::from(value.span()),
                "`gpus` must be a list of tables".into(),
                "write one `[[gpus]]` table per GPU, with at least `index = 0`".into(),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items {
            let span = Span::from(item.span());
            let DeValue::Table(table) = item.get_ref() else {
                self.error(
                    span,
                    "each entry of `gpus` must be a table".into(),
                    "write one `[[gpus]]` table per GPU, with at least `index = 0`".into(),
                );
                continue;
            };
            let mut g = FileGpu::default();
            for (key, value) in table {
                let k = key.get_ref().as_ref();
                match k {
                    "index" => g.index = self.number(value, k, "0"),
                    "uuid" => g.uuid = self.string(value, k, "GPU-5d41402a"),
                    "model" => g.model = self.string(value, k, "NVIDIA L40S"),
                    "memory-mib" => g.memory_mib = self.number(value, k, "46068"),
                    "mig" => g.mig = self.boolean(value, k),
                    "numa-node" => g.numa_node = self.number(value, k, "0"),
                    "pcie-switch" => g.pcie_switch = self.number(value, k, "0"),
                    "nvlink-group" => g.nvlink_group = self.number(value, k, "0"),
                    "bus-id" => g.bus_id = self.string(value, k, "00000000:18:00.0"),
                    "memory-used-mib" => g.memory_used_mib = self.number(value, k, "0"),
                    "processes" => g.processes = self.number(value, k, "0"),
                    "ecc-errors" => g.ecc_errors = self.number(value, k, "0"),
                    "persistence-mode" => g.persistence_mode = self.boolean(value, k),
                    "sm-clock-mhz" => g.sm_clock_mhz = self.number(value, k, "2520"),
                    "max-sm-clock-mhz" => g.max_sm_clock_mhz = self.number(value, k, "2520"),
                    "power-w" => g.power_w = self.watts(value, k),
                    _ => self.unknown_key(key, GPU_KEYS, "a key of a `[[gpus]]` table"),
                }
            }
            if !table.contains_key("index") {
                self.diagnostics.push(
                    Diagnostic::error(&self.file, span, "a GPU has no `index`")
                        .label("this `[[gpus]]` needs `index = N`")
                        .hint("add `index = N` (its position in `nvidia-smi`'s list) to this `[[gpus]]`"),
                );
            }
            out.push((span, g));
        }
        out
    }
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
        assert!(text.contains("unknown key `numa`"), "{text}");
        assert!(text.contains("did you mean `numa-node`?"), "{text}");
        assert!(text.contains("s.toml:4:1"), "{text}");
        assert!(text.contains("docs/gpus.md"), "{text}");
    }

    #[test]
    fn every_problem_is_reported_each_at_its_place() {
        // serde stopped at the first; a user fixing one per run would need five runs here.
        let file = SourceFile::new(
            "s.toml",
            "model = \"X\"\nnvlink = 4\n[[gpus]]\nindex = 0\npcie = 1\n[[gpus]]\nindex = -1\nmig = \"yes\"\n[[gpus]]\nuuid = \"GPU-x\"\n",
        );
        let problems = parse(&file).unwrap_err();
        let found: Vec<(String, String)> = problems
            .iter()
            .map(|d| (d.location(), d.message.clone()))
            .collect();
        let expected = [
            (
                "s.toml:2:1",
                "unknown key `nvlink` in the stand-in GPU inventory",
            ),
            (
                "s.toml:5:1",
                "unknown key `pcie` in the stand-in GPU inventory",
            ),
            ("s.toml:7:9", "`index` must be a whole number, 0 or more"),
            ("s.toml:8:7", "`mig` must be `true` or `false`"),
            ("s.toml:9:1", "a GPU has no `index`"),
        ];
        assert_eq!(
            found,
            expected.map(|(a, m)| (a.to_string(), m.to_string())),
            "{problems:#?}"
        );
    }

    #[test]
    fn every_syntax_error_is_reported() {
        let file = SourceFile::new("s.toml", "model = \"X\nindex = = 1\n[[gpus]]\nindex = 0\n");
        let problems = parse(&file).unwrap_err();
        assert!(problems.len() >= 2, "{problems:#?}");
        assert!(
            problems.iter().all(
                |d| d.message.starts_with("invalid stand-in GPU inventory: ")
                    && d.location().starts_with("s.toml:")
            ),
            "{problems:#?}"
        );
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

    #[test]
    fn a_scripted_power_draw_is_each_gpus_or_the_files_default() {
        let file = SourceFile::new(
            "s.toml",
            "model = \"X\"\npower-w = 300\n[[gpus]]\nindex = 0\n[[gpus]]\nindex = 1\npower-w = 87.5\n",
        );
        let inv = parse(&file).unwrap();
        assert_eq!(inv.gpus[0].state.power_w, Some(300.0));
        assert_eq!(inv.gpus[1].state.power_w, Some(87.5));

        let file = SourceFile::new(
            "s.toml",
            "model = \"X\"\n[[gpus]]\nindex = 0\npower-w = -5\n[[gpus]]\nindex = 1\npower-w = \"300\"\n",
        );
        let found: Vec<(String, String)> = parse(&file)
            .unwrap_err()
            .iter()
            .map(|d| (d.location(), d.message.clone()))
            .collect();
        let message = "`power-w` must be a number of watts, 0 or more".to_string();
        assert_eq!(
            found,
            [
                ("s.toml:4:11".to_string(), message.clone()),
                ("s.toml:7:11".to_string(), message)
            ]
        );
        let no_power = parse(&SourceFile::new(
            "s.toml",
            "model = \"X\"\n[[gpus]]\nindex = 0\n",
        ));
        assert_eq!(no_power.unwrap().gpus[0].state.power_w, None);
    }
}
