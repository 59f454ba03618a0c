//! `gpuflow history METRIC`: a metric's series over time, as a table with a sparkline per
//! series, or `--json`.

use std::io::Write;

use super::store_path::{StoreArgs, report};
use crate::diag::{Diagnostic, ExitCode, RenderOptions, did_you_mean, render};
use crate::stats::Summary;
use crate::store::{
    Direction, FieldDiff, HistoryPoint, HistoryQuery, Identity, ResultStore, SeriesKey,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The metric (`output_tok_s`, `ttft_ms`).
    metric: String,

    /// Only the series with this key (or a unique prefix, as the table shows it).
    #[arg(long, value_name = "KEY")]
    series: Option<String>,

    /// Only results of this workflow (its `name:`).
    #[arg(long, value_name = "WORKFLOW")]
    workflow: Option<String>,

    /// Show the newest N results.
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,

    /// Print JSON: `{"metric": …, "series": [{"key", "identity", "points": […]}]}`.
    #[arg(long)]
    json: bool,

    /// Also write the series as an SVG line chart (one line per environment) to this file.
    #[arg(long, value_name = "FILE")]
    svg: Option<std::path::PathBuf>,

    #[command(flatten)]
    store: StoreArgs,
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let store = match args.store.open_existing(render_opts) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    if let Some(d) = bad_series_key(args) {
        eprintln!("{}", render(&d, render_opts));
        return Ok(ExitCode::Usage);
    }
    let query = HistoryQuery {
        metric: args.metric.clone(),
        series: args.series.clone(),
        workflow: args.workflow.clone(),
        limit: args.limit,
    };
    let points = match store.history(&query) {
        Ok(p) => p,
        Err(e) => return Ok(report(&e, render_opts)),
    };
    if points.is_empty() {
        eprintln!("{}", render(&nothing_matches(args, &store), render_opts));
        return Ok(ExitCode::Failure);
    }
    let series = by_series(&points);
    if let Some(path) = &args.svg {
        write_svg(path, args, &store, &series, &points)?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        write_json(&mut out, args, &store, &series)?;
    } else {
        write_tables(&mut out, args, &store, &series)?;
    }
    Ok(ExitCode::Success)
}

/// Points grouped by series.
type Series<'a> = Vec<(SeriesKey, Vec<&'a HistoryPoint>)>;

/// `--series` that is no series key (hex digits, or a prefix of them).
fn bad_series_key(args: &Args) -> Option<Diagnostic> {
    let series = args
        .series
        .as_deref()
        .filter(|s| s.is_empty() || !s.chars().all(|c| c.is_ascii_hexdigit()))?;
    Some(
        Diagnostic::unlocated(format!("`{series}` is not a series key")).hint(
            "a series key is hex digits, or a prefix of them, as `gpuflow history METRIC` shows it",
        ),
    )
}

/// Why no point was found: the filters left none out of a known metric, or the metric was
/// never recorded (with the recorded ones, or the nearest of them).
fn nothing_matches(args: &Args, store: &ResultStore) -> Diagnostic {
    let names = store.metric_names().unwrap_or_default();
    if names.contains(&args.metric) {
        return Diagnostic::unlocated(format!("no results of `{}` match", args.metric))
            .hint("drop `--series` or `--workflow` to see every series");
    }
    Diagnostic::unlocated(format!("no results of metric `{}`", args.metric)).maybe_hint(
        did_you_mean(&args.metric, &names).or_else(|| {
            (!names.is_empty()).then(|| {
                format!(
                    "recorded metrics: {}",
                    crate::diag::join_quoted(&names, "and")
                )
            })
        }),
    )
}

/// Series in order of their newest point, newest last, so the latest is nearest the prompt.
fn by_series(points: &[HistoryPoint]) -> Series<'_> {
    let mut series: Series<'_> = Vec::new();
    for p in points {
        match series.iter_mut().find(|(k, _)| *k == p.series_key) {
            Some((_, v)) => v.push(p),
            None => series.push((p.series_key.clone(), vec![p])),
        }
    }
    series.sort_by_key(|(_, v)| v.last().map(|p| (p.finished_at_ms, p.result_id)));
    series
}

