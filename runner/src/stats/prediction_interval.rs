//! The prediction interval for one new observation from the same normal population as a
//! history of n values: x̄ ± t(1 − α/2, n − 1) · s · √(1 + 1/n) (Hahn & Meeker 1991,
//! "Statistical Intervals", §4.4; NIST/SEMATECH e-Handbook §7.2.6.3 gives the same form).
//!
//! The matching p-value treats T = (x − x̄) / (s · √(1 + 1/n)) as Student's t with n − 1
//! degrees of freedom: the new value lies outside the (1 − α) interval exactly when p < α.

use serde::{Deserialize, Serialize};

use super::confidence_interval::{t_quantile, t_two_sided_p};
use super::{Interval, Summary};

/// Where a new value falls against a history.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictionInterval {
    pub interval: Interval,
    /// Two-sided p-value of the new value under the history's distribution.
    pub p_value: f64,
    /// How many history values the interval rests on.
    pub n: usize,
}

/// The `level` prediction interval of `history` and the p-value of `new` against it; `None`
/// for fewer than two history values. A history without any spread gives p = 1 for the same
/// value and 0 for any other.
pub fn prediction_interval(history: &[f64], new: f64, level: f64) -> Option<PredictionInterval> {
    let s = Summary::of(history)?;
    if s.n < 2 || !new.is_finite() {
        return None;
    }
    #[allow(clippy::cast_precision_loss)]
    let n = s.n as f64;
    let scale = s.sd * (1.0 + 1.0 / n).sqrt();
    let half = t_quantile(level, n - 1.0)? * scale;
    let p_value = if scale == 0.0 {
        if new == s.mean { 1.0 } else { 0.0 }
    } else {
        t_two_sided_p((new - s.mean) / scale, n - 1.0)?
    };
    Some(PredictionInterval {
        interval: Interval {
            low: s.mean - half,
            high: s.mean + half,
            level,
        },
        p_value,
        n: s.n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_and_p_by_hand() {
        // History mean 89.5, s = √0.625 = 0.790569, n = 5: scale = s·√1.2 = 0.866025;
        // t(0.975, 4) = 2.776445 → half-width 2.404472.
        let h = [90.0, 89.0, 88.5, 89.5, 90.5];
        let pi = prediction_interval(&h, 89.5, 0.95).unwrap();
        assert!(
            (pi.interval.low - (89.5 - 2.404_472)).abs() < 1e-5,
            "{pi:?}"
        );
        assert!((pi.p_value - 1.0).abs() < 1e-12);
        // A value exactly at the interval's edge has p = α.
        let edge = prediction_interval(&h, pi.interval.high, 0.95).unwrap();
        assert!((edge.p_value - 0.05).abs() < 1e-9, "{edge:?}");
        let far = prediction_interval(&h, 38.0, 0.95).unwrap();
        assert!(far.p_value < 1e-4 && !far.interval.contains(38.0));
    }

    #[test]
    fn degenerate_histories() {
        assert_eq!(prediction_interval(&[89.5], 89.5, 0.95), None);
        let flat = prediction_interval(&[2.0, 2.0, 2.0], 2.0, 0.95).unwrap();
        assert_eq!(flat.p_value, 1.0);
        assert_eq!(
            prediction_interval(&[2.0, 2.0, 2.0], 2.5, 0.95)
                .unwrap()
                .p_value,
            0.0
        );
    }
}
