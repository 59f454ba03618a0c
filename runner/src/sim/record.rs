//! The server-side record: when the server started, when it became ready and, per request,
//! when each chunk was handed to the connection. It is the reference that benchmark accuracy
//! is measured against, so every moment carries both clocks: `mono_ns` (monotonic, since the
//! server started; for gaps within the server) and `unix_ns` (the wall clock read at the same
//! moment; comparable with another process on the same host).
//!
//! A request's line is written (and flushed) when it ends, so the file never holds half a
//! request and memory per request is bounded by its chunk count. The copy served at
//! `GET /sim/record` keeps the newest requests up to a chunk budget. The format is documented
//! in docs/simulator.md; this file knows nothing of HTTP or schedules.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// One moment on both clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Stamp {
    /// Nanoseconds since the server started (monotonic).
    pub mono_ns: u64,
    /// Nanoseconds since the Unix epoch (wall clock).
    pub unix_ns: u64,
}

/// Reads both clocks together.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
        }
    }

    /// Now, as an `Instant` for scheduling and as a [`Stamp`] for the record.
    pub fn now(&self) -> (Instant, Stamp) {
        let instant = Instant::now();
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        (instant, self.stamp_at(instant, unix_ns))
    }

    fn stamp_at(&self, instant: Instant, unix_ns: u64) -> Stamp {
        let mono = instant.saturating_duration_since(self.start).as_nanos();
        Stamp {
            mono_ns: u64::try_from(mono).unwrap_or(u64::MAX),
            unix_ns,
        }
    }

    pub fn start(&self) -> Instant {
        self.start
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// One chunk as sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ChunkStamp {
    pub index: u32,
    pub tokens: u32,
    pub mono_ns: u64,
    pub unix_ns: u64,
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every chunk (and the closing `[DONE]`) was handed to the connection.
    Complete,
    /// The client went away (or the server stopped) before the response was finished.
    Cancelled,
}

/// Everything the record keeps about one request.
#[derive(Clone, Debug, Serialize)]
pub struct RequestRecord {
    /// The `id` of the response (`cmpl-N` / `chatcmpl-N`).
    pub id: String,
    /// The client's `x-request-id` header, when it sent one.
    pub client_request_id: Option<String>,
    pub endpoint: &'static str,
    pub stream: bool,
    pub prompt_tokens: u32,
    /// Under --prefix-cache: the leading prompt tokens found in the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u32>,
    pub max_tokens: u32,
    pub completion_tokens: u32,
    pub finish_reason: &'static str,
    pub outcome: Outcome,
    /// When the request's body had been read.
    pub received: Stamp,
    /// When it got a generation slot (later than `received` when it queued).
    pub started: Stamp,
    /// When it ended (last byte handed over, or cancelled).
    pub finished: Stamp,
    pub chunks: Vec<ChunkStamp>,
}

#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line<'a> {
    Start {
        mono_ns: u64,
        unix_ns: u64,
        pid: u32,
        settings: &'a RecordedSettings,
    },
    Ready {
        mono_ns: u64,
        unix_ns: u64,
    },
    Request(&'a RequestRecord),
}

/// The settings a reader of the record needs to know the truth it was told to produce.
#[derive(Clone, Debug, Serialize)]
pub struct RecordedSettings {
    pub model: String,
    pub ttft_ns: u64,
    pub chunk_gap_ns: u64,
    pub tokens_per_second: f64,
    pub tokens_per_chunk: u32,
    pub jitter: f64,
    pub seed: u64,
    pub max_concurrency: Option<u32>,
}

/// Collects the record, writes it to the `--record` file and keeps the recent part in memory.
pub struct Recorder {
    clock: Clock,
    started: Stamp,
    settings: RecordedSettings,
    ready: OnceLock<Stamp>,
    file: Option<Mutex<BufWriter<File>>>,
    recent: Mutex<Recent>,
}

struct Recent {
    requests: VecDeque<RequestRecord>,
    chunks: usize,
    budget: usize,
    dropped: u64,
}

/// The record as served at `GET /sim/record`.
#[derive(Serialize)]
pub struct Snapshot<'a> {
    pub start: Stamp,
    pub ready: Option<Stamp>,
    pub settings: &'a RecordedSettings,
    /// Older requests left out of `requests` to stay within the memory budget.
    pub requests_dropped: u64,
    pub requests: Vec<&'a RequestRecord>,
}

