//! One long-lived shell per container, which runs the `run:` steps exec'd into it.
//!
//! Why: a `docker exec` costs tens of milliseconds (create, start, attach, then inspect for the
//! exit code), more than a trivial step itself, so fifty `run: true` steps were as slow as a
//! shell loop of fifty `docker exec`. The first step in a container starts one exec of `sh`
//! that reads blocks of shell from its stdin ([`LOOP`]); every step after is one write.
//!
//! The protocol: a line holding the number of lines of the block, then the block; the shell
//! runs it in a subshell whose stdin is `/dev/null` (a step reading stdin must not eat the
//! next block). The block ends by printing, after the step's own output, lines starting with a
//! per-step nonce: its files (`NONCE FILE LINE`) and `NONCE end CODE` on stdout, and
//! `NONCE end` on stderr — both, because Docker copies the two streams apart, so the step's
//! last stderr line may arrive after its stdout end. The step's output is scanned for the
//! nonce byte by byte, so a last line without a newline is split off and kept, even when
//! the nonce straddles two chunks.
//!
//! Output between steps (a process a step left in the background) is read and dropped, so it
//! never blocks on a full pipe; output while a step runs is that step's, as with `docker exec`.

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::script_runner::{LineFn, MAX_FILE_BYTES};
use crate::backend::{
    BackendError, DockerBackend, ExecOutput, ExecSpec, LineSplitter, OutputStream,
};
use crate::events::Stream;

/// The shell every step block goes through: read a count, that many lines, run them.
/// `read -r` with an empty `IFS` keeps each line as sent (backslashes, leading blanks).
pub const LOOP: &str = "while IFS= read -r n; do b=; \
     while [ \"$n\" -gt 0 ] && IFS= read -r l; do b=\"$b$l\n\"; n=$((n-1)); done; \
     ( eval \"$b\" ) </dev/null; done";

/// How one step's block ended.
#[derive(Debug)]
pub enum Ended {
    /// Both end lines arrived: the step's exit status and its files.
    Exited { code: i64, files: StepFiles },
    /// The shell's output ended first: the container stopped, or the shell was killed.
    ShellGone,
}

/// A shell in one container, started by [`StepShell::start`].
pub struct StepShell {
    exec_id: String,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    state: Arc<Mutex<ReaderState>>,
    /// The output until the first step: read only once a step listens, so what the engine
    /// says when the shell cannot start (an image without `sh`) is that step's output.
    output: Option<ExecOutput>,
    reader: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for StepShell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepShell")
            .field("exec_id", &self.exec_id)
            .finish_non_exhaustive()
    }
}

impl Drop for StepShell {
    fn drop(&mut self) {
        // Dropping the reader drops the connection, which closes the shell's stdin: it exits
        // once a step still running ends.
        if let Some(reader) = &self.reader {
            reader.abort();
        }
    }
}

#[derive(Default)]
struct ReaderState {
    listener: Option<Listener>,
    closed: bool,
}

impl StepShell {
    /// Starts the shell in `container`.
    pub async fn start(docker: &DockerBackend, container: &str) -> Result<Self, BackendError> {
        let exec = docker
            .exec_interactive(container, &ExecSpec::new(["sh", "-c", LOOP]))
            .await?;
        Ok(Self {
            exec_id: exec.id,
            input: exec.input,
            state: Arc::new(Mutex::new(ReaderState::default())),
            output: Some(exec.output),
            reader: None,
        })
    }

    /// Whether the next step can use this shell: it is still running and no step is left
    /// half-done in it (a step whose caller went away before its end).
    pub fn is_ready(&self) -> bool {
        let state = self.state.lock().expect("not poisoned");
        !state.closed && state.listener.is_none()
    }

    /// The exec's id: once the shell is gone, its exit code tells why.
    pub fn exec_id(&self) -> &str {
        &self.exec_id
    }

