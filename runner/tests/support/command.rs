//! `gpuflow` as a user runs it, in the style of casey/just's `Test` builder (`tests/test.rs`
//! there): a test says what it runs and what it expects, then how the process must end:
//!
//! ```ignore
//! let out = gpuflow()
//!     .current_dir(ws.path())
//!     .args(["run", "--plain", "w.yml"])
//!     .stdout_contains("hello world")
//!     .status(1);
//! assert!(out.stderr.is_empty());
//! ```
//!
//! The finishers ([`Gpuflow::status`], [`Gpuflow::success`], [`Gpuflow::failure`]) check the
//! exit code and every expected output at once and fail the test with both streams shown
//! (whole-text expectations as a `pretty_assertions` diff); they return the [`Output`] for
//! further asserts. [`Gpuflow::output`] only runs, for tests that judge the exit themselves.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use super::process::Running;

/// What a finished `gpuflow` printed and how it ended.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Output {
    /// The exit code; `None` when a signal ended the process.
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// stdout, then stderr: all the process said, as a log of the run shows it.
    pub(crate) fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// stdout as one JSON value a line (`--json` output).
    pub(crate) fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

/// A Docker engine address nothing listens on: with it, any attempt to reach an engine fails
/// the run, which proves a run never needed one.
pub(crate) const NO_DOCKER: &str = "unix:///nonexistent/docker.sock";

/// An expectation on one output stream.
enum Expected {
    Equals(String),
    Contains(String),
    Lacks(String),
}

/// How the process must end.
enum Exit {
    Code(i32),
    /// Any non-zero exit code (a signal does not count: that is a crash, not a refusal).
    #[allow(dead_code)]
    Failure,
}

/// A `gpuflow` invocation under construction; nothing runs until a finisher is called.
#[must_use = "a `gpuflow` command does nothing until `.status(n)`, `.success()`, `.failure()` or `.output()`"]
pub(crate) struct Gpuflow {
    command: Command,
    /// The folder of [`Gpuflow::in_scratch_folder`], removed when the command has run.
    scratch: Option<tempfile::TempDir>,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
    stdout: Vec<Expected>,
    stderr: Vec<Expected>,
}

/// `gpuflow` with the developer's own settings kept out: no colours, none of gpuflow's
/// variables that choose a store, a host file, a log cap, a stand-in GPU inventory, engine
/// leases or its own diagnostics (a test sets what it needs), and no `GIT_DIR` (set when the suite runs from a git hook) pointing its git
/// at another repository.
pub(crate) fn gpuflow() -> Gpuflow {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpuflow"));
    command
        .env("NO_COLOR", "1")
        .env_remove("GPUFLOW_STORE")
        .env_remove("GPUFLOW_CONFIG")
        .env_remove("GPUFLOW_LOG_CAP")
        .env_remove("GPUFLOW_LOG")
        .env_remove("GPUFLOW_LOG_JSON")
        .env_remove(gpuflow::gpu::STAND_IN_ENV)
        .env_remove(gpuflow::gpu::engine_lease::ENGINE_LEASES_ENV)
        .env_remove(gpuflow::gpu::engine_lease::STALE_ENV)
        .env_remove("GIT_DIR");
    Gpuflow {
        command,
        scratch: None,
        stdin: None,
        timeout: None,
        stdout: Vec::new(),
        stderr: Vec::new(),
    }
}

