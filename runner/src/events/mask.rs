//! Secret masking: every secret value, and every value a step registers with
//! `::add-mask::VALUE`, becomes `***` — and so do the forms a secret is commonly passed on
//! in: its base64 (standard and URL-safe, at each of the three alignments it can have inside a
//! longer base64 text), its URL-encoded forms, its JSON-escaped form and its HTML-escaped forms
//! (what an HTML report or an SVG chart holds of it).
//!
//! One layer does it for every output of a run: [`MaskingSink`] sits in front of every event
//! sink (the terminal, `--json`, `events.jsonl`, the stored logs and their file names, the
//! headline), so any text of any event is masked whatever step produced it; what is not an
//! event — the results store's rows and fingerprints, reports, `record.json`, the results
//! branch, the benchmark's result files — goes through [`Masker::mask_serde`] or [`Masker::mask`] where it is written.
//! Over-long lines are handed on in pieces ([`crate::backend::MAX_LINE_BYTES`]); a secret cut
//! in two by that is still masked, by [`Masker::mask_piece`].

use std::borrow::Cow;
use std::sync::{Arc, RwLock};

use regex::Regex;

use super::event::{Event, EventSink};

/// What replaces a masked value.
pub const MASK: &str = "***";

/// Encoded forms shorter than this are not masked: a 4-character piece of base64 would hide
/// unrelated text everywhere. The value itself is masked whatever its length.
const MIN_FORM_CHARS: usize = 6;

/// The values to hide, shared by every job of a run (a mask added in one job holds for all).
#[derive(Debug, Default)]
pub struct Masker {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Every text hidden (values and their encoded forms), longest first, so a secret
    /// containing another is hidden whole.
    forms: Vec<String>,
    /// The forms as one search, longest first among those starting at the same place.
    /// `None` without forms, or when they are too many to compile (then `forms` are replaced
    /// one after the other).
    pattern: Option<Regex>,
}

impl Masker {
    pub fn new<I: IntoIterator<Item = String>>(secrets: I) -> Self {
        let m = Self::default();
        for s in secrets {
            m.add(&s);
        }
        m
    }

    /// Hides `value` and its encoded forms from now on. A multi-line value is also hidden line
    /// by line, since log lines never hold it whole; blank values would hide everything and
    /// are ignored.
    pub fn add(&self, value: &str) {
        // gpuflow's own diagnostics (`-v`, `GPUFLOW_LOG`) hide it too.
        crate::diag_log::hide([value]);
        let Ok(mut state) = self.state.write() else {
            return;
        };
        let parts = std::iter::once(value).chain(value.lines().filter(|_| value.contains('\n')));
        let mut added = false;
        for part in parts {
            let part = part.trim_end_matches('\r');
            if part.trim().is_empty() {
                continue;
            }
            for (i, form) in std::iter::once(part.to_string())
                .chain(encoded_forms(part))
                .enumerate()
            {
                if (i > 0 && form.chars().count() < MIN_FORM_CHARS) || state.forms.contains(&form) {
                    continue;
                }
                state.forms.push(form);
                added = true;
            }
        }
        if added {
            state.forms.sort_by_key(|v| std::cmp::Reverse(v.len()));
            let alternatives: Vec<String> = state.forms.iter().map(|f| regex::escape(f)).collect();
            state.pattern = regex::RegexBuilder::new(&alternatives.join("|"))
                .size_limit(1 << 28)
                .build()
                .ok();
        }
    }

    /// `text` with every masked value replaced by `***`.
    pub fn mask(&self, text: &str) -> String {
        self.mask_cow(text).into_owned()
    }

