//! Executing `compare-to-baseline`: the result an earlier `benchmark` step of this job run
//! recorded (the last one, or the one `from:` names) judged by [`crate::compare`] against its
//! baseline from the results store. Each metric's verdict is explained in a log line; the
//! step fails as `fail-on` says.

use std::collections::BTreeMap;

use indexmap::IndexMap;

use crate::compare::{
    Comparison, FailOn, StepInputs, StepReport, compare_result, format_value, metric_title,
};
use crate::events::{ComparisonFigure, EventKind, JobRef, Masker, Stream};
use crate::expr::Value;
use crate::steps::{Outputs, Recorded, StepCall, StepContext, StepError};
use crate::store::{Direction, ResultStore};

/// Runs the step; returns its outputs, or the failure `fail-on` asks for.
pub async fn run(call: StepCall<'_, '_>) -> Result<Outputs, StepError> {
    let StepCall {
        inputs,
        host,
        job,
        step,
        ..
    } = call;
    let text = |k: &str| {
        inputs
            .get(k)
            .filter(|v| !matches!(v, Value::Null))
            .map(Value::to_expr_string)
            .filter(|s| !s.is_empty())
    };
    let step_inputs = step_inputs(inputs, &text)?;
    let recorded = judged_result(step.recorded, text("from"))?;
    let path = host.store();
    let mut store = ResultStore::open(path)
        .map_err(|e| format!("could not open the results store `{}`: {e}", path.display()))?;
    let current = store
        .result(recorded.result_id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "the result {} of step `{}` is no longer in `{}`",
                recorded.result_id,
                recorded.step,
                path.display()
            )
        })?;
    let report = compare_result(&store, &current, &step_inputs).map_err(|e| match e.hint() {
        Some(h) => format!("{e} (help: {h})"),
        None => e.to_string(),
    })?;
    let say = |text: &str| {
        host.emit(EventKind::LogLine {
            job: job.clone(),
            step: Some(step.key.to_string()),
            container: None,
            stream: Stream::Runner,
            // Masked by the run's sink (`MaskingSink`), as every event is.
            text: text.to_string(),
        });
    };
    let meanings = &recorded.meanings;
    for c in &report.comparisons {
        say(&explain(c, meanings.get(&c.metric).map(String::as_str)));
    }
    // The verdicts as decided here, for the run's report: judging again with the report's
    // own inputs could pick another baseline and say something else than this step did.
    let judged = judgements(&report.comparisons, host.masker());
    if let Err(e) = store.record_judgements(recorded.result_id, step.label, &judged) {
        say(&format!(
            "warning: the verdicts could not be kept in `{}` ({e}): a report of this run judges again with its defaults",
            path.display()
        ));
    }
    if report.outcome.passed {
        // A failure says its summary as the step's error.
        say(&report.outcome.summary);
    }
    let outputs = outputs(&report);
    host.emit(EventKind::StepSummary {
        job: job.clone(),
        step: step.key.to_string(),
        markdown: summary_table(&report.comparisons, meanings),
    });
    for c in &report.comparisons {
        host.emit(EventKind::ComparisonResult(figure(c, job, step, meanings)));
    }
    if report.outcome.passed {
        Ok(outputs)
    } else {
        step.outputs_on_failure = outputs;
        Err(report.outcome.summary.into())
    }
}

/// The result judged: the one the `benchmark` step `from` recorded, else the job's latest.
fn judged_result(recorded: &[Recorded], from: Option<String>) -> Result<Recorded, String> {
    let Some(from) = from else {
        return recorded.last().cloned().ok_or_else(|| {
            "no `benchmark` step before this one recorded a result in this job (help: put a `benchmark` step before `compare-to-baseline`, or name one with `from:`)".to_string()
        });
    };
    recorded
        .iter()
        .rev()
        .find(|r| r.step_id.as_deref() == Some(from.as_str()))
        .cloned()
        .ok_or_else(|| {
            let ids: Vec<&str> = recorded.iter().filter_map(|r| r.step_id.as_deref()).collect();
            let hint = crate::diag::did_you_mean(&from, &ids).unwrap_or_else(|| {
                "name the `id` of a `benchmark` step that ran before this one".into()
            });
            format!("no `benchmark` step with the id `{from}` recorded a result in this job (help: {hint})")
        })
}

