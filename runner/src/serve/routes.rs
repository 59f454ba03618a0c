//! The routes: each page at its path, its JSON at `/api/<path>`, the live stream and the one
//! request that changes anything (cancel).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use super::access;
use super::app::{App, Problem};
use super::respond::{Want, json};
use super::run_view::RunView;
use super::runs::{RunFilter, RunRow};
use crate::run_logs::files::run_in_progress;
use crate::trigger::CancelOutcome;

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
    let asked = filter.clone();
    let rows = app
        .blocking(move |a| Ok(a.sources().list(&asked)))
        .await
        .unwrap_or_default();
    let data = serde_json::json!({ "filter": filter, "runs": rows });
    app.page("runs.html", "runs", "Runs".into(), data)
        .respond(want)
}

/// The run `id`, or why there is none.
fn find(app: &App, id: &str) -> Result<RunRow, Problem> {
    app.sources().find(id).ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            format!("no run `{id}`"),
            Some("the runs page lists the runs this server sees: triggered ones, and those started by hand in its project folder"),
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
    let read = app
        .blocking(move |a| {
            let row = find(a, &id)?;
            let over = row.state != "running" && !run_in_progress(&row.log_dir);
            // A queued run has no events yet.
            let view = RunView::read(&row.log_dir, over).unwrap_or_default();
            Ok((row, view))
        })
        .await;
    let (row, view) = match read {
        Ok(found) => found,
        Err(p) => return app.answer(p, want),
    };
    let live = row.state == "running" || row.state == "queued";
    let mut data = serde_json::json!({ "run": row, "view": view, "live": live });
    if want == Want::Html {
        // The SVG is the page's; tools get the jobs themselves.
        data["graph_svg"] = super::graph::svg(&view.jobs).into();
    }
    let title = format!("Run {} · {}", row.id, row.name);
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
    let row = match app.blocking(move |a| find(a, &id)).await {
        Ok(row) => row,
        Err(p) => return app.answer(p, want),
    };
    let stream = app.live.follow(&row.log_dir, after.after);
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn graph(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let want = Want::of(false, &headers);
    let found = app
        .blocking(move |a| {
            let row = find(a, &id)?;
            let over = !run_in_progress(&row.log_dir);
            Ok(RunView::read(&row.log_dir, over).unwrap_or_default())
        })
        .await;
    match found {
        Ok(view) => (
            [(header::CONTENT_TYPE, "image/svg+xml")],
            app.settings.masker.mask(&super::graph::svg(&view.jobs)),
        )
            .into_response(),
        Err(p) => app.answer(p, want),
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
    let outcome = app
        .blocking(move |a| {
            let row = find(a, &id)?;
            let queue = a.sources().queue().filter(|_| row.source == "triggered");
            let mut queue = queue.ok_or_else(|| {
                Problem::new(
                    StatusCode::CONFLICT,
                    format!("run `{}` was started by hand, not triggered", row.id),
                    Some("stop it where it runs (Ctrl-C in its terminal); only triggered runs are cancelled from here"),
                )
            })?;
            let outcome = queue.cancel(&row.id).map_err(Problem::internal)?;
            Ok((row.id, outcome))
        })
        .await;
    let (id, outcome) = match outcome {
        Ok(found) => found,
        Err(p) => return app.answer(p, want),
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
