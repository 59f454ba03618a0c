//! Scheduling the runs of a plan: a run starts as soon as every run of each job it needs has
//! finished (a real DAG, not levels), at most `max-parallel` cells of a job at once; a failed
//! cell cancels its unfinished siblings under `fail-fast`; a job's `if:` is evaluated with
//! `needs` when it becomes ready (default `success()`: every needed job succeeded).
//!
//! Strategy: one loop owns all scheduling state. It starts whatever is ready, then waits for
//! the next run to finish (or the run to be cancelled), and repeats; job runs are tasks that
//! report back through their join handles, so no state is shared between them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::engines::Engines;
use super::evaluate::object;
use super::executor::{JobOutcome, run_job};
use super::options::RunOptions;
use super::shared::Shared;
use crate::diag::{Diagnostics, ExitCode};
use crate::events::Masker;
use crate::events::{EventKind, EventSink, JobRef, JobResult, JobSummary};
use crate::expr::{JobStatus, MapContext, Value, parse_condition, parse_template};
use crate::gpu::{JobGpus, Leased};
use crate::plan::Plan;
use crate::workflow::model::{BoolOrExpr, Job, Workflow};

/// How a run ended.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub run_id: String,
    pub result: JobResult,
    pub jobs: Vec<JobSummary>,
    pub log_dir: PathBuf,
    /// What ran before any job started.
    pub preflight: super::PreflightReport,
    /// Hosts whose engine could not be reached when a job needed it, each with why.
    pub unreachable: Vec<String>,
    /// The run's answer: benchmark figures, verdicts, reports (also its last event).
    pub headline: super::Headline,
}

impl RunReport {
    /// The documented exit code: 0, 1 (a job failed), 4 (a host's engine could not be
    /// reached), 130 (cancelled).
    pub fn exit_code(&self) -> ExitCode {
        if self.result == JobResult::Failure && !self.unreachable.is_empty() {
            return ExitCode::Infrastructure;
        }
        match self.result {
            JobResult::Success | JobResult::Skipped => ExitCode::Success,
            JobResult::Failure => ExitCode::Failure,
            JobResult::Cancelled => ExitCode::Interrupted,
        }
    }
}

/// Why a run did not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Steps the engine cannot run, found before anything started.
    #[error("the workflow uses steps that cannot run yet")]
    Refused(Diagnostics),
    /// `--input` values that do not fit the workflow's inputs.
    #[error("{}", .0.message)]
    Input(super::inputs::InputError),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    Done,
}

