//! Template injection: a value anyone who can push chooses (a branch name, a commit message,
//! the event) written with `${{ }}` where a shell reads it as code. gpuflow hands the values
//! of `run:` scripts and of built-in shell inputs to the shell as environment variables, but
//! two places stay unsafe, and `validate` refuses them (zizmor's `template-injection` audit,
//! GitHub's security-hardening guide):
//!
//! - a built-in's shell input ([`crate::steps::BuiltinSpec::shell_inputs`]): even as a variable the value
//!   is split into words and globbed where it is not quoted, so it can add arguments to the
//!   command; and the input reads like shell text, so the safe form should be written out;
//! - a `run:` script that hands the value to a second shell (`sh -c '… ${{ x }} …'`,
//!   `ssh host "…"`, `eval`): the first shell expands the variable into the second one's
//!   code.
//!
//! The safe form in both: `env: { NAME: ${{ … }} }` on the step and `"$NAME"` in the command
//! (passed on to a second shell as an argument: `sh -c '… "$1" …' sh "$NAME"`).
//!
//! A composite action's `inputs.*` are whatever its caller hands it, so an untrusted value
//! given under `with:` is followed into the action: where the action writes that input into
//! one of the places above, into a `run:` script of a shell that is not `bash`/`sh` (which
//! gets `${{ }}` values as text) or into a step's `shell`, the `with:` value is refused at the
//! call site, with the action's line as the related place. `inputs.*` are not refused inside
//! an action by themselves (zizmor's rule for GitHub, where `run:` splices text): in a
//! `bash`/`sh` script gpuflow passes them as variables, and an action may mean an input to be
//! split into words (`args`); only the caller knows whether the value is someone's push.

use std::sync::{Arc, LazyLock};

use regex::Regex;

use indexmap::IndexMap;

use super::expressions::locate;
use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span, Spanned};
use crate::engine::script::untrusted_context;
use crate::engine::script_runner::Shell;
use crate::expr::{Expr, parse_template};
use crate::workflow::model::{Action, Step, Uses, Value};

/// How deep actions using actions are followed; the loader refuses an action using itself,
/// this only bounds a long chain.
const MAX_ACTION_DEPTH: usize = 8;

