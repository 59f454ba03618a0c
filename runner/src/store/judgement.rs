//! Judgements: what a `compare-to-baseline` step decided about a result (each metric's verdict
//! and the comparison behind it, as JSON the store does not read), kept so a report of the run
//! shows the run's verdicts, not ones made again with other inputs.

use rusqlite::params;

use super::{ResultStore, StoreError, now_ms};

/// One metric's verdict on a result, by one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub result_id: i64,
    pub metric: String,
    pub verdict: String,
    /// The judging step's name.
    pub step: String,
    /// The whole comparison as the step made it (JSON of [`crate::compare::Comparison`]).
    pub comparison: String,
    pub judged_at_ms: i64,
}

impl ResultStore {
    /// Records what `step` decided about result `result_id`: `(metric, verdict, comparison
    /// JSON)` per metric, in one transaction.
    pub fn record_judgements(
        &mut self,
        result_id: i64,
        step: &str,
        judged: &[(String, String, String)],
    ) -> Result<(), StoreError> {
        let at = now_ms();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO judgements (result_id, metric, verdict, step, comparison, judged_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for (metric, verdict, comparison) in judged {
                stmt.execute(params![result_id, metric, verdict, step, comparison, at])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The latest verdict on `metric` of each of `result_ids` that was judged (a history
    /// chart's markers): one query for the lot.
    pub fn verdicts(
        &self,
        metric: &str,
        result_ids: &[i64],
    ) -> Result<std::collections::HashMap<i64, String>, StoreError> {
        let mut verdicts = std::collections::HashMap::new();
        // SQLite takes at most 32766 parameters a statement.
        for chunk in result_ids.chunks(30_000) {
            let marks = vec!["?"; chunk.len()].join(",");
            let mut stmt = self.conn.prepare(&format!(
                "SELECT result_id, verdict FROM judgements
                 WHERE metric = ? AND result_id IN ({marks}) ORDER BY id"
            ))?;
            let args = std::iter::once(rusqlite::types::Value::from(metric.to_string()))
                .chain(chunk.iter().map(|&id| rusqlite::types::Value::from(id)));
            let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })?;
            for row in rows {
                let (id, verdict) = row?;
                verdicts.insert(id, verdict);
            }
        }
        Ok(verdicts)
    }

    /// Every judgement of result `result_id`, oldest first.
    pub fn judgements(&self, result_id: i64) -> Result<Vec<Judgement>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT result_id, metric, verdict, step, comparison, judged_at_ms FROM judgements
             WHERE result_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([result_id], |r| {
                Ok(Judgement {
                    result_id: r.get(0)?,
                    metric: r.get(1)?,
                    verdict: r.get(2)?,
                    step: r.get(3)?,
                    comparison: r.get(4)?,
                    judged_at_ms: r.get(5)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}
