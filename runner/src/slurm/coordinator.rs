//! A run on a Slurm cluster, from this machine (a terminal, or the worker behind a git hook):
//! every planned job submitted at once, each carrying its `needs` as Slurm dependencies, so
//! Slurm orders, places and queues the whole run and it finishes even if this process dies;
//! then the jobs followed ([`super::follow`]) into the same events, live view, logs and
//! headline as a run on a Docker host.

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;

use tokio_util::sync::CancellationToken;

use super::bundle::{Bundle, Manifest, ManifestJob};
use super::follow::{Follower, Sibling, Tracked};
use super::submit::{Ask, Submission, ask, base_context, environment};
use super::voice::{Voice, run_result, summary};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::RunOptions;
use crate::engine::dispatcher::{RunError, RunReport};
use crate::engine::preflight::PreflightReport;
use crate::events::{
    EventKind, EventSink, HeadlineSink, JobRef, JobResult, JobSummary, Masker, MaskingSink,
};
use crate::hosts::Host;
use crate::plan::Plan;
use crate::workflow::model::Workflow;

/// Runs `plan` on the Slurm cluster `host`; `cancel` (Ctrl-C) cancels every job of the run
/// with `scancel` and waits until Slurm has ended them.
pub async fn run(
    wf: Arc<Workflow>,
    plan: Plan,
    opts: RunOptions,
    sink: Arc<dyn EventSink>,
    host: &Host,
    cancel: CancellationToken,
) -> Result<RunReport, RunError> {
    let settings = host.slurm.clone().expect("a Slurm host");
    refuse_what_a_cluster_cannot_run(&wf, opts.preflight_only)?;
    let inputs = crate::engine::inputs::resolve(&wf, &opts.inputs).map_err(RunError::Input)?;
    let masker = Arc::new(Masker::new(opts.secrets.values().cloned()));
    let headline = Arc::new(HeadlineSink::new(sink));
    let voice = Voice::new(
        Arc::new(MaskingSink::new(headline.clone(), masker.clone())),
        Instant::now(),
    );
    voice.emit(EventKind::RunStarted {
        run_id: opts.run_id.clone(),
        workflow: plan.workflow.clone(),
        log_dir: opts.log_dir.display().to_string(),
        jobs: plan.jobs.len(),
    });
    let refs: Vec<JobRef> = plan
        .jobs
        .iter()
        .map(|p| JobRef {
            job: p.job_id.clone(),
            cell: p.cell,
            display: p.display_name.clone(),
        })
        .collect();
    for (r, planned) in refs.iter().zip(&plan.jobs) {
        voice.emit(EventKind::JobQueued {
            job: r.clone(),
            matrix: crate::engine::evaluate::matrix_text(planned),
            needs: planned.needs.clone(),
        });
    }
    let tracked = match submit_all(&wf, &plan, &opts, &settings, host, &inputs, &refs, &voice).await
    {
        Ok(tracked) => tracked,
        Err(failed) => {
            return Ok(finish(
                &voice,
                &headline,
                &masker,
                &opts,
                JobResult::Failure,
                failed,
            ));
        }
    };
    let follower = Follower::new(tracked, Sibling::of(&plan), voice.clone(), cancel.clone());
    let jobs = follower.follow().await;
    let result = run_result(&jobs, cancel.is_cancelled());
    Ok(finish(&voice, &headline, &masker, &opts, result, jobs))
}

/// What a run on a cluster does not do yet, refused before anything is submitted.
fn refuse_what_a_cluster_cannot_run(wf: &Workflow, preflight_only: bool) -> Result<(), RunError> {
    let mut problems = Diagnostics::new();
    if preflight_only {
        problems.push(
            Diagnostic::unlocated("`--preflight-only` cannot run on a Slurm host: its checks run where each job runs, on the node Slurm places it on")
                .hint("run the preflight checks on a Docker host (`--host NAME --preflight-only`), or submit the run"),
        );
    }
    for (id, job) in &wf.jobs {
        for step in &job.steps {
            if let Some(keep) = step.with.get("keep-warm") {
                problems.push(
                    Diagnostic::error(&wf.file, keep.span, format!("job `{id}`: `keep-warm` cannot be used on a Slurm host"))
                        .label("the server would outlive its job's Slurm allocation, on GPUs Slurm gives to the next job")
                        .hint("remove `keep-warm` for the cluster (a matrix's cells of one server group still share their server within a run on a Docker host), or run on a Docker host"),
                );
            }
        }
        if job.strategy.as_ref().is_some_and(|s| s.search.is_some()) {
            problems.push(
                Diagnostic::error(&wf.file, job.id.span, format!("job `{id}`: `strategy.search` cannot run on a Slurm host yet"))
                    .label("a search decides its next cells from the last ones' results, one at a time")
                    .hint("run the search on a Docker host (`runs-on` or `--host`), or run the whole grid on the cluster without `search`"),
            );
        }
    }
    refused(problems)
}

