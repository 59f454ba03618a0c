//! YAML text → a small tree of [`Node`]s that remember where they were written.
//!
//! Why not `yaml_serde`: it gives no spans for values (only a line/column for some errors),
//! and a mapping with a repeated key silently keeps the last value. Every check of the loader
//! must point at the exact value it complains about, and a duplicated `steps:` must be an
//! error, so we build our own tree from `saphyr-parser` events. `yaml_serde` stays in the
//! project as the yardstick the benchmark compares against.
//!
//! Scalars are typed with the YAML 1.2 core schema (so `on` and `yes` are strings, unlike
//! YAML 1.1); quoted and block scalars are always strings. Anchors and aliases are resolved
//! here, so later stages never see them. Spans are byte offsets (saphyr counts characters).
//!
//! This module knows YAML only: nothing about workflows, keys or expressions.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError};

use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span, Spanned};

/// Aliases copy their anchor's node; this caps the total so a "billion laughs" file is an
/// error instead of an out-of-memory.
const ALIAS_NODE_BUDGET: usize = 100_000;
/// Deeper documents are refused: later stages walk the tree recursively.
const MAX_DEPTH: usize = 64;

/// One YAML value with its place in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    /// The whole node: quotes included for a quoted scalar; from the first key to the last
    /// value for a block mapping.
    pub span: Span,
    /// For scalars, where the text itself starts and ends: inside the quotes of a quoted
    /// scalar, the first content line of a block scalar. Equal to `span` otherwise.
    pub content: Span,
    /// The scalar exactly as YAML read it (unescaped, before typing): GitHub stringifies
    /// `with:` values, and `1.0` must stay `1.0`. Empty for collections.
    pub text: String,
    /// How deep the node's subtree is (1 for a scalar).
    depth: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    Seq(Vec<Node>),
    Map(Vec<MapEntry>),
}

/// A `key: value` pair. Keys are scalars (read as strings, like GitHub does).
#[derive(Clone, Debug, PartialEq)]
pub struct MapEntry {
    pub key: Spanned<String>,
    pub value: Node,
}

impl Node {
    fn scalar(kind: NodeKind, span: Span, content: Span, text: String) -> Self {
        Self {
            kind,
            span,
            content,
            text,
            depth: 1,
        }
    }

    /// "a mapping", "a list", "a string"…: the words used in "expected X, found Y".
    pub fn kind_name(&self) -> &'static str {
        match &self.kind {
            NodeKind::Null => "nothing (null)",
            NodeKind::Bool(_) => "a boolean",
            NodeKind::Int(_) | NodeKind::Float(_) => "a number",
            NodeKind::String(_) => "a string",
            NodeKind::Seq(_) => "a list",
            NodeKind::Map(_) => "a mapping",
        }
    }

    pub fn is_scalar(&self) -> bool {
        !matches!(self.kind, NodeKind::Seq(_) | NodeKind::Map(_))
    }

    pub fn is_null(&self) -> bool {
        matches!(self.kind, NodeKind::Null)
    }

    pub fn as_map(&self) -> Option<&[MapEntry]> {
        match &self.kind {
            NodeKind::Map(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.kind {
            NodeKind::Seq(items) => Some(items),
            _ => None,
        }
    }

    /// The text of a string scalar (not of a number or boolean).
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::String(s) => Some(s),
            _ => None,
        }
    }

    /// Any non-null scalar as the string GitHub would see (`5`, `true`, `1.0`, `text`).
    pub fn scalar_string(&self) -> Option<Spanned<String>> {
        match &self.kind {
            NodeKind::Seq(_) | NodeKind::Map(_) | NodeKind::Null => None,
            _ => Some(Spanned::new(self.text.clone(), self.content)),
        }
    }

    /// The value of `key` in a mapping, with the key's own span.
    pub fn get(&self, key: &str) -> Option<&MapEntry> {
        self.as_map()?.iter().find(|e| e.key.value == key)
    }
}

