//! Workflows run through the engine's API (not the binary), and what they did ([`Ran`]).
//!
//! Every harness starts from [`prepare`]: a workspace with `w.yml`, loaded, checked as
//! `validate` does and planned. Then:
//! - [`on_host`] and friends: the host backend only (no Docker), events collected and stored
//!   logs written, as `gpuflow run` does;
//! - [`EngineRun`]: on the local Docker engine with the images a test names; after the run the
//!   engine's API must find no container of it, and whatever is left is removed anyway, so a
//!   failure does not leak containers into the next test.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpuflow::backend::{DockerBackend, ManagedKind};
use gpuflow::check::load_and_check;
use gpuflow::engine::dispatcher::RunError;
use gpuflow::engine::{
    CollectSink, Event, EventKind, JobResult, LogStore, RunOptions, RunReport, StepOutcome, Tee,
};
use gpuflow::plan::{Plan, build, from_workflow};
use gpuflow::workflow::{Loaded, Workflow};
use tokio_util::sync::CancellationToken;

use super::images;
use super::workspace::Workspace;

/// A finished run: its report, every event it emitted, and the workspace it ran in.
pub(crate) struct Ran {
    pub(crate) report: RunReport,
    pub(crate) events: Vec<Event>,
    pub(crate) workspace: Workspace,
    /// The jobs (by label) of every container of the run the engine listed while it ran
    /// (only with [`EngineRun::watch_containers`]).
    pub(crate) seen_jobs: Vec<String>,
    /// How long the engine took, from the call to its report.
    pub(crate) took: Duration,
    docker: Option<DockerBackend>,
}

impl Ran {
    /// Every output line (the steps' and gpuflow's own) of the job run displayed as `job`.
    pub(crate) fn lines(&self, job: &str) -> Vec<String> {
        self.lines_where(|display| display == job)
    }

    /// Every output line of the job runs whose display name starts with `prefix` (a matrix's
    /// cells; `""`: every job).
    pub(crate) fn lines_of_jobs_starting_with(&self, prefix: &str) -> Vec<String> {
        self.lines_where(|display| display.starts_with(prefix))
    }

