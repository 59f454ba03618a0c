//! `strategy.search`: which cells of a matrix run, and what the job's answer is. Either a
//! bisect (a boundary along one dimension) or an optimisation (the cell with the best metric,
//! by successive halving). The loader checks that exactly one is asked for.

use serde::{Serialize, Serializer};

use super::schema;
use crate::diag::Spanned;

/// `strategy.search`: which cells of the matrix run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[schemars(transform = one_kind_of_search)]
pub struct Search {
    /// `bisect: DIMENSION`: find the boundary along one matrix dimension, whose values are
    /// listed in order, between the cells that succeed and those that fail, in log₂ probes
    /// (for each combination of the other dimensions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::scalar_string")]
    pub bisect: Option<Spanned<String>>,
    /// For `bisect`. `largest` (default): the last value, in the listed order, whose cell
    /// succeeds (the cells succeed up to a boundary, e.g. a memory fraction that still
    /// loads); `smallest`: the first value whose cell succeeds (they succeed from a boundary
    /// on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub find: Option<Spanned<SearchFind>>,
    /// `maximize: METRIC`: the cell whose benchmark measures the highest `METRIC`
    /// (`output_tok_s`, `request_goodput`, `ttft_ms.p99`), found by successive halving:
    /// short benchmarks for every cell, longer ones for the best, full length for the
    /// finalists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::scalar_string")]
    pub maximize: Option<Spanned<String>>,
    /// `minimize: METRIC`: as `maximize`, for the lowest (`ttft_ms.p99`, `e2el_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::scalar_string")]
    pub minimize: Option<Spanned<String>>,
    /// For `maximize`/`minimize`: the `id` of the `benchmark` step whose result is scored;
    /// optional when the job has one `benchmark` step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::scalar_string")]
    pub step: Option<Spanned<String>>,
    /// For `maximize`/`minimize`: how many rounds, and which share of the cells each round
    /// keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<SearchBudget>,
    /// For `maximize`/`minimize`: conditions a cell's result must meet to count
    /// (`ttft_ms.p99 < 500`, `errors == 0`): `METRIC OP NUMBER`, with `<`, `<=`, `>`, `>=`,
    /// `==` or `!=`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<Spanned<Constraint>>,
}

/// Exactly one of `bisect`, `maximize` and `minimize`, as the loader requires.
fn one_kind_of_search(schema: &mut schemars::Schema) {
    schema.insert(
        "oneOf".into(),
        serde_json::json!([
            { "required": ["bisect"] },
            { "required": ["maximize"] },
            { "required": ["minimize"] }
        ]),
    );
}

impl Search {
    /// What an optimising search scores, and in which direction; `None` for a bisect.
    pub fn objective(&self) -> Option<(&Spanned<String>, Goal)> {
        match (&self.maximize, &self.minimize) {
            (Some(m), _) => Some((m, Goal::Maximize)),
            (None, Some(m)) => Some((m, Goal::Minimize)),
            (None, None) => None,
        }
    }
}

/// Which way an optimising search looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal {
    Maximize,
    Minimize,
}

impl Goal {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Maximize => "maximize",
            Self::Minimize => "minimize",
        }
    }

    /// Whether `a` is a better score than `b`.
    pub fn better(self, a: f64, b: f64) -> bool {
        match self {
            Self::Maximize => a > b,
            Self::Minimize => a < b,
        }
    }
}

/// What a bisect looks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SearchFind {
    #[default]
    Largest,
    Smallest,
}

/// `budget:` of an optimising search. Round `r` of `rounds` benchmarks every cell still in
/// the search at `keep^(rounds - r)` of its full length (with the defaults: 25%, 50%, 100%),
/// then keeps the best `keep` share of them (at least one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SearchBudget {
    /// How many rounds (1 to 8; default 3). The last runs at full length.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 8))]
    pub rounds: Option<u32>,
    /// The share of the cells each round keeps, above 0 and below 1 (default 0.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub keep: Option<f64>,
}

impl SearchBudget {
    pub const DEFAULT_ROUNDS: u32 = 3;
    pub const MAX_ROUNDS: u32 = 8;
    pub const DEFAULT_KEEP: f64 = 0.5;

    pub fn rounds(&self) -> u32 {
        self.rounds.unwrap_or(Self::DEFAULT_ROUNDS)
    }