    /// [`Self::mask`] without a copy when there is nothing to hide.
    pub fn mask_cow<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let Ok(state) = self.state.read() else {
            return Cow::Borrowed(text);
        };
        match &state.pattern {
            Some(p) => match p.replace_all(text, MASK) {
                Cow::Borrowed(_) => Cow::Borrowed(text),
                Cow::Owned(s) => Cow::Owned(s),
            },
            None if state.forms.is_empty() => Cow::Borrowed(text),
            None => {
                let mut out = text.to_string();
                for v in &state.forms {
                    if out.contains(v.as_str()) {
                        out = out.replace(v.as_str(), MASK);
                    }
                }
                Cow::Owned(out)
            }
        }
    }

    /// Masks one piece of a line that was cut because it was too long (`continues`: more of
    /// the same line follows). A secret may straddle the cut, so the end of a piece that could
    /// be the start of one (up to the longest masked form less a byte) is held back in `held`
    /// and put before the next piece; the last piece (`continues` false) empties it. Returns
    /// what to hand on, `None` when all of it is held. Memory stays bounded: at most the
    /// longest form is held.
    pub fn mask_piece(&self, held: &mut String, text: &str, continues: bool) -> Option<String> {
        let mut line = std::mem::take(held);
        line.push_str(text);
        let Ok(state) = self.state.read() else {
            return Some(line);
        };
        let keep = state.forms.first().map_or(0, |f| f.len().saturating_sub(1));
        let Some(pattern) = state.pattern.as_ref().filter(|_| continues && keep > 0) else {
            drop(state);
            return Some(self.mask(&line));
        };
        let mut cut = line.len().saturating_sub(keep);
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        // A match starting before the cut lies wholly in `line` (no form is longer than
        // `keep` + 1), and is the one the whole line would give: it is masked here, the cut
        // moved past it.
        let mut out = String::with_capacity(cut);
        let mut from = 0;
        for m in pattern.find_iter(&line) {
            if m.start() >= cut {
                break;
            }
            out.push_str(&line[from..m.start()]);
            out.push_str(MASK);
            from = m.end();
        }
        let cut = cut.max(from);
        out.push_str(&line[from..cut]);
        *held = line[cut..].to_string();
        (!out.is_empty()).then_some(out)
    }

    /// `value` with every text in it masked (map keys too), for what is written as data: the
    /// results store's rows and fingerprints, a report's data. A value that does not read back
    /// once masked (a masked number) is returned unchanged: secrets are text.
    pub fn mask_serde<T>(&self, value: &T) -> T
    where
        T: serde::Serialize + serde::de::DeserializeOwned + Clone,
    {
        let Ok(mut json) = serde_json::to_value(value) else {
            return value.clone();
        };
        if !self.mask_json(&mut json) {
            return value.clone();
        }
        serde_json::from_value(json).unwrap_or_else(|_| value.clone())
    }

    /// Masks every string (and map key) of `value` in place; returns whether any changed.
    pub fn mask_json(&self, value: &mut serde_json::Value) -> bool {
        use serde_json::Value as J;
        match value {
            J::String(s) => match self.mask_cow(s) {
                Cow::Borrowed(_) => false,
                Cow::Owned(masked) => {
                    *s = masked;
                    true
                }
            },
            J::Array(items) => items
                .iter_mut()
                .fold(false, |changed, v| self.mask_json(v) | changed),
            J::Object(map) => {
                let mut changed = false;
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    changed |= self.mask_json(&mut v);
                    let key = self.mask(&k);
                    changed |= key != k;
                    map.insert(key, v);
                }
                changed
            }
            J::Null | J::Bool(_) | J::Number(_) => false,
        }
    }

    /// Reads a workflow command in a step's output: `::add-mask::VALUE` adds VALUE. Returns
    /// whether the line was one.
    pub fn observe(&self, line: &str) -> bool {
        match line.trim_start().strip_prefix("::add-mask::") {
            Some(value) => {
                self.add(value.trim());
                true
            }
            None => false,
        }
    }
}