/// Each comparison as the store keeps it: `(metric, verdict, masked JSON)`.
fn judgements(comparisons: &[Comparison], masker: &Masker) -> Vec<(String, String, String)> {
    comparisons
        .iter()
        .filter_map(|c| {
            let mut json = serde_json::to_value(c).ok()?;
            // The store outlives the run, and may be committed with a report.
            masker.mask_json(&mut json);
            Some((
                c.metric.clone(),
                c.verdict.as_str().to_string(),
                json.to_string(),
            ))
        })
        .collect()
}

/// `verdict` and the first metric's numbers; with several metrics, each one's too.
fn outputs(report: &StepReport) -> Outputs {
    let mut outputs = IndexMap::new();
    if let Some(first) = report.comparisons.first() {
        let overall = report.overall_verdict().unwrap_or(first.verdict);
        outputs.insert("verdict".to_string(), overall.as_str().to_string());
        outputs.extend(numbers(first, ""));
    }
    if report.comparisons.len() > 1 {
        for c in &report.comparisons {
            outputs.insert(format!("{}-verdict", c.metric), c.verdict.as_str().into());
            outputs.extend(numbers(c, &format!("{}-", c.metric)));
        }
    }
    outputs
}

/// The comparison as the run's headline shows it.
fn figure(
    c: &Comparison,
    job: &JobRef,
    step: &StepContext<'_>,
    meanings: &BTreeMap<String, String>,
) -> ComparisonFigure {
    ComparisonFigure {
        job: job.clone(),
        step: step.key.to_string(),
        name: step.label.to_string(),
        metric: c.metric.clone(),
        meaning: meanings.get(&c.metric).cloned(),
        verdict: c.verdict.as_str().to_string(),
        unit: c.unit.clone(),
        current: c.current,
        baseline_value: c.baseline_value,
        ratio: c.ratio,
        change_pct: c.change_pct,
        baseline: c.baseline.clone(),
    }
}

/// One line per metric: the verdict, the numbers and why.
fn explain(c: &Comparison, meaning: Option<&str>) -> String {
    let value = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format_value(v, &c.unit));
    let mut line = format!(
        "{}: {} — {} vs {} ({}",
        metric_title(&c.metric, meaning),
        c.verdict,
        value(c.current),
        value(c.baseline_value),
        c.baseline
    );
    if let Some(pct) = c.change_pct {
        line.push_str(&format!(", {pct:+.1}% better-signed"));
    }
    line.push_str(&format!(", threshold {:.1}%", c.threshold_pct));
    if let Some(p) = c.p_value {
        line.push_str(&format!(", p = {p:.3}"));
    }
    line.push_str(&format!("): {}", c.explanation));
    line
}

/// The comparisons as a Markdown table, the step's summary (`$GITHUB_STEP_SUMMARY`'s place).
fn summary_table(comparisons: &[Comparison], meanings: &BTreeMap<String, String>) -> String {
    let mut md = String::from(
        "| metric | verdict | current | baseline | change | ratio | threshold | p |\n|---|---|---|---|---|---|---|---|\n",
    );
    for c in comparisons {
        let value =
            |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format_value(v, &c.unit));
        let num = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or_else(|| "–".to_string(), f);
        md.push_str(&format!(
            "| `{}`{} | **{}** | {} | {} | {} | {} | {:.1}% | {} |\n",
            c.metric,
            meanings
                .get(&c.metric)
                .map_or_else(String::new, |m| format!(" ({m})")),
            c.verdict,
            value(c.current),
            value(c.baseline_value),
            num(c.change_pct, &|p| format!("{p:+.1}%")),
            num(c.ratio, &|r| format!("{r:.3}")),
            c.threshold_pct,
            num(c.p_value, &|p| format!("{p:.3}")),
        ));
    }
    if let Some(c) = comparisons.first() {
        md.push_str(&format!("\nBaseline: {}.\n", c.baseline));
    }
    md
}

