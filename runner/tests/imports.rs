//! The import graph of runner/src, file by file: no circle between files, and no arrow from a
//! lower part to a higher one (issue 15).
//!
//! An arrow is every path a non-test file names inside the crate: `use crate::…`,
//! `use super::…`, `use child::…`, and `crate::…`/`super::…` paths in code and in macro bodies.
//! It points at the file that defines the item, following re-exports, so `crate::engine::Event`
//! is an arrow to `engine/event.rs`, not to the `engine/mod.rs` that re-exports it. Test code
//! is left out: nothing imports a test, so it closes no circle.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proc_macro2::{TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::source_tree::{SourceTree, is_test_code, use_paths};

/// `(lower part, higher part)`: the lower never imports the higher. Data flows file → workflow
/// → plan → engine (→ steps → backend / gpu) → events → ui + store → report; the load
/// generator is called as a step and knows nothing of steps. Which host is local is the
/// events' business, not the view's.
const FORBIDDEN: &[(&str, &str)] = &[
    ("report", "engine"),
    ("ui", "engine"),
    ("bench", "engine"),
    ("store", "engine"),
    ("gpu", "engine"),
    ("backend", "engine"),
    ("bench", "steps"),
    ("ui", "hosts"),
    ("memory", "engine"),
    ("memory", "steps"),
    ("sim", "engine"),
    // A cluster is reached from the CLI and the worker; the engine runs one job of it
    // (`run_alone`) without knowing Slurm.
    ("engine", "slurm"),
    ("steps", "slurm"),
    ("gpu", "slurm"),
    // The web page reads what runs wrote (queue, run folders, store); it runs nothing itself,
    // and nothing that runs depends on it.
    ("serve", "engine"),
    ("serve", "slurm"),
    ("serve", "worker"),
    ("engine", "serve"),
    ("worker", "serve"),
];

/// Arrows that still break [`FORBIDDEN`], `(from, to)`. The restructuring of issue 15 removes
/// them: events, `JobSummary` and the stored logs move out of engine/, and the benchmark's
/// inputs reach bench/ already typed. The list may only shrink: an entry that is no longer an
/// arrow fails the test until it is deleted.
const ALLOWED_ARROWS: &[(&str, &str)] = &[];

/// Circles that still exist, each as its files in sorted order. The restructuring of issue 15
/// (steps behind a narrow handle instead of the executor's shared state) breaks them. A circle
/// must match an entry exactly, so one that shrinks or grows fails the test until its entry is
/// updated, and an entry matching no circle fails until it is deleted.
const ALLOWED_CIRCLES: &[&[&str]] = &[];

/// One import: `from` names something `to` defines, on `line` of `from`.
#[derive(Clone)]
struct Arrow {
    from: usize,
    to: usize,
    line: usize,
}

