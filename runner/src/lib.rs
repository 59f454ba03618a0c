//! gpuflow: GitHub Actions-style workflows for reproducible experiments on GPU hosts.
//!
//! Data flows one way: file → [`workflow`] (model, strict loading) → [`plan`] (matrix, job
//! graph) → engine → results. [`expr`] is the `${{ }}` language, [`diag`] renders every
//! user-facing problem, [`steps`] declares the built-in steps, [`cli`] wires them into commands.
//! [`sim`] is `gpuflow-sim`, the simulated LLM server that stands in for SGLang/vLLM in tests.

pub mod cli;
pub mod diag;
pub mod expr;
pub mod plan;
pub mod sim;
pub mod steps;
pub mod workflow;
