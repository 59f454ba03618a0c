//! `run:` steps inside a running container (the job's `container:`, or one a `start-container`
//! step started), through `docker exec`.
//!
//! The script travels in an environment variable and a small `sh` wrapper writes it to a file
//! next to the step's output files in the container's `/tmp`, so any image with a POSIX `sh`
//! works and nothing is copied in. The step's shell records its pid: a cancelled step is
//! stopped with `kill` from a second exec (an exec has no handle to signal through the API).
//! After the script, the wrapper prints the step's output files tagged with a per-step nonce,
//! so a step costs one exec, not one per file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
        // The step's shell writes its pid and becomes the script's shell, so `signal` reaches
        // it; the wrapper stays to print the step's files afterwards, each line tagged with a
        // nonce, so one exec per step is enough (an exec costs tens of milliseconds).
        let nonce = nonce();
        let step = format!("echo $$ > \"$0\"/pid; {cd}{launch}");
        let wrapper = format!(
            "set -e; d={d}; mkdir -p \"$d\"; printf '%s' \"$GPUFLOW_SCRIPT\" > \"$d/script\"; \
             : > \"$d/output\"; : > \"$d/env\"; : > \"$d/summary\"; unset GPUFLOW_SCRIPT; \
             set +e; sh -c {step} \"$d\"; c=$?; for f in output env summary; do \
             while IFS= read -r l || [ -n \"$l\" ]; do printf '%s %s %s\\n' {nonce} \"$f\" \"$l\"; \
             done < \"$d/$f\"; done; exit $c",
            d = quote(&dir),
            step = quote(&step),
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
        let files = Arc::new(Mutex::new(StepFiles::default()));
        let sink = {
            let (lines, files, tag) = (lines.clone(), files.clone(), format!("{nonce} "));
            move |line: LogLine| {
                if line.stream == OutputStream::Stdout
                    && let Some(tagged) = line.text.strip_prefix(&tag)
                {
                    files.lock().expect("not poisoned").push(tagged);
                    return;
                }
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
        let files = std::mem::take(&mut *files.lock().expect("not poisoned"));
        if let Some(file) = files.too_large {
            return Err(RunnerError::FileTooLarge {
                file: format!("{dir}/{file}"),
            });
        }
        Ok(ScriptExit {
            code,
            output_file: files.output,
            env_file: files.env,
            summary_file: files.summary,
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

/// The step's files as the wrapper printed them after the script.
#[derive(Default)]
struct StepFiles {
    output: String,
    env: String,
    summary: String,
    /// The first file over [`MAX_FILE_BYTES`].
    too_large: Option<&'static str>,
}

impl StepFiles {
    /// One tagged line, `FILE TEXT`, without the nonce.
    fn push(&mut self, tagged: &str) {
        let (name, text) = tagged.split_once(' ').unwrap_or((tagged, ""));
        let (name, file): (&'static str, &mut String) = match name {
            "output" => ("output", &mut self.output),
            "env" => ("env", &mut self.env),
            "summary" => ("summary", &mut self.summary),
            _ => return,
        };
        if file.len() + text.len() + 1 > MAX_FILE_BYTES {
            self.too_large.get_or_insert(name);
            return;
        }
        file.push_str(text);
        file.push('\n');
    }
}

/// A tag no step prints by chance: a hash of the time, the process and a counter.
fn nonce() -> String {
    use sha2::{Digest, Sha256};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let seed = format!(
        "{now}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let digest = Sha256::digest(seed.as_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("gpuflow-file-{hex}")
}

/// Single-quotes a word for `sh`.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_lines_fill_the_files_they_name() {
        let mut files = StepFiles::default();
        files.push("output a=1");
        files.push("env X=y z");
        files.push("output b=");
        files.push("summary");
        files.push("other ignored");
        assert_eq!(files.output, "a=1\nb=\n");
        assert_eq!(files.env, "X=y z\n");
        assert_eq!(files.summary, "\n");
        assert_eq!(files.too_large, None);
    }

    #[test]
    fn a_file_over_the_limit_is_reported() {
        let mut files = StepFiles::default();
        let line = "x".repeat(1024);
        for _ in 0..=(MAX_FILE_BYTES / 1024) {
            files.push(&format!("output {line}"));
        }
        assert_eq!(files.too_large, Some("output"));
        assert!(files.output.len() <= MAX_FILE_BYTES);
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }
}
