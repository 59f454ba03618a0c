//! A bounded fuzz target for what `gpuflow validate` runs: the YAML loader, the expression
//! parser and the static checks, fed arbitrary text, mutations of the real workflow and
//! action files (`workflows/`, `actions/`, `runner/tests/fixtures/`) and random expression
//! strings.
//!
//! Properties, for every input:
//! - nothing panics (loading, checking, rendering a diagnostic, parsing or evaluating an
//!   expression);
//! - every diagnostic has a place (`file:line:col`): a file, and a span that lies inside
//!   that file's text on character boundaries — the fuzzed text itself, or an action file
//!   the workflow uses; the same for every related place;
//! - every expression error's span lies inside the expression text it came from.
//!
//! It runs in the ordinary test suite with a fixed number of cases and a fixed seed, so CI
//! sees the same inputs every time (a few seconds on 2 cores). For a longer local run, raise
//! the number of cases per property and pick another seed:
//!
//! ```sh
//! GPUFLOW_FUZZ_CASES=20000 GPUFLOW_FUZZ_SEED=$RANDOM \
//!   cargo nextest run --workspace -E 'test(/^fuzz_validate::/)'
//! ```
//!
//! `GPUFLOW_FUZZ_CASES` defaults to 256 (that many inputs per property);
//! `GPUFLOW_FUZZ_SEED` to a constant. A failure prints the shrunk input; nothing is written
//! to the source tree (no `proptest-regressions` file). Add the shrunk input as a regression
//! case at the end of this file: a `#[test]` calling `validate_text` or `check_expression`,
//! commented out with `// FOUND:` and what failed until the bug is fixed, then enabled.

use crate::support::repo_root;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use gpuflow::diag::{Diagnostic, Diagnostics, RenderOptions, SourceFile, Span, render};
use gpuflow::expr::{self, ExprError, MapContext, Value};
use gpuflow::workflow::{
    FetchedAction, RemoteAction, RemoteActionSource, load_action, load_workflow_with,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// Cases per property when `GPUFLOW_FUZZ_CASES` is not set.
const DEFAULT_CASES: u32 = 256;
/// The seed when `GPUFLOW_FUZZ_SEED` is not set: the same inputs on every run.
const DEFAULT_SEED: u64 = 0x6770_7566_6c6f_7721;

fn config() -> Config {
    let env_u64 = |name: &str| {
        std::env::var(name).ok().map(|v| {
            v.trim()
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{name} must be a whole number, not `{v}`"))
        })
    };
    let cases =
        env_u64("GPUFLOW_FUZZ_CASES").map_or(DEFAULT_CASES, |n| n.clamp(1, u32::MAX.into()) as u32);
    Config {
        cases,
        rng_seed: RngSeed::Fixed(env_u64("GPUFLOW_FUZZ_SEED").unwrap_or(DEFAULT_SEED)),
        // The tree is shared: no `proptest-regressions/` files next to the sources.
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    }
}

/// One real file to mutate: its text, the name it is loaded under, and the workspace its
/// `./` actions are relative to.
struct Seed {
    name: String,
    text: String,
    workspace: PathBuf,
    action: bool,
}

/// Every real workflow and action file: the shipped ones and the test fixtures.
static SEEDS: LazyLock<Vec<Seed>> = LazyLock::new(|| {
    let root = repo_root();
    let fixtures = root.join("runner/tests/fixtures");
    let mut seeds = Vec::new();
    for (dir, workspace) in [
        (root.join("workflows"), root.clone()),
        (root.join("actions"), root.clone()),
        (fixtures.join("valid"), fixtures.clone()),
        (fixtures.join("invalid"), fixtures.clone()),
        (fixtures.join("actions"), fixtures.clone()),
    ] {
        let mut files = Vec::new();
        collect_yaml(&dir, &mut files);
        files.sort();
        for path in files {
            let text = std::fs::read(&path).expect("a seed file is readable");
            seeds.push(Seed {
                action: gpuflow::workflow::load::is_action_file(&path),
                name: path.to_string_lossy().into_owned(),
                text: String::from_utf8_lossy(&text).into_owned(),
                workspace: workspace.clone(),
            });
        }
    }
    assert!(seeds.len() > 20, "the seed files were not found");
    seeds
});

fn collect_yaml(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a seed folder is readable") {
        let path = entry.expect("a seed folder entry").path();
        if path.is_dir() {
            collect_yaml(&path, out);
        } else if path.extension().is_some_and(|e| e == "yml" || e == "yaml") {
            out.push(path);
        }
    }
}

