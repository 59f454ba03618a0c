//! The run's headline: what its `benchmark`, `compare-to-baseline` and `report` steps said
//! (their typed events), gathered as they pass on their way to the real sink, so the run can
//! end with one `run_headline` event holding its answer.

use std::sync::{Arc, Mutex};

use super::event::{Event, EventKind, EventSink, Headline, JobResult, PullFigure};

/// Passes every event on to `inner`, keeping the figures a headline is made of.
pub struct HeadlineSink {
    inner: Arc<dyn EventSink>,
    seen: Mutex<Headline>,
}

impl HeadlineSink {
    pub fn new(inner: Arc<dyn EventSink>) -> Self {
        Self {
            inner,
            seen: Mutex::new(Headline {
                run_id: String::new(),
                result: JobResult::Success,
                log_dir: String::new(),
                benchmarks: Vec::new(),
                comparisons: Vec::new(),
                reports: Vec::new(),
                pulls: Vec::new(),
            }),
        }
    }

    /// The headline of the run so far, with its id, result and log folder.
    pub fn headline(&self, run_id: &str, result: JobResult, log_dir: &str) -> Headline {
        let mut h = self
            .seen
            .lock()
            .map(|h| h.clone())
            .unwrap_or_else(|e| e.into_inner().clone());
        h.run_id = run_id.to_string();
        h.result = result;
        h.log_dir = log_dir.to_string();
        h
    }
}

impl EventSink for HeadlineSink {
    fn emit(&self, event: Event) {
        if let Ok(mut h) = self.seen.lock() {
            match &event.kind {
                EventKind::BenchmarkResult(b) => h.benchmarks.push(b.clone()),
                EventKind::ComparisonResult(c) => h.comparisons.push(c.clone()),
                EventKind::ReportWritten(r) => h.reports.push(r.clone()),
                EventKind::ImagePull {
                    job,
                    image,
                    bytes_total,
                    layers_total,
                    elapsed,
                    finished: true,
                    ..
                } => h.pulls.push(PullFigure {
                    job: job.clone(),
                    image: image.clone(),
                    bytes: *bytes_total,
                    layers: *layers_total,
                    took: *elapsed,
                }),
                _ => {}
            }
        }
        self.inner.emit(event);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::events::{CollectSink, JobRef, ReportFile};

    #[test]
    fn the_figures_pass_through_and_are_kept() {
        let collect = CollectSink::new();
        let sink = HeadlineSink::new(Arc::new(collect.clone()));
        let report = ReportFile {
            job: JobRef {
                job: "report".into(),
                cell: 0,
                display: "report".into(),
            },
            step: "1".into(),
            path: "/tmp/r/report.md".into(),
            commit: None,
        };
        sink.emit(Event {
            elapsed: Duration::ZERO,
            kind: EventKind::ReportWritten(report.clone()),
        });
        assert_eq!(collect.events().len(), 1);
        let h = sink.headline("r", JobResult::Failure, "/tmp/r");
        assert_eq!(h.reports, [report]);
        assert_eq!(h.result, JobResult::Failure);
        assert_eq!(h.log_dir, "/tmp/r");
    }
}
