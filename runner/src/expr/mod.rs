//! The `${{ }}` expression language, with GitHub Actions' documented semantics
//! (docs/expressions.md is the user's reference).
//!
//! Layers, each in its own file: `lexer` (text → tokens) → `parser` (tokens → [`Expr`],
//! function names, arities and the depth limit checked) → `eval` (an [`Expr`] over a
//! [`Context`] → [`Value`]); `template` finds `${{ }}` in strings and reads `if:` conditions.
//! `value`, `number` and `text` hold GitHub's coercions, number format and case-insensitive
//! comparison; `function` the built-in functions; `context` what evaluation can see.
//!
//! Every error is an [`ExprError`] whose span is relative to the text that was passed in, so a
//! caller maps it into its file with `diag::Span::inner`. This module knows nothing about YAML,
//! workflows or how errors are rendered.

mod ast;
mod context;
mod error;
mod eval;
mod function;
mod lexer;
mod number;
mod parser;
mod template;
mod text;
mod value;

pub use ast::{ContextAccess, Expr};
pub use context::{Context, JobStatus, MapContext};
pub use error::{ErrorKind, ExprError};
pub use eval::{MAX_MEMORY_BYTES, evaluate};
pub use function::Function;
pub use number::{format_number, parse_number};
pub use parser::{Contexts, MAX_DEPTH};
pub use template::{Condition, Template, parse_condition, parse_template};
/// How the language compares property names and strings (case-insensitively): the static
/// checks compare names the same way, so they accept what evaluation accepts.
pub use text::eq_ignore_case;
pub use value::Value;

/// Parses one expression (the text inside `${{ }}`); any name parses as a context.
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    parser::parse(src, Contexts::Any)
}

/// Parses one expression, allowing only the given context names (case-insensitive); another
/// name is a parse error with a "did you mean" hint.
pub fn parse_with_contexts(src: &str, contexts: &[&str]) -> Result<Expr, ExprError> {
    parser::parse(src, Contexts::Only(contexts))
}