/// A command that runs its argument through another shell: `sh -c`, `bash -lc`, `ssh`,
/// `eval`, `su -c`. Matched in the text of the script's command before the expression.
static SECOND_SHELL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)(?:^|[\s;&|(`!{])(?:
            (?:busybox\s+)?(?:sh|bash|dash|zsh|ksh|ash|mksh)\s+(?:-[a-zA-Z]+\s+)*-[a-zA-Z]*c[a-zA-Z]*(?:\s|$)
          | ssh(?:\s|$)
          | eval(?:\s|$)
          | su(?:\s.*)?\s-[a-zA-Z]*c(?:\s|$)
        )",
    )
    .expect("a valid regular expression")
});

/// Which values count as untrusted where the steps are.
#[derive(Clone, Copy, Debug)]
pub(super) struct Trust {
    /// The workflow runs on `push`: its `inputs` come from the pushed commit's run, not from
    /// someone at `gpuflow run`.
    pub push_inputs: bool,
}

/// The untrusted context `expr` reads, if any.
fn untrusted(expr: &Expr, trust: Trust) -> Option<String> {
    untrusted_context(expr).or_else(|| {
        if !trust.push_inputs {
            return None;
        }
        expr.context_accesses().into_iter().find_map(|a| {
            let path: Vec<String> = a.path.iter().map(|p| p.to_ascii_lowercase()).collect();
            (path.first().map(String::as_str) == Some("inputs")).then(|| path.join("."))
        })
    })
}

/// Where `steps` (of one job or action) run: what counts as untrusted, the actions they may
/// use, and the shell of a `run:` step that names none (the job's `defaults.run.shell`, which
/// an action's steps get too).
#[derive(Clone, Copy)]
pub(super) struct Place<'a> {
    pub trust: Trust,
    pub actions: &'a IndexMap<String, Action>,
    pub default_shell: Option<&'a Spanned<String>>,
}

/// Checks `steps` (of one job or action) in `file`.
pub(super) fn check_steps(steps: &[Step], file: &Arc<SourceFile>, place: Place<'_>) -> Diagnostics {
    let trust = place.trust;
    let mut diags = Diagnostics::new();
    for step in steps {
        if let Some(script) = &step.run {
            check_script(script, file, trust, &mut diags);
        }
        let Some(uses) = step.uses.as_ref().map(|u| &u.value) else {
            continue;
        };
        if let Some(key) = uses.action_key()
            && let Some(action) = place.actions.get(&key)
        {
            check_call(step, &key, action, file, place, &mut diags);
            continue;
        }
        let Uses::Builtin(name) = uses else {
            continue;
        };
        for (input, value) in &step.with {
            if !crate::steps::is_shell_input(name, input) {
                continue;
            }
            let Value::String(text) = &value.value else {
                continue;
            };
            let s = Spanned::new(text.clone(), value.span);
            for_untrusted(&s, trust, |context, range| {
                diags.push(
                    Diagnostic::error(
                        file,
                        locate(file, &s, range),
                        format!(
                            "`{context}` is written into `{input}` of `{name}`, a shell command: anyone who can push chooses it"
                        ),
                    )
                    .label("an untrusted value in shell text")
                    .note("where it is not quoted, the shell splits and globs it: a branch name can add arguments to the command")
                    .hint(safe_form(context, input)),
                );
            });
        }
    }
    diags
}

/// The shell `run:` steps without their own `shell:` get: the job's or the workflow's
/// `defaults.run.shell`, and the file it is written in.
#[derive(Clone, Copy)]
pub(super) struct DefaultShell<'a> {
    pub shell: &'a Spanned<String>,
    pub file: &'a Arc<SourceFile>,
}

/// What `gpuflow run` refuses in a `run:` step's shell (the executor's `run_script`): a
/// `shell:` that reads an untrusted context (an outsider would choose the program), and, in a
/// script for a shell that is not `bash` or `sh` (`python`, `perl {0}`), an expression over an
/// untrusted context, since such shells get values as text, not as variables. The shell is the
/// step's own, else `default`. A shell computed by an expression is known only when the step
/// runs, so its script is not judged here.
pub(super) fn check_shells(
    steps: &[Step],
    file: &Arc<SourceFile>,
    default: Option<DefaultShell<'_>>,
) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for step in steps {
        let Some(script) = &step.run else { continue };
        let (shell, shell_file, from_default) = match (&step.shell, default) {
            (Some(own), _) => (own, file, false),
            (None, Some(d)) => (d.shell, d.file, true),
            (None, None) => continue,
        };
        let mut shell_untrusted = false;
        for_untrusted(shell, Trust { push_inputs: false }, |context, range| {
            shell_untrusted = true;
            diags.push(
                Diagnostic::error(
                    shell_file,
                    locate(shell_file, shell, range),
                    format!(
                        "`shell` reads `{context}`, which anyone who can push a branch or commit chooses"
                    ),
                )
                .label("an untrusted value choosing the program")
                .note("`gpuflow run` refuses a step whose shell an outsider could choose")
                .hint("name the shell in the workflow: `shell: bash`, `shell: python`, or a command with `{0}`"),
            );
        });
        let text = shell.value.trim();
        if shell_untrusted || text.contains("${{") {
            continue;
        }
        if crate::engine::script_runner::Shell::parse(text).is_posix() {
            continue;
        }
        let program = text.split_whitespace().next().unwrap_or(text).to_string();
        for_untrusted(script, Trust { push_inputs: false }, |context, range| {
            let mut d = Diagnostic::error(
                file,
                locate(file, script, range),
                format!(
                    "`{context}` is written into a `{program}` script as text: anyone who can push a branch or commit chooses it"
                ),
            )
            .label(format!("an untrusted value in `{program}` code"))
            .note("gpuflow hands `${{ }}` values to `bash` and `sh` scripts as variables, but other shells get them as text, so `gpuflow run` refuses this step")
            .hint(format!(
                "pass it through `env:` (`env: {{ VALUE: ${{{{ {context} }}}} }}`) and read the variable in the script{}, or use `shell: bash`",
                if program.starts_with("python") {
                    " (`os.environ[\"VALUE\"]`)"
                } else {
                    ""
                }
            ));
            if from_default {
                d = d.related(
                    shell_file,
                    shell.span,
                    format!("the step's shell, `{text}`, comes from here"),
                );
            }
            diags.push(d);
        });
    }
    diags
}

