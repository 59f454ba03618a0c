//! Where steps execute: containers on a Docker engine, local or remote.
//!
//! Owns the connection (endpoint parsing, API version negotiation), the container lifecycle
//! (create, start, exec, logs, wait, inspect, stop, remove), GPU requests as Docker
//! `DeviceRequests`, output as bounded lines, clean-up by label (a run's things; things of
//! runners that died), and the containers that stand for GPU leases on an engine.
//!
//! Knows nothing of workflows, YAML, expressions, matrices or reports: its inputs are plain
//! Rust values ([`ContainerSpec`], [`ExecSpec`], [`RunLabels`]). The GPU allocator decides
//! which devices a job gets; this module only passes the decision on ([`GpuRequest`]).

mod attach;
mod cleanup;
mod container;
mod container_spec;
mod docker;
mod endpoint;
mod error;
mod exec;
mod gpu_request;
mod image;
mod labels;
mod lease_container;
mod log_line;
mod logs;
mod network;
pub mod pull_progress;
mod pull_room;
mod registry_auth;
mod run_images;
pub mod runner_lock;

pub use attach::AttachedOutput;
pub use cleanup::{Managed, ManagedKind, Removed};
pub use container::{Container, ContainerState};
pub use container_spec::{ContainerSpec, PortMapping, Protocol, Restart, Ulimit, VolumeMount};
pub use docker::DockerBackend;
pub use endpoint::{DEFAULT_SOCKET, Endpoint};
pub use error::BackendError;
pub use exec::{ExecOutput, ExecSpec, InteractiveExec};
pub use gpu_request::GpuRequest;
pub use image::ImageFacts;
pub use labels::{
    LABEL_JOB, LABEL_KEPT, LABEL_MANAGED, LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_OWNER_STARTED,
    LABEL_OWNER_TOKEN, LABEL_PREFIX, LABEL_RUN_ID, Owner, RunLabels, process_start_time,
};
pub use lease_container::{
    LABEL_LEASE_GPU, LABEL_LEASE_HOLDER, LABEL_LEASE_SINCE, LABEL_LEASE_USER, LeaseContainer,
    LeaseState,
};
pub use log_line::{LineSink, LineSplitter, LogLine, MAX_LINE_BYTES, OutputStream};
pub use logs::LogStart;
pub use registry_auth::{
    DOCKER_HUB, RegistryAuth, RegistryLogins, normalize_registry, registry_of,
};
pub use run_images::{ImagePins, PullPolicy, Resolved, RunImages, Unresolved};
