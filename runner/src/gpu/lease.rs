//! Exclusive GPU leases shared by every gpuflow process of this machine: one lock file per GPU
//! (named by its UUID) in a lease folder per host, held with `flock`. The kernel drops a
//! lock when the file is closed, so a lease ends when its [`Lease`] is dropped and also when
//! the process holding it dies, even by SIGKILL: nothing is left to clean up, and a crashed
//! runner never keeps GPUs from the next one.
//!
//! The folder is `$GPUFLOW_LEASE_DIR`, else `gpuflow-leases` in the temporary folder; each
//! host gets a subfolder, so two runners driving one remote node share its leases. The lock
//! files stay (removing one while another process opens it would split the lock); they hold
//! the last holder's description, shown by `gpuflow hosts`.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

/// The environment variable naming the lease folder.
pub const LEASE_DIR_ENV: &str = "GPUFLOW_LEASE_DIR";

/// The lease files of one host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseDir {
    dir: PathBuf,
}

/// GPUs held until dropped.
#[derive(Debug)]
pub struct Lease {
    /// The UUIDs held, in the order asked.
    pub uuids: Vec<String>,
    /// Open and locked; closing them frees the GPUs.
    _files: Vec<File>,
}

impl LeaseDir {
    /// The lease folder of `host_key` under the default root (`$GPUFLOW_LEASE_DIR`, else the
    /// temporary folder's `gpuflow-leases`).
    pub fn for_host(host_key: &str) -> Self {
        let root = std::env::var_os(LEASE_DIR_ENV)
            .filter(|v| !v.is_empty())
            .map_or_else(
                || std::env::temp_dir().join("gpuflow-leases"),
                PathBuf::from,
            );
        Self::at(&root, host_key)
    }

    /// The lease folder of `host_key` under `root`.
    pub fn at(root: &Path, host_key: &str) -> Self {
        let key: String = host_key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        Self {
            dir: root.join(key),
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn file(&self, uuid: &str) -> std::io::Result<File> {
        if !self.dir.is_dir() {
            let root = self.dir.parent().filter(|r| !r.is_dir());
            std::fs::create_dir_all(&self.dir)?;
            // Every user's runners lease the same GPUs: the folders made here are shared like
            // /tmp (sticky) and the lock files writable by all, whatever the creator's umask. A
            // root that was already there (a chosen $GPUFLOW_LEASE_DIR) keeps its mode.
            for dir in [root, Some(self.dir.as_path())].into_iter().flatten() {
                let _ = std::fs::set_permissions(dir, Permissions::from_mode(0o1777));
            }
        }
        let path = self.dir.join(format!("{uuid}.lock"));
        let created = !path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            // `flock` needs no write access: another user's lock file still locks.
            .or_else(|_| OpenOptions::new().read(true).open(&path))?;
        if created {
            let _ = file.set_permissions(Permissions::from_mode(0o666));
        }
        Ok(file)
    }

    /// Takes every GPU of `uuids` or none: `Ok(None)` when one is held by anyone (this
    /// process included). `holder` is written into each file for listings.
    pub fn try_lease(&self, uuids: &[String], holder: &str) -> std::io::Result<Option<Lease>> {
        let mut files = Vec::with_capacity(uuids.len());
        for uuid in uuids {
            let mut file = self.file(uuid)?;
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
            // Informational only: a failed write does not undo the lease.
            let _ = file
                .set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| writeln!(file, "{holder}"));
            files.push(file);
        }
        Ok(Some(Lease {
            uuids: uuids.to_vec(),
            _files: files,
        }))
    }

    /// Whether the GPU `uuid` is free now (a moment later it may not be). An error (a lease
    /// folder this user cannot use) is not "taken": a job would wait for it for ever.
    pub fn is_free(&self, uuid: &str) -> std::io::Result<bool> {
        let file = self.file(uuid)?;
        // Locking and closing at once: held for an instant, never longer.
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Who holds `uuid`, as its holder wrote; `None` when it is free.
    pub fn holder(&self, uuid: &str) -> Option<String> {
        if self.is_free(uuid).unwrap_or(false) {
            return None;
        }
        let mut text = String::new();
        self.file(uuid).ok()?.read_to_string(&mut text).ok()?;
        Some(text.trim().to_string()).filter(|t| !t.is_empty())
    }
}

/// How a holder describes itself in the lease files: `pid 123, run X, job bench (2)`.
pub fn holder_text(run_id: &str, job: &str) -> String {
    format!("pid {}, run {run_id}, {job}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuids(v: &[&str]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_gpu_is_leased_once_until_dropped() {
        let root = tempfile::tempdir().unwrap();
        let dir = LeaseDir::at(root.path(), "ssh://me@node");
        assert!(dir.path().ends_with("ssh___me_node"));
        let a = dir
            .try_lease(&uuids(&["GPU-0", "GPU-1"]), "a")
            .unwrap()
            .unwrap();
        assert!(!dir.is_free("GPU-0").unwrap());
        assert_eq!(dir.holder("GPU-1").as_deref(), Some("a"));
        // All or nothing: GPU-2 is free, GPU-1 is not.
        assert!(
            dir.try_lease(&uuids(&["GPU-2", "GPU-1"]), "b")
                .unwrap()
                .is_none()
        );
        assert!(
            dir.is_free("GPU-2").unwrap(),
            "a failed lease keeps nothing"
        );
        drop(a);
        assert!(dir.is_free("GPU-0").unwrap());
        assert_eq!(dir.holder("GPU-0"), None);
        assert!(dir.try_lease(&uuids(&["GPU-1"]), "b").unwrap().is_some());
    }
}