/// `ratio`, `change-pct`, `p-value`, `threshold`, `baseline`, prefixed for one of several
/// metrics. Unknown numbers are empty, as GitHub gives an unset output.
fn numbers(c: &Comparison, prefix: &str) -> IndexMap<String, String> {
    let n = |v: Option<f64>| v.map(crate::expr::format_number).unwrap_or_default();
    IndexMap::from([
        (format!("{prefix}ratio"), n(c.ratio)),
        (format!("{prefix}change-pct"), n(c.change_pct)),
        (format!("{prefix}p-value"), n(c.p_value)),
        (format!("{prefix}threshold"), n(Some(c.threshold_pct))),
        (format!("{prefix}baseline"), c.baseline.clone()),
    ])
}

fn step_inputs(
    inputs: &IndexMap<String, Value>,
    text: &dyn Fn(&str) -> Option<String>,
) -> Result<StepInputs, String> {
    let mut metrics: Vec<String> = Vec::new();
    if let Some(m) = text("metric") {
        metrics.push(m);
    }
    match inputs.get("metrics") {
        Some(Value::Array(items)) => metrics.extend(items.iter().map(Value::to_expr_string)),
        Some(Value::Null) | None => {}
        Some(other) => metrics.extend(
            other
                .to_expr_string()
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
        ),
    }
    if metrics.is_empty() {
        return Err(
            "say what to compare: `metric: output_tok_s` or `metrics: [output_tok_s, ttft_ms]`"
                .into(),
        );
    }
    let defaults = StepInputs::default();
    let window = match text("window") {
        None => defaults.window,
        Some(w) => w
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("input `window` is `{w}`, not a number of runs above 0"))?,
    };
    let tolerance = match text("tolerance") {
        None => defaults.tolerance,
        Some(t) => percent(&t).ok_or_else(|| {
            format!("input `tolerance` is `{t}`, not a percentage such as `5%` (help: or a fraction such as `0.05`)")
        })?,
    };
    let direction = match text("direction") {
        None => None,
        Some(d) => Some(
            Direction::parse(&d)
                .ok_or_else(|| format!("input `direction` is `{d}`, not `higher` or `lower`"))?,
        ),
    };
    let fail_on = match text("fail-on") {
        None => defaults.fail_on,
        Some(f) => FailOn::parse(&f).ok_or_else(|| {
            format!("input `fail-on` is `{f}`; it is `regression`, `inconclusive` or `never`")
        })?,
    };
    let allow_incomparable = match text("allow-incomparable").as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(format!(
                "input `allow-incomparable` is `{other}`, not `true` or `false`"
            ));
        }
    };
    Ok(StepInputs {
        metrics,
        baseline: text("baseline").unwrap_or(defaults.baseline),
        window,
        tolerance,
        direction,
        fail_on,
        allow_incomparable,
    })
}

/// `5%` → 0.05, `0.05` → 0.05.
fn percent(text: &str) -> Option<f64> {
    let t = text.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().ok()? / 100.0,
        None => t.parse::<f64>().ok()?,
    };
    (v.is_finite() && v >= 0.0).then_some(v)
}

#[cfg(test)]
mod tests {
    use test_case::test_case;

    use super::*;

    fn inputs(pairs: &[(&str, Value)]) -> IndexMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn read(i: &IndexMap<String, Value>) -> Result<StepInputs, String> {
        let text = |k: &str| {
            i.get(k)
                .map(Value::to_expr_string)
                .filter(|s| !s.is_empty())
        };
        step_inputs(i, &text)
    }

