//! [`ResultsBranch`]: commits files (reports, JSON records) to a branch of the workflow's
//! repository without touching the user's checkout.
//!
//! Nothing here reads or writes the work tree or the index: blobs are written straight into
//! the object database, trees are built in memory on top of the branch tip, and the branch is
//! moved with a compare-and-swap (`reference_matching` with the tip the tree was built on). When
//! another run moved the branch first, the tree is rebuilt on the new tip and the swap tried
//! again, a bounded number of times with jitter, so concurrent runs never lose a commit.
//!
//! This module knows nothing of reports or the store: it commits bytes at paths.

use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::{ErrorCode, ObjectType, Oid, Repository, Signature, Tree};

/// The branch reports go to unless the workflow names another.
pub const DEFAULT_BRANCH: &str = "gpuflow-results";

/// How many times a commit is rebuilt on a moved tip before giving up. Each attempt takes
/// milliseconds; 64 covers dozens of runs finishing in the same instant.
const MAX_ATTEMPTS: u32 = 64;

/// One file to commit: a `/`-separated path inside the branch and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchFile {
    pub path: String,
    pub contents: Vec<u8>,
}

/// A commit that landed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The new commit's id (hex).
    pub commit: String,
    /// `refs/heads/<branch>`.
    pub reference: String,
    /// How many times the tree was rebuilt because another run moved the branch first.
    pub retries: u32,
    /// The remote pushed to, when one was asked for.
    pub pushed_to: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("`{path}` is not in a git repository")]
    NotARepository { path: PathBuf, source: git2::Error },
    #[error("`{branch}` is not a valid branch name")]
    BadBranch { branch: String },
    #[error("`{path}` is not a valid path on the results branch")]
    BadPath { path: String },
    #[error("the branch `{branch}` kept moving: gave up after {attempts} attempts")]
    Contended { branch: String, attempts: u32 },
    #[error("pushing `{branch}` to `{remote}` failed: {source}")]
    Push {
        branch: String,
        remote: String,
        source: git2::Error,
    },
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

impl PublishError {
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NotARepository { .. } => {
                Some("run inside the workflow's git repository, or leave `commit` out".into())
            }
            Self::BadBranch { .. } => Some("use a name like `gpuflow-results`".into()),
            Self::BadPath { .. } => {
                Some("paths are relative, with no `..`, `.` or `.git` parts".into())
            }
            Self::Contended { .. } => Some("run it again; nothing was lost".into()),
            Self::Push { .. } => Some(
                "the commit is on the local branch; push it by hand with `git push REMOTE BRANCH`"
                    .into(),
            ),
            Self::Git(_) => None,
        }
    }
}

/// A branch of one repository that results are committed to.
#[derive(Clone, Debug)]
pub struct ResultsBranch {
    repo: PathBuf,
    branch: String,
    /// A remote name (`origin`) or URL to push the branch to after each commit.
    push: Option<String>,
}

impl ResultsBranch {
    /// The branch `branch` of the repository holding `start`.
    pub fn new(start: &Path, branch: &str) -> Result<Self, PublishError> {
        let valid = !branch.is_empty()
            && git2::Reference::is_valid_name(&format!("refs/heads/{branch}"))
            && !branch.starts_with('-');
        if !valid {
            return Err(PublishError::BadBranch {
                branch: branch.to_string(),
            });
        }
        let repo = Repository::discover(start).map_err(|source| PublishError::NotARepository {
            path: start.to_path_buf(),
            source,
        })?;
        // The git directory, not the work tree: a bare repository works too.
        Ok(Self {
            repo: repo.path().to_path_buf(),
            branch: branch.to_string(),
            push: None,
        })
    }

    /// Push after each commit to `remote` (a remote's name or a URL).
    pub fn push_to(mut self, remote: Option<String>) -> Self {
        self.push = remote;
        self
    }

    pub fn branch(&self) -> &str {
        &self.branch
    }

    fn reference(&self) -> String {
        format!("refs/heads/{}", self.branch)
    }