/// The forms `value` is commonly passed on in, besides itself: base64 (standard and URL-safe;
/// whole, and at each alignment inside a longer base64 text, where only the characters that
/// depend on the value alone are fixed), URL-encoded (`%2F` and `%2f`, and with `+` for a
/// space as a form sends it), JSON-escaped and HTML-escaped.
fn encoded_forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut forms = Vec::new();
    for alphabet in [STANDARD, URL_SAFE] {
        forms.push(base64(bytes, alphabet, true));
        for shift in 0..3 {
            let mut shifted = vec![0u8; shift];
            shifted.extend_from_slice(bytes);
            let encoded = base64(&shifted, alphabet, false);
            // Characters wholly made of the value's bits: from the first after the shift's
            // bits to the last before the end of the value.
            let first = (8 * shift).div_ceil(6);
            let last = 8 * shifted.len() / 6;
            if first < last {
                forms.push(encoded[first..last].to_string());
            }
        }
    }
    for (upper, plus) in [(true, false), (false, false), (true, true)] {
        forms.push(url_encode(bytes, upper, plus));
    }
    if let Ok(json) = serde_json::to_string(value) {
        forms.push(json[1..json.len() - 1].to_string());
    }
    forms.extend(html_escaped(value));
    forms.retain(|f| f != value);
    forms
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
        if pad {
            (chunk.len()..3).for_each(|_| out.push('='));
        }
    }
    out
}

/// The ways HTML and XML write `value` as text: the report's HTML (Tera's autoescape) and
/// its SVG charts write `&quot;` and `&#39;`; Tera's `escape_xml` filter, which a user's
/// template may call, writes `&apos;`; other tools write `&#x27;` and `&#34;`. A report's
/// escaped text is not the value, so without these a secret with `&`, `<`, `>`, `"` or `'` in
/// it would be shown whole. The same as the value when it has none of them.
fn html_escaped(value: &str) -> Vec<String> {
    [
        ("&quot;", "&#39;"),
        ("&quot;", "&apos;"),
        ("&quot;", "&#x27;"),
        ("&#34;", "&#39;"),
    ]
    .iter()
    .map(|(quot, apos)| {
        let mut out = String::with_capacity(value.len());
        for c in value.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '"' => out.push_str(quot),
                '\'' => out.push_str(apos),
                c => out.push(c),
            }
        }
        out
    })
    .collect()
}

/// Percent-encoding of everything but RFC 3986's unreserved characters (`encodeURIComponent`).
fn url_encode(bytes: &[u8], upper: bool, space_as_plus: bool) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char);
            }
            b' ' if space_as_plus => out.push('+'),
            _ if upper => out.push_str(&format!("%{b:02X}")),
            _ => out.push_str(&format!("%{b:02x}")),
        }
    }
    out
}

/// Masks every text of every event before handing it on: the one place between the engine
/// and every output made of events (the views, `--json`, `events.jsonl`, the stored logs and
/// the names of their files, the headline, preflight messages).
pub struct MaskingSink {
    inner: Arc<dyn EventSink>,
    masker: Arc<Masker>,
}

impl MaskingSink {
    pub fn new(inner: Arc<dyn EventSink>, masker: Arc<Masker>) -> Self {
        Self { inner, masker }
    }
}

