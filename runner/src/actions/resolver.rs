//! Resolving `uses: owner/repo[/path]@ref` for one workspace: the commit `gpuflow.lock` pins
//! (checking whether the ref moved away from it), or, for an action not locked yet, the
//! commit the first source that has the repository gives, added to the lock.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::git_cache::{GitCache, UnknownRef};
use super::lock_file::{LOCK_FILE, LockEntry, LockFile};
use super::sources::ActionsConfig;
use crate::diag::{Diagnostic, Diagnostics, Severity, did_you_mean, join_quoted};
use crate::workflow::{FetchedAction, RemoteAction, RemoteActionSource};

/// Resolves the remote actions of one workspace; each `owner/repo@ref` is fetched once per
/// resolver (a `validate` of many files fetches once).
pub struct ActionResolver {
    workspace: PathBuf,
    config: Option<Result<ActionsConfig, Diagnostics>>,
    /// `owner/repo@ref` → the checkout of its commit, or why there is none.
    done: HashMap<String, Result<PathBuf, Box<Diagnostic>>>,
}

/// What `gpuflow actions update` did to one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    /// `owner/repo@ref`.
    pub key: String,
    pub from: String,
    pub to: String,
}

impl ActionResolver {
    /// For the workspace (repository root) `workspace`: its `gpuflow.toml` and `gpuflow.lock`.
    pub fn new(workspace: &Path) -> Self {
        Self {
            workspace: workspace.to_owned(),
            config: None,
            done: HashMap::new(),
        }
    }

    /// For the workspace a workflow or action file is in.
    pub fn for_file(file: &Path) -> Self {
        Self::new(&crate::workflow::workspace_of(file))
    }

    pub fn lock_path(&self) -> PathBuf {
        self.workspace.join(LOCK_FILE)
    }

    /// The folder of the lock that guards writes to `gpuflow.lock` (in the actions cache, so
    /// nothing is left beside the file): every writer of the file, action pins and image pins
    /// alike, takes the same one.
    pub fn lock_dir(&mut self) -> Result<PathBuf, Box<Diagnostic>> {
        Ok(GitCache::new(&self.config()?.cache).root().join("locks"))
    }

    /// `gpuflow.toml`'s `[actions]`, read once, when a remote action is first met.
    fn config(&mut self) -> Result<ActionsConfig, Box<Diagnostic>> {
        let config = self
            .config
            .get_or_insert_with(|| ActionsConfig::find(&self.workspace));
        config.clone().map_err(|diags| {
            let first = diags.iter().next().cloned();
            Box::new(first.unwrap_or_else(|| Diagnostic::unlocated("invalid `[actions]`")))
        })
    }

    fn resolve(&mut self, action: &RemoteAction<'_>) -> Result<FetchedAction, Box<Diagnostic>> {
        if let Some(p) = action.path
            && p.split('/').any(|c| c == ".." || c == "." || c.is_empty())
        {
            // The loader refuses these too; checked again here because the path is joined
            // onto the cached checkout, and `..` or a leading `/` would leave it.
            return Err(Box::new(
                Diagnostic::unlocated(format!("the action path `{p}` leaves the repository"))
                    .label("empty, `.` and `..` components are not allowed here")
                    .hint("name the action's folder from the repository root: `owner/repo/path/to/action@ref`"),
            ));
        }
        let config = self.config()?;
        let cache = GitCache::new(&config.cache);
        let repo = format!("{}/{}", action.owner, action.repo);
        let mut warnings = Vec::new();
        let lock = LockFile::read(&self.lock_path())?;
        let (url, commit) = match lock.get(&repo, action.git_ref) {
            Some(entry) => {
                locked(&cache, entry, &mut warnings)?;
                (entry.source.clone(), entry.commit.clone())
            }
            None => {
                let (url, commit) = unlocked(&cache, &config, action)?;
                let entry = LockEntry {
                    repo: repo.clone(),
                    git_ref: action.git_ref.to_owned(),
                    commit,
                    source: url,
                };
                // A run that pinned it a moment ago wins: both then run the same commit.
                let (written, ()) =
                    LockFile::update(&self.lock_path(), &cache.root().join("locks"), |l| {
                        if l.get(&repo, action.git_ref).is_none() {
                            l.entries.push(entry.clone());
                        }
                    })?;
                let pinned = written.get(&repo, action.git_ref).unwrap_or(&entry);
                (pinned.source.clone(), pinned.commit.clone())
            }
        };
        let tree = cache.tree(&url, &commit).map_err(|why| {
            Box::new(Diagnostic::unlocated(format!(
                "cannot check out `{repo}` at {}: {why}",
                short(&commit)
            )))
        })?;
        let dir = match action.path {
            Some(p) => tree.join(p),
            None => tree,
        };
        Ok(FetchedAction { dir, warnings })
    }

