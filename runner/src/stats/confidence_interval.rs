//! The t-based confidence interval for a mean: x̄ ± t(1 − α/2, n − 1) · s / √n (Student 1908;
//! NIST/SEMATECH e-Handbook of Statistical Methods, §7.2.2.1).
//!
//! The t quantile comes from `statrs` (its `StudentsT::inverse_cdf`): writing an inverse
//! incomplete beta function by hand is error-prone, and statrs is a small, pure-Rust crate with
//! its default features (nalgebra, rand) turned off.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::Summary;

/// A two-sided interval at a confidence level.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
    /// E.g. 0.95.
    pub level: f64,
}

impl Interval {
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// The `level` (e.g. 0.95) confidence interval for the mean of `samples`; `None` for fewer
/// than two samples or a level outside (0, 1).
pub fn mean_confidence_interval(samples: &[f64], level: f64) -> Option<Interval> {
    let s = Summary::of(samples)?;
    #[allow(clippy::cast_precision_loss)]
    let n = s.n as f64;
    let half = t_quantile(level, n - 1.0)? * s.sd / n.sqrt();
    Some(Interval {
        low: s.mean - half,
        high: s.mean + half,
        level,
    })
}

/// The two-sided p-value of the one-sample t test of "the mean of `samples` is `mu`"
/// (t = (x̄ − μ) / (s/√n), n − 1 degrees of freedom; same source). `None` for fewer than two
/// samples; samples without spread give p = 1 at μ and 0 elsewhere.
pub fn one_sample_t_test(samples: &[f64], mu: f64) -> Option<f64> {
    let s = Summary::of(samples)?;
    if s.n < 2 || !mu.is_finite() {
        return None;
    }
    #[allow(clippy::cast_precision_loss)]
    let n = s.n as f64;
    let se = s.sd / n.sqrt();
    if se == 0.0 {
        return Some(if s.mean == mu { 1.0 } else { 0.0 });
    }
    t_two_sided_p((s.mean - mu) / se, n - 1.0)
}

/// t(1 − α/2, df) for a two-sided `level`.
pub(super) fn t_quantile(level: f64, df: f64) -> Option<f64> {
    let usable = level > 0.0 && level < 1.0 && df >= 1.0;
    if !usable {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(t.inverse_cdf(0.5 + level / 2.0))
}

/// The two-sided p-value of a t statistic with `df` degrees of freedom.
pub(super) fn t_two_sided_p(t: f64, df: f64) -> Option<f64> {
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((2.0 * dist.sf(t.abs())).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // NIST e-Handbook §1.3.6.7.2 (critical values of t): 0.975 column.
        assert!((t_quantile(0.95, 4.0).unwrap() - 2.776).abs() < 1e-3);
        assert!((t_quantile(0.95, 9.0).unwrap() - 2.262).abs() < 1e-3);
        assert!((t_quantile(0.99, 2.0).unwrap() - 9.925).abs() < 1e-3);
        assert_eq!(t_quantile(1.0, 4.0), None);
        assert_eq!(t_quantile(0.95, 0.0), None);
    }

    #[test]
    fn interval_for_five_samples() {
        // By hand: mean 89.5, s = √0.625, t(0.975, 4) = 2.7764451 → half-width 0.981622.
        let ci = mean_confidence_interval(&[90.0, 89.0, 88.5, 89.5, 90.5], 0.95).unwrap();
        assert!((ci.low - (89.5 - 0.981_622)).abs() < 1e-5, "{ci:?}");
        assert!((ci.high - (89.5 + 0.981_622)).abs() < 1e-5, "{ci:?}");
        assert!(ci.contains(89.5) && !ci.contains(91.0));
        assert_eq!(mean_confidence_interval(&[1.0], 0.95), None);
    }

    #[test]
    fn one_sample_t_by_hand() {
        // mean 89.5, s/√n = √0.625/√5 = 0.353553; μ = 88.5 → t = 2.828427, 4 df:
        // p = 0.047421 (two-sided).
        let p = one_sample_t_test(&[90.0, 89.0, 88.5, 89.5, 90.5], 88.5).unwrap();
        assert!((p - 0.047_421).abs() < 1e-5, "{p}");
        assert_eq!(one_sample_t_test(&[1.0], 1.0), None);
    }

    #[test]
    fn p_values_of_t() {
        // t = 2.776445 with 4 df is the 0.975 quantile: two-sided p = 0.05.
        assert!((t_two_sided_p(2.776_445_105, 4.0).unwrap() - 0.05).abs() < 1e-6);
        assert!((t_two_sided_p(0.0, 4.0).unwrap() - 1.0).abs() < 1e-12);
    }
}
