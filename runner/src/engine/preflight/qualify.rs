//! Which checks of a job qualify for preflight: a walk over its steps (and into the composite
//! actions it uses) that keeps what each step may have changed: the containers started and
//! untouched since, whether the host was touched, whether `env` is still known. A check
//! qualifies only while nothing before it can change its answer; so do the `required-paths` of
//! a `start-container` while nothing could have put the paths there.

use std::collections::HashMap;

use crate::expr::parse_template;
use crate::steps::{self, Effect};
use crate::workflow::model::{Action, Job, Step, Uses, Value as ModelValue, Workflow};

/// Whether the built-in `name` is one preflight may run early ([`steps::Builtin::runs_in_preflight`]).
fn runs_early(name: &str) -> bool {
    steps::registered(name).is_some_and(|b| b.runs_in_preflight())
}

/// Whether the built-in `name` does `effect`.
pub(super) fn does(name: &str, effect: Effect) -> bool {
    steps::effect(name) == Some(effect)
}

/// Contexts whose values are known before the first step. `env` is too, until a step could
/// have changed it through `$GITHUB_ENV`; `steps`, `needs`, `job` and `runner` are not.
const KNOWN_AT_START: &[&str] = &[
    "matrix", "inputs", "vars", "github", "gpuflow", "secrets", "strategy",
];

/// Where a container comes from: a `start-container` step of the job, or one inside the
/// composite action a job step uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartAt {
    /// Index of the job's step.
    pub step: usize,
    /// Index of the `start-container` step inside that step's action.
    pub inner: Option<usize>,
}

/// A step of a job that preflight runs early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Index of the check step in the job.
    pub step: usize,
    /// Where the container the check looks into is started; `None` on the host.
    pub start: Option<StartAt>,
}

/// What the steps before a check may have changed.
struct Walk {
    /// Container name → where it was started, while nothing touched it since.
    started: HashMap<String, StartAt>,
    host_touched: bool,
    /// No step could have written `$GITHUB_ENV` yet.
    env_known: bool,
}

impl Walk {
    /// After a step that may run anything anywhere (an unknown or conditional action).
    fn opaque(&mut self) {
        self.host_touched = true;
        self.env_known = false;
        self.started.clear();
    }

    /// After a `run:` step: it may write `$GITHUB_ENV` and whatever its place holds.
    fn script(&mut self, container: Option<Option<String>>) {
        self.env_known = false;
        match container {
            Some(Some(name)) => {
                self.started.remove(&name);
            }
            // A container chosen by an expression could be any of them.
            Some(None) => self.started.clear(),
            None => self.host_touched = true,
        }
    }
}

/// The checks of `job` (of `wf`) preflight may run, in step order.
pub fn candidates(wf: &Workflow, job: &Job) -> Vec<Candidate> {
    if job.condition.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut walk = Walk {
        started: HashMap::new(),
        host_touched: !job.needs.is_empty(),
        env_known: true,
    };
    for (i, step) in job.steps.iter().enumerate() {
        match step.uses.as_ref().map(|u| &u.value) {
            None => walk.script(step.container.as_ref().map(|c| literal(&c.value))),
            Some(Uses::Builtin(name)) if does(name, Effect::StartsContainer) => {
                let container = with_literal(step, "name")
                    .or_else(|| step.id.as_ref().map(|i| i.value.clone()));
                if let Some(c) = container {
                    if step.condition.is_none() && static_inputs(step, walk.env_known) {
                        walk.started.insert(
                            c,
                            StartAt {
                                step: i,
                                inner: None,
                            },
                        );
                    } else {
                        walk.started.remove(&c);
                    }
                }
            }
            Some(Uses::Builtin(name)) if does(name, Effect::StopsContainer) => {
                match with_literal(step, "container") {
                    Some(c) => {
                        walk.started.remove(&c);
                    }
                    None => walk.started.clear(),
                }
            }
            Some(Uses::Builtin(name)) if runs_early(name) => {
                let eligible = step.condition.is_none()
                    && step.continue_on_error.is_none()
                    && static_inputs(step, walk.env_known);
                if !eligible {
                    continue;
                }
                match step.with.get("container") {
                    None if !walk.host_touched => out.push(Candidate {
                        step: i,
                        start: None,
                    }),
                    None => {}
                    Some(_) => {
                        if let Some(start) =
                            with_literal(step, "container").and_then(|c| walk.started.get(&c))
                        {
                            out.push(Candidate {
                                step: i,
                                start: Some(*start),
                            });
                        }
                    }
                }
            }
            Some(Uses::Builtin(_)) => {}
            Some(uses @ (Uses::Local(_) | Uses::Remote { .. })) => match uses
                .action_key()
                .and_then(|k| wf.actions.get(&k))
            {
                Some(action) if step.condition.is_none() && static_inputs(step, walk.env_known) => {
                    follow_action(step, i, action, &mut walk);
                }
                _ => walk.opaque(),
            },
            Some(_) => walk.opaque(),
        }
    }
    out
}

