//! Progress in words, shared by the live board and plain lines.

/// A running benchmark's progress in words, the same in the live board and plain lines:
/// `single-stream run 2/3: 3/4 requests, 89.5 tok/s, 0 errors`.
pub(super) fn benchmark_progress(
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
