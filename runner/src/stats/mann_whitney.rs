//! The Mann-Whitney U test (Mann & Whitney 1947): do two independent samples come from the
//! same distribution, or does one tend to be larger? It needs no normality, which suits
//! benchmark samples (skewed, with outliers from a GC pause or a cold cache).
//!
//! Computed as `scipy.stats.mannwhitneyu` does (its documentation and Conover 1999, §5.1):
//! U₁ = R₁ − n₁(n₁ + 1)/2 from average ranks, U₂ = n₁n₂ − U₁; two-sided p = 2·P(U ≥ max(U₁,
//! U₂)) clipped to 1. Exact p-values count the arrangements of the ranks (the coefficients of
//! the Gaussian binomial [n₁+n₂ choose n₁]_q) and are used when there are no ties and the
//! counts fit in integers (n₁ + n₂ ≤ 60; scipy's `auto` switches earlier, at 8, only to save
//! time). Otherwise the normal approximation with continuity correction and the tie-corrected
//! variance σ² = n₁n₂/12 · ((n + 1) − Σ(t³ − t)/(n(n − 1))).

use serde::{Deserialize, Serialize};
use statrs::function::erf::erfc;

/// Which way a p-value was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MannWhitneyMethod {
    Exact,
    Asymptotic,
}

/// The result of comparing samples `x` and `y`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U₁, the statistic of `x`: how many (x, y) pairs have x > y, ties counting one half.
    pub u: f64,
    /// Two-sided p-value: the samples differ in either direction.
    pub p_two_sided: f64,
    /// One-sided p-value for "x tends to be greater than y".
    pub p_greater: f64,
    /// One-sided p-value for "x tends to be less than y".
    pub p_less: f64,
    pub method: MannWhitneyMethod,
}

/// Largest n₁ + n₂ whose exact counts are computed (C(60, 30) ≈ 1.2·10¹⁷ fits an i128 with
/// room for the intermediate products).
const EXACT_MAX_N: usize = 60;

/// Compares `x` with `y`; `None` when either is empty or holds a non-finite value.
pub fn mann_whitney_u(x: &[f64], y: &[f64]) -> Option<MannWhitney> {
    if x.is_empty() || y.is_empty() || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    let (n1, n2) = (x.len(), y.len());
    let (ranks, tie_sizes) = average_ranks(x.iter().chain(y).copied().collect());
    let r1: f64 = ranks[..n1].iter().sum();
    #[allow(clippy::cast_precision_loss)]
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u1 = r1 - f1 * (f1 + 1.0) / 2.0;
    let u2 = f1 * f2 - u1;
    let has_ties = tie_sizes.iter().any(|&t| t > 1);

    let (p_greater, p_less, p_two, method) = if !has_ties && n1 + n2 <= EXACT_MAX_N {
        let counts = exact_counts(n1, n2);
        let sf = |u: f64| exact_sf(&counts, u);
        (
            sf(u1),
            sf(u2),
            2.0 * sf(u1.max(u2)),
            MannWhitneyMethod::Exact,
        )
    } else {
        let n = f1 + f2;
        let ties: f64 = tie_sizes
            .iter()
            .map(|&t| {
                #[allow(clippy::cast_precision_loss)]
                let t = t as f64;
                t * t * t - t
            })
            .sum();
        let sigma = (f1 * f2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)))).sqrt();
        let mu = f1 * f2 / 2.0;
        let sf = |u: f64| {
            if sigma == 0.0 {
                // Every value is the same: nothing suggests a difference.
                return 1.0;
            }
            normal_sf((u - mu - 0.5) / sigma)
        };
        (
            sf(u1),
            sf(u2),
            2.0 * sf(u1.max(u2)),
            MannWhitneyMethod::Asymptotic,
        )
    };
    Some(MannWhitney {
        u: u1,
        p_two_sided: p_two.clamp(0.0, 1.0),
        p_greater: p_greater.clamp(0.0, 1.0),
        p_less: p_less.clamp(0.0, 1.0),
        method,
    })
}

/// Ranks 1..=n with ties given their average rank, and the sizes of the tie groups.
fn average_ranks(values: Vec<f64>) -> (Vec<f64>, Vec<usize>) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut groups = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        // Positions i..=j (0-based) share ranks i+1..=j+1: their average.
        #[allow(clippy::cast_precision_loss)]
        let rank = (i + j + 2) as f64 / 2.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        groups.push(j - i + 1);
        i = j + 1;
    }
    (ranks, groups)
}

/// How many of the C(n₁+n₂, n₁) equally likely rank arrangements give U = k, for every k:
/// the coefficients of [n₁+n₂ choose n₁]_q = Π_{i=1..n₁} (1 − q^{n₂+i}) / (1 − q^i).
fn exact_counts(n1: usize, n2: usize) -> Vec<i128> {
    let len = n1 * n2 + n1 + n2 + 1;
    let mut poly = vec![0i128; len];
    poly[0] = 1;
    for i in 1..=n1 {
        let up = n2 + i;
        for k in (up..len).rev() {
            poly[k] -= poly[k - up];
        }
        // Divide by (1 − q^i): q(k) = p(k) + q(k − i); exact, the quotient is a polynomial.
        for k in i..len {
            poly[k] += poly[k - i];
        }
    }
    poly.truncate(n1 * n2 + 1);
    poly
}

