//! Which cells of a job could share a server, known before the run: cells whose steps that
//! start servers (`start-container`, directly or inside an action) have the same `with:` once
//! the matrix is filled in, and whose `gpus:` are the same, form a group. The dispatcher runs
//! a group's cells one after another so each can adopt the server the one before parked
//! ([`super::server_pool`]); the server key checked at adoption ([`super::server_key`]) is
//! what decides, so an input that differs only at run time starts a fresh server.

use std::collections::HashMap;

use indexmap::IndexMap;
use sha2::{Digest, Sha256};

use super::evaluate::{eval_value, matrix_value};
use crate::diag::SourceFile;
use crate::expr::{MapContext, Value};
use crate::plan::PlannedJob;
use crate::workflow::model::{Step, Uses, Workflow};

/// The built-in that starts servers.
const STARTS_SERVERS: &str = "start-container";

/// Per job run (`job`, cell): its server group, when it has one (a step that starts a server,
/// not opted out with `reuse: false`).
pub fn groups(
    wf: &Workflow,
    runs: &[PlannedJob],
    base: &IndexMap<String, Value>,
) -> HashMap<(String, usize), String> {
    let mut groups = HashMap::new();
    // A job of one cell has a group too: a server an earlier run kept warm may be its.
    for planned in runs {
        let Some(job) = wf.jobs.get(&planned.job_id) else {
            continue;
        };
        let mut ctx = MapContext::new();
        for (k, v) in base {
            ctx.insert(k.clone(), v.clone());
        }
        ctx.insert("matrix", matrix_value(planned));
        let mut shape = String::new();
        for step in &job.steps {
            if let Some(text) = server_shape(wf, step, &ctx, &wf.file) {
                shape.push_str(&text);
                shape.push('\n');
            }
        }
        if shape.is_empty() {
            continue;
        }
        if let Some(gpus) = &planned.gpus {
            match super::job_gpus::evaluate(gpus, &ctx, &wf.file) {
                Ok(asked) => shape.push_str(&format!("gpus: {:?}", asked.devices)),
                Err(_) => shape.push_str(&format!("gpus: {gpus}")),
            }
        }
        let digest = Sha256::digest(shape.as_bytes());
        let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        groups.insert(
            (planned.job_id.clone(), planned.cell),
            format!("{}#{hex}", planned.job_id),
        );
    }
    groups
}

/// How many servers the cells of each job would start, per job with groups: (servers, cells).
pub fn counts(groups: &HashMap<(String, usize), String>) -> IndexMap<String, (usize, usize)> {
    let mut per_job: IndexMap<String, (Vec<&str>, usize)> = IndexMap::new();
    let mut keys: Vec<_> = groups.iter().collect();
    keys.sort();
    for ((job, _), group) in keys {
        let entry = per_job.entry(job.clone()).or_default();
        if !entry.0.contains(&group.as_str()) {
            entry.0.push(group);
        }
        entry.1 += 1;
    }
    per_job
        .into_iter()
        .map(|(job, (servers, cells))| (job, (servers.len(), cells)))
        .collect()
}

/// What of `step` shapes a server it starts, as text; `None` for a step that starts none or
/// opts out (`reuse: false`).
fn server_shape(wf: &Workflow, step: &Step, ctx: &MapContext, file: &SourceFile) -> Option<String> {
    let uses = &step.uses.as_ref()?.value;
    let starts = match uses {
        Uses::Builtin(name) => name == STARTS_SERVERS && !opted_out(step, ctx, file),
        Uses::Local(_) | Uses::Remote { .. } => wf
            .actions
            .get(&uses.to_string())
            .is_some_and(|a| a.runs.steps.iter().any(|s| starts_server(wf, s, 0))),
        Uses::Docker(_) => false,
    };
    if !starts {
        return None;
    }
    let inputs: Vec<String> = step
        .with
        .iter()
        // How long a server is kept warm is not what it is: changing it keeps the group.
        .filter(|(name, _)| name.as_str() != "keep-warm")
        .map(|(name, value)| match eval_value(value, ctx, file) {
            // A mapping or list in full (`env`, `volumes`): as an expression's text, every
            // one would read `Object`.
            Ok(v) => format!("{name}={}", v.to_json()),
            // Known only at run time (another step's output): the same text in every cell.
            Err(_) => format!("{name}~{:?}", value.value),
        })
        .collect();
    Some(format!("{uses} {}", inputs.join(" ")))
}

fn opted_out(step: &Step, ctx: &MapContext, file: &SourceFile) -> bool {
    step.with
        .get("reuse")
        .and_then(|v| eval_value(v, ctx, file).ok())
        .is_some_and(|v| v.to_expr_string() == "false")
}

/// Whether `step` starts a server, itself or through the actions it uses (to a bounded depth:
/// the loader refuses action cycles already).
fn starts_server(wf: &Workflow, step: &Step, depth: usize) -> bool {
    let Some(uses) = step.uses.as_ref().map(|u| &u.value) else {
        return false;
    };
    match uses {
        Uses::Builtin(name) => name == STARTS_SERVERS,
        Uses::Local(_) | Uses::Remote { .. } if depth < 8 => wf
            .actions
            .get(&uses.to_string())
            .is_some_and(|a| a.runs.steps.iter().any(|s| starts_server(wf, s, depth + 1))),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{build, from_workflow};
    use crate::workflow::Loaded;

    fn groups_of(yaml: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let path = dir.path().join("w.yml");
        std::fs::write(&path, yaml).unwrap();
        let (loaded, diags) = crate::check::load_and_check(&path).unwrap();
        assert!(!diags.has_errors(), "{diags:?}");
        let Loaded::Workflow(Some(wf)) = loaded else {
            panic!("not a workflow")
        };
        let plan = build(&from_workflow(&wf, "w").input).unwrap();
        let groups = groups(&wf, &plan.jobs, &IndexMap::new());
        let mut cells: Vec<_> = groups.into_iter().collect();
        cells.sort();
        cells.into_iter().map(|(_, g)| g).collect()
    }

    const GRID: &str = "on: workflow_dispatch\njobs:\n  tune:\n    strategy:\n      matrix:\n        bs: [128, 256]\n        c: [1, 4]\n    steps:\n      - uses: start-container\n        with:\n          name: server\n          image: gpuflow-sim:test\n          env: { BS: \"${{ matrix.bs }}\" }\n          keep-warm: 10m\n      - run: echo ${{ matrix.c }}\n";

    #[test]
    fn cells_whose_server_differs_in_a_mapping_are_other_groups() {
        let groups = groups_of(GRID);
        assert_eq!(groups.len(), 4);
        // Cells in matrix order: (128, 1), (128, 4), (256, 1), (256, 4).
        assert_eq!(
            groups[0], groups[1],
            "the client's concurrency is not the server"
        );
        assert_eq!(groups[2], groups[3]);
        assert_ne!(
            groups[0], groups[2],
            "BS is in the server's env: {groups:?}"
        );
    }

    #[test]
    fn how_long_a_server_is_kept_warm_is_not_what_it_is() {
        let ten = groups_of(GRID);
        let thirty = groups_of(&GRID.replace("keep-warm: 10m", "keep-warm: 30m"));
        assert_eq!(ten, thirty);
        let single = groups_of(&GRID.replace("[128, 256]", "[128]").replace("[1, 4]", "[1]"));
        assert_eq!(single.len(), 1, "a job of one cell has a group too");
    }
}
