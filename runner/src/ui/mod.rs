//! What people and machines see of a run, made only from engine [`Event`]s: a live board on
//! a terminal ([`LiveView`]), plain prefixed lines ([`PlainView`]) or one JSON object per
//! event ([`JsonView`]), and the summary and the run's headline ([`headline_text`]) at the end. It knows nothing of backends, stored logs or exit codes.
//!
//! [`Event`]: crate::events::Event

mod headline;
mod json_view;
mod live;
mod plain_view;

pub use headline::{benchmark_line, comparison_line, headline_text};
pub use json_view::JsonView;
pub use live::{Board, LiveView};
pub use plain_view::{PlainView, summary};

/// A running benchmark's progress in words, the same in the live board and plain lines:
/// `single-stream run 2/3: 3/4 requests, 89.5 tok/s, 0 errors`.
fn benchmark_progress(
    level: &str,
    phase: &str,
    done: u64,
    total: Option<u64>,
    errors: u64,
    output_tok_s: f64,
) -> String {
    let done = match total {
        Some(t) => format!("{done}/{t}"),
        None => done.to_string(),
    };
    format!("{level} {phase}: {done} requests, {output_tok_s:.1} tok/s, {errors} errors")
}
