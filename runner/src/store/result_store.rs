//! [`ResultStore`]: the open SQLite file, writing results and reading them back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::migrations;
use super::{
    Direction, Fingerprint, GitInfo, NewMetric, NewResult, ResultFilter, RunStatus, SeriesKey,
    StoreError, StoredMetric, StoredResult,
};
use crate::stats::Summary;

/// How long a writer waits for another to finish before giving up. Generous: a writer holds
/// the lock for milliseconds, and a run must not lose its result to a busy neighbour.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// An open results store.
#[derive(Debug)]
pub struct ResultStore {
    pub(super) conn: Connection,
    path: PathBuf,
}

/// `.gpuflow/results.db` at the top of the git work tree holding `start`, or in `start` itself
/// outside a repository: results belong with the workflows that produced them.
pub fn default_path(start: &Path) -> PathBuf {
    let root = start
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(start);
    root.join(".gpuflow").join("results.db")
}

impl ResultStore {
    /// Opens (creating it and its directory if needed) and upgrades the store at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_at(path, migrations::SCHEMA_VERSION)
    }

    /// Opens with the schema brought only to `version`: lets tests make the files an older
    /// gpuflow wrote.
    #[doc(hidden)]
    pub fn open_at(path: &Path, version: i64) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // `.gpuflow/` made here gets a `.gitignore`: the store is not the user's work.
            crate::local_dirs::create_state_dir_all(dir).map_err(|source| {
                StoreError::CreateDir {
                    path: dir.to_path_buf(),
                    source,
                }
            })?;
        }
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // WAL lets readers (history, reports) run while a step writes, and writers queue on
        // the busy timeout. NORMAL sync is durable across a crash of gpuflow (not of the OS)
        // in WAL mode, which is the failure that matters here.
        enable_wal(&conn).map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(open_err)?;
        migrations::migrate_to(&mut conn, path, version)?;
        Ok(Self {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one finished step's result in one transaction and returns its id. Metrics are
    /// checked first (direction known, samples finite, names unique) so nothing half-valid is
    /// stored.
    pub fn record(&mut self, result: &NewResult) -> Result<i64, StoreError> {
        let metrics = checked_metrics(&result.metrics)?;

        let identity = serde_json::to_string(&result.fingerprint.identity)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let info = serde_json::to_string(&result.fingerprint.info)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let matrix = serde_json::to_string(&result.matrix)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let key = result.fingerprint.identity.series_key();

        // IMMEDIATE takes the write lock up front, so a busy store makes us wait (busy
        // timeout) instead of failing later when a read lock cannot be upgraded.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO results (run_id, workflow, job, matrix, step, git_commit, git_ref,
                git_dirty, started_at_ms, finished_at_ms, status, series_key, identity, info)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                result.run_id,
                result.workflow,
                result.job,
                matrix,
                result.step,
                result.git.commit,
                result.git.ref_name,
                result.git.dirty,
                result.started_at_ms,
                result.finished_at_ms,
                result.status.as_str(),
                key.0,
                identity,
                info,
            ],
        )?;
        let result_id = tx.last_insert_rowid();
        {
            let mut metric_stmt = tx.prepare(
                "INSERT INTO metrics (result_id, name, unit, direction, n, mean, sd, median,
                    q1, q3, min, max) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )?;
            let mut sample_stmt =
                tx.prepare("INSERT INTO samples (metric_id, idx, value) VALUES (?1, ?2, ?3)")?;
            for m in &metrics {
                let s = m.summary;
                metric_stmt.execute(params![
                    result_id,
                    m.name,
                    m.unit,
                    m.direction.as_str(),
                    i64::try_from(m.samples.len()).unwrap_or(i64::MAX),
                    s.map(|s| s.mean),
                    s.map(|s| s.sd),
                    s.map(|s| s.median),
                    s.map(|s| s.q1),
                    s.map(|s| s.q3),
                    s.map(|s| s.min),
                    s.map(|s| s.max),
                ])?;
                let metric_id = tx.last_insert_rowid();
                for (idx, value) in m.samples.iter().enumerate() {
                    sample_stmt.execute(params![
                        metric_id,
                        i64::try_from(idx).unwrap_or(i64::MAX),
                        value
                    ])?;
                }
            }
        }
        tx.commit()?;
        Ok(result_id)
    }

    /// One result by its id, with its metrics and samples.
    pub fn result(&self, id: i64) -> Result<Option<StoredResult>, StoreError> {
        let row = self
            .conn
            .query_row(
                &format!("SELECT {RESULT_COLUMNS} FROM results WHERE id = ?1"),
                [id],
                ResultRow::read,
            )
            .optional()?;
        row.map(|r| self.hydrate(r)).transpose()
    }

    /// Every result of a workflow run, oldest first.
    pub fn run_results(&self, run_id: &str) -> Result<Vec<StoredResult>, StoreError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {RESULT_COLUMNS} FROM results WHERE run_id = ?1 ORDER BY id"
        ))?;
        let rows = stmt
            .query_map([run_id], ResultRow::read)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(|r| self.hydrate(r)).collect()
    }

    /// Whether a run id exists; when it does not, a near miss among recent runs for the
    /// error's "did you mean".
    pub fn check_run(&self, run_id: &str) -> Result<(), StoreError> {
        let found: Option<i64> = self
            .conn
            .query_row(
                "SELECT id FROM results WHERE run_id = ?1 LIMIT 1",
                [run_id],
                |r| r.get(0),
            )
            .optional()?;
        if found.is_some() {
            return Ok(());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT run_id FROM results ORDER BY id DESC LIMIT 200")?;
        let recent = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        let suggestion = crate::diag::did_you_mean(run_id, recent.iter().map(String::as_str))
            .or_else(|| {
                (!recent.is_empty()).then(|| {
                    format!(
                        "recent runs: {}",
                        crate::diag::join_quoted(recent.iter().take(5), "and")
                    )
                })
            });
        Err(StoreError::UnknownRun {
            run: run_id.to_string(),
            suggestion,
        })
    }

    /// Past successful results matching `filter`, newest first.
    pub fn find(&self, filter: &ResultFilter) -> Result<Vec<StoredResult>, StoreError> {
        let mut sql = format!(
            "SELECT {RESULT_COLUMNS} FROM results r WHERE r.status = 'success'
               AND EXISTS (SELECT 1 FROM metrics m WHERE m.result_id = r.id AND m.name = ?1
                           AND m.n > 0)"
        );
        let mut args: Vec<String> = vec![filter.metric.clone()];
        let mut push = |col: &str, value: &Option<String>, op: &str| {
            if let Some(v) = value {
                args.push(v.clone());
                sql.push_str(&format!(" AND r.{col} {op} ?{}", args.len()));
            }
        };
        push(
            "series_key",
            &filter.series_key.as_ref().map(|k| k.0.clone()),
            "=",
        );
        push("workflow", &filter.workflow, "=");
        push("job", &filter.job, "=");
        push("step", &filter.step, "=");
        push("git_ref", &filter.git_ref, "=");
        push("run_id", &filter.exclude_run, "<>");
        sql.push_str(&format!(
            " ORDER BY r.finished_at_ms DESC, r.id DESC LIMIT {}",
            filter.limit.max(1)
        ));
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args.iter()), ResultRow::read)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(|r| self.hydrate(r)).collect()
    }

    /// How many results the store holds (all statuses).
    pub fn count(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM results", [], |r| r.get(0))?)
    }

    fn hydrate(&self, row: ResultRow) -> Result<StoredResult, StoreError> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            StoreError::Corrupt(format!("result {}: {what}: {e}", row.id))
        };
        let identity = serde_json::from_str(&row.identity).map_err(|e| corrupt("identity", &e))?;
        let info = serde_json::from_str(&row.info).map_err(|e| corrupt("info", &e))?;
        let matrix: BTreeMap<String, String> =
            serde_json::from_str(&row.matrix).map_err(|e| corrupt("matrix", &e))?;
        let status = RunStatus::parse(&row.status)
            .ok_or_else(|| corrupt("status", &format!("`{}`", row.status)))?;
        let metrics = self.metrics_of(row.id)?;
        Ok(StoredResult {
            id: row.id,
            run_id: row.run_id,
            workflow: row.workflow,
            job: row.job,
            matrix,
            step: row.step,
            git: GitInfo {
                commit: row.git_commit,
                ref_name: row.git_ref,
                dirty: row.git_dirty,
            },
            started_at_ms: row.started_at_ms,
            finished_at_ms: row.finished_at_ms,
            status,
            series_key: SeriesKey(row.series_key),
            fingerprint: Fingerprint { identity, info },
            metrics,
        })
    }

    fn metrics_of(&self, result_id: i64) -> Result<Vec<StoredMetric>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, name, unit, direction FROM metrics WHERE result_id = ?1 ORDER BY id",
        )?;
        let heads = stmt
            .query_map([result_id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut samples_stmt = self
            .conn
            .prepare_cached("SELECT value FROM samples WHERE metric_id = ?1 ORDER BY idx")?;
        heads
            .into_iter()
            .map(|(id, name, unit, direction)| {
                let samples = samples_stmt
                    .query_map([id], |r| r.get::<_, f64>(0))?
                    .collect::<Result<Vec<_>, _>>()?;
                let direction = Direction::parse(&direction).ok_or_else(|| {
                    StoreError::Corrupt(format!("metric `{name}`: direction `{direction}`"))
                })?;
                Ok(StoredMetric {
                    summary: Summary::of(&samples),
                    name,
                    unit,
                    direction,
                    samples,
                })
            })
            .collect()
    }
}

