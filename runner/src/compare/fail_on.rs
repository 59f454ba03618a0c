//! `fail-on`: whether a step's verdicts fail it.

use serde::{Deserialize, Serialize};

use super::{Comparison, Verdict};

/// Which verdicts fail the step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailOn {
    /// A regression fails (the default).
    #[default]
    Regression,
    /// Anything that is not a clear pass: a regression, an inconclusive or an incomparable
    /// result. For gates that must not let doubt through.
    Inconclusive,
    /// Report only.
    Never,
}

impl FailOn {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "regression" => Some(Self::Regression),
            "inconclusive" => Some(Self::Inconclusive),
            "never" => Some(Self::Never),
            _ => None,
        }
    }

    fn fails(self, v: Verdict) -> bool {
        match self {
            Self::Regression => v == Verdict::Regression,
            Self::Inconclusive => matches!(
                v,
                Verdict::Regression | Verdict::Inconclusive | Verdict::Incomparable
            ),
            Self::Never => false,
        }
    }
}

/// Pass or fail, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepOutcome {
    pub passed: bool,
    /// The metrics whose verdict failed the step.
    pub failing: Vec<String>,
    /// One line: "2 of 3 metrics regressed: `ttft_ms`, `itl_ms`".
    pub summary: String,
}

/// Applies `policy` to a step's comparisons. `no-baseline` never fails: a series has to
/// start somewhere.
pub fn step_outcome(policy: FailOn, comparisons: &[Comparison]) -> StepOutcome {
    let failing: Vec<String> = comparisons
        .iter()
        .filter(|c| policy.fails(c.verdict))
        .map(|c| c.metric.clone())
        .collect();
    let summary = if failing.is_empty() {
        let verdicts: Vec<String> = comparisons
            .iter()
            .map(|c| format!("{}: {}", c.metric, c.verdict))
            .collect();
        format!("passed ({})", verdicts.join(", "))
    } else {
        format!(
            "{} of {} metrics failed `fail-on: {}`: {}",
            failing.len(),
            comparisons.len(),
            match policy {
                FailOn::Regression => "regression",
                FailOn::Inconclusive => "inconclusive",
                FailOn::Never => "never",
            },
            crate::diag::join_quoted(&failing, "and")
        )
    };
    StepOutcome {
        passed: failing.is_empty(),
        failing,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use test_case::test_case;

    use super::*;
    use crate::store::Direction;

    fn with(verdict: Verdict) -> Comparison {
        Comparison {
            metric: format!("m_{verdict}"),
            unit: String::new(),
            direction: Direction::Higher,
            verdict,
            current: None,
            baseline_value: None,
            ratio: None,
            change_pct: None,
            p_value: None,
            test: None,
            threshold_pct: 5.0,
            baseline: String::new(),
            differences: Vec::new(),
            explanation: String::new(),
        }
    }

    #[test_case(FailOn::Regression, Verdict::Regression, false)]
    #[test_case(FailOn::Regression, Verdict::Inconclusive, true)]
    #[test_case(FailOn::Regression, Verdict::Incomparable, true)]
    #[test_case(FailOn::Regression, Verdict::NoBaseline, true)]
    #[test_case(FailOn::Inconclusive, Verdict::Inconclusive, false)]
    #[test_case(FailOn::Inconclusive, Verdict::Incomparable, false)]
    #[test_case(FailOn::Inconclusive, Verdict::NoBaseline, true)]
    #[test_case(FailOn::Inconclusive, Verdict::Improvement, true)]
    #[test_case(FailOn::Never, Verdict::Regression, true)]
    fn policy(policy: FailOn, verdict: Verdict, passes: bool) {
        assert_eq!(step_outcome(policy, &[with(verdict)]).passed, passes);
    }

    #[test]
    fn several_metrics_name_the_failing_ones() {
        let out = step_outcome(
            FailOn::Regression,
            &[with(Verdict::Unchanged), with(Verdict::Regression)],
        );
        assert!(!out.passed);
        assert_eq!(out.failing, vec!["m_regression"]);
        assert_eq!(
            out.summary,
            "1 of 2 metrics failed `fail-on: regression`: `m_regression`"
        );
    }
}
