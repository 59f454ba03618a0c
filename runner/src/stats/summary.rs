//! The summary recorded with every metric: n, mean, sample standard deviation, median,
//! quartiles, min and max.
//!
//! Quantiles use the linear interpolation numpy uses by default (`numpy.quantile(...,
//! method="linear")`, Hyndman & Fan 1996, definition 7): the p-quantile of n sorted values sits
//! at position h = (n − 1)·p, interpolated between its neighbours. It is what most people will
//! check our numbers against.

use serde::{Deserialize, Serialize};

/// Descriptive statistics of one metric's samples.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (divisor n − 1); 0 when n < 2, where no spread is measurable.
    pub sd: f64,
    pub median: f64,
    /// First quartile (25%).
    pub q1: f64,
    /// Third quartile (75%).
    pub q3: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// `None` for no samples or any non-finite one: a NaN would make every statistic after it
    /// meaningless, and the caller should say which sample was bad.
    pub fn of(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() || samples.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = mean(&sorted);
        let sd = if n < 2 {
            0.0
        } else {
            let ss: f64 = sorted.iter().map(|v| (v - mean).powi(2)).sum();
            #[allow(clippy::cast_precision_loss)]
            (ss / (n - 1) as f64).sqrt()
        };
        Some(Self {
            n,
            mean,
            sd,
            median: quantile(&sorted, 0.5),
            q1: quantile(&sorted, 0.25),
            q3: quantile(&sorted, 0.75),
            min: sorted[0],
            max: sorted[n - 1],
        })
    }
}

#[allow(clippy::cast_precision_loss)]
pub(crate) fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The p-quantile (0 ≤ p ≤ 1) of already sorted values, numpy's `linear` method.
///
/// # Panics
/// When `sorted` is empty: callers check first, as [`Summary::of`] does.
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    assert!(!sorted.is_empty(), "quantile of no values");
    let p = p.clamp(0.0, 1.0);
    #[allow(clippy::cast_precision_loss)]
    let h = (sorted.len() - 1) as f64 * p;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - h.floor()) * (sorted[hi] - sorted[lo])
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use test_case::test_case;

    use super::*;

    // Expected values from numpy's documentation of `numpy.quantile` / `numpy.percentile`
    // (a = [[10, 7, 4], [3, 2, 1]] flattened: percentile 50 → 3.5) and by hand with
    // h = (n − 1)p.
    #[test_case(&[1.0, 2.0, 3.0, 4.0, 7.0, 10.0], 0.5, 3.5; "numpy docs percentile 50")]
    #[test_case(&[1.0, 2.0, 3.0, 4.0], 0.25, 1.75; "h = 0.75")]
    #[test_case(&[1.0, 2.0, 3.0, 4.0], 0.75, 3.25; "h = 2.25")]
    #[test_case(&[5.0], 0.9, 5.0; "one value")]
    #[test_case(&[1.0, 3.0], 1.0, 3.0; "maximum")]
    fn linear_quantiles_match_numpy(sorted: &[f64], p: f64, expected: f64) {
        assert!((quantile(sorted, p) - expected).abs() < 1e-12);
    }

    #[test]
    fn summary_of_five_runs() {
        // By hand: mean 89.5; deviations −1, −0.5, 0, 0.5, 1 → ss 2.5, sd √(2.5/4).
        let s = Summary::of(&[90.0, 89.0, 88.5, 89.5, 90.5]).unwrap();
        assert_eq!(s.n, 5);
        assert!((s.mean - 89.5).abs() < 1e-12);
        assert!((s.sd - (2.5f64 / 4.0).sqrt()).abs() < 1e-12);
        assert_eq!(
            (s.median, s.q1, s.q3, s.min, s.max),
            (89.5, 89.0, 90.0, 88.5, 90.5)
        );
    }

    #[test]
    fn no_or_bad_samples_give_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        assert_eq!(Summary::of(&[4.0]).unwrap().sd, 0.0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn order_statistics_are_ordered(values in prop::collection::vec(-1e6f64..1e6, 1..40)) {
            let s = Summary::of(&values).unwrap();
            prop_assert!(s.min <= s.q1 && s.q1 <= s.median && s.median <= s.q3 && s.q3 <= s.max);
            prop_assert!(s.min <= s.mean + 1e-6 && s.mean <= s.max + 1e-6);
            prop_assert!(s.sd >= 0.0);
        }
    }
}
