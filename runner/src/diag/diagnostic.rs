use std::sync::Arc;

use super::{SourceFile, Span};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

/// Another place that helps explain a diagnostic ("the cycle continues here", "the action's
/// input is declared here"); it may be in another file.
#[derive(Clone, Debug, PartialEq)]
pub struct Related {
    pub file: Arc<SourceFile>,
    pub span: Span,
    pub label: String,
}

/// One problem: where (file + span), what (a lower-case message with user values in
/// backticks) and how to fix it (hints).
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub file: Option<Arc<SourceFile>>,
    pub span: Span,
    /// Text under the caret; short, says what is wrong at that spot.
    pub label: Option<String>,
    /// "help:" lines: how to fix it.
    pub hints: Vec<String>,
    /// "note:" lines: background, e.g. what is allowed here.
    pub notes: Vec<String>,
    pub related: Vec<Related>,
}

impl Diagnostic {
    pub fn error(file: &Arc<SourceFile>, span: Span, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, Some(file.clone()), span, message)
    }

    pub fn warning(file: &Arc<SourceFile>, span: Span, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, Some(file.clone()), span, message)
    }

    /// A problem that has no place in a file (a missing path, a bad command-line value).
    pub fn unlocated(message: impl Into<String>) -> Self {
        Self::new(Severity::Error, None, Span::default(), message)
    }

    fn new(
        severity: Severity,
        file: Option<Arc<SourceFile>>,
        span: Span,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity,
            message: message.into(),
            file,
            span,
            label: None,
            hints: Vec::new(),
            notes: Vec::new(),
            related: Vec::new(),
        }
    }

    #[must_use]
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }

    /// Adds a hint only when there is one, e.g. the result of [`super::did_you_mean`].
    #[must_use]
    pub fn maybe_hint(self, hint: Option<String>) -> Self {
        match hint {
            Some(h) => self.hint(h),
            None => self,
        }
    }

    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    #[must_use]
    pub fn related(mut self, file: &Arc<SourceFile>, span: Span, label: impl Into<String>) -> Self {
        self.related.push(Related {
            file: file.clone(),
            span,
            label: label.into(),
        });
        self
    }

    /// `file:line:col`, or an empty string for an unlocated diagnostic.
    pub fn location(&self) -> String {
        self.file
            .as_ref()
            .map(|f| f.location(self.span))
            .unwrap_or_default()
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Every problem found in one pass, so a user fixes them all at once instead of one per run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diagnostics(Vec<Diagnostic>);

impl Diagnostics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }

    pub fn error_count(&self) -> usize {
        self.0.iter().filter(|d| d.is_error()).count()
    }

    pub fn warning_count(&self) -> usize {
        self.0.len() - self.error_count()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    /// In file order, so output reads top to bottom like the file; duplicates (the same message
    /// at the same place, e.g. from two passes) are dropped.
    pub fn sorted(mut self) -> Self {
        self.0.sort_by(|a, b| {
            let key = |d: &Diagnostic| (d.file.as_ref().map(|f| f.name.clone()), d.span.start);
            key(a).cmp(&key(b))
        });
        self.0
            .dedup_by(|a, b| a.span == b.span && a.message == b.message && a.file == b.file);
        self
    }

    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.0
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Self(vec![d])
    }
}

impl From<Vec<Diagnostic>> for Diagnostics {
    fn from(v: Vec<Diagnostic>) -> Self {
        Self(v)
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