    fn lines_where(&self, job: impl Fn(&str) -> bool) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::LogLine { job: j, text, .. } if job(&j.display) => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every line the run said, the steps' messages and preflight's included, one text.
    pub(crate) fn said(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::LogLine { text, .. } => Some(text.clone()),
                EventKind::PreflightCheck {
                    message: Some(m), ..
                } => Some(m.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The value after `prefix` on the first of the job's lines that starts with it
    /// (`ready=1.234` → `1.234`).
    pub(crate) fn value(&self, job: &str, prefix: &str) -> String {
        self.lines(job)
            .iter()
            .find_map(|l| l.strip_prefix(prefix).map(str::to_string))
            .unwrap_or_else(|| panic!("no line `{prefix}…` in {:?}", self.lines(job)))
    }

    /// The outcome of the first step named `name`, in any job.
    pub(crate) fn step(&self, name: &str) -> StepOutcome {
        self.step_finished(name).0
    }

    /// (outcome, conclusion) of the step named `name` in the job run displayed as `job`.
    pub(crate) fn step_in(&self, job: &str, name: &str) -> (StepOutcome, StepOutcome) {
        self.events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::StepFinished {
                    job: j,
                    name: n,
                    outcome,
                    conclusion,
                    ..
                } if j.display == job && n == name => Some((*outcome, *conclusion)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no step `{name}` in `{job}`: {:#?}", self.events))
    }

    /// How long the first step named `name` took.
    pub(crate) fn step_duration(&self, name: &str) -> Duration {
        self.step_finished(name).1
    }

    /// The outcome and duration of the first step named `name`, in any job.
    fn step_finished(&self, name: &str) -> (StepOutcome, Duration) {
        self.events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::StepFinished {
                    name: n,
                    outcome,
                    duration,
                    ..
                } if n == name => Some((*outcome, *duration)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no step `{name}`"))
    }

    pub(crate) fn job(&self, display: &str) -> JobResult {
        self.report
            .jobs
            .iter()
            .find(|j| j.job.display == display)
            .unwrap_or_else(|| panic!("no job `{display}`: {:#?}", self.report.jobs))
            .result
    }

    /// Index of the first event matching `f`; fails the test when there is none.
    pub(crate) fn index(&self, f: impl Fn(&EventKind) -> bool) -> usize {
        self.position(f)
            .unwrap_or_else(|| panic!("event not found: {:#?}", self.events))
    }

    /// Index of the first event matching `f`, if any.
    pub(crate) fn position(&self, f: impl Fn(&EventKind) -> bool) -> Option<usize> {
        self.events.iter().position(|e| f(&e.kind))
    }

    /// Whether a container named `name` was started.
    pub(crate) fn started(&self, name: &str) -> bool {
        self.events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::ContainerStarted { name: n, .. } if n == name))
    }

    /// The messages of preflight's checks that said something.
    pub(crate) fn preflight_messages(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::PreflightCheck {
                    message: Some(m), ..
                } => Some(m.clone()),
                _ => None,
            })
            .collect()
    }

    /// Asserts that preflight failed one check and that neither a job nor the container
    /// `container` started; returns that check's message.
    pub(crate) fn refused_in_preflight(&self, container: &str) -> String {
        assert_eq!(self.report.result, JobResult::Failure);
        assert_eq!(self.report.preflight.failed, 1, "{:#?}", self.events);
        assert!(!self.started(container), "`{container}` was started");
        assert!(
            self.position(|k| matches!(k, EventKind::JobStarted { .. }))
                .is_none()
        );
        let messages = self.preflight_messages();
        assert_eq!(messages.len(), 1, "{messages:#?}");
        messages[0].clone()
    }

    /// Asserts with the engine's API that nothing of the run is left.
    pub(crate) async fn assert_nothing_left(&self) {
        let docker = self.docker.as_ref().expect("a run on Docker");
        let left = docker.run_containers(&self.report.run_id).await.unwrap();
        assert_eq!(left, Vec::<String>::new(), "containers of the run survived");
    }
}

/// A workspace ([`Workspace::new`], `w.yml`, and `files`) holding a valid workflow, loaded and
/// planned: what every engine test starts from.
pub(crate) fn prepare(yaml: &str, files: &[(&str, &str)]) -> (Workspace, Box<Workflow>, Plan) {
    let workspace = Workspace::new().files(files);
    let (workflow, plan) = load_checked(&workspace, yaml);
    (workspace, workflow, plan)
}

/// `yaml` written to `w.yml` of `workspace`, checked (no error allowed) and planned.
fn load_checked(workspace: &Workspace, yaml: &str) -> (Box<Workflow>, Plan) {
    workspace.write("w.yml", yaml);
    let (_, diags) = load_and_check(&workspace.path().join("w.yml")).unwrap();
    assert!(!diags.has_errors(), "{diags:#?}");
    load_unchecked(workspace, yaml)
}

/// `yaml` written to `w.yml` of `workspace` and planned, even when `validate` refuses it.
fn load_unchecked(workspace: &Workspace, yaml: &str) -> (Box<Workflow>, Plan) {
    workspace.write("w.yml", yaml);
    let (loaded, _) = load_and_check(&workspace.path().join("w.yml")).unwrap();
    let Loaded::Workflow(Some(workflow)) = loaded else {
        panic!("not a workflow")
    };
    let plan = build(&from_workflow(&workflow, "w").input).unwrap();
    (workflow, plan)
}

/// `validate`'s errors for `yaml` (written to `w.yml` of `workspace`), as `Debug` text.
pub(crate) fn validate_errors(workspace: &Workspace, yaml: &str) -> String {
    workspace.write("w.yml", yaml);
    let (_, diags) = load_and_check(&workspace.path().join("w.yml")).unwrap();
    assert!(diags.has_errors(), "validate accepts it");
    format!("{diags:?}")
}

/// Runs `yaml` on the host backend in a fresh workspace; a refusal fails the test.
pub(crate) async fn on_host(yaml: &str) -> Ran {
    on_host_in(Workspace::new(), yaml, |_| {}).await
}

/// [`on_host`] in `workspace`, with the run's options changed by `tweak`.
pub(crate) async fn on_host_in(
    workspace: Workspace,
    yaml: &str,
    tweak: impl FnOnce(&mut RunOptions),
) -> Ran {
    accepted(try_in(workspace, None, yaml, tweak).await)
}

/// [`on_host_in`], giving back the engine's refusal and the workspace instead of failing.
pub(crate) async fn try_on_host(
    workspace: Workspace,
    yaml: &str,
    tweak: impl FnOnce(&mut RunOptions),
) -> Result<Ran, (RunError, Workspace)> {
    try_in(workspace, None, yaml, tweak).await
}

/// [`on_host_in`] with the local Docker engine at hand (the engine runs built-ins with the
/// job's containers at hand, so it wants one even for a step that starts none). The caller
/// has connected (or skipped); nothing here sweeps the run's containers.
pub(crate) async fn with_engine_in(
    workspace: Workspace,
    docker: DockerBackend,
    yaml: &str,
    tweak: impl FnOnce(&mut RunOptions),
) -> Ran {
    accepted(try_in(workspace, Some(docker), yaml, tweak).await)
}

/// `yaml`, checked, run in `workspace` with `docker` (none: the host backend only).
async fn try_in(
    workspace: Workspace,
    docker: Option<DockerBackend>,
    yaml: &str,
    tweak: impl FnOnce(&mut RunOptions),
) -> Result<Ran, (RunError, Workspace)> {
    let (workflow, plan) = load_checked(&workspace, yaml);
    engine_run(workspace, workflow, plan, docker, tweak).await
}

/// The run, or the test fails with the engine's refusal.
fn accepted(result: Result<Ran, (RunError, Workspace)>) -> Ran {
    match result {
        Ok(r) => r,
        Err((e, _)) => panic!("refused: {e:?}"),
    }
}

/// [`try_on_host`] of a workflow even when `validate` refuses it (as `gpuflow run` does
/// first): what the engine does on its own, for a caller that runs a workflow unchecked.
pub(crate) async fn try_on_host_unchecked(
    workspace: Workspace,
    yaml: &str,
    tweak: impl FnOnce(&mut RunOptions),
) -> Result<Ran, (RunError, Workspace)> {
    let (workflow, plan) = load_unchecked(&workspace, yaml);
    engine_run(workspace, workflow, plan, None, tweak).await
}

/// Runs `workflow` in `workspace` with `docker` (none: the host backend only), its events
/// collected and its logs stored as `gpuflow run` stores them.
async fn engine_run(
    workspace: Workspace,
    workflow: Box<Workflow>,
    plan: Plan,
    docker: Option<DockerBackend>,
    tweak: impl FnOnce(&mut RunOptions),
) -> Result<Ran, (RunError, Workspace)> {
    let mut opts = RunOptions::new(gpuflow::engine::new_run_id(), workspace.path());
    opts.grace = Duration::from_millis(500);
    tweak(&mut opts);
    let collect = CollectSink::new();
    let store = Arc::new(LogStore::create(&opts.log_dir).unwrap());
    let sink = Arc::new(Tee(vec![Arc::new(collect.clone()), store]));
    let started = Instant::now();
    let result = gpuflow::engine::run(
        Arc::new(*workflow),
        plan,
        opts,
        sink,
        docker.clone(),
        CancellationToken::new(),
    )
    .await;
    match result {
        Ok(report) => Ok(Ran {
            report,
            events: collect.events(),
            workspace,
            seen_jobs: Vec::new(),
            took: started.elapsed(),
            docker,
        }),
        Err(e) => Err((e, workspace)),
    }
}

/// Runs `yaml` on the local engine (base and simulator images); `None` only when Docker tests
/// are skipped knowingly.
pub(crate) async fn on_docker(yaml: &str) -> Option<Ran> {
    workflow(yaml).on_docker().await
}

/// Like [`on_docker`], with more files (`path`, text) in the workspace.
pub(crate) async fn on_docker_with(yaml: &str, files: &[(&str, &str)]) -> Option<Ran> {
    workflow(yaml).files(files).on_docker().await
}

/// A workflow to run on the local Docker engine, built up like a [`super::command::Gpuflow`].
#[must_use = "an engine run does nothing until `.on_docker()`"]
pub(crate) struct EngineRun<'a> {
    yaml: &'a str,
    files: &'a [(&'a str, &'a str)],
    images: &'a [&'a str],
    tweak: Box<dyn FnOnce(&mut RunOptions) + 'a>,
    watch: bool,
    stand_in: Option<std::path::PathBuf>,
}

