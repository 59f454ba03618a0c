//! The decision: one metric's current samples against a resolved baseline.
//!
//! Strategy. A verdict of regression or improvement needs two things at once:
//! 1. an **effect** beyond the threshold: the change, oriented so that positive is better, is
//!    larger than `tolerance` (5%) — or than `noise_factor` (2) times the baseline's own
//!    spread when that is wider, so a noisy baseline does not cry wolf;
//! 2. **evidence** that it is not noise, from the test the data allows: Mann-Whitney U on the
//!    raw samples when both sides have at least 5; a prediction interval when the baseline is
//!    a window of at least 3 past runs; a one-sample t test against a fixed number with at
//!    least 5 samples. With fewer samples there is no test, and only a gross change (beyond
//!    `gross_factor` (3) times the threshold) is called.
//!
//! A change within the threshold is `unchanged`; beyond it without evidence, `inconclusive`.
//!
//! Everything is computed on ratios (log scale for the parametric tests): the metrics are
//! positive and their changes multiplicative, and it makes a metric and its inverse (tok/s vs
//! s/tok, the same runs) give the same verdict — a property the tests check.

use serde::{Deserialize, Serialize};

use super::value_text::format_value;
use super::{Baseline, BaselineData, Verdict};
use crate::stats::{log_spread, mann_whitney_u, one_sample_t_test, prediction_interval};
use crate::store::{Direction, FieldDiff};

/// The knobs of a comparison; [`Default`] gives the documented defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareOptions {
    /// The smallest relative change that counts (0.05 = 5%).
    pub tolerance: f64,
    /// Significance level of the tests.
    pub alpha: f64,
    /// The threshold is at least this many times the baseline's spread (sd of ln values).
    pub noise_factor: f64,
    /// Without a test, a change beyond this many thresholds is called anyway.
    pub gross_factor: f64,
    /// Samples needed on each side for Mann-Whitney U (and against a fixed number).
    pub min_samples: usize,
    /// Past runs a window needs for its prediction interval.
    pub min_window: usize,
    /// Compare even when identity fields differ.
    pub allow_incomparable: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            tolerance: 0.05,
            alpha: 0.05,
            noise_factor: 2.0,
            gross_factor: 3.0,
            min_samples: 5,
            min_window: 3,
            allow_incomparable: false,
        }
    }
}

/// This run's side of one metric.
#[derive(Clone, Copy, Debug)]
pub struct MetricInput<'a> {
    pub name: &'a str,
    pub unit: &'a str,
    pub direction: Direction,
    pub samples: &'a [f64],
}

/// Which evidence a verdict rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Test {
    MannWhitneyU,
    PredictionInterval,
    OneSampleT,
    /// No test was possible; only the size of the change.
    GrossChange,
}

impl Test {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MannWhitneyU => "Mann-Whitney U",
            Self::PredictionInterval => "prediction interval",
            Self::OneSampleT => "one-sample t test",
            Self::GrossChange => "gross-change rule",
        }
    }
}

/// One metric's verdict and the numbers behind it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
    pub verdict: Verdict,
    /// This run's central value ([`center`] of its samples).
    pub current: Option<f64>,
    /// The baseline's central value.
    pub baseline_value: Option<f64>,
    /// Current over baseline, as measured (not oriented).
    pub ratio: Option<f64>,
    /// The change in percent, signed so that positive is better.
    pub change_pct: Option<f64>,
    /// The test's two-sided p-value, when a test applied.
    pub p_value: Option<f64>,
    pub test: Option<Test>,
    /// The effect-size threshold used, in percent (the tolerance, or wider for noise).
    pub threshold_pct: f64,
    /// What was compared with, in words.
    pub baseline: String,
    /// Identity fields in which the baseline's environment differs.
    pub differences: Vec<FieldDiff>,
    /// One line for a person.
    pub explanation: String,
}

/// Relative slack when comparing a change with a threshold: a change equal to it up to
/// rounding counts as within it, whichever way the ratio was computed.
const EPS: f64 = 1e-9;

/// The central value of samples: the median, with the two middle values of an even count
/// combined geometrically (√(a·b)) so the centre of 1/x is exactly 1/centre of x.
pub fn center(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() || samples.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        let (a, b) = (sorted[mid - 1], sorted[mid]);
        if a > 0.0 && b > 0.0 {
            (a * b).sqrt()
        } else {
            f64::midpoint(a, b)
        }
    })
}