/// `--svg`: one line per series, labelled with its environment.
fn write_svg(
    path: &std::path::Path,
    args: &Args,
    store: &ResultStore,
    series: &Series<'_>,
    points: &[HistoryPoint],
) -> anyhow::Result<()> {
    let lines: Vec<(String, Vec<(i64, f64)>)> = series
        .iter()
        .map(|(key, pts)| {
            let env = store
                .series_identity(key)
                .ok()
                .flatten()
                .map(|id| describe_identity(&id))
                .unwrap_or_default();
            let label = format!("series {}{env}", key.short());
            let values = pts
                .iter()
                .map(|p| (p.finished_at_ms, p.summary.median))
                .collect();
            (label, values)
        })
        .collect();
    let unit = points.first().map_or("", |p| p.unit.as_str());
    std::fs::write(
        path,
        crate::report::chart::series(&args.metric, unit, &lines),
    )?;
    Ok(())
}

fn write_json(
    out: &mut impl Write,
    args: &Args,
    store: &ResultStore,
    series: &Series<'_>,
) -> anyhow::Result<()> {
    let mut list = Vec::new();
    for (key, pts) in series {
        let identity = store.series_identity(key).ok().flatten();
        list.push(serde_json::json!({
            "key": key.0,
            "identity": identity,
            "unit": pts[0].unit,
            "direction": pts[0].direction,
            "points": pts.iter().map(|p| point_json(p)).collect::<Vec<_>>(),
        }));
    }
    let doc = serde_json::json!({ "metric": args.metric, "series": list });
    writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}

/// A table per series; each after the first says what sets it apart from the first, as
/// headers show only the broad strokes.
fn write_tables(
    out: &mut impl Write,
    args: &Args,
    store: &ResultStore,
    series: &Series<'_>,
) -> anyhow::Result<()> {
    let mut first: Option<(SeriesKey, Identity)> = None;
    for (i, (key, pts)) in series.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let identity = store.series_identity(key).ok().flatten();
        write_series(out, &args.metric, key, identity.as_ref(), pts)?;
        match (&first, &identity) {
            (Some((first_key, first_id)), Some(id)) => {
                let diffs: Vec<String> = id
                    .differences(first_id)
                    .iter()
                    .map(FieldDiff::describe)
                    .collect();
                writeln!(
                    out,
                    "  differs from series {}: {}",
                    first_key.short(),
                    diffs.join(", ")
                )?;
            }
            (None, Some(id)) => first = Some((key.clone(), id.clone())),
            _ => {}
        }
    }
    Ok(())
}

fn point_json(p: &HistoryPoint) -> serde_json::Value {
    serde_json::json!({
        "run": p.run_id,
        "result": p.result_id,
        "finished_at": format_rfc3339(p.finished_at_ms),
        "workflow": p.workflow,
        "job": p.job,
        "step": p.step,
        "status": p.status,
        "git_commit": p.git_commit,
        "git_ref": p.git_ref,
        "summary": p.summary,
    })
}

