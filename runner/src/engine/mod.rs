//! The engine: runs a [`Plan`](crate::plan::Plan) of a loaded workflow.
//!
//! Owns job scheduling ([`dispatcher`]: a real DAG, `max-parallel`, fail-fast, job `if:`),
//! running one job ([`executor`]: contexts, steps, outputs, timeouts, clean-up), where `run:`
//! scripts execute (behind [`ScriptRunner`]: [`host`] processes or [`container_runner`]
//! execs), and which built-in steps run where (the steps themselves are [`crate::steps`]'s,
//! asked through their registry). Events, masking and the run's log files are
//! [`crate::events`]' and [`crate::run_logs`]'.
//!
//! It talks to the rest only through [`Event`]s given to an [`EventSink`]; it never prints.
//! Cancellation comes in as a `CancellationToken` (the signal module drives it), and the
//! Docker engines as [`Engines`]: the host of each job run and how to connect to it, which
//! the engine does the first time a job there needs Docker; the engine chooses neither hosts
//! nor how to render anything.

pub mod container_inputs;
pub mod container_runner;
pub mod containers;
pub mod dispatcher;
pub mod engines;
pub mod evaluate;
pub mod executor;
pub mod host;
pub mod inputs;
pub mod job_gpus;
pub mod options;
pub mod output_file;
mod panic_text;
pub mod preflight;
pub mod registry_logins;
pub mod script;
pub mod script_runner;
pub mod server_groups;
pub mod server_key;
pub mod server_pool;
pub mod server_reuse;
pub mod shared;
pub mod step_host;
pub mod step_inputs;
pub mod step_shell;
pub mod warm_servers;

pub use dispatcher::{RunReport, run};
pub use engines::{Connect, Engines};
// The events a run emits and its log files live beside the engine (`events`, `run_logs`);
// named here too, as what `engine::run` speaks.
pub use crate::events::{
    BenchmarkFigure, CollectSink, ComparisonFigure, Event, EventKind, EventSink, Headline, JobRef,
    JobResult, ReportFile, StepOutcome, Stream, Tee,
};
pub use crate::run_logs::LogStore;
pub use options::{RunOptions, new_run_id};
pub use preflight::PreflightReport;
pub use script_runner::ScriptRunner;
