//! The `needs` graph between jobs: run order, levels, and the errors that make it impossible.
//!
//! Strategy: unknown and self `needs` are reported and left out, then Kahn's algorithm orders
//! the rest, always taking the ready job written first, so independent jobs keep file order.
//! Jobs that never become ready sit on or behind a cycle; their strongly connected groups
//! (Tarjan) each yield one cycle, the shortest through the group's first job in file order, so
//! no cycle is reported twice (`a → b → a` and `b → a → b` are the same). A group with several
//! cycles reports one; fixing it brings the next to light.
//!
//! Jobs are identified by id only; each `needs` entry carries an opaque tag that comes back in
//! errors so the caller can point at the entry.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use crate::diag::did_you_mean;

/// One entry of a job's `needs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeedsRef {
    /// The id of the job waited on.
    pub job: String,
    /// Opaque to the graph (the caller's span handle); returned in errors about this entry.
    pub tag: usize,
}

/// A job and what it waits on, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobDeps {
    pub id: String,
    pub needs: Vec<NeedsRef>,
}

/// Why the jobs cannot be ordered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// The same id twice (the loader normally catches this as a duplicate key).
    #[error("job `{job}` is defined more than once")]
    DuplicateJob { job: String },
    /// `needs` names a job that does not exist.
    #[error("job `{job}` needs `{need}`, which is not a job in this workflow")]
    UnknownNeed {
        job: String,
        need: String,
        tag: usize,
        /// Ready "did you mean `x`?" when a job id is close.
        suggestion: Option<String>,
    },
    /// A job that needs itself.
    #[error("job `{job}` needs itself")]
    SelfNeed { job: String, tag: usize },
    /// Jobs that wait on each other in a circle.
    #[error("`needs` form a cycle: {}", cycle_text(.path))]
    Cycle {
        /// The cycle in order, closed: `[a, b, c, a]` means `a` needs `b`, `b` needs `c`, and
        /// `c` needs `a`.
        path: Vec<String>,
        /// `tags[i]` is the tag of the `needs` entry `path[i]` → `path[i + 1]`.
        tags: Vec<usize>,
    },
}

impl GraphError {
    /// A line saying how to fix it, for the diagnostic's `help:`.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::DuplicateJob { .. } => Some("rename one of the jobs".into()),
            Self::UnknownNeed { suggestion, .. } => suggestion.clone(),
            Self::SelfNeed { .. } => Some("remove it from its own `needs`".into()),
            Self::Cycle { .. } => {
                Some("remove one of these `needs` so the jobs can run one after another".into())
            }
        }
    }
}

fn cycle_text(path: &[String]) -> String {
    path.iter()
        .map(|j| format!("`{j}`"))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// The checked `needs` graph: every edge points at a known job and there is no cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobGraph {
    ids: Vec<String>,
    index: HashMap<String, usize>,
    /// Per job, the jobs it needs, as written (duplicates dropped).
    deps: Vec<Vec<usize>>,
    /// Per job, the jobs that need it, in file order.
    dependents: Vec<Vec<usize>>,
    order: Vec<usize>,
    /// Per job, 1 + the longest chain of `needs` below it (jobs without `needs` are level 1).
    levels: Vec<usize>,
}