    /// Sends one step's `block`, whose end lines carry `nonce`; the step's output lines go to
    /// `lines` as they come, and the returned receiver fires when the block has ended.
    pub async fn send(
        &mut self,
        block: &str,
        nonce: &str,
        lines: LineFn,
    ) -> Result<oneshot::Receiver<Ended>, std::io::Error> {
        let (done, ended) = oneshot::channel();
        {
            let mut state = self.state.lock().expect("not poisoned");
            if state.closed {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "the step shell has exited",
                ));
            }
            state.listener = Some(Listener::new(nonce, lines, done));
        }
        if let Some(output) = self.output.take() {
            self.reader = Some(tokio::spawn(read(output, self.state.clone())));
        }
        let mut text = String::with_capacity(block.len() + 16);
        let body = block.strip_suffix('\n').unwrap_or(block);
        text.push_str(&format!("{}\n", body.split('\n').count()));
        text.push_str(body);
        text.push('\n');
        let written = async {
            self.input.write_all(text.as_bytes()).await?;
            self.input.flush().await
        }
        .await;
        if let Err(e) = written {
            self.state.lock().expect("not poisoned").listener = None;
            return Err(e);
        }
        Ok(ended)
    }
}

/// Reads the shell's output until it ends, handing it to the step that is running.
async fn read(mut output: ExecOutput, state: Arc<Mutex<ReaderState>>) {
    while let Some(Ok((stream, chunk))) = output.next_chunk().await {
        let mut state = state.lock().expect("not poisoned");
        let Some(listener) = state.listener.as_mut() else {
            continue; // between steps: a background process's output, dropped
        };
        listener.push(stream, &chunk);
        if listener.is_complete() {
            let listener = state.listener.take().expect("present");
            listener.complete();
        }
    }
    let mut state = state.lock().expect("not poisoned");
    state.closed = true;
    if let Some(mut listener) = state.listener.take() {
        listener.flush();
        if let Some(done) = listener.done.take() {
            let _ = done.send(Ended::ShellGone);
        }
    }
}

/// One running step's view of the shell's output.
struct Listener {
    nonce: String,
    lines: LineFn,
    stdout: Demux,
    stderr: Demux,
    files: StepFiles,
    code: Option<i64>,
    stderr_ended: bool,
    done: Option<oneshot::Sender<Ended>>,
}

impl Listener {
    fn new(nonce: &str, lines: LineFn, done: oneshot::Sender<Ended>) -> Self {
        Self {
            nonce: nonce.to_string(),
            lines,
            stdout: Demux::new(OutputStream::Stdout),
            stderr: Demux::new(OutputStream::Stderr),
            files: StepFiles::default(),
            code: None,
            stderr_ended: false,
            done: Some(done),
        }
    }

    fn push(&mut self, stream: OutputStream, chunk: &Bytes) {
        let mut pieces = Vec::new();
        let demux = match stream {
            OutputStream::Stdout => &mut self.stdout,
            OutputStream::Stderr => &mut self.stderr,
        };
        demux.push(chunk, self.nonce.as_bytes(), &mut pieces);
        self.take(stream, pieces);
    }

    fn take(&mut self, stream: OutputStream, pieces: Vec<Piece>) {
        for piece in pieces {
            match piece {
                Piece::Step(text) => (self.lines)(as_stream(stream), text, false),
                Piece::StepCut(text) => (self.lines)(as_stream(stream), text, true),
                Piece::Control(text) => match (stream, text.strip_prefix("end")) {
                    (OutputStream::Stdout, Some(code)) => {
                        // A shell's status is 0-255; anything else would be a broken block.
                        self.code = Some(code.trim().parse().unwrap_or(-1));
                    }
                    (OutputStream::Stderr, Some(_)) => self.stderr_ended = true,
                    (OutputStream::Stdout, None) => self.files.push(&text),
                    (OutputStream::Stderr, None) => {}
                },
            }
        }
    }

    fn is_complete(&self) -> bool {
        self.code.is_some() && self.stderr_ended
    }

    fn complete(mut self) {
        self.flush();
        if let (Some(done), Some(code)) = (self.done.take(), self.code) {
            let _ = done.send(Ended::Exited {
                code,
                files: std::mem::take(&mut self.files),
            });
        }
    }

