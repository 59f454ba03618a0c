//! Why a matrix cannot be expanded, with the hint that fixes it.

use super::input::MAX_CELLS;

/// Why a matrix cannot be expanded. Messages are lower-case with user values in backticks; the
/// indexes say which dimension or entry to point at.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MatrixError {
    /// No dimension and no `include` entry (GitHub: "Matrix must define at least one vector").
    #[error("the matrix defines no dimension and no `include` entry")]
    Empty,
    /// A dimension with an empty list (GitHub: "Matrix vector 'x' does not contain any values").
    #[error("matrix dimension `{dimension}` has no values")]
    EmptyDimension { dimension: String, index: usize },
    /// An `exclude` entry with no keys (it would exclude everything).
    #[error("`exclude` entry {} is empty", entry + 1)]
    EmptyExclude { entry: usize },
    /// An `include` entry with no keys.
    #[error("`include` entry {} is empty", entry + 1)]
    EmptyInclude { entry: usize },
    /// An `exclude` key that is not a dimension (GitHub: "Matrix exclude key 'x' does not match
    /// any key within the matrix"). `include` keys need not be dimensions: they add values.
    #[error("`exclude` key `{key}` is not a dimension of the matrix")]
    UnknownExcludeKey {
        entry: usize,
        key: String,
        /// Ready "did you mean `x`?" when a dimension is close.
        suggestion: Option<String>,
        dimensions: Vec<String>,
    },
    /// More than [`MAX_CELLS`] cells after `exclude` and `include`.
    #[error("the matrix expands to {count} jobs, more than the limit of {MAX_CELLS}")]
    TooManyCells { count: usize },
    /// The product alone is too large to enumerate (far above [`MAX_CELLS`]).
    #[error(
        "the matrix has {product} combinations before `exclude`, far more than the limit of {MAX_CELLS} jobs"
    )]
    ProductTooLarge { product: u128 },
}

impl MatrixError {
    /// A line saying how to fix it, for the diagnostic's `help:`.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Empty => {
                Some("add a dimension such as `version: [1, 2]`, or remove `matrix`".into())
            }
            Self::EmptyDimension { .. } => {
                Some("give the dimension at least one value, or remove it".into())
            }
            Self::EmptyExclude { .. } => {
                Some("name the dimension values to exclude, e.g. `- os: windows`".into())
            }
            Self::EmptyInclude { .. } => {
                Some("add the values this combination sets, or remove the entry".into())
            }
            Self::UnknownExcludeKey {
                suggestion,
                dimensions,
                ..
            } => suggestion.clone().or_else(|| {
                Some(if dimensions.is_empty() {
                    "`exclude` only removes combinations of dimensions, and this matrix has none"
                        .into()
                } else {
                    format!(
                        "the dimensions are {}",
                        crate::diag::join_quoted(dimensions, "and")
                    )
                })
            }),
            Self::TooManyCells { .. } | Self::ProductTooLarge { .. } => Some(
                "split the job, drop dimension values, or `exclude` combinations you do not need"
                    .into(),
            ),
        }
    }
}
