//! The fenced code blocks of a Markdown page, and a block of steps or jobs inside the smallest
//! workflow around them: read by the docs-as-tests (`doc_examples.rs`) and by the server
//! contract test (`server_contract.rs`), which parses every server command line the docs show.

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// One fenced code block of a page.
pub(crate) struct Block {
    pub(crate) lang: String,
    pub(crate) attrs: Vec<(String, String)>,
    pub(crate) text: String,
    /// 1-based line of the opening fence.
    pub(crate) line: usize,
    /// Bytes of the block's content in the page (between the fences), for blessing.
    pub(crate) content: Range<usize>,
    /// The fence's indentation (a block inside a list item), for blessing.
    pub(crate) indent: String,
}

impl Block {
    pub(crate) fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        self.attr(key).is_some()
    }
}

pub(crate) fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for (event, range) in Parser::new(page).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    // An indented block is a formula or a quote, not an example.
                    CodeBlockKind::Indented => "text".to_string(),
                };
                let words = shlex::split(&info).unwrap_or_else(|| vec![info.clone()]);
                let lang = words.first().cloned().unwrap_or_default();
                let attrs = words
                    .iter()
                    .skip(1)
                    .map(|w| match w.split_once('=') {
                        Some((k, v)) => (k.to_string(), v.to_string()),
                        None => (w.clone(), String::new()),
                    })
                    .collect();
                let line_start = page[..range.start].rfind('\n').map_or(0, |i| i + 1);
                let indent: String = page[line_start..range.start]
                    .chars()
                    .take_while(|c| *c == ' ')
                    .collect();
                let block_text = &page[range.clone()];
                let first_newline = block_text.find('\n').map_or(block_text.len(), |i| i + 1);
                let last_line = block_text
                    .trim_end_matches('\n')
                    .rfind('\n')
                    .map_or(block_text.len(), |i| i + 1);
                current = Some(Block {
                    lang,
                    attrs,
                    text: String::new(),
                    line: page[..range.start].matches('\n').count() + 1,
                    content: range.start + first_newline..range.start + last_line,
                    indent,
                });
            }
            Event::Text(text) => {
                if let Some(block) = &mut current {
                    block.text.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(current.take()),
            _ => {}
        }
    }
    out
}

/// A `steps` block (a list of steps, or `steps:` with one) or a `jobs` block (jobs by id),
/// inside the smallest workflow that holds it.
pub(crate) fn wrapped(block: &Block) -> String {
    let indent = |text: &str, by: &str| -> String {
        text.lines()
            .map(|l| {
                if l.is_empty() {
                    "\n".to_string()
                } else {
                    format!("{by}{l}\n")
                }
            })
            .collect()
    };
    if block.flag("steps") {
        if block.text.trim_start().starts_with("steps:") {
            format!("jobs:\n  docs:\n{}", indent(&block.text, "    "))
        } else {
            format!(
                "jobs:\n  docs:\n    steps:\n{}",
                indent(&block.text, "      ")
            )
        }
    } else if block.flag("jobs") {
        format!("jobs:\n{}", indent(&block.text, "  "))
    } else {
        block.text.clone()
    }
}