/// Judges one metric. `baseline` is `None` when nothing comparable was found.
pub fn compare(
    metric: &MetricInput<'_>,
    baseline: Option<&Baseline>,
    opts: &CompareOptions,
) -> Comparison {
    let mut out = Comparison {
        metric: metric.name.to_string(),
        unit: metric.unit.to_string(),
        direction: metric.direction,
        verdict: Verdict::Inconclusive,
        current: center(metric.samples),
        baseline_value: None,
        ratio: None,
        change_pct: None,
        p_value: None,
        test: None,
        threshold_pct: opts.tolerance * 100.0,
        baseline: String::new(),
        differences: Vec::new(),
        explanation: String::new(),
    };
    let Some(baseline) = baseline else {
        out.verdict = Verdict::NoBaseline;
        out.baseline = "none".into();
        out.explanation = format!(
            "{} has no comparable earlier result; this run starts its series",
            metric.name
        );
        return out;
    };
    out.baseline.clone_from(&baseline.description);
    out.differences.clone_from(&baseline.differences);
    out.baseline_value = baseline_center(&baseline.data);

    judge(metric, baseline, opts, &mut out);

    if !out.differences.is_empty() {
        let fields = describe_differences(&out.differences);
        if opts.allow_incomparable {
            out.explanation.push_str(&format!(
                " (compared across a different environment: {fields})"
            ));
        } else {
            out.verdict = Verdict::Incomparable;
            out.explanation = format!(
                "{} was not judged: the baseline ran in a different environment ({fields}); set `allow-incomparable: true` to compare anyway",
                metric.name
            );
        }
    }
    out
}

fn judge(
    metric: &MetricInput<'_>,
    baseline: &Baseline,
    opts: &CompareOptions,
    out: &mut Comparison,
) {
    let name = metric.name;
    let (Some(cur), Some(base)) = (out.current, out.baseline_value) else {
        out.explanation = if out.current.is_none() {
            format!("{name} has no samples in this run")
        } else {
            format!("{name} has no samples in the baseline")
        };
        return;
    };
    if cur <= 0.0 || base <= 0.0 {
        out.explanation = format!(
            "{name} is {} against {}: a ratio needs positive values",
            format_value(cur, metric.unit),
            format_value(base, metric.unit)
        );
        return;
    }
    let ratio = cur / base;
    // Oriented so that > 1 is better; for lower-is-better it is base/cur, the same number the
    // inverse metric (1/x, higher-is-better) would give.
    let better = match metric.direction {
        Direction::Higher => ratio,
        Direction::Lower => base / cur,
    };
    let change = better - 1.0;
    out.ratio = Some(ratio);
    out.change_pct = Some(change * 100.0);

    let threshold = threshold(&baseline.data, opts);
    out.threshold_pct = threshold * 100.0;

    let (test, p) = evidence(metric.samples, cur, &baseline.data, opts);
    out.test = test;
    out.p_value = p;

    let size = change.abs();
    let said = format!(
        "{name} is {} against {} ({:+.1}%, ratio {:.2})",
        format_value(cur, metric.unit),
        format_value(base, metric.unit),
        change * 100.0,
        ratio
    );
    let worse_or_better = if change < 0.0 {
        Verdict::Regression
    } else {
        Verdict::Improvement
    };
    let threshold_txt = format!("{:.1}% threshold", threshold * 100.0);
    if size <= threshold * (1.0 + EPS) {
        out.verdict = Verdict::Unchanged;
        out.explanation = format!("{said}: within the {threshold_txt}");
        return;
    }
    match (test, p) {
        (Some(test), Some(p)) if p < opts.alpha => {
            out.verdict = worse_or_better;
            out.explanation = format!(
                "{said}: beyond the {threshold_txt}, and {} p = {} < {}",
                test.as_str(),
                fmt_p(p),
                opts.alpha
            );
        }
        (Some(test), Some(p)) => {
            out.explanation = format!(
                "{said}: beyond the {threshold_txt}, but {} p = {} is not below {}, so it may be noise",
                test.as_str(),
                fmt_p(p),
                opts.alpha
            );
        }
        _ if size > opts.gross_factor * threshold * (1.0 + EPS) => {
            out.verdict = worse_or_better;
            out.test = Some(Test::GrossChange);
            out.explanation = format!(
                "{said}: too few samples for a test, but more than {}× the {threshold_txt}",
                opts.gross_factor
            );
        }
        _ => {
            out.test = None;
            out.explanation = format!(
                "{said}: beyond the {threshold_txt}, but too few samples to tell it from noise (a test needs {} samples on each side or a window of {} runs)",
                opts.min_samples, opts.min_window
            );
        }
    }
}

