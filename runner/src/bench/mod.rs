//! The built-in load generator for OpenAI-compatible servers (`uses: benchmark`,
//! `gpuflow bench URL`) and its metrics, with vLLM's and SGLang's names and definitions
//! (docs/benchmark.md).
//!
//! - [`inputs`]: the benchmark's inputs, typed, with their defaults. [`config`]: what to run,
//!   from them.
//! - [`client`]: the pooled HTTP/1.1 keep-alive client. [`sse`]: incremental event parsing.
//! - [`request`]: one streamed request, stamped per event. [`schedule`]: open-loop arrivals.
//!   [`prompts`]: synthetic, JSONL and ShareGPT prompts.
//! - [`run`]: levels, runs, warm-up, closed and open loops. `cpu`: the client's own CPU time.
//!   [`reachability`]: backing off from, and giving up on, a server that went away.
//! - [`server_metrics`]: the server's own `/metrics` around each run ([`prometheus`] reads
//!   the format).
//! - [`metrics`] and [`stats`]: a run's numbers. [`result`]: the vLLM-compatible JSON and
//!   files. [`report`]: the readable table.
//!
//! It is called as a step; it knows nothing of steps, the engine, workflows or terminals.

pub mod client;
pub mod config;
mod cpu;
pub mod inputs;
pub mod metrics;
pub mod prometheus;
pub mod prompts;
pub mod reachability;
pub mod report;
pub mod request;
pub mod result;
pub mod run;
pub mod schedule;
pub mod server_metrics;
pub mod sse;
pub mod stats;

pub use config::{BenchConfig, Mode, Stop, check_target};
pub use cpu::process_cpu_time;
pub use inputs::{BenchInputs, ConfigError, Endpoint, Slo};
pub use result::BenchResult;
pub use run::{BenchError, Progress, run};
