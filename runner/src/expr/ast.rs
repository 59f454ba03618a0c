//! The syntax tree of an expression, every node with its byte span in the source text, and
//! the questions callers ask of a tree without evaluating it (which contexts it reads, whether
//! it calls a status function). It knows nothing about evaluation or about tokens.

use std::ops::Range;

use super::function::Function;
use super::value::Value;

/// A parsed expression. Build one with [`super::parse`]; evaluate it with
/// [`super::evaluate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub(crate) node: Node,
    /// Bytes of the source text this node was parsed from.
    pub span: Range<usize>,
    /// Levels of nodes from here down (a leaf is 1), kept so the parser can enforce GitHub's
    /// depth limit as it builds, before a hostile input makes a tree too deep to drop.
    depth: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    /// `null`, `true`, `42`, `'text'`: never an array or object.
    Literal(Value),
    /// A named context such as `github` or `matrix`.
    Context(String),
    /// `target.name`, `target[key]`, `target.*`, `target[*]`.
    Index {
        target: Box<Expr>,
        key: Key,
    },
    Not(Box<Expr>),
    Compare {
        op: CompareOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `a && b && c` is one node, as in GitHub's parser, so long chains are not deep.
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Call {
        func: Function,
        args: Vec<Expr>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Key {
    /// `.name`
    Property(String),
    /// `.*` or `[*]`
    Star,
    /// `[expr]`
    Index(Box<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A context read that is known without evaluating: `steps.build.outputs.x` gives
/// `["steps", "build", "outputs", "x"]`. The path stops before the first computed index or `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextAccess {
    pub path: Vec<String>,
    /// Bytes of the access in the source text (from the context name to the last static part).
    pub span: Range<usize>,
}

impl Expr {
    pub(crate) fn new(node: Node, span: Range<usize>) -> Self {
        let mut e = Self {
            node,
            span,
            depth: 1,
        };
        e.depth = 1 + e.children().iter().map(|c| c.depth).max().unwrap_or(0);
        e
    }

    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// Every static context access, for validation (`matrix.os` when the matrix has no `os`).
    /// `steps['build']` counts as a property; `steps[matrix.id]` yields `["steps"]` and
    /// `["matrix", "id"]`.
    pub fn context_accesses(&self) -> Vec<ContextAccess> {
        let mut out = Vec::new();
        self.collect_accesses(&mut out);
        out
    }

    fn collect_accesses(&self, out: &mut Vec<ContextAccess>) {
        if let Some(path) = self.static_path() {
            out.push(ContextAccess {
                path,
                span: self.span.clone(),
            });
            return;
        }
        for child in self.children() {
            child.collect_accesses(out);
        }
    }

    /// The property names of a chain of static accesses rooted at a context.
    fn static_path(&self) -> Option<Vec<String>> {
        match &self.node {
            Node::Context(name) => Some(vec![name.clone()]),
            Node::Index { target, key } => {
                let name = match key {
                    Key::Property(p) => p.clone(),
                    Key::Index(k) => match &k.node {
                        Node::Literal(Value::String(s)) => s.clone(),
                        _ => return None,
                    },
                    Key::Star => return None,
                };
                let mut path = target.static_path()?;
                path.push(name);
                Some(path)
            }
            _ => None,
        }
    }

    /// Whether the expression calls `success()`, `failure()`, `always()` or `cancelled()`: an
    /// `if:` without one means `success() && (…)`.
    pub fn calls_status_function(&self) -> bool {
        matches!(&self.node, Node::Call { func, .. } if func.is_status())
            || self.children().iter().any(|c| c.calls_status_function())
    }

    pub(crate) fn children(&self) -> Vec<&Expr> {
        match &self.node {
            Node::Literal(_) | Node::Context(_) => Vec::new(),
            Node::Index { target, key } => match key {
                Key::Index(k) => vec![target, k],
                _ => vec![target],
            },
            Node::Not(e) => vec![e],
            Node::Compare { left, right, .. } => vec![left, right],
            Node::And(items) | Node::Or(items) | Node::Call { args: items, .. } => {
                items.iter().collect()
            }
        }
    }

    /// Moves every span in the tree by `offset` bytes (an expression embedded in a string).
    pub(crate) fn shift(&mut self, offset: usize) {
        self.span = self.span.start + offset..self.span.end + offset;
        match &mut self.node {
            Node::Literal(_) | Node::Context(_) => {}
            Node::Index { target, key } => {
                target.shift(offset);
                if let Key::Index(k) = key {
                    k.shift(offset);
                }
            }
            Node::Not(e) => e.shift(offset),
            Node::Compare { left, right, .. } => {
                left.shift(offset);
                right.shift(offset);
            }
            Node::And(items) | Node::Or(items) | Node::Call { args: items, .. } => {
                items.iter_mut().for_each(|e| e.shift(offset));
            }
        }
    }
}
