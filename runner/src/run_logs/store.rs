//! The stored logs of a run, under `.gpuflow/runs/<run-id>/`: `events.jsonl` (every event,
//! one JSON object a line), one file per step (`<job run>/<step>-<name>.log`), one
//! per container (`<job run>/container-<name>.log`) and the steps' summaries
//! (`<job run>/summary.md`). It is fed by events like any other sink, so what
//! is stored is exactly what was shown: masked, line by line, never buffered whole.
//!
//! What keeps it bounded on disk — each line stored once (`events.jsonl` points into the
//! files), finished files compressed to `.log.zst`, a cap per run — is in [`super::log_files`].

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::files::{Compressor, LineRanges, LogCap};
use crate::events::{Event, EventKind, EventSink, JobRef, Stream};

/// Stops [`LogStore::keep_flushed`]'s flushing when dropped.
pub struct Flushing(tokio::task::JoinHandle<()>);

impl Drop for Flushing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Writes a run's logs as events arrive.
#[derive(Debug)]
pub struct LogStore {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    events: Option<BufWriter<File>>,
    open: HashMap<PathBuf, BufWriter<File>>,
    /// Step key (job, cell, step) → its file, fixed at `step_started`.
    step_files: HashMap<(String, usize, String), PathBuf>,
    /// The first write error; later ones add nothing.
    failed: Option<String>,
    /// The `log_line` records not yet written, and where each file's next line goes.
    ranges: LineRanges,
    cap: LogCap,
    compressor: Compressor,
}

impl LogStore {
    /// Creates `dir` (and its parents; a `.gpuflow/` made on the way gets its `.gitignore`).
    pub fn create(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        crate::local_dirs::create_state_dir_all(&dir)?;
        let events = File::create(dir.join("events.jsonl"))?;
        // Held for the run's life: `gpuflow gc` keeps a run whose lock is held. A file system
        // without `flock` still stores logs; gc then goes by the folder's age alone.
        let _ = super::files::lock_running(&events);
        let events = BufWriter::new(events);
        Ok(Self {
            dir,
            state: Mutex::new(State {
                events: Some(events),
                ..State::default()
            }),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes everything stored so far readable by another process following the run (a
    /// Slurm run's coordinator reads its jobs' stores on the shared folder): the log files'
    /// lines first, then the records that point at them, then `events.jsonl`. Writes are
    /// buffered otherwise, and a long step would show nothing until it ended.
    pub fn flush(&self) -> std::io::Result<()> {
        let Ok(mut guard) = self.state.lock() else {
            return Ok(());
        };
        let state = &mut *guard;
        for w in state.open.values_mut() {
            w.flush()?;
        }
        let records = state.ranges.flush(state.events.as_mut())?;
        state.cap.used(records);
        if let Some(w) = state.events.as_mut() {
            w.flush()?;
        }
        Ok(())
    }

    /// Flushes the store every `period` while the returned guard lives (inside a tokio
    /// runtime): whoever follows the run — `gpuflow logs -f`, `gpuflow serve`, a Slurm run's
    /// coordinator — sees its lines within that time rather than when a buffer fills.
    pub fn keep_flushed(self: &std::sync::Arc<Self>, period: std::time::Duration) -> Flushing {
        let store = self.clone();
        Flushing(tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                if let Err(e) = store.flush() {
                    tracing::warn!("could not write the run's logs: {e}");
                }
            }
        }))
    }

    /// Caps the run's stored log text at `bytes` (`gpuflow run --log-cap`; log_files.rs).
    pub fn with_log_cap(self, bytes: u64) -> Self {
        if let Ok(mut state) = self.state.lock() {
            state.cap = LogCap::new(bytes);
        }
        self
    }

    /// What the end of the run says when the cap dropped lines.
    pub fn log_cap_warning(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.cap.warning())
    }

