//! Rendering a [`ReportData`] through a Tera template: the built-in Markdown and HTML ones
//! (embedded in the binary) or a user's from the repository. Template mistakes come back as a
//! [`TemplateError`] that points at the line and column in the template.
//!
//! Tera's core has no `json_encode` or `date`; the few filters templates need are registered
//! here (docs/reports.md lists them). This module knows nothing of the store or git.

use std::sync::Arc;

use tera::{Context, ErrorKind, Kwargs, State, Tera, Value};

use super::ReportData;
use crate::diag::{Diagnostic, SourceFile, Span};

const MARKDOWN: &str = include_str!("templates/report.md.tera");
const HTML: &str = include_str!("templates/report.html.tera");
const CAMPAIGN_MARKDOWN: &str = include_str!("templates/campaign.md.tera");
const CAMPAIGN_HTML: &str = include_str!("templates/campaign.html.tera");

/// The report's output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Html,
}

impl Format {
    /// `markdown`/`md` or `html`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "markdown" | "md" => Some(Self::Markdown),
            "html" => Some(Self::Html),
            _ => None,
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Self::Markdown => "md",
            Self::Html => "html",
        }
    }

    /// The built-in template's name and text.
    pub fn builtin(self) -> (&'static str, &'static str) {
        match self {
            Self::Markdown => ("builtin/report.md", MARKDOWN),
            Self::Html => ("builtin/report.html", HTML),
        }
    }

    /// The built-in campaign report template's name and text.
    pub fn campaign_builtin(self) -> (&'static str, &'static str) {
        match self {
            Self::Markdown => ("builtin/campaign.md", CAMPAIGN_MARKDOWN),
            Self::Html => ("builtin/campaign.html", CAMPAIGN_HTML),
        }
    }
}

/// A template's name (its path in the repository) and text.
#[derive(Clone, Debug)]
pub struct Template {
    pub name: String,
    pub source: String,
}

/// A mistake in a template, located in it.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateError {
    pub message: String,
    pub file: Arc<SourceFile>,
    /// `None` when Tera could not say where (a missing parent template).
    pub span: Option<Span>,
}

impl TemplateError {
    /// `template.md:3:7`, or the name alone when the place is unknown.
    pub fn location(&self) -> String {
        match self.span {
            Some(span) => self.file.location(span),
            None => self.file.name.clone(),
        }
    }

    pub fn to_diagnostic(&self) -> Diagnostic {
        let d = match self.span {
            Some(span) => Diagnostic::error(&self.file, span, self.message.clone()),
            None => Diagnostic::unlocated(format!("{}: {}", self.file.name, self.message)),
        };
        // Tera passes a missing field on as `undefined` and only fails where it is used.
        let d = if self.message.contains("undefined") {
            d.note("`undefined` is a variable or field that does not exist: check its spelling")
        } else {
            d
        };
        d.hint("docs/reports.md lists the variables and filters a report template can use")
    }
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.location(), self.message)
    }
}

impl std::error::Error for TemplateError {}

/// Renders `data` as `format`, through `template` or the built-in one.
pub fn render(
    data: &ReportData,
    format: Format,
    template: Option<&Template>,
) -> Result<String, TemplateError> {
    render_context(data, format, template, format.builtin())
}

/// Renders any template context (a run's report, a campaign's) as `format`, through
/// `template` or `builtin` (name and text).
pub fn render_context<T: serde::Serialize>(
    data: &T,
    format: Format,
    template: Option<&Template>,
    builtin: (&str, &str),
) -> Result<String, TemplateError> {
    let (name, source) = match template {
        Some(t) => (t.name.as_str(), t.source.as_str()),
        None => builtin,
    };
    let file = SourceFile::new(name, source);
    let located = |e: tera::Error| locate(e, &file);
    let mut tera = Tera::new();
    // Escape by format, not by file name: a user's `report.tera` can be HTML.
    match format {
        Format::Html => tera.autoescape_on([name.to_string()]),
        Format::Markdown => tera.autoescape_on(Vec::<String>::new()),
    }
    register_filters(&mut tera);
    tera.add_raw_template(name, source).map_err(located)?;
    let context = Context::from_serialize(data).map_err(located)?;
    tera.render(name, &context).map_err(located)
}

