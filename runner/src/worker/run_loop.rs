//! The worker's loop: take the oldest queued run, export its commit, run `gpuflow run` on it
//! in that checkout (stopping it when `gpuflow cancel` or a newer run of its concurrency
//! group asks), record how it ended, remove the checkout; when the queue is empty, poll it
//! (every 100 ms: a run starts well within a second of being queued), and with
//! `--idle-exit` leave after that long without work.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use git2::Repository;
use rustix::process::{Pid, Signal, kill_process};

use super::checkout;
use super::lock::WorkerLock;
use super::recover::{append_line, recover};
use crate::backend::process_start_time;
use crate::trigger::{GpuflowHome, ProcessId, Queue, QueuedRun, RunState};

/// A second SIGTERM (forcing `gpuflow run`'s clean-up) this long after the first, SIGKILL
/// after twice as long.
const CANCEL_ESCALATION: Duration = Duration::from_secs(60);

#[derive(Clone, Debug)]
pub struct WorkerOptions {
    pub home: GpuflowHome,
    /// The gpuflow binary each run is started with.
    pub gpuflow: PathBuf,
    /// Leave after this long without a queued run (`None`: never).
    pub idle_exit: Option<Duration>,
    pub poll: Duration,
}

/// How the worker ended.
#[derive(Debug, PartialEq, Eq)]
pub enum WorkerExit {
    /// Another worker holds the lock (its pid, when it wrote one).
    AlreadyRunning(Option<u32>),
    Idle,
    /// SIGTERM or Ctrl-C: the running run was cancelled.
    Stopped,
}

pub struct Worker {
    opts: WorkerOptions,
    queue: Queue,
    lock: Option<WorkerLock>,
    me: ProcessId,
    stop: Arc<AtomicBool>,
    say: Box<dyn Fn(&str)>,
}

impl Worker {
    /// Takes the lock and recovers what a dead worker left; `Err(exit)` when another worker
    /// holds the lock.
    pub fn start(
        opts: WorkerOptions,
        stop: Arc<AtomicBool>,
        say: Box<dyn Fn(&str)>,
    ) -> Result<Result<Self, WorkerExit>, String> {
        opts.home
            .ensure()
            .map_err(|e| format!("`{}` cannot be created: {e}", opts.home.dir.display()))?;
        let lock = WorkerLock::try_acquire(&opts.home.lock())
            .map_err(|e| format!("`{}` cannot be locked: {e}", opts.home.lock().display()))?;
        let Some(lock) = lock else {
            return Ok(Err(WorkerExit::AlreadyRunning(super::worker_pid(
                &opts.home,
            ))));
        };
        let queue = Queue::open(&opts.home.queue()).map_err(|e| e.to_string())?;
        let pid = std::process::id();
        let me = ProcessId {
            pid,
            started: process_start_time(pid),
        };
        recover(&queue, &opts.home, &*say).map_err(|e| e.to_string())?;
        Ok(Ok(Self {
            opts,
            queue,
            lock: Some(lock),
            me,
            stop,
            say,
        }))
    }