    /// The first error met writing the logs, if any.
    pub fn write_error(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.failed.clone())
    }

    /// One folder per job run, named after its display name (`bench (nccl, 128)` →
    /// `bench-nccl-128`), so matrix cells are told apart by their values.
    fn job_dir(&self, job: &JobRef) -> PathBuf {
        self.dir.join(slug(&job.display))
    }

    fn write(&self, state: &mut State, path: PathBuf, line: &str) -> std::io::Result<()> {
        if !state.open.contains_key(&path) {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            state.open.insert(path.clone(), BufWriter::new(file));
        }
        let w = state.open.get_mut(&path).expect("opened above");
        writeln!(w, "{line}")
    }

    /// Ends a finished log file: its truncation marker, if the cap dropped lines of it, then
    /// it is closed and (a `.log`) compressed in the background.
    fn close(&self, state: &mut State, path: PathBuf) -> std::io::Result<()> {
        if let Some(marker) = state.cap.marker(&path) {
            self.write(state, path.clone(), &marker)?;
            state.ranges.unrecorded(&path, marker.len() as u64 + 1);
        }
        if let Some(mut w) = state.open.remove(&path) {
            w.flush()?;
            if path.extension().is_some_and(|x| x == "log") {
                state.compressor.submit(path);
            }
        }
        Ok(())
    }

    fn record(&self, state: &mut State, event: &Event) -> std::io::Result<()> {
        // A log line's text goes to its file only; its record is written later (log_files.rs).
        if !matches!(event.kind, EventKind::LogLine { .. }) {
            Self::append_record(state, event)?;
        }
        match &event.kind {
            EventKind::StepStarted { job, step, name } => {
                let path = self.job_dir(job).join(format!(
                    "{}-{}.log",
                    step.replace('.', "-"),
                    slug(name)
                ));
                state
                    .step_files
                    .insert((job.job.clone(), job.cell, step.clone()), path);
            }
            EventKind::LogLine { .. } => self.store_line(state, event)?,
            EventKind::StepSummary { job, markdown, .. } => {
                let path = self.job_dir(job).join("summary.md");
                self.write(state, path, markdown.trim_end())?;
            }
            EventKind::StepFinished { job, step, .. } => {
                if let Some(path) =
                    state
                        .step_files
                        .remove(&(job.job.clone(), job.cell, step.clone()))
                {
                    self.close(state, path)?;
                }
            }
            EventKind::JobFinished { job, .. }
            | EventKind::JobSkipped { job, .. }
            | EventKind::JobCannotRun { job, .. } => self.end_job(state, job)?,
            // The headline comes last, after `run_finished`.
            EventKind::RunFinished { .. } | EventKind::RunHeadline(_) => self.end_run(state)?,
            _ => {}
        }
        Ok(())
    }

    /// Writes `event` to `events.jsonl`, after the log lines' records waiting before it; at
    /// the run's end, first the warning that the cap dropped lines, if it did.
    fn append_record(state: &mut State, event: &Event) -> std::io::Result<()> {
        let records = state.ranges.flush(state.events.as_mut())?;
        state.cap.used(records);
        let Some(w) = state.events.as_mut() else {
            return Ok(());
        };
        if let EventKind::RunFinished { .. } = event.kind
            && let Some(message) = state.cap.warning()
        {
            let warning = EventKind::Warning { job: None, message };
            serde_json::to_writer(
                &mut *w,
                &Event {
                    kind: warning,
                    ..event.clone()
                },
            )?;
            w.write_all(b"\n")?;
        }
        serde_json::to_writer(&mut *w, event)?;
        w.write_all(b"\n")
    }

    /// A `log_line`'s text into its file (its container's, its step's, else the job's), when
    /// the cap admits it, and its record into the ranges waiting for `events.jsonl`.
    fn store_line(&self, state: &mut State, event: &Event) -> std::io::Result<()> {
        let EventKind::LogLine {
            job,
            step,
            container,
            stream,
            text,
        } = &event.kind
        else {
            return Ok(());
        };
        let path = match (container, step) {
            (Some(c), _) => self.job_dir(job).join(format!("container-{}.log", slug(c))),
            (None, Some(step)) => {
                match state
                    .step_files
                    .get(&(job.job.clone(), job.cell, step.clone()))
                {
                    Some(p) => p.clone(),
                    None => self.job_dir(job).join("job.log"),
                }
            }
            (None, None) => self.job_dir(job).join("job.log"),
        };
        let line = match stream {
            Stream::Runner => format!("gpuflow: {text}"),
            _ => text.clone(),
        };
        let bytes = line.len() as u64 + 1;
        if state.cap.admit(&path, *stream, bytes) {
            self.write(state, path.clone(), &line)?;
            let rel = path.strip_prefix(&self.dir).unwrap_or(&path);
            let rel = rel.to_string_lossy().into_owned();
            let records = state
                .ranges
                .stored(state.events.as_mut(), event, &path, &rel, bytes)?;
            state.cap.used(records);
        }
        Ok(())
    }

    /// A job run ended: its files are closed, and `events.jsonl` flushed.
    fn end_job(&self, state: &mut State, job: &JobRef) -> std::io::Result<()> {
        let dir = self.job_dir(job);
        let done: Vec<PathBuf> = state
            .open
            .keys()
            .filter(|p| p.starts_with(&dir))
            .cloned()
            .collect();
        for p in done {
            self.close(state, p)?;
        }
        // A report step of a later job reads what this one logged, and what the run said
        // about jobs that ended before (a search's closing line, in its last probe's
        // `job.log`, written after that job's end).
        for w in state.open.values_mut() {
            w.flush()?;
        }
        if let Some(w) = state.events.as_mut() {
            w.flush()?;
        }
        Ok(())
    }

    /// The run ended: every file closed and flushed, the compressions waited for.
    fn end_run(&self, state: &mut State) -> std::io::Result<()> {
        let open: Vec<PathBuf> = state.open.keys().cloned().collect();
        for p in open {
            self.close(state, p)?;
        }
        if let Some(w) = state.events.as_mut() {
            w.flush()?;
        }
        // The run is over when its logs are whole and compressed.
        if let Some(e) = state.compressor.wait().into_iter().next() {
            return Err(std::io::Error::other(e));
        }
        Ok(())
    }
}

