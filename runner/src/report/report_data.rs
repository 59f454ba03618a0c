//! [`ReportData`]: everything a report template can show about one run, gathered from the
//! results store (results, comparisons, history) and the run's log folder. It is the template
//! context: its field names are the variables docs/reports.md lists, so renaming one breaks
//! users' templates.
//!
//! This module decides nothing about verdicts (that is [`crate::compare`]) and knows nothing of
//! Tera or git.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::chart;
use super::run_log::{FailureExcerpt, failure_excerpt};
use crate::compare::{Comparison, StepInputs, compare_result, format_value};
use crate::store::{
    Fingerprint, HistoryPoint, HistoryQuery, ResultStore, StoreError, StoredResult,
};

/// How many past points a history chart shows.
const HISTORY_POINTS: usize = 50;

/// The template context of one run's report. It reads back from JSON so that a run's
/// `report` step can mask all its text at once before it is rendered.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReportData {
    pub title: String,
    pub run_id: String,
    pub workflow: String,
    /// The most alarming verdict of any metric, or `no-baseline` when nothing was compared.
    pub verdict: String,
    /// `success` unless a step that recorded results failed or the run's log says it failed.
    pub status: String,
    /// How many metrics got each verdict (`{"regression": 1, "unchanged": 3}`).
    pub verdict_counts: BTreeMap<String, usize>,
    /// When the report was made, RFC 3339 UTC.
    pub generated_at: String,
    pub git: GitData,
    /// The run's log folder, relative to the repository (`.gpuflow/runs/<id>/`).
    pub log_dir: String,
    /// One per recorded step result (a matrix cell's benchmark step).
    pub cells: Vec<CellData>,
    /// The cells side by side: one row per metric, one column per cell.
    pub matrix: MatrixTable,
    /// The failing server's last log lines when the run failed.
    pub failure: Option<FailureExcerpt>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GitData {
    pub commit: Option<String>,
    pub short_commit: Option<String>,
    pub ref_name: Option<String>,
    pub dirty: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CellData {
    /// `bench (allreduce=nccl)`: the job and its matrix values.
    pub label: String,
    /// A file-name-safe form of the label, for chart files.
    pub slug: String,
    pub job: String,
    pub step: String,
    pub matrix: BTreeMap<String, String>,
    pub status: String,
    pub verdict: String,
    pub series_key: String,
    /// The identity fields (what makes results comparable), as `field: value`.
    pub environment: Vec<Field>,
    /// Recorded but not compared: host name, GPU UUIDs, clocks…
    pub info: Vec<Field>,
    /// What changed since the baseline, per identity field.
    pub differences: Vec<Difference>,
    pub metrics: Vec<MetricRow>,
    /// Set when the comparison itself could not be made (a pinned baseline that is gone).
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Field {
    pub field: String,
    pub value: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Difference {
    pub field: String,
    pub baseline: String,
    pub current: String,
    pub description: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MetricRow {
    pub name: String,
    pub unit: String,
    pub direction: String,
    pub verdict: String,
    pub current: Option<f64>,
    pub baseline: Option<f64>,
    /// Numbers as the terminal shows them (`38.0 tok/s`), or `—`.
    pub current_text: String,
    pub baseline_text: String,
    pub change_text: String,
    pub ratio_text: String,
    pub threshold_text: String,
    pub p_text: String,
    pub change_pct: Option<f64>,
    pub ratio: Option<f64>,
    pub threshold_pct: f64,
    pub p_value: Option<f64>,
    pub test: Option<String>,
    pub baseline_description: String,
    pub explanation: String,
    /// The `compare-to-baseline` step whose verdict this is; `None`: no step of the run
    /// judged the metric, and the report compared it with the step's defaults.
    pub judged_by: Option<String>,
    /// The verdict counts toward the run's: a step judged it, or no step of the run judged any.
    pub counted: bool,
    /// The charts as SVG documents (inlined by the HTML template) and the file names the
    /// Markdown template links to (written beside the report).
    pub chart_compare_svg: String,
    pub chart_history_svg: String,
    pub chart_compare_file: String,
    pub chart_history_file: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MatrixTable {
    pub columns: Vec<String>,
    pub rows: Vec<MatrixRow>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MatrixRow {
    pub metric: String,
    /// One per column; `—` where that cell did not measure the metric.
    pub values: Vec<String>,
}

/// Where the report's data comes from.
pub struct ReportSource<'a> {
    pub store: &'a ResultStore,
    pub run_id: &'a str,
    /// The run's log folder (`.gpuflow/runs/<id>`), when it is on this machine.
    pub run_dir: Option<&'a Path>,
    /// How each result is compared: the `compare-to-baseline` defaults unless the workflow said
    /// otherwise. `metrics` empty means every metric the result has.
    pub compare: StepInputs,
    pub title: Option<String>,
    /// Unix milliseconds to stamp the report with.
    pub now_ms: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("no results recorded for run `{run_id}`")]
    NoResults {
        run_id: String,
        suggestion: Option<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ReportError {
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NoResults { suggestion, .. } => suggestion
                .clone()
                .or_else(|| Some("a run's id is the folder name under `.gpuflow/runs/`".into())),
            Self::Store(e) => e.hint(),
        }
    }
}

impl ReportData {
    /// Gathers the report of `source.run_id`: every recorded result, each compared against its
    /// baseline, with history charts and the failing server's log.
    pub fn gather(source: &ReportSource<'_>) -> Result<Self, ReportError> {
        let results = source.store.run_results(source.run_id)?;
        if results.is_empty() {
            let suggestion = match source.store.check_run(source.run_id) {
                Err(e) => e.hint(),
                Ok(()) => None,
            };
            return Err(ReportError::NoResults {
                run_id: source.run_id.to_string(),
                suggestion,
            });
        }
        let first = &results[0];
        let mut cells: Vec<CellData> = Vec::with_capacity(results.len());
        let mut cache = ResultCache {
            cells: results.len(),
            ..ResultCache::default()
        };
        for result in &results {
            cells.push(cell(source, result, &mut cache)?);
        }
        // When the run's steps judged metrics, their verdicts are the run's, and a metric
        // only the report compared (with its defaults) is shown but does not count.
        let judged = cells
            .iter()
            .flat_map(|c| &c.metrics)
            .any(|m| m.judged_by.is_some());
        for m in cells.iter_mut().flat_map(|c| &mut c.metrics) {
            m.counted = !judged || m.judged_by.is_some();
        }
        let failure = source.run_dir.and_then(failure_excerpt);
        let failed = failure.is_some() || cells.iter().any(|c| c.status != "success");
        let mut verdict_counts = BTreeMap::new();
        for m in cells.iter().flat_map(|c| &c.metrics).filter(|m| m.counted) {
            *verdict_counts.entry(m.verdict.clone()).or_insert(0) += 1;
        }
        let verdict = if judged {
            overall(
                cells
                    .iter()
                    .flat_map(|c| &c.metrics)
                    .filter(|m| m.counted)
                    .map(|m| m.verdict.as_str()),
            )
        } else {
            overall(cells.iter().map(|c| c.verdict.as_str()))
        };
        Ok(Self {
            title: source
                .title
                .clone()
                .unwrap_or_else(|| format!("{}: {}", first.workflow, source.run_id)),
            run_id: source.run_id.to_string(),
            workflow: first.workflow.clone(),
            verdict,
            status: if failed { "failure" } else { "success" }.into(),
            verdict_counts,
            generated_at: rfc3339(source.now_ms),
            git: GitData {
                short_commit: first
                    .git
                    .commit
                    .as_ref()
                    .map(|c| c.chars().take(10).collect()),
                commit: first.git.commit.clone(),
                ref_name: first.git.ref_name.clone(),
                dirty: first.git.dirty,
            },
            log_dir: format!(".gpuflow/runs/{}/", source.run_id),
            matrix: matrix_table(&cells),
            cells,
            failure,
        })
    }
}

impl ReportData {
    /// A report with no cells, for template tests.
    #[cfg(test)]
    pub(crate) fn empty_for_tests(run_id: &str) -> Self {
        Self {
            title: format!("w: {run_id}"),
            run_id: run_id.into(),
            workflow: "w".into(),
            verdict: "no-baseline".into(),
            status: "success".into(),
            verdict_counts: BTreeMap::new(),
            generated_at: rfc3339(0),
            git: GitData {
                commit: None,
                short_commit: None,
                ref_name: None,
                dirty: false,
            },
            log_dir: format!(".gpuflow/runs/{run_id}/"),
            cells: Vec::new(),
            matrix: MatrixTable {
                columns: Vec::new(),
                rows: Vec::new(),
            },
            failure: None,
        }
    }
}

/// The most alarming of several verdicts, as [`crate::compare::StepReport::overall_verdict`]
/// ranks them.
fn overall<'a>(verdicts: impl Iterator<Item = &'a str>) -> String {
    verdicts
        .filter_map(alarm_rank)
        .min()
        .map_or("no-baseline", |i| ALARM_ORDER[i])
        .to_string()
}

/// Verdicts from the most alarming down.
const ALARM_ORDER: [&str; 6] = [
    "regression",
    "incomparable",
    "inconclusive",
    "no-baseline",
    "improvement",
    "unchanged",
];

fn alarm_rank(verdict: &str) -> Option<usize> {
    ALARM_ORDER.iter().position(|o| *o == verdict)
}

fn cell(
    source: &ReportSource<'_>,
    result: &StoredResult,
    cache: &mut ResultCache,
) -> Result<CellData, ReportError> {
    let mut inputs = source.compare.clone();
    if inputs.metrics.is_empty() {
        inputs.metrics = result.metrics.iter().map(|m| m.name.clone()).collect();
    }
    let label = cell_label(result);
    let slug = crate::run_logs::slug(&format!("{label}-{}", result.step));
    let judged = step_verdicts(source.store, result)?;
    // The metrics no step judged are compared as `compare-to-baseline` does with its defaults.
    inputs.metrics.retain(|m| !judged.contains_key(m));
    let (mut comparisons, error) = if inputs.metrics.is_empty() {
        (Vec::new(), None)
    } else {
        match compare_result(source.store, result, &inputs) {
            Ok(report) => (report.comparisons, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        }
    };
    comparisons.extend(judged.values().map(|(_, c)| c.clone()));
    // In the order the result has its metrics, whoever judged them.
    comparisons.sort_by_key(|c| {
        result
            .metrics
            .iter()
            .position(|m| m.name == c.metric)
            .unwrap_or(usize::MAX)
    });
    let mut metrics = Vec::with_capacity(comparisons.len());
    let mut differences = Vec::new();
    for c in &comparisons {
        for d in &c.differences {
            if !differences.iter().any(|x: &Difference| x.field == d.field) {
                differences.push(Difference {
                    field: d.field.clone(),
                    baseline: d.baseline.clone(),
                    current: d.current.clone(),
                    description: d.describe(),
                });
            }
        }
        let mut row = metric_row(source, result, c, &slug, cache)?;
        row.judged_by = judged.get(&c.metric).map(|(step, _)| step.clone());
        metrics.push(row);
    }
    // A cell some step judged has that step's verdict; one no step judged, the report's.
    let verdict = if comparisons.is_empty() {
        "no-baseline".to_string()
    } else if judged.is_empty() {
        overall(comparisons.iter().map(|c| c.verdict.as_str()))
    } else {
        overall(judged.values().map(|(_, c)| c.verdict.as_str()))
    };
    Ok(CellData {
        label,
        slug,
        job: result.job.clone(),
        step: result.step.clone(),
        matrix: result.matrix.clone(),
        status: result.status.as_str().into(),
        verdict,
        series_key: result.series_key.short().to_string(),
        environment: fields(&result.fingerprint.identity),
        info: fields(&result.fingerprint.info),
        differences,
        metrics,
        error,
    })
}

/// What the run's `compare-to-baseline` steps decided about `result`, by metric: the judging
/// step's name and its comparison. Of several steps judging one metric, the most alarming
/// verdict (the latest of equals) speaks, as it does for the run. A judgement that does not
/// read back (written by another gpuflow) is left out.
fn step_verdicts(
    store: &ResultStore,
    result: &StoredResult,
) -> Result<BTreeMap<String, (String, Comparison)>, ReportError> {
    let mut by_metric: BTreeMap<String, (String, Comparison)> = BTreeMap::new();
    for j in store.judgements(result.id)? {
        let Ok(c) = serde_json::from_str::<Comparison>(&j.comparison) else {
            continue;
        };
        let rank = |v: &str| alarm_rank(v).unwrap_or(usize::MAX);
        let replaces = by_metric
            .get(&j.metric)
            .is_none_or(|(_, old)| rank(c.verdict.as_str()) <= rank(old.verdict.as_str()));
        if replaces {
            by_metric.insert(j.metric.clone(), (j.step.clone(), c));
        }
    }
    Ok(by_metric)
}

/// What drawing the history charts reads, shared by every cell and metric of the report: each
/// metric's history is one query for all cells (it is the slow query on a large store), and
/// each past result is read once.
#[derive(Default)]
struct ResultCache {
    /// How many cells the report has: a metric's history is fetched for all of them at once.
    cells: usize,
    history: HashMap<String, Vec<HistoryPoint>>,
    results: HashMap<i64, Option<StoredResult>>,
}

/// The metric's history for this cell (same job, step and matrix values), oldest first, and
/// per point what changed in the environment since the point before (`None`: nothing).
fn cell_history(
    source: &ReportSource<'_>,
    result: &StoredResult,
    metric: &str,
    cache: &mut ResultCache,
) -> Result<(Vec<HistoryPoint>, Vec<Option<String>>), ReportError> {
    if !cache.history.contains_key(metric) {
        let points = source.store.history(&HistoryQuery {
            metric: metric.to_string(),
            series: None,
            workflow: Some(result.workflow.clone()),
            limit: HISTORY_POINTS * cache.cells.max(1),
        })?;
        cache.history.insert(metric.to_string(), points);
    }
    let points = cache.history.get(metric).cloned().unwrap_or_default();
    let mut kept = Vec::with_capacity(points.len());
    let mut fingerprints: Vec<Fingerprint> = Vec::with_capacity(points.len());
    for p in points {
        if p.job != result.job || p.step != result.step {
            continue;
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = cache.results.entry(p.result_id) {
            slot.insert(source.store.result(p.result_id)?);
        }
        // Another matrix cell's numbers are another line, not this one's history.
        let Some(Some(past)) = cache.results.get(&p.result_id) else {
            continue;
        };
        if past.matrix != result.matrix {
            continue;
        }
        fingerprints.push(past.fingerprint.clone());
        kept.push(p);
    }
    // The newest points of this cell only (the query fetched enough for every cell).
    let skip = kept.len().saturating_sub(HISTORY_POINTS);
    kept.drain(..skip);
    fingerprints.drain(..skip);
    let mut changes = vec![None];
    for pair in fingerprints.windows(2) {
        let diffs = pair[1].identity.differences(&pair[0].identity);
        changes.push(if !diffs.is_empty() {
            let fields: Vec<&str> = diffs.iter().map(|d| d.field.as_str()).collect();
            Some(fields.join(", "))
        } else if pair[1].info != pair[0].info {
            Some("host info".to_string())
        } else {
            None
        });
    }
    changes.truncate(kept.len());
    Ok((kept, changes))
}

fn metric_row(
    source: &ReportSource<'_>,
    result: &StoredResult,
    c: &Comparison,
    slug: &str,
    cache: &mut ResultCache,
) -> Result<MetricRow, ReportError> {
    let (history, changes) = cell_history(source, result, &c.metric, cache)?;
    let dash = || "—".to_string();
    let metric_slug = crate::run_logs::slug(&c.metric);
    Ok(MetricRow {
        name: c.metric.clone(),
        unit: c.unit.clone(),
        direction: c.direction.as_str().into(),
        verdict: c.verdict.as_str().into(),
        current: c.current,
        baseline: c.baseline_value,
        current_text: c.current.map_or_else(dash, |v| format_value(v, &c.unit)),
        baseline_text: c
            .baseline_value
            .map_or_else(dash, |v| format_value(v, &c.unit)),
        change_text: c.change_pct.map_or_else(dash, |v| format!("{v:+.1}%")),
        ratio_text: c.ratio.map_or_else(dash, |v| format!("{v:.3}")),
        threshold_text: format!("±{:.1}%", c.threshold_pct),
        p_text: c.p_value.map_or_else(dash, format_p),
        change_pct: c.change_pct,
        ratio: c.ratio,
        threshold_pct: c.threshold_pct,
        p_value: c.p_value,
        test: c.test.map(|t| t.as_str().to_string()),
        baseline_description: c.baseline.clone(),
        explanation: c.explanation.clone(),
        judged_by: None,
        counted: true,
        chart_compare_svg: chart::compare(c),
        chart_history_svg: chart::history(c, &history, &changes, &result.run_id),
        chart_compare_file: format!("{slug}-{metric_slug}-compare.svg"),
        chart_history_file: format!("{slug}-{metric_slug}-history.svg"),
    })
}

fn format_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

fn cell_label(result: &StoredResult) -> String {
    if result.matrix.is_empty() {
        return result.job.clone();
    }
    let values: Vec<String> = result
        .matrix
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("{} ({})", result.job, values.join(", "))
}

/// A fingerprint part as `field: value` rows, in declaration order; empty values left out.
fn fields<T: Serialize>(value: &T) -> Vec<Field> {
    let Ok(serde_json::Value::Object(map)) = serde_json::to_value(value) else {
        return Vec::new();
    };
    map.into_iter()
        .filter_map(|(field, v)| {
            let value = match v {
                serde_json::Value::Null => return None,
                serde_json::Value::String(s) if s.is_empty() => return None,
                serde_json::Value::String(s) => s,
                serde_json::Value::Array(a) if a.is_empty() => return None,
                serde_json::Value::Array(a) => a
                    .iter()
                    .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join(" "),
                serde_json::Value::Object(o) if o.is_empty() => return None,
                serde_json::Value::Object(o) => o
                    .iter()
                    .map(|(k, x)| {
                        format!(
                            "{k}={}",
                            x.as_str().map_or_else(|| x.to_string(), str::to_string)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                other => other.to_string(),
            };
            Some(Field { field, value })
        })
        .collect()
}

fn matrix_table(cells: &[CellData]) -> MatrixTable {
    let columns: Vec<String> = cells.iter().map(|c| c.label.clone()).collect();
    let mut names: Vec<String> = Vec::new();
    for m in cells.iter().flat_map(|c| &c.metrics) {
        if !names.contains(&m.name) {
            names.push(m.name.clone());
        }
    }
    let rows = names
        .into_iter()
        .map(|metric| MatrixRow {
            values: cells
                .iter()
                .map(|c| {
                    c.metrics.iter().find(|m| m.name == metric).map_or_else(
                        || "—".to_string(),
                        |m| format!("{} ({})", m.current_text, m.verdict),
                    )
                })
                .collect(),
            metric,
        })
        .collect();
    MatrixTable { columns, rows }
}

/// Unix milliseconds as `2026-11-30T09:04:03Z` (no date library: days from the civil
/// calendar algorithm).
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case(0, "1970-01-01T00:00:00Z")]
    #[test_case(951_782_400_000, "2000-02-29T00:00:00Z")]
    #[test_case(1_796_029_443_000, "2026-11-30T09:04:03Z")]
    fn rfc3339_dates(ms: i64, want: &str) {
        assert_eq!(rfc3339(ms), want);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]
        /// Any time from year 0 to 9999 is a well-formed UTC stamp, and order is kept.
        #[test]
        fn rfc3339_is_well_formed_and_sorts_like_time(
            a in -62_167_219_200_000_i64..253_402_300_799_000,
            b in -62_167_219_200_000_i64..253_402_300_799_000,
        ) {
            let (sa, sb) = (rfc3339(a), rfc3339(b));
            proptest::prop_assert_eq!(sa.len(), 20, "{}", sa);
            proptest::prop_assert_eq!(a.div_euclid(1000).cmp(&b.div_euclid(1000)), sa.cmp(&sb));
        }
    }

    #[test]
    fn overall_takes_the_most_alarming() {
        assert_eq!(
            overall(["unchanged", "regression", "improvement"].into_iter()),
            "regression"
        );
        assert_eq!(
            overall(["unchanged", "improvement"].into_iter()),
            "improvement"
        );
        assert_eq!(overall(std::iter::empty()), "no-baseline");
    }
}
