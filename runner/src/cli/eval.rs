//! `gpuflow eval`: parse and evaluate one expression over contexts given as JSON, to try the
//! language out (and for the conformance runner). `--json` prints one machine-readable object;
//! otherwise the value is printed for a person and errors render with a caret.

use std::io::Write;
use std::path::PathBuf;

use crate::diag::{Diagnostic, ExitCode, RenderOptions, SourceFile, Span, render};
use crate::expr::{self, ExprError, JobStatus, MapContext, Value};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print `{"kind": …, "value": …}` or `{"err": {"kind": …, "value": …}}` on stdout.
    #[arg(long)]
    json: bool,

    /// A context the expression can read, e.g. `--context matrix='{"os": "linux"}'`.
    #[arg(long = "context", value_name = "NAME=JSON", value_parser = parse_context)]
    contexts: Vec<(String, Value)>,

    /// The directory `hashFiles` searches (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// The job status the status functions see.
    #[arg(long, value_enum, default_value_t = Status::Success)]
    status: Status,

    /// The expression, without `${{ }}`; put it after `--` so `-1` or `!x` are not read as
    /// options.
    #[arg(value_name = "EXPR", allow_hyphen_values = true)]
    expr: String,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Status {
    Success,
    Failure,
    Cancelled,
}

fn parse_context(s: &str) -> Result<(String, Value), String> {
    let Some((name, json)) = s.split_once('=') else {
        return Err(format!(
            "`{s}` is not NAME=JSON (e.g. `github={{\"ref\": \"main\"}}`)"
        ));
    };
    let name = name.trim();
    let valid_name = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        return Err(format!(
            "`{name}` is not a context name (letters, digits, `_` and `-`)"
        ));
    }
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| format!("the value of context `{name}` is not JSON: {e}"))?;
    Ok((name.to_string(), Value::from_json(value)))
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let mut ctx = MapContext::new().with_status(match args.status {
        Status::Success => JobStatus::Success,
        Status::Failure => JobStatus::Failure,
        Status::Cancelled => JobStatus::Cancelled,
    });
    for (name, value) in &args.contexts {
        ctx.insert(name.clone(), value.clone());
    }
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    ctx = ctx.with_workspace(workspace);
    let names: Vec<&str> = args.contexts.iter().map(|(n, _)| n.as_str()).collect();
    let result =
        expr::parse_with_contexts(&args.expr, &names).and_then(|e| expr::evaluate(&e, &ctx));

    let mut stdout = std::io::stdout().lock();
    match result {
        Ok(value) if args.json => {
            let mut out = format!("{{\"kind\": \"{}\", \"value\": ", value.kind());
            write_json(&value, &mut out);
            out.push('}');
            writeln!(stdout, "{out}")?;
            Ok(ExitCode::Success)
        }
        Ok(Value::String(s)) => {
            writeln!(stdout, "{s}")?;
            Ok(ExitCode::Success)
        }
        Ok(value) => {
            writeln!(stdout, "{}", value.to_json_pretty())?;
            Ok(ExitCode::Success)
        }
        Err(err) if args.json => {
            let message = serde_json::Value::String(err.message.clone());
            writeln!(
                stdout,
                "{{\"err\": {{\"kind\": \"{}\", \"value\": {message}}}}}",
                err.kind.as_str()
            )?;
            Ok(ExitCode::Failure)
        }
        Err(err) => {
            eprintln!("{}", render(&diagnostic(&args.expr, &err), render_opts));
            Ok(ExitCode::Failure)
        }
    }
}

/// The error as a diagnostic on a one-line pseudo-file holding the expression.
pub fn diagnostic(src: &str, err: &ExprError) -> Diagnostic {
    let file = SourceFile::new("<expression>", src);
    let d = Diagnostic::error(&file, Span::from(err.span.clone()), err.message.clone())
        .maybe_hint(err.hint.clone());
    if err.message.starts_with("unknown context") {
        d.note("contexts come from `--context NAME=JSON`")
    } else {
        d
    }
}

/// Compact JSON. JSON has no NaN or infinities: they are written as the strings `"NaN"`,
/// `"Infinity"` and `"-Infinity"` — the text GitHub prints for them (`format('{0}', NaN)`) —
/// and `kind` still says `Number` (docs/expressions.md). A bare `NaN` is not JSON: `jq` and
/// serde refuse it.
fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Number(n) if n.is_nan() => out.push_str("\"NaN\""),
        Value::Number(n) if n.is_infinite() => {
            out.push_str(if *n > 0.0 {
                "\"Infinity\""
            } else {
                "\"-Infinity\""
            });
        }
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_json(item, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_json().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_numbers_are_json_strings() {
        let mut out = String::new();
        write_json(
            &Value::Array(vec![
                Value::Number(f64::NAN),
                Value::Number(f64::NEG_INFINITY),
                Value::Number(1.5),
                Value::Number(3.0),
            ]),
            &mut out,
        );
        assert_eq!(out, r#"["NaN", "-Infinity", 1.5, 3]"#);
        assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    }

    #[test]
    fn context_values_must_be_name_equals_json() {
        assert!(parse_context("a={\"b\": 1}").is_ok());
        assert!(parse_context("a").unwrap_err().contains("NAME=JSON"));
        assert!(parse_context("a={").unwrap_err().contains("`a`"));
        assert!(parse_context("1a=1").unwrap_err().contains("`1a`"));
    }
}
