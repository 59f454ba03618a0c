//! The one error type of the expression language: what went wrong (lexing, parsing or
//! evaluation), a lower-case message, and a byte span relative to the text that was parsed.
//! It knows nothing about files: callers map the span into their source with `Span::inner`.

use std::ops::Range;

/// Which stage failed. Lexing and parsing errors are found before anything runs, so a workflow
/// with one is rejected by `gpuflow validate`; evaluation errors need the contexts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A character sequence that is not a token (`1 = 2`, `'unterminated`, `0xZZ`).
    Lex,
    /// Tokens that do not form an expression, an unknown function, a wrong number of
    /// arguments, or nesting deeper than [`super::MAX_DEPTH`].
    Parse,
    /// A problem found while computing the value (`fromJSON` of bad JSON, a bad `format`
    /// string, a non-boolean `case` predicate, a value too large).
    Evaluation,
}

impl ErrorKind {
    /// The name `gpuflow eval --json` prints, which is the one GitHub's test data uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lex => "lexing",
            Self::Parse => "parsing",
            Self::Evaluation => "evaluation",
        }
    }
}

/// A problem in an expression, located by a byte span relative to the text that was passed to
/// [`super::parse`] (or [`super::parse_template`], [`super::parse_condition`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExprError {
    pub kind: ErrorKind,
    pub message: String,
    pub span: Range<usize>,
    /// How to fix it ("did you mean `startsWith`?"), when there is something useful to say.
    pub hint: Option<String>,
}

impl ExprError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>, span: Range<usize>) -> Self {
        Self {
            kind,
            message: message.into(),
            span,
            hint: None,
        }
    }

    pub(crate) fn lex(message: impl Into<String>, span: Range<usize>) -> Self {
        Self::new(ErrorKind::Lex, message, span)
    }

    pub(crate) fn parse(message: impl Into<String>, span: Range<usize>) -> Self {
        Self::new(ErrorKind::Parse, message, span)
    }

    pub(crate) fn eval(message: impl Into<String>, span: Range<usize>) -> Self {
        Self::new(ErrorKind::Evaluation, message, span)
    }

    #[must_use]
    pub(crate) fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }

    /// The same error with its span moved by `offset` bytes: for an expression embedded at
    /// `offset` in a larger string (a template, an `if:` with `${{ }}`).
    #[must_use]
    pub fn shifted(mut self, offset: usize) -> Self {
        self.span = self.span.start + offset..self.span.end + offset;
        self
    }
}
