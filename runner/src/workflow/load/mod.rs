//! The strict loader: YAML text → [`Workflow`] / [`Action`], with every problem of a file
//! reported in one pass as a diagnostic (exact span, lower-case message, label, hint).
//!
//! Strategy: [`yaml::parse`] builds a spanned tree (syntax errors and duplicate keys stop
//! there); the readers then walk the tree by hand, one function per shape, reporting each
//! mismatch and carrying on with what can still be read, so a misspelt key in job 1 does not
//! hide a bad duration in job 5. Built-in step inputs are checked against
//! [`crate::steps`]' declarations; local actions are loaded and checked where they are used.
//!
//! What is left for later stages: expressions inside strings (`expr`), `needs` cycles and
//! matrix expansion (`plan`).

mod action;
mod inputs;
mod job;
mod reader;
mod step;
mod workflow;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;

use crate::diag::{Diagnostic, Diagnostics, SourceFile};
use crate::workflow::model::{Action, Workflow};
use crate::workflow::yaml;
use reader::Reader;

pub use reader::is_valid_id;

/// State shared by one load: where `./` actions are found, and the actions already read.
pub(crate) struct LoadContext {
    workspace: PathBuf,
    /// Each action folder is loaded once per load, so two steps using it report its
    /// problems once.
    cache: HashMap<PathBuf, Option<(Arc<SourceFile>, Action)>>,
    /// Action folders being loaded, to refuse an action that uses itself.
    stack: Vec<PathBuf>,
    used_actions: IndexMap<String, Action>,
}

impl LoadContext {
    fn new(workspace: &Path) -> Self {
        Self {
            workspace: workspace.to_owned(),
            cache: HashMap::new(),
            stack: Vec::new(),
            used_actions: IndexMap::new(),
        }
    }

    /// A path as shown to the user: relative to the current folder when it is below it.
    fn display(&self, path: &Path) -> String {
        let shown = std::env::current_dir()
            .ok()
            .and_then(|cwd| path.strip_prefix(&cwd).ok().map(Path::to_path_buf))
            .unwrap_or_else(|| path.to_path_buf());
        shown.to_string_lossy().trim_start_matches("./").to_owned()
    }
}

/// Loads a workflow. Local actions (`uses: ./x`) are resolved against the workspace root:
/// the nearest folder above the file holding `.git`, else the current folder.
pub fn load_workflow(file: &Arc<SourceFile>) -> (Option<Workflow>, Diagnostics) {
    load_workflow_in(file, &workspace_of(Path::new(&file.name)))
}

/// Loads a workflow whose `./` actions are relative to `workspace`.
pub fn load_workflow_in(
    file: &Arc<SourceFile>,
    workspace: &Path,
) -> (Option<Workflow>, Diagnostics) {
    let (root, mut diags) = yaml::parse(file);
    let Some(root) = root else {
        return (None, diags);
    };
    let mut ctx = LoadContext::new(workspace);
    let mut reader = Reader::new(file);
    let workflow = reader.workflow(&root, &mut ctx);
    diags.extend(reader.diags);
    (workflow, diags.sorted())
}

/// Loads an action file (`action.yml`). `./` actions its steps use are resolved like
/// [`load_workflow`]'s.
pub fn load_action(file: &Arc<SourceFile>) -> (Option<Action>, Diagnostics) {
    let path = Path::new(&file.name);
    let mut ctx = LoadContext::new(&workspace_of(path));
    if let Some(dir) = path.parent().and_then(|d| d.canonicalize().ok()) {
        ctx.stack.push(dir);
    }
    let (action, diags) = load_action_with(file, &mut ctx);
    (action, diags.sorted())
}

fn load_action_with(
    file: &Arc<SourceFile>,
    ctx: &mut LoadContext,
) -> (Option<Action>, Diagnostics) {
    let (root, mut diags) = yaml::parse(file);
    let Some(root) = root else {
        return (None, diags);
    };
    let mut reader = Reader::new(file);
    let action = reader.action(&root, ctx);
    diags.extend(reader.diags);
    (action, diags)
}

/// What a path holds, decided by its file name.
#[derive(Debug)]
pub enum Loaded {
    Workflow(Option<Box<Workflow>>),
    Action(Option<Box<Action>>),
}

/// Reads and loads a file: `action.yml`/`action.yaml` as an action, anything else as a
/// workflow. A file that cannot be read is an `Err` (one unlocated diagnostic).
pub fn load_path(path: &Path) -> Result<(Loaded, Diagnostics), Box<Diagnostic>> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        Box::new(Diagnostic::unlocated(format!(
            "cannot read `{}`: {err}",
            path.display()
        )))
    })?;
    let file = SourceFile::new(path.to_string_lossy(), text);
    Ok(if is_action_file(path) {
        let (a, d) = load_action(&file);
        (Loaded::Action(a.map(Box::new)), d)
    } else {
        let (w, d) = load_workflow(&file);
        (Loaded::Workflow(w.map(Box::new)), d)
    })
}

/// `action.yml` and `action.yaml` are action files.
pub fn is_action_file(path: &Path) -> bool {
    matches!(
        path.file_name().and_then(|n| n.to_str()),
        Some("action.yml" | "action.yaml")
    )
}

/// The nearest folder above `file` holding `.git` (a folder, or a file in a git worktree),
/// else the current folder.
pub fn workspace_of(file: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let absolute = if file.is_absolute() {
        file.to_path_buf()
    } else {
        cwd.join(file)
    };
    absolute
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").exists())
        .map_or(cwd, Path::to_path_buf)
}
