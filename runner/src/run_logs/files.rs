//! Keeping a run's stored logs ([`super::LogStore`]) bounded on disk, and reading them back.
//!
//! - **Each line once.** A log line is written to its step's or container's file only;
//!   `events.jsonl` gets a `log_line` record pointing there ([`LineRanges`]): the file
//!   (relative to the run's folder, always its `.log` name), the number of its first line, how
//!   many lines follow and the byte offset of the first one. Consecutive lines of one file and
//!   stream within a second share a record, so even `yes` (2-byte lines) adds about one record
//!   a second, not one a line. `--json` on stdout is not this: it keeps every line's text.
//! - **Finished files compressed.** When a step ends (a container's log: when its job ends) its
//!   file is compressed to `<name>.log.zst` by a background thread ([`Compressor`]) and the
//!   plain file removed; [`open_log`] reads either form.
//! - **A cap per run** ([`LogCap`], `gpuflow run --log-cap`): past it, output lines are dropped
//!   and counted, and each file that lost lines ends with one marker line saying how many
//!   bytes; gpuflow's own lines (why a step failed) are always kept.
//! - **In progress or done.** The store holds an exclusive `flock` on `events.jsonl` for as
//!   long as it is open ([`lock_running`]); `gpuflow gc` never removes a run whose lock is held
//!   ([`run_in_progress`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use crate::events::{Event, EventKind, JobRef, Stream};

/// The default cap on a run's stored log text (`--log-cap`, `GPUFLOW_LOG_CAP`): a server
/// logging for hours at a few hundred bytes a line stays under it, and a step that prints
/// without end stops filling the disk there. 1 GiB of output fits (the memory tests print that).
pub const DEFAULT_LOG_CAP: u64 = 2 << 30;

/// Lines of one file and stream printed within this long of the first share a record.
const RANGE_WINDOW: Duration = Duration::from_secs(1);

/// zstd's default level: about 400 MB/s on one core, and repetitive logs shrink 100×+.
const ZSTD_LEVEL: i32 = 3;

/// The extension a compressed log gets after `.log`.
pub const COMPRESSED_SUFFIX: &str = ".zst";

/// Reads a log file of a run as it is stored: `path` (a `….log`) while it is being written,
/// else `path.zst`. The plain file is preferred: the compressor writes the `.zst` in full
/// before it removes the plain one, so one complete form is always there.
pub fn open_log(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    match File::open(path) {
        Ok(f) => Ok(Box::new(BufReader::new(f))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let f = File::open(compressed_path(path))?;
            // Several frames (a file compressed, then reopened and compressed again) decode as
            // their concatenation.
            Ok(Box::new(BufReader::new(zstd::stream::read::Decoder::new(
                f,
            )?)))
        }
        Err(e) => Err(e),
    }
}

/// `file` (a `file` field of a `log_line` record) inside `run_dir`; `None` for a name that
/// would leave it (absolute, `..`): the record is data read from disk.
pub fn log_path(run_dir: &Path, file: &str) -> Option<PathBuf> {
    let rel = Path::new(file);
    rel.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| run_dir.join(rel))
}

/// `x.log` → `x.log.zst`.
pub fn compressed_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(COMPRESSED_SUFFIX);
    PathBuf::from(name)
}

