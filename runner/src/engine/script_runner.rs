//! The one small trait behind which a `run:` step executes — on the host ([`super::host`]) or
//! in a container ([`super::container_runner`]) — and what goes in and comes out of it.
//!
//! A runner owns where the step's files live (`$GITHUB_OUTPUT`, `$GITHUB_ENV`,
//! `$GITHUB_STEP_SUMMARY`): it creates them, tells the script their paths, and reads them back
//! when the script ends, so the executor never needs to know whose file system they are on.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use crate::events::Stream;

/// Receives each output line of a step as it is printed; the `bool` says the line goes on in
/// the next call (a piece of an over-long line, [`crate::backend::LogLine::continues`]), so a
/// secret cut in two there is still masked.
pub type LineFn = Arc<dyn Fn(Stream, String, bool) + Send + Sync>;

/// The shell a `run:` step asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shell {
    /// Nothing said: `bash -eo pipefail` where bash exists, else `sh -e`.
    Default,
    /// `bash --noprofile --norc -eo pipefail {0}`.
    Bash,
    /// `sh -e {0}`.
    Sh,
    /// `python {0}` (`python3` where there is no `python`).
    Python,
    /// A command line with `{0}` for the script's path (`perl {0}`).
    Custom(Vec<String>),
}

impl Shell {
    pub fn parse(text: &str) -> Self {
        match text.trim() {
            "" => Self::Default,
            "bash" => Self::Bash,
            "sh" => Self::Sh,
            "python" | "python3" => Self::Python,
            other => {
                let mut words: Vec<String> = other.split_whitespace().map(String::from).collect();
                if !words.iter().any(|w| w.contains("{0}")) {
                    words.push("{0}".into());
                }
                Self::Custom(words)
            }
        }
    }

    /// Whether expression values may be passed as variables (the shell expands `${NAME}`).
    pub fn is_posix(&self) -> bool {
        matches!(self, Self::Default | Self::Bash | Self::Sh)
    }

    /// The command for a script at `path`, given which programs exist.
    pub fn command(&self, path: &str, has: impl Fn(&str) -> bool) -> Vec<String> {
        let words: Vec<&str> = match self {
            Self::Default if has("bash") => {
                vec!["bash", "--noprofile", "--norc", "-eo", "pipefail", "{0}"]
            }
            Self::Bash => vec!["bash", "--noprofile", "--norc", "-eo", "pipefail", "{0}"],
            Self::Default | Self::Sh => vec!["sh", "-e", "{0}"],
            Self::Python if has("python") => vec!["python", "{0}"],
            Self::Python => vec!["python3", "{0}"],
            Self::Custom(words) => {
                return words.iter().map(|w| w.replace("{0}", path)).collect();
            }
        };
        words.iter().map(|w| w.replace("{0}", path)).collect()
    }
}

/// One `run:` step, ready to execute.
#[derive(Clone, Debug)]
pub struct ScriptRun {
    /// Unique within the job (`3`, `4.2`): names the step's folder of files.
    pub key: String,
    pub script: String,
    pub shell: Shell,
    /// The step's whole environment as gpuflow computed it (the host runner adds it to the
    /// runner's own environment; a container's exec gets only this).
    pub env: IndexMap<String, String>,
    pub working_directory: Option<String>,
}

/// How the script ended, and what it wrote to its files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScriptExit {
    /// The exit code; `None` when it was stopped (cancelled or timed out) before exiting.
    pub code: Option<i64>,
    pub output_file: String,
    pub env_file: String,
    pub summary_file: String,
}

/// Reading back more than this from a step's files is refused: they hold outputs, not data.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("could not run the step's shell `{program}`: {reason}")]
    Spawn { program: String, reason: String },
    #[error("could not prepare the step's files in `{path}`: {reason}")]
    Files { path: String, reason: String },
    #[error("`{file}` is larger than 1 MiB; outputs and env files hold short values")]
    FileTooLarge { file: String },
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
}

/// Where `run:` steps execute.
pub trait ScriptRunner: Send + Sync {
    /// Runs the script to its end, or until `cancel` fires: then the script is asked to stop
    /// (SIGTERM), and killed after a grace period; the returned exit has `code: None`.
    fn run<'a>(
        &'a self,
        run: &'a ScriptRun,
        lines: LineFn,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ScriptExit, RunnerError>>;

    /// Where it runs, in words (`the host`, `container \`server\``).
    fn describe(&self) -> String;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_resolve_like_github() {
        let none = |_: &str| false;
        let all = |_: &str| true;
        assert_eq!(Shell::parse("").command("/s", all)[0], "bash");
        assert_eq!(Shell::parse("").command("/s", none), ["sh", "-e", "/s"]);
        assert_eq!(
            Shell::parse("python").command("/s", none),
            ["python3", "/s"]
        );
        assert_eq!(
            Shell::parse("perl -w {0}").command("/s", none),
            ["perl", "-w", "/s"]
        );
        assert_eq!(Shell::parse("node").command("/s", none), ["node", "/s"]);
        assert!(!Shell::parse("python").is_posix());
        assert!(Shell::parse("sh").is_posix());
    }
}
