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
use crate::workflow::model::{Matrix, MatrixDim};

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
        for (job, strategy) in wf
            .jobs
            .iter()
            .filter_map(|(id, j)| Some((id, j.strategy.as_ref()?)))
        {
            let Some(search) = &strategy.search else {
                continue;
            };
            let cells = plan.jobs.iter().filter(|p| &p.job_id == job).count();
            let values = match (&strategy.matrix, &search.bisect) {
                (Some(Matrix::Dims(m)), Some(dim)) => {
                    match m.dims.get(&dim.value).map(|d| &d.value) {
                        Some(MatrixDim::Values(v)) => v.len(),
                        _ => 0,
                    }
                }
                _ => 0,
            };
            println!("search: job `{job}` {}", search_text(search, cells, values));
        }
        for job in &model.dynamic_matrix {
            println!("note: job `{job}` computes its matrix when it runs; shown here as one run");
        }
    }
    Ok(ExitCode::Success)
}

/// What a search runs of a job's `cells` (`values`: how many the bisected dimension lists),
/// in words: `bisects `mem` for the largest value that succeeds: at most 3 probes of 7 cells`, `maximizes `output_tok_s` over 6 cells by
/// successive halving: 3 rounds at 25%, 50%, 100% of the benchmark`.
fn search_text(search: &crate::workflow::model::Search, cells: usize, values: usize) -> String {
    use crate::workflow::model::{Goal, SearchFind};
    if let Some((metric, goal)) = search.objective() {
        let budget = search.budget.unwrap_or_default();
        let rounds = budget.rounds().max(1);
        let shares: Vec<String> = (1..=rounds)
            .map(|r| {
                let share = budget.keep().powi((rounds - r) as i32) * 100.0;
                format!("{}%", (share * 10.0).round() / 10.0)
            })
            .collect();
        let verb = match goal {
            Goal::Maximize => "maximizes",
            Goal::Minimize => "minimizes",
        };
        return format!(
            "{verb} `{}` over {} by successive halving: {} at {} of the benchmark",
            metric.value,
            count(cells, "cell"),
            count(rounds as usize, "round"),
            shares.join(", ")
        );
    }
    let dim = search.bisect.as_ref().map_or("?", |d| d.value.as_str());
    let which = match search.find.as_ref().map(|f| f.value) {
        Some(SearchFind::Smallest) => "the smallest value that succeeds",
        _ => "the largest value that succeeds",
    };
    if values == 0 {
        return format!("bisects `{dim}` for {which}, over {}", count(cells, "cell"));
    }
    // ⌈log₂(n + 1)⌉ probes of n values, for each combination of the other dimensions.
    let per_line = usize::BITS - values.leading_zeros();
    let probes = per_line as usize * cells.div_ceil(values);
    format!(
        "bisects `{dim}` for {which}: at most {} of {}",
        count(probes, "probe"),
        count(cells, "cell")
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Spanned;
    use crate::workflow::model::{Search, SearchBudget};

    fn spanned(s: &str) -> Option<Spanned<String>> {
        Some(Spanned::new(s.to_string(), Default::default()))
    }

    #[test]
    fn a_search_says_how_much_of_its_grid_it_runs() {
        let bisect = Search {
            bisect: spanned("mem"),
            ..Default::default()
        };
        // ⌈log₂(n + 1)⌉ probes of n values, per combination of the other dimensions.
        assert_eq!(
            search_text(&bisect, 7, 7),
            "bisects `mem` for the largest value that succeeds: at most 3 probes of 7 cells"
        );
        assert!(search_text(&bisect, 16, 8).contains("at most 8 probes of 16 cells"));
        let maximize = Search {
            maximize: spanned("output_tok_s"),
            budget: Some(SearchBudget {
                rounds: Some(2),
                keep: Some(0.25),
            }),
            ..Default::default()
        };
        assert_eq!(
            search_text(&maximize, 6, 0),
            "maximizes `output_tok_s` over 6 cells by successive halving: 2 rounds at 25%, 100% of the benchmark"
        );
    }
}
