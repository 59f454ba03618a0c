//! All integration tests build into one binary (one link step); one module per feature.

mod cli;
mod expr;
mod sim;
