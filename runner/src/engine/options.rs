//! What a run is given from outside: its id, where it works and logs, inputs and secrets,
//! and how patient it is when stopping things.

use std::path::PathBuf;
use std::time::Duration;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Labels every container and names the log folder.
    pub run_id: String,
    /// The folder steps start in (`github.workspace`): normally the repository.
    pub workspace: PathBuf,
    /// Where this run's logs go (`.gpuflow/runs/<run-id>/`).
    pub log_dir: PathBuf,
    /// The results store benchmark steps write to (`.gpuflow/results.db` at the top of the
    /// repository; `--store` / `GPUFLOW_STORE`).
    pub store: PathBuf,
    /// `--input name=value`, as given; checked against the workflow's `workflow_dispatch`.
    pub inputs: IndexMap<String, String>,
    /// Secret name → value (`secrets.NAME`); every value is masked in logs.
    pub secrets: IndexMap<String, String>,
    /// `vars.NAME`.
    pub vars: IndexMap<String, String>,
    /// `gpuflow.toml`'s `[registries]`: credentials for pulls whose step gives none, each
    /// password named by a secret of [`Self::secrets`].
    pub registries: Vec<crate::hosts::RegistryConfig>,
    /// Leave containers and networks in place at job end (`--keep-containers`), to debug.
    pub keep_containers: bool,
    /// Run the preflight checks and stop (`--preflight-only`): no job starts.
    pub preflight_only: bool,
    /// Between SIGTERM and SIGKILL when a step is stopped.
    pub grace: Duration,
    /// Cancelled steps are still waited for; `always()` steps after a cancellation get this
    /// long at most.
    pub cleanup_timeout: Duration,
    /// Fired by a second Ctrl-C: `always()` steps after a cancellation are stopped at once,
    /// so only the removal of containers is still waited for.
    pub force: CancellationToken,
    /// The event that started the run (a push, from `gpuflow trigger`); `None` for a run
    /// started by hand (`workflow_dispatch`, the checkout's own `HEAD`).
    pub event: Option<EventContext>,
    /// Where the run finds and keeps warm servers ([`crate::warm`]): this user's registry
    /// (in the gpuflow home) unless a caller chooses another.
    pub warm_registry: crate::warm::Registry,
}

/// What a triggered run sees as `github` (and `gpuflow`): the event's name, commit and ref,
/// and its payload as `github.event`. Written by the queue, read by `gpuflow run --event`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EventContext {
    pub event_name: String,
    pub sha: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
    pub ref_name: String,
    /// `branch` or `tag`.
    pub ref_type: String,
    pub actor: String,
    pub repository: String,
    /// `github.event`: GitHub's payload for the event.
    pub event: serde_json::Value,
}

#[cfg(test)]
impl EventContext {
    /// A push of `main` at `sha`, for tests of what carries events.
    pub(crate) fn test_push(sha: &str) -> Self {
        Self {
            event_name: "push".into(),
            sha: sha.into(),
            git_ref: "refs/heads/main".into(),
            ref_name: "main".into(),
            ref_type: "branch".into(),
            actor: "me".into(),
            repository: "r".into(),
            event: serde_json::json!({}),
        }
    }
}

impl RunOptions {
    /// Defaults for a run with this id in `workspace`: logs under
    /// `workspace/.gpuflow/runs/<run-id>`.
    pub fn new(run_id: impl Into<String>, workspace: impl Into<PathBuf>) -> Self {
        let run_id = run_id.into();
        let workspace = workspace.into();
        Self {
            log_dir: workspace.join(".gpuflow").join("runs").join(&run_id),
            store: crate::store::default_path(&workspace),
            run_id,
            workspace,
            inputs: IndexMap::new(),
            secrets: IndexMap::new(),
            vars: IndexMap::new(),
            registries: Vec::new(),
            keep_containers: false,
            preflight_only: false,
            grace: Duration::from_secs(10),
            cleanup_timeout: Duration::from_secs(300),
            force: CancellationToken::new(),
            event: None,
            warm_registry: crate::warm::Registry::from_env(),
        }
    }
}

/// A new run id: the UTC time and a random suffix (`20261130-083512-7f3a9c01d2e4`), sortable
/// and unique: 48 random bits (from the OS-seeded hasher keys std draws), so two runs started
/// in the same second on any number of machines do not collide — a run's containers are
/// removed by its id.
pub fn new_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        & 0xffff_ffff_ffff;
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{random:012x}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        let id = new_run_id();
        assert_eq!(id.len(), 28, "{id}");
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| new_run_id()).collect();
        assert_eq!(
            ids.len(),
            1000,
            "a thousand ids in the same second all differ"
        );
    }
}
