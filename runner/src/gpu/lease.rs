//! Exclusive GPU leases shared by every gpuflow process of this machine: one lock file per GPU
//! (named by its host and UUID) in one shared lease folder, held with `flock`. The kernel
//! drops a lock when the file is closed, so a lease ends when its [`Lease`] is dropped and
//! also when the process holding it dies, even by SIGKILL: nothing is left to clean up, and a
//! crashed runner never keeps GPUs from the next one.
//!
//! The folder is `$GPUFLOW_LEASE_DIR`, else `gpuflow-leases` in the temporary folder. Every
//! user's runners share it, so another local user can put things in it; hence:
//! - gpuflow makes the folder (when missing) 1777 like `/tmp`: writable by all, sticky, so no
//!   one removes or replaces a lock file they did not make. A folder that is already there
//!   is not changed but checked: a real folder (not a symlink), owned by this user or root
//!   (its owner may remove any lock file in it and so give one GPU to two jobs), and sticky
//!   when others may write it. Otherwise it is refused, saying what to fix.
//! - Lock files sit directly in it (`<host>@<UUID>.lock`): a per-host subfolder would belong
//!   to whichever user made it first, who could then empty it.
//! - Lock files are opened without following symlinks (`O_NOFOLLOW`), must be plain files
//!   with one link, and are never truncated: a planted symlink or hard link to someone's file
//!   is refused and that file left untouched.
//!
//! The lock files stay (removing one while another process opens it would split the lock);
//! they hold the last holder's description on their first line, shown by `gpuflow hosts`.

use std::fs::{File, Metadata, OpenOptions, Permissions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, OFlags, flock};

use super::warm_claim::{self, WarmClaim};

/// The environment variable naming the lease folder.
pub const LEASE_DIR_ENV: &str = "GPUFLOW_LEASE_DIR";

/// The lease files of one host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseDir {
    /// The shared lease folder.
    root: PathBuf,
    /// The host's part of its lock files' names.
    key: String,
}

/// GPUs held until dropped.
#[derive(Debug)]
pub struct Lease {
    /// The UUIDs held, in the order asked.
    pub uuids: Vec<String>,
    /// The lease folder they are held in (where a warm server's claims on them go).
    pub dir: LeaseDir,
    /// Open and locked; closing them frees the GPUs.
    _files: Vec<File>,
}

