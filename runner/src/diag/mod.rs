//! Diagnostics: the one place that knows how a user-facing problem is described and shown.
//!
//! Every stage (YAML loading, model checks, expressions, planning) reports problems as
//! [`Diagnostic`]s that point into a [`SourceFile`] by byte [`Span`]. Rendering (snippet, caret,
//! `file:line:col`, hints) happens only here, so stages never format locations themselves.
//! This module knows nothing about workflows, expressions or Docker.

mod diagnostic;
mod exit_code;
mod render;
mod source;
mod suggest;

pub use diagnostic::{Diagnostic, Diagnostics, Related, Severity};
pub use exit_code::ExitCode;
pub use render::{RenderOptions, render, render_all};
pub use source::{SourceFile, Span, Spanned};
pub use suggest::{did_you_mean, join_quoted};