/// Runs `plan` (of `wf`) to its end. Nothing starts when the workflow uses a step the engine
/// cannot run or the inputs do not fit. `cancel` stops the run: running steps are stopped,
/// `always()` steps run, containers go, and the result is `cancelled`.
#[tracing::instrument(name = "run", skip_all, fields(run = %opts.run_id))]
pub async fn run(
    wf: Arc<Workflow>,
    plan: Plan,
    opts: RunOptions,
    sink: Arc<dyn EventSink>,
    engines: impl Into<Engines>,
    cancel: CancellationToken,
) -> Result<RunReport, RunError> {
    let refused = super::preflight::check(&wf);
    if refused.has_errors() {
        return Err(RunError::Refused(refused));
    }
    let inputs = super::inputs::resolve(&wf, &opts.inputs).map_err(RunError::Input)?;
    let masker = Arc::new(Masker::new(opts.secrets.values().cloned()));
    let headline = Arc::new(crate::events::HeadlineSink::new(sink));
    // Every event is masked before any sink (the headline's included) sees it: the one place
    // secrets are taken out of what the run shows and stores (docs/running.md#secrets).
    let masked: Arc<dyn EventSink> = Arc::new(crate::events::MaskingSink::new(
        headline.clone(),
        masker.clone(),
    ));
    let base = base_contexts(&wf, &plan, &opts, inputs);
    let shared = Arc::new(Shared {
        wf: wf.clone(),
        sink: masked,
        masker,
        engines: engines.into(),
        started: Instant::now(),
        base,
        opts,
    });
    shared.emit(EventKind::RunStarted {
        run_id: shared.opts.run_id.clone(),
        workflow: plan.workflow.clone(),
        log_dir: shared.opts.log_dir.display().to_string(),
        jobs: plan.jobs.len(),
    });

    let runs = plan.jobs;
    let refs: Vec<JobRef> = runs
        .iter()
        .map(|r| JobRef {
            job: r.job_id.clone(),
            cell: r.cell,
            display: r.display_name.clone(),
        })
        .collect();
    for r in &refs {
        shared.emit(EventKind::JobQueued { job: r.clone() });
    }
    // Before anything long starts: the checks whose answers cannot change by their step.
    let preflight = super::preflight::run(&shared, &runs, &refs, &cancel).await;
    if !preflight.passed() || shared.opts.preflight_only {
        let (result, reason) = if preflight.passed() {
            (
                JobResult::Success,
                "only the preflight checks were asked for (--preflight-only)",
            )
        } else {
            (
                JobResult::Failure,
                "a preflight check failed; nothing was started",
            )
        };
        for r in &refs {
            finish_unstarted(&shared, r, JobResult::Skipped, reason);
        }
        shared.emit(EventKind::RunFinished {
            run_id: shared.opts.run_id.clone(),
            result,
        });
        let headline = end_with_headline(&shared, &headline, result);
        return Ok(masked_report(
            &shared.masker,
            RunReport {
                run_id: shared.opts.run_id.clone(),
                result,
                jobs: refs
                    .iter()
                    .map(|r| summary(r, JobResult::Skipped, false))
                    .collect(),
                log_dir: shared.opts.log_dir.clone(),
                preflight,
                unreachable: shared.engines.failures(),
                headline,
            },
        ));
    }
    let mut state = vec![State::Pending; runs.len()];
    let mut results: Vec<Option<JobSummary>> = vec![None; runs.len()];
    let mut outputs: HashMap<String, IndexMap<String, String>> = HashMap::new();
    let mut fail_fast: HashMap<String, CancellationToken> = HashMap::new();
    let mut tasks: JoinSet<(usize, JobOutcome, Duration)> = JoinSet::new();
    // Which job run each task is, so a task that panicked (and so returned nothing) can still
    // be ended: without this its job stayed `Running` and the loop below spun forever.
    let mut task_jobs: HashMap<tokio::task::Id, (usize, Instant)> = HashMap::new();
    // Runs that are ready but wait for GPUs; each says so once (`job_waiting`).
    let mut waiting = vec![false; runs.len()];
    // Jobs the plan skipped (an empty matrix) count as skipped for those that need them.
    let skipped_jobs: Vec<String> = plan.skipped.iter().map(|s| s.job_id.clone()).collect();

    loop {
        for i in 0..runs.len() {
            if state[i] != State::Pending {
                continue;
            }
            let planned = &runs[i];
            let jref = &refs[i];
            let needed_done = planned.needs.iter().all(|need| {
                runs.iter()
                    .zip(&state)
                    .filter(|(r, _)| &r.job_id == need)
                    .all(|(_, s)| *s == State::Done)
            });
            if !needed_done {
                continue;
            }
            let token = fail_fast
                .entry(planned.job_id.clone())
                .or_insert_with(|| cancel.child_token())
                .clone();
            if cancel.is_cancelled() || token.is_cancelled() {
                let reason = if cancel.is_cancelled() {
                    "the run was cancelled"
                } else {
                    "another cell of the matrix failed (fail-fast)"
                };
                finish_unstarted(&shared, jref, JobResult::Cancelled, reason);
                state[i] = State::Done;
                results[i] = Some(summary(jref, JobResult::Cancelled, false));
                continue;
            }
            let running = runs
                .iter()
                .zip(&state)
                .filter(|(r, s)| r.job_id == planned.job_id && **s == State::Running)
                .count();
            if planned.max_parallel.is_some_and(|m| running >= m as usize) {
                continue;
            }
            let needs = needs_context(planned, &runs, &results, &outputs, &skipped_jobs);
            let needs_ok = planned.needs.iter().all(|n| {
                needs
                    .get_property(n)
                    .and_then(|j| j.get_property("result"))
                    .is_some_and(|r| r.to_expr_string() == "success")
            });
            let job = &wf.jobs[&planned.job_id];
            let mut ctx = MapContext::new().with_status(if needs_ok {
                JobStatus::Success
            } else {
                JobStatus::Failure
            });
            for (k, v) in &shared.base {
                ctx.insert(k.clone(), v.clone());
            }
            ctx.insert("needs", needs.clone());
            ctx.insert("matrix", matrix_value(planned));
            let run_it = match &job.condition {
                None => Ok(needs_ok),
                Some(c) => parse_condition(&c.value)
                    .and_then(|cond| cond.evaluate(&ctx))
                    .map_err(|e| {
                        format!(
                            "{}: `if` failed: {}",
                            wf.file.location(c.span.inner(e.span.clone())),
                            e.message
                        )
                    }),
            };
            match run_it {
                Ok(true) => {}
                Ok(false) => {
                    let reason = if needs_ok {
                        "its `if` condition is false".to_string()
                    } else {
                        "a job it needs did not succeed".to_string()
                    };
                    finish_unstarted(&shared, jref, JobResult::Skipped, &reason);
                    state[i] = State::Done;
                    results[i] = Some(summary(jref, JobResult::Skipped, false));
                    continue;
                }
                Err(message) => {
                    finish_unstarted(&shared, jref, JobResult::Failure, &message);
                    state[i] = State::Done;
                    results[i] = Some(summary(jref, JobResult::Failure, false));
                    continue;
                }
            }
            // GPUs are leased before the job starts and held for its whole life; a job that
            // does not fit now waits (others that fit start meanwhile), one that can never fit
            // fails at once.
            let gpus = match lease_gpus(&shared, job, &ctx, jref).await {
                GpuStart::Go(gpus) => gpus,
                GpuStart::Wait(reason) => {
                    if !waiting[i] {
                        waiting[i] = true;
                        shared.emit(EventKind::JobWaiting {
                            job: jref.clone(),
                            reason,
                        });
                    }
                    continue;
                }
                GpuStart::Fail(message) => {
                    finish_unstarted(&shared, jref, JobResult::Failure, &message);
                    state[i] = State::Done;
                    results[i] = Some(summary(jref, JobResult::Failure, false));
                    continue;
                }
            };
            if let Some(g) = &gpus {
                shared.emit(EventKind::GpusLeased {
                    job: jref.clone(),
                    indexes: g.devices.iter().map(|(i, _)| *i).collect(),
                    uuids: g.uuids(),
                    stand_in: g.stand_in,
                });
            }
            state[i] = State::Running;
            shared.emit(EventKind::JobStarted { job: jref.clone() });
            let (shared2, planned2, jref2) = (shared.clone(), planned.clone(), jref.clone());
            let task = tasks.spawn(async move {
                let started = Instant::now();
                let outcome = run_job(shared2, planned2, jref2, needs, token, gpus).await;
                (i, outcome, started.elapsed())
            });
            task_jobs.insert(task.id(), (i, Instant::now()));
        }

        // GPUs freed by this run are seen when its job ends; those freed by other gpuflow
        // processes only by looking again.
        let gpu_wait = (0..runs.len()).any(|i| state[i] == State::Pending && waiting[i]);
        if tasks.is_empty() {
            if state.iter().all(|s| *s == State::Done) {
                break;
            }
            if gpu_wait && !cancel.is_cancelled() {
                tokio::select! {
                    () = tokio::time::sleep(GPU_POLL) => {}
                    () = cancel.cancelled() => {}
                }
                continue;
            }
            // Nothing runs and nothing can start: only cancellation can change that. It cannot
            // happen for a valid plan, but a wait here would hang the run.
            if !cancel.is_cancelled() {
                cancel.cancel();
                continue;
            }
            // Cancelled and still not done: a job run is in a state nothing will change (a
            // bug). End it rather than loop forever without yielding (which also starved
            // the Ctrl-C handler).
            for i in 0..runs.len() {
                if state[i] != State::Done {
                    finish_unstarted(
                        &shared,
                        &refs[i],
                        JobResult::Cancelled,
                        "the run was cancelled",
                    );
                    state[i] = State::Done;
                    results[i] = Some(summary(&refs[i], JobResult::Cancelled, false));
                }
            }
            break;
        }
        let joined = tokio::select! {
            joined = tasks.join_next() => joined,
            () = cancel.cancelled(), if !cancel.is_cancelled() => continue,
            () = tokio::time::sleep(GPU_POLL), if gpu_wait => continue,
        };
        let Some(joined) = joined else { continue };
        let (i, outcome, duration) = match joined {
            Ok(done) => {
                task_jobs.retain(|_, (j, _)| *j != done.0);
                done
            }
            Err(e) => {
                // A panic outside any step (steps contain their own) is a bug in gpuflow: the
                // job fails with the panic's message, and the run goes on and ends; what the job
                // started is removed by the run's clean-up below.
                let Some((i, started)) = task_jobs.remove(&e.id()) else {
                    continue;
                };
                let why = if e.is_panic() {
                    super::panic_text::panic_text(e.into_panic().as_ref())
                } else {
                    "its task was stopped".to_string()
                };
                shared.emit(EventKind::Warning {
                    job: Some(refs[i].clone()),
                    message: format!(
                        "the job failed: gpuflow panicked: {why} (help: this is a bug in gpuflow; please report it with this message and the workflow)"
                    ),
                });
                shared.emit(EventKind::JobFinished {
                    job: refs[i].clone(),
                    result: JobResult::Failure,
                    duration: started.elapsed(),
                });
                (
                    i,
                    JobOutcome {
                        result: JobResult::Failure,
                        outputs: IndexMap::new(),
                    },
                    started.elapsed(),
                )
            }
        };
        let planned = &runs[i];
        let job = &wf.jobs[&planned.job_id];
        let allowed = outcome.result == JobResult::Failure
            && job_continue_on_error(job.continue_on_error.as_ref(), &shared, planned);
        if allowed {
            shared.emit(EventKind::Warning {
                job: Some(refs[i].clone()),
                message: "the job failed; `continue-on-error` lets the run go on".into(),
            });
        }
        if outcome.result == JobResult::Failure
            && !allowed
            && planned.fail_fast
            && planned.cells > 1
            && let Some(t) = fail_fast.get(&planned.job_id)
        {
            t.cancel();
        }
        outputs
            .entry(planned.job_id.clone())
            .or_default()
            .extend(outcome.outputs);
        state[i] = State::Done;
        results[i] = Some(JobSummary {
            job: refs[i].clone(),
            result: outcome.result,
            duration,
            failure_allowed: allowed,
        });
    }

    let jobs: Vec<JobSummary> = results.into_iter().flatten().collect();
    let result = if cancel.is_cancelled() {
        JobResult::Cancelled
    } else if jobs
        .iter()
        .any(|j| j.result == JobResult::Failure && !j.failure_allowed)
    {
        JobResult::Failure
    } else if jobs.iter().any(|j| j.result == JobResult::Cancelled) {
        // A cell cancelled by fail-fast: its sibling's failure already failed the run, unless
        // that failure was allowed.
        JobResult::Failure
    } else {
        JobResult::Success
    };
    if !shared.opts.keep_containers {
        // Each job removed its own; this catches what a failed removal or a crash left.
        for (host, docker) in shared.engines.connected() {
            if let Err(e) = docker.remove_run(&shared.opts.run_id).await {
                shared.emit(EventKind::Warning {
                    job: None,
                    message: format!("could not remove the run's containers on `{host}`: {e}"),
                });
            }
        }
    }
    shared.emit(EventKind::RunFinished {
        run_id: shared.opts.run_id.clone(),
        result,
    });
    let headline = end_with_headline(&shared, &headline, result);
    Ok(masked_report(
        &shared.masker,
        RunReport {
            run_id: shared.opts.run_id.clone(),
            result,
            jobs,
            log_dir: shared.opts.log_dir.clone(),
            preflight,
            unreachable: shared.engines.failures(),
            headline,
        },
    ))
}

