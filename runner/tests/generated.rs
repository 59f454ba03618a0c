//! Generated files are committed so editors and readers find them in the repository; these
//! tests fail when they are stale (run `make schema docs`), and check that the schemas accept
//! exactly the shapes the loader accepts on the project's own files.

use crate::support::repo_root;
use std::path::{Path, PathBuf};

use gpuflow::schema::{
    ACTION_SCHEMA_FILE, WORKFLOW_SCHEMA_FILE, action_schema, to_file_text, workflow_schema,
};
use gpuflow::steps::{builtins, docs};
use serde_json::Value;

fn assert_fresh(path: &Path, generated: &str) {
    let committed = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `make schema docs`)", path.display()));
    assert!(
        committed == generated,
        "{} is stale: run `make schema docs` and commit the result",
        path.display()
    );
}

#[test]
fn committed_schemas_are_up_to_date() {
    let dir = repo_root().join("schemas");
    assert_fresh(
        &dir.join(WORKFLOW_SCHEMA_FILE),
        &to_file_text(&workflow_schema()),
    );
    assert_fresh(
        &dir.join(ACTION_SCHEMA_FILE),
        &to_file_text(&action_schema()),
    );
}

#[test]
fn committed_step_docs_are_up_to_date() {
    let dir = repo_root().join("docs/steps");
    for b in builtins() {
        assert_fresh(&dir.join(format!("{}.md", b.name)), &docs::page(b));
    }
    assert_fresh(&dir.join("README.md"), &docs::index());
}

fn yaml_as_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn files(dir: &Path, name: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if name(&p) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn is_yaml(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "yml" || e == "yaml")
}

fn is_action(p: &Path) -> bool {
    p.file_name()
        .is_some_and(|n| n == "action.yml" || n == "action.yaml")
}

#[test]
fn shipped_and_valid_files_satisfy_the_schemas() {
    let workflow = jsonschema::validator_for(&workflow_schema()).unwrap();
    let action = jsonschema::validator_for(&action_schema()).unwrap();
    let root = repo_root();
    let valid = root.join("runner/tests/fixtures/valid");
    let mut checked = 0;
    for path in files(&root.join("workflows"), is_yaml)
        .into_iter()
        .chain(files(&valid, |p| is_yaml(p) && !is_action(p)))
    {
        let errors: Vec<String> = workflow
            .iter_errors(&yaml_as_json(&path))
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        checked += 1;
    }
    for path in files(&root.join("actions"), is_action)
        .into_iter()
        .chain(files(&valid, is_action))
    {
        let errors: Vec<String> = action
            .iter_errors(&yaml_as_json(&path))
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} files checked");
}

#[test]
fn the_schema_rejects_what_the_loader_rejects() {
    let workflow = jsonschema::validator_for(&workflow_schema()).unwrap();
    let cases = [
        // unknown key
        "on: push\njobs:\n  a:\n    timeout-minute: 5\n    steps: [{run: x}]\n",
        // run and uses together
        "on: push\njobs:\n  a:\n    steps: [{run: x, uses: report}]\n",
        // unknown input of a built-in
        "on: push\njobs:\n  a:\n    steps: [{uses: wait-for-health, with: {timeout: 5m, urll: x}}]\n",
        // missing required input of a built-in
        "on: push\njobs:\n  a:\n    steps: [{uses: start-container, with: {name: s}}]\n",
        // wrong enum value
        "on: push\njobs:\n  a:\n    steps: [{uses: wait-for-health, with: {probe: htp}}]\n",
        // `include` as an expression
        "on: push\njobs:\n  a:\n    strategy: {matrix: {x: [1], include: '${{ fromJSON(inputs.m) }}'}}\n    steps: [{run: x}]\n",
        // a device list under `gpus.count`
        "on: push\njobs:\n  a:\n    gpus: {count: [0, 1]}\n    steps: [{run: x}]\n",
    ];
    for yaml in cases {
        let value: Value = yaml_serde::from_str(yaml).unwrap();
        assert!(!workflow.is_valid(&value), "schema accepted:\n{yaml}");
    }
}