/// A `run:` script handing an untrusted value to a second shell.
fn check_script(
    script: &Spanned<String>,
    file: &Arc<SourceFile>,
    trust: Trust,
    diags: &mut Diagnostics,
) {
    for_untrusted(script, trust, |context, range| {
        let Some(shell) = second_shell(&script.value, range.start) else {
            return;
        };
        diags.push(
            Diagnostic::error(
                file,
                locate(file, script, range),
                format!(
                    "`{context}` is handed to a second shell (`{shell}`): anyone who can push chooses it, and that shell reads it as code"
                ),
            )
            .label("an untrusted value in another shell's code")
            .note("gpuflow passes `${{ }}` values to the step's own shell as variables, but the variable is expanded into the second shell's command text")
            .hint(if shell == "ssh" {
                // The remote shell parses the whole command line ssh sends, variables
                // included: the value must be quoted for it.
                format!(
                    "{}, quoted for the remote shell: `ssh host \"./run.sh $(printf %q \"$VALUE\")\"` (bash)",
                    safe_form(context, "the script")
                )
            } else {
                format!(
                    "{}; hand it on as an argument, not as code: `sh -c 'echo \"$1\"' sh \"$VALUE\"`",
                    safe_form(context, "the script")
                )
            }),
        );
    });
}

/// The second shell (`sh -c`, `ssh`, `eval`, …) that the shell command holding byte `at` of
/// `script` hands its text to, if any.
fn second_shell(script: &str, at: usize) -> Option<String> {
    let before = &script[command_start(script, at)..at];
    let found = SECOND_SHELL.find_iter(before).last()?;
    Some(
        found
            .as_str()
            .trim_matches(|c: char| !c.is_alphanumeric() && c != '-')
            .to_string(),
    )
}

/// A place where a composite action writes one of its inputs into shell code.
#[derive(Clone, Debug)]
struct Splice {
    /// The input, lower-case (input names are case-insensitive), or `*` for an expression
    /// reading `inputs` as a whole (or by a computed name).
    input: String,
    file: Arc<SourceFile>,
    /// The `inputs.…` expression in `file`.
    span: Span,
    /// What reads it, as a phrase: "`command` of `benchmark`, a shell command".
    place: String,
    /// How to write it there instead.
    fix: String,
}

impl Splice {
    fn takes(&self, input: &str) -> bool {
        self.input == "*" || self.input.eq_ignore_ascii_case(input)
    }
}

/// The inputs an expression reads: lower-case names, `*` for `inputs` as a whole.
fn inputs_read(expr: &Expr) -> Vec<String> {
    expr.context_accesses()
        .into_iter()
        .filter(|a| {
            a.path
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case("inputs"))
        })
        .map(|a| a.path.get(1).map_or("*".into(), |n| n.to_ascii_lowercase()))
        .collect()
}

/// Calls `found` with each input `s`'s expressions read and the expression's range in `s`.
fn for_inputs(s: &Spanned<String>, mut found: impl FnMut(&str, std::ops::Range<usize>)) {
    if !s.value.contains("${{") {
        return;
    }
    let Ok(template) = parse_template(&s.value) else {
        return;
    };
    for (expr, range) in template.expressions() {
        for input in inputs_read(expr) {
            found(&input, range.clone());
        }
    }
}

