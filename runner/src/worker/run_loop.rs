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
use super::recover::{append_line, recover, recover_runs};
use crate::backend::process_start_time;
use crate::trigger::queue::QueueError;
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
    /// How a failing queue (SQLITE_BUSY, an I/O error) is retried.
    pub retry: QueueRetry,
}

/// Retrying a queue operation that failed: waits from `first`, doubling up to `max`, until it
/// has failed for `give_up_after` (then the error is persistent).
#[derive(Clone, Copy, Debug)]
pub struct QueueRetry {
    pub first: Duration,
    pub max: Duration,
    pub give_up_after: Duration,
}

impl Default for QueueRetry {
    fn default() -> Self {
        Self {
            first: Duration::from_millis(100),
            max: Duration::from_secs(5),
            give_up_after: Duration::from_secs(120),
        }
    }
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
    /// Ends of runs the queue refused to record (retried between runs).
    pending: Vec<(String, RunState, Option<i32>, Option<String>)>,
}

/// How often an idle worker looks for runs a gone worker left "running".
const ORPHAN_SWEEP: Duration = Duration::from_secs(5);

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
            pending: Vec::new(),
        }))
    }

    pub fn run(mut self) -> Result<WorkerExit, String> {
        (self.say)(&format!(
            "worker {} serving `{}`",
            self.me.pid,
            self.opts.home.queue().display()
        ));
        let me = self.me;
        let mut idle_since = Instant::now();
        let mut last_sweep = Instant::now();
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Ok(WorkerExit::Stopped);
            }
            self.record_pending();
            if last_sweep.elapsed() >= ORPHAN_SWEEP {
                last_sweep = Instant::now();
                self.recover_orphans();
            }
            let claimed = match self.retrying("taking the next queued run", |q| q.claim_next(me)) {
                Ok(run) => run,
                Err(_) if self.stop.load(Ordering::SeqCst) => return Ok(WorkerExit::Stopped),
                Err(e) => return Err(self.leaving(e)),
            };
            if let Some(run) = claimed {
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
                let waiting = match self
                    .retrying("listing the queued runs", |q| q.in_state(RunState::Queued))
                {
                    Ok(runs) => !runs.is_empty(),
                    Err(e) => return Err(self.leaving(e)),
                };
                if waiting && let Ok(Some(lock)) = WorkerLock::try_acquire(&self.opts.home.lock()) {
                    self.lock = Some(lock);
                    idle_since = Instant::now();
                    continue;
                }
                let _ = self.leaving(String::new());
                (self.say)("worker: idle, leaving");
                return Ok(WorkerExit::Idle);
            }
            std::thread::sleep(self.opts.poll);
        }
    }

    /// Runs `op` on the queue until it works, waiting longer after each failure (logged); an
    /// error that lasts `retry.give_up_after` is persistent: it is returned, saying so.
    fn retrying<T>(
        &mut self,
        what: &str,
        mut op: impl FnMut(&mut Queue) -> Result<T, QueueError>,
    ) -> Result<T, String> {
        let retry = self.opts.retry;
        let started = Instant::now();
        let mut wait = retry.first;
        let mut failures = 0u32;
        loop {
            match op(&mut self.queue) {
                Ok(v) => {
                    if failures > 0 {
                        tracing::info!(what, failures, "queue operation worked after retries");
                        (self.say)(&format!(
                            "worker: {what}: worked after {failures} failed tr{}",
                            if failures == 1 { "y" } else { "ies" }
                        ));
                    }
                    return Ok(v);
                }
                Err(e) => {
                    failures += 1;
                    if started.elapsed() >= retry.give_up_after || self.stop.load(Ordering::SeqCst)
                    {
                        tracing::warn!(what, failures, error = %e, "queue operation: giving up");
                        return Err(format!(
                            "{what} failed {failures} time(s) over {}, giving up: {e}",
                            humantime::format_duration(Duration::from_millis(
                                started.elapsed().as_millis() as u64
                            ))
                        ));
                    }
                    tracing::debug!(
                        what,
                        failures,
                        wait_ms = wait.as_millis() as u64,
                        error = %e,
                        "queue operation failed; retrying"
                    );
                    (self.say)(&format!(
                        "worker: {what} failed (try {failures}), retrying in {}: {e}",
                        humantime::format_duration(wait)
                    ));
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(retry.max);
                }
            }
        }
    }

    /// The error the worker leaves with, after one more try at recording the ends it could
    /// not (saying which stay "running": `gpuflow trigger --wait`, `gpuflow runs` and the
    /// next worker see that their worker is gone).
    fn leaving(&mut self, error: String) -> String {
        self.record_pending();
        for (id, ..) in &self.pending {
            (self.say)(&format!(
                "run {id}: its end is still not recorded: it shows as running until the next \
                 worker (or `gpuflow trigger --wait`) marks it failed"
            ));
        }
        if !error.is_empty() {
            (self.say)(&format!("worker: leaving: {error}"));
        }
        error
    }

    /// Tries once more to record each end a failing queue refused.
    fn record_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for (id, state, code, message) in pending {
            match self.queue.finish(&id, state, code, message.as_deref()) {
                Ok(()) => (self.say)(&format!(
                    "run {id}: its end is recorded now: {}",
                    state.as_str()
                )),
                Err(_) => self.pending.push((id, state, code, message)),
            }
        }
    }

    /// Runs left "running" by a worker that is gone while this one runs (one whose end could
    /// not be recorded, then died): marked failed, what they left removed.
    fn recover_orphans(&mut self) {
        let me = self.me;
        let Ok(running) = self.queue.in_state(RunState::Running) else {
            return;
        };
        let orphans: Vec<_> = running
            .into_iter()
            .filter(|r| {
                r.worker
                    .is_some_and(|w| w != me && !super::recover::is_alive(w))
            })
            .collect();
        if !orphans.is_empty()
            && let Err(e) = recover_runs(&self.queue, &self.opts.home, &*self.say, orphans)
        {
            (self.say)(&format!("worker: runs of a gone worker: {e}"));
        }
    }

    fn run_one(&mut self, run: &QueuedRun) {
        let output = run.log_dir.join("output.log");
        // The run's id and workflow path, never its event (a commit message, a branch name:
        // anyone who can push chooses those).
        let span = tracing::info_span!("queued_run", run = %run.id, workflow = %run.workflow);
        let _entered = span.enter();
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
        let recorded = self.retrying(&format!("recording the end of run {}", run.id), |q| {
            q.finish(&run.id, state, code, message.as_deref())
        });
        if let Err(e) = recorded {
            (self.say)(&format!(
                "run {}: its end could not be recorded ({e}): trying again between runs",
                run.id
            ));
            self.pending.push((run.id.clone(), state, code, message));
        }
        let _ = std::fs::remove_dir_all(self.opts.home.work(&run.id));
        tracing::info!(state = state.as_str(), exit_code = code, "run ended");
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
            .stderr(log)
            // The run's diagnostics join the worker's JSON lines, not the run's output (what
            // `gpuflow logs` shows the user).
            .envs(crate::diag_log::child_env());
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
        tracing::info!(pid = child.id(), "started `gpuflow run`");
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
                tracing::info!(cancel, stopping, "stopping the run: SIGTERM");
                stopped_by_worker = stopping && !cancel;
                let _ = kill_process(pid, Signal::TERM);
                signalled = Some((Instant::now(), 1));
            } else if let Some((at, count)) = signalled {
                if count == 1 && at.elapsed() >= CANCEL_ESCALATION {
                    tracing::info!("the run is still there: a second SIGTERM");
                    let _ = kill_process(pid, Signal::TERM);
                    signalled = Some((at, 2));
                } else if at.elapsed() >= 2 * CANCEL_ESCALATION {
                    tracing::warn!("the run is still there: SIGKILL");
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::trigger::queue::NewRun;

    struct Setup {
        _dir: tempfile::TempDir,
        home: GpuflowHome,
        said: Arc<Mutex<Vec<String>>>,
    }

    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let home = GpuflowHome::at(dir.path().join("home"));
        Setup {
            _dir: dir,
            home,
            said: Arc::default(),
        }
    }

    impl Setup {
        fn worker(&self, give_up_after: Duration) -> Worker {
            let opts = WorkerOptions {
                home: self.home.clone(),
                gpuflow: "/nonexistent/gpuflow".into(),
                idle_exit: Some(Duration::from_millis(800)),
                poll: Duration::from_millis(20),
                retry: QueueRetry {
                    first: Duration::from_millis(20),
                    max: Duration::from_millis(100),
                    give_up_after,
                },
            };
            let said = self.said.clone();
            let say: Box<dyn Fn(&str)> = Box::new(move |l| said.lock().unwrap().push(l.into()));
            let worker = Worker::start(opts, Arc::default(), say).unwrap().unwrap();
            // Fail at once on another connection's write lock, as after a busy timeout.
            worker.queue.set_busy_timeout(Duration::ZERO).unwrap();
            worker
        }

        /// A run whose repository does not exist: the worker fails it without starting a
        /// process.
        fn enqueue(&self, id: &str) {
            let mut q = Queue::open(&self.home.queue()).unwrap();
            q.enqueue(&NewRun {
                id: id.into(),
                repo: self.home.dir.join("no-such-repo.git"),
                home: self.home.dir.join("no-such-repo.git"),
                workflow: "workflows/w.yml".into(),
                name: "w".into(),
                event: crate::engine::options::EventContext {
                    event_name: "push".into(),
                    sha: "a".repeat(40),
                    git_ref: "refs/heads/main".into(),
                    ref_name: "main".into(),
                    ref_type: "branch".into(),
                    actor: "me".into(),
                    repository: "r".into(),
                    event: serde_json::json!({}),
                },
                concurrency: None,
            })
            .unwrap();
        }

        /// Holds the queue's write lock (as a trigger's transaction would) for `hold`.
        fn hold_write_lock(&self, hold: Duration) -> std::thread::JoinHandle<()> {
            let conn = rusqlite::Connection::open(self.home.queue()).unwrap();
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            std::thread::spawn(move || {
                std::thread::sleep(hold);
                conn.execute_batch("COMMIT").unwrap();
            })
        }

        fn state(&self, id: &str) -> RunState {
            Queue::open(&self.home.queue())
                .unwrap()
                .get(id)
                .unwrap()
                .unwrap()
                .state
        }

        fn said(&self) -> String {
            self.said.lock().unwrap().join("\n")
        }
    }

    #[test]
    fn a_busy_queue_is_retried_and_the_worker_goes_on() {
        let s = setup();
        let worker = s.worker(Duration::from_secs(30));
        s.enqueue("r1");
        let holder = s.hold_write_lock(Duration::from_millis(400));
        assert_eq!(worker.run(), Ok(WorkerExit::Idle), "{}", s.said());
        holder.join().unwrap();
        assert_eq!(s.state("r1"), RunState::Failure, "{}", s.said());
        assert!(s.said().contains("retrying"), "{}", s.said());
    }

    #[test]
    fn a_queue_failing_for_too_long_stops_the_worker_saying_why() {
        let s = setup();
        let worker = s.worker(Duration::from_millis(300));
        let holder = s.hold_write_lock(Duration::from_secs(2));
        let err = worker.run().unwrap_err();
        holder.join().unwrap();
        assert!(err.contains("giving up"), "{err}");
        assert!(err.contains("locked"), "{err}");
    }

    #[test]
    fn a_failed_finish_is_retried_and_the_run_does_not_stay_running() {
        let s = setup();
        let worker = s.worker(Duration::from_secs(30));
        s.enqueue("r1");
        // Recording any end fails until the test lifts the fault.
        let conn = rusqlite::Connection::open(s.home.queue()).unwrap();
        conn.execute_batch(
            "CREATE TABLE fault (x); INSERT INTO fault VALUES (1); \
             CREATE TRIGGER fault BEFORE UPDATE OF state ON runs \
             WHEN NEW.state != 'running' AND EXISTS (SELECT 1 FROM fault) \
             BEGIN SELECT RAISE(ABORT, 'injected fault'); END;",
        )
        .unwrap();
        let lifter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            conn.execute_batch("DELETE FROM fault").unwrap();
        });
        assert_eq!(worker.run(), Ok(WorkerExit::Idle), "{}", s.said());
        lifter.join().unwrap();
        assert_eq!(s.state("r1"), RunState::Failure, "{}", s.said());
        assert!(s.said().contains("injected fault"), "{}", s.said());
    }
}