impl Gpuflow {
    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.command.arg(arg);
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    pub(crate) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    pub(crate) fn envs<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.command.envs(vars);
        self
    }

    pub(crate) fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.command.env_remove(key);
        self
    }

    /// With `GPUFLOW_HOME` at `dir`: a private home (runner locks, the run queue, the
    /// worker's log), so runs elsewhere on the machine are none of this test's business.
    pub(crate) fn home(self, dir: impl AsRef<Path>) -> Self {
        self.env("GPUFLOW_HOME", dir.as_ref())
    }

    /// `trigger` for a push of `main` from `before` (`None`: a new branch, forty zeros) to
    /// `after`, as a git hook reports it; a test adds `--no-worker`, `--json`, `--wait`.
    pub(crate) fn trigger_main_push(self, before: Option<&str>, after: &str) -> Self {
        let zeros = "0".repeat(40);
        self.args(["trigger", "--event", "push", "--ref", "refs/heads/main"])
            .args(["--before", before.unwrap_or(&zeros), "--after", after])
    }

    /// With no `DOCKER_HOST`: host `local` is the engine's default socket, whatever the
    /// developer's environment says (for tests of what `hosts` shows).
    pub(crate) fn without_docker_host(self) -> Self {
        self.env_remove("DOCKER_HOST")
    }

    /// With `DOCKER_HOST` at [`NO_DOCKER`]: the run must not need an engine.
    pub(crate) fn without_docker(self) -> Self {
        self.env("DOCKER_HOST", NO_DOCKER)
    }

    pub(crate) fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Run in a fresh empty folder (no workspace, no `gpuflow.toml` above it), removed once it
    /// has run: for commands that must not see the checkout (`gc`, `eval`, `hosts`).
    pub(crate) fn in_scratch_folder(mut self) -> Self {
        let dir = tempfile::tempdir().unwrap();
        self.command.current_dir(dir.path());
        self.scratch = Some(dir);
        self
    }

    /// What the process reads on stdin (otherwise stdin is empty).
    // Like `stderr` (whole) and `failure` below: the builder's vocabulary, as just's `Test`
    // has it, before every word has a test that needs it.
    #[allow(dead_code)]
    pub(crate) fn stdin(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(input.into());
        self
    }

    /// Kills the process after `limit`; the finishers then report the signal.
    pub(crate) fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// stdout must be exactly `expected`.
    pub(crate) fn stdout(mut self, expected: impl Into<String>) -> Self {
        self.stdout.push(Expected::Equals(expected.into()));
        self
    }

    pub(crate) fn stdout_contains(mut self, expected: impl Into<String>) -> Self {
        self.stdout.push(Expected::Contains(expected.into()));
        self
    }

    pub(crate) fn stdout_lacks(mut self, unexpected: impl Into<String>) -> Self {
        self.stdout.push(Expected::Lacks(unexpected.into()));
        self
    }

    /// stderr must be exactly `expected`.
    #[allow(dead_code)]
    pub(crate) fn stderr(mut self, expected: impl Into<String>) -> Self {
        self.stderr.push(Expected::Equals(expected.into()));
        self
    }

    pub(crate) fn stderr_contains(mut self, expected: impl Into<String>) -> Self {
        self.stderr.push(Expected::Contains(expected.into()));
        self
    }

    pub(crate) fn stderr_lacks(mut self, unexpected: impl Into<String>) -> Self {
        self.stderr.push(Expected::Lacks(unexpected.into()));
        self
    }

    /// Runs it; the process must exit with `code`.
    pub(crate) fn status(self, code: i32) -> Output {
        self.finish(&Exit::Code(code))
    }

    /// Runs it; the process must exit with 0.
    pub(crate) fn success(self) -> Output {
        self.status(0)
    }

    /// Runs it; the process must exit with a non-zero code.
    #[allow(dead_code)]
    pub(crate) fn failure(self) -> Output {
        self.finish(&Exit::Failure)
    }

    /// Runs it and checks the expected output, whatever the exit.
    pub(crate) fn output(self) -> Output {
        let (out, stdout, stderr) = self.run();
        check("stdout", &out.stdout, &stdout, &out);
        check("stderr", &out.stderr, &stderr, &out);
        out
    }

    /// Starts it with stdout and stderr piped and stdin empty, for a test that talks to it
    /// while it runs (reads its lines, signals it); killed when the [`Running`] is dropped.
    /// Expectations do not apply to it.
    pub(crate) fn spawn(self) -> Running {
        let mut command = self.into_std();
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpuflow starts");
        Running::new(child)
    }

    /// The process as a `std::process::Command`, for a test that spawns it and talks to it
    /// while it runs (signals, a worker). Expectations do not apply to it.
    pub(crate) fn into_std(self) -> Command {
        assert!(
            self.stdout.is_empty()
                && self.stderr.is_empty()
                && self.stdin.is_none()
                && self.scratch.is_none(),
            "a spawned command is judged by its test, not by expectations"
        );
        self.command
    }

    fn run(self) -> (Output, Vec<Expected>, Vec<Expected>) {
        let mut command = assert_cmd::Command::from_std(self.command);
        if let Some(input) = self.stdin {
            command.write_stdin(input);
        }
        if let Some(limit) = self.timeout {
            command.timeout(limit);
        }
        let out = command.output().expect("gpuflow starts");
        let output = Output {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        (output, self.stdout, self.stderr)
    }

    fn finish(self, exit: &Exit) -> Output {
        let (out, stdout, stderr) = self.run();
        let code = out.status.code();
        let exited_as_expected = match exit {
            Exit::Code(expected) => code == Some(*expected),
            Exit::Failure => code.is_some_and(|c| c != 0),
        };
        if !exited_as_expected {
            let wanted = match exit {
                Exit::Code(c) => format!("exit code {c}"),
                Exit::Failure => "a non-zero exit code".to_owned(),
            };
            panic!(
                "gpuflow ended with {} instead of {wanted}\n--- stdout:\n{}\n--- stderr:\n{}",
                out.status, out.stdout, out.stderr
            );
        }
        check("stdout", &out.stdout, &stdout, &out);
        check("stderr", &out.stderr, &stderr, &out);
        out
    }
}

/// Fails the test at the first expectation `actual` (the stream `name` of `out`) misses.
fn check(name: &str, actual: &str, expected: &[Expected], out: &Output) {
    for e in expected {
        match e {
            Expected::Equals(want) => {
                pretty_assertions::assert_eq!(
                    want.as_str(),
                    actual,
                    "{name} differs (left: expected, right: printed)"
                );
            }
            Expected::Contains(want) => assert!(
                actual.contains(want.as_str()),
                "{name} lacks {want:?}\n--- stdout:\n{}\n--- stderr:\n{}",
                out.stdout,
                out.stderr
            ),
            Expected::Lacks(unwanted) => assert!(
                !actual.contains(unwanted.as_str()),
                "{name} has {unwanted:?}\n--- stdout:\n{}\n--- stderr:\n{}",
                out.stdout,
                out.stderr
            ),
        }
    }
}
