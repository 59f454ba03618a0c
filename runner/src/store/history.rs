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

/// A series' newest result's identity, newest in the series index's own order so SQLite reads
/// one entry: ordered by id alone it read and sorted every result of the series (30 ms for
/// 25 000). Every result of a series has the same identity (the key hashes all of it).
const SERIES_IDENTITY_SQL: &str = "SELECT identity FROM results WHERE series_key = ?1
     ORDER BY finished_at_ms DESC, id DESC LIMIT 1";

/// The distinct metric names, hopping from each to the next along the name index (one lookup
/// per name) where `SELECT DISTINCT` read the whole index: 8 ms at 200 000 metrics, paid by
/// every history page.
const METRIC_NAMES_SQL: &str = "WITH RECURSIVE names(name) AS (
         SELECT MIN(name) FROM metrics
         UNION ALL
         SELECT (SELECT MIN(name) FROM metrics WHERE name > names.name)
         FROM names WHERE names.name IS NOT NULL
     )
     SELECT name FROM names WHERE name IS NOT NULL ORDER BY name";

/// The first and last series keys matching `?1` (a GLOB pattern): the same key when the
/// pattern names one series. Two subqueries, so each is one lookup at an end of the series
/// index's range; one `MIN(), MAX()` would read the range through.
const SERIES_KEY_RANGE_SQL: &str = "SELECT
         (SELECT MIN(series_key) FROM results WHERE series_key GLOB ?1),
         (SELECT MAX(series_key) FROM results WHERE series_key GLOB ?1)";

/// The SQL of `query` and its arguments; `one_series`: the key its series prefix names, when
/// it names exactly one.
///
/// `CROSS JOIN` keeps `results` the outer loop, so SQLite walks results newest first — along
/// `results_time`, or `results_workflow_time` for a workflow — looks up each one's metric, and
/// stops at the limit. Left to choose, it starts from the metric's index instead, reads every
/// result of the metric and sorts them all: 190 ms for the newest 200 of 100 000, against
/// under 1 ms (benches/serve.rs). The walk's worst case, a metric no recent result has, reads
/// the time index to the end: about 30 ms at 100 000 results.
fn history_sql(query: &HistoryQuery, one_series: Option<&str>) -> (String, Vec<String>) {
    let mut sql = String::from(
        "SELECT r.id, r.run_id, r.workflow, r.job, r.step, r.finished_at_ms, r.git_commit,
                r.git_ref, r.status, r.series_key, m.unit, m.direction,
                m.n, m.mean, m.sd, m.median, m.q1, m.q3, m.min, m.max
         FROM results r CROSS JOIN metrics m ON m.result_id = r.id
         WHERE m.name = ?1 AND m.n > 0",
    );
    let mut args = vec![query.metric.clone()];
    if let Some(key) = one_series {
        // The series index then gives its results newest first: no sort.
        args.push(key.to_string());
        sql.push_str(&format!(" AND r.series_key = ?{}", args.len()));
    } else if let Some(series) = &query.series {
        args.push(series_glob(series));
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
    (sql, args)
}

/// A series prefix as a pattern, like a short git hash; `glob` uses the series index and keys
/// are hex.
fn series_glob(prefix: &str) -> String {
    format!("{}*", prefix.to_ascii_lowercase())
}

impl ResultStore {
    /// The newest `limit` points of the metric, returned oldest first (the order a chart
    /// reads). Results without samples (failed before measuring) are left out.
    pub fn history(&self, query: &HistoryQuery) -> Result<Vec<HistoryPoint>, StoreError> {
        // A prefix read as a range makes SQLite sort every result in it (115 ms for a series
        // of 25 000); the one key it names is read in order.
        let one_series = match &query.series {
            Some(prefix) => {
                let (first, last): (Option<String>, Option<String>) =
                    self.conn
                        .query_row(SERIES_KEY_RANGE_SQL, [series_glob(prefix)], |r| {
                            Ok((r.get(0)?, r.get(1)?))
                        })?;
                first.filter(|f| Some(f) == last.as_ref())
            }
            None => None,
        };
        let (sql, args) = history_sql(query, one_series.as_deref());
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
            .query_row(SERIES_IDENTITY_SQL, [&key.0], |r| r.get(0))
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
        let mut stmt = self.conn.prepare(METRIC_NAMES_SQL)?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's plan for `sql`, one line per step.
    fn plan(store: &ResultStore, sql: &str, args: &[String]) -> String {
        let mut stmt = store
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap();
        let rows = stmt
            .query_map(params_from_iter(args.iter()), |r| r.get::<_, String>(3))
            .unwrap();
        rows.collect::<Result<Vec<_>, _>>().unwrap().join("\n")
    }

    /// Reads along `index`, without sorting.
    fn walks(p: &str, index: &str) -> bool {
        p.contains(index) && !p.contains("TEMP B-TREE")
    }

    /// The history page's queries read along an index and stop: no sort of every result, no
    /// scan of every metric (benches/serve.rs measures them at 100 000 results).
    #[test]
    fn history_queries_walk_an_index_instead_of_sorting_every_result() {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::open(&dir.path().join("results.db")).unwrap();
        let mut query = HistoryQuery {
            metric: "output_tok_s".into(),
            limit: 200,
            ..HistoryQuery::default()
        };
        let (sql, args) = history_sql(&query, None);
        let p = plan(&store, &sql, &args);
        assert!(walks(&p, "results_time"), "{p}");
        query.series = Some("ab12".into());
        let (sql, args) = history_sql(&query, Some("ab12cd"));
        let p = plan(&store, &sql, &args);
        assert!(walks(&p, "results_series"), "{p}");
        query.series = None;
        query.workflow = Some("eagle3".into());
        let (sql, args) = history_sql(&query, None);
        let p = plan(&store, &sql, &args);
        assert!(walks(&p, "results_workflow_time"), "{p}");
        let p = plan(&store, SERIES_IDENTITY_SQL, &["ab".into()]);
        assert!(walks(&p, "results_series"), "{p}");
        let p = plan(&store, SERIES_KEY_RANGE_SQL, &["ab*".into()]);
        assert!(!p.contains("SCAN results"), "{p}");
        let p = plan(&store, METRIC_NAMES_SQL, &[]);
        assert!(!p.contains("SCAN metrics"), "{p}");
    }
}
