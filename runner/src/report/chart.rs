//! The report's charts as standalone SVG documents: current against baseline for one metric,
//! and the metric's history with the threshold band and markers where the environment changed.
//!
//! Hand-made SVG rather than `plotters`: plotters draws text through its own font rasteriser
//! (`ttf` → font-kit → fontconfig and freetype, system libraries CI would need), and without
//! it draws no text at all. SVG `<text>` lets the browser or viewer lay out the labels, and the
//! two charts need only rectangles, lines and circles.
//!
//! This module draws numbers it is given; it decides nothing.

use std::fmt::Write;

use crate::compare::{Comparison, format_value};
use crate::store::HistoryPoint;

const WIDTH: f64 = 640.0;
const COMPARE_HEIGHT: f64 = 150.0;
const HISTORY_HEIGHT: f64 = 240.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 24.0;

const BASELINE_COLOUR: &str = "#8c96a5";
const BAND_COLOUR: &str = "#cfe3f7";
const LINE_COLOUR: &str = "#2b6cb0";
const MARKER_COLOUR: &str = "#d97706";

/// The fill that says how a metric did.
pub fn verdict_colour(verdict: &str) -> &'static str {
    match verdict {
        "regression" => "#c53030",
        "improvement" => "#2f855a",
        "unchanged" => "#2b6cb0",
        "incomparable" => "#b7791f",
        _ => "#718096",
    }
}

/// Current against baseline as two bars, the baseline's threshold band shaded behind them.
pub fn compare(c: &Comparison) -> String {
    let mut svg = open(
        COMPARE_HEIGHT,
        &format!("{}: current vs baseline", c.metric),
    );
    let values: Vec<f64> = [c.current, c.baseline_value]
        .into_iter()
        .flatten()
        .collect();
    let band = c.baseline_value.map(|b| {
        (
            b * (1.0 - c.threshold_pct / 100.0),
            b * (1.0 + c.threshold_pct / 100.0),
        )
    });
    let max = values
        .iter()
        .copied()
        .chain(band.map(|(_, hi)| hi))
        .fold(0.0_f64, f64::max);
    if max <= 0.0 || !max.is_finite() {
        empty_note(&mut svg, COMPARE_HEIGHT, "no numbers to draw");
        return close(svg);
    }
    // Room on the right for the longest bar's value label.
    let plot_w = WIDTH - LEFT - RIGHT - 90.0;
    let x = |v: f64| LEFT + (v / max).clamp(0.0, 1.0) * plot_w;
    if let Some((lo, hi)) = band {
        let _ = write!(
            svg,
            r#"<rect class="band" x="{:.1}" y="20" width="{:.1}" height="{:.1}" fill="{BAND_COLOUR}"/>"#,
            x(lo),
            (x(hi) - x(lo)).max(1.0),
            COMPARE_HEIGHT - 50.0
        );
    }
    let rows = [
        ("baseline", c.baseline_value, BASELINE_COLOUR),
        ("current", c.current, verdict_colour(c.verdict.as_str())),
    ];
    for (i, (label, value, colour)) in rows.into_iter().enumerate() {
        let y = 32.0 + i as f64 * 44.0;
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="13">{label}</text>"#,
            LEFT - 8.0,
            y + 18.0
        );
        match value {
            Some(v) => {
                let _ = write!(
                    svg,
                    r#"<rect class="bar" x="{LEFT}" y="{y:.1}" width="{:.1}" height="28" fill="{colour}"/><text x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
                    (x(v) - LEFT).max(1.0),
                    x(v) + 6.0,
                    y + 18.0,
                    escape(&format_value(v, &c.unit))
                );
            }
            None => {
                let _ = write!(
                    svg,
                    r##"<text x="{LEFT}" y="{:.1}" font-size="12" fill="#718096">none</text>"##,
                    y + 18.0
                );
            }
        }
    }
    let _ = write!(
        svg,
        r##"<text x="{LEFT}" y="{:.1}" font-size="11" fill="#4a5568">shaded: baseline ±{:.1}% ({})</text>"##,
        COMPARE_HEIGHT - 10.0,
        c.threshold_pct,
        escape(c.verdict.as_str())
    );
    close(svg)
}

/// The values the history chart's height spans: every median and the band, with a margin.
fn shown_range(points: &[HistoryPoint], band: Option<(f64, f64)>) -> (f64, f64) {
    let (mut lo, mut hi) = points.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.summary.median), hi.max(p.summary.median))
    });
    if let Some((blo, bhi)) = band {
        lo = lo.min(blo);
        hi = hi.max(bhi);
    }
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.01).max(1e-9);
    (lo - pad, hi + pad)
}

