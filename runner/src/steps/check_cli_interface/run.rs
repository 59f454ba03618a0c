//! Executing `check-cli-interface`: runs the command's help (and, when asked, its version) in
//! one of the job's containers or on the host, reads the usage ([`Usage`]) and judges the
//! arguments a later step will pass ([`check_args`]). A mismatch fails the step with the real
//! usage and, per unknown flag, the closest real one.
//!
//! It does not decide when it runs: preflight calls it through the same dispatch as a step.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use indexmap::IndexMap;

use super::cli_usage::{Usage, full_listing_flag};
use super::flag_check::{Problem, check_args, closest_flag};
use crate::backend::{DockerBackend, ExecSpec, LogLine};
use crate::engine::container_inputs::split_words;
use crate::engine::containers::JobContainers;
use crate::events::EventKind;
use crate::expr::Value;
use crate::steps::{Outputs, StepCall, StepError};

/// A help that has not printed after this long is waiting for something (a GPU, stdin). A
/// server's help imports its whole package (torch among it) first: tens of seconds.
const HELP_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the command runs.
pub(super) enum Place<'a> {
    Host {
        workdir: &'a Path,
    },
    Container {
        docker: &'a DockerBackend,
        id: &'a str,
        name: &'a str,
    },
}

impl Place<'_> {
    fn describe(&self) -> String {
        match self {
            Self::Host { .. } => "on the host".into(),
            Self::Container { name, .. } => format!("in container `{name}`"),
        }
    }
}

/// What a command printed (stdout, then stderr) and how it exited.
pub(super) struct Captured {
    pub(super) code: i64,
    pub(super) text: String,
}

/// Runs the check; returns the step's outputs (`flags`) or why it failed.
pub async fn run(mut call: StepCall<'_, '_>) -> Result<Outputs, StepError> {
    let (host, job, inputs) = (call.host, call.job, call.inputs);
    let containers: &JobContainers = call.engine()?;
    let text = |k: &str| {
        inputs
            .get(k)
            .map(Value::to_expr_string)
            .filter(|s| !s.trim().is_empty())
    };
    let command_text = text("command").ok_or("the input `command` is required")?;
    let command = words(&command_text, "command")?;
    let container = text("container");
    let place = place(containers, container.as_deref(), host.workspace())?;
    let help_flag = text("help-flag").unwrap_or_else(|| "--help".into());
    let (usage, shown) = read_usage(&place, &command, &command_text, &help_flag).await?;

    let args = match text("args") {
        Some(a) => words(&a, "args")?,
        None => Vec::new(),
    };
    let checked = check_args(&usage, &args);
    let mut problems: Vec<String> = checked.problems.iter().map(Problem::message).collect();
    for (given, full) in &checked.abbreviations {
        host.emit(EventKind::Warning {
            job: Some(job.clone()),
            message: format!(
                "`{given}` is accepted as an abbreviation of `{full}`; write the whole name, or it breaks when `{command_text}` gains another flag starting with `{given}`"
            ),
        });
    }
    problems.extend(missing_required(&usage, list(inputs.get("required-flags"))));
    if let Some(pattern) = text("version-pattern") {
        let version_flag = text("version-flag").unwrap_or_else(|| "--version".into());
        problems.extend(version_problem(&place, &command, &version_flag, &pattern).await?);
    }
    if !problems.is_empty() {
        return Err(report(&command_text, &place, &shown, &usage, &problems).into());
    }
    let names: Vec<&str> = usage.flags.iter().map(|f| f.main_name()).collect();
    Ok(IndexMap::from([("flags".to_string(), names.join(" "))]))
}

/// Where the command runs: the host's workspace, or the job's container `container`.
fn place<'a>(
    containers: &'a JobContainers,
    container: Option<&'a str>,
    workspace: &'a Path,
) -> Result<Place<'a>, String> {
    let Some(name) = container else {
        return Ok(Place::Host { workdir: workspace });
    };
    let started = containers.started.get(name).ok_or_else(|| {
        format!(
            "no container `{name}` is running in this job (help: start it first with `uses: start-container` and `name: {name}`)"
        )
    })?;
    Ok(Place::Container {
        docker: &containers.docker,
        id: &started.id,
        name,
    })
}

