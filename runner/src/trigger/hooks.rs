//! `gpuflow hooks install|uninstall`: git hooks that call `gpuflow trigger`.
//!
//! A hook already there is kept: it is renamed `<hook>.gpuflow-chained` and gpuflow's hook
//! runs it first, with the same arguments and input (a failing `pre-push` of yours still
//! refuses the push); `uninstall` puts it back. gpuflow's hooks are recognised by a marker
//! line, so installing twice rewrites them instead of chaining gpuflow to itself. The hook
//! calls gpuflow by the absolute path of the binary that installed it (hooks run with git's
//! environment, where `gpuflow` may not be on `PATH`), and never waits for a run unless
//! installed with `--wait` (`pre-push` only: the push fails when a run fails).

use std::path::{Path, PathBuf};

use git2::Repository;

use super::hook_input::HOOKS;

/// The first lines of every hook gpuflow writes.
pub const MARKER: &str = "# gpuflow-hook v1";
const CHAINED_SUFFIX: &str = ".gpuflow-chained";

/// How to write the hooks.
#[derive(Clone, Debug)]
pub struct InstallOptions {
    /// The gpuflow binary the hooks call (absolute).
    pub gpuflow: PathBuf,
    /// `pre-push` waits for the runs and fails the push when one fails.
    pub wait: bool,
    /// Written into the hooks as the default `GPUFLOW_HOME`, when given.
    pub home: Option<PathBuf>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Installed {
    New(PathBuf),
    /// Written over gpuflow's own earlier hook.
    Rewritten(PathBuf),
    /// An existing hook was kept and is run first.
    Chained {
        hook: PathBuf,
        kept_as: PathBuf,
    },
}

#[derive(Debug, PartialEq, Eq)]
pub enum Uninstalled {
    Removed(PathBuf),
    Restored(PathBuf),
    /// The hook there is not gpuflow's: left alone.
    NotOurs(PathBuf),
    NotInstalled(PathBuf),
}

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("`{0}` is not a hook gpuflow writes")]
    UnknownHook(String),
    #[error(
        "`{hook}` is not gpuflow's hook, yet `{chained}` (a hook gpuflow kept) exists too: \
         gpuflow will not overwrite either"
    )]
    ChainTaken { hook: PathBuf, chained: PathBuf },
    #[error("`--wait` only makes sense for `pre-push` (the other hooks run after git is done)")]
    WaitNotPrePush,
    #[error("writing `{path}` failed: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The hooks a repository gets by default: `post-receive` for a bare repository (a GPU node
/// pushed to), `post-commit` for one with a work tree.
pub fn default_hooks(repo: &Repository) -> Vec<String> {
    vec![
        if repo.is_bare() {
            "post-receive"
        } else {
            "post-commit"
        }
        .to_string(),
    ]
}

/// `core.hooksPath` when set (relative to the work tree, or the git folder when bare), else
/// `<common git dir>/hooks`.
pub fn hooks_dir(repo: &Repository) -> PathBuf {
    let configured = repo
        .config()
        .ok()
        .and_then(|c| c.get_path("core.hooksPath").ok());
    match configured {
        Some(p) if p.is_absolute() => p,
        Some(p) => repo.workdir().unwrap_or_else(|| repo.path()).join(p),
        // A linked worktree's git dir is `.git/worktrees/NAME`; git reads hooks from the
        // common dir.
        None => repo.commondir().join("hooks"),
    }
}

pub fn install(
    repo: &Repository,
    hooks: &[String],
    opts: &InstallOptions,
) -> Result<Vec<Installed>, HookError> {
    let dir = hooks_dir(repo);
    // The hook runs from git's folder, not where it was installed from: an absolute home.
    let mut opts = opts.clone();
    if let Some(home) = &opts.home {
        opts.home = Some(std::path::absolute(home).map_err(|source| HookError::Io {
            path: home.clone(),
            source,
        })?);
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| HookError::Io { path, source }
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let mut done = Vec::new();
    for hook in hooks {
        if !HOOKS.contains(&hook.as_str()) {
            return Err(HookError::UnknownHook(hook.clone()));
        }
        if opts.wait && hook != "pre-push" {
            return Err(HookError::WaitNotPrePush);
        }
        let path = dir.join(hook);
        let chained = dir.join(format!("{hook}{CHAINED_SUFFIX}"));
        // 0: new, 1: over gpuflow's own, 2: chaining the hook that is there.
        let kind = if !path.exists() {
            0
        } else if is_ours(&path) {
            1
        } else if chained.exists() {
            return Err(HookError::ChainTaken {
                hook: path,
                chained,
            });
        } else {
            2
        };
        let chain = kind == 2;
        // The new hook is written beside first: a failed write changes nothing (the hook that
        // was there stays where it was). Then the old one is linked to its kept name and the
        // new one renamed over it: at every moment a hook is in place, and git never runs a
        // half-written one.
        let tmp = dir.join(format!(".{hook}.gpuflow-tmp"));
        let written = std::fs::write(&tmp, script(hook, &opts))
            .and_then(|()| set_executable(&tmp))
            .map_err(io(&tmp));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if chain && let Err(e) = keep_as_chained(&path, &chained) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(&chained)(e));
        }
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            if chain {
                let _ = std::fs::remove_file(&chained);
            }
            return Err(io(&path)(e));
        }
        let outcome = match kind {
            0 => Installed::New(path.clone()),
            1 => Installed::Rewritten(path.clone()),
            _ => Installed::Chained {
                hook: path.clone(),
                kept_as: chained.clone(),
            },
        };
        done.push(outcome);
    }
    Ok(done)
}