/// Compresses `path` to `path.zst` and removes `path`. Written to a temporary name and renamed,
/// so a reader never finds a partial `.zst`; an existing `.zst` (the file was reopened after
/// it was compressed) is kept as the first frames.
pub fn compress(path: &Path) -> io::Result<()> {
    let target = compressed_path(path);
    let mut tmp_name = target.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let result = (|| {
        let mut input = File::open(path)?;
        let mut out = BufWriter::new(File::create(&tmp)?);
        if let Ok(mut earlier) = File::open(&target) {
            io::copy(&mut earlier, &mut out)?;
        }
        let mut encoder = zstd::stream::write::Encoder::new(out, ZSTD_LEVEL)?;
        io::copy(&mut input, &mut encoder)?;
        encoder.finish()?.flush()?;
        std::fs::rename(&tmp, &target)?;
        std::fs::remove_file(path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Compresses finished log files one at a time on a thread of its own, so a large log does not
/// hold up the events of the run (the store is called from the engine's tasks). One thread: the
/// machine's cores belong to the steps.
#[derive(Debug, Default)]
pub struct Compressor {
    worker: Option<(mpsc::Sender<PathBuf>, JoinHandle<Vec<String>>)>,
    inline_errors: Vec<String>,
}

impl Compressor {
    /// Queues `path` (a finished `.log` file) for compression.
    pub fn submit(&mut self, path: PathBuf) {
        if self.worker.is_none() {
            let (tx, rx) = mpsc::channel::<PathBuf>();
            let spawned = std::thread::Builder::new()
                .name("gpuflow-log-zstd".into())
                .spawn(move || {
                    rx.into_iter()
                        .filter_map(|p| compress(&p).err().map(|e| failed(&p, &e)))
                        .collect()
                });
            match spawned {
                Ok(thread) => self.worker = Some((tx, thread)),
                // No thread to be had: compress here, holding up the events a moment.
                Err(_) => {
                    if let Err(e) = compress(&path) {
                        self.inline_errors.push(failed(&path, &e));
                    }
                    return;
                }
            }
        }
        if let Some((tx, _)) = &self.worker {
            // The thread only ends when its sender is dropped (in `wait`).
            let _ = tx.send(path);
        }
    }

    /// Waits until every queued file is compressed; the errors met, if any.
    pub fn wait(&mut self) -> Vec<String> {
        let mut errors = std::mem::take(&mut self.inline_errors);
        if let Some((tx, thread)) = self.worker.take() {
            drop(tx);
            errors.extend(thread.join().unwrap_or_default());
        }
        errors
    }
}

fn failed(path: &Path, e: &io::Error) -> String {
    format!("compressing `{}`: {e}", path.display())
}

impl Drop for Compressor {
    /// A store dropped before the run's end (a refused run) still leaves whole files.
    fn drop(&mut self) {
        self.wait();
    }
}

/// Where the next line of a log file goes.
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    /// Lines in the file so far.
    lines: u64,
    /// Its (uncompressed) length so far.
    bytes: u64,
}

/// A run of consecutive lines of one file and stream, not yet recorded.
#[derive(Debug)]
struct Pending {
    elapsed: Duration,
    job: JobRef,
    step: Option<String>,
    container: Option<String>,
    stream: Stream,
    file: String,
    /// 1-based number of its first line.
    line: u64,
    lines: u64,
    offset: u64,
}

/// A `log_line` record of `events.jsonl`: lines `line`..`line + lines - 1` of `file` (the
/// plain or `.zst` form), the first at byte `offset` of the uncompressed file.
#[derive(Serialize)]
struct Record<'a> {
    elapsed: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    job: &'a JobRef,
    step: &'a Option<String>,
    container: &'a Option<String>,
    stream: Stream,
    file: &'a str,
    line: u64,
    lines: u64,
    offset: u64,
}

/// The `log_line` records of lines being written, kept until a line cannot extend them (or
/// another event comes), then written in the order their first lines came.
#[derive(Debug, Default)]
pub struct LineRanges {
    cursors: HashMap<PathBuf, Cursor>,
    pending: Vec<(PathBuf, Pending)>,
}

impl LineRanges {
    /// `bytes` (a line and its newline) were written to `path`, a file under `rel` in the run's
    /// folder, for the `log_line` `event`. Returns how many bytes of records it wrote.
    pub fn stored(
        &mut self,
        out: Option<&mut BufWriter<File>>,
        event: &Event,
        path: &Path,
        rel: &str,
        bytes: u64,
    ) -> io::Result<u64> {
        let EventKind::LogLine {
            job,
            step,
            container,
            stream,
            ..
        } = &event.kind
        else {
            return Ok(0);
        };
        let cursor = self.cursors.entry(path.to_path_buf()).or_default();
        let at = *cursor;
        cursor.lines += 1;
        cursor.bytes += bytes;
        let extends = |p: &Pending| {
            p.stream == *stream
                && p.job == *job
                && p.step == *step
                && p.container == *container
                && p.line + p.lines == at.lines + 1
        };
        let window_over = self
            .pending
            .first()
            .is_some_and(|(_, p)| event.elapsed.saturating_sub(p.elapsed) >= RANGE_WINDOW);
        let mut written = 0;
        match self.pending.iter_mut().find(|(p, _)| p == path) {
            Some((_, p)) if !window_over && extends(p) => {
                p.lines += 1;
                return Ok(0);
            }
            // Cannot extend: everything pending goes out first, so records stay in order.
            Some(_) => written += self.flush(out)?,
            None if window_over => written += self.flush(out)?,
            None => {}
        }
        self.pending.push((
            path.to_path_buf(),
            Pending {
                elapsed: event.elapsed,
                job: job.clone(),
                step: step.clone(),
                container: container.clone(),
                stream: *stream,
                file: rel.to_string(),
                line: at.lines + 1,
                lines: 1,
                offset: at.bytes,
            },
        ));
        Ok(written)
    }

    /// A line written to `path` without a record (a truncation marker): later lines' numbers
    /// and offsets count it.
    pub fn unrecorded(&mut self, path: &Path, bytes: u64) {
        let cursor = self.cursors.entry(path.to_path_buf()).or_default();
        cursor.lines += 1;
        cursor.bytes += bytes;
    }

    /// Writes every pending record; how many bytes.
    pub fn flush(&mut self, out: Option<&mut BufWriter<File>>) -> io::Result<u64> {
        let pending = std::mem::take(&mut self.pending);
        let Some(out) = out else {
            return Ok(0);
        };
        let mut written = 0;
        for (_, p) in &pending {
            let mut line = serde_json::to_vec(&Record {
                elapsed: (p.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
                kind: "log_line",
                job: &p.job,
                step: &p.step,
                container: &p.container,
                stream: p.stream,
                file: &p.file,
                line: p.line,
                lines: p.lines,
                offset: p.offset,
            })?;
            line.push(b'\n');
            out.write_all(&line)?;
            written += line.len() as u64;
        }
        Ok(written)
    }
}

/// The per-run cap on stored log text: the bytes of lines and of their records.
#[derive(Debug)]
pub struct LogCap {
    limit: u64,
    used: u64,
    dropped: u64,
    /// Bytes dropped per file whose marker is not written yet.
    unmarked: HashMap<PathBuf, u64>,
}

impl Default for LogCap {
    fn default() -> Self {
        Self::new(DEFAULT_LOG_CAP)
    }
}

impl LogCap {
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            used: 0,
            dropped: 0,
            unmarked: HashMap::new(),
        }
    }

    /// Whether a line of `bytes` (with its newline) for `path` may be stored; a line that may
    /// not is counted as dropped. gpuflow's own lines always may. Once a line is dropped, all
    /// later output is: a log with holes where long lines were would mislead.
    pub fn admit(&mut self, path: &Path, stream: Stream, bytes: u64) -> bool {
        if stream == Stream::Runner
            || (self.dropped == 0 && self.used.saturating_add(bytes) <= self.limit)
        {
            self.used += bytes;
            return true;
        }
        self.dropped += bytes;
        *self.unmarked.entry(path.to_path_buf()).or_default() += bytes;
        false
    }

    /// Bytes written besides lines (their records) count too.
    pub fn used(&mut self, bytes: u64) {
        self.used += bytes;
    }

    /// The marker line that ends `path` when it lost lines to the cap (once per file).
    pub fn marker(&mut self, path: &Path) -> Option<String> {
        let dropped = self.unmarked.remove(path)?;
        Some(format!("… {}", self.message(dropped)))
    }

    /// "truncated: N bytes dropped (log cap SIZE reached; raise it with --log-cap)".
    fn message(&self, dropped: u64) -> String {
        format!(
            "truncated: {dropped} bytes dropped (log cap {} reached; raise it with --log-cap)",
            format_size(self.limit)
        )
    }

    /// What the end of the run says when lines were dropped.
    pub fn warning(&self) -> Option<String> {
        (self.dropped > 0)
            .then(|| format!("the run's stored logs were {}", self.message(self.dropped)))
    }
}

/// Takes the lock that says "this run is in progress" on its open `events.jsonl`: held until
/// the file is closed, freed by the kernel however the runner ends (SIGKILL included).
pub fn lock_running(events: &File) -> io::Result<()> {
    rustix::fs::flock(events, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
    Ok(())
}

/// Whether a run's store still has `run_dir/events.jsonl` open (its lock is held).
pub fn run_in_progress(run_dir: &Path) -> bool {
    let Ok(file) = File::open(run_dir.join("events.jsonl")) else {
        return false;
    };
    matches!(
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared),
        Err(rustix::io::Errno::WOULDBLOCK)
    )
}

/// Parses a size: `2GiB`, `512MiB`, `100M`, `1.5G`, `64k`, `1000` (bytes), `1GB` (10⁹);
/// `unlimited` for no cap.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("unlimited") {
        return Ok(u64::MAX);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let bad = || {
        format!(
            "`{text}` is not a size: give a number and a unit, such as `2GiB`, `512MiB` or `100M`"
        )
    };
    let n: f64 = number.parse().map_err(|_| bad())?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return Err(bad()),
    };
    let bytes = n * factor;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes.round() as u64)
}

