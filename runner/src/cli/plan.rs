//! `gpuflow plan FILE`: the expanded job graph — matrix cells, `needs`, steps — as text for
//! people or JSON for machines. Refuses (exit 3) a workflow that does not validate, printing
//! why, since a plan of an invalid workflow would be a guess.

use std::path::PathBuf;

use indexmap::IndexMap;

use crate::check::load_and_check;
use crate::diag::{Diagnostics, ExitCode, RenderOptions, render_all};
use crate::expr::{MapContext, Value, parse_template};
use crate::plan::{build_with_names, from_workflow, render_json, render_text};
use crate::workflow::Loaded;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workflow file.
    pub file: PathBuf,

    /// Print the plan as JSON (stable field names, documented in docs/plan.md).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args, render: RenderOptions) -> anyhow::Result<ExitCode> {
    let (loaded, diags) = match load_and_check(&args.file) {
        Ok(r) => r,
        Err(d) => {
            eprint!("{}", render_all(&Diagnostics::from(*d), render));
            return Ok(ExitCode::Usage);
        }
    };
    if diags.has_errors() {
        eprint!("{}", render_all(&diags, render));
        eprintln!(
            "not planned: `{}` has {} (run `gpuflow validate` after fixing)",
            args.file.display(),
            count(diags.error_count(), "error")
        );
        return Ok(ExitCode::InvalidWorkflow);
    }
    let wf = match loaded {
        Loaded::Workflow(Some(wf)) => wf,
        Loaded::Action(_) => {
            eprintln!(
                "error: `{}` is an action, not a workflow\n  = help: plan a workflow that uses it (`uses: ./{}`)",
                args.file.display(),
                args.file
                    .parent()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            return Ok(ExitCode::Usage);
        }
        Loaded::Workflow(None) => return Ok(ExitCode::InvalidWorkflow),
    };
    if !diags.is_empty() {
        eprint!("{}", render_all(&diags, render));
    }
    let stem = args
        .file
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let model = from_workflow(&wf, &stem);
    let plan = build_with_names(&model.input, &|name, cell| evaluate_name(name, cell)).map_err(
        |errors| {
            // Every planning error is also a validation error, reported above; reaching here
            // means the two disagree.
            anyhow::anyhow!("planning failed after validation passed: {errors:?}")
        },
    )?;
    if args.json {
        println!("{}", render_json(&plan));
    } else {
        print!("{}", render_text(&plan));
        let groups = crate::engine::server_groups::groups(&wf, &plan.jobs, &IndexMap::new());
        let counts = crate::engine::server_groups::counts(&groups);
        for (job, (servers, cells)) in counts.into_iter().filter(|(_, (s, c))| s < c) {
            println!(
                "servers: job `{job}` starts {} for {} (cells that would start the same server share it, one after another)",
                count(servers, "server"),
                count(cells, "cell"),
            );
        }
        for job in &model.dynamic_matrix {
            println!("note: job `{job}` computes its matrix when it runs; shown here as one run");
        }
    }
    Ok(ExitCode::Success)
}

/// A job name with `${{ }}` (e.g. `bench ${{ matrix.bs }}`), evaluated for one matrix cell.
/// Only `matrix` is known before running; a name using more is shown as written.
pub(super) fn evaluate_name(name: &str, cell: &IndexMap<String, serde_json::Value>) -> String {
    let matrix = Value::Object(
        cell.iter()
            .map(|(k, v)| (k.clone(), Value::from_json(v.clone())))
            .collect(),
    );
    let ctx = MapContext::new().with("matrix", matrix);
    parse_template(name)
        .and_then(|t| t.evaluate(&ctx))
        .map_or_else(|_| name.to_owned(), |v| v.to_expr_string())
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
