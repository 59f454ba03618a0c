//! `gpuflow validate [PATHS…]`: loads every workflow and action file given (folders are
//! searched for `*.yml`/`*.yaml`), prints every problem, and exits 0 (valid, warnings
//! allowed), 1 (errors found) or 2 (a path could not be read).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::actions::ActionResolver;
use crate::check::load_and_check_with;
use crate::diag::{Diagnostic, Diagnostics, ExitCode, RenderOptions, Severity, render};
use crate::hosts::{CONFIG_FILE, HostConfig};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workflow or action files, or folders to search for `*.yml` and `*.yaml` (files named
    /// `action.yml` are actions). Default: `workflows/` and `actions/` of the current folder.
    pub paths: Vec<PathBuf>,

    /// How to print problems: `text` for people, `json` for editors and CI.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let mut unreadable = Diagnostics::new();
    let files = collect_files(&args.paths, &mut unreadable);
    let mut all = Diagnostics::new();
    let mut files_with_errors = 0;
    // One resolver per workspace: a remote action many files use is fetched once.
    let mut resolvers: std::collections::HashMap<PathBuf, ActionResolver> =
        std::collections::HashMap::new();
    // And one read of its host file.
    let mut host_files: std::collections::HashMap<PathBuf, Option<HostConfig>> =
        std::collections::HashMap::new();
    for file in &files {
        let workspace = crate::workflow::workspace_of(file);
        let resolver = resolvers
            .entry(workspace.clone())
            .or_insert_with(|| ActionResolver::new(&workspace));
        match load_and_check_with(file, resolver) {
            Ok((loaded, diags)) => {
                if diags.has_errors() {
                    files_with_errors += 1;
                }
                all.extend(diags);
                if let crate::workflow::Loaded::Workflow(Some(wf)) = &loaded {
                    let hosts = host_files
                        .entry(workspace.clone())
                        .or_insert_with(|| workspace_hosts(&workspace));
                    if let Some(hosts) = hosts {
                        all.extend(unmatched_runs_on(wf, hosts));
                    }
                }
            }
            Err(d) => unreadable.push(*d),
        }
    }
    let all = all.sorted();
    let mut summary = summary(&all, files.len(), files_with_errors);
    if !unreadable.is_empty() {
        let n = unreadable.len();
        let unread = if n == 1 {
            "1 path could not be read".to_owned()
        } else {
            format!("{n} paths could not be read")
        };
        summary = if files.is_empty() {
            unread
        } else {
            format!("{unread}; {summary}")
        };
    }
    match args.format {
        Format::Text => {
            let mut out = String::new();
            for d in unreadable.iter().chain(all.iter()) {
                out.push_str(&render(d, render_opts));
                out.push_str("\n\n");
            }
            out.push_str(&summary);
            eprintln!("{out}");
        }
        Format::Json => {
            let report = JsonReport {
                files: files.len(),
                errors: all.error_count() + unreadable.len(),
                warnings: all.warning_count(),
                diagnostics: unreadable
                    .iter()
                    .chain(all.iter())
                    .map(JsonDiagnostic::from)
                    .collect(),
            };
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
    }
    Ok(if !unreadable.is_empty() {
        ExitCode::Usage
    } else if all.has_errors() {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}

/// Every file to check, in a stable order. Paths that do not exist become diagnostics.
pub(super) fn collect_files(paths: &[PathBuf], unreadable: &mut Diagnostics) -> Vec<PathBuf> {
    let defaults;
    let paths = if paths.is_empty() {
        defaults = ["workflows", "actions"]
            .into_iter()
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .collect::<Vec<_>>();
        if defaults.is_empty() {
            unreadable.push(
                Diagnostic::unlocated("no `workflows/` folder here")
                    .hint("run `gpuflow validate` in a repository with `workflows/`, or name the files to check"),
            );
        }
        &defaults
    } else {
        paths
    };
    let mut files = BTreeSet::new();
    for path in paths {
        if path.is_dir() {
            walk(path, &mut files, unreadable);
        } else if path.is_file() {
            files.insert(path.clone());
        } else {
            unreadable.push(
                Diagnostic::unlocated(format!("`{}` does not exist", path.display()))
                    .hint("give a workflow file, an action file, or a folder holding them"),
            );
        }
    }
    files.into_iter().collect()
}

/// Adds every `*.yml`/`*.yaml` below `dir`, skipping hidden folders (`.git`, `.gpuflow`).
fn walk(dir: &Path, files: &mut BTreeSet<PathBuf>, unreadable: &mut Diagnostics) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(err) => {
            unreadable.push(Diagnostic::unlocated(format!(
                "cannot read folder `{}`: {err}",
                dir.display()
            )));
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if path.is_dir() {
            if !hidden {
                walk(&path, files, unreadable);
            }
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yml" | "yaml")
        ) {
            files.insert(path);
        }
    }
}

/// "2 errors and 1 warning in 1 of 3 files", or "3 files valid".
fn summary(diags: &Diagnostics, files: usize, files_with_errors: usize) -> String {
    let plural = |n: usize, word: &str| {
        if n == 1 {
            format!("1 {word}")
        } else {
            format!("{n} {word}s")
        }
    };
    let errors = diags.error_count();
    let warnings = diags.warning_count();
    if errors == 0 {
        let valid = format!("{} valid", plural(files, "file"));
        return if warnings == 0 {
            valid
        } else {
            format!("{valid}, {}", plural(warnings, "warning"))
        };
    }
    let mut counts = plural(errors, "error");
    if warnings > 0 {
        counts = format!("{counts} and {}", plural(warnings, "warning"));
    }
    format!(
        "{counts} in {files_with_errors} of {}",
        plural(files, "file")
    )
}

#[derive(Serialize)]
struct JsonReport {
    files: usize,
    errors: usize,
    warnings: usize,
    diagnostics: Vec<JsonDiagnostic>,
}

/// One diagnostic for editors and CI: 1-based line and column (in characters) of the start
/// and end of the span.
#[derive(Serialize)]
struct JsonDiagnostic {
    file: Option<String>,
    line: Option<usize>,
    column: Option<usize>,
    end: Option<JsonPosition>,
    severity: &'static str,
    message: String,
    label: Option<String>,
    hints: Vec<String>,
    notes: Vec<String>,
}

#[derive(Serialize)]
struct JsonPosition {
    line: usize,
    column: usize,
}

impl From<&Diagnostic> for JsonDiagnostic {
    fn from(d: &Diagnostic) -> Self {
        let (line, column, end) = match &d.file {
            Some(f) => {
                // The span as rendered and as `location()` reads it, so all three agree.
                let shown = f.shown(d.span);
                let (line, column) = f.line_col(shown.start);
                let (end_line, end_column) = f.line_col(shown.end);
                (
                    Some(line),
                    Some(column),
                    Some(JsonPosition {
                        line: end_line,
                        column: end_column,
                    }),
                )
            }
            None => (None, None, None),
        };
        Self {
            file: d.file.as_ref().map(|f| f.name.clone()),
            line,
            column,
            end,
            severity: match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            },
            message: d.message.clone(),
            label: d.label.clone(),
            hints: d.hints.clone(),
            notes: d.notes.clone(),
        }
    }
}

/// The workspace's `gpuflow.toml`, when it has one that reads without errors (a host file
/// with errors is reported by the commands that use it: `hosts`, `run`).
fn workspace_hosts(workspace: &Path) -> Option<HostConfig> {
    let path = workspace.join(CONFIG_FILE);
    if !path.is_file() {
        return None;
    }
    HostConfig::load(&path).ok()
}

/// A warning at each `runs-on` that no host of the workspace's `gpuflow.toml` matches:
/// `gpuflow run` refuses such a job there (exit 3) unless `--host` names one. Only with a
/// host file: without one, `runs-on` names hosts the file is expected to add (and GitHub's
/// `ubuntu-latest` in copied workflows), so there is nothing to hold it against yet. A
/// `runs-on` with `${{ }}` depends on the matrix cell and is checked by `run`.
fn unmatched_runs_on(wf: &crate::workflow::Workflow, hosts: &HostConfig) -> Diagnostics {
    let mut out = Diagnostics::new();
    for job in wf.jobs.values() {
        let (Some(first), Some(last)) = (job.runs_on.first(), job.runs_on.last()) else {
            continue;
        };
        if job.runs_on.iter().any(|r| r.value.contains("${{")) {
            continue;
        }
        let wanted: Vec<String> = job.runs_on.iter().map(|r| r.value.clone()).collect();
        if let Err(e) = hosts.select(&wanted, None) {
            let span = crate::diag::Span::new(first.span.start, last.span.end);
            // `run`'s error, as a warning: `--host` may still choose a host.
            let mut warning = e.located(&wf.file, span);
            warning.severity = Severity::Warning;
            warning
                .message
                .push_str(": `gpuflow run` will refuse this job here");
            out.push(warning);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::{SourceFile, Span};

    /// JSON's line and column are `location()`'s, at the end of a file ending in a newline
    /// too (they were 2:1 there, against 1:3 rendered).
    #[test]
    fn json_positions_are_the_location_at_the_end_of_a_file() {
        let f = SourceFile::new("w.yml", "jobs: [\n");
        let d = Diagnostic::error(&f, Span::new(8, 8), "cut short");
        let json = JsonDiagnostic::from(&d);
        let at = format!("w.yml:{}:{}", json.line.unwrap(), json.column.unwrap());
        assert_eq!(at, d.location());
        assert_eq!(at, "w.yml:1:8");
    }

    #[test]
    fn summaries_read_as_sentences() {
        let f = SourceFile::new("w.yml", "x");
        let mut d = Diagnostics::new();
        assert_eq!(summary(&d, 3, 0), "3 files valid");
        d.push(Diagnostic::warning(&f, Span::new(0, 1), "w"));
        assert_eq!(summary(&d, 1, 0), "1 file valid, 1 warning");
        d.push(Diagnostic::error(&f, Span::new(0, 1), "a"));
        d.push(Diagnostic::error(&f, Span::new(0, 1), "b"));
        assert_eq!(summary(&d, 3, 1), "2 errors and 1 warning in 1 of 3 files");
    }
}
