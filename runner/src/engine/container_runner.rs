//! `run:` steps inside a running container (the job's `container:`, or one a `start-container`
//! step started).
//!
//! Each step is a block of shell sent to the container's long-lived [`StepShell`] (one
//! `docker exec` for all the steps in a container, not one per step). The block writes the
//! script to a file next to the step's output files in the container's `/tmp`, so any image
//! with a POSIX `sh` works and nothing is copied in; runs it in a session of its own (`setsid`
//! where the image has it) with the step's environment; then prints the step's files and its
//! exit status, tagged with a per-step nonce. The step's shell records its pid: a cancelled step
//! is stopped by signalling its process group (and its children, where there is no `setsid`)
//! from a second exec, as the API has no handle to signal an exec through.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::sync::{Mutex, oneshot};
use tokio_util::sync::CancellationToken;

use super::script_runner::{LineFn, RunnerError, ScriptExit, ScriptRun, ScriptRunner, Shell};
use super::step_shell::{Ended, StepFiles, StepShell};
use crate::backend::{BackendError, DockerBackend, ExecSpec};

/// The step shell of one container, shared by every runner of that container (started by
/// the first step that needs it, replaced when it died).
pub type SharedShell = Arc<Mutex<Option<StepShell>>>;

/// Runs steps in `container` (an id or name) on `docker`.
#[derive(Clone, Debug)]
pub struct ContainerRunner {
    docker: DockerBackend,
    container: String,
    /// The name steps use for it, for messages.
    name: String,
    grace: Duration,
    shell: SharedShell,
}

impl ContainerRunner {
    /// `shell` is the container's: every runner of one container must get the same.
    pub fn new(
        docker: DockerBackend,
        container: impl Into<String>,
        name: impl Into<String>,
        grace: Duration,
        shell: SharedShell,
    ) -> Self {
        Self {
            docker,
            container: container.into(),
            name: name.into(),
            grace,
            shell,
        }
    }

    async fn run_inner(
        &self,
        run: &ScriptRun,
        lines: LineFn,
        cancel: CancellationToken,
    ) -> Result<ScriptExit, RunnerError> {
        if let Some(name) = run.env.keys().find(|k| k.is_empty() || k.contains('=')) {
            return Err(BackendError::InvalidEnvName { name: name.clone() }.into());
        }
        let dir = format!("/tmp/gpuflow/step-{}", run.key.replace('.', "-"));
        let nonce = nonce();
        let block = step_block(run, &dir, &nonce);
        // Held for the whole step: one step at a time per shell.
        let mut slot = self.shell.lock().await;
        let ended = self.send(&mut slot, &block, &nonce, lines).await?;
        tokio::pin!(ended);
        let mut stopped = false;
        let ended = tokio::select! {
            ended = &mut ended => ended.ok(),
            () = cancel.cancelled() => {
                stopped = true;
                self.signal(&dir, "TERM").await;
                match tokio::time::timeout(self.grace, &mut ended).await {
                    Ok(ended) => ended.ok(),
                    Err(_) => {
                        self.signal(&dir, "KILL").await;
                        tokio::time::timeout(Duration::from_secs(5), &mut ended)
                            .await
                            .ok()
                            .and_then(Result::ok)
                    }
                }
            }
        };
        let (code, files) = match ended {
            Some(Ended::Exited { code, files }) => (Some(code), files),
            Some(Ended::ShellGone) => {
                // The container stopped (or the shell was killed) during the step: the
                // shell's own exit code says how, as a one-off exec's would have.
                let shell = slot.take().expect("the shell ran the step");
                let code = if stopped {
                    None
                } else {
                    Some(self.docker.exec_exit_code(shell.exec_id()).await?)
                };
                (code, StepFiles::default())
            }
            None => {
                // The block never ended, even after SIGKILL: this shell is not trusted again.
                *slot = None;
                (None, StepFiles::default())
            }
        };
        if let Some(file) = files.too_large {
            return Err(RunnerError::FileTooLarge {
                file: format!("{dir}/{file}"),
            });
        }
        Ok(ScriptExit {
            code: code.filter(|_| !stopped),
            output_file: files.output,
            env_file: files.env,
            summary_file: files.summary,
        })
    }

