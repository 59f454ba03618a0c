//! An incremental Server-Sent Events parser: body frames go in as they arrive, complete
//! events' `data` come out. Nothing waits for the whole response, so the caller can stamp
//! each event with the moment its last byte arrived.
//!
//! Follows the WHATWG event-stream rules that matter for OpenAI-style streams: lines end in
//! `\n`, `\r\n` or `\r`; a blank line ends an event; `data:` lines are joined with `\n`; one
//! space after the colon is dropped; comments (`:`) and other fields are ignored. Knows nothing
//! about JSON or OpenAI.

/// The most one event (its `data` so far and the line being read) may hold. OpenAI-style
/// chunks are a few hundred bytes; a server that never ends a line or an event would
/// otherwise grow the buffer until the benchmark runs out of memory.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// An event grew past the parser's limit without ending.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "an event grew past {} MiB without ending (no blank line after it): not an OpenAI-style event stream",
    .limit >> 20
)]
pub struct EventTooLarge {
    pub limit: usize,
}

/// Parser state between frames: the unfinished line and the event being built.
#[derive(Debug)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The previous frame ended in `\r`: a `\n` starting the next one belongs to it.
    after_cr: bool,
    /// [`MAX_EVENT_BYTES`], smaller in tests.
    limit: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limit(MAX_EVENT_BYTES)
    }
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_limit(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            after_cr: false,
            limit,
        }
    }

    /// Feeds one frame; pushes the data of every event it completes onto `out`. Fails once
    /// the event being read holds more than the limit: the stream cannot go on after that.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), EventTooLarge> {
        let mut rest = bytes;
        if self.after_cr {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..end]);
            self.check()?;
            let is_cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            if is_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            self.end_line(out);
        }
        self.line.extend_from_slice(rest);
        self.check()
    }

    fn check(&self) -> Result<(), EventTooLarge> {
        if self.line.len() + self.data.len() > self.limit {
            return Err(EventTooLarge { limit: self.limit });
        }
        Ok(())
    }

    /// Bytes held back: an unfinished line or event. Non-empty when a stream stops here means
    /// the stream was cut mid-event.
    pub fn pending(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }

    fn end_line(&mut self, out: &mut Vec<Vec<u8>>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                out.push(std::mem::take(&mut self.data));
                self.has_data = false;
            }
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &b""[..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        self.line = line;
        self.line.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(frames: &[&[u8]]) -> Vec<String> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for frame in frames {
            parser.push(frame, &mut out).unwrap();
        }
        out.into_iter()
            .map(|d| String::from_utf8(d).unwrap())
            .collect()
    }

    #[test]
    fn openai_stream() {
        let body: &[u8] = b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
        assert_eq!(parse_all(&[body]), ["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
    }

    #[test]
    fn events_split_across_frames_complete_on_their_last_byte() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        parser.push(b"data: {\"a\"", &mut out).unwrap();
        assert!(out.is_empty() && parser.pending());
        parser.push(b":1}\n", &mut out).unwrap();
        assert!(out.is_empty());
        parser.push(b"\n", &mut out).unwrap();
        assert_eq!(out, [b"{\"a\":1}".to_vec()]);
        assert!(!parser.pending());
    }

    #[test]
    fn comments_other_fields_crlf_and_multiline_data() {
        let body: &[u8] = b": keep-alive\r\nevent: x\r\ndata: one\r\ndata:two\r\n\r\nid: 3\n\n";
        assert_eq!(parse_all(&[body]), ["one\ntwo"]);
    }

    #[test]
    fn an_event_past_the_limit_fails_the_stream() {
        // One endless line, across frames.
        let mut parser = SseParser::with_limit(64);
        let mut out = Vec::new();
        parser.push(&[b'x'; 40], &mut out).unwrap();
        let err = parser.push(&[b'x'; 40], &mut out).unwrap_err();
        assert_eq!(err, EventTooLarge { limit: 64 });
        // Many short `data:` lines with no blank line to end the event.
        let mut parser = SseParser::with_limit(64);
        let mut lines = Vec::new();
        for _ in 0..20 {
            lines.extend_from_slice(b"data: 0123\n");
        }
        assert!(parser.push(&lines, &mut out).is_err());
        // Events that end in time pass, however many.
        let mut parser = SseParser::with_limit(64);
        for _ in 0..100 {
            parser.push(b"data: 0123456789\n\n", &mut out).unwrap();
        }
        assert_eq!(out.len(), 100);
        assert!(
            EventTooLarge {
                limit: MAX_EVENT_BYTES
            }
            .to_string()
            .starts_with("an event grew past 16 MiB without ending")
        );
    }

    #[test]
    fn a_crlf_split_between_frames_is_one_line_end() {
        assert_eq!(parse_all(&[b"data: a\r", b"\n\r", b"\n"]), ["a"]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        #[test]
        fn any_split_gives_the_same_events(
            events in prop::collection::vec("[a-z{}\":, ]{0,20}", 0..8),
            crlf in any::<bool>(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let eol = if crlf { "\r\n" } else { "\n" };
            let body: String = events.iter().map(|e| format!("data: {e}{eol}{eol}")).collect();
            let bytes = body.as_bytes();
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut frames = Vec::new();
            let mut last = 0;
            for p in points {
                frames.push(&bytes[last..p]);
                last = p;
            }
            frames.push(&bytes[last..]);
            prop_assert_eq!(parse_all(&frames), events);
        }

        #[test]
        fn never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let mut parser = SseParser::new();
            let mut out = Vec::new();
            parser.push(&bytes, &mut out).unwrap();
        }
    }
}
