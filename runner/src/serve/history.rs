//! The history page: a metric's series (metric × fingerprint) over time, each as an SVG
//! chart with its pinned baselines, each point's verdict and a link to its run; the same as
//! JSON. Without a metric asked for it shows the store's first (its metrics are listed to
//! choose from).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::app::{App, store_problem};
use super::respond::{Want, json};
use crate::report::chart::{escape, verdict_colour};
use crate::store::{HistoryPoint, HistoryQuery, Identity, ResultStore, SeriesKey, StoreError};

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Params {
    pub metric: Option<String>,
    /// A series key or a unique prefix of one.
    pub series: Option<String>,
    pub workflow: Option<String>,
    /// The newest this many points (default 200).
    pub limit: Option<usize>,
}

#[derive(Serialize)]
struct SeriesView {
    key: String,
    short: String,
    identity: Option<Identity>,
    unit: String,
    direction: String,
    points: Vec<PointView>,
    baselines: Vec<BaselineView>,
    #[serde(skip_serializing_if = "String::is_empty")]
    chart_svg: String,
}

#[derive(Serialize)]
struct PointView {
    result_id: i64,
    run_id: String,
    job: String,
    step: String,
    /// Unix seconds.
    finished_at: f64,
    commit: Option<String>,
    git_ref: Option<String>,
    status: String,
    n: usize,
    median: f64,
    mean: f64,
    q1: f64,
    q3: f64,
    /// What `compare-to-baseline` decided about this result's metric, when it was judged.
    verdict: Option<String>,
}

/// A pinned baseline (`gpuflow baseline set NAME RUN`) whose run has a point in the series.
#[derive(Serialize)]
struct BaselineView {
    name: String,
    run_id: String,
    median: f64,
}

const DEFAULT_LIMIT: usize = 200;

pub async fn page(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
    api: bool,
) -> Response {
    let want = Want::of(api, &headers);
    let html = want == Want::Html;
    app.from_store(
        want,
        ("history.html", "history"),
        move |path| gather(path, &params, html).map_err(store_problem),
        |data| match data["metric"].as_str() {
            Some(metric) => format!("History · {metric}"),
            None => "History".to_string(),
        },
    )
    .await
}

fn gather(
    path: &std::path::Path,
    params: &Params,
    with_charts: bool,
) -> Result<serde_json::Value, StoreError> {
    let store = ResultStore::open(path)?;
    let metrics = store.metric_names()?;
    // Without one asked for, the first metric: the page opens on a chart, not a form.
    let asked = params.metric.clone().filter(|m| !m.is_empty());
    let Some(metric) = asked.or_else(|| metrics.first().cloned()) else {
        return Ok(json(
            &serde_json::json!({ "params": params, "metrics": metrics, "series": [] }),
        ));
    };
    let points = store.history(&HistoryQuery {
        metric: metric.clone(),
        series: params.series.clone().filter(|s| !s.is_empty()),
        workflow: params.workflow.clone().filter(|w| !w.is_empty()),
        limit: params.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, 100_000),
    })?;
    let ids: Vec<i64> = points.iter().map(|p| p.result_id).collect();
    let verdicts = store.verdicts(&metric, &ids)?;
    let pins = store.baselines()?;
    let mut by_series: BTreeMap<SeriesKey, Vec<&HistoryPoint>> = BTreeMap::new();
    for p in &points {
        by_series.entry(p.series_key.clone()).or_default().push(p);
    }
    let mut series = Vec::new();
    for (key, points) in by_series {
        let first = points[0];
        let views: Vec<PointView> = points
            .iter()
            .map(|p| PointView {
                result_id: p.result_id,
                run_id: p.run_id.clone(),
                job: p.job.clone(),
                step: p.step.clone(),
                finished_at: p.finished_at_ms as f64 / 1000.0,
                commit: p.git_commit.clone(),
                git_ref: p.git_ref.clone(),
                status: p.status.clone(),
                n: p.summary.n,
                median: p.summary.median,
                mean: p.summary.mean,
                q1: p.summary.q1,
                q3: p.summary.q3,
                verdict: verdicts.get(&p.result_id).cloned(),
            })
            .collect();
        let baselines: Vec<BaselineView> = pins
            .iter()
            .filter(|b| b.metric.as_deref().is_none_or(|m| m == metric))
            .filter_map(|b| {
                let at = views.iter().rev().find(|p| p.run_id == b.run_id)?;
                Some(BaselineView {
                    name: b.name.clone(),
                    run_id: b.run_id.clone(),
                    median: at.median,
                })
            })
            .collect();
        let mut view = SeriesView {
            short: key.short().to_string(),
            identity: store.series_identity(&key)?,
            key: key.0.clone(),
            unit: first.unit.clone(),
            direction: first.direction.as_str().to_string(),
            points: views,
            baselines,
            chart_svg: String::new(),
        };
        if with_charts {
            view.chart_svg = chart(&metric, &view);
        }
        series.push(view);
    }
    Ok(json(&serde_json::json!({
        "params": params,
        "metric": metric,
        "metrics": metrics,
        "series": series,
    })))
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 110.0;
const TOP: f64 = 24.0;
const BOTTOM: f64 = 36.0;

