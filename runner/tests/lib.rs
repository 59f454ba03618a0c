//! All integration tests build into one binary (one link step); one module per feature.

mod bench;
mod bench_steps;
mod cli;
mod cli_run;
mod diagnostics;
mod docker;
mod docker_engine;
mod engine;
mod expr;
mod gc;
mod generated;
mod health;
mod hosts;
mod preflight;
mod remote;
mod report;
mod run_docker;
mod signals;
mod sim;
mod store;
mod syntax_page;
mod triggers;
