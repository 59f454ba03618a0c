//! Processes a test talks to while they run: a spawned `gpuflow` ([`Running`], from
//! [`super::command::Gpuflow::spawn`]), killed and reaped when dropped, also when an assertion
//! fails first; and [`wait_until`], the one polling loop with a deadline the tests use.

use std::fmt::Debug;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, ExitStatus};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) use rustix::process::Signal;

/// How often [`wait_until`] and [`poll_until`] look.
const POLL: Duration = Duration::from_millis(50);

/// Polls `done` until it holds; fails the test, naming `what`, after `limit`.
pub(crate) fn wait_until(what: &str, limit: Duration, done: impl FnMut() -> bool) {
    poll_until(what, limit, done, |done| *done);
}

/// Polls `look` until what it sees is `done`, and returns that; fails the test after `limit`,
/// naming `what` and showing what it saw last.
pub(crate) fn poll_until<T: Debug>(
    what: &str,
    limit: Duration,
    mut look: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let seen = look();
        if done(&seen) {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {seen:#?}"
        );
        std::thread::sleep(POLL);
    }
}

/// Sends `signal` to process `pid` (a negative one: to that process group).
pub(crate) fn signal(pid: i32, signal: Signal) -> rustix::io::Result<()> {
    match rustix::process::Pid::from_raw(pid.abs()) {
        Some(p) if pid < 0 => rustix::process::kill_process_group(p, signal),
        Some(p) => rustix::process::kill_process(p, signal),
        None => Err(rustix::io::Errno::INVAL),
    }
}

/// A spawned process: its stdout read line by line as the test asks, its stderr collected on
/// a thread (so it never blocks on a full pipe); killed and reaped when dropped.
pub(crate) struct Running {
    child: Child,
    stdout: Option<BufReader<ChildStdout>>,
    stderr: Option<JoinHandle<String>>,
}

impl Running {
    /// `child`, spawned with its stdout (and stderr, when piped) piped.
    pub(crate) fn new(mut child: Child) -> Self {
        let stdout = child.stdout.take().map(BufReader::new);
        let stderr = child.stderr.take().map(|mut stderr| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text);
                text
            })
        });
        Self {
            child,
            stdout,
            stderr,
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends it `signal`.
    pub(crate) fn signal(&self, signal: Signal) {
        let pid = i32::try_from(self.id()).unwrap();
        self::signal(pid, signal).unwrap_or_else(|e| panic!("sending {signal:?} to {pid}: {e}"));
    }

    /// Its next stdout line, without the newline; `""` once stdout has ended.
    pub(crate) fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout_reader().read_line(&mut line).unwrap();
        line.trim_end_matches('\n').to_string()
    }

    /// Its next stdout line as JSON (`--json` events).
    pub(crate) fn json_line(&mut self) -> serde_json::Value {
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// The rest of its stdout, to its end (the process has exited or closed it).
    pub(crate) fn rest(&mut self) -> String {
        let mut rest = String::new();
        self.stdout_reader().read_to_string(&mut rest).unwrap();
        rest
    }

    /// Its exit status, once it has exited.
    pub(crate) fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// SIGKILL: it gets no chance to clean up; waits for it to be gone.
    pub(crate) fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits for its exit; its status and everything it wrote to stderr.
    pub(crate) fn wait(mut self) -> (ExitStatus, String) {
        let status = self.child.wait().unwrap();
        let stderr = self
            .stderr
            .take()
            .map(|reader| reader.join().unwrap())
            .unwrap_or_default();
        (status, stderr)
    }

    fn stdout_reader(&mut self) -> &mut BufReader<ChildStdout> {
        self.stdout.as_mut().expect("stdout is piped")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
