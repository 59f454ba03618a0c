//! The results store: every benchmark result with what produced it, in one SQLite file
//! (`.gpuflow/results.db` by default), so later runs can be judged against earlier ones and
//! `gpuflow history` can show a series over time.
//!
//! A result is written in one transaction as its step finishes ([`ResultStore::record`]), so a
//! later failure loses nothing. The file is shared by concurrent runs on one host: WAL
//! journaling, a busy timeout and `BEGIN IMMEDIATE` writes let them queue instead of failing.
//! The schema is versioned (`PRAGMA user_version`) and upgraded in place by [`migrations`].
//!
//! This module knows nothing of terminals, Docker, templates or how verdicts are decided; it
//! stores and finds. [`Fingerprint`] decides what is comparable: identity fields hash into a
//! series key, informational ones are kept for the report.

mod baseline;
mod direction;
mod error;
mod fingerprint;
mod history;
mod judgement;
mod migrations;
mod record;
mod result_store;

pub use baseline::PinnedBaseline;
pub use direction::Direction;
pub use error::StoreError;
pub use fingerprint::{FieldDiff, Fingerprint, Identity, Info, SeriesKey, SlurmPlace};
pub use history::{HistoryPoint, HistoryQuery};
pub use judgement::Judgement;
pub use migrations::SCHEMA_VERSION;
pub use record::{
    GitInfo, NewMetric, NewResult, ResultFilter, RunStatus, StoredMetric, StoredResult, now_ms,
};
pub use result_store::{ResultStore, default_path};