/// The command's usage, from what `command help_flag` prints, and that command line as shown.
async fn read_usage(
    place: &Place<'_>,
    command: &[String],
    command_text: &str,
    help_flag: &str,
) -> Result<(Usage, String), String> {
    let mut help_argv = command.to_vec();
    help_argv.extend(words(help_flag, "help-flag")?);
    let mut help = capture(place, &help_argv).await?;
    // A summary (vLLM's `vllm serve --help`) is never the interface: its full listing is.
    if let Some(full) = full_listing_flag(&help.text) {
        help_argv = command.to_vec();
        help_argv.push(full.to_string());
        help = capture(place, &help_argv).await?;
    }
    let shown = help_argv.join(" ");
    if matches!(help.code, 126 | 127) {
        return Err(format!(
            "`{command_text}` could not be run {} (exit code {}): {}",
            place.describe(),
            help.code,
            last_lines(&help.text, 5)
        ));
    }
    let usage = Usage::parse(&help.text);
    if usage.flags.is_empty() {
        return Err(format!(
            "no flags found in what `{shown}` printed {} (exit code {}):\n{}\n(help: if the command prints its usage another way, set `help-flag`)",
            place.describe(),
            help.code,
            indent(&last_lines(&help.text, 20))
        ));
    }
    Ok((usage, shown))
}

/// The `required-flags` the usage lacks, each with the closest flag it has.
fn missing_required(usage: &Usage, required: Vec<String>) -> Vec<String> {
    required
        .into_iter()
        .filter(|flag| usage.flag(flag).is_none())
        .map(|flag| match closest_flag(usage, &flag) {
            Some(c) => format!(
                "the required flag `{flag}` is not in the usage; did you mean `{}`?",
                c.display()
            ),
            None => format!("the required flag `{flag}` is not in the usage"),
        })
        .collect()
}

/// Whether what `command version_flag` prints matches `version-pattern`; `Some` says why not.
async fn version_problem(
    place: &Place<'_>,
    command: &[String],
    version_flag: &str,
    pattern: &str,
) -> Result<Option<String>, String> {
    let re = regex::Regex::new(pattern)
        .map_err(|e| format!("`version-pattern` is not a regular expression: {e}"))?;
    let mut version_argv = command.to_vec();
    version_argv.extend(words(version_flag, "version-flag")?);
    let version = capture(place, &version_argv).await?;
    Ok((!re.is_match(&version.text)).then(|| {
        format!(
            "the version does not match `{pattern}`: `{}` printed `{}`",
            version_argv.join(" "),
            last_lines(version.text.trim(), 3)
        )
    }))
}

/// The failure: each problem with its fix, then the real usage.
fn report(command: &str, place: &Place, shown: &str, usage: &Usage, problems: &[String]) -> String {
    let mut out = format!(
        "`{command}` {} does not accept what it will be given:\n",
        place.describe()
    );
    for p in problems {
        out.push_str(&format!("  - {p}\n"));
    }
    out.push_str(&format!(
        "its usage ({}, from `{shown}`):\n",
        usage.style.as_str()
    ));
    if usage.synopsis.is_empty() {
        for f in &usage.flags {
            out.push_str(&format!("  {}\n", f.display()));
        }
    } else {
        out.push_str(&indent(&usage.synopsis));
        out.push('\n');
    }
    out.trim_end().to_string()
}

pub(super) fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn words(text: &str, input: &str) -> Result<Vec<String>, String> {
    match split_words(text) {
        Some(w) if !w.is_empty() => Ok(w),
        Some(_) => Err(format!("`{input}` is empty")),
        None => Err(format!("`{input}` has a quote left open: `{text}`")),
    }
}

