//! The shapes of what is written to and read from the store.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Direction, Fingerprint, SeriesKey};
use crate::stats::Summary;

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Success,
    Failure,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Cancelled => "cancelled",
        }
    }

    pub(super) fn parse(s: &str) -> Option<Self> {
        match s {
            "success" => Some(Self::Success),
            "failure" => Some(Self::Failure),
            "cancelled" => Some(Self::Cancelled),
            _ => None,
        }
    }
}

/// The state of the workflow's repository when it ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitInfo {
    pub commit: Option<String>,
    /// The branch or tag (`main`, `refs/tags/v1`); windows of past runs stay on one branch.
    pub ref_name: Option<String>,
    /// Uncommitted changes were present: the commit alone does not reproduce the run.
    pub dirty: bool,
}

/// One metric of a finished step, as the benchmark produced it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewMetric {
    pub name: String,
    pub unit: String,
    /// `None`: defaulted from the unit and name ([`Direction::infer`]).
    pub direction: Option<Direction>,
    /// Raw samples after warm-up, in the order they were measured.
    pub samples: Vec<f64>,
}

/// A finished step's result, written by [`super::ResultStore::record`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewResult {
    /// The workflow run's id; a run's jobs, matrix cells and steps share it.
    pub run_id: String,
    pub workflow: String,
    pub job: String,
    /// The matrix cell's values (`allreduce: nccl`).
    pub matrix: BTreeMap<String, String>,
    pub step: String,
    pub git: GitInfo,
    /// Unix time in milliseconds.
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub status: RunStatus,
    pub fingerprint: Fingerprint,
    pub metrics: Vec<NewMetric>,
}

/// A metric as stored: direction resolved, summary computed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredMetric {
    pub name: String,
    pub unit: String,
    pub direction: Direction,
    pub samples: Vec<f64>,
    /// `None` when the step produced no samples (it failed before measuring).
    pub summary: Option<Summary>,
}

/// A result read back from the store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredResult {
    /// The store's own id of this result (one per step of a run).
    pub id: i64,
    pub run_id: String,
    pub workflow: String,
    pub job: String,
    pub matrix: BTreeMap<String, String>,
    pub step: String,
    pub git: GitInfo,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub status: RunStatus,
    pub series_key: SeriesKey,
    pub fingerprint: Fingerprint,
    pub metrics: Vec<StoredMetric>,
}

impl StoredResult {
    pub fn metric(&self, name: &str) -> Option<&StoredMetric> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

/// Which past results to find, newest first. Only successful results are ever returned: a
/// failed step's partial numbers are no baseline.
#[derive(Clone, Debug, Default)]
pub struct ResultFilter {
    /// The result must have this metric.
    pub metric: String,
    /// Same series only; `None` when incomparable results are allowed.
    pub series_key: Option<SeriesKey>,
    pub workflow: Option<String>,
    pub job: Option<String>,
    pub step: Option<String>,
    /// Only results recorded on this branch.
    pub git_ref: Option<String>,
    /// Leave out this run's own results.
    pub exclude_run: Option<String>,
    pub limit: usize,
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
