//! A job's `strategy.matrix` as plain values, and GitHub's limit on what it may expand to.

use indexmap::IndexMap;
use serde_json::Value;

/// GitHub's limit on the jobs one matrix may produce.
pub const MAX_CELLS: usize = 256;

/// A job's `strategy.matrix`, as plain values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MatrixInput {
    /// The dimensions (GitHub: "vectors") in the order they are written.
    pub dimensions: IndexMap<String, Vec<Value>>,
    /// `include` entries in the order they are written.
    pub include: Vec<IndexMap<String, Value>>,
    /// `exclude` entries in the order they are written.
    pub exclude: Vec<IndexMap<String, Value>>,
}
