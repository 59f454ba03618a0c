//! Where a repository's workflows are, at a given commit: the `*.yml`/`*.yaml` files directly
//! in `workflows/` (where gpuflow's own examples live) and in `.gpuflow/workflows/` (for a
//! repository whose `workflows/` means something else). They are read from the commit's tree,
//! not from a work tree, so a bare repository on a GPU node works the same, and a push is
//! judged by the workflows it carries.

use std::path::Path;

use git2::{ObjectType, Repository};
use indexmap::IndexMap;

use crate::diag::{Diagnostics, SourceFile};
use crate::engine::options::EventContext;
use crate::expr::{MapContext, Value, parse_template};
use crate::workflow::load_workflow_in;
use crate::workflow::model::{BoolOrExpr, Workflow};

/// The folders searched, in this order.
pub const WORKFLOW_DIRS: &[&str] = &["workflows", ".gpuflow/workflows"];

/// A workflow file of the commit, loaded (or the reason it could not be).
pub struct FoundWorkflow {
    /// Its path in the repository (`workflows/bench.yml`).
    pub path: String,
    pub workflow: Option<Workflow>,
    pub diags: Diagnostics,
}

/// The workflow files of `commit`, loaded from its tree. Local actions (`uses: ./x`) are not
/// looked up here (the tree is not on disk): the run checks them when it starts.
pub fn find(
    repo: &Repository,
    commit: &git2::Commit<'_>,
) -> Result<Vec<FoundWorkflow>, git2::Error> {
    let tree = commit.tree()?;
    let mut found = Vec::new();
    for dir in WORKFLOW_DIRS {
        let Ok(entry) = tree.get_path(Path::new(dir)) else {
            continue;
        };
        let Some(subtree) = entry.to_object(repo)?.into_tree().ok() else {
            continue;
        };
        for file in subtree.iter() {
            let Ok(name) = file.name() else { continue };
            if file.kind() != Some(ObjectType::Blob)
                || !(name.ends_with(".yml") || name.ends_with(".yaml"))
            {
                continue;
            }
            let blob = file.to_object(repo)?.peel_to_blob()?;
            let path = format!("{dir}/{name}");
            let text = String::from_utf8_lossy(blob.content()).into_owned();
            let source = SourceFile::new(path.clone(), text);
            // No folder on disk: `./` actions are reported missing, which does not matter
            // for deciding whether the push starts the workflow.
            let (workflow, diags) = load_workflow_in(&source, Path::new("/nonexistent"));
            found.push(FoundWorkflow {
                path,
                workflow,
                diags,
            });
        }
    }
    Ok(found)
}

/// The workflow's name as runs list it: `name:`, else the file's stem.
pub fn display_name(wf: &Workflow, path: &str) -> String {
    wf.name.as_ref().map_or_else(
        || {
            Path::new(path)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        },
        |n| n.value.clone(),
    )
}

/// `[vars]` of the commit's `gpuflow.toml`: what its run, started in a checkout of that
/// commit, reads as `vars`. None when there is no such file, or it is invalid: the run itself
/// then refuses it, each problem at its place.
pub fn vars(repo: &Repository, commit: &git2::Commit<'_>) -> IndexMap<String, String> {
    let Some(text) = commit
        .tree()
        .ok()
        .and_then(|tree| tree.get_path(Path::new(crate::hosts::CONFIG_FILE)).ok())
        .and_then(|entry| entry.to_object(repo).ok())
        .and_then(|object| object.peel_to_blob().ok())
        .map(|blob| String::from_utf8_lossy(blob.content()).into_owned())
    else {
        return IndexMap::new();
    };
    let file = SourceFile::new(crate::hosts::CONFIG_FILE, text);
    crate::hosts::HostConfig::parse_vars(&file).unwrap_or_default()
}

/// `concurrency:` evaluated for a run of `event`: the group (with `${{ github.* }}` and
/// `${{ vars.* }}` filled in) and whether it cancels the running member.
pub fn concurrency(
    wf: &Workflow,
    workflow_name: &str,
    event: &EventContext,
    vars: &IndexMap<String, String>,
) -> Result<Option<(String, bool)>, String> {
    let Some(c) = &wf.concurrency else {
        return Ok(None);
    };
    let github = Value::from_json(serde_json::json!({
        "event_name": event.event_name,
        "sha": event.sha,
        "ref": event.git_ref,
        "ref_name": event.ref_name,
        "ref_type": event.ref_type,
        "actor": event.actor,
        "repository": event.repository,
        "workflow": workflow_name,
        "event": event.event,
    }));
    let mut ctx = MapContext::new();
    ctx.insert("github", github.clone());
    ctx.insert("gpuflow", github);
    ctx.insert("inputs", Value::Object(Default::default()));
    ctx.insert(
        "vars",
        Value::Object(
            vars.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        ),
    );
    let eval = |s: &str| {
        parse_template(s)
            .and_then(|t| t.evaluate(&ctx))
            .map_err(|e| format!("`concurrency`: {e}"))
    };
    let group = eval(&c.group.value)?.to_expr_string();
    let cancel = match &c.cancel_in_progress {
        None => false,
        Some(BoolOrExpr::Bool(b)) => *b,
        Some(BoolOrExpr::Expr(e)) => eval(&e.value)?.is_truthy(),
    };
    Ok(Some((group, cancel)))
}