    /// Commits `files` (added or replaced; everything else on the branch is kept) with
    /// `message`, creating the branch (with no parent) when it does not exist yet.
    pub fn commit(&self, files: &[BranchFile], message: &str) -> Result<Committed, PublishError> {
        for f in files {
            split_path(&f.path)?;
        }
        // Each attempt reopens nothing: one handle, refs are re-read from disk every time.
        let repo = Repository::open(&self.repo)?;
        let sig = signature(&repo);
        let blobs = files
            .iter()
            .map(|f| Ok((f.path.as_str(), repo.blob(&f.contents)?)))
            .collect::<Result<Vec<_>, git2::Error>>()?;
        let reference = self.reference();
        for attempt in 0..MAX_ATTEMPTS {
            let tip = match repo.find_reference(&reference) {
                Ok(r) => Some(r.peel_to_commit()?),
                Err(e) if e.code() == ErrorCode::NotFound => None,
                Err(e) => return Err(e.into()),
            };
            let mut tree_id = match &tip {
                Some(c) => c.tree_id(),
                None => repo.treebuilder(None)?.write()?,
            };
            for (path, blob) in &blobs {
                let base = repo.find_tree(tree_id)?;
                let parts = split_path(path)?;
                tree_id = insert(&repo, Some(&base), &parts, *blob)?;
            }
            let tree = repo.find_tree(tree_id)?;
            let parents: Vec<&git2::Commit<'_>> = tip.iter().collect();
            // `None`: write the commit object only; the branch moves below, atomically.
            let commit = repo.commit(None, &sig, &sig, message, &tree, &parents)?;
            let log = format!("gpuflow: {}", first_line(message));
            let moved = match &tip {
                Some(old) => repo.reference_matching(&reference, commit, true, old.id(), &log),
                None => repo.reference(&reference, commit, false, &log),
            };
            match moved {
                Ok(_) => {
                    let pushed_to = self.push_branch(&repo)?;
                    return Ok(Committed {
                        commit: commit.to_string(),
                        reference,
                        retries: attempt,
                        pushed_to,
                    });
                }
                Err(e) if is_race(&e) => {
                    let wait = jitter(attempt);
                    tracing::debug!(
                        branch = %self.branch,
                        attempt,
                        wait_ms = wait.as_millis() as u64,
                        "results branch moved meanwhile; committing again"
                    );
                    std::thread::sleep(wait);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(PublishError::Contended {
            branch: self.branch.clone(),
            attempts: MAX_ATTEMPTS,
        })
    }

    fn push_branch(&self, repo: &Repository) -> Result<Option<String>, PublishError> {
        let Some(remote) = &self.push else {
            return Ok(None);
        };
        let push_err = |source| PublishError::Push {
            branch: self.branch.clone(),
            remote: remote.clone(),
            source,
        };
        let mut handle = match repo.find_remote(remote) {
            Ok(r) => r,
            Err(_) => repo.remote_anonymous(remote).map_err(push_err)?,
        };
        let spec = format!("{0}:{0}", self.reference());
        // A rejected ref comes back through this callback, not as an error of `push`.
        let mut rejected: Option<String> = None;
        {
            let mut callbacks = git2::RemoteCallbacks::new();
            callbacks.push_update_reference(|_, status| {
                if let Some(s) = status {
                    rejected = Some(s.to_string());
                }
                Ok(())
            });
            let mut opts = git2::PushOptions::new();
            opts.remote_callbacks(callbacks);
            handle
                .push(&[spec.as_str()], Some(&mut opts))
                .map_err(push_err)?;
        }
        if let Some(why) = rejected {
            return Err(push_err(git2::Error::from_str(&why)));
        }
        Ok(Some(remote.clone()))
    }
}

/// Another writer got there first: the ref moved, was created, or is locked right now.
fn is_race(e: &git2::Error) -> bool {
    matches!(
        e.code(),
        ErrorCode::Modified | ErrorCode::Exists | ErrorCode::Locked
    )
}

/// Grows with the attempt so a crowd spreads out; the spread breaks lock-step retries.
fn jitter(attempt: u32) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let seed = u64::from(nanos) ^ (u64::from(std::process::id()) << 20) ^ thread_salt();
    let cap = 2 + u64::from(attempt.min(10)) * 5;
    Duration::from_millis(1 + seed % cap)
}

fn thread_salt() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::thread::current().id().hash(&mut h);
    h.finish()
}

/// The repository's configured author, or `gpuflow` when none is set (CI machines often have
/// no `user.name`).
fn signature(repo: &Repository) -> Signature<'static> {
    repo.signature()
        .or_else(|_| Signature::now("gpuflow", "gpuflow@localhost"))
        .unwrap_or_else(|_| {
            Signature::new("gpuflow", "gpuflow@localhost", &git2::Time::new(0, 0))
                .expect("a constant signature is valid")
        })
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn split_path(path: &str) -> Result<Vec<&str>, PublishError> {
    let parts: Vec<&str> = path.split('/').collect();
    let bad = parts.iter().any(|p| {
        p.is_empty()
            || *p == "."
            || *p == ".."
            || p.eq_ignore_ascii_case(".git")
            || p.contains('\0')
    });
    if bad {
        return Err(PublishError::BadPath {
            path: path.to_string(),
        });
    }
    Ok(parts)
}

/// `base` with `blob` at `parts`, written as new trees bottom-up; returns the new root.
fn insert(
    repo: &Repository,
    base: Option<&Tree<'_>>,
    parts: &[&str],
    blob: Oid,
) -> Result<Oid, git2::Error> {
    let mut builder = repo.treebuilder(base)?;
    match parts {
        [] => unreachable!("split_path never returns an empty path"),
        [name] => {
            builder.insert(name, blob, 0o100_644)?;
        }
        [dir, rest @ ..] => {
            let sub = match base.and_then(|t| t.get_name(dir)) {
                Some(entry) if entry.kind() == Some(ObjectType::Tree) => {
                    Some(repo.find_tree(entry.id())?)
                }
                _ => None,
            };
            let id = insert(repo, sub.as_ref(), rest, blob)?;
            builder.insert(dir, id, 0o040_000)?;
        }
    }
    builder.write()
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn repo() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        (dir, repo)
    }

