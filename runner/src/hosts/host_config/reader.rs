//! The walker of a host file's spanned TOML: where its diagnostics are collected, and the
//! checks that span hosts (a label that is another host's name).

use std::sync::Arc;

use toml::Spanned;

use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span, did_you_mean, join_quoted};

/// Walks the parsed document, collecting diagnostics.
pub(super) struct Reader {
    pub(super) file: Arc<SourceFile>,
    pub(super) diagnostics: Diagnostics,
    /// Every `[hosts.NAME]` written with its labels, also those with errors, for the
    /// label/name check.
    pub(super) declared: Vec<(String, Span, Vec<String>)>,
}

pub(super) type Key<'i> = Spanned<std::borrow::Cow<'i, str>>;

impl Reader {
    pub(super) fn new(file: &Arc<SourceFile>) -> Self {
        Self {
            file: file.clone(),
            diagnostics: Diagnostics::new(),
            declared: Vec::new(),
        }
    }

    pub(super) fn unknown_key(&mut self, key: &Key<'_>, known: &[&str], what: &str) {
        let name = key.get_ref().as_ref();
        let d = Diagnostic::error(
            &self.file,
            Span::from(key.span()),
            format!("unknown key `{name}`"),
        )
        .label(format!("not {what}"))
        .maybe_hint(did_you_mean(name, known))
        .note(format!("expected {}", join_quoted(known, "or")));
        self.diagnostics.push(d);
    }

    pub(super) fn push(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    /// A label equal to another host's name would make `runs-on: NAME` ambiguous. Checked over
    /// every host written, also those with other errors, so all problems show at once.
    pub(super) fn labels_that_are_names(&mut self) {
        let declared = std::mem::take(&mut self.declared);
        for (name, span, labels) in &declared {
            for label in labels {
                let Some((_, other_span, _)) = declared
                    .iter()
                    .find(|(other, _, _)| other == label && other != name)
                else {
                    continue;
                };
                let d = Diagnostic::error(
                    &self.file,
                    *span,
                    format!(
                        "host `{name}` has the label `{label}`, which is also the name of another host"
                    ),
                )
                .label("this host")
                .hint(format!(
                    "rename the label or the host: `runs-on: {label}` must mean one thing"
                ))
                .related(&self.file, *other_span, "the host of that name");
                self.push(d);
            }
        }
    }
}
