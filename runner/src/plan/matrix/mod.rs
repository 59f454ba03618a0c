//! Matrix expansion with GitHub Actions' include/exclude rules.
//!
//! Strategy: follow GitHub's own matrix builder step by step, because users rely on its exact
//! results (which cells run, in which order, under which names):
//! 1. the cartesian product of the dimensions in written order, first dimension slowest;
//! 2. each product cell that matches any `exclude` entry is dropped;
//! 3. each `include` entry is split into a *filter* (its keys that are dimensions) and *extras*
//!    (the other keys); every kept cell that matches the filter receives the extras, later
//!    entries overwriting earlier ones. Original dimension values are never overwritten;
//! 4. each `include` entry that matched no kept cell becomes a cell of its own, appended in
//!    entry order (so `include` can add back an excluded combination). Cells added this way are
//!    never matched by later entries.
//!
//! Matching is GitHub's, which is looser than plain equality: a filter is compared leaf by leaf
//! (an object or array in a filter is a *partial* pattern), and each leaf is compared with the
//! expression language's `==` (strings ignore case, `'12' == 12`). Keys are case-sensitive,
//! like YAML keys.
//!
//! This module only sees plain values: no YAML, no spans, no `${{ }}`. Errors carry the index of
//! the dimension or entry at fault so the caller can point at it.
//!
//! [`MatrixInput`] and its limits are in `input`, the cells and their display names in `cell`,
//! the expansion in `expand`, GitHub's loose matching of `include`/`exclude` entries in
//! `matching`, and the errors in `error`.

mod cell;
mod error;
mod expand;
mod input;
mod matching;
#[cfg(test)]
mod tests;

pub use cell::{CellOrigin, MatrixCell};
pub use error::MatrixError;
pub use expand::expand;
pub use input::{MAX_CELLS, MatrixInput};