    /// Moves the entries named (`owner/repo@ref`, or `owner/repo` for all its refs; every
    /// entry when `names` is empty) to the commit their ref names now, and writes the lock.
    pub fn update(&mut self, names: &[String]) -> Result<Vec<Moved>, Box<Diagnostic>> {
        let config = self.config()?;
        let cache = GitCache::new(&config.cache);
        let lock = LockFile::read(&self.lock_path())?;
        let keys: Vec<String> = lock.entries.iter().map(LockEntry::key).collect();
        for name in names {
            let known = lock
                .entries
                .iter()
                .any(|e| e.key() == *name || e.repo == *name);
            if !known {
                let d = Diagnostic::unlocated(format!("`{name}` is not in `{LOCK_FILE}`"))
                    .maybe_hint(did_you_mean(name, &keys));
                let d = if keys.is_empty() {
                    d.note("the lock is empty: `gpuflow validate` pins the remote actions workflows use")
                } else {
                    d.note(format!("locked: {}", join_quoted(&keys, "and")))
                };
                return Err(Box::new(d));
            }
        }
        let chosen =
            |e: &LockEntry| names.is_empty() || names.iter().any(|n| *n == e.key() || *n == e.repo);
        let mut latest = HashMap::new();
        for entry in lock.entries.iter().filter(|e| chosen(e)) {
            cache.fetch(&entry.source).map_err(|why| {
                Box::new(
                    Diagnostic::unlocated(format!(
                        "cannot update `{}`: fetching `{}` failed: {why}",
                        entry.key(),
                        entry.source
                    ))
                    .hint(format!("`{LOCK_FILE}` was left as it was")),
                )
            })?;
            let commit = cache
                .resolve(&entry.source, &entry.git_ref)
                .map_err(|unknown| {
                    Box::new(unknown_ref(
                        &entry.repo,
                        &entry.git_ref,
                        &entry.source,
                        &unknown,
                    ))
                })?;
            cache
                .tree(&entry.source, &commit)
                .map_err(|why| Box::new(Diagnostic::unlocated(why)))?;
            latest.insert(entry.key(), commit);
        }
        let (_, moved) = LockFile::update(&self.lock_path(), &cache.root().join("locks"), |l| {
            let mut moved = Vec::new();
            for e in &mut l.entries {
                if let Some(commit) = latest.get(&e.key())
                    && *commit != e.commit
                {
                    moved.push(Moved {
                        key: e.key(),
                        from: e.commit.clone(),
                        to: commit.clone(),
                    });
                    e.commit = commit.clone();
                }
            }
            moved
        })?;
        self.done.clear();
        Ok(moved)
    }
}

impl RemoteActionSource for ActionResolver {
    fn fetch(&mut self, action: &RemoteAction<'_>) -> Result<FetchedAction, Box<Diagnostic>> {
        let key = format!(
            "{}/{}@{}|{}",
            action.owner,
            action.repo,
            action.git_ref,
            action.path.unwrap_or("")
        );
        if let Some(done) = self.done.get(&key) {
            // Warnings were said the first time.
            return done.clone().map(|dir| FetchedAction {
                dir,
                warnings: Vec::new(),
            });
        }
        let result = self.resolve(action);
        self.done.insert(
            key,
            result.as_ref().map(|f| f.dir.clone()).map_err(Clone::clone),
        );
        result
    }
}

