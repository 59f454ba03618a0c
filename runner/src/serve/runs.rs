//! Which runs there are: triggered ones from the queue, and ones started by hand whose
//! folders are under `<project>/.gpuflow/runs/`. A run is found by its id by comparing names,
//! never by building a path from what a request says.

use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use crate::run_logs::files::run_in_progress;
use crate::trigger::{GpuflowHome, Queue, QueuedRun};

/// One run, as the runs page lists it.
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    pub id: String,
    /// `triggered` (from a push, through the queue) or `by hand` (`gpuflow run`).
    pub source: &'static str,
    /// `queued`, `running`, `success`, `failure`, `cancelled`, or `interrupted` (a run by
    /// hand that stopped without ending: its process was killed).
    pub state: String,
    /// The workflow file, as the run named it.
    pub workflow: String,
    pub name: String,
    pub git_ref: Option<String>,
    pub sha: Option<String>,
    /// Seconds since the Unix epoch.
    pub queued_at: Option<f64>,
    pub started_at: Option<f64>,
    pub finished_at: Option<f64>,
    pub message: Option<String>,
    /// From start to end, seconds, once it ended.
    pub took_s: Option<f64>,
    #[serde(skip)]
    pub log_dir: PathBuf,
}

impl RunRow {
    fn with_took(mut self) -> Self {
        self.took_s = self
            .started_at
            .zip(self.finished_at)
            .map(|(s, f)| (f - s).max(0.0));
        self
    }
}

/// What the runs page may be narrowed to (`?workflow=&ref=&state=`).
#[derive(Clone, Debug, Default, serde::Deserialize, Serialize)]
pub struct RunFilter {
    pub workflow: Option<String>,
    #[serde(rename = "ref")]
    pub git_ref: Option<String>,
    pub state: Option<String>,
    pub limit: Option<usize>,
}

const DEFAULT_LIMIT: usize = 100;

impl RunFilter {
    fn keeps(&self, run: &RunRow) -> bool {
        let given = |v: &Option<String>| v.as_deref().filter(|v| !v.is_empty()).map(str::to_owned);
        given(&self.workflow).is_none_or(|w| run.workflow == w || run.name == w)
            && given(&self.git_ref).is_none_or(|r| {
                run.git_ref
                    .as_deref()
                    .is_some_and(|g| g == r || g.strip_prefix("refs/heads/") == Some(r.as_str()))
            })
            && given(&self.state).is_none_or(|s| run.state == s)
    }

    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, 10_000)
    }
}

/// Where runs are found.
pub struct RunSources<'a> {
    pub home: &'a GpuflowHome,
    pub project: &'a Path,
}

impl RunSources<'_> {
    /// The runs `filter` keeps, newest first.
    pub fn list(&self, filter: &RunFilter) -> Vec<RunRow> {
        let mut rows: Vec<RunRow> = self.queued().into_iter().chain(self.by_hand()).collect();
        rows.retain(|r| filter.keeps(r));
        rows.sort_by(|a, b| {
            let at = |r: &RunRow| r.started_at.or(r.queued_at).unwrap_or(0.0);
            at(b).total_cmp(&at(a)).then_with(|| b.id.cmp(&a.id))
        });
        rows.truncate(filter.limit());
        rows
    }

    /// The run named `id` exactly.
    pub fn find(&self, id: &str) -> Option<RunRow> {
        if let Some(queue) = self.queue()
            && let Ok(Some(run)) = queue.get(id)
        {
            return Some(queued_row(run));
        }
        let entries = std::fs::read_dir(self.project.join(".gpuflow").join("runs")).ok()?;
        let dir = entries
            .flatten()
            .find(|e| e.file_name().to_str() == Some(id))?
            .path();
        by_hand_row(&dir)
    }

    /// The queue, when there is one (no queue: nothing was ever triggered here).
    pub fn queue(&self) -> Option<Queue> {
        let path = self.home.queue();
        path.is_file().then(|| Queue::open(&path).ok()).flatten()
    }

    fn queued(&self) -> Vec<RunRow> {
        let Some(queue) = self.queue() else {
            return Vec::new();
        };
        queue
            .list(usize::MAX >> 1)
            .unwrap_or_default()
            .into_iter()
            .map(queued_row)
            .collect()
    }

    fn by_hand(&self) -> Vec<RunRow> {
        let Ok(entries) = std::fs::read_dir(self.project.join(".gpuflow").join("runs")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| by_hand_row(&e.path()))
            .collect()
    }
}

fn queued_row(run: QueuedRun) -> RunRow {
    RunRow {
        source: "triggered",
        state: run.state.as_str().to_string(),
        workflow: run.workflow,
        name: run.name,
        git_ref: Some(run.git_ref),
        sha: Some(run.sha),
        queued_at: Some(run.queued_at),
        started_at: run.started_at,
        finished_at: run.finished_at,
        message: run.message,
        took_s: None,
        log_dir: run.log_dir,
        id: run.id,
    }
    .with_took()
}

/// A run started by hand, from its folder: the first event names it, the last says how it
/// ended (read from the file's end, so a long log costs no more than a short one).
fn by_hand_row(dir: &Path) -> Option<RunRow> {
    let events = dir.join("events.jsonl");
    let file = std::fs::File::open(&events).ok()?;
    let meta = file.metadata().ok()?;
    let mut first = String::new();
    std::io::BufReader::new(&file)
        .take(64 * 1024)
        .read_line(&mut first)
        .ok()?;
    let started: serde_json::Value = serde_json::from_str(&first).ok()?;
    if started["type"] != "run_started" {
        return None;
    }
    let result = last_result(&file, meta.len());
    let state = match result {
        Some(r) => r,
        None if run_in_progress(dir) => "running".to_string(),
        None => "interrupted".to_string(),
    };
    let secs = |t: std::io::Result<SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64())
    };
    let started_at = secs(meta.created()).or_else(|| secs(meta.modified()));
    Some(
        RunRow {
            id: started["run_id"].as_str()?.to_string(),
            source: "by hand",
            workflow: started["workflow"].as_str().unwrap_or_default().to_string(),
            name: started["workflow"].as_str().unwrap_or_default().to_string(),
            git_ref: None,
            sha: None,
            queued_at: None,
            started_at,
            finished_at: (state != "running")
                .then(|| secs(meta.modified()))
                .flatten(),
            state,
            message: None,
            took_s: None,
            log_dir: dir.to_path_buf(),
        }
        .with_took(),
    )
}

/// The `result` of the `run_finished` event near the end of `events.jsonl`, if it is there.
fn last_result(file: &std::fs::File, len: u64) -> Option<String> {
    const TAIL: u64 = 64 * 1024;
    let mut file = file;
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut tail = Vec::new();
    file.take(TAIL).read_to_end(&mut tail).ok()?;
    // The tail may start inside a character: only whole lines after it are read.
    String::from_utf8_lossy(&tail)
        .lines()
        .rev()
        .find_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            (v["type"] == "run_finished").then(|| v["result"].as_str().map(str::to_owned))?
        })
}
