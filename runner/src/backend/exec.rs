//! Running a command in a running container (`docker exec`), its output streamed as lines and
//! its exit code returned; or started with its stdin open ([`InteractiveExec`]), for a
//! long-lived shell that is sent commands.

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use indexmap::IndexMap;
use tokio::io::AsyncWrite;

use super::error::{describe, status_code};
use super::log_line::{FrameLines, LineSink, OutputStream};
use super::{BackendError, DockerBackend};

/// A command to run in a container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecSpec {
    /// The program and its arguments (no shell unless the command is one).
    pub command: Vec<String>,
    /// Added to the container's environment for this command.
    pub env: IndexMap<String, String>,
    /// Defaults to the container's working directory.
    pub workdir: Option<String>,
    /// Defaults to the container's user.
    pub user: Option<String>,
}

impl ExecSpec {
    pub fn new<S: Into<String>>(command: impl IntoIterator<Item = S>) -> Self {
        Self {
            command: command.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }
}

/// How long to wait for the engine to record an exec's exit code after its output ended.
const EXIT_CODE_WAIT: Duration = Duration::from_secs(5);

impl DockerBackend {
    /// Runs `spec` in `container`, handing each output line to `sink` as it arrives; returns
    /// the command's exit code (non-zero is a result, not an error). A command the container
    /// cannot find exits 126/127 with the runtime's message on the output, like a shell.
    pub async fn exec(
        &self,
        container: &str,
        spec: &ExecSpec,
        mut sink: impl LineSink,
    ) -> Result<i64, BackendError> {
        let (exec_id, started) = self.create_and_start_exec(container, spec, false).await?;
        let StartExecResults::Attached { mut output, .. } = started else {
            return Err(BackendError::Engine {
                operation: "run a command in a container".into(),
                endpoint: self.endpoint_text(),
                message: "the engine did not attach the command's output".into(),
            });
        };

        let mut lines = FrameLines::new();
        while let Some(frame) = output.next().await {
            let frame = frame.map_err(|e| self.engine_error("read a command's output", &e))?;
            for line in lines.push(&frame) {
                sink.line(line).await;
            }
        }
        for line in lines.finish() {
            sink.line(line).await;
        }
        self.exec_exit_code(&exec_id).await
    }

    /// Starts `spec` in `container` with its stdin open: what is written to
    /// [`InteractiveExec::input`] is the command's stdin, its output arrives as raw chunks
    /// (not lines: the caller decides where a line ends), and once the output has ended
    /// [`DockerBackend::exec_exit_code`] tells how it exited.
    pub async fn exec_interactive(
        &self,
        container: &str,
        spec: &ExecSpec,
    ) -> Result<InteractiveExec, BackendError> {
        let (exec_id, started) = self.create_and_start_exec(container, spec, true).await?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(BackendError::Engine {
                operation: "run a command in a container".into(),
                endpoint: self.endpoint_text(),
                message: "the engine did not attach the command's input and output".into(),
            });
        };
        Ok(InteractiveExec {
            id: exec_id,
            input,
            output: ExecOutput {
                frames: output,
                endpoint: self.endpoint_text(),
            },
        })
    }

    /// Creates and starts `spec` in `container`, attached to its output (and its stdin when
    /// `stdin`); returns the exec's id and what the engine attached.
    async fn create_and_start_exec(
        &self,
        container: &str,
        spec: &ExecSpec,
        stdin: bool,
    ) -> Result<(String, StartExecResults), BackendError> {
        if let Some(name) = spec.env.keys().find(|k| k.is_empty() || k.contains('=')) {
            return Err(BackendError::InvalidEnvName { name: name.clone() });
        }
        let options = CreateExecOptions {
            cmd: Some(spec.command.clone()),
            env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            working_dir: spec.workdir.clone(),
            user: spec.user.clone(),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            attach_stdin: Some(stdin),
            tty: Some(false),
            ..Default::default()
        };
        let created = self
            .api("create_exec", container)
            .create_exec(container, options)
            .await
            .map_err(|e| self.exec_error(container, &e))?;
        let started = self
            .api("start_exec", container)
            .start_exec(&created.id, None)
            .await
            .map_err(|e| self.exec_error(container, &e))?;
        Ok((created.id, started))
    }

    /// The exit code, once the engine has recorded it (it may lag the end of the output).
    pub async fn exec_exit_code(&self, exec_id: &str) -> Result<i64, BackendError> {
        let deadline = tokio::time::Instant::now() + EXIT_CODE_WAIT;
        loop {
            let inspected = self
                .api("inspect_exec", exec_id)
                .inspect_exec(exec_id)
                .await
                .map_err(|e| self.engine_error("read a command's exit code", &e))?;
            match (inspected.running, inspected.exit_code) {
                (Some(false), Some(code)) => return Ok(code),
                _ if tokio::time::Instant::now() >= deadline => {
                    return Err(BackendError::Engine {
                        operation: "read a command's exit code".into(),
                        endpoint: self.endpoint_text(),
                        message: format!(
                            "the command's output ended but it had not exited after {}s",
                            EXIT_CODE_WAIT.as_secs()
                        ),
                    });
                }
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    fn exec_error(&self, container: &str, e: &bollard::errors::Error) -> BackendError {
        match status_code(e) {
            Some(404) => BackendError::NoSuchContainer {
                container: container.to_string(),
            },
            Some(409) if describe(e).contains("not running") => BackendError::NotRunning {
                container: container.to_string(),
            },
            _ => self.engine_error("run a command in a container", e),
        }
    }
}

/// A command started by [`DockerBackend::exec_interactive`].
pub struct InteractiveExec {
    /// The exec's id, for [`DockerBackend::exec_exit_code`].
    pub id: String,
    /// The command's stdin; dropping it (with the output) closes it.
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
    pub output: ExecOutput,
}

impl fmt::Debug for InteractiveExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InteractiveExec")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

type Frames = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// The stdout and stderr of an [`InteractiveExec`], chunk by chunk as the engine sends them.
pub struct ExecOutput {
    frames: Frames,
    endpoint: String,
}

impl ExecOutput {
    /// The next chunk and the stream it came from; `None` once the command's output ended.
    pub async fn next_chunk(&mut self) -> Option<Result<(OutputStream, Bytes), BackendError>> {
        loop {
            let frame = match self.frames.next().await? {
                Ok(frame) => frame,
                Err(e) => {
                    return Some(Err(BackendError::Engine {
                        operation: "read a command's output".into(),
                        endpoint: self.endpoint.clone(),
                        message: describe(&e),
                    }));
                }
            };
            return Some(Ok(match frame {
                LogOutput::StdErr { message } => (OutputStream::Stderr, message),
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    (OutputStream::Stdout, message)
                }
                LogOutput::StdIn { .. } => continue,
            }));
        }
    }
}