/// The smallest change that counts: the tolerance, or the baseline's own noise times the
/// noise factor when that is larger (a fixed value has no noise).
fn threshold(baseline: &BaselineData, opts: &CompareOptions) -> f64 {
    let noise = match baseline {
        BaselineData::Samples(s) => log_spread(s),
        BaselineData::Window(runs) => log_spread(&run_centers(runs)),
        BaselineData::Fixed(_) => None,
    };
    noise.map_or(opts.tolerance, |n| {
        opts.tolerance.max(opts.noise_factor * n)
    })
}

/// The test the data allows and its two-sided p-value.
fn evidence(
    current: &[f64],
    cur_center: f64,
    baseline: &BaselineData,
    opts: &CompareOptions,
) -> (Option<Test>, Option<f64>) {
    let mwu = |base: &[f64]| {
        if current.len() >= opts.min_samples && base.len() >= opts.min_samples {
            mann_whitney_u(current, base).map(|r| (Some(Test::MannWhitneyU), Some(r.p_two_sided)))
        } else {
            None
        }
    };
    let found = match baseline {
        BaselineData::Samples(base) => mwu(base),
        BaselineData::Window(runs) if runs.len() >= opts.min_window => {
            let logs: Vec<f64> = run_centers(runs).iter().map(|c| c.ln()).collect();
            let level = 1.0 - opts.alpha;
            prediction_interval(&logs, cur_center.ln(), level)
                .map(|pi| (Some(Test::PredictionInterval), Some(pi.p_value)))
        }
        BaselineData::Window(runs) => mwu(&runs.concat()),
        BaselineData::Fixed(value) if current.len() >= opts.min_samples => {
            let logs: Vec<f64> = current.iter().map(|v| v.ln()).collect();
            one_sample_t_test(&logs, value.ln()).map(|p| (Some(Test::OneSampleT), Some(p)))
        }
        BaselineData::Fixed(_) => None,
    };
    found.unwrap_or((None, None))
}

fn run_centers(runs: &[Vec<f64>]) -> Vec<f64> {
    runs.iter().filter_map(|r| center(r)).collect()
}

fn baseline_center(data: &BaselineData) -> Option<f64> {
    match data {
        BaselineData::Samples(s) => center(s),
        BaselineData::Window(runs) => center(&run_centers(runs)),
        BaselineData::Fixed(v) => Some(*v),
    }
}

