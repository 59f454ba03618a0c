//! Output as lines, with memory bounded however much a container prints.
//!
//! The engine delivers output in frames that do not follow line boundaries; [`LineSplitter`]
//! joins them into lines, one splitter per stream so interleaved stdout and stderr frames do
//! not mix. A line longer than [`MAX_LINE_BYTES`] is handed on in pieces rather than held:
//! at most one partial line per stream is ever buffered. Lines go to a [`LineSink`], which is
//! awaited, so a slow consumer slows the reading instead of growing a queue.

use std::future::Future;

/// The longest piece of a line held before it is handed on.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Which stream a line came from (`tty=false` keeps them apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// One line of output, without its line ending; invalid UTF-8 is replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub stream: OutputStream,
    pub text: String,
    /// A piece of a line longer than [`MAX_LINE_BYTES`]: the line goes on in the next one. A
    /// masker holds back its end, where a secret may have been cut in two.
    pub continues: bool,
}

/// Where lines go: a closure, or a bounded channel (whose `send` is awaited).
pub trait LineSink: Send {
    fn line(&mut self, line: LogLine) -> impl Future<Output = ()> + Send;
}

impl<F: FnMut(LogLine) + Send> LineSink for F {
    async fn line(&mut self, line: LogLine) {
        self(line);
    }
}

impl LineSink for tokio::sync::mpsc::Sender<LogLine> {
    async fn line(&mut self, line: LogLine) {
        // A receiver that went away no longer wants lines; the output is still drained so the
        // exit status can be read.
        let _ = self.send(line).await;
    }
}

/// Joins chunks of one stream into lines.
#[derive(Debug)]
pub struct LineSplitter {
    stream: OutputStream,
    partial: Vec<u8>,
}

impl LineSplitter {
    pub fn new(stream: OutputStream) -> Self {
        Self {
            stream,
            partial: Vec::new(),
        }
    }

    /// Adds a chunk; returns the lines it completed (and pieces of over-long lines).
    pub fn push(&mut self, mut chunk: &[u8]) -> Vec<LogLine> {
        let mut lines = Vec::new();
        while !chunk.is_empty() {
            let room = MAX_LINE_BYTES - self.partial.len();
            // A newline right after `room` bytes still ends a line that fits.
            match chunk.iter().take(room + 1).position(|&b| b == b'\n') {
                Some(end) => {
                    self.partial.extend_from_slice(&chunk[..end]);
                    lines.push(self.take_line());
                    chunk = &chunk[end + 1..];
                }
                None if chunk.len() < room => {
                    self.partial.extend_from_slice(chunk);
                    chunk = &[];
                }
                None => {
                    self.partial.extend_from_slice(&chunk[..room]);
                    chunk = &chunk[room..];
                    lines.push(self.take_piece());
                }
            }
        }
        lines
    }

    /// The unterminated last line, if any (at the end of the stream).
    pub fn finish(&mut self) -> Option<LogLine> {
        (!self.partial.is_empty()).then(|| self.take_line())
    }

    fn take_line(&mut self) -> LogLine {
        if self.partial.last() == Some(&b'\r') {
            self.partial.pop();
        }
        let text = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        self.line(text, false)
    }

    /// Hands on a full buffer, keeping back an incomplete UTF-8 sequence at its end so a
    /// character is not cut in two.
    fn take_piece(&mut self) -> LogLine {
        let keep = incomplete_utf8_tail(&self.partial);
        let rest = self.partial.split_off(self.partial.len() - keep);
        let text = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial = rest;
        self.line(text, true)
    }

    fn line(&self, text: String, continues: bool) -> LogLine {
        LogLine {
            stream: self.stream,
            text,
            continues,
        }
    }
}

/// The two splitters of a multiplexed stream (`docker logs`, an attached exec).
#[derive(Debug)]
pub(crate) struct FrameLines {
    stdout: LineSplitter,
    stderr: LineSplitter,
}

impl FrameLines {
    pub(crate) fn new() -> Self {
        Self {
            stdout: LineSplitter::new(OutputStream::Stdout),
            stderr: LineSplitter::new(OutputStream::Stderr),
        }
    }

