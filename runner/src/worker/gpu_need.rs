//! How many GPUs a queued run needs, for the worker's admission ([`super::admission`]): the
//! largest `gpus:` of its jobs (each matrix cell's, with `${{ matrix.* }}` filled in), read
//! from the workflow file at the run's commit, and how many GPUs this machine has.
//!
//! This is an estimate made before the run starts, not a lease: the engine still leases each
//! job's GPUs when the job starts (docs/gpus.md), so a run whose need was under-counted waits
//! for its leases inside `gpuflow run` as a run started by hand would. What cannot be known
//! here (a `gpus:` reading `needs` or `inputs`, a matrix computed at run time) counts as 0.

use std::path::Path;

use git2::Repository;

use super::admission::Need;
use crate::backend::GpuRequest as Devices;
use crate::diag::SourceFile;
use crate::engine::job_gpus;
use crate::expr::{MapContext, Value};
use crate::gpu::STAND_IN_ENV;
use crate::trigger::QueuedRun;
use crate::workflow::Workflow;
use crate::workflow::model::GpuDevices;

/// The GPUs of this machine as the worker counts them: those of the stand-in inventory
/// `GPUFLOW_GPU_INVENTORY` names (what the runs it starts lease from), else NVML's. An
/// inventory that cannot be read counts as none, and why.
pub fn machine_gpus() -> (u32, Option<String>) {
    let inventory = match std::env::var_os(STAND_IN_ENV).filter(|v| !v.is_empty()) {
        Some(path) => match crate::gpu::stand_in::load(Path::new(&path)) {
            Ok(inv) => inv,
            Err(_) => {
                return (
                    0,
                    Some(format!(
                        "the stand-in GPU inventory `{}` ({STAND_IN_ENV}) cannot be read: \
                         `gpuflow hosts` says why",
                        Path::new(&path).display()
                    )),
                );
            }
        },
        None => crate::gpu::nvml::discover(),
    };
    let why = match &inventory.source {
        crate::gpu::Source::None { reason } => Some(reason.clone()),
        _ => None,
    };
    (inventory.gpus.len() as u32, why)
}

/// The GPUs `run` needs at once, at most `machine` (a run asking for more than the machine
/// has is refused by the engine; waiting for more than all GPUs would stall the queue). 0
/// when its workflow cannot be read at its commit (starting it reports why).
pub fn of_run(run: &QueuedRun, machine: u32) -> Need {
    let Some(wf) = read_workflow(&run.repo, &run.sha, &run.workflow) else {
        return Need::default();
    };
    if runs_on_a_cluster(run, &wf) {
        return Need {
            gpus: 0,
            on_cluster: true,
        };
    }
    Need::gpus(of_workflow(&wf, machine))
}

/// Whether every job of `wf` goes to a Slurm host of the `gpuflow.toml` committed with it
/// (what `gpuflow run` reads in the run's checkout; a run on a cluster goes there whole).
fn runs_on_a_cluster(run: &QueuedRun, wf: &Workflow) -> bool {
    let Some(text) = read_blob(&run.repo, &run.sha, crate::hosts::CONFIG_FILE) else {
        return false;
    };
    let path = run.repo.join(crate::hosts::CONFIG_FILE);
    let Ok(hosts) =
        crate::hosts::HostConfig::parse(&SourceFile::new(path.display().to_string(), text))
    else {
        return false;
    };
    !wf.jobs.is_empty()
        && wf.jobs.values().all(|job| {
            let runs_on: Vec<String> = job.runs_on.iter().map(|r| r.value.clone()).collect();
            hosts
                .select(&runs_on, None)
                .is_ok_and(|h| h.slurm.is_some())
        })
}

