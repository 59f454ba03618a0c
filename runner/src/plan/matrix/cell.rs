//! One expanded combination of a matrix, and the display name GitHub gives its job.

use indexmap::IndexMap;
use serde_json::Value;

/// GitHub truncates display names longer than this (with `...`).
const MAX_NAME_CHARS: usize = 100;

/// Where a cell came from; decides which values appear in its display name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellOrigin {
    /// A combination of the cartesian product (possibly extended by `include` entries).
    Product,
    /// An `include` entry (its index) that matched no combination and runs on its own.
    Include(usize),
    /// The single cell of a job that has no matrix.
    NoMatrix,
}

/// One expanded combination: the `matrix` context of one job run.
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixCell {
    /// Dimension values first (in dimension order), then values added by `include`.
    pub values: IndexMap<String, Value>,
    pub origin: CellOrigin,
    /// How many leading entries of `values` make up the display name.
    pub(super) named: usize,
}

impl MatrixCell {
    /// The one cell of a job without a matrix: empty `matrix` context, plain job name.
    pub fn no_matrix() -> Self {
        Self {
            values: IndexMap::new(),
            origin: CellOrigin::NoMatrix,
            named: 0,
        }
    }

    /// The values GitHub shows after the job name, as text: for a product cell the dimension
    /// values only (values added by `include` are not shown), for an include-only cell all of
    /// its values. Objects and arrays contribute their scalar leaves in order; `null` and empty
    /// strings are left out, as GitHub does.
    pub fn name_segments(&self) -> Vec<String> {
        let mut out = Vec::new();
        for value in self.values.values().take(self.named) {
            push_leaves(value, &mut out);
        }
        out
    }

    /// GitHub's display name: `bench (nccl, 128)`, or the job name alone when there are no
    /// segments; cut to 100 characters with `...` like GitHub.
    pub fn display_name(&self, job_name: &str) -> String {
        let segments = self.name_segments();
        let name = if segments.is_empty() {
            job_name.to_owned()
        } else {
            format!("{job_name} ({})", segments.join(", "))
        };
        if name.chars().count() > MAX_NAME_CHARS {
            let cut: String = name.chars().take(MAX_NAME_CHARS - 3).collect();
            format!("{cut}...")
        } else {
            name
        }
    }
}

/// Scalar leaves of a value as GitHub prints them in a job name, depth first.
fn push_leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Null => {}
        Value::Bool(b) => out.push(b.to_string()),
        Value::Number(n) => out.push(format_number(n)),
        Value::String(s) => {
            if !s.is_empty() {
                out.push(s.clone());
            }
        }
        Value::Array(items) => items.iter().for_each(|v| push_leaves(v, out)),
        Value::Object(fields) => fields.values().for_each(|v| push_leaves(v, out)),
    }
}

/// Integers as written; other numbers in their shortest form (`3.1`, not `3.10`).
fn format_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    match n.as_f64() {
        Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 => {
            format!("{}", f as i64)
        }
        Some(f) => f.to_string(),
        None => n.to_string(),
    }
}
