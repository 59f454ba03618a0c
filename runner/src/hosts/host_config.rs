//! `gpuflow.toml`: finding it, and reading its `[hosts.NAME]` tables and its `[vars]`
//! strictly.
//!
//! The file is walked as spanned TOML rather than deserialised through serde: every problem
//! (an unknown key, a bad endpoint, a label that is also a host's name) becomes a diagnostic
//! at its exact place, with a did-you-mean for misspelt keys, and all of them are reported at
//! once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::host::{Host, HostEndpoint, LOCAL};
use crate::backend::{BackendError, Endpoint};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span, did_you_mean, join_quoted};

/// The host file's name, looked for in the workspace root.
pub const CONFIG_FILE: &str = "gpuflow.toml";

/// `actions` (remote action sources, docs/actions.md) is read by `crate::actions`.
const TOP_KEYS: [&str; 3] = ["hosts", "vars", "actions"];
const HOST_KEYS: [&str; 5] = [
    "endpoint",
    "labels",
    "gpus",
    "gpu-inventory",
    "gpu-probe-image",
];

/// The hosts gpuflow knows: those of a `gpuflow.toml`, plus `local` (always present).
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    file: Option<Arc<SourceFile>>,
    hosts: Vec<Host>,
    /// `[vars]`: the workspace's configuration variables, in file order.
    vars: IndexMap<String, String>,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self::implicit()
    }
}

impl HostConfig {
    /// No host file: only the local engine.
    pub fn implicit() -> Self {
        Self {
            file: None,
            hosts: vec![Host::local()],
            vars: IndexMap::new(),
        }
    }

    /// `explicit` (`--config`) when given, else the `gpuflow.toml` of the workspace that
    /// contains `cwd`; no such file means [`Self::implicit`]. An explicit path must exist.
    pub fn find(explicit: Option<&Path>, cwd: &Path) -> Result<Self, Diagnostics> {
        if let Some(path) = explicit {
            return Self::load(path);
        }
        let path = workspace_root(cwd).join(CONFIG_FILE);
        if path.is_file() {
            Self::load(&path)
        } else {
            Ok(Self::implicit())
        }
    }

    /// Reads and checks one host file.
    pub fn load(path: &Path) -> Result<Self, Diagnostics> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Diagnostics::from(
                Diagnostic::unlocated(format!(
                    "cannot read host file `{}`: {}",
                    path.display(),
                    io_reason(&e)
                ))
                .hint(format!(
                    "create it with a `[hosts.NAME]` table per host (docs/hosts.md), or leave \
                     out `--config` to use the `{CONFIG_FILE}` of the workspace root"
                )),
            )
        })?;
        Self::parse(&SourceFile::new(path.display().to_string(), text))
    }

    /// Checks a host file's text; every problem is reported, in file order.
    pub fn parse(file: &Arc<SourceFile>) -> Result<Self, Diagnostics> {
        let root = match DeTable::parse(&file.text) {
            Ok(root) => root.into_inner(),
            Err(e) => {
                let span = e.span().map(Span::from).unwrap_or_default();
                let message = e.message().trim().trim_end_matches('.').to_string();
                return Err(Diagnostics::from(
                    Diagnostic::error(file, span, format!("invalid TOML: {message}"))
                        .hint("see docs/hosts.md for the format of `gpuflow.toml`"),
                ));
            }
        };
        let mut reader = Reader {
            file: file.clone(),
            diagnostics: Diagnostics::new(),
            declared: Vec::new(),
        };
        let mut hosts = Vec::new();
        let mut vars = IndexMap::new();
        for (key, value) in &root {
            if key.get_ref().as_ref() == "hosts" {
                hosts = reader.hosts(value);
            } else if key.get_ref().as_ref() == "vars" {
                vars = reader.vars(value);
            } else if key.get_ref().as_ref() == "actions" {
                // Checked where remote actions are resolved.
            } else {
                reader.unknown_key(key, &TOP_KEYS, "a top-level key");
            }
        }
        if !hosts.iter().any(|h| h.name == LOCAL) {
            hosts.insert(0, Host::local());
        }
        reader.labels_that_are_names();
        if reader.diagnostics.has_errors() {
            return Err(reader.diagnostics.sorted());
        }
        Ok(Self {
            file: Some(file.clone()),
            hosts,
            vars,
        })
    }

    /// Only the `[vars]` of a host file's text, checked as [`Self::parse`] checks them: for a
    /// file that is not on disk (a commit's), whose other keys (a `gpu-inventory` path
    /// relative to it) cannot be checked from here.
    pub fn parse_vars(file: &Arc<SourceFile>) -> Result<IndexMap<String, String>, Diagnostics> {
        let root = DeTable::parse(&file.text).map_err(|e| {
            Diagnostics::from(Diagnostic::error(
                file,
                e.span().map(Span::from).unwrap_or_default(),
                format!("invalid TOML: {}", e.message().trim().trim_end_matches('.')),
            ))
        })?;
        let mut reader = Reader {
            file: file.clone(),
            diagnostics: Diagnostics::new(),
            declared: Vec::new(),
        };
        let vars = root
            .get_ref()
            .get("vars")
            .map(|value| reader.vars(value))
            .unwrap_or_default();
        if reader.diagnostics.has_errors() {
            return Err(reader.diagnostics.sorted());
        }
        Ok(vars)
    }

    /// The host file read, if any.
    pub fn file(&self) -> Option<&Arc<SourceFile>> {
        self.file.as_ref()
    }

    /// Every host, in file order; `local` first unless the file places it.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    pub fn get(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// `[vars]`: what every run of the workspace reads as `vars.NAME` (`--var` overrides).
    pub fn vars(&self) -> &IndexMap<String, String> {
        &self.vars
    }

    /// Host names, for lists and suggestions.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(|h| h.name.as_str())
    }
}