/// P(U ≥ u) under the exact null distribution.
fn exact_sf(counts: &[i128], u: f64) -> f64 {
    let total: i128 = counts.iter().sum();
    // U is a whole number without ties; round away float noise from the rank sum.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let from = u.round().max(0.0) as usize;
    let tail: i128 = counts.iter().skip(from).sum();
    #[allow(clippy::cast_precision_loss)]
    let p = tail as f64 / total as f64;
    p
}

/// P(Z > z) for a standard normal Z.
fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    // scipy.stats.mannwhitneyu documentation, "Examples": the ages of male and female
    // workers (Conover). statistic 17.0; exact p 0.1111111111111111 (= 2·7/126); asymptotic
    // p 0.11134688653314041.
    const MALES: [f64; 5] = [19.0, 22.0, 16.0, 29.0, 24.0];
    const FEMALES: [f64; 4] = [20.0, 11.0, 17.0, 12.0];

    #[test]
    fn scipy_documented_example_exact() {
        let r = mann_whitney_u(&MALES, &FEMALES).unwrap();
        assert_eq!(r.u, 17.0);
        assert_eq!(r.method, MannWhitneyMethod::Exact);
        assert!((r.p_two_sided - 0.111_111_111_111_111_1).abs() < 1e-15);
        // One-sided: P(U ≥ 17) = 7/126.
        assert!((r.p_greater - 7.0 / 126.0).abs() < 1e-15);
        assert!(r.p_less > 0.9);
    }

    #[test]
    fn scipy_documented_example_asymptotic() {
        // A tie between the samples forces the normal approximation; to check the documented
        // asymptotic value itself, compute it the way the approximation does with no ties.
        let z: f64 = (17.0 - 10.0 - 0.5) / (20.0f64 * 10.0 / 12.0).sqrt();
        let p = 2.0 * normal_sf(z);
        assert!((p - 0.111_346_886_533_140_41).abs() < 1e-10, "{p}");
    }

    #[test]
    fn ties_use_the_corrected_normal_approximation() {
        // By hand: x = [1, 2, 2], y = [2, 3, 4]. Ranks 1, 3, 3 | 3, 5, 6 → R₁ = 7, U₁ = 1.
        // Tie group of 3: Σ(t³ − t) = 24; σ² = 9/12·(7 − 24/30) = 4.65; U = max = 8;
        // z = (8 − 4.5 − 0.5)/√4.65 = 1.391217; p = 2·P(Z > z) = 0.164160.
        let r = mann_whitney_u(&[1.0, 2.0, 2.0], &[2.0, 3.0, 4.0]).unwrap();
        assert_eq!(r.u, 1.0);
        assert_eq!(r.method, MannWhitneyMethod::Asymptotic);
        assert!((r.p_two_sided - 0.164_160).abs() < 1e-5, "{r:?}");
        let same = mann_whitney_u(&[5.0, 5.0], &[5.0, 5.0, 5.0]).unwrap();
        assert_eq!(same.p_two_sided, 1.0);
    }

    #[test]
    fn exact_counts_are_the_gaussian_binomial() {
        // [4 choose 2]_q = 1 + q + 2q² + q³ + q⁴.
        assert_eq!(exact_counts(2, 2), vec![1, 1, 2, 1, 1]);
        let c = exact_counts(30, 30);
        assert_eq!(c.iter().sum::<i128>(), 118_264_581_564_861_424);
    }

    #[test]
    fn five_against_five_fully_separated() {
        // The smallest two-sided exact p for 5 vs 5 is 2/252.
        let r = mann_whitney_u(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!((r.p_two_sided - 2.0 / 252.0).abs() < 1e-15);
        assert!((r.p_less - 1.0 / 252.0).abs() < 1e-15);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn p_values_are_probabilities(
            x in prop::collection::vec(0u8..20, 1..25),
            y in prop::collection::vec(0u8..20, 1..25),
        ) {
            let x: Vec<f64> = x.into_iter().map(f64::from).collect();
            let y: Vec<f64> = y.into_iter().map(f64::from).collect();
            let r = mann_whitney_u(&x, &y).unwrap();
            for p in [r.p_two_sided, r.p_greater, r.p_less] {
                prop_assert!((0.0..=1.0).contains(&p), "{r:?}");
            }
            // Swapping the samples swaps the one-sided p-values.
            let s = mann_whitney_u(&y, &x).unwrap();
            prop_assert!((s.p_greater - r.p_less).abs() < 1e-12);
            prop_assert!((s.p_two_sided - r.p_two_sided).abs() < 1e-12);
        }
    }
}