/// A host endpoint or GPU UUID as part of a file name: nothing but `[A-Za-z0-9._-]` (a UUID a
/// remote `nvidia-smi` reported must not name a path elsewhere), so `@` parts them.
pub(super) fn name_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl LeaseDir {
    /// The leases of `host_key` under the default root (`$GPUFLOW_LEASE_DIR`, else the
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

    /// The leases of `host_key` in the lease folder `root`.
    pub fn at(root: &Path, host_key: &str) -> Self {
        Self {
            root: root.to_path_buf(),
            key: name_part(host_key),
        }
    }

    /// The lease folder.
    pub fn path(&self) -> &Path {
        &self.root
    }

    fn lock_path(&self, uuid: &str) -> PathBuf {
        self.root
            .join(format!("{}@{}.lock", self.key, name_part(uuid)))
    }

    fn claim_path(&self, uuid: &str) -> PathBuf {
        self.lock_path(uuid).with_extension("warm")
    }

    /// The warm server's claim on `uuid` that holds it now, if any ([`warm_claim`]).
    pub fn live_claim(&self, uuid: &str) -> Option<WarmClaim> {
        warm_claim::read(&self.claim_path(uuid)).filter(|c| c.holds_at(warm_claim::now_secs()))
    }

    /// Whether `uuid` is held by a warm server other than `adopting`.
    fn claimed_by_other(&self, uuid: &str, adopting: Option<&str>) -> bool {
        self.live_claim(uuid)
            .is_some_and(|c| Some(c.container.as_str()) != adopting)
    }

    /// Writes `claim` for each of `uuids` (over an earlier claim of this user's): from now on
    /// they are the warm server's, whether or not anyone holds their locks.
    pub fn claim(&self, uuids: &[String], claim: &WarmClaim) -> io::Result<()> {
        self.ready_root()?;
        for uuid in uuids {
            warm_claim::write(&self.root, &self.claim_path(uuid), claim)?;
        }
        Ok(())
    }

    /// Removes the claims of `uuids` that name `container` (another's claim is left).
    pub fn unclaim(&self, uuids: &[String], container: &str) {
        for uuid in uuids {
            let path = self.claim_path(uuid);
            if warm_claim::read(&path).is_some_and(|c| c.container == container) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// Makes the lease folder 1777 when it is missing; refuses one that is there but unsafe.
    fn ready_root(&self) -> io::Result<()> {
        let meta = match std::fs::symlink_metadata(&self.root) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if let Some(parent) = self.root.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)?;
                }
                match std::fs::DirBuilder::new().mode(0o700).create(&self.root) {
                    // Ours and new: shared like /tmp, whatever the umask. A folder that was
                    // already there (a chosen $GPUFLOW_LEASE_DIR) keeps its mode.
                    Ok(()) => std::fs::set_permissions(&self.root, Permissions::from_mode(0o1777))?,
                    // Another runner made it a moment ago: checked below like any other.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e),
                }
                std::fs::symlink_metadata(&self.root)?
            }
            Err(e) => return Err(e),
        };
        check_folder(&self.root, &meta, rustix::process::geteuid().as_raw())
    }

    /// Opens the lock file of `uuid`, making it when missing; never through a symlink, never
    /// one with other links, never truncated.
    fn file(&self, uuid: &str) -> io::Result<File> {
        self.ready_root()?;
        let path = self.lock_path(uuid);
        // O_NONBLOCK: a FIFO planted in its place must not hang the open (it is refused below).
        let flags = (OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32;
        let refused = |e: io::Error| {
            if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                io::Error::other(format!(
                    "the lock file `{}` is a symbolic link: gpuflow never opens one through a link (another user may have planted it to have gpuflow write elsewhere); remove it",
                    path.display()
                ))
            } else {
                e
            }
        };
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o666)
            .custom_flags(flags)
            .open(&path)
        {
            Ok(file) => {
                // Every user's runners write their holder line into it, whatever the umask.
                file.set_permissions(Permissions::from_mode(0o666))?;
                file
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(flags)
                .open(&path)
                .or_else(|e| match e.kind() {
                    // `flock` needs no write access: another user's lock file still locks.
                    io::ErrorKind::PermissionDenied => OpenOptions::new()
                        .read(true)
                        .custom_flags(flags)
                        .open(&path),
                    _ => Err(e),
                })
                .map_err(refused)?,
            Err(e) => return Err(refused(e)),
        };
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(io::Error::other(format!(
                "the lock file `{}` is not a plain file; remove it",
                path.display()
            )));
        }
        if meta.nlink() != 1 {
            return Err(io::Error::other(format!(
                "the lock file `{}` has {} hard links: it may be another file of someone's that gpuflow would write into; remove it",
                path.display(),
                meta.nlink()
            )));
        }
        Ok(file)
    }

    /// Takes every GPU of `uuids` or none: `Ok(None)` when one is held by anyone (this
    /// process included). `holder` is written into each file for listings.
    pub fn try_lease(&self, uuids: &[String], holder: &str) -> io::Result<Option<Lease>> {
        self.lease(uuids, holder, None)
    }

    /// Takes over the GPUs of the warm server `container` ([`super::warm_claim`]): like
    /// [`Self::try_lease`], but that server's own claims do not count as taken.
    pub fn try_lease_adopting(
        &self,
        uuids: &[String],
        holder: &str,
        container: &str,
    ) -> io::Result<Option<Lease>> {
        self.lease(uuids, holder, Some(container))
    }

    fn lease(
        &self,
        uuids: &[String],
        holder: &str,
        adopting: Option<&str>,
    ) -> io::Result<Option<Lease>> {
        let mut files = Vec::with_capacity(uuids.len());
        for uuid in uuids {
            let file = self.file(uuid)?;
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
            // Locked, but a warm server's: still taken (the locks taken so far go with
            // `files`).
            if self.claimed_by_other(uuid, adopting) {
                return Ok(None);
            }
            // Informational only: a failed write does not undo the lease. Written over the
            // start, never truncated: readers take the first line, a longer former holder's
            // tail after it is ignored.
            let _ = file.write_all_at(format!("{holder}\n").as_bytes(), 0);
            files.push(file);
        }
        Ok(Some(Lease {
            uuids: uuids.to_vec(),
            dir: self.clone(),
            _files: files,
        }))
    }

    /// Whether the GPU `uuid` is free now (a moment later it may not be). An error (a lease
    /// folder this user cannot use) is not "taken": a job would wait for it for ever.
    pub fn is_free(&self, uuid: &str) -> io::Result<bool> {
        let file = self.file(uuid)?;
        if self.claimed_by_other(uuid, None) {
            return Ok(false);
        }
        // Locking and closing at once: held for an instant, never longer.
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// When the lease of `uuid` was taken: its holder writes the lock file then. `None` when
    /// the file is not there. Read only where [`Self::holder`] names a holder.
    pub fn held_since(&self, uuid: &str) -> Option<std::time::SystemTime> {
        std::fs::symlink_metadata(self.lock_path(uuid))
            .ok()?
            .modified()
            .ok()
    }

    /// Who holds `uuid`, as its holder wrote; `None` when it is free.
    pub fn holder(&self, uuid: &str) -> Option<String> {
        let flocked = self.file(uuid).ok().is_some_and(|file| {
            flock(&file, FlockOperation::NonBlockingLockExclusive)
                == Err(rustix::io::Errno::WOULDBLOCK)
        });
        if !flocked && let Some(claim) = self.live_claim(uuid) {
            let left = claim.until.saturating_sub(warm_claim::now_secs());
            return Some(format!(
                "warm server {} (keep-warm, {} min left)",
                &claim.container[..claim.container.len().min(12)],
                left.div_ceil(60)
            ));
        }
        if self.is_free(uuid).unwrap_or(false) {
            return None;
        }
        let mut text = String::new();
        // A holder line is short; anyone may write the file, so read no more than that.
        self.file(uuid)
            .ok()?
            .take(4096)
            .read_to_string(&mut text)
            .ok()?;
        let line = text.lines().next().unwrap_or_default().trim();
        Some(line.to_string()).filter(|t| !t.is_empty())
    }
}