impl EventSink for LogStore {
    fn emit(&self, event: Event) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        // The run goes on without stored logs; the caller says so at the end.
        if let Err(e) = self.record(&mut state, &event)
            && state.failed.is_none()
        {
            state.failed = Some(format!("writing in `{}`: {e}", self.dir.display()));
        }
    }
}

/// A file-name-safe form of a name: letters, digits, `-`, `_` and `.`, at most 60 of them,
/// never starting with `.`. Names come from the workflow (a job's `name`, a matrix value), and
/// the slug is one component of a path under the run's folder: `..` (or `.`) would name the
/// folder above it (or the folder itself), so leading dots go, like leading dashes.
pub fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut collapsed = String::with_capacity(s.len());
    for c in s.chars() {
        if !(c == '-' && collapsed.ends_with('-')) {
            collapsed.push(c);
        }
    }
    let s: String = collapsed.chars().take(60).collect();
    let s = s.trim_start_matches(['-', '.']).trim_end_matches('-');
    if s.is_empty() {
        "step".into()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn a_slug_is_one_path_component_inside_its_folder() {
        for (name, want) in [
            ("..", "step"),
            (".", "step"),
            ("../..", "step"),
            ("../../etc", "etc"),
            ("a/../b", "a-..-b"),
            ("bench (nccl, 128)", "bench-nccl-128"),
            (".hidden", "hidden"),
            ("v1.2", "v1.2"),
        ] {
            assert_eq!(slug(name), want, "{name}");
            assert!(!slug(name).starts_with('.') && !slug(name).contains('/'));
        }
    }
}
