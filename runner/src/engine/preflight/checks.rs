//! Running the prepared checks ([`super::prepare`]): every image a `start-container` step
//! needs resolved for the run on its host's engine (pulled when missing, all started at once),
//! and beside those pulls each job run's checks, in one throw-away container per image
//! (started on first use, once its image is there; removed after). Each check is told through
//! a `preflight_check` event.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use super::prepare::{Check, MountSource, Ready, prepare_all};
use crate::backend::{ContainerSpec, PullPolicy, RegistryAuth};
use crate::engine::containers::{ContainerError, JobContainers};
use crate::engine::shared::Shared;
use crate::engine::step_inputs;
use crate::events::{EventKind, JobRef, StepOutcome};
use crate::plan::PlannedJob;
use crate::steps::{self, StepCall, StepContext, StepHost};

/// How preflight ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreflightReport {
    pub checks: usize,
    pub failed: usize,
}

impl PreflightReport {
    pub fn passed(&self) -> bool {
        self.failed == 0
    }

    /// Counts one check, and tells it.
    fn tell(&mut self, shared: &Shared, check: EventKind) {
        self.checks += 1;
        if let EventKind::PreflightCheck {
            outcome: StepOutcome::Failure,
            ..
        } = check
        {
            self.failed += 1;
        }
        shared.emit(check);
    }
}

/// Runs every preflight check of `runs`; says what it does through events. Checks with the
/// same inputs in several matrix cells run once.
///
/// Every image the run needs is started at once (the run's [`crate::backend::RunImages`]
/// bounds how many pull together), and the job runs' checks go on beside the pulls: a check
/// waits only for the image its own throw-away container is made of.
pub async fn run(
    shared: &Arc<Shared>,
    runs: &[PlannedJob],
    refs: &[JobRef],
    cancel: &CancellationToken,
) -> PreflightReport {
    let started = Instant::now();
    let prepared = prepare_all(shared, runs, refs);
    if prepared.is_empty() {
        return PreflightReport::default();
    }
    let policies: Policies = prepared
        .images
        .iter()
        .map(|(image, (pull, _, auth))| (image.clone(), (*pull, auth.clone())))
        .collect();
    // Resolved together, told in the plan's order (so a run's output reads the same each
    // time): an image's check is said once it and the images before it are done.
    let images = async {
        let mut told = Vec::new();
        let mut resolving = futures_util::stream::iter(prepared.images.iter().map(
            |(image, (pull, jref, auth))| check_image(shared, image, (*pull, auth.as_ref()), jref),
        ))
        .buffered(prepared.images.len().max(1));
        while let Some(check) = resolving.next().await {
            told.push(matches!(
                check,
                EventKind::PreflightCheck {
                    outcome: StepOutcome::Success,
                    ..
                }
            ));
            shared.emit(check);
        }
        told
    };
    let checks = async {
        let mut report = PreflightReport::default();
        for ready in prepared.by_run {
            run_job_checks(shared, ready, &policies, &mut report, cancel).await;
        }
        report
    };
    let (images, mut report) = tokio::join!(images, checks);
    report.checks += images.len();
    report.failed += images.iter().filter(|passed| !**passed).count();
    shared.emit(EventKind::PreflightFinished {
        checks: report.checks,
        failed: report.failed,
        duration: started.elapsed(),
    });
    report
}

/// How each image of the run may be pulled (`pull:` of its first step) and the credentials
/// that step gives.
type Policies = HashMap<String, (PullPolicy, Option<RegistryAuth>)>;

fn outcome(passed: bool) -> StepOutcome {
    if passed {
        StepOutcome::Success
    } else {
        StepOutcome::Failure
    }
}

/// Resolves `image` for the run on `jref`'s engine (pulling it as `pull` says): the check's
/// event.
async fn check_image(
    shared: &Shared,
    image: &str,
    pull: (PullPolicy, Option<&RegistryAuth>),
    jref: &JobRef,
) -> EventKind {
    let t = Instant::now();
    let problem = image_problem(shared, image, pull, jref).await;
    EventKind::PreflightCheck {
        job: jref.clone(),
        step: None,
        name: format!("image `{image}`"),
        outcome: outcome(problem.is_none()),
        message: problem,
        duration: t.elapsed(),
    }
}