/// The steps of a composite action used by job step `i`: the containers it starts (by the
/// names its inputs give them) and what its scripts may change. Actions inside it are opaque.
fn follow_action(call: &Step, i: usize, action: &Action, walk: &mut Walk) {
    let resolve = |v: &str| action_literal(call, action, v);
    for (j, inner) in action.runs.steps.iter().enumerate() {
        match inner.uses.as_ref().map(|u| &u.value) {
            None => walk.script(inner.container.as_ref().map(|c| resolve(&c.value))),
            Some(Uses::Builtin(name)) if does(name, Effect::StartsContainer) => {
                let container = match inner.with.get("name").map(|v| &v.value) {
                    Some(ModelValue::String(s)) => resolve(s.as_str()),
                    Some(_) => None,
                    None => inner.id.as_ref().map(|i| i.value.clone()),
                };
                if let Some(c) = container {
                    if inner.condition.is_none() && static_inputs(inner, walk.env_known) {
                        walk.started.insert(
                            c,
                            StartAt {
                                step: i,
                                inner: Some(j),
                            },
                        );
                    } else {
                        walk.started.remove(&c);
                    }
                }
            }
            Some(Uses::Builtin(name)) if does(name, Effect::StopsContainer) => {
                match inner.with.get("container").map(|v| &v.value) {
                    Some(ModelValue::String(s)) if resolve(s).is_some() => {
                        walk.started.remove(&resolve(s).unwrap_or_default());
                    }
                    _ => walk.started.clear(),
                }
            }
            Some(Uses::Builtin(_)) => {}
            Some(_) => walk.opaque(),
        }
    }
}

/// The `start-container` steps (of the job, or inside the composite actions it uses) whose
/// `required-paths` preflight looks for, in step order. Only while nothing before them could
/// have put the paths there: no `run:` step, no `benchmark` (it may run a command), no action
/// gpuflow cannot see into, no earlier container with a writable volume (a downloader), no
/// `services:` and no job this one `needs`. The others are looked for at their place.
pub fn path_checks(wf: &Workflow, job: &Job) -> Vec<StartAt> {
    starts_checked(wf, job, "required-paths")
}

/// The `start-container` steps whose model's memory preflight estimates: those with a
/// `command`, under the rules of [`path_checks`] (the model's `config.json` is a file it
/// could have been given).
pub fn memory_checks(wf: &Workflow, job: &Job) -> Vec<StartAt> {
    starts_checked(wf, job, "command")
}

/// The `start-container` steps with the input `input` that nothing before could have
/// changed the files of ([`path_checks`]).
fn starts_checked(wf: &Workflow, job: &Job, input: &str) -> Vec<StartAt> {
    let mut out = Vec::new();
    if job.condition.is_some() || !job.needs.is_empty() || !job.services.is_empty() {
        return out;
    }
    // Whether a step may have written somewhere a later container mounts; `false` ends the walk.
    let step_keeps = |step: &Step, at: StartAt, out: &mut Vec<StartAt>| -> bool {
        match step.uses.as_ref().map(|u| &u.value) {
            Some(Uses::Builtin(name)) if does(name, Effect::StartsContainer) => {
                if step.condition.is_none()
                    && static_inputs(step, true)
                    && step.with.contains_key(input)
                {
                    out.push(at);
                }
                !writable_volumes(step)
            }
            Some(Uses::Builtin(name)) => !does(name, Effect::MayWrite),
            _ => false,
        }
    };
    for (i, step) in job.steps.iter().enumerate() {
        let keeps = match step.uses.as_ref().map(|u| &u.value) {
            Some(uses @ (Uses::Local(_) | Uses::Remote { .. })) => {
                match uses.action_key().and_then(|k| wf.actions.get(&k)) {
                    Some(action) if step.condition.is_none() && static_inputs(step, true) => {
                        action.runs.steps.iter().enumerate().all(|(j, inner)| {
                            step_keeps(
                                inner,
                                StartAt {
                                    step: i,
                                    inner: Some(j),
                                },
                                &mut out,
                            )
                        })
                    }
                    _ => false,
                }
            }
            _ => step_keeps(
                step,
                StartAt {
                    step: i,
                    inner: None,
                },
                &mut out,
            ),
        };
        if !keeps {
            break;
        }
    }
    out
}