    pub fn run(mut self) -> Result<WorkerExit, String> {
        (self.say)(&format!(
            "worker {} serving `{}`",
            self.me.pid,
            self.opts.home.queue().display()
        ));
        let mut idle_since = Instant::now();
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Ok(WorkerExit::Stopped);
            }
            if let Some(run) = self.queue.claim_next(self.me).map_err(|e| e.to_string())? {
                self.run_one(&run);
                idle_since = Instant::now();
                continue;
            }
            if self
                .opts
                .idle_exit
                .is_some_and(|d| idle_since.elapsed() >= d)
            {
                // Let the lock go first, then look once more: a trigger that queued a run
                // while we held the lock did not start a worker, and must not be stranded.
                if let Some(lock) = self.lock.take() {
                    lock.release();
                }
                let waiting = !self
                    .queue
                    .in_state(RunState::Queued)
                    .map_err(|e| e.to_string())?
                    .is_empty();
                if waiting && let Ok(Some(lock)) = WorkerLock::try_acquire(&self.opts.home.lock()) {
                    self.lock = Some(lock);
                    idle_since = Instant::now();
                    continue;
                }
                (self.say)("worker: idle, leaving");
                return Ok(WorkerExit::Idle);
            }
            std::thread::sleep(self.opts.poll);
        }
    }

    fn run_one(&self, run: &QueuedRun) {
        let output = run.log_dir.join("output.log");
        (self.say)(&format!(
            "run {}: `{}` ({}) at {} on {}",
            run.id,
            run.name,
            run.workflow,
            &run.sha[..run.sha.len().min(12)],
            run.git_ref
        ));
        let (state, code, message) = match self.start_child(run, &output) {
            Err(message) => {
                append_line(&output, &format!("gpuflow: {message}"));
                (RunState::Failure, None, Some(message))
            }
            Ok(child) => self.watch(run, child),
        };
        if let Err(e) = self.queue.finish(&run.id, state, code, message.as_deref()) {
            (self.say)(&format!(
                "run {}: its end could not be recorded: {e}",
                run.id
            ));
        }
        let _ = std::fs::remove_dir_all(self.opts.home.work(&run.id));
        (self.say)(&format!("run {}: {}", run.id, state.as_str()));
    }

    fn start_child(&self, run: &QueuedRun, output: &std::path::Path) -> Result<Child, String> {
        let work = self.opts.home.work(&run.id);
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
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(output)
            .map_err(|e| format!("`{}`: {e}", output.display()))?;
        let mut cmd = Command::new(&self.opts.gpuflow);
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
            .stderr(log);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(key);
            }
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("`{}` cannot be started: {e}", self.opts.gpuflow.display()))?;
        let process = ProcessId {
            pid: child.id(),
            started: process_start_time(child.id()),
        };
        if let Err(e) = self.queue.set_process(&run.id, process) {
            (self.say)(&format!("run {}: {e}", run.id));
        }
        Ok(child)
    }

    /// Waits for the run's process, stopping it when asked; how it ended.
    fn watch(&self, run: &QueuedRun, mut child: Child) -> (RunState, Option<i32>, Option<String>) {
        let pid = Pid::from_raw(child.id() as i32).expect("a child's pid is positive");
        let mut signalled: Option<(Instant, u8)> = None;
        let mut stopped_by_worker = false;
        let status: ExitStatus = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return (
                        RunState::Failure,
                        None,
                        Some(format!("waiting for it failed: {e}")),
                    );
                }
            }
            let cancel = self
                .queue
                .get(&run.id)
                .ok()
                .flatten()
                .is_some_and(|r| r.cancel_requested);
            let stopping = self.stop.load(Ordering::SeqCst);
            if (cancel || stopping) && signalled.is_none() {
                stopped_by_worker = stopping && !cancel;
                let _ = kill_process(pid, Signal::TERM);
                signalled = Some((Instant::now(), 1));
            } else if let Some((at, count)) = signalled {
                if count == 1 && at.elapsed() >= CANCEL_ESCALATION {
                    let _ = kill_process(pid, Signal::TERM);
                    signalled = Some((at, 2));
                } else if at.elapsed() >= 2 * CANCEL_ESCALATION {
                    let _ = child.kill();
                }
            }
            std::thread::sleep(self.opts.poll);
        };
        drop(child.stdin.take());
        let code = status.code();
        let asked = signalled.is_some();
        let (state, code, message) = match code {
            Some(0) => (RunState::Success, code, None),
            Some(130) | None if asked => (
                RunState::Cancelled,
                code,
                stopped_by_worker.then(|| "the worker was stopped (SIGTERM/Ctrl-C)".to_string()),
            ),
            Some(1) => (RunState::Failure, code, Some("a job failed".into())),
            Some(2) => (RunState::Failure, code, Some("`gpuflow run` refused its inputs (exit 2): see `gpuflow logs`".into())),
            Some(3) => (RunState::Failure, code, Some("the workflow does not validate at this commit, or cannot run here (exit 3): see `gpuflow logs`".into())),
            Some(4) => (RunState::Failure, code, Some("an infrastructure error (exit 4), such as an unreachable Docker engine: see `gpuflow logs`".into())),
            Some(other) => (RunState::Failure, code, Some(format!("`gpuflow run` exited with {other}"))),
            None => (RunState::Failure, None, Some(format!("`gpuflow run` was killed ({status})"))),
        };
        if code.is_none() {
            // Killed before its own clean-up (escalation, OOM killer): remove what it left.
            let removed = super::recover::remove_containers(&run.id);
            let message = Some(match message {
                Some(m) => format!("{m}; {removed}"),
                None => removed,
            });
            return (state, code, message);
        }
        (state, code, message)
    }
}
