use annotate_snippets::renderer::DecorStyle;
use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

use super::{Diagnostic, Diagnostics, Severity};

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
        let primary = AnnotationKind::Primary.span(file.shown(d.span).range());
        snippet = snippet.annotation(match &d.label {
            Some(label) => primary.label(label.as_str()),
            None => primary,
        });
        for r in d.related.iter().filter(|r| r.file == *file) {
            snippet = snippet.annotation(
                AnnotationKind::Context
                    .span(r.file.shown(r.span).range())
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
                        .span(r.file.shown(r.span).range())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::{SourceFile, Span};

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

    /// The `-->` line names the place `location()` (and so `validate --format json`) names,
    /// at the end of a file too: a YAML document cut short after its final newline used to be
    /// `1:3` rendered and `2:1` in JSON. (annotate-snippets numbers a span past the last
    /// character its own way, so the span it gets is the one `location` reads.)
    #[test]
    fn the_rendered_place_is_the_location_at_the_end_of_a_file() {
        for text in ["ab\n", "ab\n\n", "jobs:", "a: [\n", "a: é\n"] {
            let f = SourceFile::new("w.yml", text);
            let d = Diagnostic::error(&f, Span::new(text.len(), text.len()), "cut short");
            let out = render(&d, RenderOptions::default());
            assert!(
                out.contains(&format!("--> {}\n", d.location())),
                "{text:?}: {}\n{out}",
                d.location()
            );
        }
        let yaml = "jobs:\n  a:\n    steps: [\n";
        let file = SourceFile::new("w.yml", yaml);
        let (_, diags) = crate::workflow::load_workflow_in(&file, std::path::Path::new("."));
        let d = diags
            .iter()
            .find(|d| d.is_error())
            .expect("a document cut short");
        let out = render(d, RenderOptions::default());
        assert!(
            out.contains(&format!("--> {}\n", d.location())),
            "{}\n{out}",
            d.location()
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