impl EventSink for MaskingSink {
    fn emit(&self, mut event: Event) {
        event.kind.strings_mut(&mut |s: &mut String| {
            if let Cow::Owned(masked) = self.masker.mask_cow(s) {
                *s = masked;
            }
        });
        self.inner.emit(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_added_masks_are_hidden_longest_first() {
        let m = Masker::new([
            "hunter2".to_string(),
            "hunter2-extra".to_string(),
            String::new(),
        ]);
        assert_eq!(m.mask("pw=hunter2-extra and hunter2"), "pw=*** and ***");
        assert_eq!(m.mask("nothing here"), "nothing here");
        assert!(m.observe("::add-mask::s3cr3t"));
        assert!(!m.observe("plain line"));
        assert_eq!(m.mask("token s3cr3t"), "token ***");
    }

    #[test]
    fn multi_line_secrets_are_hidden_line_by_line() {
        let m = Masker::new(["line-one\nline-two".to_string()]);
        assert_eq!(m.mask("got line-two"), "got ***");
    }

    #[test]
    fn base64_url_and_json_forms_are_hidden() {
        let secret = "s3cr3t/Key+x?=Z9q \"q\"";
        let m = Masker::new([secret.to_string()]);
        for form in encoded_forms(secret) {
            let masked = m.mask(&format!("<{form}>"));
            assert!(!masked.contains(&form), "{form} in {masked}");
        }
        // Inside a longer base64 text, at every alignment: what `base64` prints of a
        // file holding it.
        for pre in ["", "a", "ab", "abc"] {
            let whole = base64(format!("{pre}{secret}!").as_bytes(), STANDARD, true);
            let masked = m.mask(&whole);
            assert!(masked.contains(MASK), "{pre:?}: {masked}");
            assert!(masked.len() < whole.len() / 2 + 10, "{pre:?}: {masked}");
        }
        assert_eq!(m.mask("%2F%2B is not it"), "%2F%2B is not it");
    }

    #[test]
    fn html_escaped_forms_are_hidden() {
        let secret = "a&b<c>d\"e'f";
        let m = Masker::new([secret.to_string()]);
        for escaped in [
            // Tera's autoescape and the report's SVG charts.
            "a&amp;b&lt;c&gt;d&quot;e&#39;f",
            // Tera's `escape_xml`.
            "a&amp;b&lt;c&gt;d&quot;e&apos;f",
            "a&amp;b&lt;c&gt;d&quot;e&#x27;f",
            "a&amp;b&lt;c&gt;d&#34;e&#39;f",
        ] {
            assert_eq!(m.mask(&format!("<td>{escaped}</td>")), "<td>***</td>");
        }
        assert_eq!(
            m.mask(&crate::report::chart::escape(secret)),
            MASK,
            "the charts' own escaping"
        );
    }

    #[test]
    fn a_secret_cut_between_pieces_of_a_line_is_hidden() {
        let m = Masker::new(["0123456789secret".to_string()]);
        let line = format!("{}0123456789secret{}", "a".repeat(100), "b".repeat(100));
        for cut in 90..130 {
            let mut held = String::new();
            let mut out = String::new();
            out.extend(m.mask_piece(&mut held, &line[..cut], true));
            out.extend(m.mask_piece(&mut held, &line[cut..], false));
            assert!(held.is_empty());
            assert_eq!(out, format!("{}***{}", "a".repeat(100), "b".repeat(100)));
        }
    }

    #[test]
    fn every_text_of_an_event_is_masked_by_the_sink() {
        use super::super::event::{CollectSink, EventKind, JobRef};
        let collect = CollectSink::new();
        let masker = Arc::new(Masker::new(["hunter2".to_string()]));
        let sink = MaskingSink::new(Arc::new(collect.clone()), masker);
        sink.emit(Event {
            elapsed: std::time::Duration::ZERO,
            kind: EventKind::PreflightCheck {
                job: JobRef {
                    job: "j".into(),
                    cell: 0,
                    display: "j".into(),
                },
                step: Some("1".into()),
                name: "check hunter2".into(),
                outcome: super::super::event::StepOutcome::Failure,
                message: Some("--api-key aHVudGVyMg== is unknown".into()),
                duration: std::time::Duration::ZERO,
            },
        });
        let json = serde_json::to_string(&collect.events()[0]).unwrap();
        assert!(
            !json.contains("hunter2") && !json.contains("aHVudGVyMg"),
            "{json}"
        );
        assert!(json.contains("check ***"), "{json}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn a_masked_value_never_survives(secret in "[a-z0-9]{3,12}", pre in ".{0,20}", post in ".{0,20}") {
            let m = Masker::new([secret.clone()]);
            let masked = m.mask(&format!("{pre}{secret}{post}"));
            proptest::prop_assert!(!masked.contains(&secret) || masked.contains(MASK));
            proptest::prop_assert!(!m.mask(&secret).contains(&secret));
        }

        /// However a line is cut into pieces, no secret in it survives and nothing else is
        /// lost or changed.
        #[test]
        fn cutting_a_line_anywhere_masks_it_as_a_whole(
            secret in "[a-z]{3,12}",
            text in "[a-z ]{0,200}",
            cuts in proptest::collection::vec(0usize..200, 0..6),
        ) {
            let m = Masker::new([secret.clone()]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).collect();
            cuts.sort_unstable();
            let mut held = String::new();
            let mut out = String::new();
            let mut from = 0;
            for cut in cuts {
                out.extend(m.mask_piece(&mut held, &text[from..cut], true));
                from = cut;
            }
            out.extend(m.mask_piece(&mut held, &text[from..], false));
            proptest::prop_assert_eq!(out, m.mask(&text));
        }
    }
}
