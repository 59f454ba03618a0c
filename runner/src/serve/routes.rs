//! The routes: each page at its path, its JSON at `/api/<path>`, the live stream and the one
//! request that changes anything (cancel).

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;

use super::live::Live;
use super::respond::{Page, Templates, Want, json, problem};
use super::run_view::RunView;
use super::runs::{RunFilter, RunRow, RunSources};
use super::{Settings, access};
use crate::run_logs::files::run_in_progress;
use crate::trigger::CancelOutcome;

/// The server's shared parts; nothing in here is state of its own (restartable at any time).
pub struct App {
    pub settings: Settings,
    pub templates: Templates,
    pub live: Live,
}

impl App {
    pub fn new(settings: Settings, stopping: CancellationToken) -> anyhow::Result<Self> {
        Ok(Self {
            live: Live::new(settings.masker.clone(), stopping),
            templates: Templates::new()?,
            settings,
        })
    }

    pub fn sources(&self) -> RunSources<'_> {
        RunSources {
            home: &self.settings.home,
            project: &self.settings.project,
        }
    }

    pub fn page(
        &self,
        template: &'static str,
        tab: &'static str,
        title: String,
        data: serde_json::Value,
    ) -> Page<'_> {
        Page {
            template,
            title,
            tab,
            data,
            masker: &self.settings.masker,
            templates: &self.templates,
            writable: self.settings.token.is_some(),
        }
    }

    pub fn problem(
        &self,
        status: StatusCode,
        message: &str,
        hint: Option<&str>,
        want: Want,
    ) -> Response {
        problem(
            status,
            message,
            hint,
            want,
            &self.templates,
            &self.settings.masker,
        )
    }
}

type Shared = State<Arc<App>>;

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/runs") }))
        .route("/runs", get(|s, h, q| runs(s, h, q, false)))
        .route("/api/runs", get(|s, h, q| runs(s, h, q, true)))
        .route("/runs/{id}", get(|s, h, p| run(s, h, p, false)))
        .route("/api/runs/{id}", get(|s, h, p| run(s, h, p, true)))
        .route("/runs/{id}/events", get(events))
        .route("/runs/{id}/graph.svg", get(graph))
        .route("/runs/{id}/report", get(super::compare::report))
        .route("/runs/{id}/cancel", post(cancel))
        .route("/api/runs/{id}/cancel", post(cancel))
        .route("/gpus", get(|s, h| super::gpus::page(s, h, false)))
        .route("/api/gpus", get(|s, h| super::gpus::page(s, h, true)))
        .route(
            "/history",
            get(|s, h, q| super::history::page(s, h, q, false)),
        )
        .route(
            "/api/history",
            get(|s, h, q| super::history::page(s, h, q, true)),
        )
        .route(
            "/compare",
            get(|s, h, q| super::compare::page(s, h, q, false)),
        )
        .route(
            "/api/compare",
            get(|s, h, q| super::compare::page(s, h, q, true)),
        )
        .route("/static/app.js", get(script))
        .route("/static/style.css", get(style))
        .with_state(app)
}

async fn runs(
    State(app): Shared,
    headers: HeaderMap,
    Query(filter): Query<RunFilter>,
    api: bool,
) -> Response {
    let want = Want::of(api, &headers);
    let app2 = app.clone();
    let filter2 = filter.clone();
    let rows = tokio::task::spawn_blocking(move || app2.sources().list(&filter2))
        .await
        .unwrap_or_default();
    let data = serde_json::json!({ "filter": filter, "runs": rows });
    app.page("runs.html", "runs", "Runs".into(), data)
        .respond(want)
}

/// The run `id`, or the page that says there is none.
fn find(app: &App, id: &str, want: Want) -> Result<RunRow, Response> {
    app.sources().find(id).ok_or_else(|| {
        app.problem(
            StatusCode::NOT_FOUND,
            &format!("no run `{id}`"),
            Some("the runs page lists the runs this server sees: triggered ones, and those started by hand in its project folder"),
            want,
        )
    })
}

async fn run(
    State(app): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    api: bool,
) -> Response {
    let want = Want::of(api, &headers);
    let a = app.clone();
    let read = tokio::task::spawn_blocking(move || {
        let row = find(&a, &id, want)?;
        let over = row.state != "running" && !run_in_progress(&row.log_dir);
        // A queued run has no events yet.
        let view = RunView::read(&row.log_dir, over).unwrap_or_default();
        Ok::<_, Response>((row, view))
    })
    .await;
    let (row, view) = match read {
        Ok(Ok(found)) => found,
        Ok(Err(response)) => return response,
        Err(e) => {
            return app.problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                &e.to_string(),
                None,
                want,
            );
        }
    };
    let graph = super::graph::svg(&view.jobs);
    let live = row.state == "running" || row.state == "queued";
    let data = serde_json::json!({
        "run": row,
        "view": view,
        "live": live,
        "graph_svg": graph,
    });
    let title = format!("Run {} · {}", row.id, row.name);
    let mut data = data;
    if want == Want::Json {
        // The SVG is a page's; tools get the jobs themselves.
        data.as_object_mut().map(|o| o.remove("graph_svg"));
    }
    app.page("run.html", "runs", title, data).respond(want)
}