/// The metric's median per past result, oldest to newest, with the baseline's threshold band,
/// a dashed marker before each point whose environment changed (`changes[i]` names what
/// changed since point `i - 1`), and the current run ringed.
pub fn history(
    c: &Comparison,
    points: &[HistoryPoint],
    changes: &[Option<String>],
    current_run: &str,
) -> String {
    let mut svg = open(HISTORY_HEIGHT, &format!("{}: history", c.metric));
    if points.is_empty() {
        empty_note(&mut svg, HISTORY_HEIGHT, "no history yet");
        return close(svg);
    }
    let band = c.baseline_value.map(|b| {
        (
            b * (1.0 - c.threshold_pct / 100.0),
            b * (1.0 + c.threshold_pct / 100.0),
        )
    });
    let (lo, hi) = shown_range(points, band);
    let top = 20.0;
    let bottom = HISTORY_HEIGHT - 40.0;
    let plot_w = WIDTH - LEFT - RIGHT;
    let x = |i: usize| {
        if points.len() == 1 {
            LEFT + plot_w / 2.0
        } else {
            LEFT + i as f64 / (points.len() - 1) as f64 * plot_w
        }
    };
    let y = |v: f64| bottom - (v - lo) / (hi - lo) * (bottom - top);
    // Axes and the two bounds' labels.
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="{top}" x2="{LEFT}" y2="{bottom}" stroke="#a0aec0"/><line x1="{LEFT}" y1="{bottom}" x2="{:.1}" y2="{bottom}" stroke="#a0aec0"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"##,
        WIDTH - RIGHT,
        LEFT - 6.0,
        top + 10.0,
        escape(&format_value(hi, &c.unit)),
        LEFT - 6.0,
        bottom,
        escape(&format_value(lo, &c.unit)),
    );
    if let Some((blo, bhi)) = band {
        let _ = write!(
            svg,
            r#"<rect class="band" x="{LEFT}" y="{:.1}" width="{plot_w:.1}" height="{:.1}" fill="{BAND_COLOUR}" fill-opacity="0.7"/>"#,
            y(bhi),
            (y(blo) - y(bhi)).max(1.0)
        );
    }
    for (i, change) in changes
        .iter()
        .enumerate()
        .skip(1)
        .take(points.len().saturating_sub(1))
    {
        if let Some(what) = change {
            let mx = (x(i - 1) + x(i)) / 2.0;
            let _ = write!(
                svg,
                r#"<line class="env-change" x1="{mx:.1}" y1="{top}" x2="{mx:.1}" y2="{bottom}" stroke="{MARKER_COLOUR}" stroke-dasharray="4 3"><title>changed: {what}</title></line><text x="{mx:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="{MARKER_COLOUR}">{what} changed</text>"#,
                top - 6.0,
                what = escape(what)
            );
        }
    }
    let path: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{:.1},{:.1}", x(i), y(p.summary.median)))
        .collect();
    let _ = write!(
        svg,
        r#"<polyline class="series" points="{}" fill="none" stroke="{LINE_COLOUR}" stroke-width="2"/>"#,
        path.join(" ")
    );
    for (i, p) in points.iter().enumerate() {
        let is_current = p.run_id == current_run;
        let (r, fill) = if is_current {
            (5.5, verdict_colour(c.verdict.as_str()))
        } else {
            (3.0, LINE_COLOUR)
        };
        let _ = write!(
            svg,
            r#"<circle cx="{:.1}" cy="{:.1}" r="{r}" fill="{fill}"><title>{} {}</title></circle>"#,
            x(i),
            y(p.summary.median),
            escape(&p.run_id),
            escape(&format_value(p.summary.median, &c.unit))
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{LEFT}" y="{:.1}" font-size="11" fill="#4a5568">{} runs, oldest left; shaded: baseline ±{:.1}%</text>"##,
        HISTORY_HEIGHT - 12.0,
        points.len(),
        c.threshold_pct
    );
    close(svg)
}

/// Series colours for `gpuflow history --svg`, one per environment, in order.
const SERIES_COLOURS: [&str; 6] = [
    "#2b6cb0", "#d97706", "#2f855a", "#c53030", "#6b46c1", "#4a5568",
];

