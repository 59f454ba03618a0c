//! The built-in functions: their names (matched case-insensitively), arities (checked at
//! parse time) and behaviour on plain values. `case` and the status functions need the
//! evaluator (laziness, job status) and are evaluated there; everything else is here.

use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;

use super::error::ExprError;
use super::text::{contains_ignore_case, ends_with_ignore_case, starts_with_ignore_case};
use super::value::{Value, loose_eq};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    Contains,
    StartsWith,
    EndsWith,
    Format,
    Join,
    ToJson,
    FromJson,
    HashFiles,
    Case,
    Success,
    Failure,
    Always,
    Cancelled,
}

const ALL: [Function; 13] = [
    Function::Contains,
    Function::StartsWith,
    Function::EndsWith,
    Function::Format,
    Function::Join,
    Function::ToJson,
    Function::FromJson,
    Function::HashFiles,
    Function::Case,
    Function::Success,
    Function::Failure,
    Function::Always,
    Function::Cancelled,
];

impl Function {
    /// Every function name in its documented spelling, for suggestions.
    pub const NAMES: &'static [&'static str] = &[
        "contains",
        "startsWith",
        "endsWith",
        "format",
        "join",
        "toJSON",
        "fromJSON",
        "hashFiles",
        "case",
        "success",
        "failure",
        "always",
        "cancelled",
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES[ALL.iter().position(|f| *f == self).unwrap_or(0)]
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .map(|i| ALL[i])
    }

    pub fn is_status(self) -> bool {
        matches!(
            self,
            Self::Success | Self::Failure | Self::Always | Self::Cancelled
        )
    }

    /// How it is called, for hints.
    pub fn signature(self) -> &'static str {
        match self {
            Self::Contains => "contains(search, item)",
            Self::StartsWith => "startsWith(string, prefix)",
            Self::EndsWith => "endsWith(string, suffix)",
            Self::Format => "format('{0} {1}', a, b)",
            Self::Join => "join(array, separator)",
            Self::ToJson => "toJSON(value)",
            Self::FromJson => "fromJSON(text)",
            Self::HashFiles => "hashFiles('**/*.lock', ...)",
            Self::Case => "case(pred1, value1, pred2, value2, ..., default)",
            Self::Success => "success()",
            Self::Failure => "failure()",
            Self::Always => "always()",
            Self::Cancelled => "cancelled()",
        }
    }

    /// `Err` says what it takes ("2 arguments").
    pub fn check_arity(self, n: usize) -> Result<(), &'static str> {
        let ok = match self {
            Self::Contains | Self::StartsWith | Self::EndsWith => n == 2,
            Self::Format | Self::HashFiles => (1..=255).contains(&n),
            Self::Join => (1..=2).contains(&n),
            Self::ToJson | Self::FromJson => n == 1,
            Self::Case => n >= 3 && n % 2 == 1,
            Self::Success | Self::Failure | Self::Always | Self::Cancelled => n == 0,
        };
        if ok {
            return Ok(());
        }
        Err(match self {
            Self::Contains | Self::StartsWith | Self::EndsWith => "2 arguments",
            Self::Format | Self::HashFiles => "1 to 255 arguments",
            Self::Join => "1 or 2 arguments",
            Self::ToJson | Self::FromJson => "1 argument",
            Self::Case => "an odd number of arguments, at least 3 (pairs, then a default)",
            Self::Success | Self::Failure | Self::Always | Self::Cancelled => "no arguments",
        })
    }
}

/// `contains(search, item)`: for an array, whether an element loosely equals `item` (arrays and
/// objects by identity: a pointer into the same context data); otherwise a case-insensitive
/// substring test on both as strings.
pub fn contains(haystack: &Value, needle: &Value) -> bool {
    match haystack {
        Value::Array(items) => items
            .iter()
            .any(|item| loose_eq(item, needle, std::ptr::eq(item, needle))),
        other => contains_ignore_case(&other.to_expr_string(), &needle.to_expr_string()),
    }
}

pub fn starts_with(s: &Value, prefix: &Value) -> bool {
    starts_with_ignore_case(&s.to_expr_string(), &prefix.to_expr_string())
}

pub fn ends_with(s: &Value, suffix: &Value) -> bool {
    ends_with_ignore_case(&s.to_expr_string(), &suffix.to_expr_string())
}

/// `join(array, separator = ',')`: elements as strings; a scalar is itself as a string, an
/// object is `''`. An array or object as separator means the default, as in GitHub.
pub fn join(items: &Value, separator: Option<&Value>) -> String {
    let sep = match separator {
        None | Some(Value::Array(_) | Value::Object(_)) => ",".to_string(),
        Some(s) => s.to_expr_string(),
    };
    match items {
        Value::Array(items) => items
            .iter()
            .map(Value::to_expr_string)
            .collect::<Vec<_>>()
            .join(&sep),
        Value::Object(_) => String::new(),
        other => other.to_expr_string(),
    }
}