impl JobGraph {
    /// Checks the `needs` of jobs given in file order and orders them. Every problem is
    /// returned at once: duplicates, unknown and self needs in file order, then cycles.
    pub fn build(jobs: &[JobDeps]) -> Result<Self, Vec<GraphError>> {
        let mut errors = Vec::new();
        let mut ids = Vec::with_capacity(jobs.len());
        let mut index = HashMap::with_capacity(jobs.len());
        let mut kept = Vec::with_capacity(jobs.len());
        for job in jobs {
            if index.contains_key(&job.id) {
                errors.push(GraphError::DuplicateJob {
                    job: job.id.clone(),
                });
                continue;
            }
            index.insert(job.id.clone(), ids.len());
            ids.push(job.id.clone());
            kept.push(job);
        }

        // deps[i] holds (dependency, tag) pairs; tags are kept for cycle reports.
        let mut deps: Vec<Vec<(usize, usize)>> = vec![Vec::new(); ids.len()];
        for (i, job) in kept.iter().enumerate() {
            for need in &job.needs {
                match index.get(&need.job) {
                    None => errors.push(GraphError::UnknownNeed {
                        job: job.id.clone(),
                        need: need.job.clone(),
                        tag: need.tag,
                        suggestion: did_you_mean(&need.job, &ids),
                    }),
                    Some(&j) if j == i => errors.push(GraphError::SelfNeed {
                        job: job.id.clone(),
                        tag: need.tag,
                    }),
                    Some(&j) => {
                        if !deps[i].iter().any(|&(d, _)| d == j) {
                            deps[i].push((j, need.tag));
                        }
                    }
                }
            }
        }

        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
        for (i, ds) in deps.iter().enumerate() {
            for &(d, _) in ds {
                dependents[d].push(i);
            }
        }

        let order = kahn(&deps, &dependents);
        if order.len() < ids.len() {
            let mut done = vec![false; ids.len()];
            for &i in &order {
                done[i] = true;
            }
            for group in strongly_connected(&deps, &done) {
                let (path, tags) = shortest_cycle(&deps, &group);
                errors.push(GraphError::Cycle {
                    path: path.into_iter().map(|i| ids[i].clone()).collect(),
                    tags,
                });
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }

        let mut levels = vec![1; ids.len()];
        for &i in &order {
            levels[i] = deps[i]
                .iter()
                .map(|&(d, _)| levels[d] + 1)
                .max()
                .unwrap_or(1);
        }
        Ok(Self {
            ids,
            index,
            deps: deps
                .into_iter()
                .map(|ds| ds.into_iter().map(|(d, _)| d).collect())
                .collect(),
            dependents,
            order,
            levels,
        })
    }

    /// The number of jobs.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `id` is a job of this graph.
    pub fn contains(&self, id: &str) -> bool {
        self.index.contains_key(id)
    }

    /// Job ids in file order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.ids.iter().map(String::as_str)
    }

    /// Job ids in an order where every job comes after all it needs; among jobs that could go
    /// next, the one written first goes first.
    pub fn order(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(|&i| self.ids[i].as_str())
    }

    /// The jobs `id` needs, as written (empty for an unknown id).
    pub fn dependencies(&self, id: &str) -> Vec<&str> {
        self.lookup(id, &self.deps)
    }

    /// The jobs that need `id`, in file order (empty for an unknown id).
    pub fn dependents(&self, id: &str) -> Vec<&str> {
        self.lookup(id, &self.dependents)
    }

    /// 1 for a job without `needs`, otherwise one more than the highest level it needs.
    pub fn level(&self, id: &str) -> Option<usize> {
        self.index.get(id).map(|&i| self.levels[i])
    }

    /// The highest level (0 for an empty graph).
    pub fn depth(&self) -> usize {
        self.levels.iter().copied().max().unwrap_or(0)
    }

    /// Jobs grouped by level for display: `levels()[0]` holds level 1, each group in file order.
    pub fn levels(&self) -> Vec<Vec<&str>> {
        let mut out = vec![Vec::new(); self.depth()];
        for (i, id) in self.ids.iter().enumerate() {
            out[self.levels[i] - 1].push(id.as_str());
        }
        out
    }

    fn lookup<'a>(&'a self, id: &str, table: &'a [Vec<usize>]) -> Vec<&'a str> {
        self.index.get(id).map_or_else(Vec::new, |&i| {
            table[i].iter().map(|&j| self.ids[j].as_str()).collect()
        })
    }
}

/// Kahn's algorithm taking the lowest (first written) ready job each time. Returns fewer jobs
/// than there are when some sit on or behind a cycle.
fn kahn(deps: &[Vec<(usize, usize)>], dependents: &[Vec<usize>]) -> Vec<usize> {
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut ready: BinaryHeap<Reverse<usize>> = waiting
        .iter()
        .enumerate()
        .filter(|&(_, &w)| w == 0)
        .map(|(i, _)| Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(deps.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &d in &dependents[i] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push(Reverse(d));
            }
        }
    }
    order
}

