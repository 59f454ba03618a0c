//! [`CampaignData`]: the template context of a campaign report, assembled from one job's
//! cells as the run's events tell them ([`super::run_events`]) and the results they recorded.
//! Its field names are the variables docs/reports.md lists for campaign templates.
//!
//! Assembly is pure: no store, no files. Which cells are best and which are on the Pareto
//! front is decided here, from the numbers; the chart is [`super::pareto`]'s.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::pareto::{self, Axes, Point};
use super::reuse::{self, ReuseData};
use super::run_events::{CampaignLog, LoggedCell, SearchEnd};
use crate::compare::format_value;
use crate::events::JobResult;
use crate::report::{GitData, rfc3339};
use crate::stats::{mean_confidence_interval, quantile};
use crate::store::{Direction, StoredMetric, StoredResult};

/// Which metrics the campaign is judged by; `None`: the defaults.
#[derive(Clone, Debug, Default)]
pub struct CampaignOptions {
    /// Up the chart, and what "best" means without a search: `output_throughput`, else
    /// `output_tok_s`, else the first metric where higher is better.
    pub throughput: Option<String>,
    /// Across the chart: `ttft_ms`, else the first metric in `ms`.
    pub latency: Option<String>,
    /// The latency's percentile over its samples (per request): 50 unless given.
    pub latency_percentile: Option<f64>,
}

/// A campaign report's template context.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CampaignData {
    pub title: String,
    pub run_id: String,
    pub workflow: String,
    /// The job whose cells are the campaign.
    pub job: String,
    pub generated_at: String,
    pub git: GitData,
    pub log_dir: String,
    /// The matrix's dimensions, in its order.
    pub dimensions: Vec<String>,
    pub cells: Vec<CampaignCell>,
    /// How many cells ended each way (`{"ok": 4, "skipped": 2}`).
    pub status_counts: BTreeMap<String, usize>,
    /// The same in words, in the order the cells' statuses are ranked: `4 ok, 2 infeasible,
    /// 3 skipped`.
    pub status_line: String,
    pub throughput: Axis,
    pub latency: Axis,
    /// One per search (its boundary), or the best cell by `throughput` without a search.
    pub best: Vec<BestConfig>,
    /// Each search's closing line.
    pub searches: Vec<String>,
    pub pareto: ParetoData,
    pub reuse: ReuseData,
    /// The cells that recorded metrics (their `short` names): the columns of `metric_rows`.
    pub metric_columns: Vec<String>,
    /// Every metric a cell recorded, in the order they were first met, a value per column.
    pub metric_rows: Vec<MetricRow>,
}

/// A metric on one axis and the statistic shown of it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Axis {
    /// Empty when no cell recorded such a metric.
    pub metric: String,
    pub unit: String,
    /// `mean` or `p50`, `p99`…
    pub statistic: String,
    /// `ttft_ms p50`.
    pub label: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CampaignCell {
    /// `tune (128, 4)`.
    pub label: String,
    /// Its matrix values (`bs=128, c=4`), short enough for the chart.
    pub short: String,
    pub matrix: IndexMap<String, String>,
    /// One per dimension, empty where unknown.
    pub values: Vec<String>,
    /// `ok`, `infeasible` (a search's probe that failed), `failed`, `skipped`, `cancelled`, or
    /// `unfinished` (the log stops before the cell ended).
    pub status: String,
    /// Why it is not `ok`, in one line (`CUDA out of memory`).
    pub cause: Option<String>,
    /// The first 12 characters of its server's key; several servers' joined by `, `.
    pub server_key: Option<String>,
    pub reused: bool,
    pub cells_before: u32,
    /// `a1b2c3d4e5f6, started`, `a1b2c3d4e5f6, reused (2 cells before)`, or `—`.
    pub server_text: String,
    /// Seconds it spent getting its servers ready (started or adopted); none when it
    /// started none.
    pub load_s: Option<f64>,
    /// `61.2 s`, or `—`.
    pub load_text: String,
    pub throughput: Option<f64>,
    pub throughput_text: String,
    pub latency: Option<f64>,
    pub latency_text: String,
    pub metrics: Vec<CellMetric>,
    pub best: bool,
    pub pareto: bool,
}

