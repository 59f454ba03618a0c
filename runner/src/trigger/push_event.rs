//! A push, as the hooks see it (a ref moved from one commit to another), made into what
//! workflows are matched against and what `github.event` holds: the commits pushed and the
//! files they change, computed with git2 from the repository itself.
//!
//! Which files changed: for an updated ref, the two-dot diff `before..after` of the trees (as
//! GitHub does for pushes); for a new ref (an all-zero `before`), the changes of the commits
//! no other ref already has, each against its first parent, so a new branch made of two
//! commits is matched on what those two commits change. A renamed file counts under both
//! names, a deleted file under its old one. A deleted ref (an all-zero `after`) starts nothing.

use std::collections::BTreeSet;

use git2::{Oid, Repository};
use serde_json::{Value, json};

use crate::engine::options::EventContext;

/// The all-zero object id hooks give for "no commit" (a created or deleted ref).
pub const ZERO_SHA: &str = "0000000000000000000000000000000000000000";

/// At most this many commits are listed in `github.event.commits` (GitHub lists 20; the
/// changed files are computed from all of them).
const LISTED_COMMITS: usize = 20;

/// One ref update, as a hook or `gpuflow trigger`'s flags give it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefUpdate {
    pub git_ref: String,
    pub before: String,
    pub after: String,
    /// The local branch a `pre-push` sends (it already points at `after`): the commits it
    /// holds are not "already known" to the receiving side.
    pub local_ref: Option<String>,
}

/// One push of one ref.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushEvent {
    /// The full ref: `refs/heads/main`, `refs/tags/v1.0`.
    pub git_ref: String,
    pub before: String,
    /// What the ref now names: a commit, or an annotated tag object.
    pub after: String,
    /// The commit `after` names (the tag peeled), which runs check out and see as
    /// `github.sha`, as on GitHub; empty when the ref was deleted.
    pub commit: String,
    /// Newest first, as `git log` shows them.
    pub commits: Vec<PushedCommit>,
    /// Every path the push adds, modifies, renames or deletes, sorted.
    pub changed: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedCommit {
    pub id: String,
    pub tree_id: String,
    pub message: String,
    pub author_name: String,
    pub author_email: String,
    pub time: i64,
}

/// Why a push cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("`{0}` is not a full ref such as `refs/heads/main` or `refs/tags/v1`")]
    BadRef(String),
    #[error("`{0}` is not a 40-character commit id")]
    BadSha(String),
    #[error("commit `{sha}` is not in the repository: {source}")]
    MissingCommit { sha: String, source: git2::Error },
    #[error("reading the repository failed: {0}")]
    Git(#[from] git2::Error),
}

impl PushEvent {
    /// Reads the push of `update.git_ref` from `before` to `after` in `repo`.
    pub fn read(repo: &Repository, update: &RefUpdate) -> Result<Self, PushError> {
        let (git_ref, before, after) = (
            update.git_ref.as_str(),
            update.before.as_str(),
            update.after.as_str(),
        );
        if !git_ref.starts_with("refs/") || git_ref.len() <= "refs/".len() {
            return Err(PushError::BadRef(git_ref.to_string()));
        }
        let before_oid = parse_sha(before)?;
        let after_oid = parse_sha(after)?;
        let mut event = Self {
            git_ref: git_ref.to_string(),
            before: before.to_string(),
            after: after.to_string(),
            commit: String::new(),
            commits: Vec::new(),
            changed: Vec::new(),
        };
        if after_oid.is_zero() {
            return Ok(event);
        }
        let after_commit = find_commit(repo, after_oid, after)?;
        event.commit = after_commit.id().to_string();
        let before_commit = if before_oid.is_zero() {
            None
        } else {
            // A force push whose old commit this repository never had is read as a new ref.
            repo.find_commit(before_oid).ok()
        };

        let mut walk = repo.revwalk()?;
        walk.push(after_oid)?;
        match &before_commit {
            Some(b) => walk.hide(b.id())?,
            None => hide_other_refs(repo, &mut walk, git_ref, update.local_ref.as_deref())?,
        }
        let new_commits: Vec<Oid> = walk.collect::<Result<_, _>>()?;

        let mut changed = BTreeSet::new();
        match &before_commit {
            Some(b) => diff_paths(repo, Some(&b.tree()?), &after_commit.tree()?, &mut changed)?,
            None => {
                for oid in &new_commits {
                    let commit = repo.find_commit(*oid)?;
                    let parent_tree = match commit.parent(0) {
                        Ok(p) => Some(p.tree()?),
                        Err(_) => None,
                    };
                    diff_paths(repo, parent_tree.as_ref(), &commit.tree()?, &mut changed)?;
                }
            }
        }
        event.changed = changed.into_iter().collect();
        for oid in new_commits.iter().take(LISTED_COMMITS) {
            let c = repo.find_commit(*oid)?;
            event.commits.push(PushedCommit {
                id: oid.to_string(),
                tree_id: c.tree_id().to_string(),
                message: c.message().unwrap_or_default().to_string(),
                author_name: c.author().name().unwrap_or_default().to_string(),
                author_email: c.author().email().unwrap_or_default().to_string(),
                time: c.time().seconds(),
            });
        }
        Ok(event)
    }

