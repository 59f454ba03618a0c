//! What each git hook is told, turned into pushes (ref, before, after):
//! - `post-receive` (on the receiving repository): stdin lines `<old> <new> <ref>`;
//! - `pre-push` (before a push leaves): arguments `<remote> <url>`, stdin lines
//!   `<local ref> <local sha> <remote ref> <remote sha>`: the push to the remote's ref;
//! - `post-commit`: nothing; `HEAD`'s branch moved from its first parent to `HEAD`;
//! - `post-merge`: `HEAD`'s branch moved from `ORIG_HEAD` to `HEAD`.

use git2::Repository;

pub use super::push_event::RefUpdate;
use super::push_event::ZERO_SHA;

/// The hooks `gpuflow hooks install` writes.
pub const HOOKS: &[&str] = &["post-commit", "pre-push", "post-merge", "post-receive"];

/// Reads the updates a hook was given.
pub fn updates(hook: &str, stdin: &str, repo: &Repository) -> Result<Vec<RefUpdate>, String> {
    let fields = |line: &str, n: usize| -> Result<Vec<String>, String> {
        let f: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if f.len() == n {
            Ok(f)
        } else {
            Err(format!(
                "`{hook}` input line `{line}` does not have {n} fields (git should not send this)"
            ))
        }
    };
    let lines = || stdin.lines().filter(|l| !l.trim().is_empty());
    match hook {
        "post-receive" => lines()
            .map(|l| {
                let f = fields(l, 3)?;
                Ok(RefUpdate {
                    before: f[0].clone(),
                    after: f[1].clone(),
                    git_ref: f[2].clone(),
                    local_ref: None,
                })
            })
            .collect(),
        "pre-push" => lines()
            .map(|l| {
                let f = fields(l, 4)?;
                Ok(RefUpdate {
                    after: f[1].clone(),
                    git_ref: f[2].clone(),
                    before: f[3].clone(),
                    local_ref: Some(f[0].clone()),
                })
            })
            .collect(),
        "post-commit" | "post-merge" => {
            let head = repo
                .head()
                .map_err(|e| format!("`HEAD` cannot be read: {e}"))?;
            let Some(name) = head.name().ok().filter(|n| n.starts_with("refs/")) else {
                return Ok(Vec::new());
            };
            let commit = head
                .peel_to_commit()
                .map_err(|e| format!("`HEAD` is not a commit: {e}"))?;
            let before = if hook == "post-merge" {
                repo.revparse_single("ORIG_HEAD")
                    .ok()
                    .and_then(|o| o.peel_to_commit().ok())
                    .map(|c| c.id().to_string())
            } else {
                commit.parent_id(0).ok().map(|id| id.to_string())
            };
            Ok(vec![RefUpdate {
                git_ref: name.to_string(),
                before: before.unwrap_or_else(|| ZERO_SHA.to_string()),
                after: commit.id().to_string(),
                local_ref: None,
            }])
        }
        other => Err(format!(
            "`{other}` is not a hook gpuflow handles; it handles {}",
            HOOKS
                .iter()
                .map(|h| format!("`{h}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
