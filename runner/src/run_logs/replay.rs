//! A stored run read back as the events it was made of: `events.jsonl` (written by
//! [`super::LogStore`]), each `log_line` record's lines read from the file it points at (plain
//! or `.zst`, [`super::files::open_log`]). `gpuflow logs` shows a run started by hand this
//! way, through the same plain view `gpuflow run --plain` printed it with, so the two cannot
//! drift apart.
//!
//! A run still in progress can be read as it grows ([`Replay::poll`]): a record whose lines are
//! not in their file yet (each file is buffered on its own) waits, and everything after it
//! with it, so the order stays the run's. Lines that are never there (a deleted file) are left
//! out once the run is over. A line of a newer gpuflow that this one does not know is skipped.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::files::{log_path, open_log};
use crate::events::Event;

/// The reading position in a run's `events.jsonl` and its log files.
pub struct Replay {
    dir: PathBuf,
    events: BufReader<File>,
    /// The start of a line whose end is not written yet.
    partial: String,
    /// Records read but not shown yet: the first waits for its lines.
    waiting: VecDeque<serde_json::Value>,
    files: HashMap<String, LogFile>,
}

impl Replay {
    /// Opens `dir/events.jsonl`.
    pub fn open(dir: &Path) -> io::Result<Self> {
        Ok(Self {
            dir: dir.to_path_buf(),
            events: BufReader::new(File::open(dir.join("events.jsonl"))?),
            partial: String::new(),
            waiting: VecDeque::new(),
            files: HashMap::new(),
        })
    }

    /// Gives every event written since the last call to `emit`, a record's lines as one
    /// `log_line` event each. `last` (the run is over): whatever is still missing is skipped
    /// rather than waited for.
    pub fn poll(&mut self, last: bool, emit: &mut dyn FnMut(Event)) -> io::Result<()> {
        loop {
            let mut line = String::new();
            if self.events.read_line(&mut line)? == 0 {
                break;
            }
            self.partial.push_str(&line);
            if !self.partial.ends_with('\n') {
                continue;
            }
            let whole = std::mem::take(&mut self.partial);
            if let Ok(value) = serde_json::from_str(&whole) {
                self.waiting.push_back(value);
            }
        }
        while let Some(value) = self.waiting.pop_front() {
            let Some(events) = self.events_of(&value, last) else {
                self.waiting.push_front(value);
                break;
            };
            for e in events {
                emit(e);
            }
        }
        Ok(())
    }

    /// The events `value` stands for; `None` while its lines are not all written.
    fn events_of(&mut self, value: &serde_json::Value, last: bool) -> Option<Vec<Event>> {
        let record = (value["type"] == "log_line" && value.get("text").is_none())
            .then(|| {
                Some((
                    value["file"].as_str()?,
                    value["line"].as_u64()?,
                    value["lines"].as_u64()?,
                ))
            })
            .flatten();
        let Some((file, first, count)) = record else {
            // Any other event (or an older gpuflow's line with its `text`) is itself.
            return Some(serde_json::from_value(value.clone()).into_iter().collect());
        };
        let dir = self.dir.clone();
        let texts = self
            .files
            .entry(file.to_string())
            .or_insert_with(|| LogFile::new(log_path(&dir, file)))
            .lines(first, count, last)?;
        // gpuflow's own lines are stored as `gpuflow: …`; the event holds what was said.
        let runner = value["stream"] == "runner";
        Some(
            texts
                .into_iter()
                .filter_map(|text| {
                    let text = match text.strip_prefix("gpuflow: ") {
                        Some(said) if runner => said.to_string(),
                        _ => text,
                    };
                    let mut event = value.clone();
                    event["text"] = serde_json::Value::String(text);
                    serde_json::from_value(event).ok()
                })
                .collect(),
        )
    }
}

/// One log file, read forward as records ask for its lines.
struct LogFile {
    path: Option<PathBuf>,
    reader: Option<Box<dyn BufRead + Send>>,
    /// How many whole lines were read from it.
    read: u64,
    /// The last of them not given out yet (lines `read - buffered.len() + 1 ..= read`).
    buffered: VecDeque<String>,
    /// The start of a line whose end is not written yet.
    partial: Vec<u8>,
}

impl LogFile {
    fn new(path: Option<PathBuf>) -> Self {
        Self {
            path,
            reader: None,
            read: 0,
            buffered: VecDeque::new(),
            partial: Vec::new(),
        }
    }

    /// Lines `first ..first + count` (from 1); `None` while they are not all written, unless
    /// `last`: then those there are.
    fn lines(&mut self, first: u64, count: u64, last: bool) -> Option<Vec<String>> {
        let end = first + count.max(1) - 1;
        self.fill(end);
        if self.read < end && !last {
            return None;
        }
        // Lines before `first` were given out already, or are a truncation marker, which has
        // no record of its own.
        let mut at = self.read - self.buffered.len() as u64 + 1;
        while at < first && self.buffered.pop_front().is_some() {
            at += 1;
        }
        let take = (count as usize).min(self.buffered.len());
        Some(self.buffered.drain(..take).collect())
    }

