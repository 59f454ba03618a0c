//! Two runs side by side (`/compare?a=RUN&b=RUN`): each metric of each step both recorded,
//! with its mean's 95% confidence interval and the change, and what differs in their
//! fingerprints (server flags included). Also a run's report (`/runs/ID/report`), rendered
//! from the store as `gpuflow report RUN --format html` renders it.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::app::{App, Problem, store_path, store_problem};
use super::respond::{Want, json};
use crate::stats::mean_confidence_interval;
use crate::store::{FieldDiff, ResultStore, StoredResult};

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Params {
    pub a: Option<String>,
    pub b: Option<String>,
}

/// One step's result in both runs.
#[derive(Serialize)]
struct PairView {
    job: String,
    matrix: BTreeMap<String, String>,
    step: String,
    metrics: Vec<MetricPair>,
    /// What differs in the fingerprint, b against a (`driver 580 → 590`,
    /// `server-command adds --enable-x`).
    differences: Vec<FieldDiff>,
    /// Said in words, as the comparison's messages say it.
    differences_text: Vec<String>,
    /// Where each ran, when it differs (informational, not part of the series).
    hosts: Option<(String, String)>,
    /// The server's own version on each side (`vllm 0.32.0`), when either knows it.
    server_versions: Option<(String, String)>,
    /// The image's repository digest on each side, when either has one.
    image_repo_digests: Option<(String, String)>,
}

#[derive(Serialize)]
struct MetricPair {
    name: String,
    unit: String,
    direction: String,
    a: Option<Side>,
    b: Option<Side>,
    /// (b − a) / a of the means, in percent.
    change_pct: Option<f64>,
}

#[derive(Serialize)]
struct Side {
    n: usize,
    mean: f64,
    /// The mean's 95% confidence interval; none from fewer than 2 samples.
    ci_low: Option<f64>,
    ci_high: Option<f64>,
    median: f64,
}

pub async fn page(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
    api: bool,
) -> Response {
    let want = Want::of(api, &headers);
    app.from_store(
        want,
        ("compare.html", "compare"),
        move |path| gather(path, &params),
        |_| "Compare runs".to_string(),
    )
    .await
}

/// The page's data; 404 when a named run recorded nothing.
fn gather(path: &std::path::Path, params: &Params) -> Result<serde_json::Value, Problem> {
    let store = ResultStore::open(path).map_err(store_problem)?;
    let runs: Vec<serde_json::Value> = store
        .recent_runs(200)
        .map_err(store_problem)?
        .into_iter()
        .map(|(id, workflow, t)| serde_json::json!({ "id": id, "workflow": workflow, "finished_at": t as f64 / 1000.0 }))
        .collect();
    let (Some(a), Some(b)) = (
        params.a.clone().filter(|s| !s.is_empty()),
        params.b.clone().filter(|s| !s.is_empty()),
    ) else {
        return Ok(json(
            &serde_json::json!({ "params": params, "runs": runs, "pairs": [] }),
        ));
    };
    let ra = store.run_results(&a).map_err(store_problem)?;
    let rb = store.run_results(&b).map_err(store_problem)?;
    for (id, results) in [(&a, &ra), (&b, &rb)] {
        if results.is_empty() {
            return Err(Problem::new(
                StatusCode::NOT_FOUND,
                format!("no results recorded for run `{id}`"),
                Some("the compare page lists the runs that recorded results"),
            ));
        }
    }
    let pairs = pair_up(&ra, &rb);
    Ok(json(&serde_json::json!({
        "params": params,
        "runs": runs,
        "a": a,
        "b": b,
        "pairs": pairs,
    })))
}

/// The results of `a` and `b` matched by job, matrix cell and step.
fn pair_up(a: &[StoredResult], b: &[StoredResult]) -> Vec<PairView> {
    let key = |r: &StoredResult| (r.job.clone(), r.matrix.clone(), r.step.clone());
    let mut keys: Vec<_> = a.iter().chain(b).map(key).collect();
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    keys.into_iter()
        .map(|k| {
            let ra = a.iter().find(|r| key(r) == k);
            let rb = b.iter().find(|r| key(r) == k);
            let mut names: Vec<&str> = ra
                .iter()
                .chain(rb.iter())
                .flat_map(|r| r.metrics.iter().map(|m| m.name.as_str()))
                .collect();
            let mut seen = std::collections::HashSet::new();
            names.retain(|n| seen.insert(*n));
            let metrics = names
                .into_iter()
                .map(|name| {
                    let side =
                        |r: Option<&StoredResult>| r.and_then(|r| r.metric(name)).and_then(side);
                    let (sa, sb) = (side(ra), side(rb));
                    let m = ra.or(rb).and_then(|r| r.metric(name));
                    MetricPair {
                        name: name.to_string(),
                        unit: m.map(|m| m.unit.clone()).unwrap_or_default(),
                        direction: m
                            .map(|m| m.direction.as_str().to_string())
                            .unwrap_or_default(),
                        change_pct: match (&sa, &sb) {
                            (Some(x), Some(y)) if x.mean != 0.0 => {
                                Some((y.mean - x.mean) / x.mean * 100.0)
                            }
                            _ => None,
                        },
                        a: sa,
                        b: sb,
                    }
                })
                .collect();
            let differences = match (ra, rb) {
                (Some(x), Some(y)) => y.fingerprint.identity.differences(&x.fingerprint.identity),
                _ => Vec::new(),
            };
            let hosts = match (ra, rb) {
                (Some(x), Some(y)) => {
                    let place = |r: &StoredResult| {
                        let info = &r.fingerprint.info;
                        match &info.slurm {
                            Some(s) => format!("node {} (Slurm job {})", s.node, s.job_id),
                            None => info
                                .host_name
                                .clone()
                                .unwrap_or_else(|| r.fingerprint.identity.host_label.clone()),
                        }
                    };
                    let (pa, pb) = (place(x), place(y));
                    (pa != pb).then_some((pa, pb))
                }
                _ => None,
            };
            PairView {
                server_versions: sides(ra, rb, |i| i.server_version.as_ref()),
                image_repo_digests: sides(ra, rb, |i| i.image_repo_digest.as_ref()),
                job: k.0,
                matrix: k.1,
                step: k.2,
                metrics,
                differences_text: differences.iter().map(FieldDiff::describe).collect(),
                differences,
                hosts,
            }
        })
        .collect()
}

