//! The workflow and action model and its strict loader.
//!
//! Owns: reading YAML into a spanned tree ([`yaml`]), the plain-Rust model of workflows and
//! actions ([`model`]), and the loader that turns one into the other while collecting every
//! problem as a diagnostic ([`load`]). Must not know: what expressions mean (strings holding
//! `${{ }}` are kept with their spans for `expr`), Docker, GPUs present, time.

pub mod load;
pub mod model;
pub mod yaml;

pub use load::{
    FetchedAction, Loaded, RemoteAction, RemoteActionSource, load_action, load_path,
    load_path_with, load_workflow, load_workflow_in, load_workflow_with, workspace_of,
};
pub use model::{Action, Workflow};
