//! A run's folder on the cluster's shared folder: what the nodes need to run its jobs
//! (`manifest.json`, the batch script) and what each job leaves for the coordinator and for the
//! jobs that need it (`jobs/<n>/`: its events and logs as a run's log folder holds them, its
//! `result.json`, Slurm's own output of the batch script).
//!
//! `<shared-dir>/uid-<uid>/<run-id>/`: the user's folder is made private (0700) so other users
//! of the cluster read nothing of a run; the shared folder itself is the administrator's.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::engine::options::EventContext;
use crate::events::JobResult;

/// The batch script every job of every run submits: the program and the job are its
/// arguments (sbatch passes what follows the script to it), so no value is spliced into
/// shell text.
const BATCH_SCRIPT: &str = "#!/bin/sh\n\
# gpuflow: one planned job of a run, on the node Slurm placed it on (docs/slurm.md).\n\
# $1: the gpuflow program, $2: the run's folder, $3: the job's number in the plan.\n\
exec \"$1\" slurm-job \"$2\" \"$3\"\n";

/// What a node needs to run any job of the run, written once when it is submitted.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub run_id: String,
    /// The workflow file, absolute: the nodes read it from the shared workspace.
    pub workflow: PathBuf,
    /// Its SHA-256 when submitted: a node refuses a file changed since.
    pub workflow_sha256: String,
    pub workspace: PathBuf,
    /// The host (in `gpuflow.toml`) the run was submitted to.
    pub host: String,
    /// The nodes' stand-in GPU inventory (`gpu-inventory` of the host), if any.
    pub gpu_inventory: Option<PathBuf>,
    pub inputs: IndexMap<String, String>,
    pub vars: IndexMap<String, String>,
    /// The secrets' names: their values reach the job through its environment
    /// ([`secret_variable`]), never a file.
    pub secrets: Vec<String>,
    /// `gpuflow.toml`'s `[registries]`: each password by its secret's name, as `secrets`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registries: Vec<crate::hosts::RegistryConfig>,
    pub event: Option<EventContext>,
    /// The results store the benchmark steps record into.
    pub store: PathBuf,
    /// Each planned job, by its number in the plan.
    pub jobs: Vec<ManifestJob>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ManifestJob {
    pub job_id: String,
    pub cell: usize,
    pub display: String,
    /// Its Slurm job, once submitted.
    pub slurm_id: Option<u64>,
}

/// How a job ended, written by the node when it is done.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JobEnd {
    pub result: JobResult,
    /// Its failure was allowed (`continue-on-error`): it counts as a success for its
    /// dependants.
    pub failure_allowed: bool,
    pub outputs: IndexMap<String, String>,
    pub failure: Option<String>,
    /// The node it ran on.
    pub node: String,
    /// The GPUs Slurm allocated, as the node numbers them.
    pub gpus: Vec<u32>,
}

/// The environment variable that carries secret `name` to the job.
pub fn secret_variable(name: &str) -> String {
    format!("GPUFLOW_SLURM_SECRET_{name}")
}

/// A run's folder.
#[derive(Clone, Debug)]
pub struct Bundle {
    dir: PathBuf,
}

impl Bundle {
    /// Makes the run's folder under the user's private folder of `shared_dir`.
    pub fn create(shared_dir: &Path, run_id: &str) -> Result<Self, String> {
        if !shared_dir.is_dir() {
            return Err(format!(
                "the Slurm host's `shared-dir` `{}` is not a folder here: it must be a folder every node and this machine see at the same path (docs/slurm.md)",
                shared_dir.display()
            ));
        }
        let user = shared_dir.join(format!("uid-{}", rustix::process::getuid().as_raw()));
        let made = std::fs::DirBuilder::new().mode(0o700).create(&user);
        if let Err(e) = made
            && e.kind() != std::io::ErrorKind::AlreadyExists
        {
            return Err(format!("could not make `{}`: {e}", user.display()));
        }
        let meta = std::fs::symlink_metadata(&user).map_err(|e| e.to_string())?;
        if !meta.is_dir()
            || std::os::unix::fs::MetadataExt::uid(&meta) != rustix::process::getuid().as_raw()
        {
            return Err(format!(
                "`{}` is not a folder of yours: gpuflow keeps each user's runs in a folder only that user owns; remove it or ask its owner",
                user.display()
            ));
        }
        std::fs::set_permissions(&user, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
        let dir = user.join(run_id);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(dir.join("jobs"))
            .map_err(|e| format!("could not make `{}`: {e}", dir.display()))?;
        write_new(&dir.join("job.sh"), BATCH_SCRIPT.as_bytes(), 0o700)?;
        Ok(Self { dir })
    }

    /// A run's folder as the node is given it.
    pub fn open(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn batch_script(&self) -> PathBuf {
        self.dir.join("job.sh")
    }

    /// Job `index`'s folder: its run-log files (events, logs) and its end.
    pub fn job_dir(&self, index: usize) -> PathBuf {
        self.dir.join("jobs").join(index.to_string())
    }

    /// Makes each job's folder before it is submitted: Slurm writes the batch script's
    /// output there and does not make folders.
    pub fn make_job_dirs(&self, count: usize) -> Result<(), String> {
        for index in 0..count {
            let dir = self.job_dir(index);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(|e| format!("could not make `{}`: {e}", dir.display()))?;
        }
        Ok(())
    }

    pub fn write_manifest(&self, manifest: &Manifest) -> Result<(), String> {
        let json = serde_json::to_vec_pretty(manifest).map_err(|e| e.to_string())?;
        write_replacing(&self.dir.join("manifest.json"), &json)
    }

    pub fn manifest(&self) -> Result<Manifest, String> {
        read_json(&self.dir.join("manifest.json"))
    }

    pub fn write_end(&self, index: usize, end: &JobEnd) -> Result<(), String> {
        let json = serde_json::to_vec_pretty(end).map_err(|e| e.to_string())?;
        write_replacing(&self.job_dir(index).join("result.json"), &json)
    }

    /// Job `index`'s end, once its node wrote it.
    pub fn end(&self, index: usize) -> Option<JobEnd> {
        read_json(&self.job_dir(index).join("result.json")).ok()
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("`{}` is not what gpuflow wrote: {e}", path.display()))
}

/// Writes a new file (never through a link, never over one).
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| format!("could not write `{}`: {e}", path.display()))?;
    file.write_all(bytes)
        .map_err(|e| format!("could not write `{}`: {e}", path.display()))
}

/// Replaces a file whole: written beside it, then renamed over it, so a reader on another node
/// sees the old or the new text, never half of one.
fn write_replacing(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(parent)
        .map_err(|e| format!("could not make `{}`: {e}", parent.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temp = parent.join(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    write_new(&temp, bytes, 0o600)?;
    std::fs::File::open(&temp)
        .and_then(|f| f.sync_all())
        .and_then(|()| std::fs::rename(&temp, path))
        .map_err(|e| format!("could not write `{}`: {e}", path.display()))
}