/// `report` with the texts `gpuflow run` prints of it masked, as its events are: the jobs'
/// names in the closing summary hold matrix values and evaluated `name:`s, the unreachable
/// hosts their engines' errors. The headline came through the masking sink already; the run's
/// id and folder are paths, left as they are.
fn masked_report(masker: &Masker, mut report: RunReport) -> RunReport {
    for j in &mut report.jobs {
        j.job.job = masker.mask(&j.job.job);
        j.job.display = masker.mask(&j.job.display);
    }
    for u in &mut report.unreachable {
        *u = masker.mask(u);
    }
    report
}

/// The run's last event: its headline, from what the steps said on the way.
fn end_with_headline(
    shared: &Shared,
    sink: &crate::events::HeadlineSink,
    result: JobResult,
) -> super::Headline {
    let headline = sink.headline(
        &shared.opts.run_id,
        result,
        &shared.opts.log_dir.display().to_string(),
    );
    shared.emit(EventKind::RunHeadline(headline.clone()));
    headline
}

/// How often a run with jobs waiting for GPUs looks whether another process freed some.
const GPU_POLL: Duration = Duration::from_millis(250);

/// What a ready job's GPUs allow.
enum GpuStart {
    /// Start, with these GPUs leased (`None`: it asks for none, or nobody said what its host
    /// has, in which case its `gpus:` goes to Docker as written).
    Go(Option<JobGpus>),
    /// Wait; why, in words.
    Wait(String),
    /// It cannot ever start; why.
    Fail(String),
}

