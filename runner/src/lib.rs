//! gpuflow: GitHub Actions-style workflows for reproducible experiments on GPU hosts.
//!
//! [`actions`] fetches and pins remote actions (`owner/repo@ref`, `gpuflow.lock`) for the
//! loader.
//! Data flows one way: file → [`workflow`] (model, strict loading) → [`plan`] (matrix, job
//! graph) → engine → results. [`expr`] is the `${{ }}` language, [`diag`] renders every
//! user-facing problem ([`diag_log`] is gpuflow's own diagnostics, `-v`/`GPUFLOW_LOG`, apart
//! from it), [`steps`] declares the built-in steps, [`check`] runs the static checks
//! `validate` reports, [`schema`] generates the editors' JSON Schemas, [`backend`] runs
//! containers on a Docker engine, [`hosts`] says which engine (`gpuflow.toml`,
//! `runs-on`), [`local_dirs`] makes the folders gpuflow keeps on this machine (private job
//! folders, `.gpuflow/`), [`signal`] turns Ctrl-C and SIGTERM into cancellation, [`bench`] is
//! the built-in load generator, [`store`], [`stats`] and [`compare`] keep results and judge
//! them against baselines, [`sim`] is `gpuflow-sim`, the simulated LLM server standing in
//! for SGLang/vLLM, [`trigger`] turns git pushes into queued runs of the workflows whose
//! `on:` matches and [`worker`] runs them, [`cli`] wires them into commands.

pub mod actions;
pub mod backend;
pub mod bench;
pub mod check;
pub mod cli;
pub mod compare;
pub mod diag;
pub mod diag_log;
pub mod engine;
pub mod events;
pub mod expr;
pub mod gpu;
pub mod hosts;
pub mod local_dirs;
pub mod memory;
pub mod plan;
pub mod report;
pub mod run_logs;
pub mod schema;
pub mod serve;
pub mod signal;
pub mod sim;
pub mod slurm;
pub mod stats;
pub mod steps;
pub mod store;
pub mod trigger;
pub mod ui;
pub mod warm;
pub mod worker;
pub mod workflow;
