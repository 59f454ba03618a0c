//! All integration tests build into one binary (one link step); one module per feature.

mod bench;
mod cli;
mod diagnostics;
mod docker;
mod expr;
mod generated;
mod sim;
mod syntax_page;