    /// Hands on what the step printed last without a newline.
    fn flush(&mut self) {
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let demux = match stream {
                OutputStream::Stdout => &mut self.stdout,
                OutputStream::Stderr => &mut self.stderr,
            };
            let pieces = demux.finish(self.nonce.as_bytes());
            self.take(stream, pieces);
        }
    }
}

fn as_stream(stream: OutputStream) -> Stream {
    match stream {
        OutputStream::Stdout => Stream::Stdout,
        OutputStream::Stderr => Stream::Stderr,
    }
}

/// What one stream carried: a line of the step's output, or a control line (without the
/// nonce and the space after it).
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    Step(String),
    /// A piece of an over-long line of the step's: the line goes on in the next.
    StepCut(String),
    Control(String),
}

/// Splits one stream into the step's lines and, from the first nonce on, control lines.
struct Demux {
    step: LineSplitter,
    /// Set once the nonce was seen: from there on the block's own lines come.
    control: Option<LineSplitter>,
    /// The end of what was read, held back while it could be the start of the nonce.
    held: Vec<u8>,
}

impl Demux {
    fn new(stream: OutputStream) -> Self {
        Self {
            step: LineSplitter::new(stream),
            control: None,
            held: Vec::new(),
        }
    }

    fn push(&mut self, chunk: &[u8], nonce: &[u8], out: &mut Vec<Piece>) {
        if let Some(control) = &mut self.control {
            for line in control.push(chunk) {
                classify(line.text, nonce, out);
            }
            return;
        }
        self.held.extend_from_slice(chunk);
        if let Some(at) = find(&self.held, nonce) {
            let rest = self.held.split_off(at);
            let before = std::mem::take(&mut self.held);
            out.extend(self.step.push(&before).into_iter().map(step_piece));
            out.extend(self.step.finish().map(step_piece));
            let mut control = LineSplitter::new(OutputStream::Stdout);
            for line in control.push(&rest) {
                classify(line.text, nonce, out);
            }
            self.control = Some(control);
        } else {
            let keep = partial_match(&self.held, nonce);
            let rest = self.held.split_off(self.held.len() - keep);
            let before = std::mem::replace(&mut self.held, rest);
            out.extend(self.step.push(&before).into_iter().map(step_piece));
        }
    }

    /// What is left at the end: an unterminated line.
    fn finish(&mut self, nonce: &[u8]) -> Vec<Piece> {
        let mut out = Vec::new();
        let held = std::mem::take(&mut self.held);
        out.extend(self.step.push(&held).into_iter().map(step_piece));
        out.extend(self.step.finish().map(step_piece));
        if let Some(control) = &mut self.control
            && let Some(line) = control.finish()
        {
            classify(line.text, nonce, &mut out);
        }
        out
    }
}

fn step_piece(line: crate::backend::LogLine) -> Piece {
    if line.continues {
        Piece::StepCut(line.text)
    } else {
        Piece::Step(line.text)
    }
}

