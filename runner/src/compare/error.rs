//! Why a baseline could not be resolved.

use crate::store::StoreError;

/// A baseline problem; lower-case, user values in backticks, with a way out.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("`{input}` is not a baseline: {why}")]
    BadSpec { input: String, why: String },
    #[error("no baseline named `{name}`{}", suffix(.suggestion.as_deref()))]
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
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn suffix(s: Option<&str>) -> String {
    s.map(|s| format!("; {s}")).unwrap_or_default()
}
