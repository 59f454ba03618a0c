//! What a run on a cluster says, and how it ended: the coordinator's and the catch-up's
//! common voice (every event masked, kept for the headline, stamped with the time since the
//! run started here), and the run's result from its jobs'.

use std::sync::Arc;
use std::time::Instant;

use crate::events::{Event, EventKind, EventSink, JobRef, JobResult, JobSummary, Stream};

/// Where a run on a cluster sends what it says: masked, headline kept, stamped with the time
/// since the run started here.
#[derive(Clone)]
pub struct Voice {
    sink: Arc<dyn EventSink>,
    started: Instant,
}

impl Voice {
    pub fn new(sink: Arc<dyn EventSink>, started: Instant) -> Self {
        Self { sink, started }
    }

    pub fn emit(&self, kind: EventKind) {
        self.sink.emit(Event {
            elapsed: self.started.elapsed(),
            kind,
        });
    }

    pub fn say(&self, job: &JobRef, text: String) {
        self.emit(EventKind::LogLine {
            job: job.clone(),
            step: None,
            container: None,
            stream: Stream::Runner,
            text,
        });
    }
}

/// The run's result from its jobs': a failure not allowed, or a cell cancelled by fail-fast,
/// fails it.
pub fn run_result(jobs: &[JobSummary], cancelled: bool) -> JobResult {
    if cancelled {
        JobResult::Cancelled
    } else if jobs.iter().any(|j| {
        j.result == JobResult::Failure && !j.failure_allowed || j.result == JobResult::Cancelled
    }) {
        JobResult::Failure
    } else {
        JobResult::Success
    }
}

/// A job that ended with nothing more to say of it than its result.
pub fn summary(job: &JobRef, result: JobResult) -> JobSummary {
    JobSummary {
        job: job.clone(),
        result,
        duration: Default::default(),
        failure_allowed: false,
    }
}