/// Parses one YAML document. Syntax errors, duplicate keys, several documents and other
/// problems come back as diagnostics; the tree is `None` only when the text is not YAML.
/// An empty file is a `Null` node.
pub fn parse(file: &Arc<SourceFile>) -> (Option<Node>, Diagnostics) {
    let mut b = Builder {
        file,
        offsets: ByteOffsets::new(&file.text),
        stack: Vec::new(),
        anchors: HashMap::new(),
        alias_budget: ALIAS_NODE_BUDGET,
        diags: Diagnostics::new(),
        root: None,
        documents: 0,
        fatal: false,
    };
    let mut parser = Parser::new_from_str(&file.text);
    while let Some(event) = parser.next_event() {
        match event {
            Ok((event, span)) => {
                let span = Span::new(
                    b.offsets.byte(span.start.index()),
                    b.offsets.byte(span.end.index()),
                );
                if !b.event(event, span) {
                    break;
                }
            }
            Err(e) => {
                b.diags.push(syntax_error(file, &b.offsets, &e));
                return (None, b.diags);
            }
        }
    }
    if b.fatal {
        return (None, b.diags);
    }
    let root = b.root.unwrap_or_else(|| {
        let end = Span::new(0, 0);
        Node::scalar(NodeKind::Null, end, end, String::new())
    });
    (Some(root), b.diags)
}

/// A scalar as a node: a plain one typed by the core schema (unless tagged `!!str`), a
/// quoted one's content without its quotes.
fn scalar(value: Cow<'_, str>, style: ScalarStyle, forced_string: bool, span: Span) -> Node {
    let content = match style {
        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted if span.end >= span.start + 2 => {
            Span::new(span.start + 1, span.end - 1)
        }
        _ => span,
    };
    let kind = if style == ScalarStyle::Plain && !forced_string {
        type_plain_scalar(&value)
    } else {
        NodeKind::String(value.to_string())
    };
    // Moved, not copied, when the parser already owns it: one allocation less per scalar.
    Node::scalar(kind, span, content, value.into_owned())
}

enum Frame {
    Seq {
        start: usize,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        start: usize,
        anchor: usize,
        entries: Vec<MapEntry>,
        key: Option<Spanned<String>>,
        /// First span of each key, for "first defined here".
        seen: HashMap<String, Span>,
    },
}

struct Builder<'a> {
    file: &'a Arc<SourceFile>,
    offsets: ByteOffsets,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    alias_budget: usize,
    diags: Diagnostics,
    root: Option<Node>,
    documents: usize,
    fatal: bool,
}