    fn file(path: &str, text: &str) -> BranchFile {
        BranchFile {
            path: path.into(),
            contents: text.as_bytes().to_vec(),
        }
    }

    fn read(repo: &Repository, branch: &str, path: &str) -> Option<String> {
        let commit = repo
            .find_reference(&format!("refs/heads/{branch}"))
            .ok()?
            .peel_to_commit()
            .ok()?;
        let entry = commit.tree().ok()?.get_path(Path::new(path)).ok()?;
        let blob = repo.find_blob(entry.id()).ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    }

    #[test]
    fn first_commit_creates_the_branch_and_later_ones_keep_earlier_files() {
        let (dir, repo) = repo();
        let b = ResultsBranch::new(dir.path(), DEFAULT_BRANCH).unwrap();
        let first = b
            .commit(&[file("runs/a/record.json", "{}")], "gpuflow: a")
            .unwrap();
        let second = b
            .commit(
                &[file("runs/b/record.json", "[]"), file("index.md", "# x")],
                "gpuflow: b",
            )
            .unwrap();
        assert_eq!(
            read(&repo, DEFAULT_BRANCH, "runs/a/record.json").as_deref(),
            Some("{}")
        );
        assert_eq!(
            read(&repo, DEFAULT_BRANCH, "runs/b/record.json").as_deref(),
            Some("[]")
        );
        let tip = repo
            .find_commit(Oid::from_str(&second.commit).unwrap())
            .unwrap();
        assert_eq!(tip.parent_id(0).unwrap().to_string(), first.commit);
        assert_eq!(tip.message().unwrap(), "gpuflow: b");
    }

    #[test]
    fn a_file_is_replaced_in_place() {
        let (dir, repo) = repo();
        let b = ResultsBranch::new(dir.path(), "r").unwrap();
        b.commit(&[file("x/y.md", "1")], "one").unwrap();
        b.commit(&[file("x/y.md", "2")], "two").unwrap();
        assert_eq!(read(&repo, "r", "x/y.md").as_deref(), Some("2"));
    }

    #[test_case("../x" ; "parent")]
    #[test_case("a//b" ; "empty part")]
    #[test_case(".git/config" ; "git dir")]
    #[test_case("" ; "empty")]
    fn bad_paths_are_refused(path: &str) {
        let (dir, _repo) = repo();
        let b = ResultsBranch::new(dir.path(), "r").unwrap();
        let err = b.commit(&[file(path, "x")], "m").unwrap_err();
        assert!(matches!(err, PublishError::BadPath { .. }), "{err}");
    }

    #[test_case("" ; "empty")]
    #[test_case("a..b" ; "double dot")]
    #[test_case("has space" ; "space")]
    fn bad_branches_are_refused(branch: &str) {
        let (dir, _repo) = repo();
        let err = ResultsBranch::new(dir.path(), branch).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("`{branch}` is not a valid branch name")
        );
    }

    #[test]
    fn outside_a_repository_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let err = ResultsBranch::new(dir.path(), "r").unwrap_err();
        assert!(matches!(err, PublishError::NotARepository { .. }));
        assert!(err.hint().is_some());
    }
}
