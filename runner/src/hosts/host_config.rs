//! `gpuflow.toml`: finding it, and reading its `[hosts.NAME]` tables, its `[vars]` and its
//! `[registries."NAME"]` strictly.
//!
//! The file is walked as spanned TOML rather than deserialised through serde: every problem
//! (an unknown key, a bad endpoint, a label that is also a host's name) becomes a diagnostic
//! at its exact place, with a did-you-mean for misspelt keys, and all of them are reported at
//! once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use toml::de::DeTable;

use self::reader::Reader;
pub use self::registries_table::RegistryConfig;
use super::host::{Host, LOCAL};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span};

mod host_table;
mod reader;
mod registries_table;
mod slurm_table;
#[cfg(test)]
mod tests;
mod vars_table;

/// The host file's name, looked for in the workspace root.
pub const CONFIG_FILE: &str = "gpuflow.toml";

/// `actions` (remote action sources, docs/actions.md) is read by `crate::actions`.
const TOP_KEYS: [&str; 4] = ["hosts", "vars", "actions", "registries"];
/// The hosts gpuflow knows: those of a `gpuflow.toml`, plus `local` (always present).
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    file: Option<Arc<SourceFile>>,
    hosts: Vec<Host>,
    /// `[vars]`: the workspace's configuration variables, in file order.
    vars: IndexMap<String, String>,
    /// `[registries."NAME"]`: credentials for pulls, in file order.
    registries: Vec<RegistryConfig>,
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
            registries: Vec::new(),
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
        let mut reader = Reader::new(file);
        let mut hosts = Vec::new();
        let mut vars = IndexMap::new();
        let mut registries = Vec::new();
        for (key, value) in &root {
            if key.get_ref().as_ref() == "hosts" {
                hosts = reader.hosts(value);
            } else if key.get_ref().as_ref() == "vars" {
                vars = reader.vars(value);
            } else if key.get_ref().as_ref() == "registries" {
                registries = reader.registries(value);
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
            registries,
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
        let mut reader = Reader::new(file);
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

    /// `[registries."NAME"]`: the credentials pulls from each registry send when the step
    /// gives none.
    pub fn registries(&self) -> &[RegistryConfig] {
        &self.registries
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