/// `yaml` to run on Docker; it needs the base and simulator images unless told otherwise.
pub(crate) fn workflow(yaml: &str) -> EngineRun<'_> {
    EngineRun {
        yaml,
        files: &[],
        images: &[images::BASE, images::SIM],
        tweak: Box::new(|_| {}),
        watch: false,
        stand_in: None,
    }
}

impl<'a> EngineRun<'a> {
    /// With more files (`path`, text) in the workspace.
    pub(crate) fn files(mut self, files: &'a [(&'a str, &'a str)]) -> Self {
        self.files = files;
        self
    }

    /// The test images it needs (checked before it runs).
    pub(crate) fn images(mut self, images: &'a [&'a str]) -> Self {
        self.images = images;
        self
    }

    /// With the run's options changed by `tweak`.
    pub(crate) fn options(mut self, tweak: impl FnOnce(&mut RunOptions) + 'a) -> Self {
        self.tweak = Box::new(tweak);
        self
    }

    /// Lists the run's containers every 20 ms while it runs ([`Ran::seen_jobs`]).
    pub(crate) fn watch_containers(mut self) -> Self {
        self.watch = true;
        self
    }

    /// With the GPUs of the stand-in inventory `file` on the local host, leased in the
    /// workspace (as `GPUFLOW_GPU_INVENTORY` gives them to `gpuflow run`).
    pub(crate) fn stand_in_gpus(mut self, file: std::path::PathBuf) -> Self {
        self.stand_in = Some(file);
        self
    }

    /// Runs it; `None` only when Docker tests are skipped knowingly.
    pub(crate) async fn on_docker(self) -> Option<Ran> {
        let docker = images::docker_with(self.images).await?;
        let (workspace, workflow, plan) = prepare(self.yaml, self.files);
        let run_id = format!("test-engine-{}", gpuflow::engine::new_run_id());
        let mut opts = RunOptions::new(&run_id, workspace.path());
        opts.grace = Duration::from_secs(1);
        (self.tweak)(&mut opts);
        let warm_registry = opts.warm_registry.clone();

        let done = Arc::new(AtomicBool::new(false));
        let watcher = self
            .watch
            .then(|| tokio::spawn(watch(docker.clone(), run_id.clone(), done.clone())));
        let collect = CollectSink::new();
        let started = Instant::now();
        let mut engines = gpuflow::engine::Engines::from(Some(docker.clone()));
        if let Some(file) = self.stand_in {
            let leases = workspace.path().join(".leases");
            engines.set_gpus(
                gpuflow::hosts::LOCAL,
                gpuflow::gpu::HostGpus::new(
                    gpuflow::gpu::Discovery::StandIn(file),
                    gpuflow::gpu::LeaseDir::at(&leases, gpuflow::hosts::LOCAL),
                ),
            );
        }
        let result = gpuflow::engine::run(
            Arc::new(*workflow),
            plan,
            opts,
            Arc::new(collect.clone()),
            engines,
            CancellationToken::new(),
        )
        .await;
        let took = started.elapsed();
        done.store(true, Ordering::SeqCst);
        let seen_jobs = match watcher {
            Some(watcher) => watcher.await.unwrap(),
            None => Vec::new(),
        };
        // The servers the run kept warm (`keep-warm`) stay, as they should; the test stops
        // them.
        let warm: Vec<String> = warm_registry
            .list(None)
            .into_iter()
            .map(|e| e.container)
            .collect();
        let mut left = docker.run_containers(&run_id).await.unwrap();
        left.retain(|id| !warm.contains(id));
        // The guard: whatever the engine did, nothing of this test stays behind.
        docker.remove_run_except(&run_id, &warm).await.unwrap();
        let report = result.unwrap();
        assert_eq!(
            left,
            Vec::<String>::new(),
            "containers of the run survived the run"
        );
        Some(Ran {
            report,
            events: collect.events(),
            workspace,
            seen_jobs,
            took,
            docker: Some(docker),
        })
    }
}

/// The jobs (by label) of the containers of `run_id` the engine lists, until `done`.
async fn watch(docker: DockerBackend, run_id: String, done: Arc<AtomicBool>) -> Vec<String> {
    let mut jobs = Vec::new();
    while !done.load(Ordering::SeqCst) {
        for m in docker.all_managed().await.unwrap_or_default() {
            if m.kind == ManagedKind::Container
                && m.run_id() == Some(run_id.as_str())
                && let Some(job) = m.job()
                && !jobs.iter().any(|j| j == job)
            {
                jobs.push(job.to_string());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    jobs
}