    /// Sends `block` to the container's shell, starting one when there is none yet or the
    /// last one died (once: a second failure is the container's).
    async fn send(
        &self,
        slot: &mut Option<StepShell>,
        block: &str,
        nonce: &str,
        lines: LineFn,
    ) -> Result<oneshot::Receiver<Ended>, RunnerError> {
        let mut fresh = false;
        loop {
            if !slot.as_ref().is_some_and(StepShell::is_ready) {
                *slot = Some(StepShell::start(&self.docker, &self.container).await?);
                fresh = true;
            }
            let shell = slot.as_mut().expect("set above");
            match shell.send(block, nonce, lines.clone()).await {
                Ok(ended) => return Ok(ended),
                Err(e) if fresh => {
                    *slot = None;
                    return Err(RunnerError::Spawn {
                        program: "sh".into(),
                        reason: format!("the step's shell in the container stopped: {e}"),
                    });
                }
                Err(_) => *slot = None,
            }
        }
    }

    /// Signals the step's process group, its shell and the shell's children (best effort:
    /// the container may be gone).
    async fn signal(&self, dir: &str, signal: &str) {
        let script = format!(
            "p=$(cat {d}/pid 2>/dev/null) || exit 0; kill -{signal} -\"$p\" 2>/dev/null; \
             pkill -{signal} -P \"$p\" 2>/dev/null; kill -{signal} \"$p\" 2>/dev/null; exit 0",
            d = quote(dir)
        );
        let _ = self
            .docker
            .exec(
                &self.container,
                &ExecSpec::new(["sh", "-c", script.as_str()]),
                |_| {},
            )
            .await;
    }
}

impl ScriptRunner for ContainerRunner {
    fn run<'a>(
        &'a self,
        run: &'a ScriptRun,
        lines: LineFn,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ScriptExit, RunnerError>> {
        self.run_inner(run, lines, cancel).boxed()
    }

    fn describe(&self) -> String {
        format!("container `{}`", self.name)
    }
}

/// The shell code of one step, for the container's [`StepShell`]: prepare the step's files in
/// `dir`, run the script in a session of its own with the step's environment, then print the
/// files and the exit status tagged with `nonce` (the end lines [`StepShell`] waits for).
///
/// Variables are exported in a subshell that then becomes the step's shell, so nothing leaks
/// into the next step; a name `export` refuses (`MY-VAR`) goes through `env` instead (bash
/// passes such names on to the script; `dash` and busybox drop them, as with `docker exec`).
fn step_block(run: &ScriptRun, dir: &str, nonce: &str) -> String {
    let script = format!("{dir}/script");
    let launch = match &run.shell {
        Shell::Default => format!(
            "if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc -eo pipefail {s}; else exec sh -e {s}; fi",
            s = quote(&script)
        ),
        shell => {
            let argv = shell.command(&script, |_| true);
            format!(
                "exec {}",
                argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
            )
        }
    };
    // `cd` rather than the exec's working directory: a relative `working-directory` is
    // then relative to the container's own (the workspace, in the job's container).
    let cd = match &run.working_directory {
        Some(w) => format!("cd {} || exit 1; ", quote(w)),
        None => String::new(),
    };
    // The step's shell writes its pid (its process group's id, under `setsid`) and becomes
    // the script's shell, so `signal` reaches it.
    let step = quote(&format!("echo $$ > \"$0\"/pid; {cd}{launch}"));
    let mut env = run.env.clone();
    for (name, file) in [
        ("GITHUB_OUTPUT", "output"),
        ("GPUFLOW_OUTPUT", "output"),
        ("GITHUB_ENV", "env"),
        ("GITHUB_STEP_SUMMARY", "summary"),
    ] {
        env.insert(name.into(), format!("{dir}/{file}"));
    }
    let mut exports = String::new();
    let mut others = Vec::new();
    for (name, value) in &env {
        if is_shell_name(name) {
            exports.push_str(&format!("export {name}={}\n", quote(value)));
        } else {
            others.push(quote(&format!("{name}={value}")));
        }
    }
    let env_prefix = if others.is_empty() {
        String::new()
    } else {
        format!("env {} ", others.join(" "))
    };
    // Inside the subshell the step's own env may name a variable `d`: the folder is written
    // out literally there, never read back from `$d`.
    format!(
        "d={d}\n\
         if mkdir -p \"$d\" && printf '%s' {text} > \"$d/script\" && : > \"$d/output\" \
         && : > \"$d/env\" && : > \"$d/summary\"; then\n\
         (\n\
         {exports}\
         if command -v setsid >/dev/null 2>&1; then exec {env_prefix}setsid sh -c {step} {d}; fi\n\
         exec {env_prefix}sh -c {step} {d}\n\
         )\n\
         c=$?\n\
         else c=1; fi\n\
         for f in output env summary; do while IFS= read -r l || [ -n \"$l\" ]; do \
         printf '%s %s %s\\n' {nonce} \"$f\" \"$l\"; done < \"$d/$f\"; done\n\
         printf '%s end %s\\n' {nonce} \"$c\"\n\
         printf '%s end\\n' {nonce} >&2\n",
        d = quote(dir),
        text = quote(&run.script),
    )
}

