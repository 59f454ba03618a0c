//! What can go wrong reading or writing the results store.

use std::path::PathBuf;

/// A store failure; messages are lower-case with user values in backticks, and say how to
/// fix the problem where there is a fix.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the results store `{path}`: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot create the directory of the results store `{path}`: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the results store `{path}` has schema version {found}, newer than this gpuflow knows ({known})"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error(
        "metric `{metric}` has no direction: unit `{unit}` does not say whether higher or lower is better"
    )]
    UnknownDirection { metric: String, unit: String },
    #[error("metric `{metric}` sample {index} is `{value}`; samples must be finite numbers")]
    BadSample {
        metric: String,
        index: usize,
        value: f64,
    },
    #[error("metric `{metric}` appears twice in one result")]
    DuplicateMetric { metric: String },
    #[error("no run `{run}` in the results store")]
    UnknownRun {
        run: String,
        suggestion: Option<String>,
    },
    #[error("run `{run}` has no metric `{metric}`")]
    UnknownMetric {
        run: String,
        metric: String,
        suggestion: Option<String>,
    },
    #[error("`{name}` cannot name a baseline: {why}")]
    BadBaselineName { name: String, why: &'static str },
    #[error("the results store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the results store holds a record it cannot read: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// How to fix it, when there is a known way: shown as a "help:" line.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::UnknownRun { suggestion, .. } | Self::UnknownMetric { suggestion, .. } => {
                suggestion.clone()
            }
            Self::NewerSchema { .. } => {
                Some("upgrade gpuflow to read it; this one leaves the file untouched".into())
            }
            Self::UnknownDirection { .. } => {
                Some("set the metric's `direction: higher` or `direction: lower`".into())
            }
            _ => None,
        }
    }

    /// Whether the user's input was wrong (rather than the file or the disk).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::UnknownRun { .. }
                | Self::UnknownMetric { .. }
                | Self::BadBaselineName { .. }
                | Self::UnknownDirection { .. }
                | Self::BadSample { .. }
                | Self::DuplicateMetric { .. }
        )
    }
}
