//! What people and machines see of a run, made only from engine [`Event`]s: a live board on
//! a terminal ([`LiveView`]), plain prefixed lines ([`PlainView`]) or one JSON object per
//! event ([`JsonView`]), and the summary at the end. It knows nothing of backends, stored logs or exit codes.
//!
//! [`Event`]: crate::engine::Event

mod json_view;
mod live;
mod plain_view;

pub use json_view::JsonView;
pub use live::{Board, LiveView};
pub use plain_view::{PlainView, summary};