/// Whether the lease folder `path` can be trusted by the user `me`: a real folder, owned by
/// `me` or root, sticky when others may write it. The error says what to fix.
fn check_folder(path: &Path, meta: &Metadata, me: u32) -> io::Result<()> {
    let p = path.display();
    let fix_env = format!("or set {LEASE_DIR_ENV} to a folder of your own");
    if meta.file_type().is_symlink() {
        return Err(io::Error::other(format!(
            "the GPU lease folder `{p}` is a symbolic link, which gpuflow does not follow there (another user could point it anywhere): remove it and gpuflow makes the folder, {fix_env}"
        )));
    }
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "the GPU lease folder `{p}` is not a folder: remove it and gpuflow makes one, {fix_env}"
        )));
    }
    if meta.uid() != me && meta.uid() != 0 {
        return Err(io::Error::other(format!(
            "the GPU lease folder `{p}` belongs to user id {}, neither you nor root: its owner can remove any lock file in it and so give one GPU to two jobs. For leases shared by every user of this machine, have an administrator make it once: `sudo install -d -o root -g root -m 1777 {p}`; {fix_env}",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(io::Error::other(format!(
            "the GPU lease folder `{p}` is writable by other users but not sticky (mode {mode:04o}): anyone could remove or replace another's lock file and give one GPU to two jobs. Fix: `chmod +t {p}` (1777, as gpuflow makes it), {fix_env}"
        )));
    }
    Ok(())
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
        assert_eq!(
            dir.lock_path("GPU-0"),
            root.path().join("ssh___me_node@GPU-0.lock")
        );
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

    #[test]
    fn a_symlinked_lock_file_is_refused_and_its_target_untouched() {
        let root = tempfile::tempdir().unwrap();
        let dir = LeaseDir::at(root.path(), "local");
        let victim = root.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        std::os::unix::fs::symlink(&victim, dir.lock_path("GPU-0")).unwrap();
        let err = dir.try_lease(&uuids(&["GPU-0"]), "a").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(dir.is_free("GPU-0").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        // A hard link to someone's file is refused the same way.
        std::fs::hard_link(&victim, dir.lock_path("GPU-1")).unwrap();
        let err = dir.try_lease(&uuids(&["GPU-1"]), "a").unwrap_err();
        assert!(err.to_string().contains("hard links"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    }

    #[test]
    fn a_uuid_cannot_name_a_path_outside_the_folder() {
        let root = tempfile::tempdir().unwrap();
        let dir = LeaseDir::at(&root.path().join("leases"), "local");
        assert_eq!(
            dir.lock_path("../../x"),
            root.path().join("leases/local@.._.._x.lock")
        );
    }

    #[test]
    fn holder_lines_are_written_over_never_truncated() {
        let root = tempfile::tempdir().unwrap();
        let dir = LeaseDir::at(root.path(), "local");
        drop(
            dir.try_lease(&uuids(&["GPU-0"]), "a long first holder")
                .unwrap(),
        );
        let b = dir.try_lease(&uuids(&["GPU-0"]), "b").unwrap().unwrap();
        assert_eq!(dir.holder("GPU-0").as_deref(), Some("b"));
        let len = std::fs::metadata(dir.lock_path("GPU-0")).unwrap().len();
        assert_eq!(len, "a long first holder\n".len() as u64);
        drop(b);
    }

    #[test]
    fn a_lease_folder_gpuflow_makes_is_shared_and_sticky() {
        let root = tempfile::tempdir().unwrap();
        let leases = root.path().join("made/leases");
        let dir = LeaseDir::at(&leases, "local");
        assert!(dir.is_free("GPU-0").unwrap());
        let mode = std::fs::metadata(&leases).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o1777);
        let file = std::fs::metadata(dir.lock_path("GPU-0")).unwrap();
        assert_eq!(file.permissions().mode() & 0o777, 0o666);
    }

    #[test]
    fn a_chosen_folder_keeps_its_mode_and_an_unsafe_one_is_refused() {
        let root = tempfile::tempdir().unwrap();
        // A private folder of one's own: used as it is.
        std::fs::set_permissions(root.path(), Permissions::from_mode(0o700)).unwrap();
        let dir = LeaseDir::at(root.path(), "local");
        assert!(dir.is_free("GPU-0").unwrap());
        let mode = std::fs::metadata(root.path()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        // Writable by all but not sticky: anyone could swap the lock files.
        std::fs::set_permissions(root.path(), Permissions::from_mode(0o777)).unwrap();
        let err = dir.is_free("GPU-0").unwrap_err().to_string();
        assert!(err.contains("not sticky (mode 0777)"), "{err}");
        assert!(
            err.contains(&format!("chmod +t {}", root.path().display())),
            "{err}"
        );
        std::fs::set_permissions(root.path(), Permissions::from_mode(0o700)).unwrap();
        // A symlink in its place.
        let link = root.path().join("link");
        std::os::unix::fs::symlink(root.path(), &link).unwrap();
        let err = LeaseDir::at(&link, "local").is_free("GPU-0").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }

    #[test]
    fn a_lease_folder_of_another_user_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join("leases");
        std::fs::create_dir(&folder).unwrap();
        let me = rustix::process::geteuid().as_raw();
        // As root, give the folder away for real; otherwise judge it as another user would.
        let judge = if me == 0 {
            rustix::fs::chown(&folder, Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
            0
        } else {
            me + 1
        };
        let meta = std::fs::symlink_metadata(&folder).unwrap();
        let err = check_folder(&folder, &meta, judge).unwrap_err().to_string();
        assert!(err.contains("neither you nor root"), "{err}");
        assert!(
            err.contains("sudo install -d -o root -g root -m 1777"),
            "{err}"
        );
    }

    #[test]
    fn a_claimed_gpu_is_taken_for_all_but_the_adopter_until_it_expires() {
        let root = tempfile::tempdir().unwrap();
        let dir = LeaseDir::at(root.path(), "local");
        let gpus = uuids(&["GPU-0", "GPU-1"]);
        drop(dir.try_lease(&gpus, "run 1").unwrap().unwrap());
        let claim = WarmClaim {
            container: "abc".into(),
            until: warm_claim::now_secs() + 600,
        };
        dir.claim(&gpus, &claim).unwrap();
        assert_eq!(dir.live_claim("GPU-0"), Some(claim.clone()));
        assert!(!dir.is_free("GPU-0").unwrap(), "no flock, but claimed");
        assert!(dir.try_lease(&gpus, "run 2").unwrap().is_none());
        assert!(dir.holder("GPU-1").unwrap().contains("warm server"));
        let adopted = dir.try_lease_adopting(&gpus, "run 3", "abc").unwrap();
        assert!(adopted.is_some(), "the adopter takes them over");
        assert!(
            dir.try_lease_adopting(&gpus, "run 4", "abc")
                .unwrap()
                .is_none(),
            "held by the adopter's flock"
        );
        drop(adopted);
        // Another container's removal leaves the claim; its own removes it.
        dir.unclaim(&gpus, "other");
        assert!(!dir.is_free("GPU-0").unwrap());
        dir.unclaim(&gpus, "abc");
        assert!(dir.is_free("GPU-0").unwrap() && dir.is_free("GPU-1").unwrap());
    }

    #[test]
    fn an_expired_or_far_future_claim_holds_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dir = LeaseDir::at(root.path(), "local");
        let gpu = uuids(&["GPU-0"]);
        assert!(dir.is_free("GPU-0").unwrap());
        let past = WarmClaim {
            container: "abc".into(),
            until: warm_claim::now_secs() - 1,
        };
        dir.claim(&gpu, &past).unwrap();
        assert!(dir.is_free("GPU-0").unwrap());
        let planted = WarmClaim {
            container: "abc".into(),
            until: warm_claim::now_secs() + 10 * warm_claim::MAX_KEEP_WARM.as_secs(),
        };
        dir.claim(&gpu, &planted).unwrap();
        assert!(dir.is_free("GPU-0").unwrap(), "never further than a day");
    }

    #[test]
    fn a_symlinked_claim_is_not_read() {
        let root = tempfile::tempdir().unwrap();
        let dir = LeaseDir::at(root.path(), "local");
        assert!(dir.is_free("GPU-0").unwrap());
        let elsewhere = root.path().join("elsewhere");
        std::fs::write(
            &elsewhere,
            format!("container=x\nuntil={}\n", warm_claim::now_secs() + 60),
        )
        .unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.claim_path("GPU-0")).unwrap();
        assert_eq!(dir.live_claim("GPU-0"), None);
        assert!(dir.is_free("GPU-0").unwrap());
    }
}
