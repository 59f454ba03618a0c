//! `gpuflow-sim`: a simulated OpenAI-compatible LLM server, the stand-in for SGLang or vLLM in
//! tests, `make demo` and users' dry runs (docs/simulator.md).
//!
//! It loads (port open, `/health` 503) for `--startup-delay`, prints SGLang's ready line, then
//! streams completions at a configured time to first token, decode rate and tokens per chunk,
//! and records when it sent each chunk: the reference that benchmark accuracy is checked
//! against. Crash modes reproduce the failures gpuflow must notice fast.
//!
//! - [`config`]: the flags. [`request`] / [`response`]: OpenAI shapes in and out.
//! - [`schedule`]: when each chunk is due. `timer`: sub-millisecond wake-ups.
//! - [`record`]: the server-side record. [`metrics`]: `/metrics`, under vLLM's and SGLang's
//!   names. `lifecycle`: log lines and crash messages. `memory`: the simulated GPU memory
//!   (--model-path): the KV cache it gets, the loads that fail.
//! - `routes`, `stream`, `state`, `server`: HTTP, the streamed body, shared state, the loop.
//!   `connection`: --close-after-stream's early close.
//!
//! This module knows nothing of workflows, Docker or the rest of gpuflow.

pub mod config;
mod connection;
mod lifecycle;
mod memory;
pub mod metrics;
pub mod record;
pub mod request;
pub mod response;
mod routes;
pub mod schedule;
mod server;
mod state;
mod stream;
mod timer;

pub use config::{OomStyle, SimConfig, UsageChunk};
pub use lifecycle::READY_LINE;
pub use server::{SimServer, run, serve};
pub use state::Exit;
