//! The open-loop arrival schedule: when each request is due, as an offset from the start of a
//! run, drawn from a seeded generator so the same seed gives the same schedule.
//!
//! Arrivals follow vLLM's `--request-rate` / `--burstiness`: `poisson` has exponential gaps of
//! mean 1/rate; `gamma` has gamma gaps of shape `burstiness` and scale 1/(rate·burstiness), so
//! the mean rate is unchanged and lower shapes are burstier (shape 1 is Poisson); `constant` has
//! equal gaps. Knows nothing about HTTP or how requests are sent.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// How arrivals are spaced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    Poisson,
    Constant,
    /// Gamma-distributed gaps with this shape (vLLM's burstiness).
    Gamma {
        burstiness: f64,
    },
}

/// An endless, seeded sequence of arrival offsets.
#[derive(Debug)]
pub struct Schedule {
    arrival: Arrival,
    /// Mean gap in seconds.
    mean_gap: f64,
    rng: Xoshiro256PlusPlus,
    at: f64,
}

impl Schedule {
    /// `rate` is requests per second (> 0); the first request is due at offset 0, as in vLLM.
    pub fn new(arrival: Arrival, rate: f64, seed: u64) -> Self {
        Self {
            arrival,
            mean_gap: 1.0 / rate,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            at: 0.0,
        }
    }

    /// The offsets of the first `n` arrivals.
    pub fn take_n(self, n: usize) -> Vec<Duration> {
        self.take(n).collect()
    }

    /// Every arrival before `limit`.
    pub fn until(self, limit: Duration) -> Vec<Duration> {
        self.take_while(|d| *d < limit).collect()
    }

    fn gap(&mut self) -> f64 {
        match self.arrival {
            Arrival::Constant => self.mean_gap,
            Arrival::Poisson => -(1.0 - self.uniform()).ln() * self.mean_gap,
            Arrival::Gamma { burstiness } => self.gamma(burstiness) * self.mean_gap / burstiness,
        }
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        self.rng.random::<f64>()
    }

    fn normal(&mut self) -> f64 {
        // Box–Muller; 1 − u keeps the logarithm finite.
        let (u1, u2) = (1.0 - self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A Gamma(shape, 1) draw by Marsaglia and Tsang's method; shapes below 1 use the
    /// `Gamma(shape + 1) · U^(1/shape)` boost.
    fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let boost = (1.0 - self.uniform()).powf(1.0 / shape);
            return self.gamma(shape + 1.0) * boost;
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = 1.0 - self.uniform();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }
}

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.at;
        self.at += self.gap();
        Some(Duration::from_secs_f64(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn gaps(arrival: Arrival, rate: f64, n: usize) -> Vec<f64> {
        let offsets = Schedule::new(arrival, rate, 7).take_n(n);
        offsets
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let a = Schedule::new(Arrival::Poisson, 50.0, 3).take_n(100);
        let b = Schedule::new(Arrival::Poisson, 50.0, 3).take_n(100);
        let c = Schedule::new(Arrival::Poisson, 50.0, 4).take_n(100);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a[0], Duration::ZERO);
    }

    #[test_case(Arrival::Poisson, 1.0; "poisson gaps are exponential: cv 1")]
    #[test_case(Arrival::Gamma { burstiness: 1.0 }, 1.0; "gamma of shape 1 is poisson")]
    #[test_case(Arrival::Gamma { burstiness: 0.25 }, 2.0; "shape 0.25 is burstier: cv 2")]
    #[test_case(Arrival::Gamma { burstiness: 4.0 }, 0.5; "shape 4 is smoother: cv 0.5")]
    #[test_case(Arrival::Constant, 0.0; "constant gaps")]
    fn mean_rate_and_burstiness(arrival: Arrival, cv: f64) {
        let rate = 20.0;
        let g = gaps(arrival, rate, 40_001);
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        let std = (g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / g.len() as f64).sqrt();
        assert!(
            (1.0 / mean - rate).abs() < rate * 0.03,
            "mean rate {}",
            1.0 / mean
        );
        assert!((std / mean - cv).abs() < 0.06, "cv {}", std / mean);
    }

    #[test]
    fn until_stops_at_the_limit() {
        let offsets = Schedule::new(Arrival::Constant, 10.0, 0).until(Duration::from_secs(1));
        assert_eq!(offsets.len(), 10);
        assert!(offsets.iter().all(|d| *d < Duration::from_secs(1)));
    }
}
