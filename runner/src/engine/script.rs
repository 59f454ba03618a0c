//! Turning a `run:` script with `${{ }}` into what a shell runs, without letting a value
//! become shell code.
//!
//! For POSIX shells (`bash`, `sh`, the default) every `${{ expr }}` becomes a reference to an
//! environment variable (`${GPUFLOW_EXPR_1}`) that holds the value: the shell expands it as
//! data, so a branch named `$(touch /tmp/pwned)` is printed, not run. Inside single quotes
//! the reference is spliced in as `'"${GPUFLOW_EXPR_1}"'`, so the value still appears where
//! it was written. Other shells (`python`, a custom `{0}` command) get the value as text, so
//! expressions over contexts an outsider can choose (branch names, commit messages, the
//! event) are refused there.

use indexmap::IndexMap;

use crate::expr::{Context, ExprError, evaluate, parse_template};

/// The script as the shell will read it, and the variables it refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedScript {
    pub text: String,
    pub env: IndexMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    #[error("{0}")]
    Expr(ExprError),
    #[error(
        "`${{{{ {expr} }}}}` reads `{context}`, which anyone who can push a branch or commit chooses, and this step's shell is not `bash` or `sh`"
    )]
    Untrusted { expr: String, context: String },
}

impl ScriptError {
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Expr(e) => e.hint.clone(),
            Self::Untrusted { .. } => Some(
                "pass the value through `env:` (`env: { BRANCH: ${{ github.ref_name }} }`) and read the variable in the script, or use `shell: bash`".into(),
            ),
        }
    }
}

/// Prefix of the variables holding expression values.
pub const EXPR_VAR_PREFIX: &str = "GPUFLOW_EXPR_";

/// Renders `source` for a POSIX shell (`posix`) or another one.
pub fn render(source: &str, posix: bool, ctx: &dyn Context) -> Result<RenderedScript, ScriptError> {
    let template = parse_template(source).map_err(ScriptError::Expr)?;
    let mut text = String::with_capacity(source.len());
    let mut env = IndexMap::new();
    let mut quotes = QuoteState::default();
    let mut at = 0;
    for (n, (expr, range)) in template.expressions().enumerate() {
        // The expression's span excludes `${{`, `}}` and the blanks inside them.
        let open = source[..range.start].rfind("${{").unwrap_or(range.start);
        let close = source[range.end..]
            .find("}}")
            .map_or(range.end, |i| range.end + i + 2);
        let literal = &source[at..open];
        quotes.feed(literal);
        text.push_str(literal);
        if !posix && let Some(context) = untrusted_context(expr) {
            return Err(ScriptError::Untrusted {
                expr: source[range.clone()].to_string(),
                context,
            });
        }
        let value = evaluate(expr, ctx).map_err(ScriptError::Expr)?;
        if posix {
            let name = format!("{EXPR_VAR_PREFIX}{}", n + 1);
            match quotes {
                QuoteState::Single => text.push_str(&format!("'\"${{{name}}}\"'")),
                QuoteState::None | QuoteState::Double => text.push_str(&format!("${{{name}}}")),
            }
            env.insert(name, value.to_expr_string());
        } else {
            text.push_str(&value.to_expr_string());
        }
        at = close;
    }
    text.push_str(&source[at..]);
    Ok(RenderedScript { text, env })
}

/// The untrusted context an expression reads, if any: `github.event.*`, the ref and branch
/// names, or the `github` context as a whole (a computed index could reach any of them).
pub fn untrusted_context(expr: &crate::expr::Expr) -> Option<String> {
    const UNTRUSTED: &[&str] = &["event", "head_ref", "base_ref", "ref", "ref_name"];
    expr.context_accesses().into_iter().find_map(|access| {
        let path: Vec<String> = access.path.iter().map(|p| p.to_ascii_lowercase()).collect();
        let root = path.first()?;
        if root != "github" && root != "gpuflow" {
            return None;
        }
        match path.get(1) {
            None => Some(root.clone()),
            Some(field) if UNTRUSTED.contains(&field.as_str()) => Some(path.join(".")),
            Some(_) => None,
        }
    })
}

/// Where a POSIX shell's reader is, quote-wise, at the end of the text fed so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum QuoteState {
    #[default]
    None,
    Single,
    Double,
}

impl QuoteState {
    fn feed(&mut self, text: &str) {
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            *self = match (*self, c) {
                (Self::None | Self::Double, '\\') => {
                    chars.next();
                    *self
                }
                (Self::None, '\'') => Self::Single,
                (Self::None, '"') => Self::Double,
                (Self::Single, '\'') | (Self::Double, '"') => Self::None,
                (state, _) => state,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{MapContext, Value};

    fn ctx() -> MapContext {
        let github = Value::Object(
            [
                (
                    "ref_name".to_string(),
                    Value::String("$(touch /tmp/pwned); echo x".into()),
                ),
                ("run_id".to_string(), Value::String("42".into())),
            ]
            .into_iter()
            .collect(),
        );
        MapContext::new().with("github", github)
    }

    #[test]
    fn posix_scripts_get_variables_not_text() {
        let r = render(
            "echo ${{ github.ref_name }} \"x ${{ github.run_id }}\" 'q ${{ github.run_id }} q'",
            true,
            &ctx(),
        )
        .unwrap();
        assert_eq!(
            r.text,
            "echo ${GPUFLOW_EXPR_1} \"x ${GPUFLOW_EXPR_2}\" 'q '\"${GPUFLOW_EXPR_3}\"' q'"
        );
        assert_eq!(r.env["GPUFLOW_EXPR_1"], "$(touch /tmp/pwned); echo x");
        assert_eq!(r.env["GPUFLOW_EXPR_3"], "42");
    }

    #[test]
    fn other_shells_refuse_untrusted_contexts_and_take_trusted_text() {
        let e = render("print('${{ github.ref_name }}')", false, &ctx()).unwrap_err();
        assert!(e.to_string().contains("github.ref_name"), "{e}");
        assert!(e.hint().unwrap().contains("env:"));
        let ok = render("print('${{ github.run_id }}')", false, &ctx()).unwrap();
        assert_eq!(ok.text, "print('42')");
        assert!(ok.env.is_empty());
    }

    #[test]
    fn escaped_quotes_do_not_change_the_state() {
        let r = render("echo \\' ${{ github.run_id }}", true, &ctx()).unwrap();
        assert_eq!(r.text, "echo \\' ${GPUFLOW_EXPR_1}");
    }
}
