//! Folders gpuflow makes on this machine, made so other local users cannot use them against
//! the one running gpuflow.
//!
//! - [`private_dir`]: a job's working state (the `run:` scripts on the host, `$GITHUB_ENV`,
//!   `$GITHUB_OUTPUT`, `$RUNNER_TEMP`). A folder under `/tmp` with a name anyone can predict
//!   can be made first by another user, who then owns what gpuflow writes and runs there; so
//!   the folder is new every time (`mkdir`, which fails on any existing path, symlinks
//!   included), mode 0700, with a random part in its name, in `$XDG_RUNTIME_DIR` when that is
//!   a private folder of this user, else in the temporary folder.
//! - [`create_state_dir_all`]: the `.gpuflow/` state folder in the user's repository (logs,
//!   results store, queue). When gpuflow makes `.gpuflow/` it writes a `.gitignore` holding `*`
//!   into it, as pytest and ruff do for their caches, so `git status` stays clean.

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The folder private working folders go in: `$XDG_RUNTIME_DIR` when it is an absolute path
/// to a real folder of this user that no one else can enter (what the XDG spec promises;
/// anything else is not trusted), else the temporary folder (`$TMPDIR`, `/tmp`).
pub fn runtime_base() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute() && is_private_dir_of_mine(dir))
        .unwrap_or_else(std::env::temp_dir)
}

fn is_private_dir_of_mine(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| {
        m.is_dir() && m.uid() == rustix::process::geteuid().as_raw() && m.mode() & 0o077 == 0
    })
}

/// Makes a new folder `<parent>/<prefix>-<random>`, mode 0700, and returns its path. Never
/// reuses a path: `mkdir` fails on anything already there (a folder, a file, a symlink), and
/// then another random name is tried, as `mkdtemp` does.
pub fn private_dir(parent: &Path, prefix: &str) -> io::Result<PathBuf> {
    let mut last = None;
    for attempt in 0u32..64 {
        let path = parent.join(format!("{prefix}-{}", random_suffix(attempt)));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {
                // The umask can only take bits away from 0700; make sure of it anyway, as the
                // folder is ours and new (`set_permissions` on a path we just made).
                std::fs::set_permissions(
                    &path,
                    std::os::unix::fs::PermissionsExt::from_mode(0o700),
                )?;
                return Ok(path);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free name")))
}

/// 12 hex digits no other user can guess: std's `RandomState` is seeded from the operating
/// system's random source (no extra dependency for a name).
fn random_suffix(attempt: u32) -> String {
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u32(attempt);
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:012x}", h.finish() & 0xffff_ffff_ffff)
}

/// What gpuflow writes into a `.gpuflow/` it made: everything in it stays out of git, except
/// workflows a user keeps in `.gpuflow/workflows/` (docs/triggers.md), which are theirs.
pub const STATE_GITIGNORE: &str = "# Written by gpuflow when it made this folder: its logs, results store and run queue\n\
# stay out of git (as pytest and ruff do for their caches). Delete this file to commit them.\n\
*\n\
!/workflows/\n\
!/workflows/**\n";

/// `create_dir_all`, and when it makes a folder named `.gpuflow` on the way, a `.gitignore`
/// holding `*` in it. A `.gpuflow/` that was already there is left as it is: its owner may
/// keep workflows in it, or have chosen to commit it.
pub fn create_state_dir_all(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    let state = path
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == ".gpuflow"))
        .filter(|s| !s.exists());
    std::fs::create_dir_all(path)?;
    if let Some(state) = state {
        // `create_new`: two gpuflow processes making `.gpuflow/` at once write it once.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(state.join(".gitignore"))
        {
            Ok(mut f) => io::Write::write_all(&mut f, STATE_GITIGNORE.as_bytes())?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `text` to `path` for this user alone: the folder made (0700) when missing, the file
/// (0600) written beside it and renamed over `path`, so a reader never sees half of it. For
/// what gpuflow keeps in the user's state folder (caches of what images answered).
pub fn write_private(path: &Path, text: &str) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("no folder"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        io::Write::write_all(&mut file, text.as_bytes())?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_dir_is_new_0700_and_never_an_existing_path() {
        let root = tempfile::tempdir().unwrap();
        let a = private_dir(root.path(), "gpuflow-x").unwrap();
        let b = private_dir(root.path(), "gpuflow-x").unwrap();
        assert_ne!(a, b);
        for dir in [&a, &b] {
            let meta = std::fs::symlink_metadata(dir).unwrap();
            assert!(meta.is_dir());
            assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
        }
        assert!(
            a.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("gpuflow-x-")
        );
    }

    #[test]
    fn state_dir_gets_a_gitignore_only_when_gpuflow_makes_it() {
        let root = tempfile::tempdir().unwrap();
        create_state_dir_all(&root.path().join(".gpuflow/runs/1")).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.path().join(".gpuflow/.gitignore")).unwrap(),
            STATE_GITIGNORE
        );
        let mine = tempfile::tempdir().unwrap();
        std::fs::create_dir(mine.path().join(".gpuflow")).unwrap();
        create_state_dir_all(&mine.path().join(".gpuflow/runs/1")).unwrap();
        assert!(!mine.path().join(".gpuflow/.gitignore").exists());
    }
}
