//! The simulator (`gpuflow-sim`, docs/simulator.md) as a test fixture, three ways:
//! - [`serve`]: in this process, on a free port, with its record readable directly;
//! - [`SimProcess`]: the binary as a process of its own (killable with SIGKILL, or serving a
//!   `gpuflow run` child), its stdout lines readable as they come;
//! - [`container_steps`]: the simulator image started as container `server` by a workflow,
//!   and waited for with one `wget` loop inside it ([`wait_step`]).

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpuflow::sim::{SimConfig, SimServer};

use super::images;

/// The simulator binary built with the tests.
pub(crate) const SIM_BIN: &str = env!("CARGO_BIN_EXE_gpuflow-sim");

/// How long a process may take to print an expected line or to exit.
const PATIENCE: Duration = Duration::from_secs(20);

/// The simulator served by this process with `config`.
pub(crate) async fn serve(config: SimConfig) -> SimServer {
    gpuflow::sim::serve(config).await.unwrap()
}

/// `gpuflow-sim` on a free port of 127.0.0.1 with `args`, killed when dropped. Its stdout
/// lines arrive on a channel, and its stderr is read all along, so it never blocks on a full
/// pipe.
pub(crate) struct SimProcess {
    pub(crate) child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    addr: OnceLock<SocketAddr>,
}

impl SimProcess {
    /// Started and listening: [`SimProcess::addr`] answers at once.
    pub(crate) fn start(args: &[&str]) -> Self {
        let sim = Self::spawn(args);
        sim.addr();
        sim
    }

    /// Started; it may not listen yet (or ever, as when it runs out of memory at start).
    pub(crate) fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(SIM_BIN)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = child.stderr.take().map(read_all);
        Self {
            child,
            lines,
            stderr,
            addr: OnceLock::new(),
        }
    }

    /// Waits for a stdout line containing `needle` and returns it.
    pub(crate) fn line_with(&self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(err) => panic!("no line with `{needle}` on stdout: {err}"),
            }
        }
    }

    /// The address it listens on (waiting for its `listening on` line the first time).
    pub(crate) fn addr(&self) -> SocketAddr {
        *self.addr.get_or_init(|| {
            let line = self.line_with("listening on http://");
            line.rsplit("http://")
                .next()
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
    }

    /// The stdout lines printed so far and not yet read.
    pub(crate) fn remaining_stdout(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// Waits for the exit; returns the status code and stderr.
    pub(crate) fn exit(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "gpuflow-sim did not exit");
            std::thread::sleep(Duration::from_millis(10));
        };
        let stderr = self
            .stderr
            .take()
            .map(|reader| reader.join().unwrap())
            .unwrap_or_default();
        (status.code(), stderr)
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `stderr` to its end on a thread of its own.
fn read_all(mut stderr: ChildStderr) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    })
}

/// Workflow steps (indented for a job's `steps:`) that start the simulator image as
/// container `server` running `command` (port 30000 inside), published on `published_on` of
/// 127.0.0.1 when given, then [`wait_step`].
pub(crate) fn container_steps(command: &str, published_on: Option<u16>) -> String {
    let ports = published_on.map_or(String::new(), |port| {
        format!("          ports: [\"127.0.0.1:{port}:30000\"]\n")
    });
    format!(
        "      - uses: start-container\n        with:\n          name: server\n          image: {image}\n          command: {command}\n{ports}{wait}",
        image = images::SIM,
        wait = wait_step(),
    )
}

/// A workflow step that waits until the simulator in container `server` answers, with
/// busybox `wget` inside it (not `wait-for-health`, so the tests of other steps do not depend
/// on that one).
pub(crate) fn wait_step() -> &'static str {
    r#"      - name: wait until it answers
        container: server
        run: |
          for i in $(seq 1 100); do
            if wget -qO- http://127.0.0.1:30000/health >/dev/null 2>&1; then exit 0; fi
            sleep 0.1
          done
          exit 1
"#
}