/// A metric of a cell: the mean of its samples with the 95% confidence interval of that mean.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellMetric {
    pub name: String,
    pub unit: String,
    pub n: usize,
    pub mean: f64,
    /// None with fewer than two samples.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// `174.4 tok/s [170.1, 178.7]` (the interval left out when there is none).
    pub text: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BestConfig {
    pub label: String,
    pub matrix: IndexMap<String, String>,
    /// How it was chosen: a search's closing line, or `the highest output_throughput mean`.
    pub how: String,
    pub throughput_text: String,
    pub latency_text: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ParetoData {
    pub svg: String,
    /// The chart's file beside the report.
    pub file: String,
    /// The labels of the cells on the front, quickest first.
    pub front: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MetricRow {
    pub metric: String,
    /// One per cell that recorded metrics, `—` where it has not this one.
    pub values: Vec<String>,
}

/// What names the report besides the cells.
pub struct Header<'a> {
    pub run_id: &'a str,
    pub job: &'a str,
    pub title: Option<String>,
    pub now_ms: i64,
}

/// The campaign of `log`'s cells, with `results` (the run's results of the job).
pub fn assemble(
    log: &CampaignLog,
    results: &[StoredResult],
    options: &CampaignOptions,
    header: &Header<'_>,
) -> CampaignData {
    let dimensions = dimensions(&log.cells);
    let searched = !log.searches.is_empty();
    let of_cell: Vec<Vec<&StoredResult>> = log
        .cells
        .iter()
        .map(|c| results.iter().filter(|r| same_cell(c, r, log)).collect())
        .collect();
    let throughput = throughput_axis(results, options);
    let latency = latency_axis(results, options);
    let mut cells: Vec<CampaignCell> = log
        .cells
        .iter()
        .zip(&of_cell)
        .map(|(c, rs)| cell(c, rs, &dimensions, searched, (&throughput, &latency)))
        .collect();
    let best = best_configs(log, &mut cells, results, &throughput);
    let pareto = pareto_data(&mut cells, &throughput, &latency);
    let mut status_counts = BTreeMap::new();
    for c in &cells {
        *status_counts.entry(c.status.clone()).or_insert(0) += 1;
    }
    let status_line = STATUSES
        .iter()
        .filter_map(|s| status_counts.get(*s).map(|n| format!("{n} {s}")))
        .collect::<Vec<_>>()
        .join(", ");
    let first = results.first();
    let workflow = match (&log.workflow, first) {
        (w, _) if !w.is_empty() => w.clone(),
        (_, Some(r)) => r.workflow.clone(),
        _ => String::new(),
    };
    CampaignData {
        title: header.title.clone().unwrap_or_else(|| {
            format!("{workflow}: campaign `{}` of {}", header.job, header.run_id)
        }),
        run_id: header.run_id.to_string(),
        workflow,
        job: header.job.to_string(),
        generated_at: rfc3339(header.now_ms),
        git: GitData {
            commit: first.and_then(|r| r.git.commit.clone()),
            short_commit: first
                .and_then(|r| r.git.commit.as_ref().map(|c| c.chars().take(10).collect())),
            ref_name: first.and_then(|r| r.git.ref_name.clone()),
            dirty: first.is_some_and(|r| r.git.dirty),
        },
        log_dir: format!(".gpuflow/runs/{}/", header.run_id),
        metric_columns: cells
            .iter()
            .filter(|c| !c.metrics.is_empty())
            .map(|c| c.short.clone())
            .collect(),
        metric_rows: metric_rows(&cells),
        dimensions,
        cells,
        status_counts,
        status_line,
        throughput,
        latency,
        best,
        searches: log.searches.iter().map(|s| s.text.clone()).collect(),
        pareto,
        reuse: reuse::summarise(&log.cells),
    }
}

/// The dimensions in the matrix's order, as the first cells that have values give them.
fn dimensions(cells: &[LoggedCell]) -> Vec<String> {
    let mut dims: Vec<String> = Vec::new();
    for k in cells.iter().flat_map(|c| c.matrix.keys()) {
        if !dims.contains(k) {
            dims.push(k.clone());
        }
    }
    dims
}

/// Whether `result` was recorded by `cell`: the same matrix values (a job without a matrix
/// has one cell; a log that did not record values matches by the only cell).
fn same_cell(cell: &LoggedCell, result: &StoredResult, log: &CampaignLog) -> bool {
    if cell.matrix.is_empty() {
        return log.cells.len() == 1;
    }
    cell.matrix.len() == result.matrix.len()
        && cell
            .matrix
            .iter()
            .all(|(k, v)| result.matrix.get(k) == Some(v))
}

fn all_metrics(results: &[StoredResult]) -> impl Iterator<Item = &StoredMetric> {
    results.iter().flat_map(|r| &r.metrics)
}

fn throughput_axis(results: &[StoredResult], options: &CampaignOptions) -> Axis {
    let pick = |name: &str| all_metrics(results).find(|m| m.name == name);
    let metric = match &options.throughput {
        Some(name) => pick(name),
        None => pick("output_throughput")
            .or_else(|| pick("output_tok_s"))
            .or_else(|| all_metrics(results).find(|m| m.direction == Direction::Higher)),
    };
    let name = metric.map_or_else(
        || options.throughput.clone().unwrap_or_default(),
        |m| m.name.clone(),
    );
    Axis {
        label: format!("{name} mean"),
        unit: metric.map(|m| m.unit.clone()).unwrap_or_default(),
        metric: name,
        statistic: "mean".into(),
    }
}

fn latency_axis(results: &[StoredResult], options: &CampaignOptions) -> Axis {
    let pick = |name: &str| all_metrics(results).find(|m| m.name == name);
    let metric = match &options.latency {
        Some(name) => pick(name),
        None => pick("ttft_ms").or_else(|| {
            all_metrics(results).find(|m| m.direction == Direction::Lower && m.unit == "ms")
        }),
    };
    let name = metric.map_or_else(
        || options.latency.clone().unwrap_or_default(),
        |m| m.name.clone(),
    );
    let statistic = format!("p{}", options.latency_percentile.unwrap_or(50.0));
    Axis {
        label: format!("{name} {statistic}"),
        unit: metric.map(|m| m.unit.clone()).unwrap_or_default(),
        metric: name,
        statistic,
    }
}

fn cell(
    logged: &LoggedCell,
    results: &[&StoredResult],
    dimensions: &[String],
    searched: bool,
    (throughput, latency): (&Axis, &Axis),
) -> CampaignCell {
    let (status, cause) = status(logged, searched);
    let metrics: Vec<&StoredMetric> = {
        let mut seen: Vec<&StoredMetric> = Vec::new();
        for m in results.iter().flat_map(|r| &r.metrics) {
            if !seen.iter().any(|s| s.name == m.name) {
                seen.push(m);
            }
        }
        seen
    };
    let find = |name: &str| metrics.iter().find(|m| m.name == name).copied();
    let throughput_value = find(&throughput.metric).and_then(|m| m.summary.map(|s| s.mean));
    let latency_value = find(&latency.metric).and_then(|m| percentile(m, &latency.statistic));
    let dash = || "—".to_string();
    let keys: Vec<String> = logged
        .servers
        .iter()
        .filter(|s| !s.key.is_empty())
        .map(|s| s.key.chars().take(12).collect())
        .collect();
    // A log without `start-container`'s outputs still has the fingerprint's word on reuse.
    let fingerprint_reuse = results
        .iter()
        .find_map(|r| r.fingerprint.info.server_reuse.clone());
    let reused = logged.servers.iter().any(|s| s.reused) || fingerprint_reuse.is_some();
    let cells_before = logged
        .servers
        .iter()
        .map(|s| s.cells_before)
        .max()
        .unwrap_or(0);
    let server_key = (!keys.is_empty()).then(|| keys.join(", "));
    let server_text = match (&server_key, reused) {
        (Some(k), true) => format!(
            "{k}, reused ({cells_before} cell{} before)",
            if cells_before == 1 { "" } else { "s" }
        ),
        (Some(k), false) => format!("{k}, started"),
        (None, true) => fingerprint_reuse.unwrap_or_else(|| "reused".into()),
        (None, false) if !logged.servers.is_empty() => "started (not shared)".into(),
        (None, false) => dash(),
    };
    let short = if logged.matrix.is_empty() {
        logged.display.clone()
    } else {
        logged
            .matrix
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    CampaignCell {
        label: logged.display.clone(),
        short,
        matrix: logged.matrix.clone(),
        values: dimensions
            .iter()
            .map(|d| logged.matrix.get(d).cloned().unwrap_or_default())
            .collect(),
        status: status.into(),
        cause,
        server_key,
        reused,
        cells_before,
        server_text,
        load_s: reuse::load_seconds(logged),
        load_text: reuse::load_seconds(logged).map_or_else(dash, |s| format!("{s:.1} s")),
        throughput: throughput_value,
        throughput_text: throughput_value.map_or_else(dash, |v| format_value(v, &throughput.unit)),
        latency: latency_value,
        latency_text: latency_value.map_or_else(dash, |v| format_value(v, &latency.unit)),
        metrics: metrics.iter().filter_map(|m| cell_metric(m)).collect(),
        best: false,
        pareto: false,
    }
}

/// A cell's statuses, best first.
const STATUSES: [&str; 6] = [
    "ok",
    "infeasible",
    "failed",
    "skipped",
    "cancelled",
    "unfinished",
];

/// The status word and, when not `ok`, why in one line.
fn status(cell: &LoggedCell, searched: bool) -> (&'static str, Option<String>) {
    let cause = cell.reason.as_deref().map(short_cause);
    match cell.result {
        Some(JobResult::Success) => ("ok", None),
        Some(JobResult::Failure) if searched => ("infeasible", cause),
        Some(JobResult::Failure) => ("failed", cause),
        Some(JobResult::Skipped) => ("skipped", cause),
        Some(JobResult::Cancelled) => ("cancelled", cause),
        None => ("unfinished", cause),
    }
}

/// A failure message in one line: the cause a step recognised (`cause: CUDA out of memory:
/// `…``), else its first line; at most 120 characters. As a search's log line says it.
pub fn short_cause(text: &str) -> String {
    let line = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("cause: "))
        .map(|cause| cause.split(": `").next().unwrap_or(cause))
        .unwrap_or_else(|| text.lines().next().unwrap_or(""));
    match line.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// `p99` of the metric's samples; `mean` its mean.
fn percentile(metric: &StoredMetric, statistic: &str) -> Option<f64> {
    let p: f64 = statistic.strip_prefix('p')?.parse().ok()?;
    let mut sorted: Vec<f64> = metric
        .samples
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    Some(quantile(&sorted, p / 100.0))
}

fn cell_metric(m: &StoredMetric) -> Option<CellMetric> {
    let summary = m.summary?;
    let ci = mean_confidence_interval(&m.samples, 0.95);
    let text = match ci {
        Some(i) => format!(
            "{} [{}, {}]",
            format_value(summary.mean, &m.unit),
            format_value(i.low, ""),
            format_value(i.high, "")
        ),
        None => format_value(summary.mean, &m.unit),
    };
    Some(CellMetric {
        name: m.name.clone(),
        unit: m.unit.clone(),
        n: summary.n,
        mean: summary.mean,
        ci_low: ci.map(|i| i.low),
        ci_high: ci.map(|i| i.high),
        text,
    })
}

/// Each search's boundary cell; without a search, the `ok` cell best by the throughput metric
/// (in its direction). Marks them in `cells`.
fn best_configs(
    log: &CampaignLog,
    cells: &mut [CampaignCell],
    results: &[StoredResult],
    throughput: &Axis,
) -> Vec<BestConfig> {
    let mut best: Vec<(usize, String)> = log
        .searches
        .iter()
        .filter_map(|s| search_best(log, s).map(|i| (i, s.text.clone())))
        .collect();
    if log.searches.is_empty() {
        let lower = all_metrics(results)
            .find(|m| m.name == throughput.metric)
            .is_some_and(|m| m.direction == Direction::Lower);
        let candidates = cells
            .iter()
            .enumerate()
            .filter(|(_, c)| c.status == "ok")
            .filter_map(|(i, c)| c.throughput.map(|v| (i, v)));
        let top = if lower {
            candidates.min_by(|a, b| a.1.total_cmp(&b.1))
        } else {
            candidates.max_by(|a, b| a.1.total_cmp(&b.1))
        };
        if let Some((i, _)) = top {
            let which = if lower { "lowest" } else { "highest" };
            best.push((i, format!("the {which} {}", throughput.label)));
        }
    }
    best.into_iter()
        .map(|(i, how)| {
            let c = &mut cells[i];
            c.best = true;
            BestConfig {
                label: c.label.clone(),
                matrix: c.matrix.clone(),
                how,
                throughput_text: c.throughput_text.clone(),
                latency_text: c.latency_text.clone(),
            }
        })
        .collect()
}

/// The cell a search's closing line names: a bisect's (`… that succeeds is 70 (…)`) is the
/// `ok` cell with that value of the searched dimension, its other values those of the probe
/// that said it; a maximize/minimize search's names it (`the best is tune (4) with …`). A
/// round's line (`… → keeps …`) names none.
fn search_best(log: &CampaignLog, end: &SearchEnd) -> Option<usize> {
    // A maximize/minimize search names its best cell: `… → the best is tune (4) with `x` 9`.
    if let Some((_, after)) = end.text.rsplit_once("→ the best is ") {
        let (name, _) = after.split_once(" with `")?;
        return log
            .cells
            .iter()
            .position(|c| c.display == name && c.result == Some(JobResult::Success));
    }
    let dimension = end.text.strip_prefix("bisect of `")?.split('`').next()?;
    let (_, after) = end.text.rsplit_once("that succeeds is ")?;
    let value = after.rsplit_once(" (").map_or(after, |(v, _)| v);
    let said_by = log.cells.iter().find(|c| c.cell == end.cell)?;
    log.cells.iter().position(|c| {
        c.result == Some(JobResult::Success)
            && c.matrix.get(dimension).map(String::as_str) == Some(value)
            && c.matrix
                .iter()
                .filter(|(k, _)| k.as_str() != dimension)
                .all(|(k, v)| said_by.matrix.get(k) == Some(v))
    })
}

fn pareto_data(cells: &mut [CampaignCell], throughput: &Axis, latency: &Axis) -> ParetoData {
    let measured: Vec<usize> = (0..cells.len())
        .filter(|&i| {
            cells[i].status == "ok" && cells[i].throughput.is_some() && cells[i].latency.is_some()
        })
        .collect();
    let points: Vec<Point> = measured
        .iter()
        .map(|&i| Point {
            label: cells[i].short.clone(),
            latency: cells[i].latency.unwrap_or_default(),
            throughput: cells[i].throughput.unwrap_or_default(),
            best: cells[i].best,
        })
        .collect();
    let on = pareto::front(&points);
    let mut front: Vec<(f64, String)> = Vec::new();
    for (&i, &is_front) in measured.iter().zip(&on) {
        cells[i].pareto = is_front;
        if is_front {
            front.push((cells[i].latency.unwrap_or_default(), cells[i].label.clone()));
        }
    }
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    let axes = Axes {
        latency: &latency.label,
        latency_unit: &latency.unit,
        throughput: &throughput.label,
        throughput_unit: &throughput.unit,
    };
    ParetoData {
        svg: pareto::chart(&points, &on, &axes),
        file: "pareto.svg".into(),
        front: front.into_iter().map(|(_, l)| l).collect(),
    }
}

fn metric_rows(cells: &[CampaignCell]) -> Vec<MetricRow> {
    let mut names: Vec<&str> = Vec::new();
    for m in cells.iter().flat_map(|c| &c.metrics) {
        if !names.contains(&m.name.as_str()) {
            names.push(&m.name);
        }
    }
    names
        .into_iter()
        .map(|name| MetricRow {
            metric: name.to_string(),
            values: cells
                .iter()
                .filter(|c| !c.metrics.is_empty())
                .map(|c| {
                    c.metrics
                        .iter()
                        .find(|m| m.name == name)
                        .map_or_else(|| "—".to_string(), |m| m.text.clone())
                })
                .collect(),
        })
        .collect()
}
