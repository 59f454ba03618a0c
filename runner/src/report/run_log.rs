//! Reading a run's log folder (`.gpuflow/runs/<id>/events.jsonl`, written by
//! [`crate::run_logs::LogStore`]) for what a report shows when the run failed: the failing job's
//! server (container) log, last lines first to go. The lines themselves are read from the log
//! file a `log_line` record points at (`file`), plain or compressed (`.log.zst`); records of an
//! older gpuflow, which held each line's `text`, are read as they are.
//!
//! Only the fields it needs are read, and loosely: a log written by an older or newer gpuflow
//! still gives what it can, and a missing or unreadable log gives nothing rather than an error
//! (a report is still worth having without it).

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// How many of the server's last lines a report shows.
const EXCERPT_LINES: usize = 30;

/// The failing server's last log lines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureExcerpt {
    /// The job (with its matrix values) that failed.
    pub job: String,
    /// The step that failed, by name, when one did.
    pub step: Option<String>,
    /// The container whose log this is; `None`: the failing step's own output.
    pub container: Option<String>,
    pub lines: Vec<String>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    job: Option<JobRef>,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    step: Option<String>,
    #[serde(default)]
    container: Option<String>,
    #[serde(default)]
    text: Option<String>,
    /// The log file holding the line, relative to the run's folder.
    #[serde(default)]
    file: Option<String>,
}

#[derive(Deserialize, Clone, PartialEq, Eq)]
struct JobRef {
    job: String,
    cell: usize,
    display: String,
}