    #[test_case("5%", Some(0.05))]
    #[test_case("0.03", Some(0.03))]
    #[test_case(" 10 %", Some(0.1))]
    #[test_case("-1%", None)]
    #[test_case("lots", None)]
    fn percentages(text: &str, want: Option<f64>) {
        assert_eq!(percent(text), want);
    }

    #[test]
    fn metric_and_metrics_together_compare_all() {
        let i = inputs(&[
            ("metric", Value::String("output_tok_s".into())),
            (
                "metrics",
                Value::from_json(serde_json::json!(["ttft_ms", "itl_ms"])),
            ),
            ("fail-on", Value::String("never".into())),
        ]);
        let s = read(&i).unwrap();
        assert_eq!(s.metrics, ["output_tok_s", "ttft_ms", "itl_ms"]);
        assert_eq!(s.fail_on, FailOn::Never);
        assert_eq!(s.baseline, "window");
    }

    #[test]
    fn the_summary_is_a_table_with_a_row_per_metric() {
        let c = Comparison {
            metric: "output_tok_s".into(),
            unit: "tok/s".into(),
            direction: Direction::Higher,
            verdict: crate::compare::Verdict::Regression,
            current: Some(38.0),
            baseline_value: Some(89.5),
            ratio: Some(0.4246),
            change_pct: Some(-57.54),
            p_value: Some(0.0004),
            test: None,
            threshold_pct: 5.0,
            baseline: "the pinned baseline `nccl`".into(),
            differences: Vec::new(),
            explanation: String::new(),
        };
        let md = summary_table(std::slice::from_ref(&c), &BTreeMap::new());
        let row = md.lines().nth(2).unwrap();
        assert!(
            row.starts_with("| `output_tok_s` | **regression** |"),
            "{md}"
        );
        assert!(row.contains("| -57.5% | 0.425 | 5.0% | 0.000 |"), "{md}");
        assert!(md.contains("Baseline: the pinned baseline `nccl`."), "{md}");
        assert!(
            explain(&c, None).starts_with("output_tok_s: regression — "),
            "{}",
            explain(&c, None)
        );
    }

    #[test]
    fn the_compared_figure_is_named_as_the_benchmark_table_names_it() {
        let c = Comparison {
            metric: "output_tok_s".into(),
            unit: "tok/s".into(),
            direction: Direction::Higher,
            verdict: crate::compare::Verdict::Unchanged,
            current: Some(90.03),
            baseline_value: Some(89.8),
            ratio: Some(1.0026),
            change_pct: Some(0.26),
            p_value: None,
            test: None,
            threshold_pct: 5.0,
            baseline: "the previous comparable run".into(),
            differences: Vec::new(),
            explanation: String::new(),
        };
        let mode = crate::bench::Mode::SingleStream;
        let meaning = crate::bench::report::metric_meaning("output_tok_s", &mode);
        let line = explain(&c, meaning);
        assert!(
            line.starts_with(
                "output_tok_s (decode tok/s, per-request median): unchanged — 90.03 tok/s vs"
            ),
            "{line}"
        );
        let meanings = BTreeMap::from([("output_tok_s".to_string(), meaning.unwrap().to_string())]);
        let md = summary_table(std::slice::from_ref(&c), &meanings);
        assert!(
            md.contains("| `output_tok_s` (decode tok/s, per-request median) | **unchanged** |"),
            "{md}"
        );
    }

    #[test]
    fn nothing_to_compare_is_an_error_that_shows_how() {
        let e = read(&inputs(&[])).unwrap_err();
        assert!(e.contains("`metric: output_tok_s`"), "{e}");
    }

    #[test]
    fn a_bad_tolerance_names_the_value() {
        let i = inputs(&[
            ("metric", Value::String("x".into())),
            ("tolerance", Value::String("much".into())),
        ]);
        assert!(read(&i).unwrap_err().contains("`much`"));
    }
}
