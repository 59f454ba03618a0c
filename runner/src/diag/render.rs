use annotate_snippets::renderer::DecorStyle;
use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

use super::{Diagnostic, Diagnostics, Severity, Span};

/// How diagnostics are drawn: colour only on a terminal, ASCII for snapshots and logs.
#[derive(Clone, Copy, Debug, Default)]
pub struct RenderOptions {
    pub color: bool,
    pub unicode: bool,
}

/// One diagnostic as the user sees it: the message, `--> file:line:col`, the source line with a
/// caret under the span, then `help:` and `note:` lines.
pub fn render(d: &Diagnostic, opts: RenderOptions) -> String {
    let renderer = if opts.color {
        Renderer::styled()
    } else {
        Renderer::plain()
    }
    .decor_style(if opts.unicode {
        DecorStyle::Unicode
    } else {
        DecorStyle::Ascii
    });

    let level = match d.severity {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
    };
    let mut group = Group::with_title(level.primary_title(d.message.as_str()));
    if let Some(file) = &d.file {
        let mut snippet = Snippet::source(file.text.as_str()).path(file.name.as_str());
        let primary = AnnotationKind::Primary.span(clamp(d.span, &file.text));
        snippet = snippet.annotation(match &d.label {
            Some(label) => primary.label(label.as_str()),
            None => primary,
        });
        for r in d.related.iter().filter(|r| r.file == *file) {
            snippet = snippet.annotation(
                AnnotationKind::Context
                    .span(clamp(r.span, &r.file.text))
                    .label(r.label.as_str()),
            );
        }
        group = group.element(snippet);
    }
    for r in d
        .related
        .iter()
        .filter(|r| Some(&r.file) != d.file.as_ref())
    {
        group = group.element(
            Snippet::source(r.file.text.as_str())
                .path(r.file.name.as_str())
                .annotation(
                    AnnotationKind::Context
                        .span(clamp(r.span, &r.file.text))
                        .label(r.label.as_str()),
                ),
        );
    }
    for note in &d.notes {
        group = group.element(Level::NOTE.message(note.as_str()));
    }
    for hint in &d.hints {
        group = group.element(Level::HELP.message(hint.as_str()));
    }
    let report: [Group<'_>; 1] = [group];
    renderer.render(&report)
}

/// All diagnostics, blank-line separated, then a summary line ("2 errors, 1 warning").
pub fn render_all(ds: &Diagnostics, opts: RenderOptions) -> String {
    let mut out = String::new();
    for d in ds {
        out.push_str(&render(d, opts));
        out.push_str("\n\n");
    }
    out
}

/// annotate-snippets needs a span inside the text and on char boundaries; a span at the very
/// end of a file (a missing key reported at EOF) is pulled back to the last character.
fn clamp(span: Span, text: &str) -> std::ops::Range<usize> {
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
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::SourceFile;

    #[test]
    fn renders_location_caret_and_hint() {
        let f = SourceFile::new("w.yml", "jobs:\n  a:\n    timeout-minute: 5\n");
        let d = Diagnostic::error(&f, Span::new(15, 29), "unknown key `timeout-minute`")
            .label("not a key of a job")
            .hint("did you mean `timeout-minutes`?");
        let out = render(&d, RenderOptions::default());
        assert!(out.contains("w.yml:3:5"), "{out}");
        assert!(out.contains("^^^^^^^^^^^^^^ not a key of a job"), "{out}");
        assert!(
            out.contains("help: did you mean `timeout-minutes`?"),
            "{out}"
        );
    }

    #[test]
    fn span_at_end_of_file_still_renders() {
        let f = SourceFile::new("w.yml", "jobs:");
        let d = Diagnostic::error(&f, Span::new(5, 5), "`jobs` is empty");
        let out = render(&d, RenderOptions::default());
        assert!(out.contains("w.yml:1:5"), "{out}");
    }
}
