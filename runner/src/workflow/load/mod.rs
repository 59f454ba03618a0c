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
mod remote;
mod search;
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
pub use remote::{FetchedAction, RemoteAction, RemoteActionSource};

/// State shared by one load: where `./` actions are found, what fetches remote ones, and the
/// actions already read.
pub(crate) struct LoadContext<'r> {
    workspace: PathBuf,
    /// `None`: remote actions are reported as unresolved (a load without sources, as in
    /// unit tests).
    remote: Option<&'r mut dyn RemoteActionSource>,
    /// Each action folder is loaded once per load, so two steps using it report its
    /// problems once.
    cache: HashMap<PathBuf, Option<(Arc<SourceFile>, Action)>>,
    /// Action folders being loaded, to refuse an action that uses itself.
    stack: Vec<PathBuf>,
    used_actions: IndexMap<String, Action>,
}

impl<'r> LoadContext<'r> {
    fn new(workspace: &Path, remote: Option<&'r mut dyn RemoteActionSource>) -> Self {
        Self {
            workspace: workspace.to_owned(),
            remote,
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

/// Loads a workflow whose `./` actions are relative to `workspace`. Remote actions are
/// reported as unresolved: [`load_workflow_with`] resolves them.
pub fn load_workflow_in(
    file: &Arc<SourceFile>,
    workspace: &Path,
) -> (Option<Workflow>, Diagnostics) {
    load_workflow_inner(file, workspace, None)
}

/// Loads a workflow whose `./` actions are relative to `workspace` and whose remote actions
/// `remote` fetches.
pub fn load_workflow_with(
    file: &Arc<SourceFile>,
    workspace: &Path,
    remote: &mut dyn RemoteActionSource,
) -> (Option<Workflow>, Diagnostics) {
    load_workflow_inner(file, workspace, Some(remote))
}

fn load_workflow_inner(
    file: &Arc<SourceFile>,
    workspace: &Path,
    remote: Option<&mut dyn RemoteActionSource>,
) -> (Option<Workflow>, Diagnostics) {
    let (root, mut diags) = yaml::parse(file);
    let Some(root) = root else {
        return (None, diags);
    };
    let mut ctx = LoadContext::new(workspace, remote);
    let mut reader = Reader::new(file);
    let workflow = reader.workflow(&root, &mut ctx);
    diags.extend(reader.diags);
    (workflow, diags.sorted())
}

/// Loads an action file (`action.yml`). `./` actions its steps use are resolved like
/// [`load_workflow`]'s.
pub fn load_action(file: &Arc<SourceFile>) -> (Option<Action>, Diagnostics) {
    load_action_inner(file, None)
}

fn load_action_inner(
    file: &Arc<SourceFile>,
    remote: Option<&mut dyn RemoteActionSource>,
) -> (Option<Action>, Diagnostics) {
    let path = Path::new(&file.name);
    let mut ctx = LoadContext::new(&workspace_of(path), remote);
    if let Some(dir) = path.parent().and_then(|d| d.canonicalize().ok()) {
        ctx.stack.push(dir);
    }
    let (action, diags) = load_action_with(file, &mut ctx);
    (action, diags.sorted())
}

fn load_action_with(
    file: &Arc<SourceFile>,
    ctx: &mut LoadContext<'_>,
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
    load_path_inner(path, None)
}

/// [`load_path`], with remote actions fetched by `remote`.
pub fn load_path_with(
    path: &Path,
    remote: &mut dyn RemoteActionSource,
) -> Result<(Loaded, Diagnostics), Box<Diagnostic>> {
    load_path_inner(path, Some(remote))
}

fn load_path_inner(
    path: &Path,
    remote: Option<&mut dyn RemoteActionSource>,
) -> Result<(Loaded, Diagnostics), Box<Diagnostic>> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        Box::new(Diagnostic::unlocated(format!(
            "cannot read `{}`: {err}",
            path.display()
        )))
    })?;
    let file = SourceFile::new(path.to_string_lossy(), text);
    Ok(if is_action_file(path) {
        let (a, d) = load_action_inner(&file, remote);
        (Loaded::Action(a.map(Box::new)), d)
    } else {
        let (w, d) = load_workflow_inner(&file, &workspace_of(path), remote);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::model::{
        BoolOrExpr, GpuDevices, Matrix, MatrixDim, NumberOrExpr, Uses, Value,
    };
    use test_case::test_case;

    fn load(text: &str) -> (Option<Workflow>, Diagnostics, Arc<SourceFile>) {
        let file = SourceFile::new("w.yml", text);
        let (w, d) = load_workflow_in(&file, Path::new("/nonexistent"));
        (w, d, file)
    }

    /// The one error a text gives: its message and where it points.
    fn only_error(text: &str) -> (String, String) {
        let (_, diags, file) = load(text);
        let errors: Vec<_> = diags.iter().filter(|d| d.is_error()).collect();
        assert_eq!(errors.len(), 1, "{text}\n{errors:#?}");
        (errors[0].message.clone(), file.location(errors[0].span))
    }

    fn job(body: &str) -> String {
        format!("jobs:\n  a:\n{body}")
    }

    const STEP: &str = "    steps:\n      - run: x\n";

    #[test_case(
        "jobs:\n  a:\n    timeout-minute: 5\n    steps: [{run: x}]\n",
        "unknown key `timeout-minute` in a job",
        "w.yml:3:5"
    )]
    #[test_case(
        "nme: x\njobs: {a: {steps: [{run: x}]}}\n",
        "unknown key `nme` in a workflow",
        "w.yml:1:1"
    )]
    #[test_case(
        "jobs:\n  a:\n    steps:\n      - run: x\n        shel: bash\n",
        "unknown key `shel` in a step",
        "w.yml:5:9"
    )]
    #[test_case(
        "jobs: {a: {steps: [{run: x}], needs: {b: 1}}}\n",
        "`needs` expects a job id or a list of job ids, found a mapping",
        "w.yml:1:38"
    )]
    #[test_case("jobs: {}\n", "`jobs` is empty", "w.yml:1:1")]
    #[test_case("name: x\n", "a workflow needs `jobs`", "w.yml:1:1")]
    #[test_case("jobs: {a: {steps: []}}\n", "`steps` is empty", "w.yml:1:12")]
    #[test_case("jobs: {a: {name: x}}\n", "job `a` has no `steps`", "w.yml:1:8")]
    #[test_case(
        "jobs: {9a: {steps: [{run: x}]}}\n",
        "invalid job id `9a`",
        "w.yml:1:8"
    )]
    #[test_case(
        "jobs: {a: {steps: [{run: x, uses: report}]}}\n",
        "a step has either `run` or `uses`, not both",
        "w.yml:1:29"
    )]
    #[test_case(
        "jobs: {a: {steps: [{name: x}]}}\n",
        "a step needs `run` or `uses`",
        "w.yml:1:21"
    )]
    #[test_case(
        "jobs: {a: {steps: [{run: x, with: {a: 1}}]}}\n",
        "`with` only applies to `uses` steps",
        "w.yml:1:29"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: report, shell: bash}]}}\n",
        "`shell` only applies to `run` steps",
        "w.yml:1:35"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: stop-container, with: {container: s, timeout: 10}}]}}\n",
        "input `timeout` expects a duration such as `500ms`, `30s`, `15m` or `1h30m`, found `10`",
        "w.yml:1:73"
    )]
    #[test_case(
        "jobs: {a: {timeout-minutes: soon, steps: [{run: x}]}}\n",
        "`timeout-minutes` expects a number of minutes or an expression, found `soon`",
        "w.yml:1:29"
    )]
    #[test_case(
        "jobs: {a: {timeout-minutes: -5, steps: [{run: x}]}}\n",
        "`timeout-minutes` must be greater than zero, found `-5`",
        "w.yml:1:29"
    )]
    #[test_case(
        "jobs: {a: {steps: [{run: x, shell: foo}]}}\n",
        "unknown shell `foo`",
        "w.yml:1:36"
    )]
    #[test_case(
        "defaults: {run: {shell: pwsh}}\njobs: {a: {steps: [{run: x}]}}\n",
        "unknown shell `pwsh`",
        "w.yml:1:25"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: './../x'}]}}\n",
        "the action path in `./../x` has a `..` component",
        "w.yml:1:28"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: ../x}]}}\n",
        "the action path in `../x` has a `..` component",
        "w.yml:1:27"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: ./a/./b}]}}\n",
        "the action path in `./a/./b` has a `.` component",
        "w.yml:1:27"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: owner/repo//etc/x@v1}]}}\n",
        "the action path in `owner/repo//etc/x@v1` has an empty component (`//`)",
        "w.yml:1:27"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: owner/repo/a/../../x@v1}]}}\n",
        "the action path in `owner/repo/a/../../x@v1` has a `..` component",
        "w.yml:1:27"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: benchmrk}]}}\n",
        "unknown built-in step `benchmrk`",
        "w.yml:1:27"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: report, with: {formt: html}}]}}\n",
        "unknown input `formt` of `report`",
        "w.yml:1:42"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: assert-file}]}}\n",
        "`assert-file` needs input `path`",
        "w.yml:1:27"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: report, with: {format: pdf}}]}}\n",
        "input `format` expects one of `markdown` or `html`, found `pdf`",
        "w.yml:1:50"
    )]
    #[test_case(
        "jobs: {a: {steps: [{uses: benchmark, with: {runs: [1]}}]}}\n",
        "input `runs` expects a whole number, found a list",
        "w.yml:1:51"
    )]
    #[test_case(
        "jobs: {a: {needs: b, steps: [{run: x}]}}\n",
        "job `a` needs unknown job `b`",
        "w.yml:1:19"
    )]
    #[test_case(
        "jobs: {a: {steps: [{id: s, run: x}, {id: s, run: y}]}}\n",
        "duplicate step id `s`",
        "w.yml:1:42"
    )]
    #[test_case(
        "jobs: {a: {steps: [{id: 1s, run: x}]}}\n",
        "invalid step id `1s`",
        "w.yml:1:25"
    )]
    #[test_case(
        "jobs: {a: {gpus: 0, steps: [{run: x}]}}\n",
        "`gpus` must be at least 1, found `0`",
        "w.yml:1:18"
    )]
    #[test_case(
        "jobs: {a: {gpus: '0,1', steps: [{run: x}]}}\n",
        "`gpus` expects `all`, a number of GPUs, or a list of device ids, found `0,1`",
        "w.yml:1:18"
    )]
    #[test_case(
        "jobs: {a: {gpus: {count: [0, 1]}, steps: [{run: x}]}}\n",
        "`gpus` expects `all` or a number of GPUs, found a list",
        "w.yml:1:26";
        "count takes no device list"
    )]
    #[test_case(
        "jobs: {a: {gpus: {ids: []}, steps: [{run: x}]}}\n",
        "`gpus` lists no devices",
        "w.yml:1:24"
    )]
    #[test_case(
        "jobs: {a: {gpus: {ids: [0], constraint: near}, steps: [{run: x}]}}\n",
        "unknown GPU constraint `near`",
        "w.yml:1:41"
    )]
    #[test_case("jobs: {a: {steps: [{uses: 'a/b'}]}}\n", "`a/b` is not a step gpuflow can use", "w.yml:1:28"; "inside the quotes")]
    #[test_case(
        "jobs: {a: {steps: [{uses: ./nowhere}]}}\n",
        "action `./nowhere` not found",
        "w.yml:1:27"
    )]
    #[test_case(
        "on: pull\njobs: {a: {steps: [{run: x}]}}\n",
        "unknown event `pull`",
        "w.yml:1:5"
    )]
    #[test_case(
        "on: {push: {branches: main, branches-ignore: x}}\njobs: {a: {steps: [{run: x}]}}\n",
        "`branches` and `branches-ignore` cannot both be used",
        "w.yml:1:29"
    )]
    #[test_case(
        "jobs: {a: {continue-on-error: 'yes', steps: [{run: x}]}}\n",
        "`continue-on-error` expects `true`, `false` or an expression, found `yes`",
        "w.yml:1:31"
    )]
    #[test_case(
        "jobs: {a: {strategy: {matrix: {x: []}}, steps: [{run: x}]}}\n",
        "matrix dimension `x` has no values",
        "w.yml:1:35"
    )]
    #[test_case(
        "jobs: {a: {container: {env: {}}, steps: [{run: x}]}}\n",
        "`container` needs an `image`",
        "w.yml:1:23"
    )]
    #[test_case(
        "concurrency: {cancel-in-progress: true}\njobs: {a: {steps: [{run: x}]}}\n",
        "`concurrency` needs a `group`",
        "w.yml:1:14"
    )]
    #[test_case(
        "jobs: {a: {uses: org/repo/.github/workflows/x.yml@v1}}\n",
        "reusable workflows (`uses:` on a job) are not supported",
        "w.yml:1:12"
    )]
    #[test_case(
        "name: 1\nname: 2\njobs: {a: {steps: [{run: x}]}}\n",
        "duplicate key `name`",
        "w.yml:2:1"
    )]
    // At the end of the file: shown on its last character, the end of line 1
    // (`SourceFile::shown`), where the rendered `-->` line points too.
    #[test_case("jobs: [\n", "invalid YAML: expected a value here", "w.yml:1:8")]
    fn each_check_reports_one_error_at_its_place(text: &str, message: &str, location: &str) {
        let (got_message, got_location) = only_error(text);
        assert_eq!(got_message, message);
        assert_eq!(got_location, location);
    }

    #[test]
    fn every_error_of_a_file_is_reported_at_once() {
        let text = job(
            "    timeout-minute: 5\n    gpus: 0\n    steps:\n      - uses: nope\n      - uses: report\n        with: {formt: x}\n",
        );
        let (_, diags, _) = load(&text);
        assert_eq!(diags.error_count(), 4, "{diags:#?}");
    }

    #[test]
    fn on_accepts_every_github_shape() {
        for on in [
            "push",
            "[push, workflow_dispatch]",
            "{push: {branches: [main]}, workflow_dispatch: }",
        ] {
            let (w, d, _) = load(&format!("on: {on}\n{}", job(STEP)));
            assert!(!d.has_errors(), "{on}: {d:#?}");
            assert!(w.unwrap().on.push.is_some(), "{on}");
        }
    }

    #[test]
    fn github_only_events_and_keys_are_warnings() {
        let (w, d, _) = load(&format!(
            "on: [push, pull_request]\npermissions: read-all\n{}",
            job(STEP)
        ));
        assert!(w.is_some());
        assert!(!d.has_errors());
        assert_eq!(d.warning_count(), 2, "{d:#?}");
    }

    #[test]
    fn uses_forms_are_parsed() {
        let text = job(
            "    steps:\n      - uses: report\n      - uses: org/repo/path@v1\n      - uses: docker://alpine:3\n",
        );
        let (w, _, _) = load(&text);
        let w = w.unwrap();
        let uses: Vec<_> = w.jobs["a"]
            .steps
            .iter()
            .map(|s| s.uses.clone().unwrap().value)
            .collect();
        assert_eq!(uses[0], Uses::Builtin("report".into()));
        assert!(
            matches!(&uses[1], Uses::Remote { path: Some(p), git_ref, .. } if p == "path" && git_ref == "v1")
        );
        assert_eq!(uses[2], Uses::Docker("alpine:3".into()));
    }

    #[test]
    fn with_values_are_strings_as_written_but_lists_stay_lists() {
        let text = job(
            "    steps:\n      - uses: start-container\n        with: {image: x, init: true, ports: ['1:1'], user: 1.0, name: }\n",
        );
        let (w, d, _) = load(&text);
        assert!(!d.has_errors(), "{d:#?}");
        let with = &w.unwrap().jobs["a"].steps[0].with;
        assert_eq!(with["init"].value, Value::String("true".into()));
        assert_eq!(with["user"].value, Value::String("1.0".into()));
        assert_eq!(with["name"].value, Value::String(String::new()));
        assert!(matches!(with["ports"].value, Value::List(_)));
    }

    #[test]
    fn matrix_values_keep_their_yaml_type() {
        let text = job(
            "    strategy:\n      matrix:\n        tp: [1, 2]\n        fast: [true]\n        include: [{tp: 8, extra: x}]\n    steps: [{run: x}]\n",
        );
        let (w, d, _) = load(&text);
        assert!(!d.has_errors(), "{d:#?}");
        let w = w.unwrap();
        let Some(Matrix::Dims(m)) = &w.jobs["a"].strategy.as_ref().unwrap().matrix else {
            panic!("no matrix")
        };
        let MatrixDim::Values(tp) = &m.dims["tp"].value else {
            panic!()
        };
        assert_eq!(tp[1].value, Value::Int(2));
        assert_eq!(m.include[0].value["extra"].value, Value::String("x".into()));
    }

    #[test]
    fn gpus_forms() {
        let cases = [
            ("all", "All"),
            ("4", "Count(4)"),
            ("[0, GPU-abc]", "Ids"),
            ("'${{ matrix.gpus }}'", "Expr"),
            ("{count: 2, constraint: same-numa}", "Count(2)"),
        ];
        for (gpus, want) in cases {
            let (w, d, _) = load(&job(&format!("    gpus: {gpus}\n{STEP}")));
            assert!(!d.has_errors(), "{gpus}: {d:#?}");
            let got = match w.unwrap().jobs["a"].gpus.clone().unwrap().devices {
                GpuDevices::All => "All".to_owned(),
                GpuDevices::Count(n) => format!("Count({n})"),
                GpuDevices::Ids(_) => "Ids".to_owned(),
                GpuDevices::Expr(_) => "Expr".to_owned(),
            };
            assert_eq!(got, want);
        }
    }

    #[test]
    fn expressions_are_kept_with_the_span_of_their_text() {
        let text = job(
            "    if: ${{ github.ref == 'main' }}\n    timeout-minutes: ${{ inputs.t }}\n    continue-on-error: \"${{ matrix.x }}\"\n    steps: [{run: x}]\n",
        );
        let (w, d, file) = load(&text);
        assert!(!d.has_errors(), "{d:#?}");
        let job = &w.unwrap().jobs["a"];
        let cond = job.condition.as_ref().unwrap();
        assert_eq!(&file.text[cond.span.range()], "${{ github.ref == 'main' }}");
        assert!(
            matches!(&job.timeout_minutes, Some(NumberOrExpr::Expr(e)) if &file.text[e.span.range()] == "${{ inputs.t }}")
        );
        // Inside the quotes, so column 0 of the string is column 0 of the expression.
        assert!(
            matches!(&job.continue_on_error, Some(BoolOrExpr::Expr(e)) if &file.text[e.span.range()] == "${{ matrix.x }}")
        );
    }

    #[test]
    fn block_scalars_point_at_their_first_line() {
        let text = job("    steps:\n      - run: |\n          echo ${{ x }}\n");
        let (w, _, file) = load(&text);
        let run = w.unwrap().jobs["a"].steps[0].run.clone().unwrap();
        assert!(file.text[run.span.start..].starts_with("echo ${{ x }}"));
        assert_eq!(run.value, "echo ${{ x }}\n");
    }

    #[test]
    fn empty_values_mean_absent() {
        let (w, d, _) = load(&job(
            "    name:\n    if:\n    timeout-minutes:\n    gpus:\n    container:\n    steps: [{run: x}]\n",
        ));
        assert!(d.is_empty(), "{d:#?}");
        let j = &w.unwrap().jobs["a"];
        assert!(j.name.is_none() && j.condition.is_none() && j.gpus.is_none());
    }

    #[test]
    fn local_actions_are_loaded_and_their_inputs_checked() {
        let dir = std::env::temp_dir().join(format!("gpuflow-load-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("actions/srv")).unwrap();
        std::fs::write(
            dir.join("actions/srv/action.yml"),
            "name: srv\ninputs:\n  model: {required: true}\nruns:\n  using: composite\n  steps: [{run: echo}]\n",
        )
        .unwrap();
        let file = SourceFile::new(
            "w.yml",
            job(
                "    steps:\n      - uses: ./actions/srv\n      - uses: ./actions/srv\n        with: {model: m}\n",
            ),
        );
        let (w, d) = load_workflow_in(&file, &dir);
        assert_eq!(d.error_count(), 1, "{d:#?}");
        assert_eq!(
            d.iter().next().unwrap().message,
            "action `./actions/srv` needs input `model`"
        );
        assert!(w.unwrap().actions.contains_key("./actions/srv"));
        std::fs::write(dir.join("actions/srv/action.yml"), "name: srv\nrunz: {}\n").unwrap();
        let (_, d) = load_workflow_in(&file, &dir);
        // The action's own error points into the action file and names the step.
        let unknown = d.iter().find(|d| d.message.contains("`runz`")).unwrap();
        assert!(unknown.file.as_ref().unwrap().name.ends_with("action.yml"));
        assert_eq!(unknown.related[0].label, "used by this step");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_builtin_example_loads_cleanly() {
        for spec in crate::steps::builtins() {
            let steps: String = spec
                .example
                .lines()
                .map(|l| format!("      {l}\n"))
                .collect();
            let (w, d, _) = load(&job(&format!("    steps:\n{steps}")));
            assert!(d.is_empty(), "{}: {d:#?}", spec.name);
            let step = &w.unwrap().jobs["a"].steps[0];
            assert_eq!(
                step.uses.as_ref().unwrap().value,
                Uses::Builtin(spec.name.into())
            );
        }
    }

    #[test]
    fn non_composite_actions_are_refused() {
        let file = SourceFile::new(
            "action.yml",
            "name: x\nruns:\n  using: node20\n  main: index.js\n",
        );
        let (a, d) = load_action(&file);
        assert!(a.is_none());
        assert_eq!(
            d.iter().next().unwrap().message,
            "`node20` actions are not supported yet"
        );
    }

    #[test]
    fn runs_on_group_and_labels_reads_the_labels() {
        let (w, diags, file) = load(&job(&format!(
            "    runs-on:\n      group: gpu-runners\n      labels: [linux, h100]\n{STEP}"
        )));
        assert!(!diags.has_errors(), "{diags:#?}");
        let labels: Vec<String> = w.unwrap().jobs["a"]
            .runs_on
            .iter()
            .map(|l| l.value.clone())
            .collect();
        assert_eq!(labels, ["linux", "h100"]);
        // gpuflow has no runner groups: `group` is said to be ignored, where it is written.
        let warning = diags.iter().find(|d| !d.is_error()).unwrap();
        assert_eq!(warning.message, "`group` is ignored by gpuflow");
        assert_eq!(file.location(warning.span), "w.yml:4:7");
        // One label, and a key that is not GitHub's.
        let (w, diags, _) = load(&job(&format!("    runs-on: {{labels: gpu}}\n{STEP}")));
        assert!(diags.is_empty(), "{diags:#?}");
        assert_eq!(w.unwrap().jobs["a"].runs_on[0].value, "gpu");
        assert_eq!(
            only_error(&job(&format!("    runs-on: {{label: gpu}}\n{STEP}"))),
            (
                "unknown key `label` in `runs-on`".to_owned(),
                "w.yml:3:15".to_owned()
            )
        );
    }

    #[test]
    fn only_composite_action_outputs_need_a_value() {
        for using in ["node24", "docker"] {
            let file = SourceFile::new(
                "action.yml",
                format!(
                    "name: x\noutputs:\n  out:\n    description: d\nruns:\n  using: {using}\n  main: index.js\n"
                ),
            );
            let (a, d) = load_action(&file);
            assert!(a.is_none());
            let messages: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
            assert_eq!(
                messages,
                [format!("`{using}` actions are not supported yet")]
            );
        }
        let file = SourceFile::new(
            "action.yml",
            "name: x\noutputs:\n  out:\n    description: d\nruns:\n  using: composite\n  steps: [{run: x}]\n",
        );
        let (_, d) = load_action(&file);
        let messages: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(messages, ["output `out` has no `value`"]);
    }

    #[test]
    fn shells_that_run_are_accepted() {
        for shell in [
            "bash",
            "sh",
            "python",
            "python3",
            "perl -w {0}",
            "${{ matrix.sh }}",
        ] {
            let (_, diags, _) = load(&job(&format!(
                "    steps:\n      - run: x\n        shell: '{shell}'\n"
            )));
            assert!(!diags.has_errors(), "{shell}: {diags:#?}");
        }
        let (_, diags, _) = load(&job("    steps:\n      - run: x\n        shell: bsh\n"));
        let d = diags.iter().next().unwrap();
        assert!(d.notes[0].contains("a command with `{0}`"), "{d:?}");
        assert_eq!(d.hints, ["did you mean `bash`?"]);
    }

    #[test]
    fn workspace_is_the_nearest_git_root() {
        let dir = std::env::temp_dir().join(format!("gpuflow-ws-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("repo/.git")).unwrap();
        std::fs::create_dir_all(dir.join("repo/workflows")).unwrap();
        assert_eq!(
            workspace_of(&dir.join("repo/workflows/w.yml")),
            dir.join("repo")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