fn locate(e: tera::Error, file: &Arc<SourceFile>) -> TemplateError {
    match e.kind() {
        ErrorKind::SyntaxError(r) | ErrorKind::RenderingError(r) => TemplateError {
            message: lower_first(r.message()),
            file: file.clone(),
            span: Some(Span::from(r.span().range.clone())),
        },
        _ => TemplateError {
            message: lower_first(&e.to_string()),
            file: file.clone(),
            span: None,
        },
    }
}

/// House style: messages start in lower case (Tera's start in upper case).
fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if chars.clone().next().is_some_and(char::is_lowercase) => {
            c.to_lowercase().chain(chars).collect()
        }
        _ => s.to_string(),
    }
}

fn register_filters(tera: &mut Tera) {
    // Any value as JSON, for templates that emit data (`{{ cells | json_encode | safe }}`).
    tera.register_filter("json_encode", |v: Value, kw: Kwargs, _: &State| {
        let pretty = kw.get::<bool>("pretty")?.unwrap_or(false);
        let text = if pretty {
            serde_json::to_string_pretty(&v)
        } else {
            serde_json::to_string(&v)
        };
        text.map_err(|e| tera::Error::message(format!("json_encode: {e}")))
    });
    // Unix milliseconds as an RFC 3339 UTC time.
    tera.register_filter("date", |ms: i64, _: Kwargs, _: &State| {
        super::report_data::rfc3339(ms)
    });
    // A Markdown table cell: `|` and line breaks would end the cell or the row.
    tera.register_filter("md_cell", |v: Value, _: Kwargs, _: &State| {
        let s = match v.as_str() {
            Some(s) => s.to_string(),
            None if v.is_none() => String::new(),
            None => format!("{v}"),
        };
        s.replace('|', "\\|").replace(['\n', '\r'], " ")
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> ReportData {
        ReportData::empty_for_tests("run-1")
    }

    #[test]
    fn a_syntax_error_points_at_its_line_and_column() {
        let t = Template {
            name: "reports/x.md.tera".into(),
            source: "# {{ title }}\n\n{% for c in cells %}\n{{ c.label }\n{% endfor %}\n".into(),
        };
        let err = render(&data(), Format::Markdown, Some(&t)).unwrap_err();
        assert!(err.location().starts_with("reports/x.md.tera:4:"), "{err}");
    }

    #[test]
    fn an_unknown_variable_points_at_its_use() {
        let t = Template {
            name: "x.md".into(),
            source: "line one\n  {{ no_such_thing }}\n".into(),
        };
        let err = render(&data(), Format::Markdown, Some(&t)).unwrap_err();
        assert_eq!(err.location(), "x.md:2:6", "{err}");
        assert!(err.message.contains("no_such_thing"), "{err}");
    }

    #[test]
    fn filters_work() {
        let t = Template {
            name: "f.md".into(),
            source: "{{ 0 | date }} {{ \"a|b\" | md_cell }} {{ [1, 2] | json_encode }}".into(),
        };
        let out = render(&data(), Format::Markdown, Some(&t)).unwrap();
        assert_eq!(out, "1970-01-01T00:00:00Z a\\|b [1,2]");
    }

    #[test]
    fn html_escapes_and_markdown_does_not() {
        let mut d = data();
        d.title = "<b>".into();
        let t = Template {
            name: "t".into(),
            source: "{{ title }}".into(),
        };
        assert_eq!(render(&d, Format::Html, Some(&t)).unwrap(), "&lt;b&gt;");
        assert_eq!(render(&d, Format::Markdown, Some(&t)).unwrap(), "<b>");
    }

    #[test]
    fn the_builtin_templates_render_an_empty_report() {
        for f in [Format::Markdown, Format::Html] {
            let out = render(&data(), f, None).unwrap();
            assert!(out.contains("run-1"), "{out}");
        }
    }
}
