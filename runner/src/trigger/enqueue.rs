//! A push → the runs it starts: every workflow of the pushed commit whose `on.push` matches
//! goes into the queue, with the push as its `github` context.

use std::path::{Path, PathBuf};

use git2::Repository;

use crate::diag::Diagnostics;
use crate::engine::new_run_id;

use super::on_push::{Decision, PushFilters};
use super::push_event::PushEvent;
use super::queue::{NewRun, Queue, QueueError};
use super::workflows;

/// What happened to one workflow of the push.
#[derive(Debug)]
pub struct Outcome {
    pub workflow: String,
    pub result: OutcomeKind,
}

#[derive(Debug)]
pub enum OutcomeKind {
    Queued {
        run_id: String,
        name: String,
        /// Runs of its concurrency group it cancelled or asked to stop.
        superseded: Vec<String>,
    },
    Skipped(String),
    /// It does not trigger on `push`.
    NotOnPush,
    /// It does not load, or its filters are wrong: reported, not run.
    Invalid(Diagnostics),
}

#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("reading the workflows of commit `{sha}` failed: {source}")]
    Git { sha: String, source: git2::Error },
}

/// The repository's identity for runs: its git folder (absolute), the folder whose
/// `.gpuflow/` keeps logs and results, and a short name for `github.repository`.
pub fn repo_paths(repo: &Repository) -> (PathBuf, PathBuf, String) {
    let git_dir = absolute(repo.path());
    let home = repo.workdir().map_or_else(|| git_dir.clone(), absolute);
    let name = home
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".git").to_string())
        .unwrap_or_default();
    (git_dir, home, name)
}

fn absolute(p: &Path) -> PathBuf {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    p.to_string_lossy().trim_end_matches('/').into()
}

/// Queues the runs `push` starts in `repo`, in the order of the workflow files.
pub fn enqueue_push(
    repo: &Repository,
    push: &PushEvent,
    queue: &mut Queue,
    actor: &str,
) -> Result<Vec<Outcome>, EnqueueError> {
    if push.is_deletion() {
        return Ok(Vec::new());
    }
    let git = |source| EnqueueError::Git {
        sha: push.after.clone(),
        source,
    };
    let commit = repo
        .find_object(git2::Oid::from_str(&push.after).map_err(git)?, None)
        .and_then(|o| o.peel_to_commit())
        .map_err(git)?;
    let found = workflows::find(repo, &commit).map_err(git)?;
    let (git_dir, home, repository) = repo_paths(repo);
    let context = push.context(&repository, actor);
    let vars = workflows::vars(repo, &commit);
    let mut outcomes = Vec::new();
    for f in found {
        let result = match &f.workflow {
            None => OutcomeKind::Invalid(f.diags),
            Some(wf) => match &wf.on.push {
                None => OutcomeKind::NotOnPush,
                Some(trigger) => match PushFilters::parse(trigger, &wf.file) {
                    Err(d) => OutcomeKind::Invalid(d),
                    Ok(filters) => match filters.decide(push) {
                        Decision::Skipped(why) => OutcomeKind::Skipped(why),
                        Decision::Runs => {
                            let name = workflows::display_name(wf, &f.path);
                            match workflows::concurrency(wf, &name, &context, &vars) {
                                Err(message) => OutcomeKind::Invalid(Diagnostics::from(
                                    crate::diag::Diagnostic::unlocated(format!(
                                        "{}: {message}",
                                        f.path
                                    )),
                                )),
                                Ok(concurrency) => {
                                    let run_id = new_run_id();
                                    let superseded = queue.enqueue(&NewRun {
                                        id: run_id.clone(),
                                        repo: git_dir.clone(),
                                        home: home.clone(),
                                        workflow: f.path.clone(),
                                        name: name.clone(),
                                        event: context.clone(),
                                        concurrency,
                                    })?;
                                    OutcomeKind::Queued {
                                        run_id,
                                        name,
                                        superseded,
                                    }
                                }
                            }
                        }
                    },
                },
            },
        };
        outcomes.push(Outcome {
            workflow: f.path,
            result,
        });
    }
    Ok(outcomes)
}
