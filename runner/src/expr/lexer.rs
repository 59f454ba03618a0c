//! Turns expression text into tokens with byte spans, following GitHub's lexer: a word runs to
//! the next boundary character, so `1 =2` fails on `=2` and `github/x` on `github/x`, and a
//! number is whatever JavaScript's `Number()` accepts (`-1`, `.5`, `0xff`, `1e3`,
//! `-Infinity`). It knows nothing about grammar.

use std::ops::Range;

use super::error::ExprError;
use super::number::parse_number;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Dot,
    Star,
    Bang,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Number(f64),
    String(String),
    /// A word: a keyword (`true`, `null`, `NaN`…), a context, a function or a property name;
    /// the parser decides which from where it stands.
    Ident(String),
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub span: Range<usize>,
}

/// Characters that end a word or number.
fn is_boundary(c: char) -> bool {
    matches!(
        c,
        '(' | '[' | ')' | ']' | ',' | '.' | '!' | '>' | '<' | '=' | '&' | '|'
    ) || c.is_whitespace()
}

fn is_legal_identifier(word: &str) -> bool {
    let mut chars = word.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub fn lex(src: &str) -> Result<Vec<Token>, ExprError> {
    let mut tokens: Vec<Token> = Vec::new();
    let mut chars = src.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        let next = chars.peek().map(|&(_, n)| n);
        let two = |tok: Tok, chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
            chars.next();
            Token {
                tok,
                span: start..start + 2,
            }
        };
        let one = |tok: Tok| Token {
            tok,
            span: start..start + c.len_utf8(),
        };
        let token = match c {
            '(' => one(Tok::LParen),
            ')' => one(Tok::RParen),
            '[' => one(Tok::LBracket),
            ']' => one(Tok::RBracket),
            ',' => one(Tok::Comma),
            '*' => one(Tok::Star),
            '!' if next == Some('=') => two(Tok::Ne, &mut chars),
            '!' => one(Tok::Bang),
            '<' if next == Some('=') => two(Tok::Le, &mut chars),
            '<' => one(Tok::Lt),
            '>' if next == Some('=') => two(Tok::Ge, &mut chars),
            '>' => one(Tok::Gt),
            '=' if next == Some('=') => two(Tok::Eq, &mut chars),
            '&' if next == Some('&') => two(Tok::And, &mut chars),
            '|' if next == Some('|') => two(Tok::Or, &mut chars),
            '=' | '&' | '|' => {
                let end = run_end(src, start + 1, false);
                let fix = match c {
                    '=' => "`==`",
                    '&' => "`&&`",
                    _ => "`||`",
                };
                return Err(ExprError::lex(
                    format!("unexpected `{}`", &src[start..end]),
                    start..end,
                )
                .with_hint(Some(format!("did you mean {fix}?"))));
            }
            '\'' => lex_string(src, start, &mut chars)?,
            '.' if dot_is_access(tokens.last()) => one(Tok::Dot),
            '.' | '+' | '-' | '0'..='9' => lex_number(src, start, &mut chars)?,
            _ => {
                let end = run_end(src, start + c.len_utf8(), false);
                skip_to(&mut chars, end);
                let word = &src[start..end];
                if !is_legal_identifier(word)
                    && !word.starts_with('"')
                    && let Some(op) = arithmetic_operator(word)
                {
                    return Err(no_arithmetic(op, start..end, ExprError::lex));
                }
                if !is_legal_identifier(word) {
                    let hint = if word.starts_with('"') {
                        Some("strings use single quotes: `'text'`".to_string())
                    } else if c.is_ascii_alphabetic() || c == '_' {
                        Some(
                            "names contain only letters, digits, `_` and `-`; use `['…']` for other property names"
                                .to_string(),
                        )
                    } else {
                        None
                    };
                    return Err(
                        ExprError::lex(format!("unexpected `{word}`"), start..end).with_hint(hint)
                    );
                }
                Token {
                    tok: Tok::Ident(word.to_string()),
                    span: start..end,
                }
            }
        };
        tokens.push(token);
    }
    Ok(tokens)
}

/// A number starting at `start` (a sign, a dot or a digit); what is not one, such as an
/// arithmetic expression, is an error that says so.
fn lex_number(
    src: &str,
    start: usize,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Result<Token, ExprError> {
    let end = run_end(src, start + 1, true);
    skip_to(chars, end);
    let text = &src[start..end];
    let n = parse_number(text);
    if n.is_nan()
        && let Some(op) = arithmetic_operator(text)
    {
        return Err(no_arithmetic(op, start..end, ExprError::lex));
    }
    if n.is_nan() {
        return Err(
            ExprError::lex(format!("invalid number `{text}`"), start..end).with_hint(Some(
                "numbers look like `42`, `-1.5`, `1e3`, `0xff` or `Infinity`".into(),
            )),
        );
    }
    Ok(Token {
        tok: Tok::Number(n),
        span: start..end,
    })
}

/// The arithmetic operator a word that is neither a number nor a name holds: `+` alone
/// (`0.1 + 0.2`), or `+`, `-`, `/`, `%` inside it (`1+2`, `a/2`). A `-` inside a name is part
/// of it (`my-input`), so only a word that is not a name gets here.
fn arithmetic_operator(word: &str) -> Option<&'static str> {
    const OPS: [&str; 5] = ["+", "-", "*", "/", "%"];
    if let Some(op) = OPS.iter().find(|op| word == **op) {
        return Some(op);
    }
    let rest = word.get(1..)?;
    OPS.into_iter().find(|op| rest.contains(op))
}