#[test]
fn lower_parts_never_import_higher_ones() {
    let tree = SourceTree::load();
    let arrows = arrows(&tree);
    let mut found: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for arrow in &arrows {
        let (from, to) = (
            tree.files[arrow.from].name.as_str(),
            tree.files[arrow.to].name.as_str(),
        );
        if FORBIDDEN.contains(&(part(from), part(to))) {
            found.entry((from, to)).or_insert(arrow.line);
        }
    }

    let allowed: BTreeSet<(&str, &str)> = ALLOWED_ARROWS.iter().copied().collect();
    let mut problems: Vec<String> = found
        .iter()
        .filter(|(pair, _)| !allowed.contains(pair))
        .map(|(&(from, to), line)| {
            format!(
                "runner/src/{from}:{line} imports {to}: `{}` must not import `{}`",
                part(from),
                part(to)
            )
        })
        .collect();
    problems.extend(
        allowed
            .iter()
            .filter(|pair| !found.contains_key(pair))
            .map(|(from, to)| {
                format!("{from} no longer imports {to}: remove the pair from ALLOWED_ARROWS")
            }),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_circle_between_files() {
    let tree = SourceTree::load();
    let mut graph: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for arrow in arrows(&tree) {
        graph.entry(arrow.from).or_default().insert(arrow.to);
    }
    let names = |files: &[usize]| -> Vec<&str> {
        let mut names: Vec<&str> = files.iter().map(|&f| tree.files[f].name.as_str()).collect();
        names.sort_unstable();
        names
    };

    let circles: Vec<Vec<usize>> = strongly_connected(&graph)
        .into_iter()
        .filter(|component| component.len() > 1)
        .collect();
    let allowed: BTreeSet<Vec<&str>> = ALLOWED_CIRCLES.iter().map(|c| c.to_vec()).collect();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for circle in &circles {
        let files = names(circle);
        if !allowed.contains(&files) {
            let path: Vec<&str> = shortest_cycle(&graph, circle)
                .iter()
                .map(|&f| tree.files[f].name.as_str())
                .collect();
            problems.push(format!(
                "a circle: {}\n  all {} files that reach each other: {files:?}",
                path.join(" → "),
                files.len()
            ));
        }
        seen.insert(files);
    }
    problems.extend(
        allowed
            .difference(&seen)
            .map(|files| format!("no longer a circle, remove it from ALLOWED_CIRCLES: {files:?}")),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The top-level part a file belongs to: `engine` for `engine/builtin/report.rs`, `signal` for
/// `signal.rs`.
fn part(file: &str) -> &str {
    let first = file.split('/').next().unwrap();
    first.strip_suffix(".rs").unwrap_or(first)
}

/// Every arrow between two different files of runner/src, test code left out.
fn arrows(tree: &SourceTree) -> Vec<Arrow> {
    let mut out = Vec::new();
    for file in tree.production_files() {
        let mut finder = ArrowFinder {
            tree,
            modules: vec![file.module],
            arrows: Vec::new(),
        };
        finder.visit_file(&file.syntax);
        out.extend(finder.arrows);
    }
    out
}

struct ArrowFinder<'a> {
    tree: &'a SourceTree,
    /// The module a path is written in, innermost last (inline `mod x { … }` pushes one).
    modules: Vec<usize>,
    arrows: Vec<Arrow>,
}

impl ArrowFinder<'_> {
    fn record(&mut self, segments: &[String], line: usize) {
        let module = *self.modules.last().unwrap();
        let from = self.tree.modules[module].file;
        if let Some(to) = self.tree.file_of(module, segments)
            && to != from
        {
            self.arrows.push(Arrow { from, to, line });
        }
    }

    /// Whether a path written in code names something of this crate (rather than a local, a
    /// dependency or std).
    fn is_crate_path(&self, first: &str) -> bool {
        let module = *self.modules.last().unwrap();
        matches!(first, "crate" | "super" | "self")
            || self.tree.modules[module].children.contains_key(first)
    }

    /// `crate::a::b` and `super::a` paths inside a macro call, which `syn` leaves as tokens.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut index = 0;
        while index < tokens.len() {
            match &tokens[index] {
                TokenTree::Group(group) => self.scan_tokens(group.stream()),
                TokenTree::Ident(ident) if ident == "crate" || ident == "super" => {
                    let mut segments = vec![ident.to_string()];
                    while let [
                        TokenTree::Punct(a),
                        TokenTree::Punct(b),
                        TokenTree::Ident(next),
                        ..,
                    ] = &tokens[index + 1..]
                        && a.as_char() == ':'
                        && b.as_char() == ':'
                    {
                        segments.push(next.to_string());
                        index += 3;
                    }
                    if segments.len() > 1 {
                        self.record(&segments, ident.span().start().line);
                    }
                }
                _ => {}
            }
            index += 1;
        }
    }
}

impl<'ast> Visit<'ast> for ArrowFinder<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        match item {
            syn::Item::Mod(m) if is_test_code(&m.attrs) => {}
            syn::Item::Mod(m) => {
                let here = *self.modules.last().unwrap();
                // A `mod x;` is its own file, visited on its own; only inline bodies are here.
                if m.content.is_some() {
                    self.modules
                        .push(self.tree.modules[here].children[&m.ident.to_string()]);
                    syn::visit::visit_item_mod(self, m);
                    self.modules.pop();
                }
            }
            syn::Item::Fn(syn::ItemFn { attrs, .. })
            | syn::Item::Impl(syn::ItemImpl { attrs, .. })
            | syn::Item::Use(syn::ItemUse { attrs, .. })
            | syn::Item::Const(syn::ItemConst { attrs, .. })
            | syn::Item::Static(syn::ItemStatic { attrs, .. })
                if is_test_code(attrs) => {}
            _ => syn::visit::visit_item(self, item),
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_code(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span().start().line;
        for path in use_paths(&u.tree) {
            self.record(&path, line);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 && self.is_crate_path(&segments[0]) {
            self.record(&segments, path.span().start().line);
        }
        syn::visit::visit_path(self, path);
    }

    /// `pub(in crate::a)` names where an item is visible, not something it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.scan_tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
}

/// Tarjan's strongly connected components: the groups of files that all reach each other.
fn strongly_connected(graph: &BTreeMap<usize, BTreeSet<usize>>) -> Vec<Vec<usize>> {
    struct Search<'g> {
        graph: &'g BTreeMap<usize, BTreeSet<usize>>,
        index: BTreeMap<usize, usize>,
        low: BTreeMap<usize, usize>,
        stack: Vec<usize>,
        on_stack: BTreeSet<usize>,
        components: Vec<Vec<usize>>,
    }
    impl Search<'_> {
        fn visit(&mut self, node: usize) {
            let order = self.index.len();
            self.index.insert(node, order);
            self.low.insert(node, order);
            self.stack.push(node);
            self.on_stack.insert(node);
            for &next in self.graph.get(&node).into_iter().flatten() {
                if !self.index.contains_key(&next) {
                    self.visit(next);
                    let low = self.low[&node].min(self.low[&next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(&next) {
                    let low = self.low[&node].min(self.index[&next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[&node] == self.index[&node] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(&member);
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                self.components.push(component);
            }
        }
    }
    let mut search = Search {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for &node in graph.keys() {
        if !search.index.contains_key(&node) {
            search.visit(node);
        }
    }
    search.components
}

/// The shortest way from the component's first file back to itself, first file repeated at
/// the end: `a.rs → b.rs → a.rs`.
fn shortest_cycle(graph: &BTreeMap<usize, BTreeSet<usize>>, component: &[usize]) -> Vec<usize> {
    let members: BTreeSet<usize> = component.iter().copied().collect();
    let start = *members.first().unwrap();
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in graph.get(&node).into_iter().flatten() {
            if !members.contains(&next) {
                continue;
            }
            if next == start {
                let mut path = vec![start, node];
                let mut at = node;
                while at != start {
                    at = came_from[&at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(slot) = came_from.entry(next) {
                slot.insert(node);
                queue.push_back(next);
            }
        }
    }
    unreachable!("a component of more than one file has a cycle through each of its files")
}
