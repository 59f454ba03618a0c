//! All integration tests build into one binary (one link step); one module per feature.

mod cli;
mod diagnostics;
mod docker;
mod expr;
mod generated;
mod sim;
mod store;
mod syntax_page;
