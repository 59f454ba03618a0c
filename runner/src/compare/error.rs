//! Why a baseline could not be resolved.

use crate::store::StoreError;

/// A baseline problem; lower-case, user values in backticks, with a way out.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("`{input}` is not a baseline: {why}")]
    BadSpec { input: String, why: String },
    #[error("no baseline named `{name}`")]
    UnknownBaseline {
        name: String,
        suggestion: Option<String>,
    },
    #[error("baseline `{name}` (run `{run}`) has no metric `{metric}`")]
    MetricMissing {
        name: String,
        run: String,
        metric: String,
    },
    #[error(
        "the baseline `{input}` is in `{given}` but metric `{metric}` is in `{unit}`; write the number in `{unit}`"
    )]
    UnitMismatch {
        input: String,
        given: String,
        metric: String,
        unit: String,
    },
    #[error("step `{step}` measured no metric `{metric}`")]
    NotMeasured {
        metric: String,
        step: String,
        suggestion: Option<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CompareError {
    /// How to fix it, when there is a known way: shown as a "help:" line.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::UnknownBaseline { suggestion, .. } | Self::NotMeasured { suggestion, .. } => {
                suggestion.clone()
            }
            Self::MetricMissing { .. } => Some(
                "pin a run that measured it, or pin per metric with `gpuflow baseline set NAME RUN --metric METRIC`".into(),
            ),
            Self::Store(e) => e.hint(),
            _ => None,
        }
    }
}
