//! Running one job run (a matrix cell): its contexts, its containers, its steps in order with
//! `if:`, `continue-on-error` and timeouts, the files steps talk back through, and its
//! `outputs` at the end. Everything it does is told through events.
//!
//! Strategy: the job's status (`success()`/`failure()`/`cancelled()`) is one value updated
//! after each step; cancellation (the run's, fail-fast's or the job's timeout) is one token.
//! A step that starts after the token fired (an `always()` step) gets a fresh token bounded by
//! the clean-up timeout, so it runs instead of being stopped at once. Clean-up (containers,
//! network, leftover processes) runs on every path before the job's result is reported.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use super::container_runner::ContainerRunner;
use super::containers::JobContainers;
use super::engines::Engines;
use super::evaluate::{eval_string, expr_message, number, object};
use super::host::HostRunner;
use super::options::RunOptions;
use super::script_runner::{LineFn, ScriptRun, ScriptRunner, Shell};
use super::{output_file, script, step_inputs};
use crate::backend::GpuRequest;
use crate::diag::{SourceFile, Spanned};
use crate::events::Masker;
use crate::events::{Event, EventKind, EventSink, JobRef, JobResult, StepOutcome, Stream};
use crate::expr::{JobStatus, MapContext, Value, parse_condition, parse_template};
use crate::gpu::JobGpus;
use crate::plan::PlannedJob;
use crate::steps::{self, EngineUse, StepCall, StepContext, StepGpus, StepHost};
use crate::workflow::model::{BoolOrExpr, Container, GpuDevices, Job, Step, Uses, Workflow};

/// GitHub's default job timeout.
const DEFAULT_JOB_MINUTES: f64 = 360.0;

/// What every job of a run shares.
pub struct Shared {
    pub wf: Arc<Workflow>,
    pub opts: RunOptions,
    /// Masks every event's texts ([`crate::events::MaskingSink`]) before any view or file sees
    /// them: what is emitted needs no masking of its own. `masker` is for what is not an event
    /// (the results store, reports) and for the pieces of a cut line.
    pub sink: Arc<dyn EventSink>,
    pub masker: Arc<Masker>,
    /// The Docker engine of each job run's host.
    pub engines: Engines,
    pub started: Instant,
    /// `github`, `gpuflow`, `inputs`, `secrets`, `vars`.
    pub base: IndexMap<String, Value>,
}

impl Shared {
    pub fn emit(&self, kind: EventKind) {
        self.sink.emit(Event {
            elapsed: self.started.elapsed(),
            kind,
        });
    }
}

/// How a job run ended, and the outputs it passes to the jobs that need it.
#[derive(Clone, Debug)]
pub struct JobOutcome {
    pub result: JobResult,
    pub outputs: IndexMap<String, String>,
}

/// One level of steps: the job's, or a composite action's.
pub(super) struct Scope {
    pub(super) steps: IndexMap<String, Value>,
    /// A composite action's `inputs`; `None` in the job itself (the run's inputs).
    pub(super) inputs: Option<Value>,
    /// Before each step's number (`3.` inside the action used by step 3).
    pub(super) prefix: String,
    pub(super) file: Arc<SourceFile>,
    /// For errors inside an action: which workflow step used it.
    pub(super) caller: Option<String>,
}

/// What a step produced.
pub(super) struct StepResult {
    pub(super) outcome: StepOutcome,
    pub(super) outputs: IndexMap<String, String>,
}

impl StepResult {
    fn failed() -> Self {
        Self {
            outcome: StepOutcome::Failure,
            outputs: IndexMap::new(),
        }
    }
}

pub(super) struct JobRun {
    pub(super) shared: Arc<Shared>,
    job_id: String,
    jref: JobRef,
    contexts: IndexMap<String, Value>,
    /// Workflow → job → `$GITHUB_ENV` additions.
    env: IndexMap<String, String>,
    pub(super) status: JobStatus,
    cancel: CancellationToken,
    host: HostRunner,
    containers: Option<JobContainers>,
    job_container: Option<ContainerRunner>,
    temp: PathBuf,
    /// Benchmark results this job run recorded, for `compare-to-baseline`.
    recorded: Vec<steps::Recorded>,
    /// The GPUs leased to this job run, held until it has cleaned up.
    gpus: Option<JobGpus>,
}