/// A line after the first nonce: the block's (`NONCE …`), or a background process's, which
/// may run into the block's next line when it printed no newline.
fn classify(text: String, nonce: &[u8], out: &mut Vec<Piece>) {
    let nonce = std::str::from_utf8(nonce).unwrap_or_default();
    match (!nonce.is_empty()).then(|| text.find(nonce)).flatten() {
        Some(at) => {
            if at > 0 {
                out.push(Piece::Step(text[..at].to_string()));
            }
            let rest = &text[at + nonce.len()..];
            out.push(Piece::Control(rest.trim_start_matches(' ').to_string()));
        }
        None => out.push(Piece::Step(text)),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// The length of the longest end of `bytes` that is a proper start of `nonce`.
fn partial_match(bytes: &[u8], nonce: &[u8]) -> usize {
    (1..nonce.len().min(bytes.len() + 1))
        .rev()
        .find(|&n| bytes.ends_with(&nonce[..n]))
        .unwrap_or(0)
}

/// The step's files as the block printed them after the script.
#[derive(Debug, Default)]
pub struct StepFiles {
    pub output: String,
    pub env: String,
    pub summary: String,
    /// The first file over [`MAX_FILE_BYTES`].
    pub too_large: Option<&'static str>,
}

impl StepFiles {
    /// One tagged line, `FILE TEXT`, without the nonce.
    fn push(&mut self, tagged: &str) {
        let (name, text) = tagged.split_once(' ').unwrap_or((tagged, ""));
        let (name, file): (&'static str, &mut String) = match name {
            "output" => ("output", &mut self.output),
            "env" => ("env", &mut self.env),
            "summary" => ("summary", &mut self.summary),
            _ => return,
        };
        if file.len() + text.len() + 1 > MAX_FILE_BYTES {
            self.too_large.get_or_insert(name);
            return;
        }
        file.push_str(text);
        file.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NONCE: &[u8] = b"gpuflow-file-0123456789ab";

    fn demux_all(chunks: &[&[u8]]) -> Vec<Piece> {
        let mut d = Demux::new(OutputStream::Stdout);
        let mut out = Vec::new();
        for chunk in chunks {
            d.push(chunk, NONCE, &mut out);
        }
        out.extend(d.finish(NONCE));
        out
    }

    fn step(s: &str) -> Piece {
        Piece::Step(s.into())
    }

    fn control(s: &str) -> Piece {
        Piece::Control(s.into())
    }

    #[test]
    fn a_last_line_without_a_newline_is_kept_apart_from_the_end_lines() {
        let out = demux_all(&[b"a\nno newline", b"gpuflow-file-0123456789ab end 3\n"]);
        assert_eq!(out, [step("a"), step("no newline"), control("end 3")]);
    }

    #[test]
    fn a_nonce_cut_in_two_by_chunks_is_still_found() {
        let out = demux_all(&[
            b"out\ngpuflow-fi",
            b"le-0123456789ab output x=1\ngpuflow-file-0123456789ab end 0\n",
        ]);
        assert_eq!(out, [step("out"), control("output x=1"), control("end 0")]);
    }

    #[test]
    fn a_near_miss_of_the_nonce_is_step_output() {
        let out = demux_all(&[b"gpuflow-fi", b"nal\n"]);
        assert_eq!(out, [step("gpuflow-final")]);
    }

    #[test]
    fn background_lines_among_the_end_lines_stay_step_output() {
        let out = demux_all(&[
            b"gpuflow-file-0123456789ab env A=b\nlate\n",
            b"no newlinegpuflow-file-0123456789ab end 0\n",
        ]);
        assert_eq!(
            out,
            [
                control("env A=b"),
                step("late"),
                step("no newline"),
                control("end 0")
            ]
        );
    }

    proptest! {
        /// However the output is cut into chunks, the same pieces come out.
        #[test]
        fn chunking_does_not_change_pieces(
            text in "[a-z\\n]{0,80}",
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let mut whole = text.clone().into_bytes();
            whole.extend_from_slice(b"gpuflow-file-0123456789ab end 0\n");
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(whole.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([whole.len()]) {
                chunks.push(&whole[from..cut]);
                from = cut;
            }
            let mut want: Vec<Piece> = text.split('\n').map(step).collect();
            if text.ends_with('\n') || text.is_empty() {
                want.pop();
            }
            want.push(control("end 0"));
            prop_assert_eq!(demux_all(&chunks), want);
        }
    }

    #[test]
    fn tagged_lines_fill_the_files_they_name() {
        let mut files = StepFiles::default();
        files.push("output a=1");
        files.push("env X=y z");
        files.push("output b=");
        files.push("summary");
        files.push("other ignored");
        assert_eq!(files.output, "a=1\nb=\n");
        assert_eq!(files.env, "X=y z\n");
        assert_eq!(files.summary, "\n");
        assert_eq!(files.too_large, None);
    }

    #[test]
    fn a_file_over_the_limit_is_reported() {
        let mut files = StepFiles::default();
        let line = "x".repeat(1024);
        for _ in 0..=(MAX_FILE_BYTES / 1024) {
            files.push(&format!("output {line}"));
        }
        assert_eq!(files.too_large, Some("output"));
        assert!(files.output.len() <= MAX_FILE_BYTES);
    }
}
