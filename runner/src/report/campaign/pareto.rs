//! The throughput-against-latency trade-off of a campaign: which cells are Pareto-optimal (no
//! other cell is as fast to answer and serves as much, and better at one), and the chart that
//! shows it — latency across, throughput up, every measured cell a dot, the front's cells
//! joined, filled and labelled, the best configuration ringed.
//!
//! Hand-made SVG like the run report's charts ([`crate::report::chart`], which says why). This
//! module draws and ranks numbers it is given; which metrics they are is the caller's choice.

use std::fmt::Write;

use crate::compare::format_value;
use crate::report::chart::escape;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 56.0;

const DOT_COLOUR: &str = "#a0aec0";
const FRONT_COLOUR: &str = "#2b6cb0";
const BEST_COLOUR: &str = "#2f855a";

/// One measured cell on the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub label: String,
    /// Lower is better.
    pub latency: f64,
    /// Higher is better.
    pub throughput: f64,
    pub best: bool,
}

/// Whether each point is on the Pareto front: no other point has lower-or-equal latency and
/// higher-or-equal throughput with one of them strictly better. Points that tie exactly are
/// both on it.
pub fn front(points: &[Point]) -> Vec<bool> {
    points
        .iter()
        .map(|p| {
            !points.iter().any(|q| {
                q.latency <= p.latency
                    && q.throughput >= p.throughput
                    && (q.latency < p.latency || q.throughput > p.throughput)
            })
        })
        .collect()
}

/// The axes' names and units, as the chart labels them.
pub struct Axes<'a> {
    /// `ttft_ms p50`.
    pub latency: &'a str,
    pub latency_unit: &'a str,
    /// `output_throughput mean`.
    pub throughput: &'a str,
    pub throughput_unit: &'a str,
}