fn describe_differences(diffs: &[FieldDiff]) -> String {
    diffs
        .iter()
        .map(FieldDiff::describe)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A metric as the benchmark's table names the figure a comparison judges:
/// `output_tok_s (decode tok/s, per-request median)`, or the bare name when the benchmark did
/// not say what it is (a scripted benchmark's own metric).
pub fn metric_title(metric: &str, meaning: Option<&str>) -> String {
    match meaning {
        Some(m) => format!("{metric} ({m})"),
        None => metric.to_string(),
    }
}

fn fmt_p(p: f64) -> String {
    if p < 0.0001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn samples(b: Vec<f64>) -> Baseline {
        Baseline {
            description: "test".into(),
            data: BaselineData::Samples(b),
            differences: Vec::new(),
        }
    }

    fn tok_s(samples: &[f64]) -> MetricInput<'_> {
        MetricInput {
            name: "output_tok_s",
            unit: "tok/s",
            direction: Direction::Higher,
            samples,
        }
    }

    #[test]
    fn write_up_regression_38_against_89_5() {
        let base = samples(vec![89.1, 89.7, 89.4, 90.0, 89.5]);
        let c = compare(
            &tok_s(&[38.2, 37.9, 38.0, 38.4, 37.8]),
            Some(&base),
            &CompareOptions::default(),
        );
        assert_eq!(c.verdict, Verdict::Regression, "{}", c.explanation);
        assert!((c.ratio.unwrap() - 0.4246).abs() < 0.001, "{c:?}");
        assert_eq!(c.test, Some(Test::MannWhitneyU));
        assert!((c.p_value.unwrap() - 2.0 / 252.0).abs() < 1e-12);
        assert!(
            c.explanation.contains("38.00 tok/s against 89.50 tok/s"),
            "{}",
            c.explanation
        );
    }

    #[test]
    fn center_is_the_median_and_inverts_exactly() {
        assert_eq!(center(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(center(&[1.0, 4.0]), Some(2.0));
        assert_eq!(center(&[]), None);
    }

    #[test]
    fn lower_is_better_flips_the_sign() {
        let base = samples(vec![100.0, 101.0, 99.0, 100.5, 99.5]);
        let m = MetricInput {
            name: "ttft_ms",
            unit: "ms",
            direction: Direction::Lower,
            samples: &[130.0, 131.0, 129.0, 130.5, 129.5],
        };
        let c = compare(&m, Some(&base), &CompareOptions::default());
        assert_eq!(c.verdict, Verdict::Regression);
        assert!(c.change_pct.unwrap() < 0.0 && c.ratio.unwrap() > 1.0);
    }

    #[test]
    fn noisy_baselines_widen_the_threshold() {
        // ±10% noise: a 7% drop is within twice the spread.
        let base = samples(vec![80.0, 90.0, 100.0, 110.0, 95.0, 85.0, 105.0]);
        let c = compare(
            &tok_s(&[88.0, 89.0, 87.0, 90.0, 86.0]),
            Some(&base),
            &CompareOptions::default(),
        );
        assert!(c.threshold_pct > 15.0, "{c:?}");
        assert_eq!(c.verdict, Verdict::Unchanged);
    }

    fn verdict_of(direction: Direction, cur: &[f64], base: &BaselineData) -> Comparison {
        let b = Baseline {
            description: "p".into(),
            data: base.clone(),
            differences: Vec::new(),
        };
        compare(
            &MetricInput {
                name: "m",
                unit: "",
                direction,
                samples: cur,
            },
            Some(&b),
            &CompareOptions::default(),
        )
    }

    fn invert(v: &[f64]) -> Vec<f64> {
        v.iter().map(|x| 1.0 / x).collect()
    }

    fn positive_samples(max_len: usize) -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(50.0f64..150.0, 1..max_len)
    }

    fn baseline_data() -> impl Strategy<Value = BaselineData> {
        prop_oneof![
            positive_samples(12).prop_map(BaselineData::Samples),
            prop::collection::vec(positive_samples(6), 1..8).prop_map(BaselineData::Window),
            (50.0f64..150.0).prop_map(BaselineData::Fixed),
        ]
    }

    fn inverted(data: &BaselineData) -> BaselineData {
        match data {
            BaselineData::Samples(s) => BaselineData::Samples(invert(s)),
            BaselineData::Window(runs) => {
                BaselineData::Window(runs.iter().map(|r| invert(r)).collect())
            }
            BaselineData::Fixed(v) => BaselineData::Fixed(1.0 / v),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// Higher-is-better values x and lower-is-better values 1/x are the same measurement
        /// (tok/s and s/tok): the verdict, change and p-value must agree.
        #[test]
        fn verdicts_are_symmetric_under_direction_and_inversion(
            cur in positive_samples(12),
            base in baseline_data(),
        ) {
            let a = verdict_of(Direction::Higher, &cur, &base);
            let b = verdict_of(Direction::Lower, &invert(&cur), &inverted(&base));
            prop_assert_eq!(a.verdict, b.verdict, "{} | {}", a.explanation, b.explanation);
            prop_assert!((a.change_pct.unwrap() - b.change_pct.unwrap()).abs() < 1e-6);
            prop_assert_eq!(a.test, b.test);
            if let (Some(p), Some(q)) = (a.p_value, b.p_value) {
                prop_assert!((p - q).abs() < 1e-6);
                prop_assert!((0.0..=1.0).contains(&p));
            }
        }

    }
}
