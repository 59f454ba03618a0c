//! What people and machines see of a run, made only from engine [`Event`]s: a live board on
//! a terminal ([`LiveView`]), plain prefixed lines ([`PlainView`]) or one JSON object per
//! event ([`JsonView`]), and the summary and the run's headline ([`headline_text`]) at the end. It knows nothing of backends, stored logs or exit codes.
//!
//! [`Event`]: crate::events::Event

mod headline;
mod json_view;
mod live;
mod plain_view;
mod progress;

pub use headline::{benchmark_line, comparison_line, headline_text};
pub use json_view::JsonView;
pub use live::{Board, LiveView};
pub use plain_view::{PlainView, summary};
