//! The cache of remote action repositories: one bare repository per source URL, every branch
//! and tag fetched into it, and the files of each commit used, checked out once.
//!
//! Layout under the cache folder: `repos/<hash of URL>.git` (bare), `repos/<hash>.lock`
//! (held while fetching, so two runs never fetch into one repository at once), and
//! `trees/<commit>/` (a commit's files: checked out into a temporary folder and renamed into
//! place, so a run sees a whole tree or none, and a concurrent run reuses it).
//!
//! `file://` URLs and plain paths are fetched with git2. This build of libgit2 has no
//! https/ssh transports (no OpenSSL or libssh2 to build and keep patched), so other URLs are
//! fetched by the `git` program into the same repository: the user's SSH keys, credential
//! helpers and proxy settings then apply, as they do for their own `git fetch`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use git2::{AutotagOption, FetchOptions, FetchPrune, Oid, Repository};

use super::source_url::{ALLOWED_SCHEMES, url_problem};

const REFSPECS: [&str; 2] = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

/// The cache folder.
#[derive(Clone, Debug)]
pub struct GitCache {
    root: PathBuf,
}

/// A ref the fetched repository does not have, with what it does have for the message.
#[derive(Debug)]
pub struct UnknownRef {
    pub tags: Vec<String>,
    pub branches: Vec<String>,
}

impl GitCache {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn repo_dir(&self, url: &str) -> PathBuf {
        self.root
            .join("repos")
            .join(format!("{}.git", url_hash(url)))
    }

    /// Fetches every branch and tag of `url` (tags that moved upstream move here too; the
    /// commits they pointed at stay in the repository). The error is the reason, in a line.
    #[tracing::instrument(
        level = "debug",
        name = "git_fetch",
        skip_all,
        fields(url = %crate::diag_log::without_credentials(url))
    )]
    pub fn fetch(&self, url: &str) -> Result<(), String> {
        // Checked here too, whatever the caller checked: nothing reaches git unchecked.
        if let Some(problem) = url_problem(url) {
            return Err(format!("`{url}` is refused: {problem}"));
        }
        let dir = self.repo_dir(url);
        let _guard = super::lock_file::exclusive(&self.root.join("repos"), &dir)
            .map_err(|e| format!("cannot lock the cache `{}`: {e}", self.root.display()))?;
        let (repo, created) = match Repository::open_bare(&dir) {
            Ok(r) => (r, false),
            Err(_) => (
                Repository::init_bare(&dir)
                    .map_err(|e| format!("cannot create `{}`: {}", dir.display(), e.message()))?,
                true,
            ),
        };
        let result = if is_local(url) {
            repo.remote_anonymous(url)
                .and_then(|mut remote| {
                    let mut opts = FetchOptions::new();
                    opts.download_tags(AutotagOption::None)
                        .prune(FetchPrune::On);
                    remote.fetch(&REFSPECS, Some(&mut opts), None)
                })
                .map_err(|e| reason(&e))
        } else {
            fetch_with_git(&dir, url, fetch_timeout())
        };
        match &result {
            Ok(()) => tracing::debug!(local = is_local(url), created, "fetched"),
            // The reason may quote the URL (git's messages do), credentials and all.
            Err(_) => tracing::debug!(local = is_local(url), created, "fetch failed"),
        }
        // A source that does not have the repository leaves no empty one behind.
        if result.is_err() && created {
            drop(repo);
            let _ = std::fs::remove_dir_all(&dir);
        }
        result
    }

    /// The commit `git_ref` names in the repository of `url` as last fetched: a tag, a
    /// branch, or a full commit id.
    pub fn resolve(&self, url: &str, git_ref: &str) -> Result<String, UnknownRef> {
        let repo = Repository::open_bare(self.repo_dir(url)).ok();
        let found = repo.as_ref().and_then(|repo| {
            let by_name = [
                format!("refs/tags/{git_ref}"),
                format!("refs/heads/{git_ref}"),
            ]
            .iter()
            .find_map(|name| {
                let commit = repo.find_reference(name).ok()?.peel_to_commit().ok()?;
                Some(commit.id().to_string())
            });
            by_name.or_else(|| {
                let oid = Oid::from_str(git_ref)
                    .ok()
                    .filter(|_| git_ref.len() == 40)?;
                repo.find_commit(oid).ok().map(|c| c.id().to_string())
            })
        });
        found.ok_or_else(|| {
            let names = |prefix: &str| -> Vec<String> {
                repo.as_ref()
                    .and_then(|r| r.references_glob(&format!("{prefix}*")).ok())
                    .map(|mut refs| {
                        refs.names()
                            .filter_map(Result::ok)
                            .map(|n| n.trim_start_matches(prefix).to_owned())
                            .collect()
                    })
                    .unwrap_or_default()
            };
            UnknownRef {
                tags: names("refs/tags/"),
                branches: names("refs/heads/"),
            }
        })
    }

    /// Whether the repository of `url` holds `commit` (fetched once, kept even if the tag
    /// that led to it moved).
    pub fn has_commit(&self, url: &str, commit: &str) -> bool {
        let Ok(repo) = Repository::open_bare(self.repo_dir(url)) else {
            return false;
        };
        Oid::from_str(commit).is_ok_and(|oid| repo.find_commit(oid).is_ok())
    }

    /// The folder holding `commit`'s files, checked out on first use.
    pub fn tree(&self, url: &str, commit: &str) -> Result<PathBuf, String> {
        let trees = self.root.join("trees");
        let dest = trees.join(commit);
        if dest.is_dir() {
            return Ok(dest);
        }
        std::fs::create_dir_all(&trees)
            .map_err(|e| format!("cannot create `{}`: {e}", trees.display()))?;
        let tmp = trees.join(format!(".tmp-{commit}-{}", std::process::id()));
        let result = self.check_out(url, commit, &tmp).and_then(|()| {
            match std::fs::rename(&tmp, &dest) {
                Ok(()) => Ok(()),
                // Another run put the same commit in place first: theirs is as good.
                Err(_) if dest.is_dir() => Ok(()),
                Err(e) => Err(format!(
                    "cannot move the checkout into `{}`: {e}",
                    dest.display()
                )),
            }
        });
        if tmp.exists() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        result.map(|()| dest)
    }

    fn check_out(&self, url: &str, commit: &str, into: &Path) -> Result<(), String> {
        let repo = Repository::open_bare(self.repo_dir(url)).map_err(|e| reason(&e))?;
        let oid = Oid::from_str(commit).map_err(|e| reason(&e))?;
        let commit = repo.find_commit(oid).map_err(|e| reason(&e))?;
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout.target_dir(into).force().update_index(false);
        repo.checkout_tree(commit.as_object(), Some(&mut checkout))
            .map_err(|e| {
                format!(
                    "cannot check out {commit}: {}",
                    e.message(),
                    commit = commit.id()
                )
            })
    }
}