/// Runs one job run to its end; never fails (a problem is a failed step or job, said through
/// events).
#[tracing::instrument(name = "job", skip_all, fields(run = %shared.opts.run_id, job = %jref.job, cell = jref.cell))]
pub async fn run_job(
    shared: Arc<Shared>,
    planned: PlannedJob,
    jref: JobRef,
    needs: Value,
    cancel: CancellationToken,
    gpus: Option<JobGpus>,
) -> JobOutcome {
    let started = Instant::now();
    let job = shared.wf.jobs[&planned.job_id].clone();
    // A new private folder each time (crate::local_dirs): a predictable path another local
    // user made first would own the scripts written and run there.
    let (temp, temp_error) = match crate::local_dirs::private_dir(
        &crate::local_dirs::runtime_base(),
        &format!(
            "gpuflow-{}-{}-{}",
            shared.opts.run_id,
            crate::run_logs::slug(&jref.job),
            jref.cell + 1
        ),
    ) {
        Ok(dir) => (dir, None),
        Err(e) => (
            PathBuf::new(),
            Some(format!(
                "could not make the job's working folder in `{}`: {e} (set TMPDIR to a folder you can write)",
                crate::local_dirs::runtime_base().display()
            )),
        ),
    };
    let cancel = cancel.child_token();
    let mut run = JobRun {
        host: HostRunner::new(temp.join("host"), &shared.opts.workspace, shared.opts.grace),
        shared: shared.clone(),
        job_id: planned.job_id.clone(),
        jref: jref.clone(),
        contexts: IndexMap::new(),
        env: IndexMap::new(),
        status: JobStatus::Success,
        cancel: cancel.clone(),
        containers: None,
        job_container: None,
        temp: temp.clone(),
        recorded: Vec::new(),
        gpus,
    };
    let temp_made = temp_error.is_none();
    let setup = match temp_error {
        Some(message) => Err(message),
        None => run.setup(&planned, &job, needs),
    };
    let timed_out = Arc::new(AtomicBool::new(false));
    let mut timer = None;
    let outcome = match setup {
        Err(message) => {
            run.say(None, &message);
            JobOutcome {
                result: JobResult::Failure,
                outputs: IndexMap::new(),
            }
        }
        Ok(minutes) => {
            timer = Some({
                let (flag, token) = (timed_out.clone(), cancel.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(minutes_duration(minutes)).await;
                    flag.store(true, Ordering::SeqCst);
                    token.cancel();
                })
            });
            let ready = run.start_containers(&job).await;
            let mut outputs = IndexMap::new();
            if let Err(message) = ready {
                run.say(None, &message);
                run.status = JobStatus::Failure;
            } else {
                let mut scope = Scope {
                    steps: IndexMap::new(),
                    inputs: None,
                    prefix: String::new(),
                    file: shared.wf.file.clone(),
                    caller: None,
                };
                run.run_steps(&job.steps, &mut scope).await;
                outputs = run.job_outputs(&job, &scope);
            }
            let result = if timed_out.load(Ordering::SeqCst) {
                run.say(
                    None,
                    &format!(
                        "the job timed out after {} (timeout-minutes)",
                        minutes_text(minutes)
                    ),
                );
                JobResult::Failure
            } else if cancel.is_cancelled() {
                JobResult::Cancelled
            } else if run.status == JobStatus::Failure {
                JobResult::Failure
            } else {
                JobResult::Success
            };
            JobOutcome { result, outputs }
        }
    };
    if let Some(t) = timer {
        t.abort();
    }
    run.clean_up().await;
    let gpus = run.gpus.take();
    if temp_made {
        let _ = tokio::fs::remove_dir_all(&temp).await;
    }
    shared.emit(EventKind::JobFinished {
        job: jref,
        result: outcome.result,
        duration: started.elapsed(),
    });
    // Only now, with its containers gone and its end told, may another job have its GPUs:
    // no `job_started` of a job on these GPUs comes before this one's `job_finished`.
    drop(gpus);
    outcome
}

/// A timeout in minutes as a duration; absurdly large ones mean "never" rather than a panic.
fn minutes_duration(minutes: f64) -> Duration {
    Duration::try_from_secs_f64(minutes * 60.0).unwrap_or(Duration::MAX)
}

fn minutes_text(minutes: f64) -> String {
    let secs = minutes * 60.0;
    if secs < 60.0 {
        format!("{}s", (secs * 10.0).round() / 10.0)
    } else {
        format!("{} minutes", crate::expr::format_number(minutes))
    }
}

impl JobRun {
    /// A line from gpuflow itself about the job or one of its steps; masked by the run's sink
    /// (`MaskingSink`), as every event is.
    fn say(&self, step: Option<&str>, text: &str) {
        self.shared.emit(EventKind::LogLine {
            job: self.jref.clone(),
            step: step.map(String::from),
            container: None,
            stream: Stream::Runner,
            text: text.to_string(),
        });
    }

