//! The run's answer in a few lines, the last thing every run shows (plain output after its
//! summary, the live board at its foot): each benchmark's key figure with its interval, each
//! comparison's verdict and ratio, each report's path, and where the logs are. Made from the
//! engine's `run_headline` event, which `--json` prints as its last line.

use std::fmt::Write as _;

use crate::compare::{format_value, metric_title};
use crate::events::{BenchmarkFigure, ComparisonFigure, Headline};

/// ```text
/// headline: run 20261130-091940-4e4fa1c07e3b success
///   benchmark  [bench (1)] single-stream: decode_tok_s 88.90 ± 0.84 tok/s (mean of 3 runs, 95% CI)
///   verdict    [bench (1)] compare: output_tok_s (decode tok/s, per-request median) unchanged, ratio 1.003 (+0.3%): 90.03 tok/s vs 89.80 tok/s
///   report     .gpuflow/runs/20261130-091940-4e4fa1c07e3b/report/report.md
///   logs       .gpuflow/runs/20261130-091940-4e4fa1c07e3b
/// ```
pub fn headline_text(h: &Headline) -> String {
    let mut out = format!("headline: run {} {}\n", h.run_id, h.result.as_str());
    for b in &h.benchmarks {
        let _ = writeln!(out, "  benchmark  {}", benchmark_line(b));
    }
    for c in &h.comparisons {
        let _ = writeln!(out, "  verdict    {}", comparison_line(c));
    }
    for r in &h.reports {
        match &r.commit {
            Some(commit) => {
                let short: String = commit.chars().take(10).collect();
                let _ = writeln!(out, "  report     {} (committed {short})", r.path);
            }
            None => {
                let _ = writeln!(out, "  report     {}", r.path);
            }
        }
    }
    for p in &h.pulls {
        let _ = writeln!(
            out,
            "  pulled     [{}] `{}`: {} in {} layers, {:.1}s",
            p.job.display,
            p.image,
            crate::backend::pull_progress::bytes_text(p.bytes),
            p.layers,
            p.took.as_secs_f64()
        );
    }
    let _ = writeln!(out, "  logs       {}", h.log_dir);
    out
}

/// `[bench (1)] single-stream: decode_tok_s 88.90 ± 0.84 tok/s (mean of 3 runs, 95% CI)`.
pub fn benchmark_line(b: &BenchmarkFigure) -> String {
    let unit = if b.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", b.unit)
    };
    let figure = if b.runs > 1 {
        let half = (b.ci95_high - b.ci95_low) / 2.0;
        format!(
            "{:.2} ± {half:.2}{unit} (mean of {} runs, 95% CI)",
            b.mean, b.runs
        )
    } else {
        format!("{:.2}{unit} (1 run: no interval)", b.mean)
    };
    format!("[{}] {}: {} {figure}", b.job.display, b.name, b.metric)
}

/// `[bench (1)] compare: output_tok_s (decode tok/s, per-request median) unchanged, ratio
/// 1.003 (+0.3%): 90.03 tok/s vs 89.80 tok/s`.
pub fn comparison_line(c: &ComparisonFigure) -> String {
    let title = metric_title(&c.metric, c.meaning.as_deref());
    let mut line = format!("[{}] {}: {title} {}", c.job.display, c.name, c.verdict);
    if let Some(ratio) = c.ratio {
        let _ = write!(line, ", ratio {ratio:.3}");
        if let Some(pct) = c.change_pct {
            let _ = write!(line, " ({pct:+.1}%)");
        }
    }
    match (c.current, c.baseline_value) {
        (Some(cur), Some(base)) => {
            let _ = write!(
                line,
                ": {} vs {}",
                format_value(cur, &c.unit),
                format_value(base, &c.unit)
            );
        }
        (Some(cur), None) => {
            let _ = write!(line, ": {}", format_value(cur, &c.unit));
        }
        _ => {}
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{JobRef, JobResult, ReportFile};

    fn job() -> JobRef {
        JobRef {
            job: "bench".into(),
            cell: 0,
            display: "bench (1)".into(),
        }
    }

    pub(crate) fn headline() -> Headline {
        Headline {
            run_id: "20261130-091940-4e4fa1c07e3b".into(),
            result: JobResult::Success,
            log_dir: ".gpuflow/runs/20261130-091940-4e4fa1c07e3b".into(),
            benchmarks: vec![BenchmarkFigure {
                job: job(),
                step: "3".into(),
                name: "single-stream".into(),
                metric: "decode_tok_s".into(),
                unit: "tok/s".into(),
                mean: 88.9,
                ci95_low: 88.06,
                ci95_high: 89.74,
                runs: 3,
            }],
            comparisons: vec![ComparisonFigure {
                job: job(),
                step: "4".into(),
                name: "compare".into(),
                metric: "output_tok_s".into(),
                meaning: Some("decode tok/s, per-request median".into()),
                verdict: "unchanged".into(),
                unit: "tok/s".into(),
                current: Some(90.03),
                baseline_value: Some(89.8),
                ratio: Some(1.00256),
                change_pct: Some(0.256),
                baseline: "the previous comparable run".into(),
            }],
            reports: vec![ReportFile {
                job: JobRef {
                    job: "report".into(),
                    cell: 0,
                    display: "report".into(),
                },
                step: "1".into(),
                path: ".gpuflow/runs/20261130-091940-4e4fa1c07e3b/report/report.md".into(),
                commit: None,
            }],
            pulls: Vec::new(),
        }
    }

    #[test]
    fn an_image_pulled_for_the_run_is_in_the_headline_with_its_size_and_time() {
        let mut h = headline();
        h.pulls.push(crate::events::PullFigure {
            job: JobRef {
                job: "serve".into(),
                cell: 0,
                display: "serve".into(),
            },
            image: "lmsysorg/sglang:v0.5.23".into(),
            bytes: 1_213_000_000,
            layers: 5,
            took: std::time::Duration::from_millis(23_400),
        });
        let text = headline_text(&h);
        assert!(
            text.contains("  pulled     [serve] `lmsysorg/sglang:v0.5.23`: 1.13 GiB in 5 layers, 23.4s\n  logs"),
            "{text}"
        );
    }

    #[test]
    fn the_headline_has_figures_with_intervals_verdicts_and_paths() {
        insta::assert_snapshot!(headline_text(&headline()), @r"
        headline: run 20261130-091940-4e4fa1c07e3b success
          benchmark  [bench (1)] single-stream: decode_tok_s 88.90 ± 0.84 tok/s (mean of 3 runs, 95% CI)
          verdict    [bench (1)] compare: output_tok_s (decode tok/s, per-request median) unchanged, ratio 1.003 (+0.3%): 90.03 tok/s vs 89.80 tok/s
          report     .gpuflow/runs/20261130-091940-4e4fa1c07e3b/report/report.md
          logs       .gpuflow/runs/20261130-091940-4e4fa1c07e3b
        ");
    }

    #[test]
    fn one_run_has_no_interval_and_no_baseline_no_ratio() {
        let mut h = headline();
        h.benchmarks[0].runs = 1;
        h.comparisons[0].verdict = "no-baseline".into();
        h.comparisons[0].ratio = None;
        h.comparisons[0].change_pct = None;
        h.comparisons[0].baseline_value = None;
        let text = headline_text(&h);
        assert!(
            text.contains("decode_tok_s 88.90 tok/s (1 run: no interval)"),
            "{text}"
        );
        assert!(
            text.contains("(decode tok/s, per-request median) no-baseline: 90.03 tok/s\n"),
            "{text}"
        );
    }
}
