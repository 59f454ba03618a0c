//! A recursive-descent parser from tokens to [`Expr`], with GitHub's precedence
//! (`()` `[]` `.` > `!` > `<` `<=` `>` `>=` > `==` `!=` > `&&` > `||`), function names and
//! arities checked at parse time, and GitHub's depth limit of 50.
//!
//! Why our own parser and not the `github-actions-expressions` crate: the crate parses the same
//! grammar with spans on nodes, but reports unknown functions and wrong arity as "Invalid
//! function call" with no position, reports the depth limit without a position, does not
//! distinguish lexing from parsing errors, builds binary `&&`/`||` (so depth differs from
//! GitHub's on long chains), cannot reject unknown context names while parsing, and borrows
//! its tree from the source string, which callers that keep parsed workflows would have to
//! carry as a lifetime. Every error here has a span and a hint; the grammar is small enough
//! that owning it costs less than working around those gaps.

use std::ops::Range;

use super::ast::{CompareOp, Expr, Key, Node};
use super::error::ExprError;
use super::function::Function;
use super::lexer::{Tok, Token, lex};
use super::value::Value;
use crate::diag::did_you_mean;

/// GitHub's limit on how deeply an expression may nest (the root is level 1).
pub const MAX_DEPTH: usize = 50;

/// Which names may stand alone as contexts.
#[derive(Clone, Copy, Debug, Default)]
pub enum Contexts<'a> {
    /// Any name parses as a context; validation checks names later (`context_accesses`).
    #[default]
    Any,
    /// Only these names (case-insensitive); another name is a parse error with a suggestion.
    Only(&'a [&'a str]),
}

pub fn parse(src: &str, contexts: Contexts<'_>) -> Result<Expr, ExprError> {
    let tokens = lex(src)?;
    let mut p = Parser {
        src,
        tokens,
        pos: 0,
        nesting: 0,
        contexts,
    };
    if p.tokens.is_empty() {
        // GitHub evaluates an empty expression to null.
        return Ok(Expr::new(Node::Literal(Value::Null), 0..src.len()));
    }
    let expr = p.expression()?;
    if let Some(t) = p.peek() {
        // A value followed by `* 2` or `-1` (a signed number): arithmetic was meant.
        let text = &src[t.span.clone()];
        return Err(match &t.tok {
            Tok::Star => super::lexer::no_arithmetic("*", t.span.clone(), ExprError::parse),
            Tok::Number(_) if text.starts_with(['-', '+']) => super::lexer::no_arithmetic(
                &text[..1],
                t.span.start..t.span.start + 1,
                ExprError::parse,
            ),
            _ => p.unexpected(&t.clone()),
        });
    }
    Ok(expr)
}

struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    /// Recursion depth of the parser itself, bounded so `((((…` cannot overflow the stack.
    nesting: usize,
    contexts: Contexts<'a>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn peek_tok(&self) -> Option<&Tok> {
        self.peek().map(|t| &t.tok)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += usize::from(t.is_some());
        t
    }

    fn eat(&mut self, tok: &Tok) -> Option<Token> {
        if self.peek_tok() == Some(tok) {
            self.next()
        } else {
            None
        }
    }

    fn end_span(&self) -> Range<usize> {
        self.src.len()..self.src.len()
    }

    fn unexpected(&self, t: &Token) -> ExprError {
        ExprError::parse(
            format!("unexpected `{}`", &self.src[t.span.clone()]),
            t.span.clone(),
        )
    }

    fn unexpected_end(&self, expected: &str) -> ExprError {
        ExprError::parse(
            format!("unexpected end of expression, expected {expected}"),
            self.end_span(),
        )
    }

    /// Builds a node, enforcing the depth limit where the tree grows.
    fn node(&self, node: Node, span: Range<usize>) -> Result<Expr, ExprError> {
        let e = Expr::new(node, span);
        if e.depth() > MAX_DEPTH {
            return Err(self.too_deep(e.span.clone()));
        }
        Ok(e)
    }

    fn too_deep(&self, span: Range<usize>) -> ExprError {
        ExprError::parse(
            format!("expression nests deeper than the limit of {MAX_DEPTH}"),
            span,
        )
        .with_hint(Some(
            "split it up, e.g. compute part of it in an earlier step's output".into(),
        ))
    }

    fn enter(&mut self, at: Range<usize>) -> Result<(), ExprError> {
        self.nesting += 1;
        if self.nesting > MAX_DEPTH {
            return Err(self.too_deep(at));
        }
        Ok(())
    }

    fn expression(&mut self) -> Result<Expr, ExprError> {
        self.logical(&Tok::Or)
    }

    /// `a || b || c` and `a && b && c` as one n-ary node each.
    fn logical(&mut self, op: &Tok) -> Result<Expr, ExprError> {
        let first = if *op == Tok::Or {
            self.logical(&Tok::And)?
        } else {
            self.equality()?
        };
        if self.peek_tok() != Some(op) {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat(op).is_some() {
            items.push(if *op == Tok::Or {
                self.logical(&Tok::And)?
            } else {
                self.equality()?
            });
        }
        let span = items[0].span.start..items[items.len() - 1].span.end;
        let node = if *op == Tok::Or {
            Node::Or(items)
        } else {
            Node::And(items)
        };
        self.node(node, span)
    }

    fn equality(&mut self) -> Result<Expr, ExprError> {
        self.binary(
            |t| match t {
                Tok::Eq => Some(CompareOp::Eq),
                Tok::Ne => Some(CompareOp::Ne),
                _ => None,
            },
            Self::comparison,
        )
    }

    fn comparison(&mut self) -> Result<Expr, ExprError> {
        self.binary(
            |t| match t {
                Tok::Lt => Some(CompareOp::Lt),
                Tok::Le => Some(CompareOp::Le),
                Tok::Gt => Some(CompareOp::Gt),
                Tok::Ge => Some(CompareOp::Ge),
                _ => None,
            },
            Self::unary,
        )
    }

    fn binary(
        &mut self,
        op_of: fn(&Tok) -> Option<CompareOp>,
        operand: fn(&mut Self) -> Result<Expr, ExprError>,
    ) -> Result<Expr, ExprError> {
        let mut left = operand(self)?;
        while let Some(op) = self.peek_tok().and_then(op_of) {
            self.next();
            let right = operand(self)?;
            let span = left.span.start..right.span.end;
            left = self.node(
                Node::Compare {
                    op,
                    left: Box::new(left),
                    right: Box::new(right),
                },
                span,
            )?;
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        if let Some(bang) = self.eat(&Tok::Bang) {
            self.enter(bang.span.clone())?;
            let operand = self.unary()?;
            self.nesting -= 1;
            let span = bang.span.start..operand.span.end;
            return self.node(Node::Not(Box::new(operand)), span);
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr, ExprError> {
        let mut target = self.primary()?;
        loop {
            if self.eat(&Tok::Dot).is_some() {
                let Some(t) = self.next() else {
                    return Err(self.unexpected_end("a property name or `*` after `.`"));
                };
                let key = match t.tok {
                    Tok::Ident(name) => Key::Property(name),
                    Tok::Star => Key::Star,
                    _ => {
                        return Err(self
                            .unexpected(&t)
                            .with_hint(Some("a property name or `*` goes after `.`".into())));
                    }
                };
                let span = target.span.start..t.span.end;
                target = self.node(
                    Node::Index {
                        target: Box::new(target),
                        key,
                    },
                    span,
                )?;
            } else if let Some(open) = self.eat(&Tok::LBracket) {
                let key = if self.eat(&Tok::Star).is_some() {
                    Key::Star
                } else {
                    self.enter(open.span.clone())?;
                    let k = self.expression()?;
                    self.nesting -= 1;
                    Key::Index(Box::new(k))
                };
                let close = self.close(&Tok::RBracket, "`]`", &open)?;
                let span = target.span.start..close.end;
                target = self.node(
                    Node::Index {
                        target: Box::new(target),
                        key,
                    },
                    span,
                )?;
            } else {
                return Ok(target);
            }
        }
    }

    /// Expects a closing bracket, or explains which opening one is unclosed.
    fn close(&mut self, tok: &Tok, name: &str, open: &Token) -> Result<Range<usize>, ExprError> {
        match self.next() {
            Some(t) if t.tok == *tok => Ok(t.span),
            Some(t) => Err(self.unexpected(&t).with_hint(Some(format!(
                "expected {name} to close the `{}` at column {}",
                &self.src[open.span.clone()],
                open.span.start + 1
            )))),
            None => Err(self.unexpected_end(name).with_hint(Some(format!(
                "the `{}` at column {} is never closed",
                &self.src[open.span.clone()],
                open.span.start + 1
            )))),
        }
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        let Some(t) = self.next() else {
            return Err(self.unexpected_end("a value"));
        };
        match t.tok {
            Tok::Number(n) => self.node(Node::Literal(Value::Number(n)), t.span),
            Tok::String(s) => self.node(Node::Literal(Value::String(s)), t.span),
            Tok::LParen => {
                self.enter(t.span.clone())?;
                let mut inner = self.expression()?;
                self.nesting -= 1;
                let close = self.close(&Tok::RParen, "`)`", &t)?;
                // Grouping adds no node, but its span includes the parentheses.
                inner.span = t.span.start..close.end;
                Ok(inner)
            }
            Tok::Ident(name) => {
                if self.peek_tok() == Some(&Tok::LParen) {
                    return self.call(name, t.span);
                }
                let literal = match name.as_str() {
                    "null" => Some(Value::Null),
                    "true" => Some(Value::Bool(true)),
                    "false" => Some(Value::Bool(false)),
                    "NaN" => Some(Value::Number(f64::NAN)),
                    "Infinity" => Some(Value::Number(f64::INFINITY)),
                    _ => None,
                };
                if let Some(v) = literal {
                    return self.node(Node::Literal(v), t.span);
                }
                self.check_context(&name, &t.span)?;
                self.node(Node::Context(name), t.span)
            }
            _ => Err(self.unexpected(&t)),
        }
    }

    fn check_context(&self, name: &str, span: &Range<usize>) -> Result<(), ExprError> {
        let Contexts::Only(known) = self.contexts else {
            return Ok(());
        };
        if known.iter().any(|k| k.eq_ignore_ascii_case(name)) {
            return Ok(());
        }
        let hint = did_you_mean(name, known).or_else(|| {
            Some(if known.is_empty() {
                "no contexts are available here".to_string()
            } else {
                format!(
                    "available contexts: {}",
                    crate::diag::join_quoted(known.iter(), "and")
                )
            })
        });
        Err(ExprError::parse(format!("unknown context `{name}`"), span.clone()).with_hint(hint))
    }

    fn call(&mut self, name: String, name_span: Range<usize>) -> Result<Expr, ExprError> {
        let Some(func) = Function::from_name(&name) else {
            let hint = did_you_mean(&name, Function::NAMES).or_else(|| {
                Some(format!(
                    "the functions are {}",
                    crate::diag::join_quoted(Function::NAMES.iter(), "and")
                ))
            });
            return Err(
                ExprError::parse(format!("unknown function `{name}`"), name_span).with_hint(hint),
            );
        };
        let open = self.next().expect("caller saw `(`");
        self.enter(open.span.clone())?;
        let mut args = Vec::new();
        if self.eat(&Tok::RParen).is_none() {
            loop {
                args.push(self.expression()?);
                match self.next() {
                    Some(Token {
                        tok: Tok::Comma, ..
                    }) => {}
                    Some(Token {
                        tok: Tok::RParen, ..
                    }) => break,
                    Some(t) => {
                        return Err(self.unexpected(&t).with_hint(Some(format!(
                            "expected `,` or `)` in the arguments of `{}`",
                            func.name()
                        ))));
                    }
                    None => return Err(self.unexpected_end("`,` or `)`")),
                }
            }
        }
        self.nesting -= 1;
        let span = name_span.start..self.tokens[self.pos - 1].span.end;
        if let Err(expected) = func.check_arity(args.len()) {
            return Err(ExprError::parse(
                format!(
                    "`{}` takes {expected}, but {} {} given",
                    func.name(),
                    args.len(),
                    if args.len() == 1 { "was" } else { "were" }
                ),
                span,
            )
            .with_hint(Some(format!("call it as `{}`", func.signature()))));
        }
        self.node(Node::Call { func, args }, span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn any(src: &str) -> Result<Expr, ExprError> {
        parse(src, Contexts::Any)
    }

    #[test_case("1 <", 3..3; "missing operand")]
    #[test_case("1 < )", 4..5; "stray paren")]
    #[test_case("github.()", 7..8; "paren after dot")]
    #[test_case("(1,", 2..3; "comma in a group")]
    #[test_case("foo 2", 4..5; "two values")]
    #[test_case("nope(1)", 0..4; "unknown function at its name")]
    #[test_case("contains(1)", 0..11; "arity at the call")]
    #[test_case("case(true, 1, false, 2)", 0..23; "case needs odd arguments")]
    fn parse_errors_point_at_the_problem(src: &str, span: Range<usize>) {
        let err = any(src).unwrap_err();
        assert_eq!(err.span, span, "{}", err.message);
    }

    #[test]
    fn unknown_function_suggests_the_right_one() {
        let err = any("startwith('a', 'b')").unwrap_err();
        assert_eq!(err.message, "unknown function `startwith`");
        assert_eq!(err.hint.as_deref(), Some("did you mean `startsWith`?"));
    }

    #[test]
    fn depth_limit_counts_nodes_like_github() {
        assert!(any(&format!("{}false", "!".repeat(49))).is_ok());
        assert!(any(&format!("{}false", "!".repeat(50))).is_err());
        let chain: String = (1..=49).map(|i| format!(".p{i}")).collect();
        assert!(any(&format!("foo{chain}")).is_ok());
        assert!(any(&format!("foo{chain}.p50")).is_err());
        let ors: Vec<String> = (1..=200).map(|i| i.to_string()).collect();
        assert!(any(&ors.join(" || ")).is_ok());
        assert!(any(&format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000))).is_err());
        assert!(any(&format!("a{}", ".b".repeat(100_000))).is_err());
        assert!(any(&vec!["1"; 100_000].join(" == ")).is_err());
    }

    #[test]
    fn contexts_can_be_restricted() {
        let known = ["github", "env"];
        let err = parse("gihub.sha", Contexts::Only(&known)).unwrap_err();
        assert_eq!(err.message, "unknown context `gihub`");
        assert_eq!(err.hint.as_deref(), Some("did you mean `github`?"));
        assert!(parse("GITHUB.sha", Contexts::Only(&known)).is_ok());
    }
}
