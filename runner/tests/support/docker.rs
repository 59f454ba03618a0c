//! The Docker engine for tests: connected, or a loud skip. Docker is required: with the engine
//! unreachable a test fails (always under `CI`; locally `GPUFLOW_SKIP_DOCKER=1` skips it,
//! loudly). The same policy covers the other tools a test needs (sshd: [`skip_or_fail`]).
//!
//! [`with_docker`] gives a test a backend and a run id of its own, and removes everything of
//! that run after the test body, also when the body panics; then it asserts that no container
//! of the run survived.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::FutureExt;
use gpuflow::backend::{ContainerSpec, DockerBackend, Owner, RunLabels};

use super::images::{self, BASE};

/// The engine, or `None` only when the developer asked to skip (never under `CI`).
pub(crate) async fn connect_or_skip() -> Option<DockerBackend> {
    match DockerBackend::connect_local().await {
        Ok(backend) => Some(backend),
        Err(e) => {
            let why = format!("{e}\n  help: {}", e.hint().unwrap_or_default());
            skip_or_fail("a Docker engine", &why);
            None
        }
    }
}

/// `what` a test needs is missing (because `why`): fails the test, or returns after a loud
/// notice when skipping was asked for outside CI (the caller then returns).
pub(crate) fn skip_or_fail(what: &str, why: &str) {
    let ci = std::env::var_os("CI").is_some();
    let skip = std::env::var("GPUFLOW_SKIP_DOCKER").as_deref() == Ok("1");
    match when_missing(what, why, ci, skip) {
        Unreachable::Skip(notice) => eprintln!("{notice}"),
        Unreachable::Fail(message) => panic!("{message}"),
    }
}

/// What a test does when something it needs (the engine, sshd) is missing.
#[derive(Debug)]
pub(crate) enum Unreachable {
    Fail(String),
    /// Skip, printing this.
    Skip(String),
}

/// CI must run these tests; a developer may skip them, knowingly and loudly.
pub(crate) fn when_missing(what: &str, why: &str, ci: bool, skip_asked: bool) -> Unreachable {
    if ci {
        Unreachable::Fail(format!("{what} is required in CI and is missing: {why}"))
    } else if skip_asked {
        Unreachable::Skip(format!(
            "\n!!!!! SKIPPED: a test that needs {what} did not run (GPUFLOW_SKIP_DOCKER=1): {why} !!!!!\n"
        ))
    } else {
        Unreachable::Fail(format!(
            "this test needs {what}: {why}\n(set GPUFLOW_SKIP_DOCKER=1 to skip such tests \
             knowingly)"
        ))
    }
}

/// A connected backend and the run id this test labels its containers with.
#[derive(Clone)]
pub(crate) struct DockerTest {
    pub(crate) backend: DockerBackend,
    pub(crate) run: RunLabels,
}

impl DockerTest {
    /// A container of the base image running `command`, started.
    pub(crate) async fn start(&self, command: &[&str]) -> gpuflow::backend::Container {
        let spec = base_spec(command);
        self.backend
            .start_container(&self.run, &spec)
            .await
            .unwrap()
    }
}

/// Runs `body` against the engine, then removes the run's containers (awaited, whatever the
/// body did) and checks none is left.
pub(crate) async fn with_docker<F, Fut>(test: &str, body: F)
where
    F: FnOnce(DockerTest) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(backend) = images::docker_with(&[BASE]).await else {
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let run = RunLabels::new(format!("test-{test}-{}-{nanos}", std::process::id()), test);
    let t = DockerTest {
        backend: backend.clone(),
        run: run.clone(),
    };

    let outcome = AssertUnwindSafe(body(t)).catch_unwind().await;

    backend.remove_run(&run.run_id).await.unwrap();
    let left = backend.run_containers(&run.run_id).await.unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    assert_eq!(
        left,
        Vec::<String>::new(),
        "containers of `{}` survived",
        run.run_id
    );
}

/// A container of the base image running `command`.
pub(crate) fn base_spec(command: &[&str]) -> ContainerSpec {
    let mut spec = ContainerSpec::new(BASE);
    spec.command = Some(command.iter().map(ToString::to_string).collect());
    spec
}

/// A runner that is gone: its lock file is in this host's runner folder and nobody holds it
/// (as after SIGKILL). Its pid is above Linux's maximum (2^22), so never a real process.
pub(crate) fn dead_owner() -> Owner {
    let dir = gpuflow::backend::runner_lock::runner_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let token = format!(
        "{:032x}",
        u128::from(std::process::id()) << 64
            | u128::from(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos(),
            )
    );
    std::fs::write(dir.join(format!("{token}.lock")), "").unwrap();
    Owner {
        pid: 4_194_305,
        token: Some(token),
        ..Owner::current()
    }
}

/// A second client, independent of the backend, to check what the engine really holds.
pub(crate) async fn raw_docker() -> bollard::Docker {
    bollard::Docker::connect_with_defaults()
        .unwrap()
        .negotiate_version()
        .await
        .unwrap()
}