    /// Reads whole lines until line `end` is read or the file ends for now.
    fn fill(&mut self, end: u64) {
        if self.reader.is_none() {
            self.reader = self.path.as_deref().and_then(|p| open_log(p).ok());
        }
        let Some(reader) = self.reader.as_mut() else {
            return;
        };
        while self.read < end {
            match reader.read_until(b'\n', &mut self.partial) {
                Ok(0) | Err(_) => return,
                Ok(_) if self.partial.ends_with(b"\n") => {
                    self.partial.pop();
                    let line = String::from_utf8_lossy(&self.partial).into_owned();
                    self.partial.clear();
                    self.buffered.push_back(line);
                    self.read += 1;
                }
                Ok(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::events::{EventKind, Stream};

    fn collect(replay: &mut Replay, last: bool) -> Vec<Event> {
        let mut out = Vec::new();
        replay.poll(last, &mut |e| out.push(e)).unwrap();
        out
    }

    fn text(e: &Event) -> &str {
        match &e.kind {
            EventKind::LogLine { text, .. } => text,
            other => panic!("not a log line: {other:?}"),
        }
    }

    const JOB: &str = r#""job":{"job":"j","cell":0,"display":"j"}"#;

    /// A record waits for lines not written yet, and what comes after it waits too.
    #[test]
    fn a_record_waits_for_its_lines_and_keeps_the_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("j")).unwrap();
        let log = dir.path().join("j/1-say.log");
        std::fs::write(&log, "one\ngpuflow: said\n").unwrap();
        let mut events = std::fs::File::create(dir.path().join("events.jsonl")).unwrap();
        writeln!(
            events,
            r#"{{"elapsed":0.1,"type":"step_started",{JOB},"step":"1","name":"say"}}"#
        )
        .unwrap();
        writeln!(events, r#"{{"elapsed":0.2,"type":"log_line",{JOB},"step":"1","container":null,"stream":"stdout","file":"j/1-say.log","line":1,"lines":1,"offset":0}}"#).unwrap();
        writeln!(events, r#"{{"elapsed":0.2,"type":"log_line",{JOB},"step":"1","container":null,"stream":"runner","file":"j/1-say.log","line":2,"lines":1,"offset":4}}"#).unwrap();
        writeln!(events, r#"{{"elapsed":0.3,"type":"log_line",{JOB},"step":"1","container":null,"stream":"stdout","file":"j/1-say.log","line":3,"lines":2,"offset":17}}"#).unwrap();
        writeln!(events, r#"{{"elapsed":0.4,"type":"step_finished",{JOB},"step":"1","name":"say","outcome":"success","conclusion":"success","duration":0.3}}"#).unwrap();
        write!(events, r#"{{"elapsed":0.5,"type":"warn"#).unwrap();
        events.flush().unwrap();
        let mut replay = Replay::open(dir.path()).unwrap();

        let first = collect(&mut replay, false);
        assert_eq!(first.len(), 3, "{first:?}");
        assert_eq!(text(&first[1]), "one");
        assert_eq!(
            text(&first[2]),
            "said",
            "gpuflow's prefix is the view's to add"
        );
        assert!(matches!(
            first[2].kind,
            EventKind::LogLine {
                stream: Stream::Runner,
                ..
            }
        ));

        // Line 3 is there, line 4 only half: still waiting.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(b"three\nfo")
            .unwrap();
        assert!(collect(&mut replay, false).is_empty());
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(b"ur\n")
            .unwrap();
        writeln!(events, r#"ing","job":null,"message":"m"}}"#).unwrap();
        let rest = collect(&mut replay, false);
        assert_eq!(rest.len(), 4, "{rest:?}");
        assert_eq!(text(&rest[0]), "three");
        assert_eq!(text(&rest[1]), "four");
        assert!(matches!(rest[2].kind, EventKind::StepFinished { .. }));
        assert!(matches!(rest[3].kind, EventKind::Warning { .. }));
    }

    #[test]
    fn once_the_run_is_over_missing_lines_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("events.jsonl"),
            format!(
                "{}\n{}\n",
                format_args!(r#"{{"elapsed":0.2,"type":"log_line",{JOB},"step":null,"container":"c","stream":"stdout","file":"j/container-c.log","line":1,"lines":2,"offset":0}}"#),
                r#"{"elapsed":0.3,"type":"run_finished","run_id":"r","result":"success"}"#
            ),
        )
        .unwrap();
        let mut replay = Replay::open(dir.path()).unwrap();
        assert!(collect(&mut replay, false).is_empty());
        let events = collect(&mut replay, true);
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(matches!(events[0].kind, EventKind::RunFinished { .. }));
    }
}
