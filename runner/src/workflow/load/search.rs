//! Reading `strategy.search`: a `bisect` of one matrix dimension, or a `maximize`/`minimize`
//! of a benchmark metric with its `budget` and `constraints`; exactly one of the three. What
//! the search names (a dimension, a benchmark step) is checked against the job once its
//! matrix and steps are read.

use super::reader::Reader;
use crate::diag::{Span, Spanned, did_you_mean, join_quoted};
use crate::workflow::model::{
    Constraint, Job, Matrix, MatrixDim, Search, SearchBudget, SearchFind, Step, Uses,
};
use crate::workflow::yaml::{Node, NodeKind};

const KINDS: &[&str] = &["bisect", "maximize", "minimize"];
const KEYS: &[&str] = &[
    "bisect",
    "find",
    "maximize",
    "minimize",
    "step",
    "budget",
    "constraints",
];

impl Reader {
    pub(super) fn search(&mut self, node: &Node) -> Option<Search> {
        let entries = self.map(
            "search",
            node,
            "a mapping with `bisect`, `maximize` or `minimize`",
        )?;
        self.check_keys(entries, KEYS, &[], "`strategy.search`");
        let mut search = Search::default();
        let mut kinds: Vec<&Spanned<String>> = Vec::new();
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "bisect" => search.bisect = self.string("bisect", v),
                "maximize" => search.maximize = self.metric("maximize", v),
                "minimize" => search.minimize = self.metric("minimize", v),
                "find" => search.find = Some(self.find(v)?),
                "step" => search.step = self.string("step", v),
                "budget" => search.budget = self.budget(v),
                "constraints" => search.constraints = self.constraints(v),
                _ => {}
            }
            if KINDS.contains(&e.key.value.as_str()) {
                kinds.push(&e.key);
            }
        }
        match kinds.as_slice() {
            [] => {
                let d = self
                    .err(node.span, "`strategy.search` needs `bisect`, `maximize` or `minimize`")
                    .hint("name the matrix dimension to bisect (`bisect: mem-fraction`) or the metric to optimise (`maximize: output_tok_s`)");
                self.report(d);
                return None;
            }
            [_] => {}
            [first, second, ..] => {
                let d = self
                    .err(
                        second.span,
                        format!(
                            "`strategy.search` takes one of {}, found `{}` and `{}`",
                            join_quoted(KINDS, "or"),
                            first.value,
                            second.value
                        ),
                    )
                    .label("a second search")
                    .hint("a job runs one search; split the matrix into two jobs for two searches");
                self.report(d);
                return None;
            }
        }
        self.check_keys_fit_the_kind(entries, search.bisect.is_some());
        Some(search)
    }

    /// `find` belongs to a bisect; `step`, `budget` and `constraints` to an optimisation.
    fn check_keys_fit_the_kind(
        &mut self,
        entries: &[crate::workflow::yaml::MapEntry],
        bisect: bool,
    ) {
        for e in entries {
            let key = e.key.value.as_str();
            let (fits, of) = match key {
                "find" => (bisect, "`bisect`"),
                "step" | "budget" | "constraints" => (!bisect, "`maximize` and `minimize`"),
                _ => continue,
            };
            if !fits {
                let d = self
                    .err(e.key.span, format!("`{key}` is for {of} only"))
                    .label("not used by this search")
                    .hint(format!("remove `{key}`"));
                self.report(d);
            }
        }
    }

    fn metric(&mut self, key: &str, node: &Node) -> Option<Spanned<String>> {
        let metric = self.string(key, node)?;
        if metric.value.is_empty() || metric.value.contains(char::is_whitespace) {
            let d = self
                .err(metric.span, format!("`{key}` is `{}`, not a metric name", metric.value))
                .label("expected one metric name")
                .hint(format!("name a metric the benchmark records: `{key}: output_tok_s`, or a statistic of one: `{key}: ttft_ms.p99`"));
            self.report(d);
            return None;
        }
        Some(metric)
    }

    fn find(&mut self, node: &Node) -> Option<Spanned<SearchFind>> {
        let text = self.string("find", node)?;
        let value = match text.value.as_str() {
            "largest" => SearchFind::Largest,
            "smallest" => SearchFind::Smallest,
            other => {
                let d = self
                    .err(text.span, format!("`find` is `{other}`"))
                    .label("not `largest` or `smallest`")
                    .maybe_hint(did_you_mean(other, &["largest", "smallest"]));
                self.report(d);
                return None;
            }
        };
        Some(Spanned::new(value, text.span))
    }

    fn budget(&mut self, node: &Node) -> Option<SearchBudget> {
        let entries = self.map("budget", node, "a mapping with `rounds` and `keep`")?;
        self.check_keys(entries, &["rounds", "keep"], &[], "`budget`");
        let mut budget = SearchBudget::default();
        for e in entries {
            let v = &e.value;
            match (e.key.value.as_str(), &v.kind) {
                ("rounds", NodeKind::Int(n))
                    if (1..=i64::from(SearchBudget::MAX_ROUNDS)).contains(n) =>
                {
                    budget.rounds = u32::try_from(*n).ok();
                }
                ("rounds", _) => self.out_of_range(
                    v,
                    "rounds",
                    &format!("a whole number from 1 to {}", SearchBudget::MAX_ROUNDS),
                    "`rounds: 3` benchmarks at 25%, 50% and 100% of the full length",
                ),
                ("keep", NodeKind::Float(f)) if *f > 0.0 && *f < 1.0 => budget.keep = Some(*f),
                ("keep", _) => self.out_of_range(
                    v,
                    "keep",
                    "a share above 0 and below 1",
                    "`keep: 0.5` keeps the better half of the cells after each round",
                ),
                _ => {}
            }
        }
        Some(budget)
    }

    fn out_of_range(&mut self, node: &Node, key: &str, expected: &str, example: &str) {
        let found = if node.is_scalar() && !node.is_null() {
            format!("`{}`", node.text)
        } else {
            node.kind_name().to_owned()
        };
        let d = self
            .err(
                node.span,
                format!("`{key}` expects {expected}, found {found}"),
            )
            .label(format!("expected {expected}"))
            .hint(example.to_string());
        self.report(d);
    }

    fn constraints(&mut self, node: &Node) -> Vec<Spanned<Constraint>> {
        let items = self.string_list("constraints", node, "a list of `METRIC OP NUMBER`");
        items
            .into_iter()
            .filter_map(|item| match Constraint::parse(&item.value) {
                Ok(c) => Some(Spanned::new(c, item.span)),
                Err(why) => {
                    let d = self
                        .err(item.span, format!("constraint `{}`: {why}", item.value))
                        .label("not `METRIC OP NUMBER`")
                        .hint("write e.g. `ttft_ms.p99 < 500` or `errors == 0`");
                    self.report(d);
                    None
                }
            })
            .collect()
    }

    /// A bisect's dimension must be one of the matrix's, written out as a list; any search
    /// needs a matrix.
    pub(super) fn check_search_matrix(
        &mut self,
        search: &Search,
        matrix: Option<&Matrix>,
        at: Span,
    ) {
        if matrix.is_none() {
            let d = self
                .err(at, "`strategy.search` needs a `matrix` to search")
                .label("a search with no cells")
                .hint("add `matrix:` with the values to search, e.g. `matrix: { tokens-per-chunk: [1, 2, 4] }`");
            self.report(d);
            return;
        }
        let Some(dim) = &search.bisect else {
            return;
        };
        let dims: Vec<&str> = match matrix {
            Some(Matrix::Dims(d)) => d
                .dims
                .iter()
                .filter(|(_, v)| matches!(v.value, MatrixDim::Values(_)))
                .map(|(k, _)| k.as_str())
                .collect(),
            _ => Vec::new(),
        };
        if dims.contains(&dim.value.as_str()) {
            return;
        }
        let d = self
            .err(dim.span, format!("`bisect` names `{}`, which is not a dimension of the matrix", dim.value))
            .label("not a matrix dimension written as a list")
            .maybe_hint(did_you_mean(&dim.value, &dims))
            .note("a bisect searches one dimension of `strategy.matrix` whose values are listed in order, e.g. `mem-fraction: [0.5, 0.6, 0.7, 0.8]`");
        self.report(d);
    }

    /// The benchmark step an optimisation scores: the one its `step` names, or the job's only
    /// `benchmark` step.
    pub(super) fn check_search_step(&mut self, job: &Job) {
        let Some(search) = job.strategy.as_ref().and_then(|s| s.search.as_ref()) else {
            return;
        };
        let Some((metric, goal)) = search.objective() else {
            return;
        };
        let benchmarks: Vec<&Step> = job.steps.iter().filter(|s| is_benchmark(s)).collect();
        let ids: Vec<&str> = benchmarks
            .iter()
            .filter_map(|s| s.id.as_ref().map(|i| i.value.as_str()))
            .collect();
        match &search.step {
            Some(step) if ids.contains(&step.value.as_str()) => {}
            Some(step) => {
                let d = self
                    .err(step.span, format!("`step` names `{}`, which is not a `benchmark` step of the job", step.value))
                    .label("no `uses: benchmark` step has this id")
                    .maybe_hint(did_you_mean(&step.value, &ids))
                    .note("the search scores the result of one `benchmark` step of the job, named by its `id`");
                self.report(d);
            }
            None if benchmarks.len() == 1 => {}
            None => {
                let (message, hint) = if benchmarks.is_empty() {
                    (
                        format!(
                            "`{}: {}` needs a `benchmark` step in the job to score",
                            goal.as_str(),
                            metric.value
                        ),
                        "add a `uses: benchmark` step that measures each cell".to_string(),
                    )
                } else {
                    (
                        format!(
                            "the job has {} `benchmark` steps: which one does the search score?",
                            benchmarks.len()
                        ),
                        format!(
                            "name it with `step:` ({})",
                            if ids.is_empty() {
                                "give the step an `id`".to_string()
                            } else {
                                join_quoted(&ids, "or")
                            }
                        ),
                    )
                };
                let d = self.err(metric.span, message).hint(hint);
                self.report(d);
            }
        }
    }
}

fn is_benchmark(step: &Step) -> bool {
    matches!(step.uses.as_ref().map(|u| &u.value), Some(Uses::Builtin(name)) if name == "benchmark")
}
