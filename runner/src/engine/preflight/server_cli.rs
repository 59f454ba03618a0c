//! The command-line check of a model server before any job starts (issue 27): for a
//! `start-container` whose command starts SGLang or vLLM, the program's help is run in the
//! throw-away container of the same image (its entrypoint cleared by `exec`, no GPUs, no
//! network) and the command's arguments are judged by it ([`crate::steps::server_cli`]). A
//! refusal fails preflight at the step's `file:line:col`; an abbreviation, or a help that
//! cannot be read, is a warning. Prepared with the others ([`super::prepare`]).

use crate::engine::containers::JobContainers;
use crate::engine::shared::Shared;
use crate::events::{EventKind, JobRef};
use crate::steps::server_cli::{self, Verdict};

/// What the check reads of one `start-container`.
pub(super) struct CommandLine<'a> {
    pub(super) image: &'a str,
    /// As the step gives it; `None`: the image's.
    pub(super) entrypoint: Option<&'a [String]>,
    pub(super) command: &'a [String],
    /// Where the job writes the flags (`file:line:col (the step …)`).
    pub(super) at: &'a str,
}

/// Runs the check in the started throw-away container `name`: `Ok` with what was checked (or
/// why not), `Err` with the refusal.
pub(super) async fn run(
    shared: &Shared,
    jref: &JobRef,
    containers: &JobContainers,
    name: &str,
    line: &CommandLine<'_>,
) -> Result<Option<String>, String> {
    let Some(started) = containers.started.get(name) else {
        return Ok(unchecked(
            shared,
            jref,
            name,
            "the throw-away container was not started",
            line.at,
        ));
    };
    let docker = &containers.docker;
    // The image's id, not its tag: the help of the image that will run, cached by content.
    let (image_id, image_entrypoint) = match docker.image_entrypoint(line.image).await {
        Ok(found) => found,
        Err(e) => return Ok(unchecked(shared, jref, name, &e.to_string(), line.at)),
    };
    let argv: Vec<String> = line
        .entrypoint
        .unwrap_or(&image_entrypoint)
        .iter()
        .chain(line.command)
        .cloned()
        .collect();
    let cmd = match server_cli::recognise(&argv) {
        Ok(cmd) => cmd,
        Err(why) => {
            tracing::info!(
                "preflight: the command of container `{name}` is not checked against its help: {why} ({})",
                line.at
            );
            return Ok(None);
        }
    };
    let help = match server_cli::help(docker, (&started.id, name), &image_id, &cmd).await {
        Ok(help) => help,
        Err(why) => return Ok(unchecked(shared, jref, name, &why, line.at)),
    };
    match server_cli::judge(&cmd, &help) {
        Verdict::Refused(m) => Err(format!("{m}\n  --> {}", line.at)),
        Verdict::Unchecked(why) => Ok(unchecked(shared, jref, name, &why, line.at)),
        Verdict::Accepted { warnings } => {
            for w in warnings {
                shared.emit(EventKind::Warning {
                    job: Some(jref.clone()),
                    message: format!("container `{name}`: {w}\n  --> {}", line.at),
                });
            }
            Ok(Some(format!(
                "`{}` accepts its arguments (from `{}` in `{}`)",
                cmd.shown(),
                help.shown,
                line.image
            )))
        }
    }
}

/// A command line that could not be checked: a warning, never a refusal; the check passes
/// with nothing more to say.
pub(super) fn unchecked(
    shared: &Shared,
    jref: &JobRef,
    name: &str,
    why: &str,
    at: &str,
) -> Option<String> {
    shared.emit(EventKind::Warning {
        job: Some(jref.clone()),
        message: format!(
            "the command line of the server in container `{name}` was not checked against its help: {why}\n  --> {at}"
        ),
    });
    None
}
