//! Descriptive statistics with the exact definitions the Python serving benchmarks use, so a
//! number gpuflow prints can be compared with vLLM's or SGLang's to the digit: numpy's
//! `percentile` (linear method, including its rounding), `mean`, and `std` with `ddof=0`.
//! Across repeated runs: a t-based 95% confidence interval and the coefficient of variation.
//!
//! Knows nothing about requests or HTTP: it sees plain `f64` samples.

use serde::Serialize;

/// mean, median, std, p90, p95, p99 of one metric, as vLLM reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// How many samples were summarised (0: every field is 0, as numpy-based tools print).
    pub count: usize,
    pub mean: f64,
    pub median: f64,
    /// Population standard deviation (`np.std`, `ddof=0`).
    pub std: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summarises `values` (any order). An empty input gives all zeros, as vLLM's
    /// `np.mean(x or 0)` does.
    pub fn of(values: &[f64]) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Self {
            count: sorted.len(),
            mean: mean(&sorted),
            median: percentile_sorted(&sorted, 50.0),
            std: std_dev(&sorted),
            p90: percentile_sorted(&sorted, 90.0),
            p95: percentile_sorted(&sorted, 95.0),
            p99: percentile_sorted(&sorted, 99.0),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        }
    }
}

pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

/// `np.std(values)`: the population standard deviation.
pub fn std_dev(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let m = mean(values);
    (values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / values.len() as f64).sqrt()
}

/// `np.percentile(values, p)` with the default linear method; `sorted` must be ascending.
///
/// numpy computes the virtual index as `n·q + (1 − q) − 1` (its general `alpha`/`beta` form
/// with both 1) and interpolates from the upper neighbour when the fraction is ≥ 0.5; both
/// change the last digits, so both are reproduced rather than the textbook `q·(n − 1)`.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    // numpy's `linear` method is its `alpha = beta = 1` case.
    const ALPHA: f64 = 1.0;
    const BETA: f64 = 1.0;
    let q = p / 100.0;
    let virtual_index = n as f64 * q + (ALPHA + q * (1.0 - ALPHA - BETA)) - 1.0;
    let last = (n - 1) as f64;
    let virtual_index = virtual_index.clamp(0.0, last);
    let previous = virtual_index.floor();
    let next = (previous + 1.0).min(last);
    let gamma = virtual_index - previous;
    // Indices are whole numbers in [0, n−1] here, so the casts are exact.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let (a, b) = (sorted[previous as usize], sorted[next as usize]);
    let diff = b - a;
    if gamma >= 0.5 {
        b - diff * (1.0 - gamma)
    } else {
        a + diff * gamma
    }
}

/// The spread of one metric over repeated runs: what a reader needs to tell a change from noise.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AcrossRuns {
    /// Each run's value, in run order.
    pub values: Vec<f64>,
    pub median: f64,
    pub mean: f64,
    /// The 95% confidence interval of the mean (Student's t, sample std); equal to the mean
    /// with a single run, where no interval can be given.
    pub ci95_low: f64,
    pub ci95_high: f64,
    /// Sample standard deviation over the mean (0 with one run or a zero mean).
    pub cv: f64,
}

impl AcrossRuns {
    pub fn of(values: Vec<f64>) -> Self {
        let n = values.len();
        if n == 0 {
            return Self::default();
        }
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let m = mean(&values);
        let (half, cv) = if n < 2 {
            (0.0, 0.0)
        } else {
            let s = sample_std(&values);
            let half = t_975(n - 1) * s / (n as f64).sqrt();
            (half, if m == 0.0 { 0.0 } else { s / m.abs() })
        };
        Self {
            median: percentile_sorted(&sorted, 50.0),
            mean: m,
            ci95_low: m - half,
            ci95_high: m + half,
            cv,
            values,
        }
    }
}

