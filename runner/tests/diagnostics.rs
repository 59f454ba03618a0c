//! The loader's diagnostics as users see them: one fixture per kind of mistake under
//! `fixtures/invalid/`, each with a snapshot of the full rendered output; the corpus under
//! `fixtures/valid/` loads without errors; `gpuflow validate`'s exit codes and formats; and
//! property tests that loading never panics.

use std::path::{Path, PathBuf};

use gpuflow::diag::{Diagnostics, RenderOptions, SourceFile, render_all};
use gpuflow::workflow::{Loaded, load_action, load_workflow_in};
use proptest::prelude::*;

use crate::support::{self, command::Gpuflow};
use test_case::test_case;

/// Tests run in `runner/`, so this relative path keeps rendered paths stable.
const FIXTURES: &str = "tests/fixtures";

fn load(rel: &str) -> (Option<gpuflow::workflow::Workflow>, Diagnostics) {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join(rel)).unwrap();
    let file = SourceFile::new(rel, text);
    // What `gpuflow validate` reports: the loader's findings, then the static checks.
    let (wf, mut diags) = load_workflow_in(&file, Path::new(FIXTURES));
    if let Some(wf) = &wf {
        diags.extend(gpuflow::check::check_workflow(wf, &file));
    }
    (wf, diags.sorted())
}

fn rendered(rel: &str) -> String {
    let (_, diags) = load(rel);
    let errors = diags.error_count();
    let warnings = diags.warning_count();
    format!(
        "{}{errors} error(s), {warnings} warning(s)\n",
        render_all(&diags, RenderOptions::default())
    )
}

fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(FIXTURES).join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    files.sort();
    files
}

const INVALID: &[&str] = &[
    "action-errors",
    "action-inputs",
    "action-not-found",
    "bad-duration",
    "bad-gpus",
    "bad-job-id",
    "bad-timeout-minutes",
    "continue-on-error-string",
    "dispatch-inputs",
    "duplicate-key",
    "duplicate-step-id",
    "empty-jobs",
    "empty-steps",
    "expr-context-not-available",
    "expr-inputs",
    "expr-matrix-key",
    "expr-needs",
    "expr-status-outside-if",
    "expr-step-references",
    "expr-syntax",
    "expr-unknown-context",
    "expr-unknown-function",
    "many-errors",
    "matrix-problems",
    "missing-jobs",
    "missing-required-input",
    "multiple-documents",
    "needs-cycle",
    "neither-run-nor-uses",
    "not-a-mapping",
    "push-filters",
    "run-and-uses",
    "tabs",
    "template-injection",
    "unknown-builtin",
    "unknown-event",
    "unknown-input",
    "unknown-job-key",
    "unknown-needs",
    "unknown-step-key",
    "unknown-uses-form",
    "unknown-workflow-key",
    "with-on-run",
    "wrong-input-type",
    "wrong-type-needs",
    "wrong-types",
    "yaml-syntax",
];

