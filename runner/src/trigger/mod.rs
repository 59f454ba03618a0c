//! Triggers: git pushes → the workflows whose `on:` matches → the run queue.
//!
//! [`hook_input`] reads what git hooks are given, [`push_event`] turns a ref update into the
//! pushed commits and changed files (git2), [`pattern`] is GitHub's filter-pattern glob,
//! [`on_push`] applies `on.push`'s filters, [`workflows`] finds a commit's workflow files,
//! [`enqueue`] puts matching runs into the [`queue`] (SQLite, in [`home`]), and [`hooks`]
//! installs the git hooks that call `gpuflow trigger`. Running what is queued is the
//! worker's job (`crate::worker`); nothing here starts a process or talks to Docker.

pub mod enqueue;
pub mod home;
pub mod hook_input;
pub mod hooks;
pub mod on_push;
pub mod pattern;
pub mod push_event;
pub mod queue;
pub mod workflows;

pub use enqueue::{Outcome, OutcomeKind, enqueue_push};
pub use home::GpuflowHome;
pub use push_event::{PushEvent, ZERO_SHA};
pub use queue::{CancelOutcome, ProcessId, Queue, QueuedRun, RunState};