    /// Fills the contexts known at job start; returns the job's timeout in minutes.
    fn setup(&mut self, planned: &PlannedJob, job: &Job, needs: Value) -> Result<f64, String> {
        let shared = self.shared.clone();
        for (k, v) in &shared.base {
            self.contexts.insert(k.clone(), v.clone());
        }
        let matrix: IndexMap<String, Value> = planned
            .matrix
            .iter()
            .map(|(k, v)| (k.clone(), Value::from_json(v.clone())))
            .collect();
        self.contexts.insert("matrix".into(), Value::Object(matrix));
        self.contexts.insert(
            "strategy".into(),
            object([
                ("fail-fast", Value::Bool(planned.fail_fast)),
                ("job-index", Value::Number(planned.cell as f64)),
                ("job-total", Value::Number(planned.cells as f64)),
                (
                    "max-parallel",
                    Value::Number(f64::from(
                        planned.max_parallel.unwrap_or(planned.cells as u32),
                    )),
                ),
            ]),
        );
        self.contexts.insert("needs".into(), needs);
        self.contexts.insert(
            "runner".into(),
            object([
                ("name", Value::String("gpuflow".into())),
                ("os", Value::String(runner_os().into())),
                ("arch", Value::String(runner_arch().into())),
                (
                    "temp",
                    Value::String(self.temp.join("host").display().to_string()),
                ),
                ("gpus", super::job_gpus::context(self.gpus.as_ref())),
            ]),
        );
        self.contexts.insert(
            "job".into(),
            object([("status", Value::String("success".into()))]),
        );
        // The run's `github` context, with this job's id.
        for name in ["github", "gpuflow"] {
            if let Some(Value::Object(g)) = self.contexts.get_mut(name) {
                g.insert("job".into(), Value::String(self.job_id.clone()));
            }
        }
        let file = shared.wf.file.clone();
        for (name, value) in &shared.wf.env {
            let ctx = self.ctx_with_env(None);
            let v = eval_string(value, &ctx, &file)?;
            self.env.insert(name.clone(), v);
        }
        for (name, value) in &job.env {
            let ctx = self.ctx_with_env(None);
            let v = eval_string(value, &ctx, &file)?;
            self.env.insert(name.clone(), v);
        }
        let minutes = match &job.timeout_minutes {
            None => DEFAULT_JOB_MINUTES,
            Some(n) => number(n, &self.ctx_with_env(None), &file)?,
        };
        Ok(minutes)
    }

    /// An evaluation context of the job's contexts with `env` (the job's when `None`).
    fn ctx_with_env(&self, env: Option<&IndexMap<String, String>>) -> MapContext {
        let mut c = MapContext::new().with_status(self.status);
        for (k, v) in &self.contexts {
            c.insert(k.clone(), v.clone());
        }
        let env = env.unwrap_or(&self.env);
        c.insert(
            "env",
            Value::Object(
                env.iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            ),
        );
        c.with_workspace(&self.shared.opts.workspace)
    }

    pub(super) fn ctx(&self, scope: &Scope, env: Option<&IndexMap<String, String>>) -> MapContext {
        let mut c = self.ctx_with_env(env);
        c.insert("steps", Value::Object(scope.steps.clone()));
        if let Some(inputs) = &scope.inputs {
            c.insert("inputs", inputs.clone());
        }
        let status = match self.status {
            JobStatus::Success => "success",
            JobStatus::Failure => "failure",
            JobStatus::Cancelled => "cancelled",
        };
        if let Some(Value::Object(job)) = self.contexts.get("job") {
            let mut job = job.clone();
            job.insert("status".into(), Value::String(status.into()));
            c.insert("job", Value::Object(job));
        }
        c
    }

    /// The job's containers on its host's engine, connecting to it the first time.
    async fn containers(&mut self) -> Result<&mut JobContainers, String> {
        if self.containers.is_none() {
            let docker = self.shared.engines.for_job(&self.jref).await?;
            self.containers = Some(
                JobContainers::new(docker, &self.shared.opts.run_id, &self.jref)
                    .kept(self.shared.opts.keep_containers),
            );
        }
        Ok(self.containers.as_mut().expect("set above"))
    }

    /// Services, then the job's container: all on the job's network, before the first step.
    async fn start_containers(&mut self, job: &Job) -> Result<(), String> {
        if job.container.is_none() && job.services.is_empty() {
            return Ok(());
        }
        let shared = self.shared.clone();
        let file = shared.wf.file.clone();
        let mut services = IndexMap::new();
        for (name, service) in &job.services {
            let spec = self.container_spec(service, &file)?;
            let jref = self.jref.clone();
            let host = self.step_host();
            let containers = self.containers().await?;
            let started = containers
                .start(&host, &jref, name, spec)
                .await
                .map_err(|e| format!("could not start service `{name}`: {e}"))?;
            services.insert(
                name.clone(),
                object([("id", Value::String(started.id.clone()))]),
            );
        }
        let mut job_ctx = IndexMap::new();
        job_ctx.insert("services".to_string(), Value::Object(services));
        if let Some(container) = &job.container {
            let mut spec = self.container_spec(container, &file)?;
            // The job's container stays up for the steps exec'd into it, whatever its image
            // runs by default; the workspace is where steps start, as on the host.
            spec.entrypoint = Some(vec!["tail".into()]);
            spec.command = Some(vec!["-f".into(), "/dev/null".into()]);
            let workspace = self.shared.opts.workspace.display().to_string();
            spec.volumes.push(crate::backend::VolumeMount {
                source: workspace.clone(),
                target: workspace.clone(),
                read_only: false,
            });
            spec.workdir = Some(workspace);
            if let Some(gpus) = self.job_gpus() {
                spec.gpus = gpus;
            }
            let jref = self.jref.clone();
            let grace = shared.opts.grace;
            let host = self.step_host();
            let containers = self.containers().await?;
            let started = containers
                .start(&host, &jref, "job-container", spec)
                .await
                .map_err(|e| format!("could not start the job's container: {e}"))?;
            let (id, shell) = (started.id.clone(), started.shell.clone());
            let docker = containers.docker.clone();
            job_ctx.insert(
                "container".into(),
                object([("id", Value::String(id.clone()))]),
            );
            self.job_container = Some(ContainerRunner::new(
                docker,
                id,
                "job-container",
                grace,
                shell,
            ));
        }
        job_ctx.insert("status".into(), Value::String("success".into()));
        self.contexts.insert("job".into(), Value::Object(job_ctx));
        Ok(())
    }

