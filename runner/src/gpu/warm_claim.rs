//! GPUs held by a warm server after its runner is gone (`keep-warm:` on `start-container`).
//! A lease is a `flock`, which ends with the process that holds it; a server kept warm between
//! runs must keep its GPUs with no gpuflow process alive. So the run that keeps it warm writes
//! a claim beside each GPU's lock file (`<host>@<UUID>.warm`, in the same shared lease folder)
//! naming the container and when it expires, then lets its flock go. Every runner treats a GPU
//! with a claim that has not expired as taken, except the runner adopting that very container,
//! which holds the flock on top of the claim while it uses the server.
//!
//! A claim ends when the server is stopped (`gpuflow servers stop`, `gc`, the sweep of an
//! expired one) or, failing that, when it expires: a claim is never honoured past its expiry
//! nor further ahead than [`MAX_KEEP_WARM`], so a claim left by a crash, or planted by
//! another user, cannot hold a GPU for long. Claim files are written like lock files: never
//! through a symlink, replaced by rename (the folder is sticky: no one replaces another's).

use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::OFlags;

use super::lease::LeaseDir;

/// The longest a server may be kept warm, and so the furthest ahead a claim is honoured.
pub const MAX_KEEP_WARM: Duration = Duration::from_secs(24 * 3600);

/// A warm server's hold on one GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarmClaim {
    /// The container id of the server.
    pub container: String,
    /// Seconds since the epoch after which the claim holds nothing.
    pub until: u64,
}

impl WarmClaim {
    /// Whether it still holds its GPU at `now` (seconds since the epoch).
    pub fn holds_at(&self, now: u64) -> bool {
        now < self.until && self.until <= now + MAX_KEEP_WARM.as_secs() + 60
    }

    fn text(&self) -> String {
        format!("container={}\nuntil={}\n", self.container, self.until)
    }

    fn parse(text: &str) -> Option<Self> {
        let mut container = None;
        let mut until = None;
        for line in text.lines() {
            match line.split_once('=') {
                Some(("container", v)) => container = Some(v.trim().to_string()),
                Some(("until", v)) => until = v.trim().parse().ok(),
                _ => {}
            }
        }
        Some(Self {
            container: container.filter(|c| !c.is_empty())?,
            until: until?,
        })
    }
}

/// Seconds since the epoch, now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl LeaseDir {
    fn claim_path(&self, uuid: &str) -> PathBuf {
        self.lock_path(uuid).with_extension("warm")
    }

    /// The claim on `uuid` that holds it now, if any.
    pub fn live_claim(&self, uuid: &str) -> Option<WarmClaim> {
        let flags = (OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(self.claim_path(uuid))
            .ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        // A claim is two short lines; anyone may write the folder, so read no more.
        file.take(4096).read_to_string(&mut text).ok()?;
        WarmClaim::parse(&text).filter(|c| c.holds_at(now_secs()))
    }

    /// Whether `uuid` is held by a warm server other than `adopting`.
    pub(super) fn claimed_by_other(&self, uuid: &str, adopting: Option<&str>) -> bool {
        self.live_claim(uuid)
            .is_some_and(|c| Some(c.container.as_str()) != adopting)
    }

    /// Writes `claim` for each of `uuids` (over an earlier claim of this user's); the folder
    /// must already hold their lock files (the caller leases them first).
    pub fn claim(&self, uuids: &[String], claim: &WarmClaim) -> io::Result<()> {
        for uuid in uuids {
            let path = self.claim_path(uuid);
            let tmp = crate::local_dirs::private_dir(self.path(), ".claim")?;
            let staged = tmp.join("claim");
            let written = (|| {
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o644)
                    .open(&staged)?;
                file.write_all(claim.text().as_bytes())?;
                file.sync_all()?;
                std::fs::rename(&staged, &path)
            })();
            let _ = std::fs::remove_dir_all(&tmp);
            written?;
        }
        Ok(())
    }

    /// Removes the claims of `uuids` that name `container` (another's claim is left).
    pub fn unclaim(&self, uuids: &[String], container: &str) {
        for uuid in uuids {
            let path = self.claim_path(uuid);
            let flags = (OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32;
            let names_it = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(flags)
                .open(&path)
                .ok()
                .and_then(|f| {
                    let mut text = String::new();
                    f.take(4096).read_to_string(&mut text).ok()?;
                    WarmClaim::parse(&text)
                })
                .is_some_and(|c| c.container == container);
            if names_it {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuids(v: &[&str]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_claimed_gpu_is_taken_for_all_but_the_adopter_until_it_expires() {
        let root = tempfile::tempdir().unwrap();
        let dir = LeaseDir::at(root.path(), "local");
        let gpus = uuids(&["GPU-0", "GPU-1"]);
        drop(dir.try_lease(&gpus, "run 1").unwrap().unwrap());
        let claim = WarmClaim {
            container: "abc".into(),
            until: now_secs() + 600,
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
            until: now_secs() - 1,
        };
        dir.claim(&gpu, &past).unwrap();
        assert!(dir.is_free("GPU-0").unwrap());
        let planted = WarmClaim {
            container: "abc".into(),
            until: now_secs() + 10 * MAX_KEEP_WARM.as_secs(),
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
            format!("container=x\nuntil={}\n", now_secs() + 60),
        )
        .unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.claim_path("GPU-0")).unwrap();
        assert_eq!(dir.live_claim("GPU-0"), None);
        assert!(dir.is_free("GPU-0").unwrap());
    }
}
