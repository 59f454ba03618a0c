//! The worker's loop: start the queued runs that the admission rule lets in (in queue order,
//! several at once as far as their GPU needs fit: [`super::admission`]), each as a `gpuflow
//! run` process on a checkout of its commit ([`InFlight`]); watch every run in flight, stopping
//! one when `gpuflow cancel` or a newer run of its concurrency group asks; record how each
//! ended and remove its checkout. The queue is polled every 100 ms (a run starts well within a
//! second of being queued or of its GPUs being free); with `--idle-exit` the worker leaves
//! after that long with nothing queued and nothing in flight. Stopping (SIGTERM, Ctrl-C) stops
//! every run in flight and waits for each to clean up.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::admission::{self, Held, Limits, Next};
use super::in_flight::{InFlight, RunEnd};
use super::lock::WorkerLock;
use super::recover::{append_line, recover, recover_runs};
use crate::backend::process_start_time;
use crate::trigger::queue::QueueError;
use crate::trigger::{GpuflowHome, ProcessId, Queue, QueuedRun, RunState};

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
    /// At most this many runs in flight (`None`: as many as the machine has GPUs, at least 1).
    pub max_runs: Option<usize>,
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
    /// SIGTERM or Ctrl-C: the runs in flight were cancelled.
    Stopped,
}

pub struct Worker {
    opts: WorkerOptions,
    queue: Queue,
    lock: Option<WorkerLock>,
    me: ProcessId,
    stop: Arc<AtomicBool>,
    say: Box<dyn Fn(&str)>,
    limits: Limits,
    in_flight: Vec<InFlight>,
    /// The GPU need of queued runs already read from their workflow, by run id.
    needs: HashMap<String, super::admission::Need>,
    /// The run last said to wait for GPUs (said once, not at every poll).
    waiting: Option<String>,
    /// A persistent queue error: the worker stops its runs and leaves with it.
    failed: Option<String>,
    /// Ends of runs the queue refused to record (retried between runs).
    pending: Vec<(String, RunState, Option<i32>, Option<String>)>,
}

/// How often an idle worker looks for runs a gone worker left "running".
const ORPHAN_SWEEP: Duration = Duration::from_secs(5);