    fn container_spec(
        &self,
        c: &Container,
        file: &Arc<SourceFile>,
    ) -> Result<crate::backend::ContainerSpec, String> {
        let ctx = self.ctx_with_env(None);
        let mut spec = crate::backend::ContainerSpec::new(eval_string(&c.image, &ctx, file)?);
        for (k, v) in &c.env {
            spec.env.insert(k.clone(), eval_string(v, &ctx, file)?);
        }
        for p in &c.ports {
            spec.ports
                .push(super::container_inputs::port(&eval_string(p, &ctx, file)?)?);
        }
        for v in &c.volumes {
            spec.volumes
                .push(super::container_inputs::volume(&eval_string(
                    v, &ctx, file,
                )?)?);
        }
        if let Some(o) = &c.options
            && !o.value.trim().is_empty()
        {
            return Err(format!(
                "{}: container `options` are not supported yet",
                file.location(o.span)
            ));
        }
        Ok(spec)
    }

    async fn clean_up(&mut self) {
        self.host.kill_leftovers();
        if self.shared.opts.keep_containers {
            if let Some(c) = &self.containers
                && !c.started.is_empty()
            {
                let names: Vec<&str> = c.started.values().map(|s| s.docker_name.as_str()).collect();
                self.say(
                    None,
                    &format!(
                        "kept containers (--keep-containers): {}; they stay until `gpuflow gc` removes them",
                        names.join(", ")
                    ),
                );
            }
            return;
        }
        if let Some(mut containers) = self.containers.take() {
            let shared = self.shared.clone();
            for problem in containers.remove_all(&self.step_host(), &self.jref).await {
                shared.emit(EventKind::Warning {
                    job: Some(self.jref.clone()),
                    message: format!("could not remove {problem}"),
                });
            }
        }
    }

