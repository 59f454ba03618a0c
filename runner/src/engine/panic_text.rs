//! The message a panic carried, for the failure of the job or step it ended: a panic in a job
//! is contained and reported, never a silent hang.

/// The message a panic carried (`panic!("…")`, `.expect("…")`).
pub(super) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}
