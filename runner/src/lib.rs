//! gpuflow: GitHub Actions-style workflows for reproducible experiments on GPU hosts.
//!
//! Data flows one way: file → [`workflow`] (model, strict loading) → [`plan`] (matrix, job
//! graph) → engine → results. [`expr`] is the `${{ }}` language, [`diag`] renders every
//! user-facing problem, [`steps`] declares the built-in steps, [`check`] runs the static checks
//! `validate` reports, [`schema`] generates the editors' JSON Schemas, [`backend`] runs
//! containers on a Docker engine, [`bench`] is the built-in load generator, [`sim`] is `gpuflow-sim`, the simulated LLM server standing in
//! for SGLang/vLLM, [`cli`] wires them into commands.

pub mod backend;
pub mod bench;
pub mod check;
pub mod cli;
pub mod diag;
pub mod expr;
pub mod plan;
pub mod schema;
pub mod sim;
pub mod steps;
pub mod workflow;