    /// Runs `steps` in order; each step's result goes into `scope.steps` and the job status.
    /// Boxed: a composite action's steps run through here too.
    pub(super) fn run_steps<'a>(
        &'a mut self,
        steps: &'a [Step],
        scope: &'a mut Scope,
    ) -> futures_util::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            for (i, step) in steps.iter().enumerate() {
                let key = format!("{}{}", scope.prefix, i + 1);
                self.run_step(step, &key, scope).await;
            }
        })
    }

    #[tracing::instrument(name = "step", skip_all, fields(step = key, id = step.id.as_ref().map(|i| i.value.as_str())))]
    async fn run_step(&mut self, step: &Step, key: &str, scope: &mut Scope) {
        if self.cancel.is_cancelled() {
            self.status = JobStatus::Cancelled;
        }
        let file = scope.file.clone();
        let label = self.step_label(step, scope);
        let started = Instant::now();
        let ctx = self.ctx(scope, None);
        let run_it = match &step.condition {
            None => self.status == JobStatus::Success,
            Some(cond) => match parse_condition(&cond.value)
                .and_then(|c| c.evaluate(&ctx))
                .map_err(|e| expr_message(cond, &e, &file))
            {
                Ok(b) => b,
                Err(message) => {
                    self.shared.emit(EventKind::StepStarted {
                        job: self.jref.clone(),
                        step: key.into(),
                        name: label.clone(),
                    });
                    self.say(
                        Some(key),
                        &self.in_caller(scope, &format!("`if` failed: {message}")),
                    );
                    self.finish_step(step, key, &label, scope, StepResult::failed(), started);
                    return;
                }
            },
        };
        if !run_it {
            self.finish_step(
                step,
                key,
                &label,
                scope,
                StepResult {
                    outcome: StepOutcome::Skipped,
                    outputs: IndexMap::new(),
                },
                started,
            );
            return;
        }
        self.shared.emit(EventKind::StepStarted {
            job: self.jref.clone(),
            step: key.into(),
            name: label.clone(),
        });
        // A step running after cancellation (an `always()` step) must not be stopped by the
        // token that already fired.
        let token = if self.cancel.is_cancelled() {
            let t = CancellationToken::new();
            let (t2, limit) = (t.clone(), self.shared.opts.cleanup_timeout);
            let force = self.shared.opts.force.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep(limit) => {}
                    () = force.cancelled() => {}
                }
                t2.cancel();
            });
            t
        } else {
            self.cancel.child_token()
        };
        let timed_out = Arc::new(AtomicBool::new(false));
        let timer = match &step.timeout_minutes {
            None => None,
            Some(n) => match number(n, &ctx, &file) {
                Ok(minutes) => {
                    let (flag, t) = (timed_out.clone(), token.clone());
                    Some((
                        minutes,
                        tokio::spawn(async move {
                            tokio::time::sleep(minutes_duration(minutes)).await;
                            flag.store(true, Ordering::SeqCst);
                            t.cancel();
                        }),
                    ))
                }
                Err(message) => {
                    self.say(Some(key), &message);
                    self.finish_step(step, key, &label, scope, StepResult::failed(), started);
                    return;
                }
            },
        };
        // A panic inside a step (a bug in gpuflow) fails that step with its message; the job
        // then ends as after any failure: `always()` steps run and its containers are removed.
        let executed = {
            use futures_util::FutureExt;
            std::panic::AssertUnwindSafe(self.execute(step, key, scope, token.clone()))
                .catch_unwind()
                .await
                .unwrap_or_else(|payload| {
                    Err(format!(
                        "gpuflow panicked in this step: {} (help: this is a bug in gpuflow; please report it with this message and the workflow)",
                        super::panic_text::panic_text(payload.as_ref())
                    ))
                })
        };
        let mut result = match executed {
            Ok(r) => r,
            Err(message) => {
                self.say(Some(key), &self.in_caller(scope, &message));
                StepResult::failed()
            }
        };
        if let Some((minutes, t)) = timer {
            t.abort();
            if timed_out.load(Ordering::SeqCst) {
                self.say(
                    Some(key),
                    &format!(
                        "the step timed out after {} (timeout-minutes)",
                        minutes_text(minutes)
                    ),
                );
                result.outcome = StepOutcome::Failure;
            }
        }
        if result.outcome == StepOutcome::Cancelled && !self.cancel.is_cancelled() {
            // Stopped by its own clean-up limit.
            result.outcome = StepOutcome::Failure;
        }
        self.finish_step(step, key, &label, scope, result, started);
    }

    fn in_caller(&self, scope: &Scope, message: &str) -> String {
        match &scope.caller {
            Some(c) => format!("{c}: {message}"),
            None => message.to_string(),
        }
    }

    fn finish_step(
        &mut self,
        step: &Step,
        key: &str,
        label: &str,
        scope: &mut Scope,
        result: StepResult,
        started: Instant,
    ) {
        let continue_on_error = match &step.continue_on_error {
            None => false,
            Some(BoolOrExpr::Bool(b)) => *b,
            Some(BoolOrExpr::Expr(e)) => {
                let ctx = self.ctx(scope, None);
                parse_template(&e.value)
                    .and_then(|t| t.evaluate(&ctx))
                    .is_ok_and(|v| v.is_truthy())
            }
        };
        let conclusion = match result.outcome {
            StepOutcome::Failure if continue_on_error => StepOutcome::Success,
            other => other,
        };
        match conclusion {
            StepOutcome::Failure if self.status == JobStatus::Success => {
                self.status = JobStatus::Failure;
            }
            StepOutcome::Cancelled => self.status = JobStatus::Cancelled,
            _ => {}
        }
        if let Some(id) = &step.id {
            let outputs = result
                .outputs
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            scope.steps.insert(
                id.value.clone(),
                object([
                    ("outputs", Value::Object(outputs)),
                    ("outcome", Value::String(result.outcome.as_str().into())),
                    ("conclusion", Value::String(conclusion.as_str().into())),
                ]),
            );
        }
        self.shared.emit(EventKind::StepFinished {
            job: self.jref.clone(),
            step: key.into(),
            name: label.into(),
            outcome: result.outcome,
            conclusion,
            duration: started.elapsed(),
        });
    }

    pub(super) fn step_label(&self, step: &Step, scope: &Scope) -> String {
        if let Some(name) = &step.name {
            let ctx = self.ctx(scope, None);
            return parse_template(&name.value)
                .and_then(|t| t.evaluate(&ctx))
                .map_or_else(|_| name.value.clone(), |v| v.to_expr_string());
        }
        if let Some(id) = &step.id {
            return id.value.clone();
        }
        if let Some(uses) = &step.uses {
            return uses.value.to_string();
        }
        let first = step
            .run
            .as_ref()
            .and_then(|r| r.value.lines().find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .trim();
        format!("Run {first}")
    }

    /// The step's environment: the job's, then the step's `env:` evaluated over it.
    fn step_env(&self, step: &Step, scope: &Scope) -> Result<IndexMap<String, String>, String> {
        let mut env = self.env.clone();
        for (k, v) in &step.env {
            let ctx = self.ctx(scope, Some(&env));
            let value = eval_string(v, &ctx, &scope.file)?;
            env.insert(k.clone(), value);
        }
        Ok(env)
    }

    async fn execute(
        &mut self,
        step: &Step,
        key: &str,
        scope: &mut Scope,
        cancel: CancellationToken,
    ) -> Result<StepResult, String> {
        let env = self.step_env(step, scope)?;
        // Tests reach the panic containment above through a real panic in a real run; debug
        // builds only, so no release binary can be made to panic on purpose.
        #[cfg(debug_assertions)]
        if std::env::var("GPUFLOW_TEST_PANIC_IN_STEP").is_ok_and(|k| k == key) {
            panic!("a panic asked for by GPUFLOW_TEST_PANIC_IN_STEP in step {key}");
        }
        if let Some(source) = &step.run {
            return self.run_script(step, source, key, scope, env, cancel).await;
        }
        let Some(uses) = &step.uses else {
            return Err("the step has neither `run` nor `uses`".into());
        };
        match &uses.value {
            Uses::Builtin(name) => {
                // Validation refuses an unknown name before the run.
                let builtin = steps::registered(name)
                    .ok_or_else(|| format!("`{name}` is not a built-in step"))?;
                let ctx = self.ctx(scope, Some(&env));
                let inputs = step_inputs::inputs(name, step, &ctx, &scope.file)?;
                let shell = step_inputs::shell_inputs(name, step, &ctx, &scope.file)?;
                let host = self.step_host();
                let jref = self.jref.clone();
                let job_gpus = self.job_gpus();
                let step_id = step.id.as_ref().map(|i| i.value.clone());
                let label = self.step_label(step, scope);
                let matrix = self.matrix_text();
                let job_id = self.job_id.clone();
                let mut recorded = std::mem::take(&mut self.recorded);
                // Asking for the inventory may probe a remote host, so only the steps that
                // read the GPUs (checks, telemetry, the fingerprint) are told.
                let step_gpus = match self.shared.engines.gpus_for(&self.jref) {
                    Some(gpus) if builtin.reads_gpus() => Some(StepGpus {
                        inventory: gpus.inventory().await,
                        leased: self
                            .gpus
                            .as_ref()
                            .map(|g| g.devices.clone())
                            .unwrap_or_default(),
                    }),
                    _ => None,
                };
                // Only a step that needs the engine connects to it: a GPU machine without
                // Docker still runs the others.
                let containers = match builtin.engine() {
                    EngineUse::Required => Some(self.containers().await?),
                    EngineUse::IfReached => self.containers.as_mut(),
                };
                // Inside a composite action: its inputs, so a message can name the one the
                // workflow gave a value as.
                let action_inputs = match &scope.inputs {
                    Some(Value::Object(given)) => given
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_expr_string()))
                        .collect(),
                    _ => IndexMap::new(),
                };
                let mut context = StepContext {
                    key,
                    step_id: step_id.as_deref(),
                    label: &label,
                    job_id: &job_id,
                    matrix,
                    env: &env,
                    recorded: &mut recorded,
                    cancel: cancel.clone(),
                    gpus: step_gpus,
                    shell,
                    action_inputs,
                    outputs_on_failure: IndexMap::new(),
                };
                let outputs = builtin
                    .run(StepCall {
                        name: builtin.spec().name,
                        inputs: &inputs,
                        containers,
                        host: &host,
                        job: &jref,
                        job_gpus,
                        step: &mut context,
                    })
                    .await;
                let outputs_on_failure = std::mem::take(&mut context.outputs_on_failure);
                drop(context);
                self.recorded = recorded;
                match outputs {
                    Ok(outputs) => Ok(StepResult {
                        outcome: StepOutcome::Success,
                        outputs,
                    }),
                    // Stopped (Ctrl-C, fail-fast, a timeout), as a script would be: said, and
                    // cancelled rather than failed; a timeout turns it into a failure later.
                    Err(message) if cancel.is_cancelled() => {
                        self.say(Some(key), &message);
                        Ok(StepResult {
                            outcome: StepOutcome::Cancelled,
                            outputs: IndexMap::new(),
                        })
                    }
                    // A step that says something before failing (a regression's `verdict`)
                    // keeps those outputs for `if: always()` steps and job outputs.
                    Err(message) if !outputs_on_failure.is_empty() => {
                        self.say(Some(key), &self.in_caller(scope, &message));
                        Ok(StepResult {
                            outcome: StepOutcome::Failure,
                            outputs: outputs_on_failure,
                        })
                    }
                    Err(message) => Err(message),
                }
            }
            Uses::Local(path) => self.run_action(step, path, key, scope, &env).await,
            remote @ Uses::Remote { .. } => {
                self.run_action(step, &remote.to_string(), key, scope, &env)
                    .await
            }
            other => Err(format!(
                "`{other}` steps cannot run (refused before the run)"
            )),
        }
    }

    /// The matrix cell's values as text, for results (`tokens-per-chunk: 4`).
    fn matrix_text(&self) -> std::collections::BTreeMap<String, String> {
        match self.contexts.get("matrix") {
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| (k.clone(), v.to_expr_string()))
                .collect(),
            _ => std::collections::BTreeMap::new(),
        }
    }

    /// What the job's containers get: the leased GPUs by UUID (UUIDs, unlike indexes, do not
    /// depend on `CUDA_DEVICE_ORDER`), or, when the host's GPUs are not known to the run, the
    /// job's `gpus:` as written.
    /// The run as a built-in step sees it.
    fn step_host(&self) -> Arc<dyn StepHost> {
        self.shared.clone()
    }

    fn job_gpus(&self) -> Option<GpuRequest> {
        if let Some(leased) = &self.gpus {
            return Some(GpuRequest::Devices(leased.uuids()));
        }
        let job = self.shared.wf.jobs.get(&self.job_id)?;
        Some(match &job.gpus.as_ref()?.devices {
            GpuDevices::All => GpuRequest::All,
            GpuDevices::Count(n) => GpuRequest::Count(*n),
            GpuDevices::Ids(ids) => {
                GpuRequest::Devices(ids.iter().map(|i| i.value.clone()).collect())
            }
            GpuDevices::Expr(_) => return None,
        })
    }

    async fn run_script(
        &mut self,
        step: &Step,
        source: &Spanned<String>,
        key: &str,
        scope: &Scope,
        env: IndexMap<String, String>,
        cancel: CancellationToken,
    ) -> Result<StepResult, String> {
        let file = scope.file.clone();
        let ctx = self.ctx(scope, Some(&env));
        let job = &self.shared.wf.jobs[&self.job_id];
        let defaults =
            |pick: fn(&crate::workflow::model::RunDefaults) -> &Option<Spanned<String>>| {
                job.defaults
                    .run
                    .as_ref()
                    .and_then(|d| pick(d).clone())
                    .or_else(|| {
                        self.shared
                            .wf
                            .defaults
                            .run
                            .as_ref()
                            .and_then(|d| pick(d).clone())
                    })
            };
        let shell_text = match step.shell.clone().or_else(|| defaults(|d| &d.shell)) {
            Some(s) => {
                // The shell is a command line: a value an outsider chooses must not pick it.
                if let Ok(t) = parse_template(&s.value)
                    && let Some(context) = t
                        .expressions()
                        .find_map(|(e, _)| script::untrusted_context(e))
                {
                    return Err(format!(
                        "{}: `shell` reads `{context}`, which anyone who can push a branch or commit chooses (help: name the shell in the workflow)",
                        file.location(s.span)
                    ));
                }
                eval_string(&s, &ctx, &file)?
            }
            None => String::new(),
        };
        let shell = Shell::parse(&shell_text);
        let rendered = script::render(&source.value, shell.is_posix(), &ctx).map_err(|e| {
            let span = match &e {
                script::ScriptError::Expr(x) => source.span.inner(x.span.clone()),
                script::ScriptError::Untrusted { .. } => source.span,
            };
            let mut m = format!("{}: {e}", file.location(span));
            if let Some(h) = e.hint() {
                m.push_str(&format!(" (help: {h})"));
            }
            m
        })?;
        let working_directory = match step
            .working_directory
            .clone()
            .or_else(|| defaults(|d| &d.working_directory))
        {
            Some(w) => Some(eval_string(&w, &ctx, &file)?),
            None => None,
        };
        let mut run_env = self.github_env();
        let on_host = step.container.is_none() && self.job_container.is_none();
        if let Some(leased) = &self.gpus {
            run_env.insert("GPUFLOW_GPUS".into(), leased.indexes_text());
            // On the host nothing else hides the other GPUs; in a container the runtime
            // exposes only the leased ones already.
            if on_host {
                run_env.insert("CUDA_VISIBLE_DEVICES".into(), leased.uuids().join(","));
            }
        }
        run_env.extend(env);
        run_env.extend(rendered.env);
        let run = ScriptRun {
            key: key.into(),
            script: rendered.text,
            shell,
            env: run_env,
            working_directory,
        };
        let named;
        let runner: &dyn ScriptRunner = if let Some(c) = &step.container {
            let name = eval_string(c, &ctx, &file)?;
            let grace = self.shared.opts.grace;
            let Some((docker, started)) = self
                .containers
                .as_ref()
                .and_then(|cs| Some((cs.docker.clone(), cs.started.get(&name)?)))
            else {
                return Err(format!(
                    "{}: no container `{name}` is running in this job",
                    file.location(c.span)
                ));
            };
            named = ContainerRunner::new(
                docker,
                started.id.clone(),
                name.clone(),
                grace,
                started.shell.clone(),
            );
            &named
        } else if let Some(jc) = &self.job_container {
            jc
        } else {
            &self.host
        };
        let lines: LineFn = {
            let (shared, jref, key) = (self.shared.clone(), self.jref.clone(), key.to_string());
            // Per stream, the end of a cut line's piece held back until the next piece shows
            // whether a secret straddles the cut (`Masker::mask_piece`). The one masking of
            // events outside the sink, which sees one piece at a time and so never a secret cut
            // in two.
            let held: std::sync::Mutex<[String; 3]> = std::sync::Mutex::default();
            Arc::new(move |stream, text: String, continues| {
                shared.masker.observe(&text);
                let masked = match held.lock() {
                    Ok(mut held) => {
                        shared
                            .masker
                            .mask_piece(&mut held[stream as usize], &text, continues)
                    }
                    // Masked by the sink, piece by piece.
                    Err(_) => Some(text),
                };
                let Some(text) = masked else { return };
                shared.emit(EventKind::LogLine {
                    job: jref.clone(),
                    step: Some(key.clone()),
                    container: None,
                    stream,
                    text,
                });
            })
        };
        let exit = runner
            .run(&run, lines, cancel)
            .await
            .map_err(|e| format!("on {}: {e}", runner.describe()))?;
        let outcome = match exit.code {
            Some(0) => StepOutcome::Success,
            Some(code) => {
                self.say(Some(key), &format!("the script exited with code {code}"));
                StepOutcome::Failure
            }
            None => StepOutcome::Cancelled,
        };
        if !exit.summary_file.trim().is_empty() {
            self.shared.emit(EventKind::StepSummary {
                job: self.jref.clone(),
                step: key.into(),
                markdown: exit.summary_file,
            });
        }
        let outputs =
            output_file::parse(&exit.output_file, "$GITHUB_OUTPUT").map_err(|e| e.to_string())?;
        let added = output_file::parse(&exit.env_file, "$GITHUB_ENV").map_err(|e| e.to_string())?;
        self.env.extend(added);
        Ok(StepResult { outcome, outputs })
    }

    /// The variables every script sees, as on GitHub's runners.
    fn github_env(&self) -> IndexMap<String, String> {
        let g = self.contexts.get("github");
        let field = |name: &str| {
            g.and_then(|g| g.get_property(name))
                .map(Value::to_expr_string)
                .unwrap_or_default()
        };
        let mut env = IndexMap::new();
        env.insert("CI".into(), "true".into());
        env.insert("GPUFLOW".into(), "true".into());
        for (var, name) in [
            ("GITHUB_WORKSPACE", "workspace"),
            ("GITHUB_RUN_ID", "run_id"),
            ("GITHUB_SHA", "sha"),
            ("GITHUB_REF", "ref"),
            ("GITHUB_REF_NAME", "ref_name"),
            ("GITHUB_WORKFLOW", "workflow"),
            ("GITHUB_EVENT_NAME", "event_name"),
        ] {
            env.insert(var.into(), field(name));
        }
        env.insert("GITHUB_JOB".into(), self.job_id.clone());
        env.insert("GPUFLOW_RUN_ID".into(), self.shared.opts.run_id.clone());
        env.insert("RUNNER_OS".into(), runner_os().into());
        env.insert("RUNNER_ARCH".into(), runner_arch().into());
        env.insert(
            "RUNNER_TEMP".into(),
            self.temp.join("host").display().to_string(),
        );
        env
    }

    fn job_outputs(&self, job: &Job, scope: &Scope) -> IndexMap<String, String> {
        let ctx = self.ctx(scope, None);
        let mut out = IndexMap::new();
        for (name, value) in &job.outputs {
            match eval_string(value, &ctx, &scope.file) {
                Ok(v) if self.shared.masker.mask(&v) != v => {
                    self.shared.emit(EventKind::Warning {
                        job: Some(self.jref.clone()),
                        message: format!(
                            "the job output `{name}` holds a secret and is not passed on"
                        ),
                    });
                }
                Ok(v) => {
                    out.insert(name.clone(), v);
                }
                Err(message) => self.say(None, &format!("output `{name}`: {message}")),
            }
        }
        out
    }
}

fn runner_os() -> &'static str {
    match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "macOS",
        "windows" => "Windows",
        other => other,
    }
}

fn runner_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "X64",
        "aarch64" => "ARM64",
        "x86" => "X86",
        "arm" => "ARM",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_of_any_size_become_durations() {
        assert_eq!(minutes_duration(0.5), Duration::from_secs(30));
        assert_eq!(minutes_duration(1e300), Duration::MAX);
        assert_eq!(minutes_text(0.02), "1.2s");
        assert_eq!(minutes_text(90.0), "90 minutes");
    }
}
