//! Remote actions (`uses: owner/repo[/path]@ref`): where they come from (`[actions] sources`
//! of `gpuflow.toml`: URL templates, any git server), the cache they are fetched into, and
//! `gpuflow.lock`, which pins the commit each runs at until `gpuflow actions update` moves it,
//! and the digest each pinned image runs at until `gpuflow images update` moves it
//! ([`image_pins`]: the pins as data; the CLI asks the engine for digests).
//!
//! The loader sees this module only through [`crate::workflow::RemoteActionSource`]: it is
//! handed a folder and reads the action there as it reads a local one. Knows nothing of
//! workflows' contents, Docker or the engine.

mod git_cache;
pub mod image_pins;
pub(crate) mod lock_file;
mod resolver;
mod source_url;
mod sources;

pub use image_pins::{ImagePin, ImageToRun};
pub use lock_file::{LOCK_FILE, LockEntry, LockFile};
pub use resolver::{ActionResolver, Moved};
pub use sources::{ActionsConfig, DEFAULT_SOURCE};
