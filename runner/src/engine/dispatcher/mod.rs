//! Scheduling the runs of a plan: a run starts as soon as every run of each job it needs has
//! finished (a real DAG, not levels), at most `max-parallel` cells of a job at once; a failed
//! cell cancels its unfinished siblings under `fail-fast`; a job's `if:` is evaluated with
//! `needs` when it becomes ready (default `success()`: every needed job succeeded).
//!
//! Strategy: one loop owns all scheduling state. It starts whatever is ready, then waits for
//! the next run to finish (or the run to be cancelled), and repeats; job runs are tasks that
//! report back through their join handles, so no state is shared between them.
//!
//! The files:
//! - [`run`]: a run from its start (refusals, inputs, the shared state, preflight) to its
//!   end (its result, clean-up, the headline, the [`RunReport`]);
//! - [`dispatch`]: the loop, a `select!` over small handlers: a job can start, a job
//!   finished, a job's task was lost, nothing runs, the run was cancelled;
//! - [`readiness`]: what a ready job is judged with: `needs`, `matrix`, its `if:` and
//!   `continue-on-error`;
//! - [`gpu_start`]: the GPUs a ready job leases before it starts, or why it waits;
//! - [`search`]: `strategy.search`, which cells run: a bisect's probes, a halving's rounds
//!   ([`halving`]) scored with what their benchmark measured ([`trial_metrics`]);
//! - [`alone`]: one planned job run by itself, its needs and GPUs given (a Slurm node's job);
//! - [`base_contexts`]: `github`, `inputs`, `secrets` and `vars`, made once per run.

mod alone;
mod base_contexts;
mod dispatch;
mod gpu_start;
mod halving;
mod readiness;
mod run;
mod search;
mod trial_metrics;

pub use alone::{Alone, run_alone};
pub(crate) use base_contexts::base_contexts;
pub use readiness::needs_context;
pub use run::{RunError, RunReport, run};