    /// The lines a frame completes. `Console` frames (a TTY) count as stdout.
    pub(crate) fn push(&mut self, frame: &bollard::container::LogOutput) -> Vec<LogLine> {
        use bollard::container::LogOutput as F;
        match frame {
            F::StdErr { message } => self.stderr.push(message),
            F::StdOut { message } | F::Console { message } => self.stdout.push(message),
            F::StdIn { .. } => Vec::new(),
        }
    }

    /// The unterminated last lines at the end of the stream.
    pub(crate) fn finish(&mut self) -> impl Iterator<Item = LogLine> {
        [self.stdout.finish(), self.stderr.finish()]
            .into_iter()
            .flatten()
    }
}

/// How many bytes at the end of `bytes` start a UTF-8 character that is not complete yet.
fn incomplete_utf8_tail(bytes: &[u8]) -> usize {
    for back in 1..=3.min(bytes.len()) {
        let b = bytes[bytes.len() - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back for the lead byte
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn texts(lines: &[LogLine]) -> Vec<&str> {
        lines.iter().map(|l| l.text.as_str()).collect()
    }

    #[test]
    fn joins_chunks_across_frame_boundaries() {
        let mut s = LineSplitter::new(OutputStream::Stdout);
        assert!(s.push(b"hel").is_empty());
        assert_eq!(texts(&s.push(b"lo\nwor")), ["hello"]);
        assert_eq!(texts(&s.push(b"ld\r\n\nlast")), ["world", ""]);
        assert_eq!(s.finish().unwrap().text, "last");
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn an_endless_line_is_handed_on_in_bounded_pieces() {
        let mut s = LineSplitter::new(OutputStream::Stderr);
        let mut pieces = 0;
        for _ in 0..100 {
            for line in s.push(&[b'x'; 10_000]) {
                assert_eq!(line.text.len(), MAX_LINE_BYTES);
                assert_eq!(line.stream, OutputStream::Stderr);
                assert!(line.continues, "a piece says the line goes on");
                pieces += 1;
            }
            assert!(s.partial.len() < MAX_LINE_BYTES);
        }
        assert_eq!(pieces, 1_000_000 / MAX_LINE_BYTES);
    }

    #[test]
    fn a_line_of_exactly_the_maximum_is_one_line() {
        let mut s = LineSplitter::new(OutputStream::Stdout);
        let mut input = vec![b'a'; MAX_LINE_BYTES];
        input.push(b'\n');
        let lines = s.push(&input);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].text.len(), MAX_LINE_BYTES);
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn a_piece_boundary_does_not_cut_a_character() {
        let mut s = LineSplitter::new(OutputStream::Stdout);
        let mut input = vec![b'a'; MAX_LINE_BYTES - 1];
        input.extend_from_slice("é\n".as_bytes());
        let lines = s.push(&input);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].text.len(), MAX_LINE_BYTES - 1);
        assert_eq!(lines[1].text, "é");
        assert!(lines[0].continues && !lines[1].continues);
        assert!(lines.iter().all(|l| !l.text.contains('\u{FFFD}')));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// However the output is cut into chunks, the same lines come out.
        #[test]
        fn chunking_does_not_change_lines(
            text in "[a-z\\n]{0,300}",
            cuts in proptest::collection::vec(0usize..300, 0..10),
        ) {
            let bytes = text.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut s = LineSplitter::new(OutputStream::Stdout);
            let mut got = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                got.extend(s.push(&bytes[from..cut]).into_iter().map(|l| l.text));
                from = cut;
            }
            got.extend(s.finish().map(|l| l.text));
            let mut want: Vec<String> = text.split('\n').map(str::to_string).collect();
            if want.last().is_some_and(String::is_empty) {
                want.pop();
            }
            prop_assert_eq!(got, want);
        }

        #[test]
        fn never_panics_and_never_holds_a_full_line(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut s = LineSplitter::new(OutputStream::Stdout);
            let _ = s.push(&bytes);
            prop_assert!(s.partial.len() < MAX_LINE_BYTES);
        }
    }
}