/// Whether `export NAME=…` accepts `name`.
fn is_shell_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A tag no step prints by chance: a hash of the time, the process and a counter.
fn nonce() -> String {
    use sha2::{Digest, Sha256};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let seed = format!(
        "{now}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let digest = Sha256::digest(seed.as_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("gpuflow-file-{hex}")
}

/// Single-quotes a word for `sh`.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;

    /// The step blocks and the loop of [`super::super::step_shell::LOOP`], run by the real
    /// shells of this machine: output, files, exit status and environment come back as the
    /// step shell expects, and nothing of one step's environment reaches the next.
    #[test]
    fn blocks_run_in_the_loop_of_real_shells() {
        use std::io::Write;
        let has_busybox = std::process::Command::new("busybox")
            .arg("true")
            .status()
            .is_ok_and(|s| s.success());
        let mut shells = vec![vec!["sh"]];
        if has_busybox {
            shells.push(vec!["busybox", "sh"]);
        }
        for shell in shells {
            let tmp = tempfile::tempdir().unwrap();
            let dir = |key: &str| tmp.path().join(key).display().to_string();
            let first = ScriptRun {
                key: "1".into(),
                script: "echo \"hi $GREETING\"\n\
                         printf 'x=1\\n' >> \"$GITHUB_OUTPUT\"; printf 'it'\\''s'; exit 3"
                    .into(),
                shell: Shell::Sh,
                // `d` is also the block's own name for the step's folder.
                env: [("GREETING", "it's\nme"), ("MY-VAR", "v"), ("d", "/nowhere")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                working_directory: None,
            };
            let second = ScriptRun {
                key: "2".into(),
                script: "echo \"leak=${GREETING-none}\"; cat >/dev/null".into(),
                shell: Shell::Default,
                env: IndexMap::new(),
                working_directory: Some(tmp.path().display().to_string()),
            };
            let mut input = String::new();
            for (run, nonce) in [(&first, "N1"), (&second, "N2")] {
                let block = step_block(run, &dir(&run.key), nonce);
                input.push_str(&format!("{}\n{block}", block.lines().count()));
            }
            let mut child = std::process::Command::new(shell[0])
                .args(&shell[1..])
                .args(["-c", super::super::step_shell::LOOP])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                stdout, "hi it's\nme\nit'sN1 output x=1\nN1 end 3\nleak=none\nN2 end 0\n",
                "{shell:?}: {stderr}"
            );
            assert_eq!(stderr, "N1 end\nN2 end\n", "{shell:?}");
            // Where `signal` looks for the step to stop it.
            assert!(tmp.path().join("1/pid").is_file(), "{shell:?}");
        }
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }
}