impl Builder<'_> {
    /// Handles one event; `false` stops parsing.
    fn event(&mut self, event: Event<'_>, span: Span) -> bool {
        match event {
            Event::DocumentStart(_) => return self.document_start(span),
            Event::Scalar(value, style, anchor, tag) => {
                let forced_string =
                    tag.is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str");
                return self.complete(scalar(value, style, forced_string, span), anchor);
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Frame::Seq {
                start: span.start,
                anchor,
                items: Vec::new(),
            }),
            Event::MappingStart(anchor, _) => self.stack.push(Frame::Map {
                start: span.start,
                anchor,
                entries: Vec::new(),
                key: None,
                seen: HashMap::new(),
            }),
            Event::SequenceEnd | Event::MappingEnd => return self.collection_end(span),
            Event::Alias(id) => return self.alias(id, span),
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        true
    }

    /// A second document is refused: a workflow file holds one.
    fn document_start(&mut self, span: Span) -> bool {
        self.documents += 1;
        if self.documents > 1 {
            self.stop_with(
                Diagnostic::error(self.file, span, "a workflow file holds one YAML document")
                    .label("a second document starts here")
                    .hint("remove this `---` and what follows, or move it to its own file"),
            );
            return false;
        }
        true
    }

    /// Reports `d` and stops parsing.
    fn stop_with(&mut self, d: Diagnostic) {
        self.diags.push(d);
        self.fatal = true;
    }

    /// The list or mapping that ends here becomes a node, unless it is nested too deeply.
    fn collection_end(&mut self, span: Span) -> bool {
        let Some(frame) = self.stack.pop() else {
            return true;
        };
        let (kind, start, anchor, depth, last_end) = match frame {
            Frame::Seq {
                start,
                anchor,
                items,
            } => {
                let depth = items.iter().map(|n| n.depth).max().unwrap_or(0);
                let last = items.last().map(|n| n.span.end);
                (NodeKind::Seq(items), start, anchor, depth, last)
            }
            Frame::Map {
                start,
                anchor,
                entries,
                ..
            } => {
                let depth = entries.iter().map(|e| e.value.depth).max().unwrap_or(0);
                let last = entries.last().map(|e| e.value.span.end.max(e.key.span.end));
                (NodeKind::Map(entries), start, anchor, depth, last)
            }
        };
        // A block collection "ends" where the next token starts (often the next line); a
        // flow one ends after its bracket. Take whichever is tighter but still covers the
        // last child.
        let end = match last_end {
            Some(last) if span.end > last && self.is_flow_close(span) => span.end,
            Some(last) => last,
            None => span.end.max(start),
        };
        let span = Span::new(start, end.max(start));
        let node = Node {
            kind,
            span,
            content: span,
            text: String::new(),
            depth: depth + 1,
        };
        if node.depth > MAX_DEPTH {
            self.stop_with(
                Diagnostic::error(
                    self.file,
                    Span::new(start, start),
                    "the document is nested too deeply",
                )
                .label(format!(
                    "more than {MAX_DEPTH} levels of lists and mappings below here"
                )),
            );
            return false;
        }
        self.complete(node, anchor)
    }

    /// A copy of the anchored node, within what aliases may expand to in all.
    fn alias(&mut self, id: usize, span: Span) -> bool {
        let Some(mut node) = self.anchors.get(&id).cloned() else {
            self.stop_with(
                Diagnostic::error(self.file, span, "unknown alias")
                    .label("no anchor with this name before here"),
            );
            return false;
        };
        let size = node.size();
        if size > self.alias_budget {
            self.stop_with(
                Diagnostic::error(self.file, span, "aliases expand to too many values")
                    .label("this alias makes the document too large")
                    .hint("write the repeated part out, or use fewer nested aliases"),
            );
            return false;
        }
        self.alias_budget -= size;
        // The alias itself is where the value is used; what is inside keeps pointing at the
        // anchor's text, which is where it is written.
        node.span = span;
        if node.is_scalar() {
            node.content = span;
        }
        self.complete(node, 0)
    }

    fn is_flow_close(&self, span: Span) -> bool {
        span.end > span.start
            && matches!(self.file.text.as_bytes().get(span.start), Some(b'}' | b']'))
    }

    fn complete(&mut self, node: Node, anchor: usize) -> bool {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries, key, seen, ..
            }) => match key.take() {
                None => {
                    if !node.is_scalar() {
                        self.diags.push(
                            Diagnostic::error(self.file, node.span, "a key must be plain text")
                                .label(format!("this key is {}", node.kind_name())),
                        );
                    }
                    *key = Some(Spanned::new(node.text.clone(), node.content));
                }
                Some(k) => {
                    if let Some(first) = seen.get(&k.value) {
                        self.diags.push(
                            Diagnostic::error(
                                self.file,
                                k.span,
                                format!("duplicate key `{}`", k.value),
                            )
                            .label("defined again here")
                            .related(self.file, *first, "first defined here")
                            .hint("YAML keeps only one of them: remove or rename one"),
                        );
                    } else {
                        seen.insert(k.value.clone(), k.span);
                        entries.push(MapEntry {
                            key: k,
                            value: node,
                        });
                    }
                }
            },
        }
        true
    }
}

impl Node {
    fn size(&self) -> usize {
        match &self.kind {
            NodeKind::Seq(items) => 1 + items.iter().map(Node::size).sum::<usize>(),
            NodeKind::Map(entries) => 1 + entries.iter().map(|e| 1 + e.value.size()).sum::<usize>(),
            _ => 1,
        }
    }
}

