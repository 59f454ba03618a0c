//! `--json`: every event as one JSON object on its own line (see docs/running.md).

use std::io::Write;
use std::sync::Mutex;

use crate::events::{Event, EventSink};

/// Writes each event as a JSON line to `out`.
pub struct JsonView<W: Write + Send> {
    out: Mutex<W>,
}

impl<W: Write + Send> JsonView<W> {
    pub fn new(out: W) -> Self {
        Self {
            out: Mutex::new(out),
        }
    }
}

impl<W: Write + Send> EventSink for JsonView<W> {
    fn emit(&self, event: Event) {
        if let Ok(mut out) = self.out.lock() {
            // A closed stdout (a pipe into `head`) is not the run's problem.
            let _ = serde_json::to_writer(&mut *out, &event);
            let _ = out.write_all(b"\n");
            let _ = out.flush();
        }
    }
}
