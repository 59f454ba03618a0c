//! `gpuflow runs`: the host's queued, running and finished triggered runs (newest last), as a
//! table or `--json`. Also how `logs` and `cancel` find a run by id or unique id prefix.

use crate::diag::{Diagnostic, ExitCode, RenderOptions, render};
use crate::trigger::{GpuflowHome, Queue, QueuedRun, RunState, queue::now};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the runs as a JSON array.
    #[arg(long)]
    pub json: bool,

    /// Show at most this many runs (the newest).
    #[arg(long, default_value_t = 30)]
    pub limit: usize,
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let queue = match open_queue(render_opts) {
        Ok(q) => q,
        Err(code) => return Ok(code),
    };
    complete_cluster_runs(&queue, &queue.list(args.limit)?);
    let runs = queue.list(args.limit)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(ExitCode::Success);
    }
    if runs.is_empty() {
        println!(
            "no triggered runs yet (`gpuflow hooks install` sets up the git hooks that queue them)"
        );
        return Ok(ExitCode::Success);
    }
    let rows: Vec<[String; 6]> = runs
        .iter()
        .map(|r| {
            [
                r.id.clone(),
                r.state.as_str().to_string(),
                format!("{} ({})", r.name, r.workflow),
                r.git_ref.trim_start_matches("refs/heads/").to_string(),
                r.sha.chars().take(10).collect(),
                timing(r),
            ]
        })
        .collect();
    let header = ["RUN", "STATE", "WORKFLOW", "REF", "COMMIT", "TIME"].map(String::from);
    let mut widths = [0; 6];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for (i, row) in std::iter::once(&header).chain(&rows).enumerate() {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
        let Some(run) = i.checked_sub(1).map(|i| &runs[i]) else {
            continue;
        };
        if let Some(message) = &run.message {
            println!("  {message}");
        }
        if run.state == RunState::Running
            && run
                .worker
                .is_some_and(|w| !crate::worker::recover::is_alive(w))
        {
            println!(
                "  its worker is gone: a worker (`gpuflow worker`, or the next trigger's) marks it failed and removes its containers"
            );
        }
    }
    Ok(ExitCode::Success)
}

/// "queued 3s", "running 12s", "took 1m 4s".
fn timing(r: &QueuedRun) -> String {
    let secs = |d: f64| {
        humantime::format_duration(std::time::Duration::from_secs(d.max(0.0) as u64)).to_string()
    };
    match (r.started_at, r.finished_at) {
        (_, Some(end)) => format!("took {}", secs(end - r.started_at.unwrap_or(end))),
        (Some(start), None) => format!("running {}", secs(now() - start)),
        (None, None) => format!("queued {}", secs(now() - r.queued_at)),
    }
}

pub(super) fn open_queue(render_opts: RenderOptions) -> Result<Queue, ExitCode> {
    let home = GpuflowHome::from_env();
    Queue::open(&home.queue()).map_err(|e| {
        eprintln!(
            "{}",
            render(&Diagnostic::unlocated(e.to_string()), render_opts)
        );
        ExitCode::Infrastructure
    })
}

/// The run with this id, or the one run whose id starts with it; a clear error otherwise.
pub(super) fn find_run(
    queue: &Queue,
    id: &str,
    render_opts: RenderOptions,
) -> Result<QueuedRun, ExitCode> {
    let d = match lookup_run(queue, id) {
        Lookup::Found(run) => return Ok(run),
        Lookup::NotFound => Diagnostic::unlocated(format!("no run `{id}` in the queue"))
            .hint("`gpuflow runs` lists the runs"),
        Lookup::Ambiguous(ids) => ambiguous(id, &ids),
    };
    eprintln!("{}", render(&d, render_opts));
    Err(ExitCode::Usage)
}

/// What an id (or the start of one) names: in the queue, or among stored run folders.
pub(super) enum Lookup<T> {
    Found(T),
    NotFound,
    /// The ids of every run it could be.
    Ambiguous(Vec<String>),
}

pub(super) fn lookup_run(queue: &Queue, id: &str) -> Lookup<QueuedRun> {
    if let Ok(Some(run)) = queue.get(id) {
        return Lookup::Found(run);
    }
    let all = queue.list(usize::MAX >> 1).unwrap_or_default();
    let mut matching: Vec<QueuedRun> = all.into_iter().filter(|r| r.id.starts_with(id)).collect();
    match matching.len() {
        0 => Lookup::NotFound,
        1 => Lookup::Found(matching.remove(0)),
        _ => Lookup::Ambiguous(matching.into_iter().map(|r| r.id).collect()),
    }
}

/// How many of an ambiguous prefix's runs the error names.
const AMBIGUOUS_SHOWN: usize = 5;

/// "`2026` names 6 runs", with the first few ids and how many more there are: a count the
/// list does not add up to reads as a mistake.
pub(super) fn ambiguous(id: &str, ids: &[String]) -> Diagnostic {
    let mut shown: Vec<String> = ids
        .iter()
        .take(AMBIGUOUS_SHOWN)
        .map(|r| format!("`{r}`"))
        .collect();
    if ids.len() > AMBIGUOUS_SHOWN {
        shown.push(format!("and {} more", ids.len() - AMBIGUOUS_SHOWN));
    }
    Diagnostic::unlocated(format!("`{id}` names {} runs", ids.len()))
        .hint(format!("give more of the id: {}", shown.join(", ")))
}

/// Triggered runs on a Slurm cluster whose `gpuflow run` was killed (the worker recorded them
/// failed or cancelled) while their jobs went on: once those ended, the run's record is
/// completed from the cluster and its state is what its jobs came to (docs/slurm.md).
fn complete_cluster_runs(queue: &Queue, runs: &[QueuedRun]) {
    use crate::slurm::catch_up::{Completion, bundle_of, complete};
    let candidates: Vec<&QueuedRun> = runs
        .iter()
        .filter(|r| matches!(r.state, RunState::Failure | RunState::Cancelled))
        .filter(|r| bundle_of(&r.log_dir).is_some())
        .collect();
    if candidates.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    for run in candidates {
        if let Ok(Completion::Completed(result)) = runtime.block_on(complete(&run.log_dir)) {
            let (state, code) = match result {
                crate::events::JobResult::Success | crate::events::JobResult::Skipped => {
                    (RunState::Success, 0)
                }
                crate::events::JobResult::Cancelled => (RunState::Cancelled, 130),
                crate::events::JobResult::Failure => (RunState::Failure, 1),
            };
            let message = "its `gpuflow run` was killed; its jobs went on on the cluster, and its record was completed from there";
            if let Err(e) = queue.finish(&run.id, state, Some(code), Some(message)) {
                tracing::warn!("could not record run {}: {e}", run.id);
            }
        }
    }
}
