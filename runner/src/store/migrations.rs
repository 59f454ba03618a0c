//! The store's schema and its upgrades. Each migration runs once, in order, inside the same
//! `BEGIN IMMEDIATE` transaction that bumps `PRAGMA user_version`, so two processes opening
//! an old file at once cannot both upgrade it, and a crash mid-upgrade leaves the old schema.
//! Migrations are append-only: a released one is never edited, a change is a new one.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// (version reached, SQL).
const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        "CREATE TABLE results (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL,
            workflow TEXT NOT NULL,
            job TEXT NOT NULL,
            matrix TEXT NOT NULL,
            step TEXT NOT NULL,
            git_commit TEXT,
            git_ref TEXT,
            git_dirty INTEGER NOT NULL DEFAULT 0,
            started_at_ms INTEGER NOT NULL,
            finished_at_ms INTEGER NOT NULL,
            status TEXT NOT NULL,
            series_key TEXT NOT NULL,
            identity TEXT NOT NULL,
            info TEXT NOT NULL
        );
        CREATE INDEX results_run ON results(run_id);
        CREATE INDEX results_series ON results(series_key, finished_at_ms);
        CREATE TABLE metrics (
            id INTEGER PRIMARY KEY,
            result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            unit TEXT NOT NULL,
            direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
            n INTEGER NOT NULL,
            mean REAL, sd REAL, median REAL, q1 REAL, q3 REAL, min REAL, max REAL,
            UNIQUE (result_id, name)
        );
        CREATE TABLE samples (
            metric_id INTEGER NOT NULL REFERENCES metrics(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            value REAL NOT NULL,
            PRIMARY KEY (metric_id, idx)
        ) WITHOUT ROWID;",
    ),
    (
        2,
        "CREATE TABLE baselines (
            name TEXT NOT NULL,
            metric TEXT NOT NULL DEFAULT '',
            run_id TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL,
            PRIMARY KEY (name, metric)
        );
        CREATE INDEX metrics_name ON metrics(name, result_id);",
    ),
    (
        3,
        // `history --workflow` and report charts read a workflow's newest results: with this
        // index SQLite walks them newest first and stops at the limit instead of sorting every
        // result of the metric (120 ms → 25 ms at 100 000 runs).
        "CREATE INDEX results_workflow_time ON results(workflow, finished_at_ms);",
    ),
    (
        4,
        // What each `compare-to-baseline` step decided about a result, as it decided it: a
        // report shows these verdicts rather than judging again with its own defaults (which
        // may pick another baseline and so say something else than the run did).
        "CREATE TABLE judgements (
            id INTEGER PRIMARY KEY,
            result_id INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,
            metric TEXT NOT NULL,
            verdict TEXT NOT NULL,
            step TEXT NOT NULL,
            comparison TEXT NOT NULL,
            judged_at_ms INTEGER NOT NULL
        );
        CREATE INDEX judgements_result ON judgements(result_id);",
    ),
    (
        5,
        // The history page and `gpuflow history` without `--workflow` read a metric's newest
        // results: with this index SQLite walks every result newest first and stops at the
        // limit, where it read each result of the metric and sorted them (190 ms → under 1 ms
        // for the newest 200 of 100 000; benches/serve.rs).
        "CREATE INDEX results_time ON results(finished_at_ms);",
    ),
];

/// The schema version this gpuflow writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// Brings the file to schema `target` ([`SCHEMA_VERSION`] but in tests, which make the files
/// an older gpuflow wrote); refuses a newer file rather than misreading it.
pub(super) fn migrate_to(
    conn: &mut Connection,
    path: &Path,
    target: i64,
) -> Result<(), StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version == target {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Read again under the write lock: another process may have upgraded meanwhile.
    let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    for (to, sql) in MIGRATIONS {
        if *to > version && *to <= target {
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", to)?;
        }
    }
    tx.commit()?;
    Ok(())
}