/// `format('{0} and {1}', a, b)`: `{N}` is argument N as a string, `{{` and `}}` are literal
/// braces; anything else with a brace is an error, as in .NET's `String.Format`.
pub fn format(
    template: &str,
    args: &[Cow<'_, Value>],
    span: Range<usize>,
) -> Result<String, ExprError> {
    let invalid = |why: String| {
        ExprError::eval(
            format!("invalid format string `{template}`: {why}"),
            span.clone(),
        )
        .with_hint(Some(
            "write `{0}`, `{1}`… for the arguments and `{{` / `}}` for literal braces".into(),
        ))
    };
    let mut out = String::with_capacity(template.len());
    let mut chars = template.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if chars.peek().is_some_and(|&(_, n)| n == '{') => {
                chars.next();
                out.push('{');
            }
            '{' => {
                let rest = &template[i + 1..];
                let Some(close) = rest.find('}') else {
                    return Err(invalid(format!("the `{{` at offset {i} is never closed")));
                };
                let index_text = &rest[..close];
                let index: usize = index_text
                    .parse()
                    .ok()
                    .filter(|_| index_text.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| {
                        invalid(format!("`{{{index_text}}}` is not an argument number"))
                    })?;
                let Some(arg) = args.get(index) else {
                    return Err(invalid(format!(
                        "`{{{index}}}` refers to argument {index}, but {} given",
                        match args.len() {
                            0 => "no arguments were".to_string(),
                            1 => "only argument 0 was".to_string(),
                            n => format!("only arguments 0 to {} were", n - 1),
                        }
                    )));
                };
                out.push_str(&arg.to_expr_string());
                while chars.peek().is_some_and(|&(j, _)| j <= i + 1 + close) {
                    chars.next();
                }
            }
            '}' if chars.peek().is_some_and(|&(_, n)| n == '}') => {
                chars.next();
                out.push('}');
            }
            '}' => {
                return Err(invalid(format!(
                    "the `}}` at offset {i} closes nothing (write `}}}}` for a literal brace)"
                )));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

pub fn from_json(text: &str, span: Range<usize>) -> Result<Value, ExprError> {
    serde_json::from_str::<serde_json::Value>(text)
        .map(Value::from_json)
        .map_err(|e| {
            let shown: String = text.chars().take(40).collect();
            let ellipsis = if text.chars().count() > 40 { "…" } else { "" };
            ExprError::eval(
                format!("`fromJSON` could not parse `{shown}{ellipsis}` as JSON: {e}"),
                span,
            )
        })
}

/// `hashFiles(patterns…)`: the SHA-256 of the SHA-256s of every matched file under
/// `workspace`, in path order, as GitHub's runner computes it; `''` when nothing matches.
/// Patterns are globs relative to the workspace (`*` stays within a directory, `**` crosses
/// them); a pattern starting with `!` excludes; a matched directory matches its files.
pub fn hash_files(
    workspace: &Path,
    patterns: &[String],
    span: Range<usize>,
) -> Result<String, ExprError> {
    use sha2::{Digest, Sha256};

    let mut include = globset::GlobSetBuilder::new();
    let mut exclude = globset::GlobSetBuilder::new();
    for pattern in patterns {
        let (set, pat) = match pattern.strip_prefix('!') {
            Some(p) => (&mut exclude, p),
            None => (&mut include, pattern.as_str()),
        };
        let pat = pat.trim().trim_start_matches("./");
        let glob = globset::GlobBuilder::new(pat)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                ExprError::eval(
                    format!("`hashFiles` pattern `{pattern}` is not a valid glob: {e}"),
                    span.clone(),
                )
            })?;
        set.add(glob);
    }
    let build = |b: globset::GlobSetBuilder| {
        b.build().map_err(|e| {
            ExprError::eval(
                format!("`hashFiles` patterns are invalid: {e}"),
                span.clone(),
            )
        })
    };
    let (include, exclude) = (build(include)?, build(exclude)?);
    // A matched directory matches everything below it; the empty path (the workspace itself)
    // is not a candidate, or `*` would match every file at any depth.
    let matches = |set: &globset::GlobSet, rel: &Path| {
        rel.ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .any(|a| set.is_match(a))
    };

    let mut total = Sha256::new();
    let mut any = false;
    let walker = walkdir::WalkDir::new(workspace)
        .follow_links(false)
        .sort_by_file_name();
    for entry in walker.into_iter().filter_map(Result::ok) {
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(workspace) else {
            continue;
        };
        if !matches(&include, rel) || matches(&exclude, rel) {
            continue;
        }
        let bytes = std::fs::read(entry.path()).map_err(|e| {
            ExprError::eval(
                format!("`hashFiles` could not read `{}`: {e}", rel.display()),
                span.clone(),
            )
        })?;
        total.update(Sha256::digest(&bytes));
        any = true;
    }
    Ok(if any {
        total
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    } else {
        String::new()
    })
}
