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
mod gpus;
mod health;
mod hosts;
mod preflight;
mod remote;
mod remote_actions;
mod report;
mod run_docker;
mod shipped_actions;
mod signals;
mod sim;
mod store;
mod syntax_page;
mod triggers;