/// Why `image` cannot be used by `jref`'s job, if it cannot: not on the engine and not to be
/// (or not able to be) pulled, with `auth` (the step's credentials; else the run's login for
/// the registry).
async fn image_problem(
    shared: &Shared,
    image: &str,
    (pull, auth): (PullPolicy, Option<&RegistryAuth>),
    jref: &JobRef,
) -> Option<String> {
    // Each image is looked for on the engine of the host its job runs on.
    let docker = match shared.engines.for_job(jref).await {
        Ok(docker) => docker,
        Err(e) => return Some(e),
    };
    shared
        .images
        .resolve(
            &docker,
            image,
            (pull, auth),
            &mut |progress, elapsed, finished| {
                shared.emit(progress.event(jref, None, image, elapsed, finished));
            },
        )
        .await
        .err()
        .map(|e| e.describe(image))
}

/// The checks of one job run, in one throw-away container per image (started on first use).
async fn run_job_checks(
    shared: &Arc<Shared>,
    ready: Vec<Ready>,
    policies: &Policies,
    report: &mut PreflightReport,
    cancel: &CancellationToken,
) {
    let Some(first) = ready.first() else { return };
    let mut place = Throwaway::new(shared, &first.jref, policies).await;
    for check in ready {
        let t = Instant::now();
        let result = place.run_check(&check, cancel).await;
        report.tell(
            shared,
            EventKind::PreflightCheck {
                job: check.jref.clone(),
                step: Some(check.step_key.clone()),
                name: check.label.clone(),
                outcome: outcome(result.is_ok()),
                message: result.unwrap_or_else(Some),
                duration: t.elapsed(),
            },
        );
    }
    place.remove().await;
}

const NO_ENGINE: &str = "preflight needs a Docker engine, and the run has none";

/// Where one job run's checks run: its host's engine, with the throw-away containers started
/// so far under the names the steps use.
struct Throwaway {
    shared: Arc<Shared>,
    host: Arc<dyn StepHost>,
    /// The job run the throw-away containers are labelled with: `preflight-<job>`.
    pref: JobRef,
    /// `None`: the job's host has no Docker engine.
    containers: Option<JobContainers>,
    /// Throw-away name → the name the steps use for it.
    renamed: Vec<(String, String)>,
    policies: Policies,
}

impl Throwaway {
    async fn new(shared: &Arc<Shared>, jref: &JobRef, policies: &Policies) -> Self {
        let pref = JobRef {
            job: format!("preflight-{}", jref.job),
            cell: jref.cell,
            display: format!("{} (preflight)", jref.display),
        };
        let containers = shared
            .engines
            .for_job(jref)
            .await
            .ok()
            .map(|d| JobContainers::new(d, &shared.opts.run_id, &pref));
        Self {
            shared: shared.clone(),
            host: shared.clone(),
            pref,
            containers,
            renamed: Vec::new(),
            policies: policies.clone(),
        }
    }

    /// Runs one check, starting its container first if it is the first to look into it; `Ok`
    /// with what a passing check has to say.
    async fn run_check(
        &mut self,
        check: &Ready,
        cancel: &CancellationToken,
    ) -> Result<Option<String>, String> {
        if self.containers.is_none() {
            return Err(NO_ENGINE.to_string());
        }
        if let Some((name, spec)) = &check.container {
            let started = self.start(name, spec, &check.check).await;
            // A command line that cannot be checked is a warning, never a refusal.
            if let (Err(why), Check::ServerCli { at, .. }) = (&started, &check.check) {
                return Ok(super::server_cli::unchecked(
                    &self.shared,
                    &check.jref,
                    name,
                    why,
                    at,
                ));
            }
            started?;
        }
        let Some(containers) = self.containers.as_mut() else {
            return Err(NO_ENGINE.to_string());
        };
        match &check.check {
            Check::Builtin(name) => run_builtin(name, check, containers, &self.host, cancel)
                .await
                .map(|()| None),
            Check::Memory { flags, request, at } => {
                let Some((name, _)) = &check.container else {
                    return Err("no container to look in".to_string());
                };
                super::memory::run(
                    &self.shared,
                    &check.jref,
                    containers,
                    name,
                    (flags, request, at),
                )
                .await
            }
            Check::ServerCli {
                image,
                entrypoint,
                command,
                at,
            } => {
                let Some((name, _)) = &check.container else {
                    return Err("no container to look in".to_string());
                };
                let line = super::server_cli::CommandLine {
                    image,
                    entrypoint: entrypoint.as_deref(),
                    command,
                    at,
                };
                super::server_cli::run(&self.shared, &check.jref, containers, name, &line).await
            }
            Check::Paths {
                paths, volumes, at, ..
            } => {
                let Some((name, spec)) = &check.container else {
                    return Err("no container to look in".to_string());
                };
                let Some(started) = containers.started.get(name) else {
                    return Err(format!("the throw-away container `{name}` was not started"));
                };
                let place = steps::FileInContainer {
                    docker: containers.docker.clone(),
                    id: started.id.clone(),
                    name: name.clone(),
                };
                steps::required_paths::check(&place, &spec.image, volumes, paths)
                    .await
                    .map(|()| None)
                    .map_err(|m| format!("{m}\n  --> {at}"))
            }
        }
    }

