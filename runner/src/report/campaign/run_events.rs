//! What a run's stored events (`.gpuflow/runs/<id>/events.jsonl`, replayed with the log lines'
//! text) say about one job's cells: which ran, which failed and why, which a search skipped,
//! which server each used (`start-container`'s `server-key`, `reused`, `cells-before`) and how
//! long it took to be ready (`start-container`'s time plus `wait-for-health`'s `ready-after`),
//! and how the job's searches ended.
//!
//! The results store knows only the cells that measured; this is where the others are. It
//! reads events, it decides nothing about what they mean for the report.

use std::path::Path;

use indexmap::IndexMap;

use crate::events::{Event, EventKind, JobResult, Stream};
use crate::run_logs::replay::Replay;

/// One cell of the job as the run's events tell it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoggedCell {
    /// Index of the matrix cell.
    pub cell: usize,
    /// `tune (128, 4)`.
    pub display: String,
    /// Its values in the matrix's order; empty in a log written before they were recorded.
    pub matrix: IndexMap<String, String>,
    /// How it ended; `None` when the log stops before it did (a run still going, or killed).
    pub result: Option<JobResult>,
    /// Why it did not run (`job_skipped`, `job_cannot_run`) or why it failed.
    pub reason: Option<String>,
    /// The servers its `start-container` steps started or adopted.
    pub servers: Vec<ServerStart>,
    /// Seconds its `wait-for-health` steps waited for readiness (`ready-after`), summed.
    pub ready_after_s: f64,
}

/// A `start-container` step of a cell: its outputs and how long it took.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerStart {
    /// The step's name (`server`).
    pub step: String,
    /// `server-key`; empty when the server was not shareable (`reuse: false`).
    pub key: String,
    pub reused: bool,
    pub cells_before: u32,
    pub seconds: f64,
}

/// The job's cells and how its searches ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CampaignLog {
    pub workflow: String,
    pub cells: Vec<LoggedCell>,
    /// How each search went and ended.
    pub searches: Vec<SearchEnd>,
}

/// A search's closing line (`bisect of `frac`: 70 ok, 80 failed (…) → the largest …`), said
/// in the log of its last probe.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchEnd {
    pub cell: usize,
    pub text: String,
}

/// Every event stored in `run_dir`, log lines with their text.
pub fn read(run_dir: &Path) -> std::io::Result<Vec<Event>> {
    let mut replay = Replay::open(run_dir)?;
    let mut events = Vec::new();
    replay.poll(true, &mut |e| events.push(e))?;
    Ok(events)
}

/// The jobs the run queued, each once, in order: what `--campaign` may name.
pub fn job_names(events: &[Event]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for e in events {
        if let EventKind::JobQueued { job, .. } = &e.kind
            && !names.contains(&job.job)
        {
            names.push(job.job.clone());
        }
    }
    names
}

/// The cells of `job` in `events`, in the order they were queued.
pub fn from_events(events: &[Event], job: &str) -> CampaignLog {
    let mut log = CampaignLog::default();
    for e in events {
        match &e.kind {
            EventKind::RunStarted { workflow, .. } => log.workflow.clone_from(workflow),
            EventKind::JobQueued { job: j, matrix, .. } if j.job == job => {
                log.cells.push(LoggedCell {
                    cell: j.cell,
                    display: j.display.clone(),
                    matrix: matrix.clone(),
                    ..LoggedCell::default()
                });
            }
            EventKind::JobSkipped { job: j, reason }
            | EventKind::JobCannotRun { job: j, reason }
                if j.job == job =>
            {
                cell_mut(&mut log, j.cell).reason = Some(reason.clone());
            }
            EventKind::JobFinished {
                job: j,
                result,
                failure,
                ..
            } if j.job == job => {
                let cell = cell_mut(&mut log, j.cell);
                cell.result = Some(*result);
                if failure.is_some() {
                    cell.reason.clone_from(failure);
                }
            }
            EventKind::StepFinished {
                job: j,
                name,
                duration,
                outputs,
                ..
            } if j.job == job => step_finished(cell_mut(&mut log, j.cell), name, duration, outputs),
            EventKind::LogLine {
                job: j,
                step: None,
                container: None,
                stream: Stream::Runner,
                text,
            } if j.job == job && is_search_summary(text) => log.searches.push(SearchEnd {
                cell: j.cell,
                text: text.clone(),
            }),
            _ => {}
        }
    }
    log
}

/// The cell `cell`, added when the log never queued it (an older gpuflow's log is read
/// the same way).
fn cell_mut(log: &mut CampaignLog, cell: usize) -> &mut LoggedCell {
    let at = match log.cells.iter().position(|c| c.cell == cell) {
        Some(at) => at,
        None => {
            log.cells.push(LoggedCell {
                cell,
                ..LoggedCell::default()
            });
            log.cells.len() - 1
        }
    };
    &mut log.cells[at]
}

