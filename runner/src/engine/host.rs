//! The host backend: `run:` steps as real local processes, for GPU machines without Docker and
//! for the engine's fast tests.
//!
//! Each step runs in its own process group, so stopping it reaches everything it started:
//! SIGTERM to the group, SIGKILL after the grace period. Background processes a step leaves
//! running (a server started with `&`) live on for later steps, as in GitHub Actions, and are
//! killed when the job ends ([`HostRunner::kill_leftovers`]).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use rustix::process::Signal;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use super::script_runner::{
    LineFn, MAX_FILE_BYTES, RunnerError, ScriptExit, ScriptRun, ScriptRunner,
};
use crate::backend::{LineSplitter, OutputStream};
use crate::events::Stream;

/// How long output may still arrive after the shell exited (from a background process that
/// holds the pipe) before the step is considered done.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// Runs steps as processes under `temp` (one folder per step for its files).
#[derive(Debug)]
pub struct HostRunner {
    temp: PathBuf,
    workspace: PathBuf,
    grace: Duration,
    groups: Mutex<Vec<i32>>,
}

impl HostRunner {
    pub fn new(temp: impl Into<PathBuf>, workspace: impl Into<PathBuf>, grace: Duration) -> Self {
        Self {
            temp: temp.into(),
            workspace: workspace.into(),
            grace,
            groups: Mutex::new(Vec::new()),
        }
    }

    /// Kills every process group a step of this job started that is still alive.
    pub fn kill_leftovers(&self) {
        let groups = self.groups.lock().map(|g| g.clone()).unwrap_or_default();
        for pgid in groups {
            signal_group(pgid, Signal::KILL);
        }
    }

    async fn run_inner(
        &self,
        run: &ScriptRun,
        lines: LineFn,
        cancel: CancellationToken,
    ) -> Result<ScriptExit, RunnerError> {
        let dir = self
            .temp
            .join(format!("step-{}", run.key.replace('.', "-")));
        let files_error = |e: std::io::Error| RunnerError::Files {
            path: dir.display().to_string(),
            reason: e.to_string(),
        };
        // Inside the job's private folder (crate::local_dirs), and private themselves: a
        // script may hold a secret as text (`shell: python`), and a step may write one to
        // `$GITHUB_ENV` or `$GITHUB_OUTPUT`.
        tokio::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .await
            .map_err(files_error)?;
        let script = dir.join(match run.shell {
            super::script_runner::Shell::Python => "script.py",
            _ => "script.sh",
        });
        let output = dir.join("output");
        let env_file = dir.join("env");
        let summary = dir.join("summary");
        write_private(&script, run.script.as_bytes())
            .await
            .map_err(files_error)?;
        for f in [&output, &env_file, &summary] {
            write_private(f, b"").await.map_err(files_error)?;
        }

        let argv = run.shell.command(&script.display().to_string(), on_path);
        let mut command = tokio::process::Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .envs(&run.env)
            .env("GITHUB_OUTPUT", &output)
            .env("GPUFLOW_OUTPUT", &output)
            .env("GITHUB_ENV", &env_file)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .current_dir(match &run.working_directory {
                Some(dir) => self.workspace.join(dir),
                None => self.workspace.clone(),
            })
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| RunnerError::Spawn {
            program: argv[0].clone(),
            reason: e.to_string(),
        })?;
        let pgid = child.id().map(|id| id as i32);
        if let (Some(pgid), Ok(mut groups)) = (pgid, self.groups.lock()) {
            groups.push(pgid);
        }
        let out = tokio::spawn(pump(
            child.stdout.take(),
            OutputStream::Stdout,
            lines.clone(),
        ));
        let err = tokio::spawn(pump(child.stderr.take(), OutputStream::Stderr, lines));

        let code = tokio::select! {
            status = child.wait() => status.ok().and_then(|s| s.code()).map(i64::from).or(Some(-1)),
            () = cancel.cancelled() => {
                if let Some(pgid) = pgid {
                    signal_group(pgid, Signal::TERM);
                    if tokio::time::timeout(self.grace, child.wait()).await.is_err() {
                        signal_group(pgid, Signal::KILL);
                    }
                    // The shell may be gone while its children ignored SIGTERM.
                    signal_group(pgid, Signal::KILL);
                }
                let _ = child.wait().await;
                None
            }
        };
        for pump in [out, err] {
            if tokio::time::timeout(DRAIN_AFTER_EXIT, pump).await.is_err() {
                // A background process still holds the pipe; its output is not the step's.
            }
        }
        Ok(ScriptExit {
            code,
            output_file: read_limited(&output).await?,
            env_file: read_limited(&env_file).await?,
            summary_file: read_limited(&summary).await?,
        })
    }
}

impl ScriptRunner for HostRunner {
    fn run<'a>(
        &'a self,
        run: &'a ScriptRun,
        lines: LineFn,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ScriptExit, RunnerError>> {
        self.run_inner(run, lines, cancel).boxed()
    }

    fn describe(&self) -> String {
        "the host".into()
    }
}

/// Writes a file only its owner can read (0600 whatever the umask), never through a symlink.
async fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut f = tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .await?;
    f.write_all(contents).await?;
    f.flush().await
}

/// Reads a stream in chunks and hands on its lines (bounded by the splitter).
async fn pump<R: tokio::io::AsyncRead + Unpin>(
    reader: Option<R>,
    stream: OutputStream,
    lines: LineFn,
) {
    let Some(mut reader) = reader else { return };
    let mut splitter = LineSplitter::new(stream);
    let mut buf = vec![0u8; 8192];
    let to = match stream {
        OutputStream::Stdout => Stream::Stdout,
        OutputStream::Stderr => Stream::Stderr,
    };
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                for line in splitter.push(&buf[..n]) {
                    lines(to, line.text, line.continues);
                }
            }
        }
    }
    if let Some(line) = splitter.finish() {
        lines(to, line.text, line.continues);
    }
}

async fn read_limited(path: &Path) -> Result<String, RunnerError> {
    let meta = tokio::fs::metadata(path).await;
    if meta
        .as_ref()
        .is_ok_and(|m| m.len() as usize > MAX_FILE_BYTES)
    {
        return Err(RunnerError::FileTooLarge {
            file: path.display().to_string(),
        });
    }
    Ok(tokio::fs::read(path)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default())
}

fn signal_group(pgid: i32, signal: Signal) {
    // A group that is already gone is what we wanted.
    if pgid > 1
        && let Some(pid) = rustix::process::Pid::from_raw(pgid)
    {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// Whether `program` is an executable on `PATH`.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}