/// A remote action source that fetches nothing: every `owner/repo@ref` fails as an
/// unreachable source would, so the loader's error path for it is fuzzed too, without a
/// network or a git cache.
struct NoRemote;

impl RemoteActionSource for NoRemote {
    fn fetch(&mut self, action: &RemoteAction<'_>) -> Result<FetchedAction, Box<Diagnostic>> {
        Err(Box::new(
            Diagnostic::unlocated(format!(
                "cannot fetch `{}/{}@{}` (the fuzz test fetches nothing)",
                action.owner, action.repo, action.git_ref
            ))
            .hint("a hint"),
        ))
    }
}

/// What `gpuflow validate` does with one file, from text: load (workflow or action by its
/// name), then the static checks.
fn validate_text(
    name: &str,
    text: &str,
    workspace: &Path,
    action: bool,
) -> (Arc<SourceFile>, Diagnostics) {
    let file = SourceFile::new(name, text);
    let diags = if action {
        let (action, mut diags) = load_action(&file);
        if let Some(action) = &action {
            diags.extend(gpuflow::check::check_action(action));
        }
        diags
    } else {
        let (wf, mut diags) = load_workflow_with(&file, workspace, &mut NoRemote);
        if let Some(wf) = &wf {
            diags.extend(gpuflow::check::check_workflow(wf, &file));
        }
        diags
    };
    (file, diags.sorted())
}

/// A span inside a text, on character boundaries.
fn span_inside(span: Span, text: &str) -> bool {
    span.start <= span.end
        && span.end <= text.len()
        && text.is_char_boundary(span.start)
        && text.is_char_boundary(span.end)
}

/// Every diagnostic is placed inside the text it points into (the fuzzed file, or an action
/// file it uses, which then is a real file on disk), renders, and has a `file:line:col`.
fn check_diagnostics(input: &Arc<SourceFile>, diags: &Diagnostics) -> Result<(), TestCaseError> {
    for d in diags {
        let Some(file) = &d.file else {
            return Err(TestCaseError::fail(format!(
                "a diagnostic without a place: {:?}",
                d.message
            )));
        };
        if file.name == input.name {
            prop_assert_eq!(
                &file.text,
                &input.text,
                "a diagnostic points into another text"
            );
        } else {
            // An action the workflow uses: its text is the file on disk.
            let on_disk = std::fs::read_to_string(&file.name).ok();
            prop_assert!(
                on_disk.as_deref() == Some(file.text.as_str()),
                "a diagnostic points into `{}`, neither the input nor a file on disk: {:?}",
                file.name,
                d.message
            );
        }
        prop_assert!(
            span_inside(d.span, &file.text),
            "span {:?} outside `{}` ({} bytes) or inside a character: {:?}",
            d.span,
            file.name,
            file.text.len(),
            d.message
        );
        let location = d.location();
        let (line, col) = file.line_col(file.shown(d.span).start);
        prop_assert_eq!(&location, &format!("{}:{line}:{col}", file.name));
        prop_assert!(
            line <= file.text.split('\n').count(),
            "line {line} past the end"
        );
        for r in &d.related {
            prop_assert!(
                span_inside(r.span, &r.file.text),
                "related span {:?} outside `{}` ({} bytes): {:?} / {:?}",
                r.span,
                r.file.name,
                r.file.text.len(),
                d.message,
                r.label
            );
        }
        let shown = render(d, RenderOptions::default());
        // The rendered `-->` line names the place `location()` (and JSON output) names.
        prop_assert!(
            shown.contains(&format!("--> {location}\n")),
            "the rendered diagnostic is not at {location}:\n{shown}"
        );
    }
    Ok(())
}