/// The message of a run the worker stopped because it was told to stop.
const STOPPED: &str = "the worker was stopped (SIGTERM/Ctrl-C)";

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
        let (gpus, why_none) = super::gpu_need::machine_gpus();
        if let Some(why) = why_none {
            say(&format!(
                "worker: no GPUs counted ({why}): runs start as --max-runs allows"
            ));
        }
        let limits = Limits {
            max_runs: opts.max_runs.unwrap_or(gpus as usize).max(1),
            gpus,
        };
        Ok(Ok(Self {
            opts,
            queue,
            lock: Some(lock),
            me,
            stop,
            say,
            limits,
            in_flight: Vec::new(),
            needs: HashMap::new(),
            waiting: None,
            failed: None,
            pending: Vec::new(),
        }))
    }

    pub fn run(mut self) -> Result<WorkerExit, String> {
        (self.say)(&format!(
            "worker {} serving `{}`: at most {} run(s) at once, {} GPU(s)",
            self.me.pid,
            self.opts.home.queue().display(),
            self.limits.max_runs,
            self.limits.gpus
        ));
        let mut idle_since = Instant::now();
        let mut last_sweep = Instant::now();
        loop {
            let stopping = if self.stop.load(Ordering::SeqCst) {
                Some(STOPPED.to_string())
            } else {
                self.failed
                    .as_ref()
                    .map(|e| format!("the worker is leaving: {e}"))
            };
            self.watch_in_flight(stopping.as_deref());
            if stopping.is_some() {
                if self.in_flight.is_empty() {
                    return match self.failed.take() {
                        Some(e) => Err(self.leaving(e)),
                        None => Ok(WorkerExit::Stopped),
                    };
                }
                std::thread::sleep(self.opts.poll);
                continue;
            }
            self.record_pending();
            if last_sweep.elapsed() >= ORPHAN_SWEEP {
                last_sweep = Instant::now();
                self.recover_orphans();
            }
            match self.admit() {
                Ok(_) => {}
                Err(_) if self.stop.load(Ordering::SeqCst) => continue,
                Err(e) => {
                    self.failed = Some(e);
                    continue;
                }
            }
            if !self.in_flight.is_empty() {
                idle_since = Instant::now();
            } else if self
                .opts
                .idle_exit
                .is_some_and(|d| idle_since.elapsed() >= d)
            {
                match self.idle_exit() {
                    Ok(true) => idle_since = Instant::now(),
                    Ok(false) => return Ok(WorkerExit::Idle),
                    Err(e) => return Err(e),
                }
                continue;
            }
            std::thread::sleep(self.opts.poll);
        }
    }

    /// Nothing in flight for `--idle-exit`: lets the lock go first, then looks once more (a
    /// trigger that queued a run while we held the lock did not start a worker, and must not
    /// be stranded). Whether the worker goes on (it took the lock back for a queued run).
    fn idle_exit(&mut self) -> Result<bool, String> {
        if let Some(lock) = self.lock.take() {
            lock.release();
        }
        let waiting =
            match self.retrying("listing the queued runs", |q| q.in_state(RunState::Queued)) {
                Ok(runs) => !runs.is_empty(),
                Err(e) => return Err(self.leaving(e)),
            };
        if waiting && let Ok(Some(lock)) = WorkerLock::try_acquire(&self.opts.home.lock()) {
            self.lock = Some(lock);
            return Ok(true);
        }
        let _ = self.leaving(String::new());
        (self.say)("worker: idle, leaving");
        Ok(false)
    }

    /// Starts every queued run the admission rule lets in now; how many it started.
    fn admit(&mut self) -> Result<usize, String> {
        let me = self.me;
        let mut started = 0;
        loop {
            let queued =
                self.retrying("listing the queued runs", |q| q.in_state(RunState::Queued))?;
            self.needs
                .retain(|id, _| queued.iter().any(|r| &r.id == id));
            let mut held = Held::default();
            for f in &self.in_flight {
                held.add(&f.run, f.need);
            }
            let (needs, gpus) = (&mut self.needs, self.limits.gpus);
            let need = |run: &QueuedRun| {
                *needs
                    .entry(run.id.clone())
                    .or_insert_with(|| super::gpu_need::of_run(run, gpus))
            };
            let (index, need) = match admission::next(&queued, &held, self.limits, need) {
                Next::Start { index, need } => (index, need),
                Next::WaitsForGpus { index, need, free } => {
                    let run = &queued[index];
                    if self.waiting.as_deref() != Some(run.id.as_str()) {
                        self.waiting = Some(run.id.clone());
                        (self.say)(&format!(
                            "run {}: waits for {need} GPU(s) ({free} of {} not held by runs in \
                             flight); the runs queued after it wait behind it",
                            run.id, self.limits.gpus
                        ));
                    }
                    return Ok(started);
                }
                Next::Full | Next::Nothing => return Ok(started),
            };
            let id = queued[index].id.clone();
            let claimed = self.retrying("taking the next queued run", |q| q.claim(&id, me))?;
            // `None`: cancelled or superseded since it was listed.
            if let Some(run) = claimed {
                self.needs.remove(&run.id);
                self.start_run(run, need);
                started += 1;
            }
        }
    }

    /// Starts `run` (claimed), promising it `gpus` GPUs; a run that cannot start is recorded
    /// failed at once.
    fn start_run(&mut self, run: QueuedRun, need: super::admission::Need) {
        let gpus = need.gpus;
        // The run's id and workflow path, never its event (a commit message, a branch name:
        // anyone who can push chooses those).
        let span = tracing::info_span!("queued_run", run = %run.id, workflow = %run.workflow);
        let _entered = span.enter();
        (self.say)(&format!(
            "run {}: `{}` ({}) at {} on {}{}",
            run.id,
            run.name,
            run.workflow,
            &run.sha[..run.sha.len().min(12)],
            run.git_ref,
            if need.on_cluster {
                ", on a Slurm cluster".to_string()
            } else if gpus > 0 {
                format!(", {gpus} GPU(s)")
            } else {
                String::new()
            }
        ));
        let started = InFlight::start(
            (&self.opts.home, &self.opts.gpuflow),
            &self.queue,
            run.clone(),
            need,
            &*self.say,
        );
        match started {
            Ok(f) => self.in_flight.push(f),
            Err(message) => {
                append_line(
                    &run.log_dir.join("output.log"),
                    &format!("gpuflow: {message}"),
                );
                self.record_end(&run, (RunState::Failure, None, Some(message)));
            }
        }
    }

    /// Looks at every run in flight once, recording the end of those that ended; `stopping`
    /// gives the reason to stop them all.
    fn watch_in_flight(&mut self, stopping: Option<&str>) {
        let mut ended = Vec::new();
        let queue = &self.queue;
        self.in_flight
            .retain_mut(|f| match f.poll(queue, stopping) {
                Some(end) => {
                    ended.push((f.run.clone(), end));
                    false
                }
                None => true,
            });
        for (run, end) in ended {
            self.record_end(&run, end);
        }
    }

    /// Records how `run` ended (retried between runs when the queue refuses) and removes its
    /// checkout.
    fn record_end(&mut self, run: &QueuedRun, (state, code, message): RunEnd) {
        let span = tracing::info_span!("queued_run", run = %run.id, workflow = %run.workflow);
        let _entered = span.enter();
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
                max_runs: None,
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
                event: crate::engine::options::EventContext::test_push(&"a".repeat(40)),
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
        // Listing reads past a writer (WAL); claiming the queued run writes, and cannot.
        s.enqueue("r1");
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