/// Tarjan's strongly connected components among the jobs not yet ordered, keeping only groups
/// that hold a cycle (more than one job; self needs were removed). Iterative, so a long chain
/// of jobs cannot overflow the stack. Groups are sorted by their first job and list jobs in
/// file order.
fn strongly_connected(deps: &[Vec<(usize, usize)>], done: &[bool]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = deps.len();
    let mut number = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut groups = Vec::new();
    for root in 0..n {
        if done[root] || number[root] != UNSEEN {
            continue;
        }
        // (job, position in its dependency list)
        let mut calls = vec![(root, 0usize)];
        number[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = calls.last_mut() {
            if let Some(&(w, _)) = deps[v].get(*pos) {
                *pos += 1;
                if done[w] {
                    continue;
                }
                if number[w] == UNSEEN {
                    number[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    calls.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(number[w]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == number[v] {
                let mut group = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    group.push(w);
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort_unstable();
                    groups.push(group);
                }
            }
        }
    }
    groups.sort_unstable_by_key(|g| g[0]);
    groups
}

/// The shortest cycle through the group's first job, by breadth-first search inside the group
/// (following dependencies in written order, so the result is stable). Returns the closed path
/// and the tag of each edge.
fn shortest_cycle(deps: &[Vec<(usize, usize)>], group: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let start = group[0];
    let in_group = |j: usize| group.binary_search(&j).is_ok();
    // came_from[j] = (previous job, tag of the edge previous → j)
    let mut came_from: HashMap<usize, (usize, usize)> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    let mut last = None;
    'search: while let Some(v) = queue.pop_front() {
        for &(w, tag) in &deps[v] {
            if !in_group(w) {
                continue;
            }
            if w == start {
                last = Some((v, tag));
                break 'search;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = came_from.entry(w) {
                e.insert((v, tag));
                queue.push_back(w);
            }
        }
    }
    // A strongly connected group of two or more always leads back to its start.
    let Some((mut v, closing_tag)) = last else {
        return (vec![start, start], Vec::new());
    };
    let mut path = vec![start, v];
    let mut tags = vec![closing_tag];
    while v != start {
        let (prev, tag) = came_from[&v];
        tags.push(tag);
        path.push(prev);
        v = prev;
    }
    path.reverse();
    tags.reverse();
    (path, tags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `("a", &["b", "c"])` = job `a` needs `b` and `c`; tags number the needs entries globally.
    fn jobs(spec: &[(&str, &[&str])]) -> Vec<JobDeps> {
        let mut tag = 0;
        spec.iter()
            .map(|(id, needs)| JobDeps {
                id: (*id).to_string(),
                needs: needs
                    .iter()
                    .map(|n| {
                        tag += 1;
                        NeedsRef {
                            job: (*n).to_string(),
                            tag: tag - 1,
                        }
                    })
                    .collect(),
            })
            .collect()
    }

    fn graph(spec: &[(&str, &[&str])]) -> JobGraph {
        JobGraph::build(&jobs(spec)).unwrap()
    }

    fn errors(spec: &[(&str, &[&str])]) -> Vec<GraphError> {
        JobGraph::build(&jobs(spec)).unwrap_err()
    }

    #[test]
    fn order_keeps_file_order_among_ready_jobs() {
        let g = graph(&[("c", &["b"]), ("a", &[]), ("b", &[]), ("d", &[])]);
        assert_eq!(g.order().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
        assert_eq!(g.ids().collect::<Vec<_>>(), ["c", "a", "b", "d"]);
    }

    #[test]
    fn dependencies_dependents_and_levels() {
        let g = graph(&[
            ("build", &[]),
            ("lint", &[]),
            ("bench", &["build"]),
            ("report", &["bench", "lint", "bench"]),
        ]);
        assert_eq!(g.dependencies("report"), ["bench", "lint"]);
        assert_eq!(g.dependents("build"), ["bench"]);
        assert_eq!(g.dependents("lint"), ["report"]);
        assert!(g.dependencies("nope").is_empty());
        assert_eq!(g.level("report"), Some(3));
        assert_eq!(g.level("lint"), Some(1));
        assert_eq!(
            g.levels(),
            vec![vec!["build", "lint"], vec!["bench"], vec!["report"]]
        );
        assert_eq!(g.depth(), 3);
    }

    #[test]
    fn empty_graph() {
        let g = graph(&[]);
        assert!(g.is_empty());
        assert!(g.levels().is_empty());
    }

    #[test]
    fn unknown_need_suggests_a_job() {
        let errs = errors(&[("bench", &[]), ("report", &["bnech"])]);
        assert_eq!(
            errs,
            vec![GraphError::UnknownNeed {
                job: "report".into(),
                need: "bnech".into(),
                tag: 0,
                suggestion: Some("did you mean `bench`?".into()),
            }]
        );
        assert_eq!(
            errs[0].to_string(),
            "job `report` needs `bnech`, which is not a job in this workflow"
        );
    }

    #[test]
    fn self_need_is_an_error() {
        let errs = errors(&[("a", &["a"])]);
        assert_eq!(
            errs,
            vec![GraphError::SelfNeed {
                job: "a".into(),
                tag: 0
            }]
        );
        assert_eq!(errs[0].to_string(), "job `a` needs itself");
    }

    #[test]
    fn duplicate_job_is_an_error() {
        assert_eq!(
            errors(&[("a", &[]), ("a", &[])]),
            vec![GraphError::DuplicateJob { job: "a".into() }]
        );
    }

    #[test]
    fn cycle_is_reported_once_with_its_path_and_tags() {
        // tags: a→b 0, b→c 1, c→a 2
        let errs = errors(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        assert_eq!(
            errs,
            vec![GraphError::Cycle {
                path: vec!["a".into(), "b".into(), "c".into(), "a".into()],
                tags: vec![0, 1, 2],
            }]
        );
        assert_eq!(
            errs[0].to_string(),
            "`needs` form a cycle: `a` → `b` → `c` → `a`"
        );
    }

    #[test]
    fn separate_cycles_are_each_reported() {
        let errs = errors(&[("x", &["y"]), ("a", &["b"]), ("y", &["x"]), ("b", &["a"])]);
        let paths: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            paths,
            [
                "`needs` form a cycle: `x` → `y` → `x`",
                "`needs` form a cycle: `a` → `b` → `a`"
            ]
        );
    }

    #[test]
    fn shortest_cycle_through_the_first_job_is_chosen() {
        // a→b→c→d→a and the shortcut a→c... only d closes back; the shortest is a→c→d→a.
        let errs = errors(&[
            ("a", &["b", "c"]),
            ("b", &["c"]),
            ("c", &["d"]),
            ("d", &["a"]),
        ]);
        let GraphError::Cycle { path, .. } = &errs[0] else {
            panic!()
        };
        assert_eq!(path, &["a", "c", "d", "a"]);
        assert_eq!(errs.len(), 1);
    }

    #[test]
    fn all_kinds_of_errors_come_together() {
        let errs = errors(&[("a", &["b", "zzz", "a"]), ("b", &["a"])]);
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(matches!(errs[2], GraphError::Cycle { .. }));
    }

    #[test]
    fn long_chains_do_not_overflow() {
        let n = 20_000;
        let ids: Vec<String> = (0..n).map(|i| format!("j{i}")).collect();
        let mut js: Vec<JobDeps> = (0..n)
            .map(|i| JobDeps {
                id: ids[i].clone(),
                needs: if i + 1 < n {
                    vec![NeedsRef {
                        job: ids[i + 1].clone(),
                        tag: i,
                    }]
                } else {
                    vec![]
                },
            })
            .collect();
        assert_eq!(JobGraph::build(&js).unwrap().depth(), n);
        js[n - 1].needs.push(NeedsRef {
            job: ids[0].clone(),
            tag: n,
        });
        let errs = JobGraph::build(&js).unwrap_err();
        let GraphError::Cycle { path, .. } = &errs[0] else {
            panic!()
        };
        assert_eq!(path.len(), n + 1);
    }

    /// A random DAG: `n` jobs in file order, edges oriented by a hidden rank so that the
    /// topological order differs from file order.
    fn dag() -> impl Strategy<Value = (Vec<JobDeps>, Vec<(usize, usize)>)> {
        (1usize..12).prop_flat_map(|n| {
            (
                Just(n).prop_shuffle_ranks(),
                prop::collection::vec((0..n, 0..n), 0..(n * 2)),
            )
                .prop_map(move |(rank, pairs)| {
                    let mut edges: Vec<(usize, usize)> = pairs
                        .into_iter()
                        .filter(|(a, b)| a != b)
                        .map(|(a, b)| if rank[a] > rank[b] { (a, b) } else { (b, a) })
                        .collect();
                    edges.sort_unstable();
                    edges.dedup();
                    let mut js: Vec<JobDeps> = (0..n)
                        .map(|i| JobDeps {
                            id: format!("j{i}"),
                            needs: vec![],
                        })
                        .collect();
                    for (t, &(a, b)) in edges.iter().enumerate() {
                        js[a].needs.push(NeedsRef {
                            job: format!("j{b}"),
                            tag: t,
                        });
                    }
                    (js, edges)
                })
        })
    }

    trait ShuffleRanks {
        fn prop_shuffle_ranks(self) -> BoxedStrategy<Vec<usize>>;
    }

    impl ShuffleRanks for Just<usize> {
        fn prop_shuffle_ranks(self) -> BoxedStrategy<Vec<usize>> {
            Just((0..self.0).collect::<Vec<_>>()).prop_shuffle().boxed()
        }
    }

    /// Whether `from` reaches `to` by following dependencies.
    fn reaches(edges: &[(usize, usize)], from: usize, to: usize) -> bool {
        let mut seen = vec![from];
        let mut i = 0;
        while i < seen.len() {
            let v = seen[i];
            i += 1;
            for &(a, b) in edges {
                if a == v && !seen.contains(&b) {
                    if b == to {
                        return true;
                    }
                    seen.push(b);
                }
            }
        }
        false
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn random_dags_order_every_edge((js, edges) in dag()) {
            let g = JobGraph::build(&js).unwrap();
            let order: Vec<&str> = g.order().collect();
            prop_assert_eq!(order.len(), js.len());
            let pos = |id: &str| order.iter().position(|o| *o == id).unwrap();
            for &(a, b) in &edges {
                let (a, b) = (format!("j{a}"), format!("j{b}"));
                prop_assert!(pos(&b) < pos(&a), "{} needs {} but comes first", a, b);
                prop_assert!(g.level(&b) < g.level(&a));
            }
            // File order among ready jobs: any job without needs is preceded only by jobs
            // without needs that are written before it, or by jobs it could not overtake.
            let roots: Vec<&str> = g.ids().filter(|id| g.dependencies(id).is_empty()).collect();
            prop_assert_eq!(roots.first().copied(), order.first().copied());
        }

        #[test]
        fn a_back_edge_is_always_reported_in_a_cycle(
            (js, edges) in dag(),
            pick in any::<prop::sample::Index>(),
        ) {
            let n = js.len();
            let pairs: Vec<(usize, usize)> = (0..n)
                .flat_map(|a| (0..n).map(move |b| (a, b)))
                .filter(|&(a, b)| a != b && reaches(&edges, a, b))
                .collect();
            prop_assume!(!pairs.is_empty());
            // a reaches b, so `b needs a` closes a cycle.
            let (a, b) = pairs[pick.index(pairs.len())];
            let mut js = js;
            js[b].needs.push(NeedsRef { job: format!("j{a}"), tag: 999 });
            let errs = JobGraph::build(&js).unwrap_err();
            // Every step of a reported cycle is a `needs` entry that was written.
            for e in &errs {
                if let GraphError::Cycle { path, .. } = e {
                    for w in path.windows(2) {
                        let job = js.iter().find(|j| j.id == w[0]).unwrap();
                        prop_assert!(job.needs.iter().any(|n| n.job == w[1]));
                    }
                }
            }
            let (from, to) = (format!("j{b}"), format!("j{a}"));
            let found = errs.iter().any(|e| match e {
                GraphError::Cycle { path, tags } => {
                    path.first() == path.last()
                        && tags.len() + 1 == path.len()
                        && path.windows(2).zip(tags).any(|(w, &t)| w[0] == from && w[1] == to && t == 999)
                }
                _ => false,
            });
            prop_assert!(found, "{:?}", errs);
            let only_cycles = errs.iter().all(|e| matches!(e, GraphError::Cycle { .. }));
            prop_assert!(only_cycles);
        }
    }
}
