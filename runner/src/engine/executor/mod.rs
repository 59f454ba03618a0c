//! Running one job run (a matrix cell): its contexts, its containers, its steps in order with
//! `if:`, `continue-on-error` and timeouts, the files steps talk back through, and its
//! `outputs` at the end. Everything it does is told through events.
//!
//! Strategy: the job's status (`success()`/`failure()`/`cancelled()`) is one value updated
//! after each step; cancellation (the run's, fail-fast's or the job's timeout) is one token.
//! A step that starts after the token fired (an `always()` step) gets a fresh token bounded by
//! the clean-up timeout, so it runs instead of being stopped at once. Clean-up (containers,
//! network, leftover processes) runs on every path before the job's result is reported.
//!
//! The files, in the order a job run goes through them:
//! - [`job`]: [`run_job`], from the job's working folder to its `job_finished`;
//! - [`job_run`]: [`job_run::JobRun`], the state of one job run, which the files below extend;
//! - [`contexts`]: the contexts known at the job's start, the evaluation context of a step,
//!   the variables every script sees, the job's `outputs`;
//! - [`job_containers`]: `services:` and the job's `container:`, and removing them at the end;
//! - [`step`]: one step's life: `if:`, its token and timeout, its conclusion;
//! - [`execute`]: what a step is (a script, a built-in, an action) and running a built-in;
//! - [`script_step`]: a `run:` step: its shell, its text, where it runs, what it wrote back;
//! - [`composite`]: a composite action's steps as a nested level of the job;
//! - [`timeout`]: `timeout-minutes` as a timer that cancels a token.

mod composite;
mod contexts;
mod execute;
mod job;
mod job_containers;
mod job_run;
mod script_step;
mod step;
mod timeout;

pub use job::{JobOutcome, run_job};
pub use job_run::Shortened;
