//! A run on a cluster outlives the process that submitted it: its jobs finish and write their
//! ends whether or not anyone follows them. The run's log folder remembers where its folder on
//! the cluster is, so `gpuflow logs` can complete the record of a run whose coordinator died
//! (SIGKILL, a lost laptop): once every Slurm job of the run has ended, the record is made
//! again from the run's folder (every job's events as its node wrote them, the ends Slurm
//! gives the rest), and the partial record the coordinator left is kept beside it in
//! `coordinator/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::bundle::Bundle;
use super::follow::{Follower, Sibling, Tracked};
use super::voice::Voice;
use crate::events::{EventKind, HeadlineSink, JobRef, JobResult};
use crate::run_logs::LogStore;
use crate::run_logs::files::run_in_progress;

/// The file in a run's log folder that names its folder on the cluster.
const POINTER: &str = "slurm-run";

/// Writes the pointer; a run that cannot write it still runs (its record just cannot be
/// completed later).
pub fn remember(log_dir: &Path, bundle_dir: &Path) {
    if let Err(e) = std::fs::write(log_dir.join(POINTER), bundle_dir.display().to_string()) {
        tracing::warn!("could not write {POINTER} in {}: {e}", log_dir.display());
    }
}

/// The run's folder on the cluster, if the run went to one.
pub fn bundle_of(log_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(log_dir.join(POINTER)).ok()?;
    Some(PathBuf::from(text.trim()))
}

/// What [`complete`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Completion {
    /// Not a run on a cluster, still followed by its coordinator, or finished: nothing to do.
    Nothing,
    /// Its coordinator is gone and some of its Slurm jobs still run: asked again later.
    StillRunning,
    /// The record was made again from the run's folder; the run's result.
    Completed(JobResult),
}

/// Completes the record of a run on a cluster whose coordinator died, once its jobs ended.
pub async fn complete(log_dir: &Path) -> Result<Completion, String> {
    let Some(bundle_dir) = bundle_of(log_dir) else {
        return Ok(Completion::Nothing);
    };
    if run_in_progress(log_dir) || finished(log_dir) {
        return Ok(Completion::Nothing);
    }
    let bundle = Bundle::open(&bundle_dir);
    let manifest = bundle.manifest()?;
    let ids: Vec<u64> = manifest.jobs.iter().filter_map(|j| j.slurm_id).collect();
    let open = super::client::squeue(&ids).await?;
    if open
        .iter()
        .any(|j| !matches!(super::state::Phase::of(j), super::state::Phase::Ended(_)))
    {
        return Ok(Completion::StillRunning);
    }
    let (workflow, jobs) = first_events(log_dir);
    let parent = log_dir.parent().unwrap_or(Path::new("."));
    let name = log_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fresh = parent.join(format!(".{name}.completing"));
    let _ = std::fs::remove_dir_all(&fresh);
    let store = Arc::new(LogStore::create(&fresh).map_err(|e| e.to_string())?);
    let headline = Arc::new(HeadlineSink::new(store.clone()));
    let voice = Voice::new(headline.clone(), Instant::now());
    voice.emit(EventKind::RunStarted {
        run_id: manifest.run_id.clone(),
        workflow,
        log_dir: log_dir.display().to_string(),
        jobs,
    });
    let mut tracked = Vec::new();
    for (i, job) in manifest.jobs.iter().enumerate() {
        let jref = JobRef {
            job: job.job_id.clone(),
            cell: job.cell,
            display: job.display.clone(),
        };
        voice.emit(EventKind::JobQueued {
            job: jref.clone(),
            matrix: Default::default(),
            needs: Vec::new(),
        });
        tracked.push(Tracked::new(
            i,
            job.slurm_id.unwrap_or_default(),
            jref,
            bundle.clone(),
        ));
    }
    voice.emit(EventKind::Warning {
        job: None,
        message: format!(
            "the coordinator of this run was gone before it ended; its record was made again from `{}`",
            bundle_dir.display()
        ),
    });
    // Every job has ended: nothing is left to cancel for a failed cell's siblings.
    let siblings = vec![Sibling::default(); tracked.len()];
    let summaries = Follower::new(tracked, siblings, voice.clone(), CancellationToken::new())
        .follow()
        .await;
    let result = super::voice::run_result(&summaries, false);
    voice.emit(EventKind::RunFinished {
        run_id: manifest.run_id.clone(),
        result,
    });
    let line = headline.headline(&manifest.run_id, result, &log_dir.display().to_string());
    voice.emit(EventKind::RunHeadline(line));
    drop(voice);
    drop(headline);
    drop(store);
    // The coordinator's partial record is kept inside the new one.
    std::fs::rename(log_dir, fresh.join("coordinator")).map_err(|e| e.to_string())?;
    std::fs::rename(&fresh, log_dir).map_err(|e| e.to_string())?;
    Ok(Completion::Completed(result))
}

/// Whether the record has its `run_finished`.
fn finished(log_dir: &Path) -> bool {
    std::fs::read_to_string(log_dir.join("events.jsonl"))
        .is_ok_and(|t| t.lines().any(|l| l.contains("\"type\":\"run_finished\"")))
}

/// The workflow's name and the job count the coordinator said when it started.
fn first_events(log_dir: &Path) -> (String, usize) {
    let text = std::fs::read_to_string(log_dir.join("events.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "run_started")
        .map(|e| {
            (
                e["workflow"].as_str().unwrap_or_default().to_string(),
                e["jobs"].as_u64().unwrap_or_default() as usize,
            )
        })
        .unwrap_or_default()
}
