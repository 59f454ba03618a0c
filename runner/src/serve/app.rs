//! What every page's handler shares: the server's settings, templates and live readers
//! ([`App`]), running blocking reads off the request threads, and what a failed request says
//! ([`Problem`]).

use std::path::PathBuf;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use tokio_util::sync::CancellationToken;

use super::live::Live;
use super::respond::{Page, Templates, Want, problem};
use super::runs::RunSources;
use super::settings::Settings;
use crate::store::StoreError;

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

    /// `problem` as its page or JSON.
    pub fn answer(&self, problem: Problem, want: Want) -> Response {
        self.problem(
            problem.status,
            &problem.message,
            problem.hint.as_deref(),
            want,
        )
    }

    /// A page drawn from the results store: `gather` reads its data off the request threads,
    /// `template` (in navigation tab `tab`) draws it under `title(data)`; no store yet, or a
    /// problem reading it, is a page of its own.
    pub async fn from_store(
        self: &Arc<Self>,
        want: Want,
        (template, tab): (&'static str, &'static str),
        gather: impl FnOnce(&std::path::Path) -> Result<serde_json::Value, Problem> + Send + 'static,
        title: impl FnOnce(&serde_json::Value) -> String,
    ) -> Response {
        let path = match store_path(self) {
            Ok(path) => path,
            Err(problem) => return self.answer(problem, want),
        };
        match self.blocking(move |_| gather(&path)).await {
            Ok(data) => self.page(template, tab, title(&data), data).respond(want),
            Err(problem) => self.answer(problem, want),
        }
    }

    /// Runs `work` (it reads files or SQLite) off the threads that serve requests.
    pub async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&App) -> Result<T, Problem> + Send + 'static,
    ) -> Result<T, Problem> {
        let app = self.clone();
        tokio::task::spawn_blocking(move || work(&app))
            .await
            .unwrap_or_else(|e| Err(Problem::internal(e)))
    }
}

/// What went wrong with a request, before it is drawn as a page or JSON.
pub struct Problem {
    pub status: StatusCode,
    pub message: String,
    pub hint: Option<String>,
}

impl Problem {
    pub fn new(status: StatusCode, message: impl Into<String>, hint: Option<&str>) -> Self {
        Self {
            status,
            message: message.into(),
            hint: hint.map(str::to_owned),
        }
    }

    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None)
    }
}

/// The results store's path; a server started before any result was recorded says so (the
/// history, compare and report pages have nothing to show yet).
pub fn store_path(app: &App) -> Result<PathBuf, Problem> {
    let store = &app.settings.store;
    if store.is_file() {
        return Ok(store.clone());
    }
    Err(Problem::new(
        StatusCode::NOT_FOUND,
        format!("no results store at `{}` yet", store.display()),
        Some(
            "results are recorded by runs with a `benchmark` step; `gpuflow serve --store PATH` reads another file",
        ),
    ))
}

/// A store that cannot be read, with its hint.
pub fn store_problem(e: StoreError) -> Problem {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        e.to_string(),
        e.hint().as_deref(),
    )
}