#[test_case("action-errors")]
#[test_case("action-inputs")]
#[test_case("action-not-found")]
#[test_case("bad-duration")]
#[test_case("bad-gpus")]
#[test_case("bad-job-id")]
#[test_case("bad-timeout-minutes")]
#[test_case("continue-on-error-string")]
#[test_case("dispatch-inputs")]
#[test_case("duplicate-key")]
#[test_case("duplicate-step-id")]
#[test_case("empty-jobs")]
#[test_case("empty-steps")]
#[test_case("expr-context-not-available")]
#[test_case("expr-inputs")]
#[test_case("expr-matrix-key")]
#[test_case("expr-needs")]
#[test_case("expr-status-outside-if")]
#[test_case("expr-step-references")]
#[test_case("expr-syntax")]
#[test_case("expr-unknown-context")]
#[test_case("expr-unknown-function")]
#[test_case("many-errors")]
#[test_case("matrix-problems")]
#[test_case("missing-jobs")]
#[test_case("missing-required-input")]
#[test_case("multiple-documents")]
#[test_case("needs-cycle")]
#[test_case("neither-run-nor-uses")]
#[test_case("not-a-mapping")]
#[test_case("push-filters")]
#[test_case("run-and-uses")]
#[test_case("tabs")]
#[test_case("template-injection")]
#[test_case("unknown-builtin")]
#[test_case("unknown-event")]
#[test_case("unknown-input")]
#[test_case("unknown-job-key")]
#[test_case("unknown-needs")]
#[test_case("unknown-step-key")]
#[test_case("unknown-uses-form")]
#[test_case("unknown-workflow-key")]
#[test_case("with-on-run")]
#[test_case("wrong-input-type")]
#[test_case("wrong-type-needs")]
#[test_case("wrong-types")]
#[test_case("yaml-syntax")]
fn invalid(name: &str) {
    let rel = format!("invalid/{name}.yml");
    let (_, diags) = load(&rel);
    assert!(diags.has_errors(), "{rel} should have errors");
    insta::assert_snapshot!(name, rendered(&rel));
}

#[test]
fn every_invalid_fixture_has_a_snapshot_test() {
    for path in yaml_files("invalid") {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(
            INVALID.contains(&stem.as_str()),
            "{stem}: add it to INVALID and a #[test_case]"
        );
    }
    assert!(INVALID.len() >= 20);
}

#[test]
fn every_error_has_a_label_and_lower_case_message() {
    for name in INVALID {
        let (_, diags) = load(&format!("invalid/{name}.yml"));
        for d in &diags {
            let first = d.message.chars().next().unwrap();
            assert!(
                !first.is_uppercase(),
                "{name}: message not lower-case: {}",
                d.message
            );
            assert!(d.label.is_some(), "{name}: no label on `{}`", d.message);
        }
    }
}

#[test]
fn the_valid_corpus_loads_without_errors() {
    let files = yaml_files("valid");
    assert!(files.len() >= 5);
    for path in files {
        let rel = path
            .strip_prefix(FIXTURES)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let (workflow, diags) = load(&rel);
        assert!(
            !diags.has_errors(),
            "{rel}:\n{}",
            render_all(&diags, RenderOptions::default())
        );
        let workflow = workflow.unwrap_or_else(|| panic!("{rel} gave no workflow"));
        assert!(!workflow.jobs.is_empty());
    }
}

#[test]
fn the_fixture_actions_load() {
    for name in ["sglang-server", "needs-model"] {
        let rel = format!("{FIXTURES}/actions/{name}/action.yml");
        let file = SourceFile::new(&rel, std::fs::read_to_string(&rel).unwrap());
        let (action, diags) = load_action(&file);
        assert!(
            diags.is_empty(),
            "{}",
            render_all(&diags, RenderOptions::default())
        );
        assert!(!action.unwrap().runs.steps.is_empty());
    }
}

#[test]
fn the_eagle3_model_is_complete() {
    let (workflow, _) = load("valid/eagle3.yml");
    let wf = workflow.unwrap();
    let bench = &wf.jobs["bench"];
    assert_eq!(bench.steps.len(), 5);
    assert!(wf.actions.contains_key("./actions/sglang-server"));
    assert_eq!(wf.jobs["report"].needs[0].value, "bench");
    // Serialises for `plan --json`.
    let json = serde_json::to_value(&wf).unwrap();
    assert_eq!(json["jobs"]["bench"]["gpus"]["devices"]["count"], 8);
}

// --- the CLI ---------------------------------------------------------------------------

/// `gpuflow` run in the fixtures folder.
fn gpuflow() -> Gpuflow {
    support::gpuflow().current_dir(FIXTURES)
}

#[test]
fn validate_exits_0_for_valid_files_and_counts_them() {
    let out = gpuflow()
        .args(["validate", "valid/minimal.yml", "valid/unicode.yml"])
        .status(0);
    let stderr = out.stderr;
    assert!(stderr.trim_end().ends_with("2 files valid"), "{stderr}");
}

