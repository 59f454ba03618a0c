//! The campaign report: one page per tuning campaign — one job's matrix cells (or a search's
//! probes) of one run — with each cell's server key, status (ok, infeasible with its cause,
//! skipped by the search), metrics with their confidence intervals, the best configuration, a
//! throughput-against-latency Pareto chart and the loading that sharing servers saved
//! (docs/campaigns.md, "The campaign report").
//!
//! [`gather`] reads the run's events ([`run_events`]: every cell, including those that never
//! measured) and the results store; [`campaign_data::assemble`] makes the template context;
//! [`campaign_files`] renders it with the chart and a JSON record; the files are committed to
//! the results branch as a run's report is ([`super::commit_files`]).

pub mod campaign_data;
pub mod pareto;
pub mod reuse;
pub mod run_events;

use std::path::Path;

pub use campaign_data::{CampaignData, CampaignOptions};

use super::{BranchFile, Committed, Format, PublishError, ResultsBranch, Template, TemplateError};
use crate::store::{ResultStore, StoreError};

/// Where a campaign report's data comes from.
pub struct CampaignSource<'a> {
    pub store: &'a ResultStore,
    pub run_id: &'a str,
    /// The run's log folder (`.gpuflow/runs/<id>`): which cells ran, failed or were skipped.
    pub run_dir: &'a Path,
    /// The job whose cells are the campaign.
    pub job: &'a str,
    pub options: CampaignOptions,
    pub title: Option<String>,
    pub now_ms: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    #[error("cannot read the log of run `{run_id}` (`{path}`): {source}")]
    NoLog {
        run_id: String,
        path: String,
        source: std::io::Error,
    },
    #[error("run `{run_id}` has no job `{job}`")]
    NoSuchJob {
        run_id: String,
        job: String,
        jobs: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CampaignError {
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NoLog { .. } => Some(
                "a campaign report reads which cells ran, failed or were skipped from the run's \
                 log folder: report on the machine that ran it, where `.gpuflow/runs/<id>/` is"
                    .into(),
            ),
            Self::NoSuchJob { job, jobs, .. } => Some(if jobs.is_empty() {
                "the run queued no job".to_string()
            } else {
                let listed = format!("its jobs are {}", crate::diag::join_quoted(jobs, "and"));
                match crate::diag::did_you_mean(job, jobs) {
                    Some(s) => format!("{s} {listed}"),
                    None => listed,
                }
            }),
            Self::Store(e) => e.hint(),
        }
    }
}

/// Gathers the campaign of `source.job` in `source.run_id`.
pub fn gather(source: &CampaignSource<'_>) -> Result<CampaignData, CampaignError> {
    let events = run_events::read(source.run_dir).map_err(|e| CampaignError::NoLog {
        run_id: source.run_id.to_string(),
        path: source.run_dir.join("events.jsonl").display().to_string(),
        source: e,
    })?;
    let log = run_events::from_events(&events, source.job);
    if log.cells.is_empty() {
        return Err(CampaignError::NoSuchJob {
            run_id: source.run_id.to_string(),
            job: source.job.to_string(),
            jobs: run_events::job_names(&events),
        });
    }
    let results: Vec<_> = source
        .store
        .run_results(source.run_id)?
        .into_iter()
        .filter(|r| r.job == source.job)
        .collect();
    Ok(campaign_data::assemble(
        &log,
        &results,
        &source.options,
        &campaign_data::Header {
            run_id: source.run_id,
            job: source.job,
            title: source.title.clone(),
            now_ms: source.now_ms,
        },
    ))
}

/// The folder a campaign report goes in, beside the run's report: `campaign-<job>`.
pub fn folder(job: &str) -> String {
    format!("campaign-{}", crate::run_logs::slug(job))
}

/// The campaign report (`report.md` or `report.html`), its Pareto chart (`pareto.svg`) and
/// `record.json`, the campaign's numbers for scripts.
pub fn campaign_files(
    data: &CampaignData,
    format: Format,
    template: Option<&Template>,
) -> Result<Vec<BranchFile>, TemplateError> {
    let text = super::renderer::render_context(data, format, template, format.campaign_builtin())?;
    let mut record = serde_json::to_value(data).unwrap_or_default();
    // The record is numbers for scripts: the chart is its own file.
    if let Some(pareto) = record.get_mut("pareto").and_then(|p| p.as_object_mut()) {
        pareto.remove("svg");
    }
    let mut record = serde_json::to_vec_pretty(&record).unwrap_or_default();
    record.push(b'\n');
    Ok(vec![
        BranchFile {
            path: format!("report.{}", format.extension()),
            contents: text.into_bytes(),
        },
        BranchFile {
            path: data.pareto.file.clone(),
            contents: data.pareto.svg.clone().into_bytes(),
        },
        BranchFile {
            path: "record.json".into(),
            contents: record,
        },
    ])
}

/// The results-branch commit's message: the workflow, the run, the job and how its cells ended.
pub fn commit_message(data: &CampaignData) -> String {
    let best: Vec<&str> = data.best.iter().map(|b| b.label.as_str()).collect();
    format!(
        "gpuflow: {} run {}: campaign `{}`\n\ncells: {}\nbest: {}\n{}",
        data.workflow,
        data.run_id,
        data.job,
        data.status_line,
        if best.is_empty() {
            "none".to_string()
        } else {
            best.join(", ")
        },
        data.reuse
            .line
            .as_ref()
            .map(|l| format!("servers: {l}\n"))
            .unwrap_or_default()
    )
}

/// Commits `files` under `runs/<run id>/campaign-<job>/` on `branch`.
pub fn commit_campaign(
    branch: &ResultsBranch,
    data: &CampaignData,
    files: &[BranchFile],
) -> Result<Committed, PublishError> {
    let under = format!("runs/{}/{}", data.run_id, folder(&data.job));
    super::commit_files(branch, &under, files, &commit_message(data))
}

#[cfg(test)]
mod tests;