    pub fn keep(&self) -> f64 {
        self.keep.unwrap_or(Self::DEFAULT_KEEP)
    }
}

/// One constraint: `METRIC OP NUMBER`.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    pub metric: String,
    pub op: Comparison,
    pub value: f64,
}

/// How a constraint compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    Equal,
    NotEqual,
}

impl Comparison {
    /// Longest first, so `<=` is not read as `<`.
    const ALL: [(&'static str, Self); 6] = [
        ("<=", Self::LessOrEqual),
        (">=", Self::GreaterOrEqual),
        ("==", Self::Equal),
        ("!=", Self::NotEqual),
        ("<", Self::Less),
        (">", Self::Greater),
    ];

    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, c)| *c == self)
            .map_or("", |(s, _)| s)
    }

    pub fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Self::Less => a < b,
            Self::LessOrEqual => a <= b,
            Self::Greater => a > b,
            Self::GreaterOrEqual => a >= b,
            Self::Equal => a == b,
            Self::NotEqual => a != b,
        }
    }
}

impl Constraint {
    /// `ttft_ms.p99 < 500` → the constraint, or why the text is not one.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some((at, op_text, op)) = Comparison::ALL
            .iter()
            .filter_map(|(s, op)| text.find(s).map(|at| (at, *s, *op)))
            .min_by_key(|(at, s, _)| (*at, std::cmp::Reverse(s.len())))
        else {
            return Err(
                "no comparison: write `METRIC OP NUMBER` with `<`, `<=`, `>`, `>=`, `==` or `!=`"
                    .into(),
            );
        };
        let metric = text[..at].trim();
        let number = text[at + op_text.len()..].trim();
        if metric.is_empty() || metric.contains(char::is_whitespace) {
            return Err(format!(
                "`{metric}` is not a metric name: write `METRIC {op_text} NUMBER`"
            ));
        }
        let value: f64 = number
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| format!("`{number}` is not a number"))?;
        Ok(Self {
            metric: metric.to_string(),
            op,
            value,
        })
    }
}

impl std::fmt::Display for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.metric, self.op.as_str(), self.value)
    }
}

impl Serialize for Constraint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl schemars::JsonSchema for Constraint {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Constraint".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "`METRIC OP NUMBER`: `ttft_ms.p99 < 500`, `errors == 0`.",
            "pattern": "^\\s*\\S+\\s*(<=|>=|==|!=|<|>)\\s*\\S+\\s*$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constraints_read_every_comparison() {
        let c = Constraint::parse("ttft_ms.p99 < 500").unwrap();
        assert_eq!(
            (c.metric.as_str(), c.op, c.value),
            ("ttft_ms.p99", Comparison::Less, 500.0)
        );
        assert_eq!(
            Constraint::parse("errors==0").unwrap().op,
            Comparison::Equal
        );
        assert_eq!(
            Constraint::parse("x <= 1.5").unwrap().op,
            Comparison::LessOrEqual
        );
        assert_eq!(
            Constraint::parse("x >= 1").unwrap().op,
            Comparison::GreaterOrEqual
        );
        assert_eq!(
            Constraint::parse("x != 1").unwrap().op,
            Comparison::NotEqual
        );
        assert_eq!(Constraint::parse("x > -1").unwrap().value, -1.0);
        assert_eq!(
            Constraint::parse("ttft_ms.p99 < 500").unwrap().to_string(),
            "ttft_ms.p99 < 500"
        );
    }

    #[test]
    fn a_constraint_that_is_not_one_says_why() {
        assert!(
            Constraint::parse("ttft_ms")
                .unwrap_err()
                .contains("no comparison")
        );
        assert!(
            Constraint::parse("< 5")
                .unwrap_err()
                .contains("metric name")
        );
        assert!(
            Constraint::parse("ttft_ms < fast")
                .unwrap_err()
                .contains("`fast` is not a number")
        );
        assert!(Constraint::parse("a b < 1").is_err());
    }

    #[test]
    fn a_goal_knows_which_score_is_better() {
        assert!(Goal::Maximize.better(2.0, 1.0));
        assert!(Goal::Minimize.better(1.0, 2.0));
        assert!(!Goal::Minimize.better(1.0, 1.0));
    }
}
