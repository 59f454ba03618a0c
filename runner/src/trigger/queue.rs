//! The run queue: one SQLite file per host (`$GPUFLOW_HOME/queue.db`) that `gpuflow trigger`
//! adds runs to, one worker takes them from (in order, several at once: `crate::worker`), and `gpuflow runs`/`logs`/`cancel`
//! read. Every change is one transaction, so a trigger racing a worker (or a crashed worker)
//! never leaves a half-written run; WAL mode lets readers list while a run is added.
//!
//! `concurrency:` works as in GitHub Actions, per repository: a new run of a group cancels
//! the group's queued run (it is "superseded"), and with `cancel-in-progress` also asks the
//! group's running run to stop.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::engine::options::EventContext;

/// Bumped with every change of the tables below (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    repo TEXT NOT NULL,
    home TEXT NOT NULL,
    workflow TEXT NOT NULL,
    name TEXT NOT NULL,
    event TEXT NOT NULL,
    sha TEXT NOT NULL,
    git_ref TEXT NOT NULL,
    concurrency_group TEXT,
    cancel_in_progress INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    message TEXT,
    exit_code INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    worker_pid INTEGER,
    worker_started INTEGER,
    child_pid INTEGER,
    child_started INTEGER,
    log_dir TEXT NOT NULL,
    queued_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS runs_state ON runs (state, seq);
";

/// Where a run is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Queued,
    Running,
    Success,
    Failure,
    Cancelled,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "queued" => Self::Queued,
            "running" => Self::Running,
            "success" => Self::Success,
            "cancelled" => Self::Cancelled,
            _ => Self::Failure,
        }
    }

    pub fn is_final(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }
}

/// A process recorded with a run: its pid and start time (clock ticks since boot), so a
/// recycled pid is not taken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessId {
    pub pid: u32,
    pub started: Option<u64>,
}

/// A run to add.
#[derive(Clone, Debug)]
pub struct NewRun {
    pub id: String,
    /// The repository's git folder (bare or `.git`), absolute.
    pub repo: PathBuf,
    /// The folder whose `.gpuflow/` keeps the run's logs and results: the work tree, or the
    /// git folder of a bare repository.
    pub home: PathBuf,
    /// The workflow file's path in the commit (`workflows/bench.yml`).
    pub workflow: String,
    pub name: String,
    pub event: EventContext,
    /// `concurrency:` evaluated: the group and `cancel-in-progress`.
    pub concurrency: Option<(String, bool)>,
}

/// A run in the queue, at any stage.
#[derive(Clone, Debug, Serialize)]
pub struct QueuedRun {
    pub id: String,
    pub state: RunState,
    pub workflow: String,
    pub name: String,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub sha: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
    pub concurrency_group: Option<String>,
    pub cancel_in_progress: bool,
    /// Why it ended as it did (or was superseded), when there is more to say than the state.
    pub message: Option<String>,
    pub exit_code: Option<i64>,
    pub cancel_requested: bool,
    pub worker: Option<ProcessId>,
    /// The `gpuflow run` process the worker started for it.
    pub process: Option<ProcessId>,
    pub log_dir: PathBuf,
    /// Seconds since the Unix epoch.
    pub queued_at: f64,
    pub started_at: Option<f64>,
    pub finished_at: Option<f64>,
    #[serde(skip)]
    pub event: EventContext,
}

/// What `cancel` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It had not started: it never will.
    Dequeued,
    /// It runs: its worker stops it (as Ctrl-C would).
    Requested,
    AlreadyFinished(RunState),
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("the run queue `{path}` cannot be used: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "the run queue `{path}` was written by a newer gpuflow (schema {found}, this one knows {SCHEMA_VERSION})"
    )]
    Newer { path: PathBuf, found: i64 },
}

