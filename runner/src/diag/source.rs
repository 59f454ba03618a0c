use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// A half-open byte range into a [`SourceFile`]'s text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub const fn new(start: usize, end: usize) -> Self {
        Self { start, end }
    }

    /// A span inside this one, given byte offsets relative to this span's start. Used to point
    /// at a column inside an expression embedded in a YAML string.
    pub fn inner(self, relative: Range<usize>) -> Self {
        let start = (self.start + relative.start).min(self.end);
        let end = (self.start + relative.end).clamp(start, self.end.max(start));
        Self { start, end }
    }

    pub fn range(self) -> Range<usize> {
        self.start..self.end
    }

    pub fn is_empty(self) -> bool {
        self.start >= self.end
    }
}

impl From<Range<usize>> for Span {
    fn from(r: Range<usize>) -> Self {
        Self::new(r.start, r.end)
    }
}

/// A value together with where it was written.
#[derive(Clone, Debug, Default)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub const fn new(value: T, span: Span) -> Self {
        Self { value, span }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Spanned<U> {
        Spanned::new(f(self.value), self.span)
    }

    pub fn as_ref(&self) -> Spanned<&T> {
        Spanned::new(&self.value, self.span)
    }
}

/// Equality ignores where a value was written: two workflows that say the same thing are equal.
impl<T: PartialEq> PartialEq for Spanned<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

/// Serialised as the bare value: `plan --json` and other machine output show what was written,
/// not where.
impl<T: serde::Serialize> serde::Serialize for Spanned<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(serializer)
    }
}

/// A spanned value has the schema of its value: spans are the loader's business, not the
/// file format's.
impl<T: schemars::JsonSchema> schemars::JsonSchema for Spanned<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<T> std::ops::Deref for Spanned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: fmt::Display> fmt::Display for Spanned<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

/// A file as it was read, shared by every diagnostic that points into it.
#[derive(Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// The name shown to the user: the path as given on the command line, not canonicalised,
    /// so messages match what the user typed.
    pub name: String,
    pub text: String,
    /// Byte offset of the start of each line, for offset → line:col.
    line_starts: Vec<usize>,
}

impl Default for SourceFile {
    fn default() -> Self {
        Self {
            name: String::new(),
            text: String::new(),
            line_starts: vec![0],
        }
    }
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Arc<Self> {
        let text = text.into();
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Arc::new(Self {
            name: name.into(),
            text,
            line_starts,
        })
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let column = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line + 1, column + 1)
    }

    /// `name:line:col` of a span's start as it is shown ([`Self::shown`]), the form editors
    /// and terminals turn into links.
    pub fn location(&self, span: Span) -> String {
        let (line, col) = self.line_col(self.shown(span).start);
        format!("{}:{line}:{col}", self.name)
    }

    /// The span a diagnostic shows: inside the text, on character boundaries, and a span at
    /// the very end of the text (a document cut short) pulled back onto the last character,
    /// since a snippet can only point at a character. `location`, the rendered `-->` line and
    /// `validate --format json` all take line:col from this one span, so they agree: they
    /// used to differ at the end of a file ending in a newline (2:1 against 1:3).
    pub fn shown(&self, span: Span) -> Span {
        let text = self.text.as_str();
        let mut start = span.start.min(text.len());
        let mut end = span.end.clamp(start, text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        while !text.is_char_boundary(end) {
            end += 1;
        }
        if start == text.len() && start > 0 {
            start = text[..start]
                .char_indices()
                .next_back()
                .map_or(0, |(i, _)| i);
            end = text.len();
        }
        Span::new(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_from_one() {
        let f = SourceFile::new("w.yml", "a: 1\nbé: x\n");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(5), (2, 1));
        // `x` is after a two-byte `é`: column counts characters, not bytes.
        assert_eq!(f.line_col(10), (2, 5));
        assert_eq!(f.location(Span::new(5, 6)), "w.yml:2:1");
    }

    /// A span at the very end of a text is shown on its last character, and `location` says
    /// where that is; it used to name the empty line after a final newline (2:1) while the
    /// rendered `-->` line named the end of the last line (1:3).
    #[test]
    fn a_span_at_the_end_of_the_text_is_located_where_it_is_shown() {
        let f = SourceFile::new("w.yml", "ab\n");
        assert_eq!(f.shown(Span::new(3, 3)), Span::new(2, 3));
        assert_eq!(f.location(Span::new(3, 3)), "w.yml:1:3");
        // Past the end, inside a character, empty text.
        assert_eq!(f.shown(Span::new(9, 12)), Span::new(2, 3));
        let f = SourceFile::new("w.yml", "a: é");
        assert_eq!(f.shown(Span::new(5, 5)), Span::new(3, 5));
        assert_eq!(f.shown(Span::new(4, 4)), Span::new(3, 5));
        assert_eq!(f.location(Span::new(5, 5)), "w.yml:1:4");
        let f = SourceFile::new("w.yml", "");
        assert_eq!(f.location(Span::new(0, 0)), "w.yml:1:1");
    }

    #[test]
    fn inner_span_stays_inside_its_parent() {
        let s = Span::new(10, 20);
        assert_eq!(s.inner(2..4), Span::new(12, 14));
        assert_eq!(s.inner(8..50), Span::new(18, 20));
        assert_eq!(s.inner(40..50), Span::new(20, 20));
    }
}