fn check_expr_error(e: &ExprError, src: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        e.span.start <= e.span.end && e.span.end <= src.len(),
        "expression error span {:?} outside {:?} ({} bytes): {}",
        e.span,
        src,
        src.len(),
        e.message
    );
    prop_assert!(
        src.is_char_boundary(e.span.start) && src.is_char_boundary(e.span.end),
        "expression error span {:?} inside a character of {:?}: {}",
        e.span,
        src,
        e.message
    );
    prop_assert!(
        !e.message.is_empty(),
        "an expression error without a message"
    );
    Ok(())
}

/// Parses `src` every way validate and the engine do, and evaluates what parses against a
/// small context; errors must point inside `src`.
fn check_expression(src: &str) -> Result<(), TestCaseError> {
    let ctx = MapContext::new()
        .with(
            "github",
            Value::from_json(serde_json::json!({
                "ref": "refs/heads/main", "event_name": "push",
                "event": { "head_commit": { "message": "fix: x" }, "commits": [1, 2] }
            })),
        )
        .with(
            "matrix",
            Value::from_json(serde_json::json!({ "bs": 128, "mode": "nccl" })),
        )
        .with(
            "inputs",
            Value::from_json(serde_json::json!({ "model": "/m", "n": 3 })),
        )
        .with("env", Value::from_json(serde_json::json!({ "A": "1" })));
    for parsed in [
        expr::parse(src),
        expr::parse_with_contexts(src, &["github", "matrix", "inputs", "env", "steps"]),
    ] {
        match parsed {
            Ok(e) => {
                if let Err(err) = expr::evaluate(&e, &ctx) {
                    check_expr_error(&err, src)?;
                }
            }
            Err(err) => check_expr_error(&err, src)?,
        }
    }
    match expr::parse_template(src) {
        Ok(t) => {
            for (_, range) in t.expressions() {
                prop_assert!(range.start <= range.end && range.end <= src.len());
            }
            if let Err(err) = t.evaluate(&ctx) {
                check_expr_error(&err, src)?;
            }
        }
        Err(err) => check_expr_error(&err, src)?,
    }
    match expr::parse_condition(src) {
        Ok(c) => {
            if let Err(err) = c.evaluate(&ctx) {
                check_expr_error(&err, src)?;
            }
        }
        Err(err) => check_expr_error(&err, src)?,
    }
    Ok(())
}

// --- input strategies ---

const CONTEXTS: &[&str] = &[
    "github", "inputs", "matrix", "steps", "needs", "env", "secrets", "job", "jobs", "runner",
    "strategy", "vars", "gpu", "GitHub", "nope",
];
const PROPERTIES: &[&str] = &[
    "ref",
    "event",
    "head_commit",
    "message",
    "outputs",
    "result",
    "conclusion",
    "bs",
    "model",
    "server",
    "x",
    "*",
    "0",
    "event_name",
    "head_ref",
    "token",
    "sha",
];
const FUNCTIONS: &[&str] = &[
    "contains",
    "startsWith",
    "endsWith",
    "format",
    "join",
    "toJSON",
    "fromJSON",
    "hashFiles",
    "success",
    "always",
    "failure",
    "cancelled",
    "case",
    "nope",
    "toJson",
];
const OPERATORS: &[&str] = &[
    "==", "!=", "<", "<=", ">", ">=", "&&", "||", "=", "&", "|", "+",
];