#[derive(serde::Deserialize)]
struct After {
    #[serde(default)]
    after: u64,
}

/// The run's events from number `after` on, as Server-Sent Events, until it ends.
async fn events(
    State(app): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(after): Query<After>,
) -> Response {
    let want = Want::of(false, &headers);
    let a = app.clone();
    let row = match tokio::task::spawn_blocking(move || find(&a, &id, want)).await {
        Ok(Ok(row)) => row,
        Ok(Err(response)) => return response,
        Err(e) => {
            return app.problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                &e.to_string(),
                None,
                want,
            );
        }
    };
    let stream = app.live.follow(&row.log_dir, after.after);
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn graph(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let want = Want::of(false, &headers);
    let a = app.clone();
    let found = tokio::task::spawn_blocking(move || {
        let row = find(&a, &id, want)?;
        Ok::<_, Response>(
            RunView::read(&row.log_dir, !run_in_progress(&row.log_dir)).unwrap_or_default(),
        )
    })
    .await;
    match found {
        Ok(Ok(view)) => (
            [(header::CONTENT_TYPE, "image/svg+xml")],
            app.settings.masker.mask(&super::graph::svg(&view.jobs)),
        )
            .into_response(),
        Ok(Err(response)) => response,
        Err(e) => app.problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            &e.to_string(),
            None,
            want,
        ),
    }
}

#[derive(serde::Deserialize, Default)]
struct CancelForm {
    token: Option<String>,
}

/// Cancels a triggered run, as `gpuflow cancel` does: 401 without the server's token.
async fn cancel(
    State(app): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    form: Result<Form<CancelForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let want = if headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"))
    {
        Want::Html
    } else {
        Want::Json
    };
    // A JSON client sends no form: its token is in the header.
    let form = form.map(|Form(f)| f).unwrap_or_default();
    let Some(token) = &app.settings.token else {
        return app.problem(
            StatusCode::UNAUTHORIZED,
            "this server is read-only: nothing can be cancelled through it",
            Some("start it with `--token-file FILE` to allow cancelling with that token, or use `gpuflow cancel RUN` on the node"),
            want,
        );
    };
    if !access::presented(&headers, form.token.as_deref()).is_some_and(|t| token.matches(t)) {
        return app.problem(
            StatusCode::UNAUTHORIZED,
            "cancelling needs the server's token",
            Some("send it as `Authorization: Bearer TOKEN` (or the page's token field)"),
            want,
        );
    }
    let a = app.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let row = find(&a, &id, want)?;
        let mut queue = a.sources().queue().filter(|_| row.source == "triggered").ok_or_else(|| {
            a.problem(
                StatusCode::CONFLICT,
                &format!("run `{}` was started by hand, not triggered", row.id),
                Some("stop it where it runs (Ctrl-C in its terminal); only triggered runs are cancelled from here"),
                want,
            )
        })?;
        let outcome = queue.cancel(&row.id).map_err(|e| {
            a.problem(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None, want)
        })?;
        Ok::<_, Response>((row.id, outcome))
    })
    .await;
    let (id, outcome) = match outcome {
        Ok(Ok(found)) => found,
        Ok(Err(response)) => return response,
        Err(e) => {
            return app.problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                &e.to_string(),
                None,
                want,
            );
        }
    };
    let said = match outcome {
        Some(CancelOutcome::Dequeued) => "cancelled before it started".to_string(),
        Some(CancelOutcome::Requested) => "its worker is stopping it".to_string(),
        Some(CancelOutcome::AlreadyFinished(state)) => {
            format!("it had already ended: {}", state.as_str())
        }
        None => "not in the queue".to_string(),
    };
    if want == Want::Html {
        return Redirect::to(&format!("/runs/{id}")).into_response();
    }
    axum::Json(json(&serde_json::json!({ "run": id, "outcome": said }))).into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("templates/app.js"),
    )
        .into_response()
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("templates/style.css"),
    )
        .into_response()
}

/// The results store's path, when there is one (a server started before any result was
/// recorded shows no history yet).
pub fn store_path(app: &App) -> Option<PathBuf> {
    app.settings
        .store
        .is_file()
        .then(|| app.settings.store.clone())
}
