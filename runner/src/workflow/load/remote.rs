//! The loader's view of remote actions (`uses: owner/repo[/path]@ref`): something that turns
//! one into a folder on disk. Fetching, pinning and caching belong to [`crate::actions`]; the
//! loader reads the folder it is given as it reads a local action's.

use std::path::PathBuf;

use crate::diag::Diagnostic;

/// A remote `uses:`, in its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAction<'a> {
    pub owner: &'a str,
    pub repo: &'a str,
    /// The action's folder inside the repository; its root when `None`.
    pub path: Option<&'a str>,
    /// The branch, tag or commit after `@`.
    pub git_ref: &'a str,
}

/// Where a remote action was put.
#[derive(Clone, Debug)]
pub struct FetchedAction {
    /// The action's folder (holding `action.yml`), read-only.
    pub dir: PathBuf,
    /// Worth saying but not stopping the load (a tag that moved away from the commit
    /// `gpuflow.lock` pins): diagnostics without a place, put at the `uses:` by the loader.
    pub warnings: Vec<Diagnostic>,
}

/// Resolves remote actions for a load. An error is a diagnostic without a place (what was
/// tried, why it failed, how to fix it); the loader puts it at the `uses:`.
pub trait RemoteActionSource {
    fn fetch(&mut self, action: &RemoteAction<'_>) -> Result<FetchedAction, Box<Diagnostic>>;
}
