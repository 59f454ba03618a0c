//! A metric's series over time, for `gpuflow history` and report charts. Reads only the
//! stored summaries (one row per result), never the samples, so it stays fast on a large store.

use rusqlite::{OptionalExtension, params_from_iter};
use serde::{Deserialize, Serialize};

use super::{Direction, Identity, ResultStore, SeriesKey, StoreError};
use crate::stats::Summary;

/// Which points to show.
#[derive(Clone, Debug, Default)]
pub struct HistoryQuery {
    pub metric: String,
    /// A series key or a unique prefix of one.
    pub series: Option<String>,
    pub workflow: Option<String>,
    /// The newest this many points per query.
    pub limit: usize,
}

/// One result's value of the metric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryPoint {
    pub result_id: i64,
    pub run_id: String,
    pub workflow: String,
    pub job: String,
    pub step: String,
    pub finished_at_ms: i64,
    pub git_commit: Option<String>,
    pub git_ref: Option<String>,
    pub status: String,
    pub series_key: SeriesKey,
    pub unit: String,
    pub direction: Direction,
    pub summary: Summary,
}

impl ResultStore {
    /// The newest `limit` points of the metric, returned oldest first (the order a chart
    /// reads). Results without samples (failed before measuring) are left out.
    pub fn history(&self, query: &HistoryQuery) -> Result<Vec<HistoryPoint>, StoreError> {
        let mut sql = String::from(
            "SELECT r.id, r.run_id, r.workflow, r.job, r.step, r.finished_at_ms, r.git_commit,
                    r.git_ref, r.status, r.series_key, m.unit, m.direction,
                    m.n, m.mean, m.sd, m.median, m.q1, m.q3, m.min, m.max
             FROM metrics m JOIN results r ON r.id = m.result_id
             WHERE m.name = ?1 AND m.n > 0",
        );
        let mut args = vec![query.metric.clone()];
        if let Some(series) = &query.series {
            // A prefix, like a short git hash; `glob` uses the series index and keys are hex.
            args.push(format!("{}*", series.to_ascii_lowercase()));
            sql.push_str(&format!(" AND r.series_key GLOB ?{}", args.len()));
        }
        if let Some(workflow) = &query.workflow {
            args.push(workflow.clone());
            sql.push_str(&format!(" AND r.workflow = ?{}", args.len()));
        }
        sql.push_str(&format!(
            " ORDER BY r.finished_at_ms DESC, r.id DESC LIMIT {}",
            query.limit.max(1)
        ));
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(params_from_iter(args.iter()), |r| {
            let direction: String = r.get(11)?;
            Ok(HistoryPoint {
                result_id: r.get(0)?,
                run_id: r.get(1)?,
                workflow: r.get(2)?,
                job: r.get(3)?,
                step: r.get(4)?,
                finished_at_ms: r.get(5)?,
                git_commit: r.get(6)?,
                git_ref: r.get(7)?,
                status: r.get(8)?,
                series_key: SeriesKey(r.get(9)?),
                unit: r.get(10)?,
                direction: Direction::parse(&direction).unwrap_or(Direction::Higher),
                summary: Summary {
                    n: usize::try_from(r.get::<_, i64>(12)?).unwrap_or(0),
                    mean: r.get(13)?,
                    sd: r.get(14)?,
                    median: r.get(15)?,
                    q1: r.get(16)?,
                    q3: r.get(17)?,
                    min: r.get(18)?,
                    max: r.get(19)?,
                },
            })
        })?;
        let mut points: Vec<HistoryPoint> = rows.collect::<Result<_, _>>()?;
        points.reverse();
        Ok(points)
    }

    /// The identity of a series, from its newest result.
    pub fn series_identity(&self, key: &SeriesKey) -> Result<Option<Identity>, StoreError> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT identity FROM results WHERE series_key = ?1 ORDER BY id DESC LIMIT 1",
                [&key.0],
                |r| r.get(0),
            )
            .optional()?;
        text.map(|t| {
            serde_json::from_str(&t)
                .map_err(|e| StoreError::Corrupt(format!("series {}: identity: {e}", key.short())))
        })
        .transpose()
    }

    /// The newest runs that recorded results: `(run id, workflow, finished at ms)`, newest
    /// first (what a comparison is chosen from).
    pub fn recent_runs(&self, limit: usize) -> Result<Vec<(String, String, i64)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT run_id, workflow, MAX(finished_at_ms) AS t FROM results
             GROUP BY run_id ORDER BY t DESC LIMIT ?1",
        )?;
        let rows = stmt.query_map([i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every metric name in the store, for "did you mean" when a name is mistyped.
    pub fn metric_names(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT name FROM metrics ORDER BY name")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
