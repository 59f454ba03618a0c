//! Whether the runner that owns a container still runs, proved by a lock it holds.
//!
//! Each gpuflow process that creates containers picks a random token, creates
//! `<state>/runners/<token>.lock` and holds an exclusive `flock` on it for as long as it lives;
//! its containers carry the token as a label. The kernel drops the lock when the process ends,
//! however it ends (SIGKILL included). A sweep asks the lock, not `/proc`: a pid that is not
//! visible (`hidepid=2` on shared nodes, another PID namespace) or a host name shared by two
//! machines says nothing about the runner, but a lock held is alive and a lock free is dead,
//! across namespaces. A token whose lock file is not here (another user's runner, another
//! machine driving the same engine) is unknown, and its containers are kept.
//!
//! `<state>` is the host's gpuflow folder (`$GPUFLOW_HOME`, else `$XDG_STATE_HOME/gpuflow`,
//! else `~/.local/state/gpuflow`); `runners/` is made 0700, lock files 0600, opened without
//! following symlinks and never truncated.

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use rustix::fs::FlockOperation;

/// Lock files of dead runners older than this are removed when a runner starts.
const PRUNE_AFTER: Duration = Duration::from_secs(7 * 86_400);

/// What a token's lock says about its runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    Dead,
    /// No lock file here: another user's or another machine's runner, or an older gpuflow.
    Unknown,
}

/// The folder of runner locks.
pub fn runner_dir() -> PathBuf {
    crate::trigger::GpuflowHome::from_env().dir.join("runners")
}

fn lock_path(dir: &Path, token: &str) -> Option<PathBuf> {
    // A token from a label is data: only the shape this module makes names a file.
    (token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| dir.join(format!("{token}.lock")))
}

/// This process's token, its lock taken on first use; `None` when the lock cannot be made
/// (its containers are then never swept, only removed by their run or `gc --all-runs`).
pub fn current_token() -> Option<&'static str> {
    static TOKEN: OnceLock<Option<(String, File)>> = OnceLock::new();
    TOKEN
        .get_or_init(|| match take_lock(&runner_dir()) {
            Ok(held) => Some(held),
            Err(e) => {
                eprintln!(
                    "warning: cannot hold a runner lock in `{}`: {e}; if this process dies, its containers are not swept (remove them with `gpuflow gc --all-runs`)",
                    runner_dir().display()
                );
                None
            }
        })
        .as_ref()
        .map(|(token, _)| token.as_str())
}

fn take_lock(dir: &Path) -> io::Result<(String, File)> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    prune(dir);
    let token = format!("{:016x}{:016x}", random_u64(), random_u64());
    let path = lock_path(dir, &token).expect("a token of the right shape");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)?;
    rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive)?;
    Ok((token, file))
}

/// What `token`'s lock in `dir` says.
pub fn liveness_in(dir: &Path, token: &str) -> Liveness {
    let Some(path) = lock_path(dir, token) else {
        return Liveness::Unknown;
    };
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
    else {
        return Liveness::Unknown;
    };
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockShared) {
        // Free: nobody holds it, so its runner is gone (our shared lock ends with `file`).
        Ok(()) => Liveness::Dead,
        Err(rustix::io::Errno::WOULDBLOCK) => Liveness::Alive,
        Err(_) => Liveness::Unknown,
    }
}

/// What `token`'s lock in this host's runner folder says.
pub fn liveness(token: &str) -> Liveness {
    liveness_in(&runner_dir(), token)
}

/// Removes the lock files of runners dead for a while (a lock file is a few bytes, but one is
/// made per run).
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(token) = name.to_str().and_then(|n| n.strip_suffix(".lock")) else {
            continue;
        };
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > PRUNE_AFTER);
        if old && liveness_in(dir, token) == Liveness::Dead {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_alive_a_free_one_dead_a_missing_one_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let (token, file) = take_lock(dir.path()).unwrap();
        assert_eq!(liveness_in(dir.path(), &token), Liveness::Alive);
        drop(file);
        assert_eq!(liveness_in(dir.path(), &token), Liveness::Dead);
        let other = "0123456789abcdef0123456789abcdef";
        assert_eq!(liveness_in(dir.path(), other), Liveness::Unknown);
    }

    #[test]
    fn a_token_from_a_label_never_names_another_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.lock"), "").unwrap();
        for token in ["x", "../x", "/etc/passwd", ""] {
            assert_eq!(liveness_in(dir.path(), token), Liveness::Unknown, "{token}");
        }
    }

    #[test]
    fn a_symlinked_lock_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let token = "00000000000000000000000000000001";
        std::os::unix::fs::symlink(&victim, dir.path().join(format!("{token}.lock"))).unwrap();
        assert_eq!(liveness_in(dir.path(), token), Liveness::Unknown);
        assert_eq!(std::fs::read_to_string(victim).unwrap(), "keep");
    }
}