fn write_series(
    out: &mut impl Write,
    metric: &str,
    key: &SeriesKey,
    identity: Option<&Identity>,
    pts: &[&HistoryPoint],
) -> std::io::Result<()> {
    let unit = &pts[0].unit;
    let direction = pts[0].direction;
    let env = identity.map(describe_identity).unwrap_or_default();
    writeln!(
        out,
        "{metric} ({}{} is better) · series {}{env}",
        if unit.is_empty() {
            String::new()
        } else {
            format!("{unit}, ")
        },
        direction,
        key.short()
    )?;
    let medians: Vec<f64> = pts.iter().map(|p| p.summary.median).collect();
    let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = medians.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    writeln!(
        out,
        "  {}  {} … {}",
        sparkline(&medians),
        crate::compare::format_value(lo, unit),
        crate::compare::format_value(hi, unit)
    )?;
    let mut rows = Vec::new();
    let mut previous: Option<f64> = None;
    for p in pts {
        let s: &Summary = &p.summary;
        let change = previous.map_or_else(String::new, |prev| {
            oriented_change(prev, s.median, direction)
        });
        previous = Some(s.median);
        let cv = if s.n >= 2 && s.mean != 0.0 {
            format!("{:.1}%", s.sd / s.mean.abs() * 100.0)
        } else {
            "-".into()
        };
        rows.push([
            format_time(p.finished_at_ms),
            p.run_id.clone(),
            p.git_commit
                .as_deref()
                .map(|c| c[..c.len().min(8)].to_string())
                .unwrap_or_else(|| "-".into()),
            crate::compare::format_value(s.median, ""),
            s.n.to_string(),
            cv,
            change,
        ]);
    }
    let mut buf = Vec::new();
    write_table(
        &mut buf,
        &["WHEN (UTC)", "RUN", "COMMIT", "MEDIAN", "N", "CV", "CHANGE"],
        &rows,
    )?;
    for line in String::from_utf8_lossy(&buf).lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

/// Change from the previous point, signed so that + is better (as verdicts report it).
fn oriented_change(prev: f64, cur: f64, direction: Direction) -> String {
    if prev <= 0.0 || cur <= 0.0 {
        return "-".into();
    }
    let better = match direction {
        Direction::Higher => cur / prev,
        Direction::Lower => prev / cur,
    };
    format!("{:+.1}%", (better - 1.0) * 100.0)
}

fn describe_identity(id: &Identity) -> String {
    let mut parts = vec![id.host_label.clone()];
    if let Some(model) = &id.gpu_model {
        parts.push(format!("{}× {model}", id.gpu_count));
    }
    if let Some(d) = &id.driver {
        parts.push(format!("driver {d}"));
    }
    if let Some(c) = &id.cuda {
        parts.push(format!("CUDA {c}"));
    }
    format!(" · {}", parts.join(", "))
}

/// One block character per value, scaled from the lowest (▁) to the highest (█); a flat
/// series is a flat middle line.
pub fn sparkline(values: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    values
        .iter()
        .map(|v| {
            if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
                BARS[3]
            } else {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let i = ((v - lo) / (hi - lo) * 7.0).round() as usize;
                BARS[i.min(7)]
            }
        })
        .collect()
}

/// Columns padded to their widest cell (by characters, so `…` and `×` line up).
pub fn write_table<const N: usize>(
    out: &mut impl Write,
    header: &[&str; N],
    rows: &[[String; N]],
) -> std::io::Result<()> {
    let mut widths: [usize; N] = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            s.push_str(cell);
            if i + 1 < N {
                s.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
            }
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    Ok(())
}

fn system_time(ms: i64) -> std::time::SystemTime {
    let ms = u64::try_from(ms).unwrap_or(0);
    std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)
}

fn format_rfc3339(ms: i64) -> String {
    humantime::format_rfc3339_seconds(system_time(ms)).to_string()
}

/// `2026-11-30 08:41`, UTC.
pub fn format_time(ms: i64) -> String {
    let s = format_rfc3339(ms);
    s.get(..16).map_or(s.clone(), |d| d.replace('T', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_between_the_extremes() {
        assert_eq!(sparkline(&[82.0, 89.5, 38.0]), "▇█▁");
        assert_eq!(sparkline(&[5.0, 5.0]), "▄▄");
        assert_eq!(sparkline(&[]), "");
    }

    #[test]
    fn changes_are_oriented() {
        assert_eq!(oriented_change(82.0, 89.5, Direction::Higher), "+9.1%");
        assert_eq!(oriented_change(100.0, 110.0, Direction::Lower), "-9.1%");
    }

    #[test]
    fn times_are_utc_minutes() {
        assert_eq!(format_time(0), "1970-01-01 00:00");
        assert_eq!(format_rfc3339(1_000), "1970-01-01T00:00:01Z");
    }

    #[test]
    fn tables_pad_by_characters() {
        let mut buf = Vec::new();
        write_table(
            &mut buf,
            &["A", "B"],
            &[["×".into(), "x".into()], ["long".into(), "y".into()]],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "A     B\n×     x\nlong  y\n"
        );
    }
}