/// A metric's series over time for `gpuflow history --svg`: one line per series (environment),
/// medians by time, each series labelled in a legend. Time runs left to right over every
/// point shown, so series recorded at different times sit where they belong.
pub fn series(metric: &str, unit: &str, series: &[(String, Vec<(i64, f64)>)]) -> String {
    let legend_height = 18.0 * series.len() as f64;
    let height = HISTORY_HEIGHT + legend_height;
    let mut svg = open(height, &format!("{metric}: history"));
    let all: Vec<(i64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    if all.is_empty() {
        empty_note(&mut svg, height, "no history yet");
        return close(svg);
    }
    let (t0, t1) = all.iter().fold((i64::MAX, i64::MIN), |(a, b), (t, _)| {
        (a.min(*t), b.max(*t))
    });
    let (lo, hi) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (_, v)| {
            (a.min(*v), b.max(*v))
        });
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.02).max(1e-9);
    let (lo, hi) = (lo - pad, hi + pad);
    let (top, bottom) = (28.0, HISTORY_HEIGHT - 30.0);
    let x = |t: i64| {
        if t1 == t0 {
            (LEFT + WIDTH - RIGHT) / 2.0
        } else {
            LEFT + (t - t0) as f64 / (t1 - t0) as f64 * (WIDTH - RIGHT - LEFT)
        }
    };
    let y = |v: f64| bottom - (v - lo) / (hi - lo) * (bottom - top);
    let _ = write!(
        svg,
        r##"<text x="{LEFT}" y="18" font-size="13" fill="#1a202c">{} ({})</text>"##,
        escape(metric),
        escape(unit)
    );
    for v in [lo + pad, hi - pad] {
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#e2e8f0"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#4a5568">{v:.4}</text>"##,
            WIDTH - RIGHT,
            y(v),
            y(v),
            LEFT - 6.0,
            y(v) + 4.0
        );
    }
    for (i, (label, points)) in series.iter().enumerate() {
        let colour = SERIES_COLOURS[i % SERIES_COLOURS.len()];
        let path: Vec<String> = points
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for (t, v) in points {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"/>"#,
                x(*t),
                y(*v)
            );
        }
        let ly = HISTORY_HEIGHT + 18.0 * i as f64;
        let _ = write!(
            svg,
            r##"<rect x="{LEFT}" y="{:.1}" width="12" height="4" fill="{colour}"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#4a5568">{}</text>"##,
            ly - 6.0,
            LEFT + 18.0,
            ly,
            escape(label)
        );
    }
    close(svg)
}

fn open(height: f64, title: &str) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif"><title>{}</title><rect width="100%" height="100%" fill="white"/>"#,
        escape(title)
    )
}

fn close(mut svg: String) -> String {
    svg.push_str("</svg>");
    svg
}

fn empty_note(svg: &mut String, height: f64, text: &str) {
    let _ = write!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13" fill="#718096">{text}</text>"##,
        WIDTH / 2.0,
        height / 2.0
    );
}

/// Text as SVG/XML character data.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{Test, Verdict};
    use crate::stats::Summary;
    use crate::store::{Direction, SeriesKey};

    fn comparison(current: Option<f64>, baseline: Option<f64>) -> Comparison {
        Comparison {
            metric: "output_tok_s".into(),
            unit: "tok/s".into(),
            direction: Direction::Higher,
            verdict: Verdict::Regression,
            current,
            baseline_value: baseline,
            ratio: None,
            change_pct: None,
            p_value: None,
            test: Some(Test::MannWhitneyU),
            threshold_pct: 5.0,
            baseline: "window".into(),
            differences: Vec::new(),
            explanation: String::new(),
        }
    }

    fn point(run: &str, key: &str, median: f64) -> HistoryPoint {
        HistoryPoint {
            result_id: 1,
            run_id: run.into(),
            workflow: "w".into(),
            job: "j".into(),
            step: "s".into(),
            finished_at_ms: 0,
            git_commit: None,
            git_ref: None,
            status: "success".into(),
            series_key: SeriesKey(key.into()),
            unit: "tok/s".into(),
            direction: Direction::Higher,
            summary: Summary::of(&[median]).unwrap(),
        }
    }

    #[test]
    fn compare_draws_two_bars_and_the_band() {
        let svg = compare(&comparison(Some(38.0), Some(89.5)));
        assert_eq!(svg.matches(r#"class="bar""#).count(), 2);
        assert!(svg.contains(r#"class="band""#));
        assert!(svg.contains("89.5"), "{svg}");
        assert!(svg.ends_with("</svg>"));
    }

    #[test]
    fn compare_without_baseline_draws_one_bar() {
        let svg = compare(&comparison(Some(38.0), None));
        assert_eq!(svg.matches(r#"class="bar""#).count(), 1);
        assert!(!svg.contains(r#"class="band""#));
    }

    #[test]
    fn history_marks_where_the_series_changed_and_rings_the_current_run() {
        let points = [
            point("a", "k1", 89.0),
            point("b", "k1", 90.0),
            point("c", "k2", 38.0),
        ];
        let changes = [None, None, Some("driver".to_string())];
        let svg = history(&comparison(Some(38.0), Some(89.5)), &points, &changes, "c");
        assert!(svg.contains("driver changed"), "{svg}");
        assert_eq!(svg.matches(r#"class="env-change""#).count(), 1);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains(r#"r="5.5""#));
    }

    #[test]
    fn titles_are_escaped() {
        let mut c = comparison(Some(1.0), Some(1.0));
        c.metric = "a<b&c".into();
        assert!(compare(&c).contains("a&lt;b&amp;c"));
    }
}