/// The chart as a standalone SVG document; `on_front` is [`front`]'s answer for `points`.
pub fn chart(points: &[Point], on_front: &[bool], axes: &Axes<'_>) -> String {
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart pareto" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif"><title>{} against {}</title><rect width="100%" height="100%" fill="white"/>"#,
        escape(axes.throughput),
        escape(axes.latency)
    );
    if points.is_empty() {
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13" fill="#718096">no cell measured both metrics</text></svg>"##,
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        return svg;
    }
    // The axes span the values with a margin, and are labelled with the values' own ends.
    let range = |values: &mut dyn Iterator<Item = f64>| {
        values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        })
    };
    let padded = |(lo, hi): (f64, f64)| {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
        (lo - pad, hi + pad)
    };
    let latencies = range(&mut points.iter().map(|p| p.latency));
    let throughputs = range(&mut points.iter().map(|p| p.throughput));
    let ((x0, x1), (y0, y1)) = (padded(latencies), padded(throughputs));
    let (bottom, right) = (HEIGHT - BOTTOM, WIDTH - RIGHT);
    let x = |v: f64| LEFT + (v - x0) / (x1 - x0) * (right - LEFT);
    let y = |v: f64| bottom - (v - y0) / (y1 - y0) * (bottom - TOP);
    axes_and_labels(&mut svg, axes, latencies, throughputs, &x, &y);
    // The front as a line from the quickest to the most productive cell.
    let mut on: Vec<&Point> = points
        .iter()
        .zip(on_front)
        .filter(|(_, f)| **f)
        .map(|(p, _)| p)
        .collect();
    on.sort_by(|a, b| a.latency.total_cmp(&b.latency));
    let path: Vec<String> = on
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.latency), y(p.throughput)))
        .collect();
    let _ = write!(
        svg,
        r#"<polyline class="front" points="{}" fill="none" stroke="{FRONT_COLOUR}" stroke-width="2" stroke-dasharray="5 3"/>"#,
        path.join(" ")
    );
    for (p, &is_front) in points.iter().zip(on_front) {
        let (cx, cy) = (x(p.latency), y(p.throughput));
        let tip = format!(
            "{}: {} {}, {} {}",
            p.label,
            axes.throughput,
            format_value(p.throughput, axes.throughput_unit),
            axes.latency,
            format_value(p.latency, axes.latency_unit)
        );
        let (class, fill, r) = if is_front {
            ("point front-point", FRONT_COLOUR, 5.0)
        } else {
            ("point", DOT_COLOUR, 4.0)
        };
        let _ = write!(
            svg,
            r#"<circle class="{class}" cx="{cx:.1}" cy="{cy:.1}" r="{r}" fill="{fill}"><title>{}</title></circle>"#,
            escape(&tip)
        );
        if p.best {
            let _ = write!(
                svg,
                r#"<circle class="best" cx="{cx:.1}" cy="{cy:.1}" r="9" fill="none" stroke="{BEST_COLOUR}" stroke-width="2"/>"#
            );
        }
        if is_front || p.best {
            // Labels go left of a point in the right half, so they stay on the page.
            let (dx, anchor) = if cx > (LEFT + right) / 2.0 {
                (-10.0, "end")
            } else {
                (10.0, "start")
            };
            let _ = write!(
                svg,
                r##"<text class="label" x="{:.1}" y="{:.1}" text-anchor="{anchor}" font-size="11" fill="#1a202c">{}</text>"##,
                cx + dx,
                cy - 8.0,
                escape(&p.label)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// The axes, the values' ends on them, their names, and the legend line.
fn axes_and_labels(
    svg: &mut String,
    axes: &Axes<'_>,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    x: &dyn Fn(f64) -> f64,
    y: &dyn Fn(f64) -> f64,
) {
    let (bottom, right) = (HEIGHT - BOTTOM, WIDTH - RIGHT);
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#a0aec0"/><line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#a0aec0"/>"##
    );
    for v in [y0, y1] {
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11" fill="#4a5568">{}</text>"##,
            LEFT - 6.0,
            y(v) + 4.0,
            escape(&format_value(v, axes.throughput_unit))
        );
    }
    for (v, anchor) in [(x0, "middle"), (x1, "middle")] {
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}" font-size="11" fill="#4a5568">{}</text>"##,
            x(v),
            bottom + 16.0,
            escape(&format_value(v, axes.latency_unit))
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12" fill="#1a202c">{} (lower is better) →</text><text x="14" y="{:.1}" font-size="12" fill="#1a202c" transform="rotate(-90 14 {:.1})" text-anchor="middle">{} (higher is better) →</text><text x="{LEFT}" y="20" font-size="11" fill="#4a5568">dashed: the Pareto front · ringed: the best configuration</text>"##,
        (LEFT + right) / 2.0,
        bottom + 36.0,
        escape(axes.latency),
        (TOP + bottom) / 2.0,
        (TOP + bottom) / 2.0,
        escape(axes.throughput),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(label: &str, latency: f64, throughput: f64) -> Point {
        Point {
            label: label.into(),
            latency,
            throughput,
            best: false,
        }
    }

    #[test]
    fn the_front_keeps_the_cells_nothing_beats_on_both() {
        let points = [
            p("a", 10.0, 100.0), // quickest
            p("b", 20.0, 300.0), // on the front
            p("c", 25.0, 250.0), // slower and less than b
            p("d", 40.0, 500.0), // most throughput
            p("e", 40.0, 450.0), // as slow as d, less throughput
            p("f", 20.0, 300.0), // ties b exactly: both stay
        ];
        assert_eq!(front(&points), [true, true, false, true, false, true]);
    }

    #[test]
    fn one_point_is_its_own_front_and_none_is_empty() {
        assert_eq!(front(&[p("a", 1.0, 1.0)]), [true]);
        assert!(front(&[]).is_empty());
    }

    proptest::proptest! {
        /// No point on the front is dominated, and every point off it is.
        #[test]
        fn the_front_is_exactly_the_undominated_points(
            raw in proptest::collection::vec((0u8..20, 0u8..20), 0..12)
        ) {
            let points: Vec<Point> = raw
                .iter()
                .map(|(l, t)| p("x", f64::from(*l), f64::from(*t)))
                .collect();
            let on = front(&points);
            for (i, a) in points.iter().enumerate() {
                let dominated = points.iter().any(|b| {
                    b.latency <= a.latency && b.throughput >= a.throughput
                        && (b.latency < a.latency || b.throughput > a.throughput)
                });
                proptest::prop_assert_eq!(on[i], !dominated);
            }
            proptest::prop_assert!(points.is_empty() || on.iter().any(|f| *f));
        }
    }

    #[test]
    fn the_chart_fills_and_labels_the_front_and_rings_the_best() {
        let mut points = vec![
            p("tune (1)", 10.0, 100.0),
            p("tune (4)", 20.0, 300.0),
            p("tune <8>", 25.0, 250.0),
        ];
        points[1].best = true;
        let on = front(&points);
        let axes = Axes {
            latency: "ttft_ms p50",
            latency_unit: "ms",
            throughput: "output_throughput",
            throughput_unit: "tok/s",
        };
        let svg = chart(&points, &on, &axes);
        assert_eq!(svg.matches(r#"class="point front-point""#).count(), 2);
        assert_eq!(svg.matches(r#"class="point""#).count(), 1);
        assert_eq!(svg.matches(r#"class="best""#).count(), 1);
        assert!(svg.contains(">tune (1)</text>"), "{svg}");
        assert!(
            !svg.contains(">tune &lt;8&gt;</text>"),
            "off the front: no label"
        );
        assert!(svg.contains("tune &lt;8&gt;: "), "its tooltip is escaped");
        assert!(svg.contains(r#"<polyline class="front""#));
        assert!(svg.ends_with("</svg>"));
    }

    #[test]
    fn a_chart_of_nothing_says_so() {
        let axes = Axes {
            latency: "l",
            latency_unit: "ms",
            throughput: "t",
            throughput_unit: "tok/s",
        };
        assert!(chart(&[], &[], &axes).contains("no cell measured both metrics"));
    }
}