pub struct Queue {
    conn: Connection,
    path: PathBuf,
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// A SQLite error as the queue's, naming its file; usable while a transaction borrows the
/// connection (when `Queue::wrap`, which borrows the whole queue, cannot be called).
fn sqlite_error(path: &Path) -> impl Fn(rusqlite::Error) -> QueueError + Copy + '_ {
    move |source| QueueError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

impl Queue {
    /// Opens the queue at `path`, creating it (and its folder) when missing.
    pub fn open(path: &Path) -> Result<Self, QueueError> {
        // A trigger and a worker starting together may both create the file: switching it to
        // WAL needs it to themselves and SQLite answers "busy" without waiting, so retry.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match Self::open_once(path) {
                Err(QueueError::Sqlite { source, .. })
                    if is_busy(&source) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    fn open_once(path: &Path) -> Result<Self, QueueError> {
        let wrap = sqlite_error(path);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(path).map_err(wrap)?;
        // A trigger and the worker write at the same moment: wait instead of failing.
        conn.busy_timeout(Duration::from_secs(10)).map_err(wrap)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(wrap)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(wrap)?;
        if version > SCHEMA_VERSION {
            return Err(QueueError::Newer {
                path: path.to_owned(),
                found: version,
            });
        }
        if version < SCHEMA_VERSION {
            conn.execute_batch(SCHEMA).map_err(wrap)?;
            conn.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(wrap)?;
        }
        Ok(Self {
            conn,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long a write waits for another connection's (10 s unless changed): tests make it
    /// short to see a busy queue as a caller does.
    pub fn set_busy_timeout(&self, wait: Duration) -> Result<(), QueueError> {
        self.conn.busy_timeout(wait).map_err(|e| self.wrap(e))
    }

    fn wrap(&self, source: rusqlite::Error) -> QueueError {
        sqlite_error(&self.path)(source)
    }

    /// Adds a run; returns the ids of the runs of its concurrency group it superseded
    /// (queued ones cancelled, and with `cancel-in-progress` the running one asked to stop).
    pub fn enqueue(&mut self, run: &NewRun) -> Result<Vec<String>, QueueError> {
        let wrap = sqlite_error(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(wrap)?;
        let mut superseded = Vec::new();
        let repo = run.repo.to_string_lossy().into_owned();
        let result = (|| -> rusqlite::Result<()> {
            if let Some((group, cancel_in_progress)) = &run.concurrency {
                let why = format!("superseded by run {} (concurrency group `{group}`)", run.id);
                let mut stmt = tx.prepare(
                    "SELECT id, state FROM runs WHERE repo = ?1 AND concurrency_group = ?2 \
                     AND state IN ('queued', 'running') ORDER BY seq",
                )?;
                let members: Vec<(String, String)> = stmt
                    .query_map(params![repo, group], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                drop(stmt);
                for (id, state) in members {
                    if state == "queued" {
                        tx.execute(
                            "UPDATE runs SET state = 'cancelled', message = ?2, finished_at = ?3 \
                             WHERE id = ?1",
                            params![id, why, now()],
                        )?;
                        superseded.push(id);
                    } else if *cancel_in_progress {
                        tx.execute(
                            "UPDATE runs SET cancel_requested = 1, message = ?2 WHERE id = ?1",
                            params![id, why],
                        )?;
                        superseded.push(id);
                    }
                }
            }
            let log_dir = run.home.join(".gpuflow").join("runs").join(&run.id);
            tx.execute(
                "INSERT INTO runs (id, repo, home, workflow, name, event, sha, git_ref, \
                 concurrency_group, cancel_in_progress, state, log_dir, queued_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'queued', ?11, ?12)",
                params![
                    run.id,
                    repo,
                    run.home.to_string_lossy(),
                    run.workflow,
                    run.name,
                    serde_json::to_string(&run.event).unwrap_or_default(),
                    run.event.sha,
                    run.event.git_ref,
                    run.concurrency.as_ref().map(|c| c.0.clone()),
                    run.concurrency.as_ref().is_some_and(|c| c.1),
                    log_dir.to_string_lossy(),
                    now(),
                ],
            )?;
            Ok(())
        })();
        result.map_err(wrap)?;
        tx.commit().map_err(|e| self.wrap(e))?;
        Ok(superseded)
    }

    /// Marks the run `id` as running for `worker` and returns it, only if it is still queued
    /// (a compare-and-swap: a `cancel` or a newer run of its group may have ended it since the
    /// worker chose it); `None` when it is not.
    pub fn claim(&self, id: &str, worker: ProcessId) -> Result<Option<QueuedRun>, QueueError> {
        let changed = self
            .conn
            .execute(
                "UPDATE runs SET state = 'running', started_at = ?2, worker_pid = ?3, \
                 worker_started = ?4 WHERE id = ?1 AND state = 'queued'",
                params![id, now(), worker.pid, worker.started.map(|s| s as i64)],
            )
            .map_err(|e| self.wrap(e))?;
        if changed == 0 {
            return Ok(None);
        }
        self.get(id)
    }

    /// Records the `gpuflow run` process of a running run.
    pub fn set_process(&self, id: &str, process: ProcessId) -> Result<(), QueueError> {
        self.conn
            .execute(
                "UPDATE runs SET child_pid = ?2, child_started = ?3 WHERE id = ?1",
                params![id, process.pid, process.started.map(|s| s as i64)],
            )
            .map(drop)
            .map_err(|e| self.wrap(e))
    }

    /// Ends a run. A message already set (why it was cancelled) is kept unless one is given.
    pub fn finish(
        &self,
        id: &str,
        state: RunState,
        exit_code: Option<i32>,
        message: Option<&str>,
    ) -> Result<(), QueueError> {
        self.conn
            .execute(
                "UPDATE runs SET state = ?2, exit_code = ?3, message = COALESCE(?4, message), \
                 finished_at = ?5 WHERE id = ?1",
                params![id, state.as_str(), exit_code, message, now()],
            )
            .map(drop)
            .map_err(|e| self.wrap(e))
    }

    /// Cancels a queued run, or asks its worker to stop a running one. The state is read and
    /// changed in one write transaction (a compare-and-swap on it): a worker claiming the run
    /// at that instant either comes first (the run is running: it is asked to stop) or after
    /// (it never sees the run queued), never in between.
    pub fn cancel(&mut self, id: &str) -> Result<Option<CancelOutcome>, QueueError> {
        let wrap = sqlite_error(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(wrap)?;
        let result = (|| -> rusqlite::Result<Option<CancelOutcome>> {
            let state: Option<String> = tx
                .query_row("SELECT state FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .optional()?;
            let Some(state) = state else {
                return Ok(None);
            };
            Ok(Some(match RunState::parse(&state) {
                RunState::Queued => {
                    let changed = tx.execute(
                        "UPDATE runs SET state = 'cancelled', message = 'cancelled before it \
                         started (gpuflow cancel)', finished_at = ?2 WHERE id = ?1 AND state = 'queued'",
                        params![id, now()],
                    )?;
                    debug_assert_eq!(changed, 1, "the write transaction holds the state");
                    CancelOutcome::Dequeued
                }
                RunState::Running => {
                    tx.execute(
                        "UPDATE runs SET cancel_requested = 1, \
                         message = COALESCE(message, 'cancelled (gpuflow cancel)') \
                         WHERE id = ?1 AND state = 'running'",
                        params![id],
                    )?;
                    CancelOutcome::Requested
                }
                done => CancelOutcome::AlreadyFinished(done),
            }))
        })();
        let outcome = result.map_err(wrap)?;
        tx.commit().map_err(wrap)?;
        Ok(outcome)
    }

    /// Marks a run failed only while it is still "running" for this worker (a
    /// compare-and-swap): for a waiter that finds the run's worker gone, racing a new worker
    /// that recovers the same run. Whether it changed the run.
    pub fn fail_if_running_for(
        &self,
        id: &str,
        worker: ProcessId,
        message: &str,
    ) -> Result<bool, QueueError> {
        self.conn
            .execute(
                "UPDATE runs SET state = 'failure', message = ?3, finished_at = ?4 \
                 WHERE id = ?1 AND state = 'running' AND worker_pid = ?2",
                params![id, worker.pid, message, now()],
            )
            .map(|n| n > 0)
            .map_err(|e| self.wrap(e))
    }

    pub fn get(&self, id: &str) -> Result<Option<QueuedRun>, QueueError> {
        self.conn
            .query_row(&format!("{SELECT} WHERE id = ?1"), [id], row)
            .optional()
            .map_err(|e| self.wrap(e))
    }

    /// The newest `limit` runs, oldest first.
    pub fn list(&self, limit: usize) -> Result<Vec<QueuedRun>, QueueError> {
        let mut runs = self.select(
            &format!("{SELECT} ORDER BY seq DESC LIMIT ?1"),
            params![limit as i64],
        )?;
        runs.reverse();
        Ok(runs)
    }

    pub fn in_state(&self, state: RunState) -> Result<Vec<QueuedRun>, QueueError> {
        self.select(
            &format!("{SELECT} WHERE state = ?1 ORDER BY seq"),
            params![state.as_str()],
        )
    }

    fn select(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<QueuedRun>, QueueError> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.wrap(e))?;
        stmt.query_map(params, row)
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.wrap(e))
    }
}

const SELECT: &str = "SELECT id, state, workflow, name, repo, home, sha, git_ref, \
    concurrency_group, cancel_in_progress, message, exit_code, cancel_requested, worker_pid, \
    worker_started, child_pid, child_started, log_dir, queued_at, started_at, finished_at, event \
    FROM runs";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<QueuedRun> {
    let process = |pid: Option<u32>, started: Option<i64>| {
        pid.map(|pid| ProcessId {
            pid,
            started: started.map(|s| s as u64),
        })
    };
    let event: String = r.get(21)?;
    Ok(QueuedRun {
        id: r.get(0)?,
        state: RunState::parse(&r.get::<_, String>(1)?),
        workflow: r.get(2)?,
        name: r.get(3)?,
        repo: PathBuf::from(r.get::<_, String>(4)?),
        home: PathBuf::from(r.get::<_, String>(5)?),
        sha: r.get(6)?,
        git_ref: r.get(7)?,
        concurrency_group: r.get(8)?,
        cancel_in_progress: r.get(9)?,
        message: r.get(10)?,
        exit_code: r.get(11)?,
        cancel_requested: r.get(12)?,
        worker: process(r.get(13)?, r.get(14)?),
        process: process(r.get(15)?, r.get(16)?),
        log_dir: PathBuf::from(r.get::<_, String>(17)?),
        queued_at: r.get(18)?,
        started_at: r.get(19)?,
        finished_at: r.get(20)?,
        event: serde_json::from_str(&event).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(21, rusqlite::types::Type::Text, Box::new(e))
        })?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(sha: &str) -> EventContext {
        EventContext {
            repository: "node".into(),
            ..EventContext::test_push(sha)
        }
    }

    fn new_run(id: &str, group: Option<(&str, bool)>) -> NewRun {
        NewRun {
            id: id.into(),
            repo: "/r.git".into(),
            home: "/r.git".into(),
            workflow: "workflows/w.yml".into(),
            name: "w".into(),
            event: event(&"a".repeat(40)),
            concurrency: group.map(|(g, c)| (g.to_string(), c)),
        }
    }

    const WORKER: ProcessId = ProcessId {
        pid: 1,
        started: Some(5),
    };

    #[test]
    fn runs_are_listed_in_order_claimed_once_and_finished() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = Queue::open(&dir.path().join("q.db")).unwrap();
        q.enqueue(&new_run("a", None)).unwrap();
        q.enqueue(&new_run("b", None)).unwrap();
        let queued: Vec<_> = q.in_state(RunState::Queued).unwrap();
        assert_eq!(
            queued.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let first = q.claim("a", WORKER).unwrap().unwrap();
        assert_eq!((first.id.as_str(), first.state), ("a", RunState::Running));
        assert_eq!(first.worker, Some(WORKER));
        assert_eq!(first.event, event(&"a".repeat(40)));
        // Claimed already: not a second time.
        assert!(q.claim("a", WORKER).unwrap().is_none());
        q.finish("a", RunState::Success, Some(0), None).unwrap();
        assert_eq!(q.claim("b", WORKER).unwrap().unwrap().id, "b");
        assert!(q.in_state(RunState::Queued).unwrap().is_empty());
        let states: Vec<_> = q.list(10).unwrap().iter().map(|r| r.state).collect();
        assert_eq!(states, [RunState::Success, RunState::Running]);
        // Reopening finds the same runs: it is a file.
        drop(q);
        let q = Queue::open(&dir.path().join("q.db")).unwrap();
        assert_eq!(q.list(10).unwrap().len(), 2);
    }

    #[test]
    fn a_newer_run_of_a_group_supersedes_the_queued_one_and_cancels_in_progress_on_request() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = Queue::open(&dir.path().join("q.db")).unwrap();
        q.enqueue(&new_run("running", Some(("g", false)))).unwrap();
        q.claim("running", WORKER).unwrap();
        q.enqueue(&new_run("old", Some(("g", false)))).unwrap();
        q.enqueue(&new_run("other-group", Some(("h", false))))
            .unwrap();
        assert_eq!(
            q.enqueue(&new_run("new", Some(("g", false)))).unwrap(),
            ["old"]
        );
        let old = q.get("old").unwrap().unwrap();
        assert_eq!(old.state, RunState::Cancelled);
        assert!(old.message.unwrap().contains("superseded by run new"));
        assert!(!q.get("running").unwrap().unwrap().cancel_requested);
        assert_eq!(
            q.get("other-group").unwrap().unwrap().state,
            RunState::Queued
        );
        // cancel-in-progress: the running member is asked to stop, the queued one superseded.
        assert_eq!(
            q.enqueue(&new_run("newest", Some(("g", true)))).unwrap(),
            ["running", "new"]
        );
        assert!(q.get("running").unwrap().unwrap().cancel_requested);
    }

    #[test]
    fn cancel_dequeues_or_requests() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = Queue::open(&dir.path().join("q.db")).unwrap();
        q.enqueue(&new_run("a", None)).unwrap();
        q.enqueue(&new_run("b", None)).unwrap();
        q.claim("a", WORKER).unwrap();
        assert_eq!(q.cancel("a").unwrap(), Some(CancelOutcome::Requested));
        assert_eq!(q.cancel("b").unwrap(), Some(CancelOutcome::Dequeued));
        assert_eq!(
            q.cancel("b").unwrap(),
            Some(CancelOutcome::AlreadyFinished(RunState::Cancelled))
        );
        assert_eq!(q.cancel("zz").unwrap(), None);
    }

    #[test]
    fn cancel_racing_a_claim_says_the_run_started_and_asks_it_to_stop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let mut q = Queue::open(&path).unwrap();
        q.enqueue(&new_run("a", None)).unwrap();
        // A worker is claiming the run: its write transaction is open, not yet committed.
        let mut worker = Queue::open(&path).unwrap();
        let tx = worker
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        tx.execute(
            "UPDATE runs SET state = 'running', worker_pid = 1 WHERE id = 'a'",
            [],
        )
        .unwrap();
        let cancel = std::thread::spawn(move || {
            let outcome = q.cancel("a").unwrap();
            (outcome, q)
        });
        std::thread::sleep(Duration::from_millis(300));
        tx.commit().unwrap();
        let (outcome, q) = cancel.join().unwrap();
        // Not "dequeued": the worker runs it, and is asked to stop it.
        assert_eq!(outcome, Some(CancelOutcome::Requested));
        let run = q.get("a").unwrap().unwrap();
        assert_eq!(run.state, RunState::Running);
        assert!(run.cancel_requested);
    }
}
