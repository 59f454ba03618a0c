//! Before any job starts: steps the engine cannot run are refused ([`refusals`]), and every
//! check whose answer cannot change by the time its step runs is run now, so a wrong flag or a
//! missing file costs seconds instead of a model load. `check-cli-interface` and `assert-file`
//! steps on a container that a `start-container` step starts from an image are run in a
//! throw-away container of that image (labelled with the run, removed after); the same steps
//! on the host run on the host; the images of `start-container` steps must be on the engine
//! (or pullable).
//!
//! A check qualifies only when nothing before it can change its answer ([`candidates`]): its
//! job and step have no `if:`, the step has no `continue-on-error`, its inputs read only the
//! contexts known at the start (`matrix`, `inputs`, `vars`, `github`, `secrets`, `strategy`),
//! and no earlier step writes where it looks (a `run:` in its container or, for host checks, a
//! `run:` or action at all, or a job it `needs`). The others run at their place.
//!
//! The checks run through the built-ins' own [`crate::steps::Builtin::run`], exactly as the
//! steps would; this module decides what runs early and where, not how a check works.
//!
//! The files, in the order preflight goes through them:
//! - [`refusals`]: steps gpuflow cannot run, refused before anything starts;
//! - [`qualify`]: which checks of a job qualify (the walk over its steps);
//! - [`prepare`]: the qualifying checks with their inputs evaluated for one job run;
//! - [`checks`]: running them: every image's pull started at once, each job run's checks in
//!   throw-away containers beside the pulls;
//! - [`server_cli`]: a model server's command line against its own help in the image;
//! - [`memory`]: the memory estimate of a model server (docs/memory.md);
//! - [`server_lines`]: every server command line of a workflow, for the contract test, and
//!   every image its `start-container` steps start, for `gpuflow images lock`.

mod checks;
mod memory;
mod prepare;
mod qualify;
mod refusals;
mod server_cli;
mod server_lines;

pub use checks::{PreflightReport, run};
pub use qualify::{Candidate, StartAt, candidates, memory_checks, path_checks};
pub use refusals::{check, check_steps};
pub use server_lines::{
    ServerLine, ServerLines, StartImage, StartImages, server_lines, start_images,
};
