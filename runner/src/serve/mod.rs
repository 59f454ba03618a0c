//! `gpuflow serve`: the node's web page (docs/serve.md). One process, server-rendered HTML
//! (Tera, like the reports) and the same data as JSON, read from the stores the CLI uses —
//! the run queue, the runs' log folders, the results store, the host file's GPUs — so there is
//! no second source of truth and the server keeps no state of its own: it can be restarted at
//! any time.
//!
//! - `runs.rs`: which runs there are (triggered ones from the queue, ones started by hand from
//!   `.gpuflow/runs/`), found by id without ever building a path from one.
//! - `run_view.rs`, `graph.rs`: a run read back from its events; its job graph as SVG.
//! - `live.rs`: a running run's events as Server-Sent Events, one reader per run shared by
//!   every follower, in bounded memory.
//! - `gpus.rs`, `history.rs`, `compare.rs`: the other pages' data.
//! - `respond.rs`: HTML or JSON for every page, masked on the way out; `access.rs`: who may
//!   change anything (a token, compared in constant time).
//! - `routes.rs`: the paths and the run pages' handlers; `app.rs`: what handlers share;
//!   `settings.rs`: what the server is started with.

pub mod access;
mod app;
mod compare;
mod gpus;
mod graph;
mod history;
mod live;
mod respond;
mod routes;
mod run_view;
mod runs;
mod settings;

use std::future::Future;
use std::sync::Arc;

pub use access::Token;
pub use settings::Settings;

/// Serves on `listener` until `shutdown` completes; open event streams end then too.
pub async fn serve(
    settings: Settings,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Event streams never end on their own: they watch this too, or a graceful shutdown would
    // wait for every open browser tab.
    let stopping = tokio_util::sync::CancellationToken::new();
    let app = routes::router(Arc::new(app::App::new(settings, stopping.clone())?));
    let stop = stopping.clone();
    tokio::spawn(async move {
        shutdown.await;
        stop.cancel();
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(stopping.cancelled_owned())
        .await?;
    Ok(())
}