/// Whether a `start-container` step may mount something writable: a `volumes` item that is
/// not a literal ending in `:ro`.
fn writable_volumes(step: &Step) -> bool {
    match step.with.get("volumes").map(|v| &v.value) {
        None => false,
        Some(ModelValue::List(items)) => items.iter().any(|i| match &i.value {
            ModelValue::String(s) => literal(s).is_none_or(|s| !s.trim_end().ends_with(":ro")),
            _ => true,
        }),
        Some(_) => true,
    }
}

/// A value inside an action that is a literal, or exactly `${{ inputs.NAME }}` with `NAME`
/// given literally by the calling step or by the input's default.
fn action_literal(call: &Step, action: &Action, value: &str) -> Option<String> {
    if let Some(l) = literal(value) {
        return Some(l);
    }
    let name = value
        .trim()
        .strip_prefix("${{")?
        .strip_suffix("}}")?
        .trim()
        .strip_prefix("inputs.")?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    match call.with.get(name) {
        Some(v) => match &v.value {
            ModelValue::String(s) => literal(s),
            _ => None,
        },
        None => literal(&action.inputs.get(name)?.default.as_ref()?.value),
    }
}

/// The text of a `with:` input without expressions.
fn with_literal(step: &Step, input: &str) -> Option<String> {
    match &step.with.get(input)?.value {
        ModelValue::String(s) => literal(s),
        _ => None,
    }
}

fn literal(s: &str) -> Option<String> {
    (!s.contains("${{")).then(|| s.to_string())
}

/// Whether every `with:` and `env:` value of the step reads only contexts known at the start
/// (`env` among them while `env_known`).
pub(super) fn static_inputs(step: &Step, env_known: bool) -> bool {
    step.with
        .values()
        .all(|v| static_value(&v.value, env_known))
        && step.env.values().all(|v| static_text(&v.value, env_known))
}

fn static_value(v: &ModelValue, env_known: bool) -> bool {
    match v {
        ModelValue::String(s) => static_text(s, env_known),
        ModelValue::List(items) => items.iter().all(|i| static_value(&i.value, env_known)),
        ModelValue::Map(m) => m.values().all(|i| static_value(&i.value, env_known)),
        _ => true,
    }
}