pub fn uninstall(repo: &Repository, hooks: &[String]) -> Result<Vec<Uninstalled>, HookError> {
    let dir = hooks_dir(repo);
    let mut done = Vec::new();
    for hook in hooks {
        if !HOOKS.contains(&hook.as_str()) {
            return Err(HookError::UnknownHook(hook.clone()));
        }
        let path = dir.join(hook);
        let chained = dir.join(format!("{hook}{CHAINED_SUFFIX}"));
        let io = |source| HookError::Io {
            path: path.clone(),
            source,
        };
        done.push(if !path.exists() {
            Uninstalled::NotInstalled(path.clone())
        } else if !is_ours(&path) {
            Uninstalled::NotOurs(path.clone())
        } else if chained.exists() {
            std::fs::rename(&chained, &path).map_err(io)?;
            Uninstalled::Restored(path.clone())
        } else {
            std::fs::remove_file(&path).map_err(io)?;
            Uninstalled::Removed(path.clone())
        });
    }
    Ok(done)
}

/// The hook there, kept under its chained name without a moment when neither name holds it:
/// a hard link (refused if the name is taken), or a copy where links are not supported.
fn keep_as_chained(path: &Path, chained: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(path, chained) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => {
            let tmp = chained.with_extension("gpuflow-tmp");
            std::fs::copy(path, &tmp)?;
            std::fs::rename(&tmp, chained)
        }
    }
}

fn is_ours(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.lines().take(3).any(|l| l.starts_with(MARKER)))
}

fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

