//! Runs on a Slurm cluster (docs/slurm.md): Slurm owns placement, GPU allocation, queueing,
//! fair share, dependencies and cancellation; gpuflow turns each planned job into one Slurm
//! job and, on the node Slurm chose, runs that job as it runs any job.
//!
//! The seam is the planned job: the coordinator ([`coordinator`]) submits each one
//! ([`submit`]) with what it needs as Slurm dependencies, then follows them ([`follow`]) into
//! the run's events; on the node, `gpuflow slurm-job` ([`node`]) runs it with the engine's
//! `run_alone`. They meet in the run's folder on the shared folder ([`bundle`]). The Slurm
//! commands are [`client`]; what their states mean is [`state`]; what the cluster has and
//! runs, for `gpuflow hosts`, is [`overview`].

pub mod bundle;
pub mod catch_up;
pub mod client;
pub mod coordinator;
pub mod follow;
pub mod node;
pub mod overview;
pub mod state;
pub mod submit;
pub mod voice;

use sha2::{Digest, Sha256};

/// A file's SHA-256 in hex: what a node checks the workflow it reads against.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