/// A locked entry: its commit must be in the cache (fetched if not); a ref that now names
/// another commit is a warning, as is a source that cannot be reached to check.
fn locked(
    cache: &GitCache,
    entry: &LockEntry,
    warnings: &mut Vec<Diagnostic>,
) -> Result<(), Box<Diagnostic>> {
    let key = entry.key();
    match cache.fetch(&entry.source) {
        Ok(()) => match cache.resolve(&entry.source, &entry.git_ref) {
            Ok(now) if now != entry.commit => warnings.push(
                warning(format!(
                    "`{key}` moved: `{LOCK_FILE}` pins {}, `{}` now has {}",
                    short(&entry.commit),
                    entry.source,
                    short(&now)
                ))
                .label(format!("runs the locked commit {}", short(&entry.commit)))
                .note(format!("locked: {}; now: {now}", entry.commit))
                .hint(format!(
                    "to run {}, `gpuflow actions update {key}`; else keep the lock as it is",
                    short(&now)
                )),
            ),
            Ok(_) => {}
            Err(_) => warnings.push(
                warning(format!(
                    "`{}` is gone from `{}`; running the locked commit {}",
                    entry.git_ref,
                    entry.source,
                    short(&entry.commit)
                ))
                .hint("point `uses:` at a ref that exists, then `gpuflow validate` pins it"),
            ),
        },
        Err(why) if cache.has_commit(&entry.source, &entry.commit) => warnings.push(
            warning(format!(
                "cannot check `{}` for a newer `{}`: {why}",
                entry.source, entry.git_ref
            ))
            .label(format!(
                "runs the locked commit {} from the cache",
                short(&entry.commit)
            )),
        ),
        Err(why) => {
            return Err(Box::new(
                Diagnostic::unlocated(format!("cannot fetch `{}`: {why}", entry.source))
                    .label(format!("`{key}` is locked to {}", short(&entry.commit)))
                    .note(format!("source from `{LOCK_FILE}`: {}", entry.source))
                    .hint("make the source reachable, or remove the entry from the lock to fetch it from the sources of `gpuflow.toml`"),
            ));
        }
    }
    if !cache.has_commit(&entry.source, &entry.commit) {
        return Err(Box::new(
            Diagnostic::unlocated(format!(
                "the locked commit {} of `{key}` is not in `{}`",
                short(&entry.commit),
                entry.source
            ))
            .label("its history was rewritten, or the lock names another repository")
            .hint(format!(
                "`gpuflow actions update {key}` pins what `{}` names now",
                entry.git_ref
            )),
        ));
    }
    Ok(())
}

/// An action not in the lock: the first source that can be fetched decides; a source that
/// has the repository but not the ref is an error (not a reason to try the next one, which
/// would silently pick another team's repository of the same name).
fn unlocked(
    cache: &GitCache,
    config: &ActionsConfig,
    action: &RemoteAction<'_>,
) -> Result<(String, String), Box<Diagnostic>> {
    let repo = format!("{}/{}", action.owner, action.repo);
    let mut tried = Vec::new();
    for template in &config.sources {
        let url = ActionsConfig::url(template, action.owner, action.repo);
        match cache.fetch(&url) {
            Err(why) => tried.push(format!("{url}: {why}")),
            Ok(()) => {
                return match cache.resolve(&url, action.git_ref) {
                    Ok(commit) => Ok((url, commit)),
                    Err(unknown) => {
                        Err(Box::new(unknown_ref(&repo, action.git_ref, &url, &unknown)))
                    }
                };
            }
        }
    }
    let mut d = Diagnostic::unlocated(format!("cannot fetch action repository `{repo}`"))
        .label("no source has it");
    for t in tried {
        d = d.note(format!("tried {t}"));
    }
    Err(Box::new(d.hint(
        "check the repository's name, or the URL templates under `[actions] sources` in `gpuflow.toml` (docs/actions.md)",
    )))
}

fn unknown_ref(repo: &str, git_ref: &str, url: &str, unknown: &UnknownRef) -> Diagnostic {
    let mut names: Vec<String> = unknown.tags.clone();
    names.extend(unknown.branches.iter().cloned());
    let d =
        Diagnostic::unlocated(format!("`{repo}` has no branch, tag or commit `{git_ref}`"))
            .label(format!("not in {url}"))
            .hint(did_you_mean(git_ref, &names).unwrap_or_else(|| {
                "write a tag, a branch or a full commit id after `@`".to_owned()
            }));
    let d = if unknown.tags.is_empty() {
        d
    } else {
        d.note(format!("tags: {}", join_quoted(&unknown.tags, "and")))
    };
    if unknown.branches.is_empty() {
        d
    } else {
        d.note(format!(
            "branches: {}",
            join_quoted(&unknown.branches, "and")
        ))
    }
}

fn warning(message: String) -> Diagnostic {
    let mut d = Diagnostic::unlocated(message);
    d.severity = Severity::Warning;
    d
}

/// The first 7 characters, for messages. Cut at a character, not a byte: a lock file edited
/// by hand may hold anything until it is read again.
fn short(commit: &str) -> &str {
    commit
        .char_indices()
        .nth(7)
        .map_or(commit, |(at, _)| &commit[..at])
}
