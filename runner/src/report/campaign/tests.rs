//! The campaign report's assembly and rendering from hand-made cells and results.

use std::collections::BTreeMap;

use indexmap::IndexMap;

use super::campaign_data::{CampaignOptions, Header, assemble, short_cause};
use super::run_events::{CampaignLog, LoggedCell, SearchEnd, ServerStart};
use super::*;
use crate::events::JobResult;
use crate::stats::Summary;
use crate::store::{
    Direction, Fingerprint, GitInfo, RunStatus, SeriesKey, StoredMetric, StoredResult,
};

fn logged(cell: usize, values: &[(&str, &str)], result: Option<JobResult>) -> LoggedCell {
    let matrix: IndexMap<String, String> = values
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    let shown: Vec<&str> = values.iter().map(|(_, v)| *v).collect();
    LoggedCell {
        cell,
        display: format!("tune ({})", shown.join(", ")),
        matrix,
        result,
        ..LoggedCell::default()
    }
}

fn server(key: &str, reused: bool, cells_before: u32, seconds: f64) -> ServerStart {
    ServerStart {
        step: "server".into(),
        key: key.into(),
        reused,
        cells_before,
        seconds,
    }
}

fn metric(name: &str, unit: &str, direction: Direction, samples: &[f64]) -> StoredMetric {
    StoredMetric {
        name: name.into(),
        unit: unit.into(),
        direction,
        samples: samples.to_vec(),
        summary: Summary::of(samples),
    }
}

/// A cell's result: throughput `tok_s` (three runs) and TTFT `ttft` (per request).
fn result(cell: &LoggedCell, tok_s: [f64; 3], ttft: &[f64]) -> StoredResult {
    StoredResult {
        id: cell.cell as i64,
        run_id: "r-1".into(),
        workflow: "campaign".into(),
        job: "tune".into(),
        matrix: cell
            .matrix
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        step: "bench".into(),
        git: GitInfo {
            commit: Some("0123456789abcdef".into()),
            ref_name: Some("main".into()),
            dirty: false,
        },
        started_at_ms: 0,
        finished_at_ms: 0,
        status: RunStatus::Success,
        series_key: SeriesKey("k".into()),
        fingerprint: Fingerprint::default(),
        metrics: vec![
            metric("output_throughput", "tok/s", Direction::Higher, &tok_s),
            metric("ttft_ms", "ms", Direction::Lower, ttft),
        ],
    }
}

fn header() -> Header<'static> {
    Header {
        run_id: "r-1",
        job: "tune",
        title: None,
        now_ms: 0,
    }
}

/// Two servers (`bs` 128 and 256) for four cells, one of which failed.
fn grid() -> (CampaignLog, Vec<StoredResult>) {
    let mut cells = vec![
        logged(0, &[("bs", "128"), ("c", "1")], Some(JobResult::Success)),
        logged(1, &[("bs", "128"), ("c", "8")], Some(JobResult::Success)),
        logged(2, &[("bs", "256"), ("c", "1")], Some(JobResult::Success)),
        logged(3, &[("bs", "256"), ("c", "8")], Some(JobResult::Failure)),
    ];
    cells[0].servers = vec![server("aaaaaaaaaaaaaaaa", false, 0, 1.0)];
    cells[0].ready_after_s = 30.0;
    cells[1].servers = vec![server("aaaaaaaaaaaaaaaa", true, 1, 0.1)];
    cells[1].ready_after_s = 0.2;
    cells[2].servers = vec![server("bbbbbbbbbbbbbbbb", false, 0, 1.0)];
    cells[2].ready_after_s = 20.0;
    cells[3].servers = vec![server("bbbbbbbbbbbbbbbb", true, 1, 0.1)];
    cells[3].reason = Some("the benchmark failed: 4 of 4 requests failed\nhelp: look".into());
    let results = vec![
        result(&cells[0], [100.0, 102.0, 98.0], &[10.0, 11.0, 12.0]),
        result(&cells[1], [400.0, 390.0, 410.0], &[40.0, 41.0, 42.0]),
        result(&cells[2], [90.0, 91.0, 92.0], &[20.0, 21.0, 22.0]),
    ];
    let log = CampaignLog {
        workflow: "campaign".into(),
        cells,
        searches: Vec::new(),
    };
    (log, results)
}

