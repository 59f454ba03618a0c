//! Reports of a run: what the results store and the run's log say, rendered through a Tera
//! template (Markdown or HTML) with SVG charts, written to a folder and optionally committed
//! to a results branch of the repository (docs/reports.md).
//!
//! [`ReportData::gather`] reads the store and the log folder; [`render`] turns the data into
//! text; [`report_files`] adds the charts and the JSON record; [`ResultsBranch`] commits them
//! without touching the user's checkout. Verdicts are [`crate::compare`]'s; this module only
//! shows them. It knows nothing of terminals or the engine.
//!
//! [`campaign`] is the other report: one job's matrix cells of a run side by side (a tuning
//! campaign), from the run's events and the store, committed the same way.

pub mod campaign;
pub mod chart;
mod renderer;
mod report_data;
mod results_branch;
mod run_log;

use std::path::Path;

pub use renderer::{Format, Template, TemplateError, render, render_context};
pub use report_data::{
    CellData, Difference, Field, GitData, MatrixRow, MatrixTable, MetricRow, ReportData,
    ReportError, ReportSource, rfc3339,
};
pub use results_branch::{BranchFile, Committed, DEFAULT_BRANCH, PublishError, ResultsBranch};
pub use run_log::{FailureExcerpt, failure_excerpt};

/// The report and what goes beside it: `report.md` or `report.html`, one SVG per chart (the
/// Markdown links to them; the HTML has them inline too) and `record.json`, the run's numbers
/// for tools.
pub fn report_files(
    data: &ReportData,
    format: Format,
    template: Option<&Template>,
) -> Result<Vec<BranchFile>, TemplateError> {
    let text = render(data, format, template)?;
    let mut files = vec![BranchFile {
        path: format!("report.{}", format.extension()),
        contents: text.into_bytes(),
    }];
    for m in data.cells.iter().flat_map(|c| &c.metrics) {
        files.push(BranchFile {
            path: m.chart_compare_file.clone(),
            contents: m.chart_compare_svg.clone().into_bytes(),
        });
        files.push(BranchFile {
            path: m.chart_history_file.clone(),
            contents: m.chart_history_svg.clone().into_bytes(),
        });
    }
    files.push(BranchFile {
        path: "record.json".into(),
        contents: record_json(data),
    });
    Ok(files)
}

/// The run's numbers without the charts: what a script reading the results branch needs.
pub fn record_json(data: &ReportData) -> Vec<u8> {
    let cells: Vec<serde_json::Value> = data
        .cells
        .iter()
        .map(|c| {
            let metrics: Vec<serde_json::Value> = c
                .metrics
                .iter()
                .map(|m| {
                    serde_json::json!({
                        "name": m.name, "unit": m.unit, "direction": m.direction,
                        "verdict": m.verdict, "current": m.current, "baseline": m.baseline,
                        "change_pct": m.change_pct, "ratio": m.ratio,
                        "threshold_pct": m.threshold_pct, "p_value": m.p_value, "test": m.test,
                        "baseline_description": m.baseline_description,
                        "judged_by": m.judged_by, "counted": m.counted,
                    })
                })
                .collect();
            serde_json::json!({
                "job": c.job, "step": c.step, "matrix": c.matrix, "status": c.status,
                "verdict": c.verdict, "series_key": c.series_key,
                "environment": c.environment.iter().map(|f| (f.field.clone(), serde_json::Value::from(f.value.clone()))).collect::<serde_json::Map<_, _>>(),
                "differences": c.differences.iter().map(|d| serde_json::json!({"field": d.field, "baseline": d.baseline, "current": d.current})).collect::<Vec<_>>(),
                "metrics": metrics,
            })
        })
        .collect();
    let record = serde_json::json!({
        "run_id": data.run_id, "workflow": data.workflow, "verdict": data.verdict,
        "status": data.status, "generated_at": data.generated_at,
        "git": {"commit": data.git.commit, "ref": data.git.ref_name, "dirty": data.git.dirty},
        "cells": cells,
    });
    let mut out = serde_json::to_vec_pretty(&record).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Writes `files` into `dir` (created if needed; a `.gpuflow/` made on the way gets its
/// `.gitignore`).
pub fn write_files(dir: &Path, files: &[BranchFile]) -> std::io::Result<()> {
    crate::local_dirs::create_state_dir_all(dir)?;
    for f in files {
        std::fs::write(dir.join(&f.path), &f.contents)?;
    }
    Ok(())
}

/// The results-branch commit's message: names the workflow, the run and the verdict.
pub fn commit_message(data: &ReportData) -> String {
    let counts: Vec<String> = data
        .verdict_counts
        .iter()
        .map(|(v, n)| format!("{n} {v}"))
        .collect();
    format!(
        "gpuflow: {} run {}: {}\n\nstatus: {}\nmetrics: {}\n",
        data.workflow,
        data.run_id,
        data.verdict,
        data.status,
        if counts.is_empty() {
            "none compared".to_string()
        } else {
            counts.join(", ")
        }
    )
}

/// Commits `files` under `runs/<run id>/` on `branch`.
pub fn commit_report(
    branch: &ResultsBranch,
    data: &ReportData,
    files: &[BranchFile],
) -> Result<Committed, PublishError> {
    let under = format!("runs/{}", data.run_id);
    commit_files(branch, &under, files, &commit_message(data))
}

/// Commits `files` under the folder `under` on `branch`: how every report reaches the
/// results branch.
pub fn commit_files(
    branch: &ResultsBranch,
    under: &str,
    files: &[BranchFile],
    message: &str,
) -> Result<Committed, PublishError> {
    let files: Vec<BranchFile> = files
        .iter()
        .map(|f| BranchFile {
            path: format!("{under}/{}", f.path),
            contents: f.contents.clone(),
        })
        .collect();
    branch.commit(&files, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_message_names_workflow_run_and_verdict() {
        let mut data = ReportData::empty_for_tests("r-1");
        data.verdict = "regression".into();
        data.verdict_counts.insert("regression".into(), 1);
        data.verdict_counts.insert("unchanged".into(), 2);
        assert_eq!(
            commit_message(&data),
            "gpuflow: w run r-1: regression\n\nstatus: success\nmetrics: 1 regression, 2 unchanged\n"
        );
    }

    #[test]
    fn the_files_are_the_report_and_the_record() {
        let data = ReportData::empty_for_tests("r-1");
        let files = report_files(&data, Format::Html, None).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["report.html", "record.json"]);
        let record: serde_json::Value = serde_json::from_slice(&files[1].contents).unwrap();
        assert_eq!(record["run_id"], "r-1");
        assert_eq!(record["cells"], serde_json::json!([]));
    }
}