async fn lease_gpus(shared: &Shared, job: &Job, ctx: &MapContext, jref: &JobRef) -> GpuStart {
    let Some(gpus) = &job.gpus else {
        return GpuStart::Go(None);
    };
    let request = match super::job_gpus::request(gpus, ctx, &shared.wf.file) {
        Ok(Some(request)) => request,
        Ok(None) => return GpuStart::Go(None),
        Err(message) => return GpuStart::Fail(format!("its `gpus` failed: {message}")),
    };
    let Some(host) = shared.engines.gpus_for(jref) else {
        return GpuStart::Go(None);
    };
    let holder = crate::gpu::lease::holder_text(&shared.opts.run_id, &jref.display);
    match host.try_lease(&request, &holder).await {
        Ok(Leased::Now(gpus)) => GpuStart::Go(Some(gpus)),
        Ok(Leased::Wait) => {
            let (free, total) = host.free_count().await;
            GpuStart::Wait(format!(
                "waiting for {} ({free} of {total} free)",
                request.describe()
            ))
        }
        // "cannot run: the job asks for 9 GPUs, and the host has 8 (host `local`)".
        Ok(Leased::Never(why)) => GpuStart::Fail(match shared.engines.host_of(jref) {
            Some(name) => format!("{why} (host `{name}`)"),
            None => why,
        }),
        Err(why) => GpuStart::Fail(why),
    }
}

