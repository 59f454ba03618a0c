//! Which way is better for a metric, defaulted from its unit and name.

use serde::{Deserialize, Serialize};

/// Whether a larger value of a metric is better (throughput) or worse (latency).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Higher,
    Lower,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Higher => "higher",
            Self::Lower => "lower",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "higher" => Some(Self::Higher),
            "lower" => Some(Self::Lower),
            _ => None,
        }
    }

    /// The default for a metric: rates (`tok/s`, `req/s`, anything per second) are better
    /// higher, durations (`ms`, `s`) lower. The unit decides first because it is the surer
    /// sign; the name (`output_tok_s`, `ttft_ms`, `itl`) is the fallback for unitless
    /// metrics. `None` when neither tells.
    pub fn infer(name: &str, unit: &str) -> Option<Self> {
        Self::from_unit(unit).or_else(|| Self::from_name(name))
    }

    fn from_unit(unit: &str) -> Option<Self> {
        let u = unit.trim().to_ascii_lowercase();
        if u.ends_with("/s") || u.ends_with("/sec") || u.ends_with("per second") {
            return Some(Self::Higher);
        }
        match u.as_str() {
            "ms" | "s" | "sec" | "us" | "µs" | "μs" | "ns" | "min" | "seconds" | "milliseconds" => {
                Some(Self::Lower)
            }
            "tok/s" | "req/s" | "tflops" | "gflops" | "gb/s" => Some(Self::Higher),
            _ => None,
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        let n = name.to_ascii_lowercase();
        let words: Vec<&str> = n.split(['_', '-', '.']).collect();
        let has = |w: &str| words.contains(&w);
        let last = words.last().copied().unwrap_or_default();
        // `output_tok_s` ends in `s` like `ttft_s`: look at the rate words first.
        if has("throughput") || has("tok") || has("req") || has("per") {
            return Some(Self::Higher);
        }
        if ["ms", "s", "us", "ns"].contains(&last)
            || ["latency", "ttft", "itl", "tpot", "e2e", "duration"]
                .iter()
                .any(|w| has(w))
        {
            return Some(Self::Lower);
        }
        None
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use test_case::test_case;

    use super::*;

    #[test_case("output_tok_s", "tok/s", Some(Direction::Higher))]
    #[test_case("request_throughput", "req/s", Some(Direction::Higher))]
    #[test_case("ttft_ms", "ms", Some(Direction::Lower))]
    #[test_case("e2e", "s", Some(Direction::Lower))]
    #[test_case("output_tok_s", "", Some(Direction::Higher); "name when no unit")]
    #[test_case("itl", "", Some(Direction::Lower); "bare itl")]
    #[test_case("p99_latency", "", Some(Direction::Lower))]
    #[test_case("accept_length", "tokens", None)]
    fn defaults(name: &str, unit: &str, expected: Option<Direction>) {
        assert_eq!(Direction::infer(name, unit), expected);
    }
}