/// The nearest ancestor of `cwd` holding `.git` (a directory, or a file in a git worktree);
/// `cwd` itself when there is none.
pub fn workspace_root(cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(cwd)
        .to_path_buf()
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        _ => e.to_string(),
    }
}

/// Walks the parsed document, collecting diagnostics.
struct Reader {
    file: Arc<SourceFile>,
    diagnostics: Diagnostics,
    /// Every `[hosts.NAME]` written with its labels, also those with errors, for the
    /// label/name check.
    declared: Vec<(String, Span, Vec<String>)>,
}

type Key<'i> = Spanned<std::borrow::Cow<'i, str>>;

impl Reader {
    fn unknown_key(&mut self, key: &Key<'_>, known: &[&str], what: &str) {
        let name = key.get_ref().as_ref();
        let d = Diagnostic::error(
            &self.file,
            Span::from(key.span()),
            format!("unknown key `{name}`"),
        )
        .label(format!("not {what}"))
        .maybe_hint(did_you_mean(name, known))
        .note(format!("expected {}", join_quoted(known, "or")));
        self.diagnostics.push(d);
    }

    fn hosts(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<Host> {
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

    fn push(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    /// `[vars]`: strings only, as GitHub's configuration variables are, so `vars.N` is the
    /// same text whether it came from here or from `--var N=…` (a workflow wanting a number
    /// reads `fromJSON(vars.N)`).
    fn vars(&mut self, value: &Spanned<DeValue<'_>>) -> IndexMap<String, String> {
        let DeValue::Table(table) = value.get_ref() else {
            self.push(
                Diagnostic::error(
                    &self.file,
                    Span::from(value.span()),
                    "`vars` must be a table of `NAME = \"value\"`",
                )
                .hint("write `[vars]` followed by one line per variable: `MODEL = \"llama-3-8b\"`"),
            );
            return IndexMap::new();
        };
        let mut vars: IndexMap<String, String> = IndexMap::new();
        let mut spans: Vec<Span> = Vec::new();
        for (key, entry) in table {
            let name = key.get_ref().as_ref();
            let key_span = Span::from(key.span());
            if let Some(problem) = invalid_var_name(name) {
                self.push(
                    Diagnostic::error(
                        &self.file,
                        key_span,
                        format!("invalid variable name `{name}`"),
                    )
                    .label(problem)
                    .hint("use letters, digits and `_`, starting with a letter or `_`, so that `vars.NAME` reads it"),
                );
                continue;
            }
            // Context property names are case-insensitive: `vars.model` would read either.
            if let Some(i) = vars.keys().position(|k| k.eq_ignore_ascii_case(name)) {
                let first = vars
                    .get_index(i)
                    .map(|(k, _)| k.clone())
                    .unwrap_or_default();
                self.push(
                    Diagnostic::error(
                        &self.file,
                        key_span,
                        format!("variable `{name}` is given twice"),
                    )
                    .label(format!("the same as `{first}`: names are case-insensitive"))
                    .hint("remove one of them, or rename it")
                    .related(&self.file, spans[i], "given here first"),
                );
                continue;
            }
            let text = match entry.get_ref() {
                DeValue::String(text) => text.to_string(),
                other => {
                    let span = Span::from(entry.span());
                    let written = self
                        .file
                        .text
                        .get(span.start..span.end)
                        .unwrap_or("")
                        .trim();
                    let kind = match other {
                        DeValue::Table(_) => "a table",
                        DeValue::Array(_) => "a list",
                        DeValue::Boolean(_) => "a boolean",
                        DeValue::Datetime(_) => "a date",
                        _ => "a number",
                    };
                    let hint = if matches!(other, DeValue::Table(_) | DeValue::Array(_)) {
                        format!(
                            "write it as JSON text, `{name} = '[\"a\", \"b\"]'`, and read it with `fromJSON(vars.{name})`"
                        )
                    } else {
                        format!(
                            "quote it: `{name} = \"{written}\"` (a workflow that needs a number or boolean reads `fromJSON(vars.{name})`)"
                        )
                    };
                    self.push(
                        Diagnostic::error(
                            &self.file,
                            span,
                            format!("`vars.{name}` must be a string"),
                        )
                        .label(format!("{kind}, not a string"))
                        .hint(hint)
                        .note("configuration variables are strings, as on GitHub"),
                    );
                    continue;
                }
            };
            vars.insert(name.to_string(), text);
            spans.push(key_span);
        }
        vars
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
                _ => self.unknown_key(key, &HOST_KEYS, "a key of a host"),
            }
        }
        self.declared
            .push((host_name.clone(), name_span, labels.clone()));
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
            span: Some(name_span),
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

    fn string(&mut self, value: &Spanned<DeValue<'_>>, key: &str, example: &str) -> Option<String> {
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

    /// A label equal to another host's name would make `runs-on: NAME` ambiguous. Checked over
    /// every host written, also those with other errors, so all problems show at once.
    fn labels_that_are_names(&mut self) {
        let declared = std::mem::take(&mut self.declared);
        for (name, span, labels) in &declared {
            for label in labels {
                let Some((_, other_span, _)) = declared
                    .iter()
                    .find(|(other, _, _)| other == label && other != name)
                else {
                    continue;
                };
                let d = Diagnostic::error(
                    &self.file,
                    *span,
                    format!(
                        "host `{name}` has the label `{label}`, which is also the name of another host"
                    ),
                )
                .label("this host")
                .hint(format!(
                    "rename the label or the host: `runs-on: {label}` must mean one thing"
                ))
                .related(&self.file, *other_span, "the host of that name");
                self.push(d);
            }
        }
    }
}

/// Why `name` cannot be a configuration variable's name, if it cannot: GitHub's rule
/// (letters, digits, `_`, not starting with a digit), which also makes `vars.NAME` read it.
fn invalid_var_name(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => Some("it is empty"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => {
            Some("must start with a letter or `_`")
        }
        _ if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            Some("only letters, digits and `_` are allowed")
        }
        _ => None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::{RenderOptions, render_all};

    fn parse(text: &str) -> Result<HostConfig, Diagnostics> {
        HostConfig::parse(&SourceFile::new("gpuflow.toml", text))
    }

    fn rendered(text: &str) -> String {
        render_all(&parse(text).unwrap_err(), RenderOptions::default())
    }

    #[test]
    fn reads_hosts_in_file_order_with_local_first() {
        let config = parse(
            r#"
# a laptop driving two GPU nodes
[hosts.node-b]
endpoint = "ssh://me@node-b"
labels = ["blackwell", "8gpu"]
gpus = 8

[hosts.old]
endpoint = "tcp://10.0.0.7:2375"
"#,
        )
        .unwrap();
        let names: Vec<&str> = config.names().collect();
        assert_eq!(names, ["local", "node-b", "old"]);
        let node = config.get("node-b").unwrap();
        assert_eq!(node.labels, ["blackwell", "8gpu"]);
        assert_eq!(node.gpus, Some(8));
        assert_eq!(node.endpoint().unwrap().to_string(), "ssh://me@node-b");
        assert_eq!(config.get("local").unwrap().endpoint, HostEndpoint::FromEnv);
        let file = config.file().unwrap();
        assert_eq!(file.location(node.span.unwrap()), "gpuflow.toml:3:8");
    }

    #[test]
    fn local_may_be_given_labels_and_keeps_docker_host() {
        let config = parse("[hosts.local]\nlabels = [\"cpu\"]\n").unwrap();
        assert_eq!(config.hosts().len(), 1);
        let local = config.get("local").unwrap();
        assert_eq!(local.endpoint, HostEndpoint::FromEnv);
        assert_eq!(local.labels, ["cpu"]);
    }

    #[test]
    fn every_problem_is_reported_at_its_place_with_a_fix() {
        let text = r#"[host]
x = 1

[hosts.node-a]
endpoint = "ssh://me@node-a:2222"
lables = ["blackwell"]

[hosts.node-b]
labels = ["gpu", "gpu", "node-a", "has space"]
gpus = -1

[hosts."bad name"]
endpoint = 5
"#;
        insta::assert_snapshot!("host_file_problems", rendered(text));
    }

    #[test]
    fn a_label_naming_another_host_is_refused() {
        let text = "[hosts.a]\nendpoint = \"ssh://a\"\nlabels = [\"b\"]\n[hosts.b]\nendpoint = \"ssh://b\"\n";
        let out = rendered(text);
        assert!(
            out.contains("host `a` has the label `b`, which is also the name of another host"),
            "{out}"
        );
        assert!(out.contains("gpuflow.toml:1:8"), "{out}");
    }

    #[test]
    fn vars_are_strings_in_file_order() {
        let config = parse("[vars]\nMODEL = \"llama-3-8b\"\n_tp = '2'\n").unwrap();
        let vars: Vec<(&str, &str)> = config
            .vars()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(vars, [("MODEL", "llama-3-8b"), ("_tp", "2")]);
        assert!(HostConfig::implicit().vars().is_empty());
    }

    #[test]
    fn a_var_that_is_not_a_string_is_refused_at_its_value_with_the_quoted_form() {
        let out = rendered("[vars]\nGPUS = 8\nFAST = true\nLIST = [1]\n");
        assert!(out.contains("error: `vars.GPUS` must be a string"), "{out}");
        assert!(out.contains("gpuflow.toml:2:8"), "{out}");
        assert!(out.contains("quote it: `GPUS = \"8\"`"), "{out}");
        assert!(out.contains("fromJSON(vars.GPUS)"), "{out}");
        assert!(out.contains("gpuflow.toml:3:8"), "{out}");
        assert!(out.contains("quote it: `FAST = \"true\"`"), "{out}");
        assert!(out.contains("gpuflow.toml:4:8"), "{out}");
        assert!(out.contains("a list, not a string"), "{out}");
    }

    #[test]
    fn parse_vars_reads_vars_without_the_hosts_files() {
        let file = SourceFile::new(
            "gpuflow.toml",
            "[hosts.ci]\nendpoint = \"ssh://ci\"\ngpu-inventory = \"not-here.toml\"\n[vars]\nPOOL = \"a\"\n",
        );
        assert!(
            HostConfig::parse(&file).is_err(),
            "the inventory is missing"
        );
        let vars = HostConfig::parse_vars(&file).unwrap();
        assert_eq!(vars.get("POOL").map(String::as_str), Some("a"));
        let bad = SourceFile::new("gpuflow.toml", "[vars]\nN = 1\n");
        assert!(HostConfig::parse_vars(&bad).is_err());
    }

    #[test]
    fn var_names_are_checked_and_case_insensitively_unique() {
        let out = rendered("[vars]\n\"my-var\" = \"x\"\nModel = \"a\"\nMODEL = \"b\"\n");
        assert!(out.contains("invalid variable name `my-var`"), "{out}");
        assert!(out.contains("gpuflow.toml:2:1"), "{out}");
        assert!(out.contains("variable `MODEL` is given twice"), "{out}");
        assert!(out.contains("gpuflow.toml:4:1"), "{out}");
        assert!(out.contains("the same as `Model`"), "{out}");
        let out = rendered("vars = \"x\"\n");
        assert!(out.contains("`vars` must be a table"), "{out}");
    }

    #[test]
    fn toml_syntax_errors_point_at_the_place() {
        let out = rendered("[hosts.a]\nendpoint = \"ssh://a\nlabels = []\n");
        assert!(out.starts_with("error: invalid TOML: "), "{out}");
        assert!(out.contains("gpuflow.toml:2:"), "{out}");
    }

    #[test]
    fn hosts_must_be_tables() {
        let out = rendered("hosts = 3\n");
        assert!(out.contains("`hosts` must be a table"), "{out}");
        let out = rendered("[hosts]\nnode = \"ssh://x\"\n");
        assert!(out.contains("host `node` must be a table"), "{out}");
        assert!(out.contains("[hosts.node]"), "{out}");
    }

    #[test]
    fn the_file_is_found_in_the_workspace_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        let cwd = root.join("a/b");
        assert_eq!(
            HostConfig::find(None, &cwd).unwrap(),
            HostConfig::implicit()
        );

        std::fs::write(
            root.join(CONFIG_FILE),
            "[hosts.n]\nendpoint = \"ssh://n\"\n",
        )
        .unwrap();
        let config = HostConfig::find(None, &cwd).unwrap();
        assert!(config.get("n").is_some());

        let missing = root.join("nope.toml");
        let e = HostConfig::find(Some(&missing), &cwd).unwrap_err();
        let out = render_all(&e, RenderOptions::default());
        assert!(out.contains("cannot read host file `"), "{out}");
        assert!(out.contains("nope.toml`: no such file"), "{out}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn never_panics(text in "(\\[hosts\\.[a-z]{1,3}\\]\n|endpoint = \"[a-z:/@]{0,12}\"\n|labels = \\[\"[a-z]{0,3}\"\\]\n|gpus = -?[0-9]{1,3}\n|[a-z =\"\\[\\]]{0,8}\n){0,6}") {
            let _ = parse(&text);
        }
    }
}