fn summary(job: &JobRef, result: JobResult, allowed: bool) -> JobSummary {
    JobSummary {
        job: job.clone(),
        result,
        duration: Duration::ZERO,
        failure_allowed: allowed,
    }
}

/// A run that never starts still ends: `job_skipped` (or `job_cannot_run`, for a failure) says
/// why, `job_finished` gives its result, so every queued run gets exactly one `job_finished`.
fn finish_unstarted(shared: &Shared, job: &JobRef, result: JobResult, reason: &str) {
    // A job that fails without starting is not "skipped": it says once that it cannot run.
    shared.emit(if result == JobResult::Failure {
        EventKind::JobCannotRun {
            job: job.clone(),
            reason: reason.into(),
        }
    } else {
        EventKind::JobSkipped {
            job: job.clone(),
            reason: reason.into(),
        }
    });
    shared.emit(EventKind::JobFinished {
        job: job.clone(),
        result,
        duration: Duration::ZERO,
    });
}

fn matrix_value(planned: &crate::plan::PlannedJob) -> Value {
    Value::Object(
        planned
            .matrix
            .iter()
            .map(|(k, v)| (k.clone(), Value::from_json(v.clone())))
            .collect(),
    )
}

/// `needs.<job>.result` and `.outputs` for the jobs `planned` needs. A matrix job's result is
/// `failure` if any cell failed, `cancelled` if any was cancelled, `skipped` if all were.
fn needs_context(
    planned: &crate::plan::PlannedJob,
    runs: &[crate::plan::PlannedJob],
    results: &[Option<JobSummary>],
    outputs: &HashMap<String, IndexMap<String, String>>,
    skipped_jobs: &[String],
) -> Value {
    let mut needs = IndexMap::new();
    for need in &planned.needs {
        let cells: Vec<JobResult> = runs
            .iter()
            .zip(results)
            .filter(|(r, _)| &r.job_id == need)
            .filter_map(|(_, s)| {
                s.as_ref().map(|s| {
                    if s.failure_allowed {
                        JobResult::Success
                    } else {
                        s.result
                    }
                })
            })
            .collect();
        let result = if cells.contains(&JobResult::Failure) {
            JobResult::Failure
        } else if cells.contains(&JobResult::Cancelled) {
            JobResult::Cancelled
        } else if cells.is_empty() && skipped_jobs.contains(need)
            || !cells.is_empty() && cells.iter().all(|c| *c == JobResult::Skipped)
        {
            JobResult::Skipped
        } else {
            JobResult::Success
        };
        let outs = outputs
            .get(need)
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect()
            })
            .unwrap_or_default();
        needs.insert(
            need.clone(),
            object([
                ("result", Value::String(result.as_str().into())),
                ("outputs", Value::Object(outs)),
            ]),
        );
    }
    Value::Object(needs)
}

