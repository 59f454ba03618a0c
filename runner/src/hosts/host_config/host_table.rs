//! `[hosts.NAME]` tables: each host's endpoint, labels and GPU keys, checked at their places.

use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Key, Reader};
use crate::backend::{BackendError, Endpoint};
use crate::diag::{Diagnostic, Span};
use crate::hosts::host::{Host, HostEndpoint, LOCAL};

const HOST_KEYS: [&str; 8] = [
    "endpoint",
    "labels",
    "gpus",
    "gpu-inventory",
    "gpu-probe-image",
    "slurm",
    "engine-leases",
    "lease-image",
];

impl Reader {
    pub(super) fn hosts(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<Host> {
        let DeValue::Table(table) = value.get_ref() else {
            self.push(
                Diagnostic::error(
                    &self.file,
                    Span::from(value.span()),
                    "`hosts` must be a table",
                )
                .hint(
                    "write one table per host: `[hosts.gpu-node]` with \
                         `endpoint = \"ssh://user@gpu-node\"`",
                ),
            );
            return Vec::new();
        };
        let mut hosts = Vec::new();
        for (name, entry) in table {
            if let Some(host) = self.host(name, entry) {
                hosts.push(host);
            }
        }
        hosts
    }

    fn host(&mut self, name: &Key<'_>, entry: &Spanned<DeValue<'_>>) -> Option<Host> {
        let host_name = name.get_ref().to_string();
        let name_span = Span::from(name.span());
        if let Some(problem) = invalid_name(&host_name) {
            self.push(
                Diagnostic::error(
                    &self.file,
                    name_span,
                    format!("invalid host name `{host_name}`"),
                )
                .label(problem)
                .hint(
                    "use letters, digits, `-`, `_` and `.`, starting with a letter or digit (it is \
                         what `runs-on` and `--host` name)",
                ),
            );
        }
        let DeValue::Table(table) = entry.get_ref() else {
            self.push(
                Diagnostic::error(
                    &self.file,
                    Span::from(entry.span()),
                    format!("host `{host_name}` must be a table"),
                )
                .hint(format!(
                    "write `[hosts.{host_name}]` followed by \
                         `endpoint = \"ssh://user@{host_name}\"`"
                )),
            );
            return None;
        };
        let mut endpoint = None;
        let mut labels = Vec::new();
        let mut gpus = None;
        let mut gpu_inventory = None;
        let mut gpu_probe_image = None;
        let mut slurm = None;
        let mut engine_leases = None;
        let mut lease_image = None;
        for (key, value) in table {
            match key.get_ref().as_ref() {
                "endpoint" => endpoint = self.endpoint(value),
                "labels" => labels = self.labels(&host_name, value),
                "gpus" => gpus = self.gpus(value),
                "gpu-inventory" => gpu_inventory = self.gpu_inventory(value),
                "gpu-probe-image" => {
                    gpu_probe_image = self.string(
                        value,
                        "gpu-probe-image",
                        "nvidia/cuda:12.8.0-base-ubuntu24.04",
                    );
                }
                "slurm" => slurm = Some(self.slurm(&host_name, value)),
                "engine-leases" => engine_leases = self.boolean(value, "engine-leases"),
                "lease-image" => lease_image = self.string(value, "lease-image", "busybox:1.36"),
                _ => self.unknown_key(key, &HOST_KEYS, "a key of a host"),
            }
        }
        self.declared
            .push((host_name.clone(), name_span, labels.clone()));
        if let Some(slurm) = slurm {
            return self.slurm_host(host_name, name_span, table, slurm, labels, gpu_inventory);
        }
        let endpoint = match endpoint {
            Some(endpoint) => HostEndpoint::Configured(endpoint),
            None if host_name == LOCAL => HostEndpoint::FromEnv,
            None => {
                if !table.contains_key("endpoint") {
                    self.push(
                        Diagnostic::error(
                            &self.file,
                            name_span,
                            format!("host `{host_name}` has no `endpoint`"),
                        )
                        .label("an `endpoint` key is needed here")
                        .hint(format!(
                            "add `endpoint = \"ssh://user@{host_name}\"` (or `tcp://…`, \
                                 `unix://…`) to `[hosts.{host_name}]`"
                        )),
                    );
                }
                return None;
            }
        };
        Some(Host {
            name: host_name,
            endpoint,
            labels,
            gpus,
            gpu_inventory,
            gpu_probe_image,
            engine_leases,
            lease_image,
            span: Some(name_span),
            slurm: None,
        })
    }

    /// A Slurm cluster: no `endpoint` (each job uses its node's own engine); its GPUs are
    /// Slurm's to allocate, described by `gpu-inventory` (stand-in nodes) or found on the node.
    fn slurm_host(
        &mut self,
        name: String,
        span: Span,
        table: &toml::de::DeTable<'_>,
        slurm: Option<crate::hosts::SlurmSettings>,
        labels: Vec<String>,
        gpu_inventory: Option<PathBuf>,
    ) -> Option<Host> {
        if let Some((key, _)) = table.get_key_value("endpoint") {
            self.push(
                Diagnostic::error(
                    &self.file,
                    Span::from(key.span()),
                    format!("host `{name}` is a Slurm cluster and cannot have an `endpoint`"),
                )
                .label("each job runs on the Docker engine of the node Slurm places it on")
                .hint(format!(
                    "remove `endpoint`, or make `[hosts.{name}]` a Docker host without `slurm`"
                )),
            );
        }
        if name == LOCAL {
            self.push(
                Diagnostic::error(&self.file, span, "the `local` host cannot be a Slurm cluster")
                    .hint("name the cluster, e.g. `[hosts.cluster.slurm]`, and choose it with `runs-on: cluster`"),
            );
        }
        Some(Host {
            name,
            endpoint: HostEndpoint::FromEnv,
            labels,
            gpus: None,
            gpu_inventory,
            gpu_probe_image: None,
            engine_leases: None,
            lease_image: None,
            span: Some(span),
            slurm: Some(std::sync::Arc::new(slurm?)),
        })
    }

    fn endpoint(&mut self, value: &Spanned<DeValue<'_>>) -> Option<Endpoint> {
        let span = Span::from(value.span());
        let DeValue::String(text) = value.get_ref() else {
            self.push(
                Diagnostic::error(&self.file, span, "`endpoint` must be a string")
                    .hint("write e.g. `endpoint = \"ssh://user@gpu-node\"`"),
            );
            return None;
        };
        match Endpoint::parse(text) {
            Ok(Endpoint::Ssh { destination }) if destination.starts_with('-') => {
                // ssh would read it as an option, not a host.
                self.push(
                    Diagnostic::error(
                        &self.file,
                        span,
                        format!(
                            "invalid Docker endpoint `{text}`: the ssh destination starts with `-`"
                        ),
                    )
                    .label("not a host name")
                    .hint("write `ssh://user@host`"),
                );
                None
            }
            Ok(endpoint) => Some(endpoint),
            Err(e) => {
                let (message, hint) = match &e {
                    BackendError::InvalidEndpoint { .. } => (e.to_string(), e.hint()),
                    other => (other.to_string(), None),
                };
                self.push(
                    Diagnostic::error(&self.file, span, message)
                        .label("not an endpoint gpuflow can use")
                        .maybe_hint(hint),
                );
                None
            }
        }
    }

    fn labels(&mut self, host: &str, value: &Spanned<DeValue<'_>>) -> Vec<String> {
        let DeValue::Array(items) = value.get_ref() else {
            self.push(
                Diagnostic::error(
                    &self.file,
                    Span::from(value.span()),
                    "`labels` must be a list of strings",
                )
                .hint("write e.g. `labels = [\"blackwell\", \"8gpu\"]`"),
            );
            return Vec::new();
        };
        let mut labels: Vec<String> = Vec::new();
        for item in items {
            let span = Span::from(item.span());
            match item.get_ref() {
                DeValue::String(label) if invalid_name(label).is_none() => {
                    if labels.iter().any(|l| l == label.as_ref()) {
                        self.push(
                            Diagnostic::error(
                                &self.file,
                                span,
                                format!("label `{label}` is listed twice for host `{host}`"),
                            )
                            .label("repeated")
                            .hint("remove one of them"),
                        );
                    } else {
                        labels.push(label.to_string());
                    }
                }
                DeValue::String(label) => {
                    let problem = invalid_name(label).unwrap_or_default();
                    self.push(
                        Diagnostic::error(&self.file, span, format!("invalid label `{label}`"))
                            .label(problem)
                            .hint("use letters, digits, `-`, `_` and `.`, as in `runs-on` values"),
                    );
                }
                _ => self.push(
                    Diagnostic::error(&self.file, span, "a label must be a string")
                        .hint("quote it: `labels = [\"8gpu\"]`"),
                ),
            }
        }
        labels
    }

    fn gpus(&mut self, value: &Spanned<DeValue<'_>>) -> Option<u32> {
        let span = Span::from(value.span());
        let parsed = match value.get_ref() {
            DeValue::Integer(n) => {
                u32::from_str_radix(&n.as_str().replace('_', ""), n.radix()).ok()
            }
            _ => None,
        };
        if parsed.is_none() {
            self.push(
                Diagnostic::error(&self.file, span, "`gpus` must be a whole number of GPUs")
                    .label("expected e.g. `8`")
                    .hint("write how many GPUs the host has, e.g. `gpus = 8`"),
            );
        }
        parsed
    }

    pub(super) fn string(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        key: &str,
        example: &str,
    ) -> Option<String> {
        match value.get_ref() {
            DeValue::String(s) if !s.trim().is_empty() => Some(s.to_string()),
            _ => {
                self.push(
                    Diagnostic::error(
                        &self.file,
                        Span::from(value.span()),
                        format!("`{key}` must be a non-empty string"),
                    )
                    .hint(format!("write e.g. `{key} = \"{example}\"`")),
                );
                None
            }
        }
    }

    fn boolean(&mut self, value: &Spanned<DeValue<'_>>, key: &str) -> Option<bool> {
        if let DeValue::Boolean(b) = value.get_ref() {
            return Some(*b);
        }
        self.push(
            Diagnostic::error(
                &self.file,
                Span::from(value.span()),
                format!("`{key}` must be `true` or `false`"),
            )
            .hint(format!("write e.g. `{key} = true` (no quotes)")),
        );
        None
    }

    /// A stand-in inventory file, relative to the host file's folder; read and checked here,
    /// so its problems are reported with the host file's.
    fn gpu_inventory(&mut self, value: &Spanned<DeValue<'_>>) -> Option<PathBuf> {
        let text = self.string(value, "gpu-inventory", "gpus/stand-in.toml")?;
        let base = Path::new(&self.file.name)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let path = base.join(&text);
        if let Err(problems) = crate::gpu::stand_in::load(&path) {
            let key_span = Span::from(value.span());
            let located: Vec<Diagnostic> = problems
                .into_vec()
                .into_iter()
                .filter_map(|p| {
                    if p.file.is_some() {
                        return Some(p);
                    }
                    // The file cannot be read: said at the key that names it.
                    let mut d = Diagnostic::error(
                        &self.file,
                        key_span,
                        format!(
                            "the stand-in GPU inventory `{text}` cannot be used: {}",
                            p.message
                        ),
                    )
                    .label(format!("read as `{}`", path.display()))
                    .hint("fix the path: it is relative to this host file's folder");
                    d.notes = p.notes;
                    self.push(d);
                    None
                })
                .collect();
            // The file's own problems, every one at its place in it (not only the first), and
            // at the key one line saying which file they make unusable.
            if !located.is_empty() {
                let n = located.len();
                self.push(
                    Diagnostic::error(
                        &self.file,
                        key_span,
                        format!(
                            "the stand-in GPU inventory `{text}` cannot be used: {n} problem{} in it, each reported at its place",
                            if n == 1 { "" } else { "s" }
                        ),
                    )
                    .label(format!("read as `{}`", path.display()))
                    .hint("fix the file (docs/gpus.md shows the format), or the path: it is relative to this host file's folder"),
                );
                for d in located {
                    self.push(d);
                }
            }
            return None;
        }
        Some(path)
    }
}

/// Why `name` cannot be a host name or label, if it cannot.
fn invalid_name(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => Some("it is empty"),
        Some(c) if !c.is_ascii_alphanumeric() => Some("must start with a letter or digit"),
        _ if !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) => {
            Some("only letters, digits, `-`, `_` and `.` are allowed")
        }
        _ => None,
    }
}