fn refused(problems: Diagnostics) -> Result<(), RunError> {
    if problems.has_errors() {
        Err(RunError::Refused(problems))
    } else {
        Ok(())
    }
}

/// How many `sbatch` run at once while a level is submitted: enough to hide each one's wait
/// for slurmctld, few enough not to flood a shared controller.
const SUBMITTED_AT_ONCE: usize = 8;

/// Every job submitted in the plan's order of levels, so the Slurm ids of the jobs each needs
/// are known when it is submitted. A job that cannot be submitted ends the run: what was
/// submitted is cancelled, nothing is left queued.
#[allow(clippy::too_many_arguments)]
async fn submit_all(
    wf: &Workflow,
    plan: &Plan,
    opts: &RunOptions,
    settings: &crate::hosts::SlurmSettings,
    host: &Host,
    inputs: &crate::expr::Value,
    refs: &[JobRef],
    voice: &Voice,
) -> Result<Vec<Tracked>, Vec<JobSummary>> {
    let unsubmitted =
        |why: &str, failed_at: Option<usize>| unsubmitted(refs, voice, why, failed_at);
    let asks = asks(wf, plan, settings, &base_context(inputs, &opts.vars))
        .map_err(|(i, why)| unsubmitted(&why, Some(i)))?;
    let bundle = Bundle::create(&settings.shared_dir, &opts.run_id)
        .map_err(|why| unsubmitted(&why, None))?;
    let mut manifest =
        manifest(wf, plan, opts, host, refs).map_err(|why| unsubmitted(&why, None))?;
    bundle
        .write_manifest(&manifest)
        .map_err(|why| unsubmitted(&why, None))?;
    bundle
        .make_job_dirs(plan.jobs.len())
        .map_err(|why| unsubmitted(&why, None))?;
    let env = environment(&opts.secrets);
    let deepest = plan.jobs.iter().map(|j| j.level).max().unwrap_or(0);
    // Level by level, as a job's dependencies must exist when it is submitted; within a
    // level several `sbatch` at once, since each waits for slurmctld's answer (~15 ms here,
    // more on a busy controller) and 64 cells one after another delay the last ones' start.
    for level in 1..=deepest {
        let submissions: Vec<(usize, Vec<u64>, Vec<std::ffi::OsString>)> = (0..plan.jobs.len())
            .filter(|&i| plan.jobs[i].level == level)
            .map(|i| {
                let planned = &plan.jobs[i];
                let after: Vec<u64> = manifest
                    .jobs
                    .iter()
                    .filter(|j| planned.needs.contains(&j.job_id))
                    .filter_map(|j| j.slurm_id)
                    .collect();
                let submission = Submission {
                    settings,
                    run_id: &opts.run_id,
                    planned,
                    ask: &asks[i],
                    after: after.clone(),
                    bundle: &bundle,
                    index: i,
                    workspace: &opts.workspace,
                };
                (i, after, submission.args())
            })
            .collect();
        let answers: Vec<(usize, Vec<u64>, Result<u64, String>)> =
            futures_util::stream::iter(submissions.into_iter().map(|(i, after, args)| {
                let env = &env;
                async move { (i, after, super::client::sbatch(&args, env).await) }
            }))
            .buffered(SUBMITTED_AT_ONCE)
            .collect()
            .await;
        let mut failed = None;
        for (i, after, answer) in answers {
            match answer {
                Ok(id) => {
                    manifest.jobs[i].slurm_id = Some(id);
                    voice.say(&refs[i], submitted_text(id, &asks[i], &after));
                }
                Err(why) => {
                    failed.get_or_insert((i, why));
                }
            }
        }
        if let Some((i, why)) = failed {
            let submitted: Vec<u64> = manifest.jobs.iter().filter_map(|j| j.slurm_id).collect();
            let _ = super::client::scancel(&submitted, None).await;
            return Err(unsubmitted(
                &format!("could not submit it to Slurm: {why}"),
                Some(i),
            ));
        }
    }
    bundle
        .write_manifest(&manifest)
        .map_err(|why| unsubmitted(&why, None))?;
    super::catch_up::remember(&opts.log_dir, bundle.dir());
    Ok(manifest
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            Tracked::new(
                i,
                j.slurm_id.unwrap_or_default(),
                refs[i].clone(),
                bundle.clone(),
            )
        })
        .collect())
}