/// Expression text: mostly well-formed (so the checks behind the parser run), sometimes
/// with junk in it.
fn expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        (
            prop::sample::select(CONTEXTS),
            prop::collection::vec(prop::sample::select(PROPERTIES), 0..4)
        )
            .prop_map(|(c, ps)| {
                let mut s = c.to_owned();
                for p in ps {
                    if p == "0" {
                        s.push_str("[0]");
                    } else {
                        s.push('.');
                        s.push_str(p);
                    }
                }
                s
            }),
        any::<i32>().prop_map(|n| n.to_string()),
        prop::sample::select(vec![
            "true", "false", "null", "NaN", "Infinity", "0x1F", "1e3", "-0", ".5"
        ])
        .prop_map(str::to_owned),
        "[a-z{}0-9 ]{0,8}".prop_map(|s| format!("'{s}'")),
        "\\PC{0,6}",
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(OPERATORS),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            (
                prop::sample::select(FUNCTIONS),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(f, args)| format!("{f}({})", args.join(", "))),
            inner.clone().prop_map(|e| format!("!{e}")),
            inner.clone().prop_map(|e| format!("({e})")),
            (inner.clone(), inner).prop_map(|(a, i)| format!("{a}[{i}]")),
        ]
    })
}

/// A `${{ … }}` fragment, sometimes broken (unclosed, nested, empty).
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => expression().prop_map(|e| format!("${{{{ {e} }}}}")),
        1 => expression().prop_map(|e| format!("${{{{ {e}")),
        1 => Just("${{ }}".to_owned()),
        1 => expression().prop_map(|e| format!("${{{{ '${{{{ {e} }}}}' }}}}")),
        1 => expression().prop_map(|e| format!("\"${{{{ {e} }}}}\"")),
    ]
}