/// `'text'` for sh, with `'` written as `'\''`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The hook's text. Hooks given input on stdin (`pre-push`, `post-receive`) read it once and
/// hand it to the kept hook and to gpuflow alike.
fn script(hook: &str, opts: &InstallOptions) -> String {
    let reads_stdin = matches!(hook, "pre-push" | "post-receive");
    let chained = format!("\"$hook_dir/{hook}{CHAINED_SUFFIX}\"");
    let mut s = format!(
        "#!/bin/sh\n{MARKER}: {hook}\n\
         # Written by `gpuflow hooks install`: queues the workflows whose `on: push` matches and\n\
         # returns at once (a worker runs them: `gpuflow runs`, `gpuflow logs RUN`). A hook that\n\
         # was here before runs first, kept as {hook}{CHAINED_SUFFIX};\n\
         # `gpuflow hooks uninstall` puts it back.\n\
         GPUFLOW={}\n",
        sh_quote(&opts.gpuflow.to_string_lossy())
    );
    if let Some(home) = &opts.home {
        // Quoted, not filtered: the folder's name as it is.
        s.push_str(&format!(
            "if [ -z \"${{GPUFLOW_HOME:-}}\" ]; then GPUFLOW_HOME={}; fi\nexport GPUFLOW_HOME\n",
            sh_quote(&home.to_string_lossy())
        ));
    }
    s.push_str("hook_dir=$(dirname \"$0\")\nstatus=0\n");
    let feed = if reads_stdin {
        // Read once, byte for byte: `$(...)` drops trailing newlines, so the `x` keeps them;
        // empty input stays empty.
        s.push_str("input=$(cat; printf x)\ninput=${input%x}\n");
        "printf '%s' \"$input\" | "
    } else {
        ""
    };
    let stop_on_failure = if hook == "pre-push" {
        // Your own pre-push refused the push: gpuflow need not look at it.
        " || exit $?"
    } else {
        " || status=$?"
    };
    s.push_str(&format!(
        "if [ -x {chained} ]; then\n  {feed}{chained} \"$@\"{stop_on_failure}\nfi\n"
    ));
    let stdin = if reads_stdin { "" } else { " </dev/null" };
    if opts.wait {
        s.push_str(&format!(
            "{feed}\"$GPUFLOW\" trigger --hook {hook} --wait -- \"$@\"{stdin} || exit $?\n"
        ));
    } else {
        s.push_str(&format!(
            "{feed}\"$GPUFLOW\" trigger --hook {hook} -- \"$@\"{stdin} || \
             echo \"gpuflow: the runs of this {hook} could not be queued (see above); git goes on\" >&2\n"
        ));
    }
    s.push_str("exit $status\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_quotes_the_binary_and_feeds_stdin_to_both() {
        let opts = InstallOptions {
            gpuflow: "/opt/it's/gpuflow".into(),
            wait: false,
            home: None,
        };
        let s = script("post-receive", &opts);
        assert!(
            s.starts_with("#!/bin/sh\n# gpuflow-hook v1: post-receive\n"),
            "{s}"
        );
        assert!(s.contains(r"GPUFLOW='/opt/it'\''s/gpuflow'"), "{s}");
        assert!(s.contains("input=$(cat; printf x)"), "{s}");
        assert!(
            s.contains(
                "printf '%s' \"$input\" | \"$GPUFLOW\" trigger --hook post-receive -- \"$@\""
            ),
            "{s}"
        );
        let s = script("post-commit", &opts);
        assert!(!s.contains("input=$(cat"), "{s}");
        assert!(s.contains("</dev/null"), "{s}");
    }

    fn bare_repo(dir: &Path) -> Repository {
        Repository::init_bare(dir.join("node.git")).unwrap()
    }

    fn write_exec(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        set_executable(path).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_the_hook_that_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let repo = bare_repo(dir.path());
        let hooks = hooks_dir(&repo);
        let mine = "#!/bin/sh\necho mine\n";
        write_exec(&hooks.join("post-receive"), mine);
        // The new hook cannot be written: its temporary name is taken by a folder.
        std::fs::create_dir_all(hooks.join(".post-receive.gpuflow-tmp/x")).unwrap();
        let opts = InstallOptions {
            gpuflow: "/usr/bin/gpuflow".into(),
            wait: false,
            home: None,
        };
        assert!(install(&repo, &["post-receive".into()], &opts).is_err());
        assert_eq!(
            std::fs::read_to_string(hooks.join("post-receive")).unwrap(),
            mine
        );
        assert!(!hooks.join("post-receive.gpuflow-chained").exists());
    }

    #[test]
    fn the_hook_passes_stdin_through_unchanged_and_quotes_gpuflow_home() {
        let dir = tempfile::tempdir().unwrap();
        let repo = bare_repo(dir.path());
        let hooks = hooks_dir(&repo);
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        write_exec(
            &hooks.join("post-receive"),
            "#!/bin/sh\ncat > \"$OUT/chained.in\"\n",
        );
        let fake = dir.path().join("fake-gpuflow");
        write_exec(
            &fake,
            "#!/bin/sh\ncat > \"$OUT/gpuflow.in\"\nprintf '%s' \"$GPUFLOW_HOME\" > \"$OUT/home\"\n",
        );
        let home = dir.path().join("it's a \"$HOME\" `id` \\ home");
        let opts = InstallOptions {
            gpuflow: fake,
            wait: false,
            home: Some(home.clone()),
        };
        install(&repo, &["post-receive".into()], &opts).unwrap();
        for input in ["", "a b refs/heads/main\n", "a b c\n\n"] {
            let mut child = std::process::Command::new(hooks.join("post-receive"))
                .env("OUT", &out)
                .env_remove("GPUFLOW_HOME")
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            assert!(child.wait().unwrap().success());
            for file in ["chained.in", "gpuflow.in"] {
                assert_eq!(
                    std::fs::read_to_string(out.join(file)).unwrap(),
                    input,
                    "{file}"
                );
            }
            assert_eq!(
                std::fs::read_to_string(out.join("home")).unwrap(),
                home.to_string_lossy()
            );
        }
        // A relative home is written absolute (the hook runs in git's folder).
        let opts = InstallOptions {
            home: Some("rel/home".into()),
            ..opts
        };
        install(&repo, &["post-receive".into()], &opts).unwrap();
        let text = std::fs::read_to_string(hooks.join("post-receive")).unwrap();
        let expected = std::env::current_dir().unwrap().join("rel/home");
        assert!(
            text.contains(&sh_quote(&expected.to_string_lossy())),
            "{text}"
        );
    }
}
