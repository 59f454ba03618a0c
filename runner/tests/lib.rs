//! All integration tests build into one binary (one link step); one module per feature.

mod bench;
mod cli;
mod cli_run;
mod diagnostics;
mod docker;
mod docker_engine;
mod engine;
mod expr;
mod gc;
mod generated;
mod hosts;
mod remote;
mod report;
mod signals;
mod sim;
mod store;
mod syntax_page;
