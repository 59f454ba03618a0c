//! The events of a run: what happened, in the order it happened ([`Event`]), the sinks they go
//! to ([`EventSink`]), the secrets masked out of them on the way ([`Masker`]), and the
//! summaries made from them ([`Headline`], [`JobSummary`]). The engine and the built-in steps
//! emit them; the views (`ui`), the run's log files (`run_logs`) and reports read them. This is
//! the seam between what runs and what shows it: nothing here runs anything.

mod event;
mod headline;
mod job_summary;
mod mask;

pub use event::{
    BenchmarkFigure, CollectSink, ComparisonFigure, Event, EventKind, EventSink, Headline, JobRef,
    JobResult, LOCAL_HOST, PullFigure, ReportFile, StepOutcome, Stream, Tee,
};
pub use headline::HeadlineSink;
pub use job_summary::JobSummary;
pub use mask::{MASK, Masker, MaskingSink};
