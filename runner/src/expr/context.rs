//! What an expression can see while it is evaluated: named contexts (`github`, `matrix`…), the
//! job's status for `success()` and friends, and the workspace for `hashFiles`. The engine
//! implements [`Context`] over its live state; [`MapContext`] is the in-memory one for tests,
//! `gpuflow eval` and planning.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use super::value::Value;

/// How the job is doing so far, as the status functions see it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JobStatus {
    /// Every earlier step succeeded: `success()` is true.
    #[default]
    Success,
    /// An earlier step failed: `failure()` is true.
    Failure,
    /// The run was cancelled: `cancelled()` is true and `success()` false.
    Cancelled,
}

pub trait Context {
    /// A named context, looked up case-insensitively (`GitHub.sha` reads `github`).
    fn lookup(&self, name: &str) -> Option<&Value>;

    fn job_status(&self) -> JobStatus {
        JobStatus::Success
    }

    /// The directory `hashFiles` patterns are relative to; `None` makes `hashFiles` an error.
    fn workspace(&self) -> Option<&Path> {
        None
    }
}

/// An in-memory [`Context`]: contexts by name, a job status and an optional workspace.
#[derive(Clone, Debug, Default)]
pub struct MapContext {
    contexts: IndexMap<String, Value>,
    status: JobStatus,
    workspace: Option<PathBuf>,
}

impl MapContext {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a context.
    #[must_use]
    pub fn with(mut self, name: impl Into<String>, value: Value) -> Self {
        self.insert(name, value);
        self
    }

    pub fn insert(&mut self, name: impl Into<String>, value: Value) {
        self.contexts.insert(name.into(), value);
    }

    #[must_use]
    pub fn with_status(mut self, status: JobStatus) -> Self {
        self.status = status;
        self
    }

    #[must_use]
    pub fn with_workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }

    /// The names of the contexts it holds, in insertion order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.contexts.keys().map(String::as_str)
    }
}

impl Context for MapContext {
    fn lookup(&self, name: &str) -> Option<&Value> {
        self.contexts.get(name).or_else(|| {
            self.contexts
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    }

    fn job_status(&self) -> JobStatus {
        self.status
    }

    fn workspace(&self) -> Option<&Path> {
        self.workspace.as_deref()
    }
}
