//! The worker: one per host, it takes queued runs in order and runs each as `gpuflow run`
//! would, from a checkout of the run's commit; several at once as far as their GPU needs fit
//! in the machine's GPUs ([`admission`], [`gpu_need`]), each watched as [`in_flight`].
//!
//! Each run is a `gpuflow run` child process rather than the engine in the worker's own
//! process, for isolation: a run's working folder, environment and signal handling are
//! per-process state; a run that panics or leaks does not take the queue down with it;
//! cancelling is the SIGTERM path `gpuflow run` already has (always() steps, containers
//! removed); and the run's logs are exactly those of `gpuflow run`. The child's stdin is a
//! pipe the worker never writes: when the worker dies, even by SIGKILL, the child reads
//! end-of-file and cancels itself, and the next worker marks the run failed and removes what
//! is left ([`recover`]).

pub mod admission;
pub mod checkout;
pub mod gpu_need;
pub mod in_flight;
pub mod lock;
pub mod recover;
pub mod run_loop;

pub use lock::{WorkerLock, start_detached, worker_pid, worker_running};
pub use run_loop::{Worker, WorkerOptions};