#[test]
fn validate_exits_1_on_errors_with_a_summary() {
    let out = gpuflow()
        .args([
            "validate",
            "valid/minimal.yml",
            "invalid/unknown-job-key.yml",
        ])
        .status(1);
    let stderr = out.stderr;
    assert!(
        stderr.contains("invalid/unknown-job-key.yml:3:5"),
        "{stderr}"
    );
    assert!(
        stderr.contains("did you mean `timeout-minutes`?"),
        "{stderr}"
    );
    assert!(
        stderr.trim_end().ends_with("1 error in 1 of 2 files"),
        "{stderr}"
    );
}

#[test]
fn validate_exits_2_for_a_missing_path() {
    let out = gpuflow()
        .args(["validate", "valid/minimal.yml", "no/such/file.yml"])
        .status(2);
    let stderr = out.stderr;
    assert!(
        stderr.contains("`no/such/file.yml` does not exist"),
        "{stderr}"
    );
    assert!(
        stderr
            .trim_end()
            .ends_with("1 path could not be read; 1 file valid"),
        "{stderr}"
    );
}

#[test]
fn validate_searches_folders() {
    let out = gpuflow().args(["validate", "invalid"]).status(1);
    let stderr = out.stderr;
    assert!(
        stderr.contains(&format!("of {} files", INVALID.len())),
        "{stderr}"
    );
}

#[test]
fn validate_json_gives_positions_for_editors() {
    let out = gpuflow()
        .args(["validate", "--format", "json", "invalid/unknown-needs.yml"])
        .status(1);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json["errors"], 1);
    let d = &json["diagnostics"][0];
    assert_eq!(d["file"], "invalid/unknown-needs.yml");
    assert_eq!(d["line"], 6);
    assert_eq!(d["column"], 13);
    assert_eq!(d["end"]["column"], 18);
    assert_eq!(d["severity"], "error");
    assert_eq!(d["hints"][0], "did you mean `build`?");
}

// --- never panics ----------------------------------------------------------------------

fn load_text(text: &str) -> Loaded {
    let file = SourceFile::new("p.yml", text);
    Loaded::Workflow(load_workflow_in(&file, Path::new(FIXTURES)).0.map(Box::new))
}

/// Replaces, inserts or deletes characters of a valid workflow at random places.
fn mutate(base: &str, edits: &[(usize, u8, char)]) -> String {
    let mut chars: Vec<char> = base.chars().collect();
    for &(at, op, c) in edits {
        if chars.is_empty() {
            break;
        }
        let i = at % chars.len();
        match op % 3 {
            0 => chars[i] = c,
            1 => chars.insert(i, c),
            _ => {
                chars.remove(i);
            }
        }
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn loading_arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = load_text(&text);
    }

    #[test]
    fn loading_yaml_like_text_never_panics(text in "[a-z:\\-\\[\\]{}&*!|>'\" \n\t#,0-9.$]{0,300}") {
        let _ = load_text(&text);
    }

    #[test]
    fn loading_mutated_workflows_never_panics(
        which in 0usize..7,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), prop::sample::select(vec![
            ' ', '\n', ':', '-', '[', ']', '{', '}', '&', '*', '"', '\'', '\t', '#', '|', 'é', 'x', '0', '$',
        ])), 1..8),
    ) {
        let files = yaml_files("valid");
        let base = std::fs::read_to_string(&files[which % files.len()]).unwrap();
        let _ = load_text(&mutate(&base, &edits));
    }
}

#[test]
fn validate_text_output_snapshot() {
    let out = gpuflow()
        .args([
            "validate",
            "valid/minimal.yml",
            "invalid/unknown-needs.yml",
            "invalid/unknown-event.yml",
        ])
        .status(1);
    let stderr = out.stderr;
    insta::assert_snapshot!("validate-cli", stderr);
}