/// One edit of a file's text.
#[derive(Clone, Debug)]
enum Edit {
    /// XOR a byte with a mask (the text may stop being UTF-8: it is read lossily, as a
    /// file with a bad byte would show up after `String::from_utf8_lossy`).
    FlipByte(usize, u8),
    DeleteLine(usize),
    DuplicateLine(usize),
    /// Two lines change places.
    SwapLines(usize, usize),
    /// A `${{ … }}` fragment spliced in at a byte position.
    Splice(usize, String),
    /// A fragment replacing the value after the first `:` of a line.
    ReplaceValue(usize, String),
    /// A few characters that matter to YAML.
    Insert(usize, String),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<usize>(), 1u8..=255).prop_map(|(i, m)| Edit::FlipByte(i, m)),
        2 => any::<usize>().prop_map(Edit::DeleteLine),
        2 => any::<usize>().prop_map(Edit::DuplicateLine),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        3 => (any::<usize>(), fragment()).prop_map(|(i, f)| Edit::Splice(i, f)),
        3 => (any::<usize>(), fragment()).prop_map(|(i, f)| Edit::ReplaceValue(i, f)),
        2 => (any::<usize>(), "[ \n\t:\\-\\[\\]{}&*!|>'\"#,?%@`é]{1,4}")
            .prop_map(|(i, s)| Edit::Insert(i, s)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for e in edits {
        match e {
            Edit::FlipByte(i, m) => {
                if !bytes.is_empty() {
                    let i = i % bytes.len();
                    bytes[i] ^= m;
                }
            }
            Edit::Splice(i, s) | Edit::Insert(i, s) => {
                let i = i % (bytes.len() + 1);
                bytes.splice(i..i, s.bytes());
            }
            Edit::DeleteLine(i)
            | Edit::DuplicateLine(i)
            | Edit::ReplaceValue(i, _)
            | Edit::SwapLines(i, _) => {
                let mut lines: Vec<Vec<u8>> =
                    bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
                let n = lines.len();
                let i = i % n;
                match e {
                    Edit::DeleteLine(_) if n > 1 => {
                        lines.remove(i);
                    }
                    Edit::DuplicateLine(_) => {
                        let line = lines[i].clone();
                        lines.insert(i, line);
                    }
                    Edit::SwapLines(_, j) => lines.swap(i, j % n),
                    Edit::ReplaceValue(_, f) => {
                        if let Some(colon) = lines[i].iter().position(|&b| b == b':') {
                            lines[i].truncate(colon + 1);
                            lines[i].push(b' ');
                            lines[i].extend_from_slice(f.as_bytes());
                        }
                    }
                    _ => {}
                }
                bytes = lines.join(&b'\n');
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Arbitrary text: printable or not, YAML-ish, or a workflow skeleton with fragments.
fn arbitrary_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..400).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        "\\PC{0,300}",
        "(\\PC|\n){0,300}",
        "[a-z_\\-:\\[\\]{}&*!|>'\" \n\t#,0-9.$%@?]{0,400}",
        prop::collection::vec(fragment(), 1..6).prop_map(|fs| {
            format!(
                "on: push\nname: {}\njobs:\n  j:\n    if: {}\n    steps:\n      - run: echo {}\n        env: {{ A: {} }}\n",
                fs[0],
                fs[fs.len() / 2],
                fs.join(" "),
                fs[fs.len() - 1]
            )
        }),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// Mutated real files: every diagnostic placed inside the input, nothing panics.
    #[test]
    fn mutated_real_files_validate_with_placed_diagnostics(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let seed = which.get(&SEEDS);
        let text = apply(&seed.text, &edits);
        let (file, diags) = validate_text(&seed.name, &text, &seed.workspace, seed.action);
        check_diagnostics(&file, &diags)?;
    }

    /// Arbitrary text, as a workflow and as an action.
    #[test]
    fn arbitrary_text_validates_with_placed_diagnostics(text in arbitrary_text(), as_action in any::<bool>()) {
        let root = repo_root();
        let name = if as_action {
            root.join("runner/tests/fixtures/actions/fuzz/action.yml")
        } else {
            root.join("workflows/fuzz.yml")
        };
        let (file, diags) = validate_text(&name.to_string_lossy(), &text, &root, as_action);
        check_diagnostics(&file, &diags)?;
    }

    /// Expression strings: parsed as an expression, a template and a condition, evaluated
    /// when they parse; every error inside the text.
    #[test]
    fn expressions_parse_with_placed_errors(src in prop_oneof![
        4 => expression(),
        2 => fragment(),
        1 => "\\PC{0,80}",
        1 => prop::collection::vec(fragment(), 1..4).prop_map(|fs| fs.join(" x ")),
    ]) {
        check_expression(&src)?;
    }
}

/// The shipped and fixture files themselves (no edits) keep the place property.
#[test]
fn real_files_validate_with_placed_diagnostics() {
    for seed in SEEDS.iter() {
        let (file, diags) = validate_text(&seed.name, &seed.text, &seed.workspace, seed.action);
        if let Err(e) = check_diagnostics(&file, &diags) {
            panic!("{}: {e}", seed.name);
        }
    }
}

// Regression cases found by this fuzz target go here, each as a plain `#[test]` that loads
// the shrunk input with `validate_text` (or `check_expression`) and checks it; one not yet
// fixed stays commented out under a `// FOUND:` line saying what failed.
//
// FOUND (fixed): a document cut short after its final newline had its error at the end of
// the text: `location()` named the empty line after it (2:1), the rendered `-->` line the end
// of the last line (1:3). Both now read `SourceFile::shown`.
#[test]
fn a_document_cut_short_is_rendered_where_it_is_located() {
    for text in [
        "jobs:\n  a:\n    steps: [\n",
        "on: push\njobs:\n  a: {\n",
        "jobs:\n  a:\n    steps:\n      - run: \"x\n",
    ] {
        let (file, diags) = validate_text("w.yml", text, &repo_root(), false);
        assert!(diags.has_errors(), "{text:?}");
        if let Err(e) = check_diagnostics(&file, &diags) {
            panic!("{text:?}: {e}");
        }
    }
}