/// The series' medians over time (whiskers from the first to the third quartile), each
/// point coloured by its verdict and linked to its run; pinned baselines as dashed lines.
fn chart(metric: &str, s: &SeriesView) -> String {
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="history" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{} history">"#,
        escape(metric)
    );
    let scale = Scale::of(s);
    let (x, y) = (|t| scale.x(t), |v| scale.y(v));
    axes(&mut svg, &scale, metric, s);
    for b in &s.baselines {
        let _ = write!(
            svg,
            r##"<line class="baseline" x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#8c96a5" stroke-dasharray="5,4"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#52606d">baseline {}</text>"##,
            WIDTH - RIGHT,
            y(b.median),
            y(b.median),
            WIDTH - RIGHT + 4.0,
            y(b.median) + 4.0,
            escape(&b.name)
        );
    }
    let path: Vec<String> = s
        .points
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.finished_at), y(p.median)))
        .collect();
    let _ = write!(
        svg,
        r##"<polyline points="{}" fill="none" stroke="#2b6cb0" stroke-width="1.5"/>"##,
        path.join(" ")
    );
    for p in &s.points {
        let (px, py) = (x(p.finished_at), y(p.median));
        let verdict = p.verdict.as_deref().unwrap_or("not judged");
        let colour = if p.verdict.is_some() {
            verdict_colour(verdict)
        } else {
            "#2b6cb0"
        };
        let commit = p.commit.as_deref().map_or("-", |c| &c[..c.len().min(10)]);
        let _ = write!(
            svg,
            r##"<a href="/runs/{}"><line x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{:.1}" stroke="{colour}" stroke-opacity="0.5"/><circle class="point v-{}" cx="{px:.1}" cy="{py:.1}" r="4.5" fill="{colour}"><title>{}: {} (median of {}) · {} · commit {} on {} · run {}</title></circle></a>"##,
            escape(&p.run_id),
            y(p.q1),
            y(p.q3),
            escape(verdict),
            escape(metric),
            escape(&crate::compare::format_value(p.median, &s.unit)),
            p.n,
            escape(verdict),
            escape(commit),
            escape(p.git_ref.as_deref().unwrap_or("-")),
            escape(&p.run_id)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Where a series' times and values fall on the chart.
struct Scale {
    t0: f64,
    t1: f64,
    lo: f64,
    hi: f64,
}

impl Scale {
    fn of(s: &SeriesView) -> Self {
        let (t0, t1) = s.points.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
            (a.min(p.finished_at), b.max(p.finished_at))
        });
        let baselines = || s.baselines.iter().map(|b| b.median);
        let lo = s
            .points
            .iter()
            .map(|p| p.q1)
            .chain(baselines())
            .fold(f64::MAX, f64::min);
        let hi = s
            .points
            .iter()
            .map(|p| p.q3)
            .chain(baselines())
            .fold(f64::MIN, f64::max);
        // A flat series is drawn as flat: a few percent of the value either side, not its
        // noise stretched over the whole height.
        let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.02).max(1e-9);
        Self {
            t0,
            t1,
            lo: lo - pad,
            hi: hi + pad,
        }
    }

    fn x(&self, t: f64) -> f64 {
        if self.t1 > self.t0 {
            LEFT + (t - self.t0) / (self.t1 - self.t0) * (WIDTH - LEFT - RIGHT)
        } else {
            LEFT + (WIDTH - LEFT - RIGHT) / 2.0
        }
    }

    fn y(&self, v: f64) -> f64 {
        TOP + (self.hi - v) / (self.hi - self.lo) * (HEIGHT - TOP - BOTTOM)
    }
}