/// Standard deviation with `ddof = 1`, the estimator a confidence interval needs.
fn sample_std(values: &[f64]) -> f64 {
    let m = mean(values);
    (values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (values.len() - 1) as f64).sqrt()
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom: the two-sided 95% factor.
///
/// A table up to 30 (the usual `runs` counts), then the Cornish–Fisher expansion around the
/// normal quantile, which is within 2·10⁻⁴ of the exact value from df 30 on. A statistics
/// crate (statrs) would pull in a linear-algebra library for this one number.
pub fn t_975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706_204, 4.302_653, 3.182_446, 2.776_445, 2.570_582, 2.446_912, 2.364_624, 2.306_004,
        2.262_157, 2.228_139, 2.200_985, 2.178_813, 2.160_369, 2.144_787, 2.131_450, 2.119_905,
        2.109_816, 2.100_922, 2.093_024, 2.085_963, 2.079_614, 2.073_873, 2.068_658, 2.063_899,
        2.059_539, 2.055_529, 2.051_831, 2.048_407, 2.045_230, 2.042_272,
    ];
    if df == 0 {
        return f64::INFINITY;
    }
    if df <= TABLE.len() {
        return TABLE[df - 1];
    }
    let z: f64 = 1.959_964;
    let n = df as f64;
    let (z3, z5) = (z.powi(3), z.powi(5));
    z + (z3 + z) / (4.0 * n) + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * n * n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use test_case::test_case;

    fn ten() -> Vec<f64> {
        (1..=10).map(f64::from).collect()
    }

    // Expected values are numpy 1.26's `np.percentile(a, p)` for these arrays.
    #[test_case(&[10.0, 7.0, 4.0, 3.0, 2.0, 1.0], 50.0, 3.5)]
    #[test_case(&[1.0, 2.0, 3.0, 4.0], 90.0, 3.7)]
    #[test_case(&[1.0, 2.0, 3.0, 4.0], 25.0, 1.75)]
    #[test_case(&[5.0], 99.0, 5.0)]
    #[test_case(&[1.0, 100.0], 99.0, 99.01)]
    #[test_case(&[0.1, 0.2, 0.3], 95.0, 0.29)]
    fn percentiles_match_numpy(values: &[f64], p: f64, expected: f64) {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let got = percentile_sorted(&sorted, p);
        assert!((got - expected).abs() < 1e-12, "p{p} of {values:?}: {got}");
    }

    #[test]
    fn summary_of_one_to_ten() {
        let s = Summary::of(&ten());
        assert_eq!(s.count, 10);
        assert!((s.mean - 5.5).abs() < 1e-12);
        assert!((s.median - 5.5).abs() < 1e-12);
        // np.std(range(1, 11)) = sqrt(8.25)
        assert!((s.std - 8.25_f64.sqrt()).abs() < 1e-12);
        assert!((s.p90 - 9.1).abs() < 1e-12);
        assert!((s.p95 - 9.55).abs() < 1e-12);
        assert!((s.p99 - 9.91).abs() < 1e-12);
        assert_eq!((s.min, s.max), (1.0, 10.0));
    }

    #[test]
    fn empty_summary_is_zero() {
        assert_eq!(Summary::of(&[]), Summary::default());
    }

    #[test]
    fn across_runs_interval_and_variation() {
        let r = AcrossRuns::of(vec![10.0, 12.0, 11.0, 13.0, 9.0]);
        assert!((r.mean - 11.0).abs() < 1e-12);
        assert!((r.median - 11.0).abs() < 1e-12);
        // s = sqrt(2.5); half-width = t(4) · s / sqrt(5)
        let half = 2.776_445 * 2.5_f64.sqrt() / 5.0_f64.sqrt();
        assert!((r.ci95_high - (11.0 + half)).abs() < 1e-9);
        assert!((r.ci95_low - (11.0 - half)).abs() < 1e-9);
        assert!((r.cv - 2.5_f64.sqrt() / 11.0).abs() < 1e-12);
        let one = AcrossRuns::of(vec![7.0]);
        assert_eq!((one.ci95_low, one.ci95_high, one.cv), (7.0, 7.0, 0.0));
    }

    #[test]
    fn t_quantile_is_continuous_past_the_table() {
        // Exact: t(0.975, 31) = 2.039513, t(0.975, 60) = 2.000298, t(0.975, 120) = 1.979930.
        assert!((t_975(31) - 2.039_513).abs() < 2e-4);
        assert!((t_975(60) - 2.000_298).abs() < 1e-4);
        assert!((t_975(120) - 1.979_930).abs() < 1e-4);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        #[test]
        fn percentiles_are_ordered_and_bounded(values in prop::collection::vec(-1e6f64..1e6, 1..200)) {
            let s = Summary::of(&values);
            prop_assert!(s.min <= s.median && s.median <= s.p90);
            prop_assert!(s.p90 <= s.p95 && s.p95 <= s.p99 && s.p99 <= s.max);
            prop_assert!(s.std >= 0.0);
        }
    }
}
