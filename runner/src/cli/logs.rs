//! `gpuflow logs RUN [-f]`: what a run printed. A triggered run's `gpuflow run` output is
//! stored as `output.log` beside its other logs; `-f` follows it until the run ends, waiting
//! first when it is still queued. A run started by hand (`gpuflow run`) is not in the queue:
//! its folder `.gpuflow/runs/<id>/` (here or in a folder above, up to the repository's top) is
//! replayed from its `events.jsonl` and log files, as `gpuflow run --plain` printed it, and
//! followed with `-f` while it runs. Exit codes: 0, 2 (no such run), 4 (no queue and no such
//! folder).

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::runs::{Lookup, ambiguous, lookup_run};
use crate::diag::{Diagnostic, ExitCode, RenderOptions, render};
use crate::events::{EventKind, EventSink};
use crate::run_logs::files::run_in_progress;
use crate::run_logs::replay::Replay;
use crate::trigger::{GpuflowHome, Queue, QueuedRun};
use crate::ui::{PlainView, headline_text};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run's id (or the start of it): a triggered run, or one `gpuflow run` started here.
    pub run: String,

    /// Keep printing as the run goes, until it ends.
    #[arg(short, long)]
    pub follow: bool,
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let fail = |d: Diagnostic, code: ExitCode| {
        eprintln!("{}", render(&d, render_opts));
        Ok(code)
    };
    let queue = Queue::open(&GpuflowHome::from_env().queue());
    if let Ok(queue) = &queue {
        match lookup_run(queue, &args.run) {
            Lookup::Found(run) => return queued_output(queue, &run, args.follow),
            Lookup::Ambiguous(ids) => return fail(ambiguous(&args.run, &ids), ExitCode::Usage),
            Lookup::NotFound => {}
        }
    }
    let cwd = std::env::current_dir()?;
    match stored_run(&cwd, &args.run) {
        Lookup::Found(dir) => return stored_output(&dir, args.follow),
        Lookup::Ambiguous(ids) => return fail(ambiguous(&args.run, &ids), ExitCode::Usage),
        Lookup::NotFound => {}
    }
    match queue {
        Err(e) => fail(
            Diagnostic::unlocated(e.to_string()).hint(format!(
                "nor is there a folder `.gpuflow/runs/{}*` here (where `gpuflow run` keeps a run's logs)",
                args.run
            )),
            ExitCode::Infrastructure,
        ),
        Ok(_) => fail(
            Diagnostic::unlocated(format!(
                "no run `{}` in the queue, nor under `.gpuflow/runs/` here",
                args.run
            ))
            .hint("`gpuflow runs` lists the triggered runs; `gpuflow run` keeps a run's logs in `.gpuflow/runs/<id>/` of the folder it was started in: run `gpuflow logs` there"),
            ExitCode::Usage,
        ),
    }
}

/// A triggered run's `output.log`, followed until the run ends with `follow`.
fn queued_output(queue: &Queue, run: &QueuedRun, follow: bool) -> anyhow::Result<ExitCode> {
    let path = run.log_dir.join("output.log");
    let mut out = std::io::stdout().lock();
    let mut offset = 0u64;
    loop {
        // Read the state before the file: a run that ended has written all it will.
        let done = queue.get(&run.id)?.is_none_or(|r| r.state.is_final());
        if let Ok(mut file) = std::fs::File::open(&path) {
            file.seek(SeekFrom::Start(offset))?;
            let mut chunk = Vec::new();
            file.read_to_end(&mut chunk)?;
            offset += chunk.len() as u64;
            out.write_all(&chunk)?;
            out.flush()?;
        }
        if done || !follow {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if !follow && offset == 0 {
        let state = queue.get(&run.id)?.map_or(run.state, |r| r.state);
        eprintln!(
            "run {} is {} and has printed nothing yet",
            run.id,
            state.as_str()
        );
    }
    Ok(ExitCode::Success)
}

/// The run folder `id` (or the one starting with it) names under `.gpuflow/runs/` of `cwd` or
/// of a folder above it, up to the repository's top: `gpuflow run` writes it where it is
/// started, and people look from anywhere in their repository.
fn stored_run(cwd: &Path, id: &str) -> Lookup<PathBuf> {
    for dir in cwd.ancestors() {
        let runs = dir.join(".gpuflow").join("runs");
        let exact = runs.join(id);
        if !id.is_empty() && !id.contains('/') && exact.join("events.jsonl").is_file() {
            return Lookup::Found(exact);
        }
        let mut matching: Vec<String> = std::fs::read_dir(&runs)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("events.jsonl").is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| name.starts_with(id))
            .collect();
        matching.sort();
        match matching.len() {
            0 => {}
            1 => return Lookup::Found(runs.join(&matching[0])),
            _ => return Lookup::Ambiguous(matching),
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    Lookup::NotFound
}

/// A run started by hand, shown as `gpuflow run --plain` showed it (the jobs' summary table
/// left out: their results are on their own lines, and the headline ends it).
fn stored_output(dir: &Path, follow: bool) -> anyhow::Result<ExitCode> {
    complete_cluster_run(dir)?;
    eprintln!(
        "gpuflow: run started by `gpuflow run`, not queued: replaying `{}`",
        dir.display()
    );
    let view = PlainView::new(std::io::stdout());
    let mut show = |event: crate::events::Event| {
        // The plain view leaves the headline to `gpuflow run`, which prints it at the end.
        if let EventKind::RunHeadline(h) = &event.kind {
            print!("{}", headline_text(h));
        } else {
            view.emit(event);
        }
    };
    let mut replay = Replay::open(dir)?;
    loop {
        // Whether it runs is asked before reading: a run that ended has written all it will.
        let running = run_in_progress(dir);
        replay.poll(!running || !follow, &mut show)?;
        if !running {
            break;
        }
        if !follow {
            eprintln!("gpuflow: the run is still going (`-f` follows it)");
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::io::stdout().flush()?;
    Ok(ExitCode::Success)
}

/// A run on a Slurm cluster whose `gpuflow run` died: its record is completed from the run's
/// folder on the cluster once its jobs have ended (docs/slurm.md).
fn complete_cluster_run(dir: &Path) -> anyhow::Result<()> {
    use crate::slurm::catch_up::{Completion, bundle_of, complete};
    if bundle_of(dir).is_none() {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match runtime.block_on(complete(dir)) {
        Ok(Completion::Nothing) => {}
        Ok(Completion::StillRunning) => eprintln!(
            "gpuflow: this run's `gpuflow run` is gone, and its Slurm jobs still run: its record is completed once they end (`squeue` shows them)"
        ),
        Ok(Completion::Completed(result)) => eprintln!(
            "gpuflow: this run's `gpuflow run` was gone before it ended; its record was completed from the cluster: {}",
            result.as_str()
        ),
        Err(why) => {
            eprintln!("gpuflow: could not complete this run's record from the cluster: {why}")
        }
    }
    Ok(())
}
