//! This user's warm servers, one JSON file each in `<gpuflow home>/warm/` (0700): what
//! `gpuflow servers` lists and what a run looks in for a server to adopt. Docker labels cannot
//! change after a container is made, so what changes over a warm server's life (its expiry,
//! the cells and requests it served) lives here.
//!
//! Each entry has a lock file beside it: the run that adopts a warm server holds its `flock`
//! while it uses it, so two runs never adopt one server, and a run killed while using one
//! leaves an entry whose lock is free but which still says it is in use: orphaned.

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, OFlags, flock};
use serde::{Deserialize, Serialize};

/// A warm server, as the run that kept it warm wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmEntry {
    /// The engine it runs on: `local`, or the engine's address (as GPU leases name hosts).
    pub engine: String,
    pub container: String,
    pub docker_name: String,
    /// The name the steps use for it (`with: { name }`).
    pub name: String,
    /// Its server key: a step adopts it only under the same key.
    pub key: String,
    /// The server group of the cells that may adopt it.
    pub group: String,
    pub image: String,
    /// The GPUs it holds with claims (UUIDs), in the order it was given them.
    pub gpus: Vec<String>,
    /// Their indexes, for listings.
    pub gpu_indexes: Vec<u32>,
    /// The lease folder their locks and claims are in (`None`: the default one).
    #[serde(default)]
    pub lease_dir: Option<PathBuf>,
    pub keep_warm_secs: u64,
    /// Seconds since the epoch.
    pub started_at: u64,
    pub expires_at: u64,
    pub cells_served: u32,
    pub requests_served: u64,
    pub created_on_job_network: bool,
    pub own_network: bool,
    /// The run that adopted it, while one uses it.
    pub in_use_by: Option<String>,
}

/// The folder of this user's warm servers.
#[derive(Clone, Debug)]
pub struct Registry {
    dir: PathBuf,
}

/// An entry held by this process (its lock taken): no other run adopts it meanwhile.
#[derive(Debug)]
pub struct Held {
    pub entry: WarmEntry,
    registry: Registry,
    _lock: File,
}

impl Held {
    /// Forgets the entry (its server is removed).
    pub fn forget(&self) {
        self.registry.remove(&self.entry);
    }
}

impl Registry {
    /// `<gpuflow home>/warm`.
    pub fn from_env() -> Self {
        Self::at(crate::trigger::GpuflowHome::from_env().dir.join("warm"))
    }

    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn ready(&self) -> io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
    }

    fn stem(entry_engine: &str, container: &str) -> String {
        let safe = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect()
        };
        format!("{}@{}", safe(entry_engine), safe(container))
    }

    fn json_path(&self, engine: &str, container: &str) -> PathBuf {
        self.dir
            .join(format!("{}.json", Self::stem(engine, container)))
    }

    fn lock_path(&self, engine: &str, container: &str) -> PathBuf {
        self.dir
            .join(format!("{}.lock", Self::stem(engine, container)))
    }

    /// Writes `entry` (whole, replacing the former one by rename).
    pub fn put(&self, entry: &WarmEntry) -> io::Result<()> {
        self.ready()?;
        let path = self.json_path(&entry.engine, &entry.container);
        // The folder is this user's alone (0700): a sibling temporary file is safe there.
        crate::actions::lock_file::write_atomically(&path, &serde_json::to_string_pretty(entry)?)
    }

    /// Every entry of `engine` (all engines: `None`), oldest first; unreadable files are
    /// skipped.
    pub fn list(&self, engine: Option<&str>) -> Vec<WarmEntry> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut entries: Vec<WarmEntry> = dir
            .flatten()
            .filter(|f| f.path().extension().is_some_and(|e| e == "json"))
            .filter_map(|f| read_entry(&f.path()))
            .filter(|e| engine.is_none_or(|engine| e.engine == engine))
            .collect();
        entries.sort_by_key(|e| (e.started_at, e.container.clone()));
        entries
    }

    /// Takes `entry`'s lock; `None` when another process holds it (it is in use).
    pub fn hold(&self, entry: &WarmEntry) -> io::Result<Option<Held>> {
        if !self.json_path(&entry.engine, &entry.container).exists() {
            return Ok(None);
        }
        let flags = OFlags::NOFOLLOW.bits() as i32;
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(flags)
            .open(self.lock_path(&entry.engine, &entry.container))?;
        match flock(&lock, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        // Read again under the lock: it may have changed or gone since it was listed.
        let Some(entry) = read_entry(&self.json_path(&entry.engine, &entry.container)) else {
            return Ok(None);
        };
        Ok(Some(Held {
            entry,
            registry: self.clone(),
            _lock: lock,
        }))
    }

    /// Whether a process holds `entry`'s lock now.
    pub fn is_held(&self, entry: &WarmEntry) -> bool {
        match self.hold(entry) {
            Ok(Some(_)) => false,
            Ok(None) => read_entry(&self.json_path(&entry.engine, &entry.container)).is_some(),
            Err(_) => false,
        }
    }

    /// Forgets `entry` (its server was stopped or adopted for good).
    pub fn remove(&self, entry: &WarmEntry) {
        let _ = std::fs::remove_file(self.json_path(&entry.engine, &entry.container));
        let _ = std::fs::remove_file(self.lock_path(&entry.engine, &entry.container));
    }
}

fn read_entry(path: &Path) -> Option<WarmEntry> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn entry(container: &str) -> WarmEntry {
        WarmEntry {
            engine: "local".into(),
            container: container.into(),
            docker_name: format!("gpuflow-{container}"),
            name: "server".into(),
            key: "k1".into(),
            group: "tune#1".into(),
            image: "gpuflow-sim:test".into(),
            gpus: vec![],
            gpu_indexes: vec![],
            lease_dir: None,
            keep_warm_secs: 600,
            started_at: 1,
            expires_at: 601,
            cells_served: 1,
            requests_served: 4,
            created_on_job_network: false,
            own_network: false,
            in_use_by: None,
        }
    }

    #[test]
    fn an_entry_is_held_by_one_process_at_a_time_and_forgotten_on_removal() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::at(dir.path().join("warm"));
        let e = entry("abc");
        registry.put(&e).unwrap();
        assert_eq!(registry.list(Some("local")), vec![e.clone()]);
        assert!(registry.list(Some("ssh://node")).is_empty());
        let held = registry.hold(&e).unwrap().expect("free");
        assert!(registry.is_held(&e));
        // flock is per open file: a second open in this process is refused like another's.
        assert!(registry.hold(&e).unwrap().is_none());
        drop(held);
        assert!(!registry.is_held(&e));
        registry.remove(&e);
        assert!(registry.list(None).is_empty());
        assert!(registry.hold(&e).unwrap().is_none(), "gone");
    }
}