/// The largest `gpus:` of `wf`'s job runs (matrix cells included), at most `machine`.
pub fn of_workflow(wf: &Workflow, machine: u32) -> u32 {
    let model = crate::plan::from_workflow(wf, "");
    let largest = match crate::plan::build(&model.input) {
        Ok(plan) => plan
            .jobs
            .iter()
            .filter_map(|job| {
                let gpus = job.gpus.as_ref()?;
                let mut ctx = MapContext::new();
                ctx.insert(
                    "matrix",
                    Value::from_json(serde_json::Value::Object(
                        job.matrix.clone().into_iter().collect(),
                    )),
                );
                let asked = job_gpus::evaluate(gpus, &ctx, &wf.file).ok()?;
                Some(count(&asked.devices, machine))
            })
            .max(),
        // A plan that does not build (a `needs` cycle): the run fails when it starts; what
        // is written as a number still counts.
        Err(_) => wf
            .jobs
            .values()
            .filter_map(|job| match &job.gpus.as_ref()?.devices {
                GpuDevices::All => Some(machine),
                GpuDevices::Count(n) => Some(*n),
                GpuDevices::Ids(ids) => Some(ids.len() as u32),
                GpuDevices::Expr(_) => None,
            })
            .max(),
    };
    largest.unwrap_or(0).min(machine)
}

fn count(devices: &Devices, machine: u32) -> u32 {
    match devices {
        Devices::None => 0,
        Devices::All => machine,
        Devices::Count(n) => *n,
        Devices::Devices(ids) => ids.len() as u32,
    }
}

/// The workflow file `path` as committed in `sha`, loaded as `gpuflow run` would load it.
fn read_workflow(repo: &Path, sha: &str, path: &str) -> Option<Workflow> {
    let text = read_blob(repo, sha, path)?;
    // No work tree on disk: `./` actions are reported missing, which does not change `gpus:`.
    let file = SourceFile::new(path, text);
    crate::workflow::load_workflow_in(&file, Path::new("/nonexistent")).0
}

/// The file `path` as committed in `sha`.
fn read_blob(repo: &Path, sha: &str, path: &str) -> Option<String> {
    let repo = Repository::open(repo).ok()?;
    let blob = git2::Oid::from_str(sha)
        .and_then(|oid| repo.find_object(oid, None))
        .and_then(|object| object.peel_to_commit())
        .and_then(|commit| commit.tree())
        .and_then(|tree| tree.get_path(Path::new(path)))
        .and_then(|entry| entry.to_object(&repo))
        .and_then(|object| object.peel_to_blob())
        .ok()?;
    Some(String::from_utf8_lossy(blob.content()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(yaml: &str, machine: u32) -> u32 {
        let file = SourceFile::new("w.yml", yaml);
        let (wf, diags) = crate::workflow::load_workflow_in(&file, Path::new("/nonexistent"));
        let wf = wf.unwrap_or_else(|| panic!("{diags:?}"));
        of_workflow(&wf, machine)
    }

    #[test]
    fn the_largest_gpus_of_the_jobs_and_matrix_cells_counts() {
        let yaml = "on: push\njobs:\n  small:\n    gpus: 2\n    steps:\n      - run: 'true'\n  \
                    sweep:\n    strategy:\n      matrix:\n        g: [1, 4, 2]\n    \
                    gpus: ${{ matrix.g }}\n    steps:\n      - run: 'true'\n  \
                    cpu:\n    steps:\n      - run: 'true'\n";
        assert_eq!(need(yaml, 8), 4);
        // Never more than the machine has.
        assert_eq!(need(yaml, 3), 3);
    }

    #[test]
    fn all_ids_none_and_what_is_known_only_at_run_time() {
        let job = |gpus: &str| {
            format!("on: push\njobs:\n  a:\n    gpus: {gpus}\n    steps:\n      - run: 'true'\n")
        };
        assert_eq!(need(&job("all"), 8), 8);
        assert_eq!(need(&job("[0, 3, 5]"), 8), 3);
        assert_eq!(need(&job("${{ inputs.gpus }}"), 8), 0);
        assert_eq!(
            need(
                "on: push\njobs:\n  a:\n    steps:\n      - run: 'true'\n",
                8
            ),
            0
        );
    }
}
