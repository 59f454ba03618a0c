//! A run's log files: every event of a run stored as it happens ([`LogStore`]: one file per
//! job and a run-wide `events.jsonl`), their formats and limits ([`files`]: compressed when
//! finished, a cap per run), and reading them back ([`replay`], `gpuflow logs`). They sit
//! beside the results store, below the engine: reports and the CLI read them without it.

pub mod files;
pub mod replay;
mod store;

pub use store::{Flushing, LogStore, slug};

/// How often a running run's logs are flushed for those following it (`gpuflow logs -f`,
/// `gpuflow serve`, a Slurm coordinator): a line shows within this time.
pub const FOLLOWED_FLUSH: std::time::Duration = std::time::Duration::from_millis(300);