/// The metrics as they will be stored, each with its direction and summary; refused when a
/// name repeats, a sample is not finite or the direction cannot be told.
fn checked_metrics(new: &[NewMetric]) -> Result<Vec<StoredMetric>, StoreError> {
    let mut metrics = Vec::with_capacity(new.len());
    for m in new {
        if metrics.iter().any(|s: &StoredMetric| s.name == m.name) {
            return Err(StoreError::DuplicateMetric {
                metric: m.name.clone(),
            });
        }
        if let Some((index, &value)) = m.samples.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(StoreError::BadSample {
                metric: m.name.clone(),
                index,
                value,
            });
        }
        let direction = m
            .direction
            .or_else(|| Direction::infer(&m.name, &m.unit))
            .ok_or_else(|| StoreError::UnknownDirection {
                metric: m.name.clone(),
                unit: m.unit.clone(),
            })?;
        metrics.push(StoredMetric {
            name: m.name.clone(),
            unit: m.unit.clone(),
            direction,
            samples: m.samples.clone(),
            summary: Summary::of(&m.samples),
        });
    }
    Ok(metrics)
}

const RESULT_COLUMNS: &str = "id, run_id, workflow, job, matrix, step, git_commit, git_ref, \
    git_dirty, started_at_ms, finished_at_ms, status, series_key, identity, info";