/// The run could not be submitted: the job at `failed_at` cannot run (`why`), the others are
/// skipped; each ends.
fn unsubmitted(
    refs: &[JobRef],
    voice: &Voice,
    why: &str,
    failed_at: Option<usize>,
) -> Vec<JobSummary> {
    if failed_at.is_none() {
        // No one job is at fault: the reason is the run's.
        voice.emit(EventKind::Warning {
            job: None,
            message: format!("the run could not be submitted to Slurm: {why}"),
        });
    }
    refs.iter()
        .enumerate()
        .map(|(i, r)| {
            let result = if Some(i) == failed_at {
                JobResult::Failure
            } else {
                JobResult::Skipped
            };
            voice.emit(if result == JobResult::Failure {
                EventKind::JobCannotRun {
                    job: r.clone(),
                    reason: why.to_string(),
                }
            } else {
                EventKind::JobSkipped {
                    job: r.clone(),
                    reason: "the run could not be submitted to Slurm".into(),
                }
            });
            voice.emit(EventKind::JobFinished {
                job: r.clone(),
                result,
                duration: Default::default(),
                failure: None,
            });
            summary(r, result)
        })
        .collect()
}

/// What each planned job asks Slurm for; the first that cannot be asked for, and why.
fn asks(
    wf: &Workflow,
    plan: &Plan,
    settings: &crate::hosts::SlurmSettings,
    base: &crate::expr::MapContext,
) -> Result<Vec<Ask>, (usize, String)> {
    plan.jobs
        .iter()
        .enumerate()
        .map(|(i, planned)| {
            ask(planned, &wf.jobs[&planned.job_id], base, &wf.file, settings)
                .map_err(|why| (i, why))
        })
        .collect()
}

fn submitted_text(id: u64, ask: &Ask, after: &[u64]) -> String {
    let mut parts = Vec::new();
    if ask.gpus > 0 {
        parts.push(format!(
            "{} GPU{}",
            ask.gpus,
            if ask.gpus == 1 { "" } else { "s" }
        ));
    }
    if let Some(m) = ask.minutes {
        parts.push(format!("--time {m} min"));
    }
    if !after.is_empty() {
        let ids: Vec<String> = after.iter().map(u64::to_string).collect();
        parts.push(format!("after {}", ids.join(", ")));
    }
    if parts.is_empty() {
        format!("submitted to Slurm as job {id}")
    } else {
        format!("submitted to Slurm as job {id} ({})", parts.join("; "))
    }
}

fn manifest(
    wf: &Workflow,
    plan: &Plan,
    opts: &RunOptions,
    host: &Host,
    refs: &[JobRef],
) -> Result<Manifest, String> {
    let workflow = std::path::absolute(&wf.file.name).map_err(|e| e.to_string())?;
    let text = std::fs::read(&workflow)
        .map_err(|e| format!("cannot read `{}`: {e}", workflow.display()))?;
    let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    Ok(Manifest {
        run_id: opts.run_id.clone(),
        workflow_sha256: super::sha256_hex(&text),
        workflow,
        workspace: absolute(&opts.workspace),
        host: host.name.clone(),
        gpu_inventory: host.gpu_inventory.as_deref().map(absolute),
        inputs: opts.inputs.clone(),
        vars: opts.vars.clone(),
        secrets: opts.secrets.keys().cloned().collect(),
        registries: opts.registries.clone(),
        event: opts.event.clone(),
        store: absolute(&opts.store),
        jobs: plan
            .jobs
            .iter()
            .zip(refs)
            .map(|(p, r)| ManifestJob {
                job_id: p.job_id.clone(),
                cell: p.cell,
                display: r.display.clone(),
                slurm_id: None,
            })
            .collect(),
    })
}

/// `run_finished`, the headline, and the report `gpuflow run` prints from.
fn finish(
    voice: &Voice,
    headline: &HeadlineSink,
    masker: &Masker,
    opts: &RunOptions,
    result: JobResult,
    mut jobs: Vec<JobSummary>,
) -> RunReport {
    voice.emit(EventKind::RunFinished {
        run_id: opts.run_id.clone(),
        result,
    });
    let line = headline.headline(&opts.run_id, result, &opts.log_dir.display().to_string());
    voice.emit(EventKind::RunHeadline(line.clone()));
    for j in &mut jobs {
        j.job.job = masker.mask(&j.job.job);
        j.job.display = masker.mask(&j.job.display);
    }
    RunReport {
        run_id: opts.run_id.clone(),
        result,
        jobs,
        log_dir: opts.log_dir.clone(),
        preflight: PreflightReport::default(),
        unreachable: Vec::new(),
        headline: line,
    }
}
