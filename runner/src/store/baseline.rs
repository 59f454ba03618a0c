//! Pinned baselines: a name given to a run's results (`gpuflow baseline set nccl RUN`), for
//! all its metrics or one (`--metric`).

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{ResultStore, StoreError, now_ms};

/// A name pinned to a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedBaseline {
    pub name: String,
    /// `None`: the pin holds for every metric of the run.
    pub metric: Option<String>,
    pub run_id: String,
    pub created_at_ms: i64,
}

/// Words a baseline input already means something else by.
const RESERVED: &[&str] = &["previous", "window"];

fn check_name(name: &str) -> Result<(), StoreError> {
    let bad = |why| {
        Err(StoreError::BadBaselineName {
            name: name.to_string(),
            why,
        })
    };
    if name.is_empty() {
        return bad("a name cannot be empty");
    }
    if RESERVED.contains(&name) {
        return bad("`previous` and `window` are kinds of baseline; choose another name");
    }
    if name.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-' || c == '+') {
        return bad("it would read as a fixed number; start it with a letter");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return bad("use letters, digits, `-`, `_` and `.`");
    }
    Ok(())
}

impl ResultStore {
    /// Pins `name` to run `run_id` (for one `metric`, or all), replacing an earlier pin of the
    /// same name and metric.
    pub fn set_baseline(
        &mut self,
        name: &str,
        run_id: &str,
        metric: Option<&str>,
    ) -> Result<PinnedBaseline, StoreError> {
        check_name(name)?;
        self.check_run(run_id)?;
        if let Some(metric) = metric {
            let names = self.metric_names_of_run(run_id)?;
            if !names.iter().any(|n| n == metric) {
                return Err(StoreError::UnknownMetric {
                    run: run_id.to_string(),
                    metric: metric.to_string(),
                    suggestion: crate::diag::did_you_mean(metric, &names).or_else(|| {
                        Some(format!(
                            "it has {}",
                            crate::diag::join_quoted(&names, "and")
                        ))
                    }),
                });
            }
        }
        let pin = PinnedBaseline {
            name: name.to_string(),
            metric: metric.map(str::to_string),
            run_id: run_id.to_string(),
            created_at_ms: now_ms(),
        };
        self.conn.execute(
            "INSERT INTO baselines (name, metric, run_id, created_at_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (name, metric) DO UPDATE SET run_id = excluded.run_id,
                created_at_ms = excluded.created_at_ms",
            params![
                pin.name,
                metric.unwrap_or(""),
                pin.run_id,
                pin.created_at_ms
            ],
        )?;
        Ok(pin)
    }

    /// Every pin, by name then metric.
    pub fn baselines(&self) -> Result<Vec<PinnedBaseline>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT name, metric, run_id, created_at_ms FROM baselines ORDER BY name, metric",
        )?;
        let rows = stmt.query_map([], |r| {
            let metric: String = r.get(1)?;
            Ok(PinnedBaseline {
                name: r.get(0)?,
                metric: (!metric.is_empty()).then_some(metric),
                run_id: r.get(2)?,
                created_at_ms: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The pin `name` means for `metric`: one made for that metric wins over one for all.
    pub fn baseline(&self, name: &str, metric: &str) -> Result<Option<PinnedBaseline>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT name, metric, run_id, created_at_ms FROM baselines
                 WHERE name = ?1 AND (metric = ?2 OR metric = '')
                 ORDER BY metric = '' LIMIT 1",
                params![name, metric],
                |r| {
                    let metric: String = r.get(1)?;
                    Ok(PinnedBaseline {
                        name: r.get(0)?,
                        metric: (!metric.is_empty()).then_some(metric),
                        run_id: r.get(2)?,
                        created_at_ms: r.get(3)?,
                    })
                },
            )
            .optional()?)
    }

    /// Removes the pins of `name` (only the one for `metric` when given); how many went.
    pub fn remove_baseline(
        &mut self,
        name: &str,
        metric: Option<&str>,
    ) -> Result<usize, StoreError> {
        Ok(match metric {
            Some(m) => self.conn.execute(
                "DELETE FROM baselines WHERE name = ?1 AND metric = ?2",
                params![name, m],
            )?,
            None => self
                .conn
                .execute("DELETE FROM baselines WHERE name = ?1", [name])?,
        })
    }

    fn metric_names_of_run(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT DISTINCT m.name FROM metrics m JOIN results r ON r.id = m.result_id
             WHERE r.run_id = ?1 ORDER BY m.name",
        )?;
        let rows = stmt.query_map([run_id], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_be_misread_are_refused() {
        assert!(check_name("nccl").is_ok());
        assert!(check_name("cuda-13.0").is_ok());
        for bad in ["", "previous", "window", "89.5", "a b", "-x"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
