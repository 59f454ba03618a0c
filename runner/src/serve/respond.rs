//! Every page as HTML or JSON: JSON under `/api/…` or when the request asks for it
//! (`Accept: application/json`), HTML through the page's template otherwise. Both are made
//! from one serialized value, masked before either is made, so a secret the server was given
//! appears in neither.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;
use tera::{Context, Kwargs, State, Tera, Value};

use crate::events::Masker;

/// The pages' templates, compiled once.
pub struct Templates(Tera);

const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("templates/base.html")),
    ("runs.html", include_str!("templates/runs.html")),
    ("run.html", include_str!("templates/run.html")),
    ("gpus.html", include_str!("templates/gpus.html")),
    ("history.html", include_str!("templates/history.html")),
    ("compare.html", include_str!("templates/compare.html")),
    ("problem.html", include_str!("templates/problem.html")),
];

impl Templates {
    pub fn new() -> anyhow::Result<Self> {
        let mut tera = Tera::new();
        tera.autoescape_on(
            TEMPLATES
                .iter()
                .map(|(name, _)| (*name).to_string())
                .collect::<Vec<String>>(),
        );
        register_filters(&mut tera);
        for (name, source) in TEMPLATES {
            tera.add_raw_template(name, source)
                .map_err(|e| anyhow::anyhow!("serve template {name}: {e}"))?;
        }
        Ok(Self(tera))
    }
}

/// How the answer is wanted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Html,
    Json,
}

impl Want {
    /// JSON for `/api/…` and for a request that prefers it; HTML otherwise.
    pub fn of(api: bool, headers: &HeaderMap) -> Self {
        let accepts_json = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/json"));
        if api || accepts_json {
            Self::Json
        } else {
            Self::Html
        }
    }
}

/// What a page shows, before it is rendered one way or the other.
pub struct Page<'a> {
    pub template: &'static str,
    pub title: String,
    /// The page's navigation tab (`runs`, `gpus`, `history`).
    pub tab: &'static str,
    pub data: serde_json::Value,
    pub masker: &'a Masker,
    pub templates: &'a Templates,
    /// Whether the server takes a token (cancel buttons are shown).
    pub writable: bool,
}

impl Page<'_> {
    pub fn respond(self, want: Want) -> Response {
        let mut data = self.data;
        self.masker.mask_json(&mut data);
        if want == Want::Json {
            return axum::Json(data).into_response();
        }
        let mut context = Context::new();
        context.insert("page", &data);
        context.insert("title", &self.masker.mask(&self.title));
        context.insert("tab", self.tab);
        context.insert("writable", &self.writable);
        match self.templates.0.render(self.template, &context) {
            // Masked again whole: the template's own text holds no secret, but nothing is
            // served unmasked.
            Ok(html) => Html(self.masker.mask(&html)).into_response(),
            Err(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("gpuflow serve: the page could not be drawn: {e}"),
            )
                .into_response(),
        }
    }
}

/// A problem with the request (no such run) or the data (no store yet), as a page or JSON
/// `{"error": …, "hint": …}` with its status.
pub fn problem(
    status: StatusCode,
    message: &str,
    hint: Option<&str>,
    want: Want,
    templates: &Templates,
    masker: &Masker,
) -> Response {
    let data = serde_json::json!({ "error": message, "hint": hint, "status": status.as_u16() });
    let page = Page {
        template: "problem.html",
        title: message.to_string(),
        tab: "",
        data,
        masker,
        templates,
        writable: false,
    };
    let mut response = page.respond(want);
    *response.status_mut() = status;
    response
}

/// Data as JSON for a page; a value that cannot be serialized is a bug, shown as `null`.
pub fn json<T: Serialize>(data: &T) -> serde_json::Value {
    serde_json::to_value(data).unwrap_or(serde_json::Value::Null)
}

fn register_filters(tera: &mut Tera) {
    // Unix seconds as `2026-12-02 09:14:03 UTC`.
    tera.register_filter("time", |v: Value, _: Kwargs, _: &State| {
        let Some(secs) = v.as_f64() else {
            return String::from("-");
        };
        let text = crate::report::rfc3339((secs * 1000.0) as i64);
        text.replacen('T', " ", 1).replace('Z', " UTC")
    });
    // Seconds as `1m 4s` (whole seconds; under 10 s with a tenth).
    tera.register_filter("duration", |v: Value, _: Kwargs, _: &State| {
        let Some(secs) = v.as_f64() else {
            return String::from("-");
        };
        if secs < 10.0 {
            return format!("{secs:.1}s");
        }
        humantime::format_duration(std::time::Duration::from_secs(secs as u64)).to_string()
    });
    // A value, or `-` where there is none (0 is a value: NUMA node 0, 0% busy).
    tera.register_filter("dash", |v: Value, _: Kwargs, _: &State| {
        if v.is_none() {
            String::from("-")
        } else if let Some(s) = v.as_str() {
            s.to_string()
        } else {
            format!("{v}")
        }
    });
    // A commit as people quote it: its first 10 hex digits.
    tera.register_filter("short", |v: Value, _: Kwargs, _: &State| {
        v.as_str()
            .map(|s| s.chars().take(10).collect::<String>())
            .unwrap_or_default()
    });
    // A number rounded for reading, as the CLI and reports show numbers (`1234.5678` → `1235`).
    tera.register_filter("num", |v: Value, _: Kwargs, _: &State| match v.as_f64() {
        Some(x) => crate::compare::format_value(x, ""),
        None => String::from("-"),
    });
}