/// Where a built-in step writes the action's inputs into shell code: its shell inputs (a
/// command to run, a probe).
fn builtin_splices(file: &Arc<SourceFile>, step: &Step, name: &str) -> Vec<Splice> {
    let mut out = Vec::new();
    for (input_name, value) in &step.with {
        if !crate::steps::is_shell_input(name, input_name) {
            continue;
        }
        let Value::String(text) = &value.value else {
            continue;
        };
        let s = Spanned::new(text.clone(), value.span);
        for_inputs(&s, |input, range| {
            out.push(Splice {
                input: input.to_string(),
                file: file.clone(),
                span: locate(file, &s, range),
                place: format!("`{input_name}` of `{name}`, a shell command"),
                fix: format!("pass `inputs.{input}` through `env:` (`env: {{ VALUE: ${{{{ inputs.{input} }}}} }}`) and use \"$VALUE\" in `{input_name}`"),
            });
        });
    }
    out
}

/// Where `action` (and the actions it uses, followed `depth` deep) writes its inputs into
/// shell code: a built-in's shell input, a second shell in a `run:` script, a `run:` script
/// of a shell that gets values as text, a step's `shell`.
fn splices(action: &Action, place: Place<'_>, depth: usize) -> Vec<Splice> {
    let file = &action.file;
    let mut out: Vec<Splice> = Vec::new();
    let splice = |s: &Spanned<String>, input: &str, range, place: String, fix: String| Splice {
        input: input.to_string(),
        file: file.clone(),
        span: locate(file, s, range),
        place,
        fix,
    };
    for step in &action.runs.steps {
        if let Some(shell) = &step.shell {
            for_inputs(shell, |input, range| {
                out.push(splice(
                    shell,
                    input,
                    range,
                    "the step's `shell`, a command line".into(),
                    "name the shell in the action".into(),
                ));
            });
        }
        if let Some(script) = &step.run {
            let shell = step.shell.as_ref().or(place.default_shell);
            // A shell computed by an expression is not known here; only a named one that
            // is not `bash`/`sh` is known to get the values as text.
            let as_text =
                shell.filter(|s| !s.value.contains("${{") && !Shell::parse(&s.value).is_posix());
            for_inputs(script, |input, range| {
                if let Some(shell) = as_text {
                    out.push(splice(
                        script,
                        input,
                        range.clone(),
                        format!(
                            "a `{}` script, which gets `${{{{ }}}}` values as text, not as variables",
                            shell.value.trim()
                        ),
                        format!("pass `inputs.{input}` through `env:` (`env: {{ VALUE: ${{{{ inputs.{input} }}}} }}`) and read the variable in the script (`os.environ[\"VALUE\"]`)"),
                    ));
                } else if let Some(second) = second_shell(&script.value, range.start) {
                    out.push(splice(
                        script,
                        input,
                        range.clone(),
                        format!("a script that hands it to a second shell (`{second}`), which reads it as code"),
                        format!("pass `inputs.{input}` through `env:` (`env: {{ VALUE: ${{{{ inputs.{input} }}}} }}`) and hand \"$VALUE\" on as an argument: `sh -c 'echo \"$1\"' sh \"$VALUE\"`"),
                    ));
                }
            });
        }
        let Some(uses) = step.uses.as_ref().map(|u| &u.value) else {
            continue;
        };
        match uses {
            Uses::Builtin(name) => out.extend(builtin_splices(file, step, name)),
            // An action handing its input on to another action: where that one writes it
            // into shell code is where this one does.
            _ if depth < MAX_ACTION_DEPTH => {
                let Some(inner) = uses.action_key().and_then(|k| place.actions.get(&k)) else {
                    continue;
                };
                let inner_splices = splices(inner, place, depth + 1);
                for (inner_input, value) in &step.with {
                    let Value::String(text) = &value.value else {
                        continue;
                    };
                    let s = Spanned::new(text.clone(), value.span);
                    for_inputs(&s, |input, _| {
                        out.extend(inner_splices.iter().filter(|sp| sp.takes(inner_input)).map(
                            |sp| Splice {
                                input: input.to_string(),
                                ..sp.clone()
                            },
                        ));
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// A step using `action` (kept under `key`): each untrusted value under its `with:` that the
/// action writes into shell code is refused here, where the value is chosen.
fn check_call(
    step: &Step,
    key: &str,
    action: &Action,
    file: &Arc<SourceFile>,
    place: Place<'_>,
    diags: &mut Diagnostics,
) {
    if step.with.is_empty() {
        return;
    }
    let spliced = splices(action, place, 0);
    if spliced.is_empty() {
        return;
    }
    for (input, value) in &step.with {
        let Some(first) = spliced.iter().find(|sp| sp.takes(input)) else {
            continue;
        };
        let Value::String(text) = &value.value else {
            continue;
        };
        let s = Spanned::new(text.clone(), value.span);
        for_untrusted(&s, place.trust, |context, range| {
            let mut d = Diagnostic::error(
                file,
                locate(file, &s, range),
                format!(
                    "`{context}` is handed to input `{input}` of `{key}`, which writes it into {}: anyone who can push chooses it",
                    first.place
                ),
            )
            .label("an untrusted value that reaches shell code");
            for sp in spliced.iter().filter(|sp| sp.takes(input)) {
                d = d.related(
                    &sp.file,
                    sp.span,
                    "the action writes it into shell code here",
                );
            }
            diags.push(
                d.note("gpuflow follows `with:` values into the action: there the value is shell text, so a branch name or commit message can add arguments or run commands")
                    .hint(format!("in `{}`, {}", first.file.name, first.fix))
                    .hint(format!("or hand `{input}` a value nobody can push, not `{context}`")),
            );
        });
    }
}

/// An action input whose `default` reads an untrusted context, written by the action into
/// shell code: every caller that leaves the input out runs the pushed value.
pub(super) fn check_defaults(action: &Action, place: Place<'_>) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let spliced = splices(action, place, 0);
    for (name, input) in &action.inputs {
        let Some(default) = &input.default else {
            continue;
        };
        let Some(first) = spliced.iter().find(|sp| sp.takes(name)) else {
            continue;
        };
        for_untrusted(default, place.trust, |context, range| {
            diags.push(
                Diagnostic::error(
                    &action.file,
                    locate(&action.file, default, range),
                    format!(
                        "`{context}` is the default of input `{name}`, which the action writes into {}: anyone who can push chooses it",
                        first.place
                    ),
                )
                .label("an untrusted value that reaches shell code")
                .related(&first.file, first.span, "the action writes it into shell code here")
                .hint(first.fix.clone()),
            );
        });
    }
    diags
}

fn safe_form(context: &str, place: &str) -> String {
    format!(
        "pass it through `env:` (`env: {{ VALUE: ${{{{ {context} }}}} }}`) and use \"$VALUE\" in {}",
        if place == "the script" {
            "the script".to_string()
        } else {
            format!("`{place}`")
        }
    )
}

/// Calls `found` with each untrusted context `s`'s expressions read and the expression's
/// range in `s`.
fn for_untrusted(
    s: &Spanned<String>,
    trust: Trust,
    mut found: impl FnMut(&str, std::ops::Range<usize>),
) {
    if !s.value.contains("${{") {
        return;
    }
    // A syntax error is reported by the expression checks.
    let Ok(template) = parse_template(&s.value) else {
        return;
    };
    for (expr, range) in template.expressions() {
        if let Some(context) = untrusted(expr, trust) {
            found(&context, range);
        }
    }
}

/// Where the shell command that byte `at` of `script` belongs to starts: after the last
/// newline outside quotes and not escaped (a quoted argument of `sh -c` may span lines).
fn command_start(script: &str, at: usize) -> usize {
    #[derive(PartialEq)]
    enum Q {
        None,
        Single,
        Double,
    }
    let mut q = Q::None;
    let mut start = 0;
    let mut chars = script[..at].char_indices();
    while let Some((i, c)) = chars.next() {
        match (&q, c) {
            (Q::None | Q::Double, '\\') => {
                chars.next();
            }
            (Q::None, '\'') => q = Q::Single,
            (Q::None, '"') => q = Q::Double,
            (Q::Single, '\'') | (Q::Double, '"') => q = Q::None,
            (Q::None, '\n') => start = i + 1,
            _ => {}
        }
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("sh -c 'echo x'", true ; "sh c")]
    #[test_case("bash -lc \"echo", true ; "bash lc")]
    #[test_case("ssh node \"ls", true ; "ssh")]
    #[test_case("eval \"x=", true ; "eval")]
    #[test_case("x | xargs sh -c '", true ; "xargs")]
    #[test_case("echo \"hi", false ; "echo")]
    #[test_case("bash ./script.sh ", false ; "a script file")]
    #[test_case("sshd_config=", false ; "a word starting with ssh")]
    fn second_shells_are_recognised(text: &str, yes: bool) {
        assert_eq!(SECOND_SHELL.is_match(text), yes, "{text}");
    }

    /// The errors `validate` reports for workflow `w.yml` next to the actions `actions`
    /// (`(folder, action.yml text)`), each as `location message`, with its related places
    /// and hints.
    fn errors(workflow: &str, actions: &[(&str, &str)]) -> Vec<Diagnostic> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in actions {
            let folder = dir.path().join("actions").join(name);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("action.yml"), text).unwrap();
        }
        let file = SourceFile::new("w.yml", workflow);
        let (wf, loaded) = crate::workflow::load_workflow_in(&file, dir.path());
        assert!(!loaded.has_errors(), "{loaded:?}");
        super::super::check_workflow(&wf.unwrap(), &file)
            .into_iter()
            .filter(Diagnostic::is_error)
            .collect()
    }

    /// The line:col of the `n`th (from 0) occurrence of `needle` in `text`.
    fn at(text: &str, needle: &str, n: usize) -> String {
        let offset = text.match_indices(needle).nth(n).unwrap().0;
        let (line, col) = SourceFile::new("x", text).line_col(offset);
        format!("{line}:{col}")
    }

    fn related_location(d: &Diagnostic) -> String {
        let r = &d.related[0];
        r.file.location(r.span)
    }

    const CALL: &str = "on: push\njobs:\n  j:\n    steps:\n      - uses: ./actions/x\n        with:\n          tag: ${{ github.head_ref }}\n";

    fn action(steps: &str) -> String {
        format!(
            "name: x\ninputs:\n  tag: {{ required: true }}\nruns:\n  using: composite\n  steps:\n{steps}"
        )
    }

    #[test]
    fn a_hostile_value_an_action_writes_into_a_builtin_command_is_refused_where_it_is_passed() {
        let x = action(
            "    - uses: benchmark\n      with:\n        command: ./bench.sh --tag ${{ inputs.tag }}\n",
        );
        let e = errors(CALL, &[("x", &x)]);
        assert_eq!(e.len(), 1, "{e:?}");
        let d = &e[0];
        assert_eq!(
            d.location(),
            format!("w.yml:{}", at(CALL, "github.head_ref", 0))
        );
        assert_eq!(
            d.message,
            "`github.head_ref` is handed to input `tag` of `./actions/x`, which writes it into `command` of `benchmark`, a shell command: anyone who can push chooses it"
        );
        let action_file = format!(
            "actions{}x{}action.yml",
            std::path::MAIN_SEPARATOR,
            std::path::MAIN_SEPARATOR
        );
        assert!(
            related_location(d).ends_with(&format!("{action_file}:{}", at(&x, "inputs.tag", 0))),
            "{}",
            related_location(d)
        );
        assert!(
            d.hints[0].contains("env: { VALUE: ${{ inputs.tag }} }")
                && d.hints[0].contains("\"$VALUE\" in `command`"),
            "{:?}",
            d.hints
        );
    }

    #[test]
    fn an_action_handing_its_input_to_a_second_shell_or_a_text_shell_is_refused() {
        let second = action("    - run: sh -c \"echo ${{ inputs.tag }}\"\n");
        let e = errors(CALL, &[("x", &second)]);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].message.contains("a second shell (`sh -c`)"), "{e:?}");
        assert!(related_location(&e[0]).ends_with(&at(&second, "inputs.tag", 0)));

        let python = action("    - shell: python\n      run: print(\"${{ inputs.tag }}\")\n");
        let e = errors(CALL, &[("x", &python)]);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].message.contains("a `python` script"), "{e:?}");
        assert!(e[0].hints[0].contains("os.environ"), "{e:?}");

        // The job's default shell is the action's steps' shell too.
        let plain = action("    - run: print(\"${{ inputs.tag }}\")\n");
        let with_default =
            CALL.replace("  j:\n", "  j:\n    defaults: { run: { shell: python } }\n");
        let e = errors(&with_default, &[("x", &plain)]);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].message.contains("a `python` script"), "{e:?}");
    }

    #[test]
    fn values_a_shell_gets_as_data_or_nobody_can_push_are_not_refused() {
        // `bash`/`sh` get `${{ }}` values as variables; `start-container` runs no shell.
        let safe = action(
            "    - run: echo ${{ inputs.tag }}\n    - uses: start-container\n      with:\n        image: x\n        command: ./serve --tag ${{ inputs.tag }}\n    - env:\n        TAG: ${{ inputs.tag }}\n      uses: benchmark\n      with:\n        command: ./bench.sh --tag \"$TAG\"\n",
        );
        assert_eq!(errors(CALL, &[("x", &safe)]).len(), 0);
        // A value nobody can push, into the same shell text.
        let unsafe_action = action(
            "    - uses: benchmark\n      with:\n        command: ./bench.sh --tag ${{ inputs.tag }}\n",
        );
        let trusted = CALL.replace("github.head_ref", "github.run_id");
        assert_eq!(errors(&trusted, &[("x", &unsafe_action)]).len(), 0);
        let literal = CALL.replace("${{ github.head_ref }}", "nightly");
        assert_eq!(errors(&literal, &[("x", &unsafe_action)]).len(), 0);
    }

    #[test]
    fn a_push_runs_inputs_and_actions_using_actions_are_followed() {
        let inner = action(
            "    - uses: wait-for-health\n      with: { probe: command, command: \"curl -sf ${{ inputs.tag }}\" }\n",
        );
        let outer =
            action("    - uses: ./actions/inner\n      with: { tag: \"v-${{ inputs.tag }}\" }\n");
        let call = "on:\n  push:\n  workflow_dispatch:\n    inputs: { tag: { default: x } }\njobs:\n  j:\n    steps:\n      - uses: ./actions/outer\n        with: { tag: \"${{ inputs.tag }}\" }\n";
        let e = errors(call, &[("inner", &inner), ("outer", &outer)]);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(
            e[0].location(),
            format!("w.yml:{}", at(call, "inputs.tag", 0))
        );
        assert!(e[0].message.contains("`inputs.tag` is handed to input `tag` of `./actions/outer`, which writes it into `command` of `wait-for-health`"), "{e:?}");
        // The related place is where the inner action writes it.
        assert!(related_location(&e[0]).contains("inner"), "{e:?}");
    }

    #[test]
    fn an_untrusted_default_an_action_writes_into_shell_text_is_refused_in_the_action() {
        let x = "name: x\ninputs:\n  tag: { default: \"${{ github.ref_name }}\" }\nruns:\n  using: composite\n  steps:\n    - run: ssh node \"./run.sh ${{ inputs.tag }}\"\n";
        let call = "on: push\njobs:\n  j:\n    steps:\n      - uses: ./actions/x\n";
        let e = errors(call, &[("x", x)]);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].location().ends_with(&at(x, "github.ref_name", 0)),
            "{e:?}"
        );
        assert!(e[0].message.contains("the default of input `tag`"), "{e:?}");
    }

    #[test]
    fn a_quoted_argument_spanning_lines_is_one_command() {
        let s = "echo a\nsh -c '\n  echo ";
        assert_eq!(command_start(s, s.len()), 7);
        let s = "sh -c 'x'\necho ";
        assert_eq!(command_start(s, s.len()), 10);
    }
}
