//! How noisy a set of samples is, relative to its size.
//!
//! The coefficient of variation is sd / mean with the sample standard deviation (divisor
//! n − 1), as `scipy.stats.variation(x, ddof=1)`. The log spread, the standard deviation of
//! ln(x), is what the verdicts widen their threshold by: for small spreads it equals the CV,
//! and unlike the CV it is the same for a metric and its inverse (tok/s and s/tok), so a
//! latency and a throughput measured from the same runs are judged alike (Limpert, Stahel &
//! Abbt 2001, "Log-normal distributions across the sciences", BioScience 51(5)).

use super::Summary;

/// sd / |mean|; `None` for fewer than two samples or a zero mean.
pub fn coefficient_of_variation(samples: &[f64]) -> Option<f64> {
    let s = Summary::of(samples)?;
    (s.n >= 2 && s.mean != 0.0).then(|| s.sd / s.mean.abs())
}

/// The sample standard deviation of ln(x); `None` for fewer than two samples or any value
/// that is not positive (a logarithm needs one).
pub fn log_spread(samples: &[f64]) -> Option<f64> {
    if samples.len() < 2 || samples.iter().any(|v| *v <= 0.0 || !v.is_finite()) {
        return None;
    }
    let logs: Vec<f64> = samples.iter().map(|v| v.ln()).collect();
    Summary::of(&logs).map(|s| s.sd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cv_matches_scipy_docs() {
        // scipy.stats.variation docs: variation([1, 2, 3, 4, 5], ddof=1) = 0.5270462766947299.
        let cv = coefficient_of_variation(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert!((cv - 0.527_046_276_694_729_9).abs() < 1e-12);
        assert_eq!(coefficient_of_variation(&[3.0]), None);
        assert_eq!(coefficient_of_variation(&[-1.0, 1.0]), None);
    }

    #[test]
    fn log_spread_is_the_same_for_the_inverse() {
        let x = [82.0, 81.5, 82.4, 83.0, 81.9];
        let inv: Vec<f64> = x.iter().map(|v| 1.0 / v).collect();
        let (a, b) = (log_spread(&x).unwrap(), log_spread(&inv).unwrap());
        assert!((a - b).abs() < 1e-12);
        // Close to the CV for small spreads.
        assert!((a - coefficient_of_variation(&x).unwrap()).abs() < 1e-4);
        assert_eq!(log_spread(&[1.0, 0.0]), None);
    }
}