#[test]
fn a_grid_has_every_cell_its_server_status_and_intervals() {
    let (log, results) = grid();
    let data = assemble(&log, &results, &CampaignOptions::default(), &header());
    assert_eq!(data.dimensions, ["bs", "c"]);
    assert_eq!(data.status_line, "3 ok, 1 failed");
    let statuses: Vec<&str> = data.cells.iter().map(|c| c.status.as_str()).collect();
    assert_eq!(statuses, ["ok", "ok", "ok", "failed"]);
    assert_eq!(
        data.cells[3].cause.as_deref(),
        Some("the benchmark failed: 4 of 4 requests failed")
    );
    assert_eq!(data.cells[0].server_text, "aaaaaaaaaaaa, started");
    assert_eq!(
        data.cells[1].server_text,
        "aaaaaaaaaaaa, reused (1 cell before)"
    );
    assert_eq!(data.cells[0].load_text, "31.0 s");
    assert_eq!(data.throughput.label, "output_throughput mean");
    assert_eq!(data.latency.label, "ttft_ms p50");
    assert_eq!(data.cells[0].throughput_text, "100.0 tok/s");
    assert_eq!(data.cells[0].latency_text, "11.00 ms");
    // Three runs of 100 ± 2: t(0.975, 2) · 2 / √3 = 4.97.
    let m = &data.cells[0].metrics[0];
    assert_eq!(m.text, "100.0 tok/s [95.03, 105.0]");
    // The failed cell measured nothing: it has no column.
    assert_eq!(data.metric_columns.len(), 3);
    assert_eq!(data.metric_rows[0].values.len(), 3);
    assert_eq!(data.cells[0].short, "bs=128, c=1");
    // No search: the best is the highest throughput of the cells that succeeded.
    assert_eq!(data.best.len(), 1);
    assert_eq!(data.best[0].label, "tune (128, 8)");
    assert_eq!(data.best[0].how, "the highest output_throughput mean");
    // (11 ms, 100) and (41 ms, 400) are the front; (21 ms, 91) is beaten by the first.
    let front: Vec<bool> = data.cells.iter().map(|c| c.pareto).collect();
    assert_eq!(front, [true, true, false, false]);
    assert_eq!(data.pareto.front, ["tune (128, 1)", "tune (128, 8)"]);
    assert!(data.pareto.svg.contains(r#"class="best""#));
    assert_eq!(
        data.reuse.line.as_deref(),
        Some("2 servers for 4 cells; ~52 s of loading saved (2 cells adopted a running server)")
    );
}

#[test]
fn a_search_names_its_boundary_and_says_why_probes_failed() {
    let mut cells = vec![
        logged(0, &[("frac", "70")], Some(JobResult::Success)),
        logged(1, &[("frac", "80")], Some(JobResult::Failure)),
        logged(2, &[("frac", "90")], Some(JobResult::Skipped)),
    ];
    cells[1].reason = Some(
        "the server exited before it was ready\ncause: CUDA out of memory: `torch.OutOfMemoryError`"
            .into(),
    );
    cells[2].reason =
        Some("not needed: the bisect of `frac` found its boundary without this cell".into());
    let summary = "bisect of `frac`: 70 ok, 80 failed (CUDA out of memory) → the largest `frac` that succeeds is 70 (2 probes of 3 cells)";
    let log = CampaignLog {
        workflow: "w".into(),
        cells,
        searches: vec![SearchEnd {
            cell: 1,
            text: summary.into(),
        }],
    };
    let results = vec![result(&log.cells[0], [50.0, 50.0, 50.0], &[5.0])];
    let data = assemble(&log, &results, &CampaignOptions::default(), &header());
    let statuses: Vec<(&str, Option<&str>)> = data
        .cells
        .iter()
        .map(|c| (c.status.as_str(), c.cause.as_deref()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("ok", None),
            ("infeasible", Some("CUDA out of memory")),
            (
                "skipped",
                Some("not needed: the bisect of `frac` found its boundary without this cell")
            ),
        ]
    );
    assert_eq!(data.best.len(), 1);
    assert_eq!(data.best[0].label, "tune (70)");
    assert_eq!(data.best[0].how, summary);
    assert!(data.cells[0].best);
    assert_eq!(data.searches, [summary]);
    // One sample: no interval to give.
    assert_eq!(data.cells[0].metrics[1].text, "5.00 ms");
    assert_eq!(data.reuse.line, None, "no cell started a server");
}

#[test]
fn chosen_metrics_and_percentile_are_used() {
    let (log, results) = grid();
    let options = CampaignOptions {
        throughput: Some("output_throughput".into()),
        latency: Some("ttft_ms".into()),
        latency_percentile: Some(99.0),
    };
    let data = assemble(&log, &results, &options, &header());
    assert_eq!(data.latency.label, "ttft_ms p99");
    // p99 of 10, 11, 12 (linear): 11.98.
    assert_eq!(data.cells[0].latency_text, "11.98 ms");
}

#[test]
fn short_causes_prefer_the_recognised_cause() {
    assert_eq!(
        short_cause("x failed\n  cause: CUDA out of memory: `boom`\nmore"),
        "CUDA out of memory"
    );
    assert_eq!(
        short_cause("the script exited with code 1"),
        "the script exited with code 1"
    );
    assert_eq!(short_cause(&"a".repeat(200)).chars().count(), 121);
}

#[test]
fn both_formats_render_the_table_the_chart_and_the_saved_time() {
    let (log, results) = grid();
    let data = assemble(&log, &results, &CampaignOptions::default(), &header());
    let md = String::from_utf8(
        campaign_files(&data, Format::Markdown, None).unwrap()[0]
            .contents
            .clone(),
    )
    .unwrap();
    assert!(md.contains("| cell | bs | c | server | status |"), "{md}");
    assert!(
        md.contains("| tune (128, 8) ★ ◆ | 128 | 8 | aaaaaaaaaaaa, reused (1 cell before) | ok | 400.0 tok/s | 41.00 ms | 0.3 s |"),
        "{md}"
    );
    assert!(
        md.contains("| tune (256, 8) | 256 | 8 | bbbbbbbbbbbb, reused (1 cell before) | failed: the benchmark failed: 4 of 4 requests failed |"),
        "{md}"
    );
    assert!(
        md.contains("**Servers:** 2 servers for 4 cells; ~52 s of loading saved"),
        "{md}"
    );
    assert!(md.contains("](pareto.svg)"), "{md}");
    assert!(
        md.contains("On the Pareto front, quickest first: `tune (128, 1)`, `tune (128, 8)`."),
        "{md}"
    );
    let html = String::from_utf8(
        campaign_files(&data, Format::Html, None).unwrap()[0]
            .contents
            .clone(),
    )
    .unwrap();
    assert!(html.contains(r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart pareto""#));
    assert!(
        html.contains(r#"<span class="status s-failed">failed</span>"#),
        "{html}"
    );
}

#[test]
fn the_files_and_the_commit_message() {
    let (log, results) = grid();
    let data = assemble(&log, &results, &CampaignOptions::default(), &header());
    let files = campaign_files(&data, Format::Markdown, None).unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["report.md", "pareto.svg", "record.json"]);
    let record: serde_json::Value = serde_json::from_slice(&files[2].contents).unwrap();
    assert_eq!(record["cells"][3]["status"], "failed");
    assert!(
        record["pareto"].get("svg").is_none(),
        "the chart is its own file"
    );
    assert_eq!(
        commit_message(&data),
        "gpuflow: campaign run r-1: campaign `tune`\n\ncells: 3 ok, 1 failed\nbest: tune (128, 8)\nservers: 2 servers for 4 cells; ~52 s of loading saved (2 cells adopted a running server)\n"
    );
    assert_eq!(folder("tune"), "campaign-tune");
}

#[test]
fn a_maximize_search_names_its_best_cell_and_its_rounds_are_kept() {
    let cells = vec![
        logged(0, &[("bs", "1")], Some(JobResult::Success)),
        logged(1, &[("bs", "4")], Some(JobResult::Success)),
        logged(2, &[("bs", "8")], Some(JobResult::Failure)),
    ];
    let results = vec![
        result(&cells[0], [10.0, 10.0, 10.0], &[5.0]),
        result(&cells[1], [30.0, 30.0, 30.0], &[6.0]),
    ];
    let round = "maximize `output_throughput`, round 1 of 2 at 50%: tune (1) 10, tune (4) 30, tune (8) failed → keeps tune (4), tune (1) for round 2 at 100%";
    let end = "maximize `output_throughput`, round 2 of 2 at 100%: tune (4) 30, tune (1) 10 → the best is tune (1) with `output_throughput` 10 (2 runs)";
    let log = CampaignLog {
        workflow: "w".into(),
        cells,
        searches: [round, end]
            .into_iter()
            .map(|text| SearchEnd {
                cell: 1,
                text: text.into(),
            })
            .collect(),
    };
    let data = assemble(&log, &results, &CampaignOptions::default(), &header());
    // The search's word, not the report's own ranking (which would pick bs=4).
    let best: Vec<&str> = data.best.iter().map(|b| b.label.as_str()).collect();
    assert_eq!(best, ["tune (1)"]);
    assert_eq!(data.best[0].how, end);
    assert_eq!(data.searches.len(), 2);
    assert_eq!(data.cells[2].status, "infeasible");
}