/// GitHub's expression language has no arithmetic, and `0.1 + 0.2` or `inputs.n * 2` is a
/// natural first try: say that, instead of "invalid number `+`". `error` makes the error of
/// the stage that found it (lexing, parsing), as GitHub's would be.
pub(crate) fn no_arithmetic(
    op: &str,
    span: Range<usize>,
    error: fn(String, Range<usize>) -> ExprError,
) -> ExprError {
    error(
        format!("`{op}` is not an operator: expressions have no arithmetic"),
        span,
    )
    .with_hint(Some(
        "GitHub's expression language has no `+`, `-`, `*`, `/` or `%`: compute the value in a `run:` step (`echo \"total=$((A + B))\" >> \"$GITHUB_OUTPUT\"`, with `A` and `B` passed through `env:`) and read it as `steps.<id>.outputs.total`; to join text, use `format('{0}{1}', a, b)`".into(),
    ))
}

/// A `.` right after a name, `)`, `]` or `*` is property access; anywhere else it starts a
/// number (`.5`).
fn dot_is_access(prev: Option<&Token>) -> bool {
    matches!(
        prev.map(|t| &t.tok),
        Some(Tok::Ident(_) | Tok::RParen | Tok::RBracket | Tok::Star)
    )
}

/// The end of a word starting before `from`: the next boundary character (a number also runs
/// through dots).
fn run_end(src: &str, from: usize, number: bool) -> usize {
    src[from..]
        .char_indices()
        .find(|&(_, c)| is_boundary(c) && !(number && c == '.'))
        .map_or(src.len(), |(i, _)| from + i)
}

fn skip_to(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>, end: usize) {
    while chars.peek().is_some_and(|&(i, _)| i < end) {
        chars.next();
    }
}

fn lex_string(
    src: &str,
    start: usize,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Result<Token, ExprError> {
    let mut value = String::new();
    while let Some((i, c)) = chars.next() {
        if c == '\'' {
            if chars.peek().is_some_and(|&(_, n)| n == '\'') {
                chars.next();
                value.push('\'');
                continue;
            }
            return Ok(Token {
                tok: Tok::String(value),
                span: start..i + 1,
            });
        }
        value.push(c);
    }
    Err(ExprError::lex(
        format!("unterminated string `{}`", &src[start..]),
        start..src.len(),
    )
    .with_hint(Some(
        "close the string with `'`; write `''` for a quote inside it".into(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn kinds(src: &str) -> Vec<Tok> {
        lex(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn dot_after_a_name_is_access_elsewhere_a_number() {
        assert_eq!(
            kinds("a.b == .5"),
            vec![
                Tok::Ident("a".into()),
                Tok::Dot,
                Tok::Ident("b".into()),
                Tok::Eq,
                Tok::Number(0.5)
            ]
        );
        assert_eq!(kinds("a[0].*").len(), 6);
    }

    #[test]
    fn strings_unescape_doubled_quotes_and_keep_spans() {
        let t = lex(" 'it''s' ").unwrap();
        assert_eq!(t[0].tok, Tok::String("it's".into()));
        assert_eq!(t[0].span, 1..8);
    }

    #[test_case("1 =2", 2..4; "single equals runs to the boundary")]
    #[test_case("a & b", 2..3; "single ampersand")]
    #[test_case("'abc", 0..4; "unterminated string")]
    #[test_case("0x1G", 0..4; "bad hex")]
    #[test_case("-Inf", 0..4; "partial infinity")]
    #[test_case("a/b", 0..3; "slash in a name")]
    #[test_case("1 @x", 2..4; "stray symbol")]
    #[test_case("é", 0..2; "multi-byte symbol")]
    fn lex_errors_point_at_the_word(src: &str, span: Range<usize>) {
        let err = lex(src).unwrap_err();
        assert_eq!(err.span, span, "{}", err.message);
    }

    #[test_case("0.1 + 0.2", "+", 4..5; "a plus between numbers")]
    #[test_case("1+2", "+", 0..3; "a plus inside a number")]
    #[test_case("a/2", "/", 0..3; "a slash after a name")]
    #[test_case("3 - 1", "-", 2..3; "a lone minus")]
    #[test_case("7%2", "%", 0..3; "a percent")]
    fn arithmetic_is_said_to_be_missing(src: &str, op: &str, span: Range<usize>) {
        let err = lex(src).unwrap_err();
        assert_eq!(
            err.message,
            format!("`{op}` is not an operator: expressions have no arithmetic")
        );
        assert_eq!(err.span, span);
        assert!(err.hint.unwrap().contains("`run:` step"));
    }
}
