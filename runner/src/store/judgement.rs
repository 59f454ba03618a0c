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