/// A step that started a server says so by its outputs (`reused`), one that waited for it by
/// `ready-after`: whatever the step is called, and inside an action too.
fn step_finished(
    cell: &mut LoggedCell,
    name: &str,
    duration: &std::time::Duration,
    outputs: &IndexMap<String, String>,
) {
    if let Some(reused) = outputs.get("reused") {
        cell.servers.push(ServerStart {
            step: name.to_string(),
            key: outputs.get("server-key").cloned().unwrap_or_default(),
            reused: reused == "true",
            cells_before: outputs
                .get("cells-before")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            seconds: duration.as_secs_f64(),
        });
    }
    if let Some(waited) = outputs
        .get("ready-after")
        .and_then(|s| s.parse::<f64>().ok())
    {
        cell.ready_after_s += waited;
    }
}

/// A search's line: said by the run (not a step) about the job, `… → outcome` — a bisect's
/// end, or a maximize/minimize search's rounds and end.
fn is_search_summary(text: &str) -> bool {
    text.contains(" → ")
        && ["bisect of `", "maximize `", "minimize `"]
            .iter()
            .any(|p| text.starts_with(p))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::events::{JobRef, StepOutcome};

    fn jref(cell: usize, display: &str) -> JobRef {
        JobRef {
            job: "tune".into(),
            cell,
            display: display.into(),
        }
    }

    fn at(kind: EventKind) -> Event {
        Event {
            elapsed: Duration::ZERO,
            kind,
        }
    }

    fn step(cell: usize, name: &str, secs: f64, outputs: &[(&str, &str)]) -> Event {
        at(EventKind::StepFinished {
            job: jref(cell, ""),
            step: "1".into(),
            name: name.into(),
            outcome: StepOutcome::Success,
            conclusion: StepOutcome::Success,
            duration: Duration::from_secs_f64(secs),
            outputs: outputs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        })
    }

    #[test]
    fn cells_servers_failures_skips_and_the_search_are_read() {
        let queued = |cell: usize, v: &str| {
            at(EventKind::JobQueued {
                job: jref(cell, &format!("tune ({v})")),
                matrix: IndexMap::from([("frac".to_string(), v.to_string())]),
                needs: Vec::new(),
            })
        };
        let finished = |cell: usize, result: JobResult, failure: Option<&str>| {
            at(EventKind::JobFinished {
                job: jref(cell, ""),
                result,
                duration: Duration::from_secs(3),
                failure: failure.map(String::from),
            })
        };
        let events = vec![
            at(EventKind::RunStarted {
                run_id: "r".into(),
                workflow: "w".into(),
                log_dir: String::new(),
                jobs: 3,
            }),
            queued(0, "70"),
            queued(1, "80"),
            queued(2, "90"),
            at(EventKind::JobQueued {
                job: JobRef {
                    job: "other".into(),
                    cell: 0,
                    display: "other".into(),
                },
                matrix: IndexMap::new(),
                needs: Vec::new(),
            }),
            step(
                0,
                "server",
                2.5,
                &[("reused", "false"), ("server-key", "k1"), ("cells-before", "0")],
            ),
            step(0, "wait-for-health", 4.0, &[("ready-after", "3.900")]),
            finished(0, JobResult::Success, None),
            finished(1, JobResult::Failure, Some("cause: CUDA out of memory: `x`")),
            at(EventKind::JobSkipped {
                job: jref(2, ""),
                reason: "not needed: the bisect of `frac` found its boundary".into(),
            }),
            finished(2, JobResult::Skipped, None),
            at(EventKind::LogLine {
                job: jref(1, ""),
                step: None,
                container: None,
                stream: Stream::Runner,
                text: "bisect of `frac`: 70 ok, 80 failed → the largest `frac` that succeeds is 70 (2 probes of 3 cells)".into(),
            }),
        ];
        let log = from_events(&events, "tune");
        assert_eq!(log.workflow, "w");
        assert_eq!(log.cells.len(), 3);
        let c = &log.cells[0];
        assert_eq!(c.matrix["frac"], "70");
        assert_eq!(c.result, Some(JobResult::Success));
        assert_eq!(c.servers[0].key, "k1");
        assert!(!c.servers[0].reused);
        assert!((c.servers[0].seconds - 2.5).abs() < 1e-9);
        assert!((c.ready_after_s - 3.9).abs() < 1e-9);
        assert_eq!(
            log.cells[1].reason.as_deref(),
            Some("cause: CUDA out of memory: `x`")
        );
        assert_eq!(log.cells[2].result, Some(JobResult::Skipped));
        assert!(
            log.cells[2]
                .reason
                .as_deref()
                .unwrap()
                .starts_with("not needed")
        );
        assert_eq!(log.searches.len(), 1);
        assert_eq!(log.searches[0].cell, 1);
    }

    #[test]
    fn search_lines_are_told_from_other_run_lines() {
        assert!(is_search_summary(
            "bisect of `frac`: 70 ok → the largest `frac` that succeeds is 70 (1 probes of 1 cells)"
        ));
        assert!(is_search_summary(
            "minimize `ttft_ms`, round 1 of 1 at 100%: tune (1) 3 → the best is tune (1) with `ttft_ms` 3 (1 runs)"
        ));
        assert!(!is_search_summary(
            "reusing the server `server` an earlier cell started (key k, up 2s, 1 cell served): no new container"
        ));
    }
}