/// `2 GiB`, `1.5 MiB`, `512 B`; `unlimited` for `u64::MAX`.
pub fn format_size(bytes: u64) -> String {
    if bytes == u64::MAX {
        return "unlimited".into();
    }
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let shown = format!("{value:.1}");
    let shown = shown.strip_suffix(".0").unwrap_or(&shown);
    format!("{shown} {}", UNITS[unit])
}

/// Bytes of a file or folder on disk, counting every file under it.
pub fn disk_size(path: &Path) -> u64 {
    walkdir::WalkDir::new(path)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// The last `n` lines of a stored log (plain or compressed), read as a stream: a log of
/// gigabytes costs `n` lines of memory.
pub fn last_lines(path: &Path, n: usize) -> io::Result<Vec<String>> {
    let mut reader = open_log(path)?;
    let mut tail = std::collections::VecDeque::with_capacity(n);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        if tail.len() == n {
            tail.pop_front();
        }
        if n > 0 {
            tail.push_back(String::from_utf8_lossy(&buf).into_owned());
        }
    }
    Ok(tail.into())
}

/// The whole (uncompressed) length of a stored log, plain or compressed.
pub fn stored_len(path: &Path) -> io::Result<u64> {
    let mut reader = open_log(path)?;
    io::copy(&mut reader as &mut dyn Read, &mut io::sink())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_size("100M"), Ok(100 << 20));
        assert_eq!(parse_size("1.5g"), Ok(3 << 29));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("unlimited"), Ok(u64::MAX));
        for bad in ["", "GiB", "2 parsecs", "-1M", "1e400"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(format_size(2 << 30), "2 GiB");
        assert_eq!(format_size(3 << 19), "1.5 MiB");
        assert_eq!(format_size(512), "512 B");
    }

    #[test]
    fn a_compressed_log_reads_back_the_same_and_the_plain_file_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1-step.log");
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        compress(&path).unwrap();
        assert!(!path.exists());
        let zst = compressed_path(&path);
        assert!(std::fs::metadata(&zst).unwrap().len() < text.len() as u64 / 4);
        let mut back = String::new();
        open_log(&path).unwrap().read_to_string(&mut back).unwrap();
        assert_eq!(back, text);
        assert_eq!(last_lines(&path, 2).unwrap(), ["line 9998", "line 9999"]);
        // Reopened and finished again: both parts, in order.
        std::fs::write(&path, "more\n").unwrap();
        compress(&path).unwrap();
        assert_eq!(last_lines(&path, 2).unwrap(), ["line 9999", "more"]);
        assert_eq!(stored_len(&path).unwrap(), text.len() as u64 + 5);
    }

    #[test]
    fn a_record_path_never_leaves_the_run_folder() {
        let run = Path::new("/runs/r");
        assert_eq!(
            log_path(run, "j/1-a.log"),
            Some(PathBuf::from("/runs/r/j/1-a.log"))
        );
        for bad in ["../x.log", "/etc/passwd", "j/../../x"] {
            assert_eq!(log_path(run, bad), None, "{bad}");
        }
    }

    #[test]
    fn the_cap_drops_output_keeps_gpuflows_lines_and_marks_each_file_once() {
        let mut cap = LogCap::new(100);
        let a = Path::new("a.log");
        assert!(cap.admit(a, Stream::Stdout, 60));
        assert!(!cap.admit(a, Stream::Stdout, 60));
        assert!(!cap.admit(a, Stream::Stderr, 30));
        assert!(cap.admit(a, Stream::Runner, 30));
        assert_eq!(
            cap.marker(a).as_deref(),
            Some("… truncated: 90 bytes dropped (log cap 100 B reached; raise it with --log-cap)")
        );
        assert_eq!(cap.marker(a), None);
        assert!(cap.warning().unwrap().contains("90 bytes dropped"));
        assert_eq!(LogCap::new(100).warning(), None);
    }

    #[test]
    fn a_held_events_file_is_a_run_in_progress() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!run_in_progress(dir.path()));
        let f = File::create(dir.path().join("events.jsonl")).unwrap();
        assert!(!run_in_progress(dir.path()));
        lock_running(&f).unwrap();
        assert!(run_in_progress(dir.path()));
        drop(f);
        assert!(!run_in_progress(dir.path()));
    }
}
