/// The documented exit statuses of every `gpuflow` command (README.md, "Exit codes").
/// Each number means one thing across commands, so scripts and CI can branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything asked for succeeded.
    Success = 0,
    /// The command ran and its subject failed: a job failed (`run`), a file has errors
    /// (`validate`), an expression could not be parsed or evaluated (`eval`).
    Failure = 1,
    /// The command line was wrong, or a path could not be read (clap also uses 2).
    Usage = 2,
    /// `run` or `plan` refused a workflow that does not validate; nothing was started.
    InvalidWorkflow = 3,
    /// Something gpuflow depends on failed: Docker unreachable, a disk error.
    Infrastructure = 4,
    /// Stopped by Ctrl-C or SIGTERM (128 + SIGINT, as shells report it).
    Interrupted = 130,
}

impl ExitCode {
    pub const fn code(self) -> u8 {
        self as u8
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(c: ExitCode) -> Self {
        Self::from(c.code())
    }
}
