//! What a worker does first: runs left "running" by a worker that is gone (we hold the lock,
//! so any is) are marked failed, their `gpuflow run` process is given time to finish its own
//! clean-up (it cancels itself when the worker's pipe closes) and killed after that, and
//! their containers and networks are removed from the local engine.

use std::time::{Duration, Instant};

use crate::backend::DockerBackend;
use crate::backend::process_start_time;
use crate::trigger::queue::QueueError;
use crate::trigger::{GpuflowHome, ProcessId, Queue, RunState};

/// How long an orphaned `gpuflow run` gets to remove its containers before it is killed.
const ORPHAN_GRACE: Duration = Duration::from_secs(30);

pub fn is_alive(p: ProcessId) -> bool {
    match (process_start_time(p.pid), p.started) {
        (None, _) => false,
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
    }
}

/// Marks the runs of dead workers failed and removes what they left; returns their ids.
pub fn recover(
    queue: &Queue,
    home: &GpuflowHome,
    say: &dyn Fn(&str),
) -> Result<Vec<String>, QueueError> {
    let stale = queue.in_state(RunState::Running)?;
    recover_runs(queue, home, say, stale)
}

/// Marks these runs (left "running" by a worker that is gone) failed and removes what they
/// left; returns their ids.
pub fn recover_runs(
    queue: &Queue,
    home: &GpuflowHome,
    say: &dyn Fn(&str),
    stale: Vec<crate::trigger::QueuedRun>,
) -> Result<Vec<String>, QueueError> {
    let mut recovered = Vec::new();
    for run in stale {
        let worker = run
            .worker
            .map_or_else(|| "?".to_string(), |w| w.pid.to_string());
        if let Some(child) = run.process.filter(|p| is_alive(*p)) {
            let deadline = Instant::now() + ORPHAN_GRACE;
            while is_alive(child) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            if is_alive(child) {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(child.pid as i32).expect("a pid is positive"),
                    rustix::process::Signal::KILL,
                );
            }
        }
        let removed = remove_containers(&run.id);
        let message = format!(
            "the worker (pid {worker}) running it stopped before it ended (crashed or killed); {removed}"
        );
        queue.finish(&run.id, RunState::Failure, None, Some(&message))?;
        append_line(
            &run.log_dir.join("output.log"),
            &format!("gpuflow: {message}"),
        );
        let _ = std::fs::remove_dir_all(home.work(&run.id));
        say(&format!("run {}: marked failed: {message}", run.id));
        recovered.push(run.id);
    }
    Ok(recovered)
}

/// A "running" run whose worker is gone and whose `gpuflow run` process is gone too: marked
/// failed (only if still running for that worker: a worker recovering it at the same moment
/// does not get a second end), what it left removed; the message, when this marked it.
/// For `gpuflow trigger --wait`, which would otherwise wait for ever.
pub fn fail_if_worker_gone(
    queue: &Queue,
    run: &crate::trigger::QueuedRun,
) -> Result<Option<String>, QueueError> {
    let Some(worker) = run.worker else {
        return Ok(None);
    };
    if run.state != RunState::Running || is_alive(worker) || run.process.is_some_and(is_alive) {
        return Ok(None);
    }
    let removed = remove_containers(&run.id);
    let message = format!(
        "the worker (pid {}) running it is gone (crashed, killed, or it could not record the \
         end); marked failed; {removed}",
        worker.pid
    );
    if !queue.fail_if_running_for(&run.id, worker, &message)? {
        return Ok(None);
    }
    append_line(
        &run.log_dir.join("output.log"),
        &format!("gpuflow: {message}"),
    );
    Ok(Some(message))
}

/// Removes the run's containers and networks from the local engine, saying what happened.
/// Other hosts are swept by the next `gpuflow run` that connects to them.
pub(crate) fn remove_containers(run_id: &str) -> String {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return "its containers could not be looked for".into();
    };
    runtime.block_on(async {
        match DockerBackend::connect_local().await {
            Err(e) => {
                format!("its containers could not be looked for ({e}): `gpuflow gc` removes them")
            }
            Ok(docker) => match docker.remove_run(run_id).await {
                Ok(removed) if removed.containers + removed.networks == 0 => {
                    "it left no container".into()
                }
                Ok(removed) => format!(
                    "removed what it left: {} container(s), {} network(s)",
                    removed.containers, removed.networks
                ),
                Err(e) => {
                    format!("removing its containers failed ({e}): `gpuflow gc` removes them")
                }
            },
        }
    })
}

pub(crate) fn append_line(path: &std::path::Path, line: &str) {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}