/// The axes, their labels (values; the first and last time) and the title.
fn axes(svg: &mut String, scale: &Scale, metric: &str, s: &SeriesView) {
    let (x, y) = (|t| scale.x(t), |v| scale.y(v));
    let (lo, hi, t0, t1) = (scale.lo, scale.hi, scale.t0, scale.t1);
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#cbd2d9"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#cbd2d9"/>"##,
        HEIGHT - BOTTOM,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT,
        HEIGHT - BOTTOM
    );
    for v in [lo, (lo + hi) / 2.0, hi] {
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#52606d">{}</text>"##,
            LEFT - 6.0,
            y(v) + 4.0,
            escape(&crate::compare::format_value(v, ""))
        );
    }
    // One moment (a single point, or results finished in the same second) is one label,
    // centred under it: a first and a last label would print over each other.
    let labels: &[(f64, &str)] = if t1 > t0 {
        &[(t0, "start"), (t1, "end")]
    } else {
        &[(t0, "middle")]
    };
    for &(t, anchor) in labels {
        let day = crate::report::rfc3339((t * 1000.0) as i64);
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="{anchor}" fill="#52606d">{}</text>"##,
            x(t),
            HEIGHT - BOTTOM + 16.0,
            escape(&day.replacen('T', " ", 1).replace('Z', " UTC"))
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{LEFT}" y="14" font-size="12" fill="#1f2933">{} ({}, {} is better)</text>"##,
        escape(metric),
        escape(&s.unit),
        escape(&s.direction)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(finished_at: f64, median: f64) -> PointView {
        PointView {
            result_id: 1,
            run_id: "r".into(),
            job: "j".into(),
            step: "s".into(),
            finished_at,
            commit: None,
            git_ref: None,
            status: "success".into(),
            n: 3,
            median,
            mean: median,
            q1: median - 1.0,
            q3: median + 1.0,
            verdict: None,
        }
    }

    fn series(points: Vec<PointView>) -> SeriesView {
        SeriesView {
            key: "k".into(),
            short: "k".into(),
            identity: None,
            unit: "tok/s".into(),
            direction: "higher".into(),
            points,
            baselines: Vec::new(),
            chart_svg: String::new(),
        }
    }

    /// The time labels under the chart.
    fn time_labels(svg: &str) -> Vec<&str> {
        svg.split("<text ")
            .filter(|t| t.contains(" UTC<"))
            .collect()
    }

    #[test]
    fn one_point_has_one_time_label_and_two_have_a_first_and_a_last() {
        let one = chart("output_tok_s", &series(vec![point(1.8e9, 100.0)]));
        let labels = time_labels(&one);
        assert_eq!(labels.len(), 1, "{one}");
        assert!(labels[0].contains(r#"text-anchor="middle""#), "{one}");
        let two = chart(
            "output_tok_s",
            &series(vec![point(1.8e9, 100.0), point(1.8e9 + 86400.0, 110.0)]),
        );
        assert_eq!(time_labels(&two).len(), 2, "{two}");
    }
}
