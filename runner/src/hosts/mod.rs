//! Where jobs run: the Docker hosts named in `gpuflow.toml`, choosing one for a job, and
//! connecting to it.
//!
//! A host is a name, a Docker endpoint (`unix://`, `tcp://`, `ssh://user@node`) and labels.
//! `runs-on:` picks a host by name or by labels (all must match, as GitHub's label sets do);
//! `--host` overrides it; `local` (the engine `DOCKER_HOST` names, or the local socket) is
//! always there. Connecting checks an `ssh://` node first, because bollard reports a node
//! without the docker CLI only as an unexplained `IncompleteMessage`.
//!
//! Knows nothing of workflows (it takes `runs-on` as plain strings) or the engine. A host's
//! GPUs are found as configured ([`Host::gpu_discovery`]: a stand-in file, NVML, or
//! `nvidia-smi` in a container on the host); the `gpus` key is only a hint for listings.

mod connect;
mod gpu_probe;
mod host;
mod host_config;
mod node_check;
mod select;
mod slurm_settings;

pub use gpu_probe::DEFAULT_PROBE_IMAGE;
pub use host::{Host, HostEndpoint, LOCAL};
pub use host_config::{CONFIG_FILE, HostConfig, RegistryConfig, workspace_root};
pub use node_check::check_ssh_node;
pub use select::SelectError;
pub use slurm_settings::SlurmSettings;