/// An informational fingerprint field of each side, `unknown` where one lacks it; `None` when
/// neither has it.
fn sides(
    a: Option<&StoredResult>,
    b: Option<&StoredResult>,
    field: impl Fn(&crate::store::Info) -> Option<&String>,
) -> Option<(String, String)> {
    let value = |r: Option<&StoredResult>| r.and_then(|r| field(&r.fingerprint.info)).cloned();
    let (x, y) = (value(a), value(b));
    let shown = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
    (x.is_some() || y.is_some()).then(|| (shown(x), shown(y)))
}

fn side(m: &crate::store::StoredMetric) -> Option<Side> {
    let s = m.summary.as_ref()?;
    let ci = mean_confidence_interval(&m.samples, 0.95);
    Some(Side {
        n: s.n,
        mean: s.mean,
        ci_low: ci.as_ref().map(|c| c.low),
        ci_high: ci.as_ref().map(|c| c.high),
        median: s.median,
    })
}

/// The run's report, as `gpuflow report RUN --format html` makes it, masked.
pub async fn report(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    use crate::report::{Format, ReportData, ReportSource, render};
    let want = Want::of(false, &headers);
    let path = match store_path(&app) {
        Ok(path) => path,
        Err(problem) => return app.answer(problem, want),
    };
    let made = app
        .blocking(move |a| {
            let store = ResultStore::open(&path).map_err(store_problem)?;
            let row = a.sources().find(&id);
            let source = ReportSource {
                store: &store,
                run_id: &id,
                run_dir: row.as_ref().map(|r| r.log_dir.as_path()),
                compare: Default::default(),
                title: None,
                now_ms: crate::store::now_ms(),
            };
            let data = ReportData::gather(&source).map_err(|e| {
                Problem::new(StatusCode::NOT_FOUND, e.to_string(), e.hint().as_deref())
            })?;
            render(&data, Format::Html, None).map_err(Problem::internal)
        })
        .await;
    match made {
        Ok(html) => Html(app.settings.masker.mask(&html)).into_response(),
        Err(problem) => app.answer(problem, want),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Fingerprint, GitInfo, RunStatus, SeriesKey};

    fn result(run: &str, version: Option<&str>, digest: Option<&str>) -> StoredResult {
        let mut fingerprint = Fingerprint::default();
        fingerprint.info.server_version = version.map(String::from);
        fingerprint.info.image_repo_digest = digest.map(String::from);
        StoredResult {
            id: 1,
            run_id: run.into(),
            workflow: "w".into(),
            job: "bench".into(),
            matrix: BTreeMap::new(),
            step: "bench".into(),
            git: GitInfo::default(),
            started_at_ms: 0,
            finished_at_ms: 0,
            status: RunStatus::Success,
            series_key: SeriesKey("k".into()),
            fingerprint,
            metrics: Vec::new(),
        }
    }

    #[test]
    fn each_sides_server_version_and_repository_digest_are_shown() {
        let a = [result("a", Some("vllm 0.31.0"), Some("r/vllm@sha256:aa"))];
        let b = [result("b", Some("vllm 0.32.0"), None)];
        let pair = &pair_up(&a, &b)[0];
        assert_eq!(
            pair.server_versions,
            Some(("vllm 0.31.0".into(), "vllm 0.32.0".into()))
        );
        assert_eq!(
            pair.image_repo_digests,
            Some(("r/vllm@sha256:aa".into(), "unknown".into()))
        );
        let none = [result("c", None, None)];
        let pair = &pair_up(&none, &none)[0];
        assert_eq!(pair.server_versions, None);
        assert_eq!(pair.image_repo_digests, None);
    }
}
