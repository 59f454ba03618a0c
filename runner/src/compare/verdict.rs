//! The six verdicts a comparison can reach.

use serde::{Deserialize, Serialize};

/// What a comparison concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Worse beyond the threshold, and the test agrees it is not noise.
    Regression,
    /// Better beyond the threshold, and the test agrees.
    Improvement,
    /// The change is within the threshold.
    Unchanged,
    /// Beyond the threshold, but the data cannot tell it from noise.
    Inconclusive,
    /// Nothing to compare with yet.
    NoBaseline,
    /// The baseline's environment differs in identity fields and comparing across them was
    /// not allowed.
    Incomparable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Regression => "regression",
            Self::Improvement => "improvement",
            Self::Unchanged => "unchanged",
            Self::Inconclusive => "inconclusive",
            Self::NoBaseline => "no-baseline",
            Self::Incomparable => "incomparable",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
