//! GPUs as a resource: what a host has ([`inventory`], found through [`nvml`] on this
//! machine, [`nvidia_smi`] output from a remote host, or a [`stand_in`] file on machines
//! without GPUs), which GPUs a job gets ([`allocator`]), exclusive [`lease`]s shared by every
//! gpuflow process of the machine and freed by the kernel when their holder dies, and on a
//! shared engine also [`engine_lease`]s that every machine using that engine sees; the checks
//! before timing ([`checks`]), [`telemetry`] during benchmark steps and the [`energy`]
//! integrated from it.
//!
//! Uses Docker only through the backend, for engine leases (the backend turns leased ids into
//! `DeviceRequests`, the CLI runs the remote probe in a container); knows nothing of workflows
//! (the engine turns `gpus:` into a [`Request`]).

pub mod allocator;
pub mod checks;
pub mod energy;
pub mod engine_lease;
pub mod host_gpus;
pub mod inventory;
pub mod lease;
pub mod nvidia_smi;
pub mod nvml;
pub mod sample;
pub mod stand_in;
pub mod telemetry;
pub mod warm_claim;

pub use allocator::{Fit, Placement, Request, Want};
pub use engine_lease::{EngineLeases, Holder};
pub use host_gpus::{Discovery, HostGpus, JobGpus, Leased, Probe};
pub use inventory::{Gpu, GpuState, Inventory, Link, PciePath, Source};
pub use lease::{Lease, LeaseDir};
pub use stand_in::STAND_IN_ENV;