/// A list input: a list, or a string of names separated by blanks or commas.
fn list(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items.iter().map(Value::to_expr_string).collect(),
        Some(other) => other
            .to_expr_string()
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        None => Vec::new(),
    }
}

pub(super) async fn capture(place: &Place<'_>, argv: &[String]) -> Result<Captured, String> {
    let shown = argv.join(" ");
    let run = async {
        match place {
            Place::Host { workdir } => {
                let output = tokio::process::Command::new(&argv[0])
                    .args(&argv[1..])
                    .current_dir(workdir)
                    .stdin(Stdio::null())
                    .kill_on_drop(true)
                    .output()
                    .await
                    .map_err(|e| match e.kind() {
                        std::io::ErrorKind::NotFound => format!(
                            "`{}` was not found on the host (help: install it, or give `container:` to check it inside a container)",
                            argv[0]
                        ),
                        _ => format!("could not run `{shown}` on the host: {e}"),
                    })?;
                let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&output.stderr));
                Ok(Captured {
                    code: output.status.code().map_or(-1, i64::from),
                    text,
                })
            }
            Place::Container { docker, id, name } => {
                let mut lines = Vec::new();
                let code = docker
                    .exec(id, &ExecSpec::new(argv.iter().cloned()), |l: LogLine| {
                        lines.push(l.text);
                    })
                    .await
                    .map_err(|e| format!("could not run `{shown}` in container `{name}`: {e}"))?;
                Ok(Captured {
                    code,
                    text: lines.join("\n"),
                })
            }
        }
    };
    tokio::time::timeout(HELP_TIMEOUT, run).await.map_err(|_| {
        format!(
            "`{shown}` printed nothing to end on within {}s {}",
            HELP_TIMEOUT.as_secs(),
            place.describe()
        )
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_come_as_lists_or_words() {
        assert_eq!(
            list(Some(&Value::String("--a, --b --c".into()))),
            ["--a", "--b", "--c"]
        );
        assert_eq!(
            list(Some(&Value::Array(vec![Value::String("--x".into())]))),
            ["--x"]
        );
    }

    /// A stand-in for `vllm serve` that prints vLLM 0.32.0's real summary for `--help` and its
    /// real full listing for `--help=all`.
    #[tokio::test]
    async fn a_summary_help_is_followed_to_the_full_listing() {
        let dir = tempfile::tempdir().unwrap();
        let texts =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("src/steps/check_cli_interface/help_texts");
        let script = format!(
            "case \"$1\" in --help=all) cat {0}/vllm_0.32.0_serve_help_all.txt;; --help) cat {0}/vllm_0.32.0_serve_help.txt;; esac\n",
            texts.display()
        );
        std::fs::write(dir.path().join("vllm"), script).unwrap();
        let place = Place::Host {
            workdir: dir.path(),
        };
        let command = ["sh".to_string(), "vllm".to_string()];
        let (usage, shown) = read_usage(&place, &command, "sh vllm", "--help")
            .await
            .unwrap();
        assert_eq!(shown, "sh vllm --help=all");
        let args = words(
            "/m --tensor-parallel-size 2 --max-model-len 4096 --enforce-eager",
            "args",
        )
        .unwrap();
        assert_eq!(check_args(&usage, &args).problems, []);
    }

    #[test]
    fn the_report_lists_problems_then_the_usage() {
        let usage = Usage::parse(include_str!("help_texts/argparse_benchmark.txt"));
        let r = report(
            "python3 b.py",
            &Place::Host {
                workdir: Path::new("/"),
            },
            "python3 b.py --help",
            &usage,
            &["`--port` is bad".into()],
        );
        assert!(
            r.starts_with("`python3 b.py` on the host does not accept"),
            "{r}"
        );
        assert!(r.contains("  - `--port` is bad\n"), "{r}");
        assert!(r.ends_with("[--warmup WARMUP]"), "{r}");
    }
}
