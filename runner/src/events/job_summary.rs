//! How one job run ended, as the closing summary and `RunReport` list it.

use std::time::Duration;

use super::event::{JobRef, JobResult};

/// How one job run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSummary {
    pub job: JobRef,
    pub result: JobResult,
    pub duration: Duration,
    /// It failed, and `continue-on-error` kept that from failing the run.
    pub failure_allowed: bool,
}
