//! `run:` steps inside a running container (the job's `container:`, or one a `start-container`
//! step started), through `docker exec`.
//!
//! The script travels in an environment variable and a small `sh` wrapper writes it to a file
//! next to the step's output files in the container's `/tmp`, so any image with a POSIX `sh`
//! works and nothing is copied in. The wrapper records its pid: a cancelled step is stopped
//! with `kill` from a second exec (an exec has no handle to signal through the API).

use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::event::Stream;
use super::script_runner::{
    LineFn, MAX_FILE_BYTES, RunnerError, ScriptExit, ScriptRun, ScriptRunner, Shell,
};
use crate::backend::{DockerBackend, ExecSpec, LogLine, OutputStream};

/// Runs steps in `container` (an id or name) on `docker`.
#[derive(Clone, Debug)]
pub struct ContainerRunner {
    docker: DockerBackend,
    container: String,
    /// The name steps use for it, for messages.
    name: String,
    grace: Duration,
}

impl ContainerRunner {
    pub fn new(
        docker: DockerBackend,
        container: impl Into<String>,
        name: impl Into<String>,
        grace: Duration,
    ) -> Self {
        Self {
            docker,
            container: container.into(),
            name: name.into(),
            grace,
        }
    }

    async fn run_inner(
        &self,
        run: &ScriptRun,
        lines: LineFn,
        cancel: CancellationToken,
    ) -> Result<ScriptExit, RunnerError> {
        let dir = format!("/tmp/gpuflow/step-{}", run.key.replace('.', "-"));
        let script = format!("{dir}/script");
        let launch = match &run.shell {
            Shell::Default => format!(
                "if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc -eo pipefail {s}; else exec sh -e {s}; fi",
                s = quote(&script)
            ),
            shell => {
                let argv = shell.command(&script, |_| true);
                format!(
                    "exec {}",
                    argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
                )
            }
        };
        // `cd` rather than the exec's working directory: a relative `working-directory` is
        // then relative to the container's own (the workspace, in the job's container).
        let cd = match &run.working_directory {
            Some(w) => format!("cd {} || exit 1; ", quote(w)),
            None => String::new(),
        };
        let wrapper = format!(
            "set -e; d={d}; mkdir -p \"$d\"; printf '%s' \"$GPUFLOW_SCRIPT\" > \"$d/script\"; \
             : > \"$d/output\"; : > \"$d/env\"; : > \"$d/summary\"; echo $$ > \"$d/pid\"; \
             unset GPUFLOW_SCRIPT; set +e; {cd}{launch}",
            d = quote(&dir)
        );
        let mut spec = ExecSpec::new(["sh", "-c", wrapper.as_str()]);
        spec.env = run.env.clone();
        spec.env.insert("GPUFLOW_SCRIPT".into(), run.script.clone());
        for (name, file) in [
            ("GITHUB_OUTPUT", "output"),
            ("GPUFLOW_OUTPUT", "output"),
            ("GITHUB_ENV", "env"),
            ("GITHUB_STEP_SUMMARY", "summary"),
        ] {
            spec.env.insert(name.into(), format!("{dir}/{file}"));
        }
        let sink = {
            let lines = lines.clone();
            move |line: LogLine| {
                let stream = match line.stream {
                    OutputStream::Stdout => Stream::Stdout,
                    OutputStream::Stderr => Stream::Stderr,
                };
                lines(stream, line.text);
            }
        };
        let exec = self.docker.exec(&self.container, &spec, sink);
        tokio::pin!(exec);
        let code = tokio::select! {
            code = &mut exec => Some(code?),
            () = cancel.cancelled() => {
                self.signal(&dir, "TERM").await;
                if tokio::time::timeout(self.grace, &mut exec).await.is_err() {
                    self.signal(&dir, "KILL").await;
                    let _ = tokio::time::timeout(Duration::from_secs(5), &mut exec).await;
                }
                None
            }
        };
        Ok(ScriptExit {
            code,
            output_file: self.read(&format!("{dir}/output")).await?,
            env_file: self.read(&format!("{dir}/env")).await?,
            summary_file: self.read(&format!("{dir}/summary")).await?,
        })
    }

    /// Signals the step's shell and its children (best effort: the container may be gone).
    async fn signal(&self, dir: &str, signal: &str) {
        let script = format!(
            "p=$(cat {d}/pid 2>/dev/null) || exit 0; pkill -{signal} -P \"$p\" 2>/dev/null; kill -{signal} \"$p\" 2>/dev/null; exit 0",
            d = quote(dir)
        );
        let _ = self
            .docker
            .exec(
                &self.container,
                &ExecSpec::new(["sh", "-c", script.as_str()]),
                |_| {},
            )
            .await;
    }

    async fn read(&self, path: &str) -> Result<String, RunnerError> {
        let mut text = String::new();
        let mut too_large = false;
        let spec = ExecSpec::new(["cat", path]);
        let code = self
            .docker
            .exec(&self.container, &spec, |line: LogLine| {
                if line.stream == OutputStream::Stdout {
                    if text.len() + line.text.len() > MAX_FILE_BYTES {
                        too_large = true;
                    } else {
                        text.push_str(&line.text);
                        text.push('\n');
                    }
                }
            })
            .await;
        if too_large {
            return Err(RunnerError::FileTooLarge {
                file: path.to_string(),
            });
        }
        // A file the step never got to create reads as empty.
        Ok(if code.is_ok_and(|c| c == 0) {
            text
        } else {
            String::new()
        })
    }
}

impl ScriptRunner for ContainerRunner {
    fn run<'a>(
        &'a self,
        run: &'a ScriptRun,
        lines: LineFn,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ScriptExit, RunnerError>> {
        self.run_inner(run, lines, cancel).boxed()
    }

    fn describe(&self) -> String {
        format!("container `{}`", self.name)
    }
}

/// Single-quotes a word for `sh`.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }
}