fn job_continue_on_error(
    c: Option<&BoolOrExpr>,
    shared: &Shared,
    planned: &crate::plan::PlannedJob,
) -> bool {
    match c {
        None => false,
        Some(BoolOrExpr::Bool(b)) => *b,
        Some(BoolOrExpr::Expr(e)) => {
            let mut ctx = MapContext::new();
            for (k, v) in &shared.base {
                ctx.insert(k.clone(), v.clone());
            }
            ctx.insert("matrix", matrix_value(planned));
            parse_template(&e.value)
                .and_then(|t| t.evaluate(&ctx))
                .is_ok_and(|v| v.is_truthy())
        }
    }
}

/// `github` (and its alias `gpuflow`), `inputs`, `secrets` and `vars`.
fn base_contexts(
    wf: &Workflow,
    plan: &Plan,
    opts: &RunOptions,
    inputs: Value,
) -> IndexMap<String, Value> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&opts.workspace)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    // A triggered run takes all of it from its event; a run by hand from the checkout.
    let (event_name, sha, git_ref, ref_name, ref_type, event) = match &opts.event {
        Some(e) => (
            e.event_name.clone(),
            e.sha.clone(),
            e.git_ref.clone(),
            e.ref_name.clone(),
            e.ref_type.clone(),
            Value::from_json(e.event.clone()),
        ),
        None => {
            let git_ref = git(&["symbolic-ref", "-q", "HEAD"]);
            let ref_name = git_ref
                .strip_prefix("refs/heads/")
                .unwrap_or(&git_ref)
                .to_string();
            (
                "workflow_dispatch".to_string(),
                git(&["rev-parse", "HEAD"]),
                git_ref,
                ref_name,
                "branch".to_string(),
                object([("inputs", inputs.clone())]),
            )
        }
    };
    let actor = opts.event.as_ref().map_or_else(
        || std::env::var("USER").unwrap_or_else(|_| "gpuflow".into()),
        |e| e.actor.clone(),
    );
    let repository = opts.event.as_ref().map_or_else(
        || {
            opts.workspace
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        },
        |e| e.repository.clone(),
    );
    let s = |v: &str| Value::String(v.to_string());
    let workspace = opts.workspace.display().to_string();
    let github = object([
        ("run_id", s(&opts.run_id)),
        ("run_number", Value::Number(1.0)),
        ("run_attempt", Value::Number(1.0)),
        ("workflow", s(&plan.workflow)),
        ("workspace", s(&workspace)),
        ("event_name", s(&event_name)),
        ("event", event),
        ("sha", s(&sha)),
        ("ref", s(&git_ref)),
        ("ref_name", s(&ref_name)),
        ("ref_type", s(&ref_type)),
        ("head_ref", s("")),
        ("base_ref", s("")),
        ("actor", s(&actor)),
        ("repository", s(&repository)),
        ("server_url", s("")),
        ("workflow_file", s(&wf.file.name)),
    ]);
    let strings = |m: &IndexMap<String, String>| {
        Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    };
    IndexMap::from([
        ("github".to_string(), github.clone()),
        ("gpuflow".to_string(), github),
        ("inputs".to_string(), inputs),
        ("secrets".to_string(), strings(&opts.secrets)),
        ("vars".to_string(), strings(&opts.vars)),
    ])
}
