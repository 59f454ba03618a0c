//! One run in flight: its checkout exported, its `gpuflow run` process started, and that
//! process looked at without blocking (the worker's loop watches every run in flight in
//! turn): stopped when `gpuflow cancel`, a newer run of its concurrency group or the worker's
//! own stop asks, and its exit turned into how the run ended.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use git2::Repository;
use rustix::process::{Pid, Signal, kill_process};

use super::checkout;
use crate::backend::process_start_time;
use crate::trigger::{GpuflowHome, ProcessId, Queue, QueuedRun, RunState};

/// A second SIGTERM (forcing `gpuflow run`'s clean-up) this long after the first, SIGKILL
/// after twice as long.
const CANCEL_ESCALATION: Duration = Duration::from_secs(60);

/// How a run ended: its state, `gpuflow run`'s exit code, and why when there is more to say.
pub type RunEnd = (RunState, Option<i32>, Option<String>);

pub struct InFlight {
    pub run: QueuedRun,
    /// The GPUs the worker promised it, or that it runs on a cluster ([`super::admission`]).
    pub need: super::admission::Need,
    child: Child,
    /// When the first SIGTERM went, and how many went.
    signalled: Option<(Instant, u8)>,
    /// Why the worker itself stopped it (not `gpuflow cancel`), for the run's message.
    stopped_by_worker: Option<String>,
}

impl InFlight {
    /// Exports the run's commit and starts `gpuflow run` on it (`gpuflow` is the binary); a
    /// process it could not record in the queue is said with `say`.
    pub fn start(
        (home, gpuflow): (&GpuflowHome, &Path),
        queue: &Queue,
        run: QueuedRun,
        need: super::admission::Need,
        say: &dyn Fn(&str),
    ) -> Result<Self, String> {
        let child = start_child(home, gpuflow, &run)?;
        let process = ProcessId {
            pid: child.id(),
            started: process_start_time(child.id()),
        };
        tracing::info!(run = %run.id, pid = child.id(), gpus = need.gpus, "started `gpuflow run`");
        if let Err(e) = queue.set_process(&run.id, process) {
            say(&format!("run {}: {e}", run.id));
        }
        Ok(Self {
            run,
            need,
            child,
            signalled: None,
            stopped_by_worker: None,
        })
    }

    /// Looks at the process once: `Some(end)` when it has exited. It is sent SIGTERM when
    /// its cancel is requested in `queue` or `stopping` gives the worker's reason to stop
    /// it, a second SIGTERM and then SIGKILL when it takes too long.
    pub fn poll(&mut self, queue: &Queue, stopping: Option<&str>) -> Option<RunEnd> {
        match self.child.try_wait() {
            Ok(Some(status)) => return Some(self.ended(status)),
            Ok(None) => {}
            Err(e) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let message = format!("waiting for it failed: {e}");
                return Some((RunState::Failure, None, Some(message)));
            }
        }
        let pid = Pid::from_raw(self.child.id() as i32).expect("a child's pid is positive");
        let cancel = queue
            .get(&self.run.id)
            .ok()
            .flatten()
            .is_some_and(|r| r.cancel_requested);
        if (cancel || stopping.is_some()) && self.signalled.is_none() {
            tracing::info!(run = %self.run.id, cancel, ?stopping, "stopping the run: SIGTERM");
            if !cancel {
                self.stopped_by_worker = stopping.map(String::from);
            }
            let _ = kill_process(pid, Signal::TERM);
            self.signalled = Some((Instant::now(), 1));
        } else if let Some((at, count)) = self.signalled {
            if count == 1 && at.elapsed() >= CANCEL_ESCALATION {
                tracing::info!(run = %self.run.id, "the run is still there: a second SIGTERM");
                let _ = kill_process(pid, Signal::TERM);
                self.signalled = Some((at, 2));
            } else if at.elapsed() >= 2 * CANCEL_ESCALATION {
                tracing::warn!(run = %self.run.id, "the run is still there: SIGKILL");
                let _ = self.child.kill();
            }
        }
        None
    }

    fn ended(&mut self, status: ExitStatus) -> RunEnd {
        drop(self.child.stdin.take());
        let code = status.code();
        let asked = self.signalled.is_some();
        let (state, code, message) = match code {
            Some(0) => (RunState::Success, code, None),
            Some(130) | None if asked => (RunState::Cancelled, code, self.stopped_by_worker.take()),
            Some(1) => (RunState::Failure, code, Some("a job failed".into())),
            Some(2) => (RunState::Failure, code, Some("`gpuflow run` refused its inputs (exit 2): see `gpuflow logs`".into())),
            Some(3) => (RunState::Failure, code, Some("the workflow does not validate at this commit, or cannot run here (exit 3): see `gpuflow logs`".into())),
            Some(4) => (RunState::Failure, code, Some("an infrastructure error (exit 4), such as an unreachable Docker engine: see `gpuflow logs`".into())),
            Some(other) => (RunState::Failure, code, Some(format!("`gpuflow run` exited with {other}"))),
            None => (RunState::Failure, None, Some(format!("`gpuflow run` was killed ({status})"))),
        };
        if code.is_none() {
            // Killed before its own clean-up (escalation, OOM killer): remove what it left.
            let removed = super::recover::remove_containers(&self.run.id);
            let message = Some(match message {
                Some(m) => format!("{m}; {removed}"),
                None => removed,
            });
            return (state, code, message);
        }
        (state, code, message)
    }
}

fn start_child(home: &GpuflowHome, gpuflow: &Path, run: &QueuedRun) -> Result<Child, String> {
    let work = home.work(&run.id);
    let tree = work.join("checkout");
    let repo = Repository::open(&run.repo).map_err(|e| {
        format!(
            "the repository `{}` cannot be opened: {e}",
            run.repo.display()
        )
    })?;
    checkout::export(&repo, &run.sha, &tree)?;
    let event_file = work.join("event.json");
    std::fs::write(
        &event_file,
        serde_json::to_vec(&run.event).unwrap_or_default(),
    )
    .map_err(|e| format!("`{}`: {e}", event_file.display()))?;
    crate::local_dirs::create_state_dir_all(&run.log_dir)
        .map_err(|e| format!("`{}`: {e}", run.log_dir.display()))?;
    let output = run.log_dir.join("output.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&output)
        .map_err(|e| format!("`{}`: {e}", output.display()))?;
    let mut cmd = Command::new(gpuflow);
    cmd.arg("run")
        .arg(&run.workflow)
        .arg("--plain")
        .args(["--run-id", &run.id])
        .arg("--log-dir")
        .arg(&run.log_dir)
        .arg("--event")
        .arg(&event_file)
        .arg("--store")
        .arg(run.home.join(".gpuflow").join("results.db"))
        .arg("--stop-on-stdin-eof")
        .current_dir(&tree)
        .stdin(Stdio::piped())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        // The run's diagnostics join the worker's JSON lines, not the run's output (what
        // `gpuflow logs` shows the user).
        .envs(crate::diag_log::child_env());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    cmd.spawn()
        .map_err(|e| format!("`{}` cannot be started: {e}", gpuflow.display()))
}
