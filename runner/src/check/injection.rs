//! Template injection: a value anyone who can push chooses (a branch name, a commit message,
//! the event) written with `${{ }}` where a shell reads it as code. gpuflow hands the values
//! of `run:` scripts and of built-in shell inputs to the shell as environment variables, but
//! two places stay unsafe, and `validate` refuses them (zizmor's `template-injection` audit,
//! GitHub's security-hardening guide):
//!
//! - a built-in's shell input ([`crate::steps::SHELL_INPUTS`]): even as a variable the value
//!   is split into words and globbed where it is not quoted, so it can add arguments to the
//!   command; and the input reads like shell text, so the safe form should be written out;
//! - a `run:` script that hands the value to a second shell (`sh -c '… ${{ x }} …'`,
//!   `ssh host "…"`, `eval`): the first shell expands the variable into the second one's
//!   code.
//!
//! The safe form in both: `env: { NAME: ${{ … }} }` on the step and `"$NAME"` in the command
//! (passed on to a second shell as an argument: `sh -c '… "$1" …' sh "$NAME"`).

use std::sync::{Arc, LazyLock};

use regex::Regex;

use super::expressions::locate;
use crate::diag::{Diagnostic, Diagnostics, SourceFile, Spanned};
use crate::engine::script::untrusted_context;
use crate::expr::{Expr, parse_template};
use crate::workflow::model::{Step, Uses, Value};

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

/// Checks `steps` (of one job or action) in `file`.
pub(super) fn check_steps(steps: &[Step], file: &Arc<SourceFile>, trust: Trust) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for step in steps {
        if let Some(script) = &step.run {
            check_script(script, file, trust, &mut diags);
        }
        let Some(Uses::Builtin(name)) = step.uses.as_ref().map(|u| &u.value) else {
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

/// A `run:` script handing an untrusted value to a second shell.
fn check_script(
    script: &Spanned<String>,
    file: &Arc<SourceFile>,
    trust: Trust,
    diags: &mut Diagnostics,
) {
    for_untrusted(script, trust, |context, range| {
        let before = &script.value[command_start(&script.value, range.start)..range.start];
        let Some(found) = SECOND_SHELL.find_iter(before).last() else {
            return;
        };
        let shell = found
            .as_str()
            .trim_matches(|c: char| !c.is_alphanumeric() && c != '-');
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

    #[test]
    fn a_quoted_argument_spanning_lines_is_one_command() {
        let s = "echo a\nsh -c '\n  echo ";
        assert_eq!(command_start(s, s.len()), 7);
        let s = "sh -c 'x'\necho ";
        assert_eq!(command_start(s, s.len()), 10);
    }
}