impl Recorder {
    /// Starts the record now; `path` (appended to) receives every line as it happens.
    pub fn new(
        clock: Clock,
        settings: RecordedSettings,
        path: Option<&Path>,
        memory_chunks: usize,
    ) -> io::Result<Self> {
        let file = match path {
            Some(path) => Some(Mutex::new(BufWriter::new(
                File::options().create(true).append(true).open(path)?,
            ))),
            None => None,
        };
        let (_, started) = clock.now();
        let recorder = Self {
            clock,
            started,
            settings,
            ready: OnceLock::new(),
            file,
            recent: Mutex::new(Recent {
                requests: VecDeque::new(),
                chunks: 0,
                budget: memory_chunks,
                dropped: 0,
            }),
        };
        recorder.write(&Line::Start {
            mono_ns: started.mono_ns,
            unix_ns: started.unix_ns,
            pid: std::process::id(),
            settings: &recorder.settings,
        });
        Ok(recorder)
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Marks the server ready now and returns the moment (only the first call counts).
    pub fn mark_ready(&self) -> Stamp {
        let (_, now) = self.clock.now();
        let at = *self.ready.get_or_init(|| now);
        if at == now {
            self.write(&Line::Ready {
                mono_ns: at.mono_ns,
                unix_ns: at.unix_ns,
            });
        }
        at
    }

    pub fn ready(&self) -> Option<Stamp> {
        self.ready.get().copied()
    }

    /// Adds a finished request: to the file at once, and to the in-memory copy.
    pub fn finish(&self, request: RequestRecord) {
        self.write(&Line::Request(&request));
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.chunks += request.chunks.len().max(1);
        recent.requests.push_back(request);
        while recent.chunks > recent.budget && recent.requests.len() > 1 {
            if let Some(old) = recent.requests.pop_front() {
                recent.chunks -= old.chunks.len().max(1);
                recent.dropped += 1;
            }
        }
    }

    /// The in-memory record as JSON.
    pub fn snapshot_json(&self) -> Vec<u8> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let snapshot = Snapshot {
            start: self.started,
            ready: self.ready(),
            settings: &self.settings,
            requests_dropped: recent.dropped,
            requests: recent.requests.iter().collect(),
        };
        serde_json::to_vec(&snapshot).unwrap_or_default()
    }

    fn write(&self, line: &Line<'_>) {
        let Some(file) = &self.file else { return };
        let Ok(mut text) = serde_json::to_vec(line) else {
            return;
        };
        text.push(b'\n');
        let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
        // A full disk must not stop the server it is recording; the gap shows in the file.
        let _ = file.write_all(&text).and_then(|()| file.flush());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RecordedSettings {
        RecordedSettings {
            model: "m".to_owned(),
            ttft_ns: 1,
            chunk_gap_ns: 2,
            tokens_per_second: 3.0,
            tokens_per_chunk: 1,
            jitter: 0.0,
            seed: 0,
            max_concurrency: None,
        }
    }

    fn request(id: &str, chunks: u32) -> RequestRecord {
        let at = Stamp {
            mono_ns: 1,
            unix_ns: 2,
        };
        RequestRecord {
            id: id.to_owned(),
            client_request_id: None,
            endpoint: "/v1/completions",
            stream: true,
            prompt_tokens: 1,
            cached_tokens: None,
            max_tokens: chunks,
            completion_tokens: chunks,
            finish_reason: "length",
            outcome: Outcome::Complete,
            received: at,
            started: at,
            finished: at,
            chunks: (0..chunks)
                .map(|index| ChunkStamp {
                    index,
                    tokens: 1,
                    mono_ns: 1,
                    unix_ns: 2,
                })
                .collect(),
        }
    }

    #[test]
    fn memory_keeps_the_newest_requests_within_the_chunk_budget() {
        let recorder = Recorder::new(Clock::new(), settings(), None, 10).unwrap();
        for i in 0..5 {
            recorder.finish(request(&format!("r{i}"), 4));
        }
        let snapshot: serde_json::Value =
            serde_json::from_slice(&recorder.snapshot_json()).unwrap();
        let ids: Vec<&str> = snapshot["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["r3", "r4"]);
        assert_eq!(snapshot["requests_dropped"], 3);
    }

    #[test]
    fn the_file_gets_one_line_per_event_in_order() {
        let dir = std::env::temp_dir().join(format!("gpuflow-sim-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("record.jsonl");
        let _ = std::fs::remove_file(&path);
        let recorder = Recorder::new(Clock::new(), settings(), Some(&path), 10).unwrap();
        let ready = recorder.mark_ready();
        assert_eq!(recorder.mark_ready(), ready, "ready is marked once");
        recorder.finish(request("r0", 2));
        let text = std::fs::read_to_string(&path).unwrap();
        let events: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].to_string())
            .collect();
        assert_eq!(events, [r#""start""#, r#""ready""#, r#""request""#]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