    pub fn is_tag(&self) -> bool {
        self.git_ref.starts_with("refs/tags/")
    }

    pub fn is_branch(&self) -> bool {
        self.git_ref.starts_with("refs/heads/")
    }

    pub fn is_deletion(&self) -> bool {
        self.after == ZERO_SHA
    }

    pub fn is_creation(&self) -> bool {
        self.before == ZERO_SHA
    }

    /// `main` for `refs/heads/main`, `v1.0` for `refs/tags/v1.0`.
    pub fn ref_name(&self) -> &str {
        self.git_ref
            .strip_prefix("refs/heads/")
            .or_else(|| self.git_ref.strip_prefix("refs/tags/"))
            .unwrap_or(&self.git_ref)
    }

    /// What a run started by this push sees as `github` (and `gpuflow`): GitHub's push
    /// payload in `event`, with `changed_files` added (a gpuflow extension).
    pub fn context(&self, repository: &str, actor: &str) -> EventContext {
        let commit = |c: &PushedCommit| {
            json!({
                "id": c.id,
                "tree_id": c.tree_id,
                "message": c.message,
                "timestamp": c.time,
                "author": { "name": c.author_name, "email": c.author_email },
            })
        };
        let payload = json!({
            "ref": self.git_ref,
            "before": self.before,
            "after": self.after,
            "created": self.is_creation(),
            "deleted": self.is_deletion(),
            "forced": false,
            "base_ref": Value::Null,
            "commits": self.commits.iter().rev().map(commit).collect::<Vec<_>>(),
            "head_commit": self.commits.first().map_or(Value::Null, commit),
            "pusher": { "name": actor },
            "repository": { "name": repository, "full_name": repository },
            "changed_files": self.changed,
        });
        EventContext {
            event_name: "push".into(),
            sha: self.commit.clone(),
            git_ref: self.git_ref.clone(),
            ref_name: self.ref_name().to_string(),
            ref_type: if self.is_tag() { "tag" } else { "branch" }.into(),
            actor: actor.to_string(),
            repository: repository.to_string(),
            event: payload,
        }
    }
}

fn parse_sha(sha: &str) -> Result<Oid, PushError> {
    if sha.len() != 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(PushError::BadSha(sha.to_string()));
    }
    Oid::from_str(sha).map_err(|_| PushError::BadSha(sha.to_string()))
}

fn find_commit<'r>(
    repo: &'r Repository,
    oid: Oid,
    sha: &str,
) -> Result<git2::Commit<'r>, PushError> {
    repo.find_object(oid, None)
        .and_then(|o| o.peel_to_commit())
        .map_err(|source| PushError::MissingCommit {
            sha: sha.to_string(),
            source,
        })
}

/// For a new ref: the commits it brings are those no other ref has. The pushed ref itself and
/// the local branch a pre-push sends are not counted as having them.
fn hide_other_refs(
    repo: &Repository,
    walk: &mut git2::Revwalk<'_>,
    pushed: &str,
    local: Option<&str>,
) -> Result<(), git2::Error> {
    for reference in repo.references()? {
        let reference = reference?;
        let name = reference.name().ok();
        if name == Some(pushed) || (local.is_some() && name == local) {
            continue;
        }
        if let Ok(commit) = reference.peel_to_commit() {
            walk.hide(commit.id())?;
        }
    }
    Ok(())
}

fn diff_paths(
    repo: &Repository,
    old: Option<&git2::Tree<'_>>,
    new: &git2::Tree<'_>,
    out: &mut BTreeSet<String>,
) -> Result<(), git2::Error> {
    let diff = repo.diff_tree_to_tree(old, Some(new), None)?;
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            // The absent side of an added or deleted file names the same path: a set.
            if let Some(path) = file.path().and_then(|p| p.to_str()) {
                out.insert(path.to_string());
            }
        }
    }
    Ok(())
}