struct ResultRow {
    id: i64,
    run_id: String,
    workflow: String,
    job: String,
    matrix: String,
    step: String,
    git_commit: Option<String>,
    git_ref: Option<String>,
    git_dirty: bool,
    started_at_ms: i64,
    finished_at_ms: i64,
    status: String,
    series_key: String,
    identity: String,
    info: String,
}

impl ResultRow {
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: r.get(0)?,
            run_id: r.get(1)?,
            workflow: r.get(2)?,
            job: r.get(3)?,
            matrix: r.get(4)?,
            step: r.get(5)?,
            git_commit: r.get(6)?,
            git_ref: r.get(7)?,
            git_dirty: r.get(8)?,
            started_at_ms: r.get(9)?,
            finished_at_ms: r.get(10)?,
            status: r.get(11)?,
            series_key: r.get(12)?,
            identity: r.get(13)?,
            info: r.get(14)?,
        })
    }
}

/// Switches the file to WAL. Changing the journal mode needs the file to itself, and SQLite
/// answers `SQLITE_BUSY` at once, without calling the busy handler, when another process is
/// opening the same new file at that moment; so retry for as long as the busy timeout allows.
fn enable_wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = std::time::Duration::from_millis(2);
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_store_is_at_the_top_of_the_work_tree() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("configs").join("eagle3");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(default_path(&sub), sub.join(".gpuflow").join("results.db"));
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        assert_eq!(
            default_path(&sub),
            dir.path().join(".gpuflow").join("results.db")
        );
    }
}