fn static_text(s: &str, env_known: bool) -> bool {
    parse_template(s).is_ok_and(|t| {
        t.expressions().all(|(e, _)| {
            e.context_accesses().iter().all(|a| {
                a.path.first().is_some_and(|root| {
                    let root = root.to_ascii_lowercase();
                    KNOWN_AT_START.contains(&root.as_str()) || env_known && root == "env"
                })
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::Loaded;

    fn workflow(yaml: &str) -> Workflow {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let action = dir.path().join("actions/client");
        std::fs::create_dir_all(&action).unwrap();
        std::fs::write(action.join("action.yml"), ACTION).unwrap();
        let path = dir.path().join("wf.yml");
        std::fs::write(&path, yaml).unwrap();
        let (loaded, diags) = crate::check::load_and_check(&path).unwrap();
        assert!(!diags.has_errors(), "{diags:?}");
        let Loaded::Workflow(Some(wf)) = loaded else {
            panic!("not a workflow")
        };
        *wf
    }

    /// Starts a container named by its input `name` (`client` by default).
    const ACTION: &str = "name: client\ndescription: a client\ninputs:\n  name: { description: its name, default: client }\n  touch: { description: run in it, default: 'no' }\nruns:\n  using: composite\n  steps:\n    - uses: start-container\n      with: { name: \"${{ inputs.name }}\", image: gpuflow-python:test }\n";

    const HEAD: &str = "on: push\njobs:\n  bench:\n";

    fn steps(job: &str) -> Vec<(usize, Option<usize>)> {
        let wf = workflow(&format!("{HEAD}{job}"));
        candidates(&wf, &wf.jobs[0])
            .into_iter()
            .map(|c| (c.step, c.start.map(|s| s.step)))
            .collect()
    }

    const START: &str = "      - uses: start-container\n        with: { name: server, image: gpuflow-python:test }\n";
    const CHECK: &str = "      - uses: check-cli-interface\n        with: { container: server, command: python3 /tmp/b.py, args: --port 1 }\n";

    #[test]
    fn a_check_in_a_started_image_runs_early() {
        assert_eq!(
            steps(&format!("    steps:\n{START}{CHECK}")),
            [(1, Some(0))]
        );
    }

    #[test]
    fn a_run_in_the_container_before_the_check_keeps_it_in_place() {
        let touch = "      - run: touch /tmp/x\n        container: server\n";
        assert_eq!(steps(&format!("    steps:\n{START}{touch}{CHECK}")), []);
    }

    #[test]
    fn a_check_reading_an_earlier_step_stays_in_place() {
        let check = "      - uses: check-cli-interface\n        with: { container: server, command: python3, args: \"${{ steps.a.outputs.x }}\" }\n";
        let by_matrix = "      - uses: check-cli-interface\n        with: { container: server, command: python3, args: \"${{ matrix.x }}\" }\n";
        assert_eq!(
            steps(&format!(
                "    strategy: {{ matrix: {{ x: [a] }} }}\n    steps:\n{START}      - id: a\n        run: echo x=1\n{check}{by_matrix}"
            )),
            [(3, Some(0))]
        );
    }

    #[test]
    fn conditions_and_continue_on_error_keep_checks_in_place() {
        let cond = "      - if: github.ref == 'x'\n        uses: assert-file\n        with: { path: /x }\n";
        let coe = "      - uses: assert-file\n        continue-on-error: true\n        with: { path: /x }\n";
        let plain = "      - uses: assert-file\n        with: { path: /x }\n";
        assert_eq!(
            steps(&format!("    steps:\n{cond}{coe}{plain}")),
            [(2, None)]
        );
    }

    #[test]
    fn host_checks_after_a_host_script_stay_in_place() {
        let host = "      - uses: assert-file\n        with: { path: /x }\n";
        let run = "      - run: echo hi > /x\n";
        assert_eq!(
            steps(&format!("    steps:\n{host}{run}{host}")),
            [(0, None)]
        );
    }

    #[test]
    fn a_job_with_a_condition_has_no_early_checks() {
        assert_eq!(
            steps(&format!("    if: false\n    steps:\n{START}{CHECK}")),
            []
        );
    }

    #[test]
    fn env_is_known_until_a_script_could_change_it() {
        let check = "      - uses: check-cli-interface\n        with: { container: server, command: \"python3 ${{ env.SCRIPT }}\" }\n";
        let run = "      - run: echo SCRIPT=/b.py >> \"$GITHUB_ENV\"\n";
        assert_eq!(
            steps(&format!(
                "    env: {{ SCRIPT: /tmp/b.py }}\n    steps:\n{START}{check}{run}{check}"
            )),
            [(1, Some(0))]
        );
    }

    #[test]
    fn a_container_started_inside_an_action_is_followed() {
        let using = "      - uses: ./actions/client\n";
        let named = "      - uses: ./actions/client\n        with: { name: bench }\n";
        let check = |c: &str| {
            format!(
                "      - uses: check-cli-interface\n        with: {{ container: {c}, command: python3 }}\n"
            )
        };
        let wf = workflow(&format!(
            "{HEAD}    steps:\n{using}{named}{}{}{}",
            check("client"),
            check("bench"),
            check("other")
        ));
        let found = candidates(&wf, &wf.jobs[0]);
        assert_eq!(
            found,
            [
                Candidate {
                    step: 2,
                    start: Some(StartAt {
                        step: 0,
                        inner: Some(0)
                    })
                },
                Candidate {
                    step: 3,
                    start: Some(StartAt {
                        step: 1,
                        inner: Some(0)
                    })
                },
            ]
        );
    }

    #[test]
    fn an_unknown_action_hides_what_came_before() {
        let conditional = "      - if: github.ref == 'x'\n        uses: ./actions/client\n        with: { name: server }\n";
        assert_eq!(
            steps(&format!("    steps:\n{START}{conditional}{CHECK}")),
            []
        );
    }

    #[test]
    fn required_paths_are_looked_for_early_until_something_could_write_them() {
        let server = |name: &str, volumes: &str| {
            format!(
                "      - uses: start-container\n        with: {{ name: {name}, image: gpuflow-python:test, volumes: [{volumes}], required-paths: [/models/m] }}\n"
            )
        };
        let found = |job: &str| {
            let wf = workflow(&format!("{HEAD}{job}"));
            path_checks(&wf, &wf.jobs[0])
                .into_iter()
                .map(|s| s.step)
                .collect::<Vec<_>>()
        };
        let ro = server("a", "'/m:/models:ro'");
        let rw = server("a", "'/m:/models'");
        let b = server("b", "'/m:/models:ro'");
        // Read-only mounts cannot have written the second server's model.
        assert_eq!(found(&format!("    steps:\n{ro}{b}")), [0, 1]);
        // A writable one could (a downloader), and so could a script.
        assert_eq!(found(&format!("    steps:\n{rw}{b}")), [0]);
        assert_eq!(
            found(&format!("    steps:\n      - run: echo get\n{b}")),
            Vec::<usize>::new()
        );
        // A job that needs another: the other may have downloaded it.
        let wf = workflow(&format!(
            "{HEAD}    steps:\n{b}  second:\n    needs: bench\n    steps:\n{b}"
        ));
        assert_eq!(path_checks(&wf, &wf.jobs[0]).len(), 1);
        assert!(path_checks(&wf, &wf.jobs[1]).is_empty());
    }
}
