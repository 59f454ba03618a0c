//! The contexts every job of a run starts from: `github` (and its alias `gpuflow`), from the
//! triggering event or, for a run by hand, from the checkout; `inputs`, `secrets` and `vars`.

use indexmap::IndexMap;

use crate::engine::evaluate::object;
use crate::engine::options::RunOptions;
use crate::expr::Value;
use crate::plan::Plan;
use crate::workflow::model::Workflow;

/// `github` (and its alias `gpuflow`), `inputs`, `secrets` and `vars`.
pub(crate) fn base_contexts(
    wf: &Workflow,
    plan: &Plan,
    opts: &RunOptions,
    inputs: Value,
) -> IndexMap<String, Value> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&opts.workspace)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    // A triggered run takes all of it from its event; a run by hand from the checkout.
    let (event_name, sha, git_ref, ref_name, ref_type, event) = match &opts.event {
        Some(e) => (
            e.event_name.clone(),
            e.sha.clone(),
            e.git_ref.clone(),
            e.ref_name.clone(),
            e.ref_type.clone(),
            Value::from_json(e.event.clone()),
        ),
        None => {
            let git_ref = git(&["symbolic-ref", "-q", "HEAD"]);
            let ref_name = git_ref
                .strip_prefix("refs/heads/")
                .unwrap_or(&git_ref)
                .to_string();
            (
                "workflow_dispatch".to_string(),
                git(&["rev-parse", "HEAD"]),
                git_ref,
                ref_name,
                "branch".to_string(),
                object([("inputs", inputs.clone())]),
            )
        }
    };
    let actor = opts.event.as_ref().map_or_else(
        || std::env::var("USER").unwrap_or_else(|_| "gpuflow".into()),
        |e| e.actor.clone(),
    );
    let repository = opts.event.as_ref().map_or_else(
        || {
            opts.workspace
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        },
        |e| e.repository.clone(),
    );
    let s = |v: &str| Value::String(v.to_string());
    let workspace = opts.workspace.display().to_string();
    let github = object([
        ("run_id", s(&opts.run_id)),
        ("run_number", Value::Number(1.0)),
        ("run_attempt", Value::Number(1.0)),
        ("workflow", s(&plan.workflow)),
        ("workspace", s(&workspace)),
        ("event_name", s(&event_name)),
        ("event", event),
        ("sha", s(&sha)),
        ("ref", s(&git_ref)),
        ("ref_name", s(&ref_name)),
        ("ref_type", s(&ref_type)),
        ("head_ref", s("")),
        ("base_ref", s("")),
        ("actor", s(&actor)),
        ("repository", s(&repository)),
        ("server_url", s("")),
        ("workflow_file", s(&wf.file.name)),
    ]);
    let strings = |m: &IndexMap<String, String>| {
        Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    };
    IndexMap::from([
        ("github".to_string(), github.clone()),
        ("gpuflow".to_string(), github),
        ("inputs".to_string(), inputs),
        ("secrets".to_string(), strings(&opts.secrets)),
        ("vars".to_string(), strings(&opts.vars)),
    ])
}