/// YAML 1.2 core schema for plain scalars.
fn type_plain_scalar(s: &str) -> NodeKind {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return NodeKind::Null,
        "true" | "True" | "TRUE" => return NodeKind::Bool(true),
        "false" | "False" | "FALSE" => return NodeKind::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return NodeKind::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return NodeKind::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return NodeKind::Float(f64::NAN),
        _ => {}
    }
    if let Some(hex) = s.strip_prefix("0x") {
        if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return i64::from_str_radix(hex, 16)
                .map_or_else(|_| NodeKind::String(s.to_owned()), NodeKind::Int);
        }
        return NodeKind::String(s.to_owned());
    }
    if let Some(oct) = s.strip_prefix("0o") {
        if !oct.is_empty() && oct.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return i64::from_str_radix(oct, 8)
                .map_or_else(|_| NodeKind::String(s.to_owned()), NodeKind::Int);
        }
        return NodeKind::String(s.to_owned());
    }
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return match s.parse::<i64>() {
            Ok(i) => NodeKind::Int(i),
            Err(_) => s
                .parse::<f64>()
                .map_or_else(|_| NodeKind::String(s.to_owned()), NodeKind::Float),
        };
    }
    if is_core_float(digits)
        && let Ok(f) = s.parse::<f64>()
    {
        return NodeKind::Float(f);
    }
    NodeKind::String(s.to_owned())
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` without the sign.
fn is_core_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (!int.is_empty() || !frac.is_empty())
                && int.bytes().all(|b| b.is_ascii_digit())
                && frac.bytes().all(|b| b.is_ascii_digit())
                && !(int.is_empty() && frac.is_empty())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

/// saphyr's markers count characters; diagnostics need bytes.
struct ByteOffsets {
    /// Byte offset of each character (plus the end); empty for ASCII text, where they are equal.
    table: Vec<usize>,
    len: usize,
}

impl ByteOffsets {
    fn new(text: &str) -> Self {
        let table = if text.is_ascii() {
            Vec::new()
        } else {
            text.char_indices()
                .map(|(i, _)| i)
                .chain(std::iter::once(text.len()))
                .collect()
        };
        Self {
            table,
            len: text.len(),
        }
    }

    fn byte(&self, char_index: usize) -> usize {
        if self.table.is_empty() {
            char_index.min(self.len)
        } else {
            self.table.get(char_index).copied().unwrap_or(self.len)
        }
    }
}

/// saphyr's scanner messages, reworded for someone who writes workflows rather than parsers.
fn syntax_error(file: &Arc<SourceFile>, offsets: &ByteOffsets, e: &ScanError) -> Diagnostic {
    let at = offsets.byte(e.marker().index());
    let info = e.info();
    let (message, label, hint): (String, &str, Option<&str>) = match info {
        "mapping values are not allowed in this context" => (
            "invalid YAML: a `:` followed by a space is not allowed here".into(),
            "unexpected `: `",
            Some(
                "if this is part of a value, put the whole value in quotes; otherwise check the indentation of this line",
            ),
        ),
        "while parsing a block mapping, did not find expected key" => (
            "invalid YAML: this line does not fit the mapping around it".into(),
            "expected a `key: value` line here",
            Some("check that this line is indented like its sibling keys"),
        ),
        "tab cannot be used as indentation"
        | "tabs disallowed within this context (block indentation)"
        | "tabs disallowed in this context" => (
            "invalid YAML: tabs cannot indent YAML".into(),
            "tab here",
            Some("indent with spaces"),
        ),
        "did not find expected <document start>" | "did not find expected <document-start>" => (
            "invalid YAML: unexpected text after the document".into(),
            "unexpected text",
            Some("check the indentation of this line"),
        ),
        "while scanning a quoted scalar, found unexpected end of stream" => (
            "invalid YAML: a quoted string is never closed".into(),
            "the file ends inside a quoted string",
            Some("add the closing quote"),
        ),
        "while parsing a flow mapping, did not find expected ',' or '}'" => (
            "invalid YAML: expected `,` or `}` in an inline mapping".into(),
            "expected `,` or `}`",
            Some("close the `{` with `}`, separate entries with `,`"),
        ),
        "while parsing a flow sequence, expected ',' or ']'" => (
            "invalid YAML: expected `,` or `]` in an inline list".into(),
            "expected `,` or `]`",
            Some("close the `[` with `]`, separate items with `,`"),
        ),
        "block sequence entries are not allowed in this context" => (
            "invalid YAML: a `- ` list item is not allowed here".into(),
            "unexpected list item",
            Some("check the indentation of this line"),
        ),
        "while parsing a node, did not find expected node content" => (
            "invalid YAML: expected a value here".into(),
            "expected a value",
            Some("check for a missing value, an unclosed `[` or `{`, or a stray character"),
        ),
        other => {
            // "while parsing a block mapping, did not find …" → "did not find …": the
            // parser's state means nothing to the reader.
            let other = match other.split_once(", ") {
                Some((context, rest))
                    if context.starts_with("while parsing")
                        || context.starts_with("while scanning") =>
                {
                    rest
                }
                _ => other,
            }
            .replace('\'', "`");
            (format!("invalid YAML: {other}"), "here", None)
        }
    };
    // The usual cause in a workflow: an unquoted `${{ }}` in `{ … }` (`with: { args: --tp
    // ${{ matrix.tp }} }`), whose braces end the inline mapping. Closing the `{` is not the fix.
    let line_start = file.text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = file.text[at..]
        .find('\n')
        .map_or(file.text.len(), |i| at + i);
    let in_flow = info.contains("flow mapping") || info.contains("flow sequence");
    let hint = if in_flow && file.text[line_start..line_end].contains("${{") {
        Some(
            "a value holding `${{ }}` inside `{ … }` or `[ … ]` needs quotes, or its braces end \
             the inline mapping: `args: \"--tp ${{ matrix.tp }}\"`"
                .to_string(),
        )
    } else {
        hint.map(str::to_owned)
    };
    Diagnostic::error(file, Span::new(at, at), message)
        .label(label)
        .maybe_hint(hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn tree(text: &str) -> (Option<Node>, Diagnostics, Arc<SourceFile>) {
        let f = SourceFile::new("t.yml", text);
        let (n, d) = parse(&f);
        (n, d, f)
    }

    #[test]
    fn an_unquoted_expression_in_an_inline_mapping_is_told_to_take_quotes() {
        let (_, d, _) = tree("with: { args: --tp ${{ matrix.tp }} }\n");
        let hint = d.iter().flat_map(|d| d.hints.clone()).collect::<String>();
        assert!(hint.contains("needs quotes"), "{d:?}");
        let (_, d, _) = tree("with: { args: --tp 8\n");
        let hint = d.iter().flat_map(|d| d.hints.clone()).collect::<String>();
        assert!(hint.contains("close the `{`"), "{d:?}");
    }

    fn value<'a>(root: &'a Node, key: &str) -> &'a Node {
        &root.get(key).unwrap().value
    }

    #[test_case("a: true", NodeKind::Bool(true))]
    #[test_case("a: False", NodeKind::Bool(false))]
    #[test_case("a: yes", NodeKind::String("yes".into()); "yaml 1.1 booleans are strings")]
    #[test_case("a: on", NodeKind::String("on".into()))]
    #[test_case("a: ~", NodeKind::Null)]
    #[test_case("a:", NodeKind::Null)]
    #[test_case("a: null", NodeKind::Null)]
    #[test_case("a: 42", NodeKind::Int(42))]
    #[test_case("a: -7", NodeKind::Int(-7))]
    #[test_case("a: 0x1F", NodeKind::Int(31))]
    #[test_case("a: 0o17", NodeKind::Int(15))]
    #[test_case("a: 1.5", NodeKind::Float(1.5))]
    #[test_case("a: 1e3", NodeKind::Float(1000.0))]
    #[test_case("a: .5", NodeKind::Float(0.5))]
    #[test_case("a: -.inf", NodeKind::Float(f64::NEG_INFINITY))]
    #[test_case("a: '42'", NodeKind::String("42".into()); "quoted numbers are strings")]
    #[test_case("a: \"true\"", NodeKind::String("true".into()))]
    #[test_case("a: 1.2.3", NodeKind::String("1.2.3".into()))]
    #[test_case("a: 30s", NodeKind::String("30s".into()))]
    #[test_case("a: !!str 5", NodeKind::String("5".into()))]
    fn scalars_follow_the_core_schema(text: &str, expected: NodeKind) {
        let (root, d, _) = tree(text);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(value(&root.unwrap(), "a").kind, expected);
    }

    #[test]
    fn nan_is_a_float() {
        let (root, _, _) = tree("a: .nan");
        assert!(matches!(value(&root.unwrap(), "a").kind, NodeKind::Float(f) if f.is_nan()));
    }

    #[test]
    fn spans_are_bytes_even_after_multibyte_characters() {
        let text = "name: «données»\nrun: echo ✓ ok\n";
        let (root, d, _) = tree(text);
        assert!(d.is_empty());
        let root = root.unwrap();
        let run = value(&root, "run");
        assert_eq!(&text[run.span.range()], "echo ✓ ok");
        let key = &root.get("run").unwrap().key;
        assert_eq!(&text[key.span.range()], "run");
    }

    #[test]
    fn quoted_and_block_scalars_have_content_spans() {
        let text = "a: \"x ${{ y }}\"\nb: |\n  echo hi\n";
        let (root, _, _) = tree(text);
        let root = root.unwrap();
        let a = value(&root, "a");
        assert_eq!(&text[a.span.range()], "\"x ${{ y }}\"");
        assert_eq!(&text[a.content.range()], "x ${{ y }}");
        let b = value(&root, "b");
        assert!(text[b.content.start..].starts_with("echo hi"));
    }

    #[test]
    fn block_mapping_span_covers_first_key_to_last_value() {
        let text = "jobs:\n  a:\n    x: 1\n    y: [1, 2]\nz: 3\n";
        let (root, _, _) = tree(text);
        let jobs = value(&root.unwrap(), "jobs").clone();
        assert_eq!(&text[jobs.span.range()], "a:\n    x: 1\n    y: [1, 2]");
    }

    #[test]
    fn duplicate_keys_are_errors_at_the_second_with_the_first_related() {
        let text = "a: 1\nb: 2\na: 3\n";
        let (root, d, _) = tree(text);
        assert_eq!(d.len(), 1);
        let diag = d.iter().next().unwrap();
        assert_eq!(diag.message, "duplicate key `a`");
        assert_eq!(diag.span, Span::new(10, 11));
        assert_eq!(diag.related[0].span, Span::new(0, 1));
        // The first value is kept.
        assert_eq!(value(&root.unwrap(), "a").kind, NodeKind::Int(1));
    }

    #[test]
    fn aliases_copy_their_anchor() {
        let text = "base: &b {x: 1}\nother: *b\n";
        let (root, d, _) = tree(text);
        assert!(d.is_empty());
        let root = root.unwrap();
        let other = value(&root, "other");
        assert_eq!(other.get("x").unwrap().value.kind, NodeKind::Int(1));
        assert_eq!(&text[other.span.range()], "*b");
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let (root, d, _) = tree(&text);
        assert!(root.is_none());
        assert!(d.iter().any(|d| d.message.contains("too many")), "{d:?}");
    }

    #[test]
    fn syntax_errors_are_one_readable_diagnostic() {
        let (root, d, f) = tree("a: b: c\n");
        assert!(root.is_none());
        assert_eq!(d.len(), 1);
        let diag = d.iter().next().unwrap();
        assert!(diag.message.starts_with("invalid YAML"), "{}", diag.message);
        assert_eq!(f.location(diag.span), "t.yml:1:5");
    }

    #[test]
    fn a_second_document_is_an_error() {
        let (root, d, _) = tree("a: 1\n---\nb: 2\n");
        assert!(root.is_none());
        assert!(
            d.iter()
                .next()
                .unwrap()
                .message
                .contains("one YAML document")
        );
    }

    #[test]
    fn empty_text_is_null() {
        let (root, d, _) = tree("# nothing\n");
        assert!(d.is_empty());
        assert!(root.unwrap().is_null());
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = "[".repeat(100) + &"]".repeat(100);
        let (root, d, _) = tree(&text);
        assert!(root.is_none());
        assert!(!d.is_empty());
    }
}