    /// The throw-away container of `spec`, named `name` as the steps name it, unless it runs
    /// already.
    async fn start(
        &mut self,
        name: &str,
        spec: &ContainerSpec,
        check: &Check,
    ) -> Result<(), String> {
        let Some(containers) = self.containers.as_mut() else {
            return Ok(());
        };
        if containers.started.contains_key(name) {
            return Ok(());
        }
        // The image as the run resolved it: the pull preflight started is waited for here,
        // never started a second time by the engine's create.
        let (policy, auth) = self.policies.get(&spec.image).cloned().unwrap_or_default();
        let resolved = self
            .shared
            .images
            .resolve(
                &containers.docker,
                &spec.image,
                (policy, auth.as_ref()),
                &mut |_, _, _| {},
            )
            .await
            .map_err(|e| e.describe(&spec.image))?;
        let mut spec = spec.clone();
        spec.image_id = Some(resolved.id);
        let temp = format!("preflight-{name}");
        // A host folder that does not exist stops the container's creation: said with
        // the input that gives it and where, as a missing path is.
        let sources = match check {
            Check::Paths { sources, .. } => sources.as_slice(),
            Check::Builtin(_) | Check::Memory { .. } | Check::ServerCli { .. } => &[],
        };
        containers
            .start(&self.host, &self.pref, &temp, spec.clone())
            .await
            .map_err(|e| start_error(&e, &spec, sources))?;
        // The step names the container as the job will: `server`, not `preflight-server`.
        if let Some(s) = containers.started.shift_remove(&temp) {
            containers.started.insert(name.to_string(), s);
            self.renamed.push((temp, name.to_string()));
        }
        Ok(())
    }

    /// Removes the throw-away containers, under their own names again.
    async fn remove(self) {
        let Some(mut containers) = self.containers else {
            return;
        };
        for (temp, name) in self.renamed {
            if let Some(s) = containers.started.shift_remove(&name) {
                containers.started.insert(temp, s);
            }
        }
        for problem in containers.remove_all(&self.host, &self.pref).await {
            self.shared.emit(EventKind::Warning {
                job: Some(self.pref.clone()),
                message: format!("could not remove {problem}"),
            });
        }
    }
}

/// Why a throw-away container did not start, with where the job gives a missing host folder.
fn start_error(e: &ContainerError, spec: &ContainerSpec, sources: &[MountSource]) -> String {
    let source = |path: &str| {
        sources
            .iter()
            .find(|s| std::path::Path::new(&s.path) == std::path::Path::new(path))
    };
    let origin = |path: &str| source(path).map(|s| s.given.clone());
    let mut m = format!(
        "could not start a throw-away container of `{}`: {}",
        spec.image,
        steps::required_paths::start_error(e, spec, &origin)
    );
    if let ContainerError::Backend(crate::backend::BackendError::BindSourceMissing { path, .. }) = e
        && let Some(s) = source(path)
    {
        m.push_str(&format!("\n  --> {}", s.at));
    }
    m
}

/// A built-in check, run as its step would run it.
async fn run_builtin(
    name: &str,
    check: &Ready,
    containers: &mut JobContainers,
    host: &Arc<dyn StepHost>,
    cancel: &CancellationToken,
) -> Result<(), String> {
    // Preflight checks record nothing and read no earlier results: a bare context.
    let env = IndexMap::new();
    let mut recorded = Vec::new();
    let mut step = StepContext {
        key: &check.step_key,
        step_id: None,
        label: &check.label,
        job_id: &check.jref.job,
        matrix: std::collections::BTreeMap::new(),
        env: &env,
        recorded: &mut recorded,
        cancel: cancel.clone(),
        gpus: None,
        // Preflight runs `check-cli-interface` and `assert-file`: no shell text.
        shell: IndexMap::new(),
        action_inputs: IndexMap::new(),
        outputs_on_failure: IndexMap::new(),
        budget: None,
    };
    let builtin =
        steps::registered(name).ok_or_else(|| format!("`{name}` is not a built-in step"))?;
    builtin
        .run(StepCall {
            name: builtin.spec().name,
            inputs: &check.inputs,
            containers: Some(containers),
            host,
            job: &check.jref,
            job_gpus: None,
            step: &mut step,
        })
        .await
        .map(|_| ())
        .map_err(|e| step_inputs::error_text(&e, &check.places))
}
