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
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::OFlags;

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

    pub(crate) fn text(&self) -> String {
        format!("container={}\nuntil={}\n", self.container, self.until)
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
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

/// The claim in the file `path`, whatever its expiry; `None` when there is none or it is not
/// a plain file (never read through a symlink).
pub fn read(path: &Path) -> Option<WarmClaim> {
    let flags = (OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    // A claim is two short lines; anyone may write the folder, so read no more.
    file.take(4096).read_to_string(&mut text).ok()?;
    WarmClaim::parse(&text)
}

/// Writes `claim` to `path` (in the shared lease folder `dir`): staged in a private folder of
/// its own and renamed over the former file, which in a sticky folder only its owner can.
pub fn write(dir: &Path, path: &Path, claim: &WarmClaim) -> io::Result<()> {
    let tmp = crate::local_dirs::private_dir(dir, ".claim")?;
    let staged = tmp.join("claim");
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&staged)?;
        file.write_all(claim.text().as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&staged, path)
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_holds_until_its_expiry_and_never_further_than_a_day() {
        let now = now_secs();
        let claim = |until| WarmClaim {
            container: "abc".into(),
            until,
        };
        assert!(claim(now + 60).holds_at(now));
        assert!(!claim(now).holds_at(now), "expired");
        assert!(
            !claim(now + 10 * MAX_KEEP_WARM.as_secs()).holds_at(now),
            "planted"
        );
        assert_eq!(WarmClaim::parse(&claim(now).text()), Some(claim(now)));
        assert_eq!(WarmClaim::parse("until=5\n"), None, "no container");
    }
}
