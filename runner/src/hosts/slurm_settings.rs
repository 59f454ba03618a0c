//! A Slurm cluster as a host (`[hosts.NAME.slurm]` in `gpuflow.toml`, docs/slurm.md): how
//! jobs are submitted to it and where their data travels. Slurm places each job, allocates its
//! GPUs, queues and orders it; gpuflow only says what each job asks for.

use std::path::PathBuf;

/// How gpuflow submits to one Slurm cluster.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SlurmSettings {
    /// `--partition`; Slurm's default partition when unset.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--qos`.
    pub qos: Option<String>,
    /// `--time` for a job without `timeout-minutes` (Slurm's `[D-]HH:MM:SS` or minutes);
    /// the partition's default when unset.
    pub time_limit: Option<String>,
    /// Further `sbatch` options, each one argument (`--exclusive`, `--constraint=h100`).
    pub sbatch_options: Vec<String>,
    /// A folder every node and the submitting machine see at the same path: each run's plan,
    /// its jobs' events, logs, outputs and results go through it.
    pub shared_dir: PathBuf,
    /// The `gpuflow` program on the nodes; `gpuflow` from the nodes' `PATH` when unset.
    pub gpuflow: Option<PathBuf>,
    /// GPU types (GRES type names, `h100`): a `runs-on` value that is one of them asks for
    /// `--gres=gpu:TYPE:N`; each also matches `runs-on` as a label does.
    pub gpu_types: Vec<String>,
}

impl SlurmSettings {
    /// The program the batch script runs on a node.
    pub fn gpuflow_program(&self) -> PathBuf {
        self.gpuflow
            .clone()
            .unwrap_or_else(|| PathBuf::from("gpuflow"))
    }
}