/// `file://…` and plain paths: fetched with git2's local transport.
fn is_local(url: &str) -> bool {
    url.starts_with("file://") || url.starts_with('/')
}

/// How long one `git fetch` may take before it is stopped: the cache's lock is held meanwhile,
/// so a server that accepts and never answers would otherwise hold every other run (and
/// `gpuflow validate`) waiting for ever. `GPUFLOW_GIT_TIMEOUT` (`30s`, `10m`) changes it.
const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(300);

fn fetch_timeout() -> Duration {
    std::env::var("GPUFLOW_GIT_TIMEOUT")
        .ok()
        .and_then(|v| humantime::parse_duration(&v).ok())
        .unwrap_or(DEFAULT_FETCH_TIMEOUT)
}

/// `git fetch` into the cached repository, never asking for a password on the terminal (a
/// hook or a run has no one to answer), stopped after `timeout`.
fn fetch_with_git(dir: &Path, url: &str, timeout: Duration) -> Result<(), String> {
    // `--` ends the options: whatever `url` holds, git reads it as the repository.
    let mut child = Command::new("git")
        .arg(format!("--git-dir={}", dir.display()))
        .args([
            "fetch",
            "--quiet",
            "--prune",
            "--no-tags",
            "--force",
            "--",
            url,
        ])
        .args(REFSPECS)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ALLOW_PROTOCOL", ALLOWED_SCHEMES.join(":"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "the `git` program is not installed (it fetches non-`file://` sources)".to_owned()
            }
            _ => format!("cannot run `git fetch`: {e}"),
        })?;
    // Read stderr beside the wait, so a chatty git never blocks on a full pipe.
    let mut stderr = child.stderr.take().expect("piped above");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if std::time::Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for `git fetch`: {e}")),
        }
    };
    let stderr = reader.join().unwrap_or_default();
    match status {
        None => Err(format!(
            "`git fetch` gave no answer within {} and was stopped (help: check that the source is reachable; `GPUFLOW_GIT_TIMEOUT` sets the limit)",
            humantime::format_duration(timeout)
        )),
        Some(status) if status.success() => Ok(()),
        Some(_) => {
            let last = stderr
                .lines()
                .map(str::trim)
                .rfind(|l| !l.is_empty())
                .unwrap_or("no message");
            Err(format!("`git fetch` failed: {last}"))
        }
    }
}

fn reason(e: &git2::Error) -> String {
    e.message().trim_end_matches('.').to_owned()
}

/// A file name for a URL: short, stable, and without the URL's own characters (a URL may
/// carry a user name; the hash does not show it).
fn url_hash(url: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(url.as_bytes())
        .iter()
        .take(10)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A git server that accepts the connection and never answers: the fetch is stopped at
    /// its timeout with a reason, not left holding the cache's lock.
    #[test]
    fn a_source_that_never_answers_is_given_up_on() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
        let dir = tempfile::tempdir().unwrap();
        Repository::init_bare(dir.path()).unwrap();
        let started = std::time::Instant::now();
        let error = fetch_with_git(
            dir.path(),
            &format!("git://127.0.0.1:{port}/team/acts.git"),
            Duration::from_millis(700),
        )
        .unwrap_err();
        assert!(error.contains("gave no answer within 700ms"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(10));
        drop(held);
    }
}