/// The excerpt when the run in `run_dir` failed, else `None`.
pub fn failure_excerpt(run_dir: &Path) -> Option<FailureExcerpt> {
    let file = std::fs::File::open(run_dir.join("events.jsonl")).ok()?;
    let events: Vec<Line> = std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    let run_failed = events
        .iter()
        .any(|e| e.kind == "run_finished" && e.result.as_deref() == Some("failure"));
    let failed_step = events
        .iter()
        .find(|e| e.kind == "step_finished" && e.outcome.as_deref() == Some("failure"));
    if !run_failed && failed_step.is_none() {
        return None;
    }
    // The first failure is the cause; later ones are usually its consequences.
    let job = failed_step.and_then(|e| e.job.clone()).or_else(|| {
        events
            .iter()
            .find(|e| e.kind == "job_finished" && e.result.as_deref() == Some("failure"))
            .and_then(|e| e.job.clone())
    })?;
    let in_job = |e: &&Line| e.kind == "log_line" && e.job.as_ref() == Some(&job);
    // The server's log explains a failed benchmark better than the client's; fall back to
    // the failing step's own output when the job ran no container.
    let container = events
        .iter()
        .filter(in_job)
        .filter_map(|e| e.container.clone())
        .next_back();
    let step_id = failed_step.and_then(|e| e.step.clone());
    let mut lines = VecDeque::with_capacity(EXCERPT_LINES);
    let mut log_file = None;
    for e in events.iter().filter(in_job) {
        let wanted = match &container {
            Some(c) => e.container.as_ref() == Some(c),
            None => e.step.is_some() && e.step == step_id,
        };
        if !wanted {
            continue;
        }
        if let Some(f) = &e.file {
            log_file = Some(f.clone());
        } else if let Some(t) = &e.text {
            if lines.len() == EXCERPT_LINES {
                lines.pop_front();
            }
            lines.push_back(t.clone());
        }
    }
    // The file holds only that container's (or step's) lines: its last ones are the excerpt,
    // a truncation marker included. Unreadable: no lines, the rest of the report stands.
    let lines = match log_file.and_then(|f| crate::run_logs::files::log_path(run_dir, &f)) {
        Some(path) => crate::run_logs::files::last_lines(&path, EXCERPT_LINES).unwrap_or_default(),
        None => lines.into(),
    };
    Some(FailureExcerpt {
        job: job.display,
        step: failed_step.and_then(|e| e.name.clone()),
        container,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(lines: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("events.jsonl"), lines.join("\n")).unwrap();
        dir
    }

    const JOB: &str = r#"{"job":"bench","cell":0,"display":"bench (nccl)"}"#;

    #[test]
    fn a_failed_run_shows_its_servers_last_lines() {
        let mut lines = vec![r#"{"elapsed":0,"type":"run_started","run_id":"r","workflow":"w","log_dir":"d","jobs":1}"#.to_string()];
        for i in 0..40 {
            lines.push(format!(
                r#"{{"elapsed":1,"type":"log_line","job":{JOB},"step":null,"container":"server","stream":"stdout","text":"line {i}"}}"#
            ));
        }
        lines.push(format!(
            r#"{{"elapsed":2,"type":"step_finished","job":{JOB},"step":"2","name":"measure","outcome":"failure","conclusion":"failure","duration":1.0}}"#
        ));
        lines.push(r#"{"elapsed":3,"type":"run_finished","run_id":"r","result":"failure"}"#.into());
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dir = write(&refs);
        let e = failure_excerpt(dir.path()).unwrap();
        assert_eq!(e.job, "bench (nccl)");
        assert_eq!(e.step.as_deref(), Some("measure"));
        assert_eq!(e.container.as_deref(), Some("server"));
        assert_eq!(e.lines.len(), EXCERPT_LINES);
        assert_eq!(e.lines.last().map(String::as_str), Some("line 39"));
        assert_eq!(e.lines[0], "line 10");
    }

    #[test]
    fn a_successful_run_or_no_log_shows_nothing() {
        let dir =
            write(&[r#"{"elapsed":3,"type":"run_finished","run_id":"r","result":"success"}"#]);
        assert_eq!(failure_excerpt(dir.path()), None);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(failure_excerpt(empty.path()), None);
    }

    /// What the store writes now: records pointing into the step's log, compressed once the
    /// step finished.
    #[test]
    fn the_failing_steps_last_lines_are_read_from_its_compressed_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("bench-nccl/2-b.log");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let text: String = (0..1000).map(|i| format!("out {i}\n")).collect();
        std::fs::write(&log, text + "gpuflow: the step failed\n").unwrap();
        crate::run_logs::files::compress(&log).unwrap();
        assert!(!log.exists());
        std::fs::write(
            dir.path().join("events.jsonl"),
            [
                format!(
                    r#"{{"type":"log_line","job":{JOB},"step":"2","container":null,"stream":"stdout","file":"bench-nccl/2-b.log","line":1,"lines":1000,"offset":0}}"#
                ),
                format!(
                    r#"{{"type":"step_finished","job":{JOB},"step":"2","name":"b","outcome":"failure","conclusion":"failure","duration":1.0}}"#
                ),
            ]
            .join("\n"),
        )
        .unwrap();
        let e = failure_excerpt(dir.path()).unwrap();
        assert_eq!(e.container, None);
        assert_eq!(e.lines.len(), EXCERPT_LINES);
        assert_eq!(e.lines[0], "out 971");
        assert_eq!(e.lines.last().unwrap(), "gpuflow: the step failed");
    }

    #[test]
    fn without_a_container_the_failing_steps_output_is_shown() {
        let dir = write(&[
            &format!(
                r#"{{"type":"log_line","job":{JOB},"step":"1","container":null,"stream":"stdout","text":"ok"}}"#
            ),
            &format!(
                r#"{{"type":"log_line","job":{JOB},"step":"2","container":null,"stream":"stderr","text":"boom"}}"#
            ),
            &format!(
                r#"{{"type":"step_finished","job":{JOB},"step":"2","name":"b","outcome":"failure","conclusion":"failure","duration":1.0}}"#
            ),
        ]);
        let e = failure_excerpt(dir.path()).unwrap();
        assert_eq!(e.container, None);
        assert_eq!(e.lines, vec!["boom".to_string()]);
    }
}
