//! `gpuflow report RUN`: renders a run's report (Markdown or HTML, charts beside it) into a
//! folder, and with `--commit` commits it with a JSON record to a results branch.

use std::path::PathBuf;

use super::store_path::{StoreArgs, report as report_store_error};
use crate::compare::StepInputs;
use crate::diag::{Diagnostic, ExitCode, RenderOptions, render};
use crate::report::{
    DEFAULT_BRANCH, Format, ReportData, ReportError, ReportSource, ResultsBranch, Template,
    commit_report, report_files, write_files,
};
use crate::store::now_ms;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run's id (as `gpuflow run` printed it; the folder name under `.gpuflow/runs/`).
    run: String,

    /// `md` (Markdown) or `html`.
    #[arg(long, value_name = "FORMAT", default_value = "md", value_parser = ["md", "markdown", "html"])]
    format: String,

    /// Where to write the report and its charts (default: `.gpuflow/runs/RUN/report/`).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,

    /// A Tera template to render instead of the built-in one (docs/reports.md).
    #[arg(long, value_name = "FILE")]
    template: Option<PathBuf>,

    /// The report's title (default: the workflow's name and the run's id).
    #[arg(long)]
    title: Option<String>,

    /// Also commit the report and `record.json` to this branch (default `gpuflow-results`),
    /// without touching the work tree or the index.
    #[arg(long, value_name = "BRANCH", num_args = 0..=1, default_missing_value = DEFAULT_BRANCH)]
    commit: Option<String>,

    /// After committing, push the branch to this remote (a name or a URL).
    #[arg(long, value_name = "REMOTE", requires = "commit")]
    push: Option<String>,

    #[command(flatten)]
    store: StoreArgs,
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let fail = |d: Diagnostic, code: ExitCode| {
        eprintln!("{}", render(&d, render_opts));
        Ok(code)
    };
    let format = Format::parse(&args.format).unwrap_or(Format::Markdown);
    let template = match &args.template {
        None => None,
        Some(path) => match std::fs::read_to_string(path) {
            Ok(source) => Some(Template {
                name: path.display().to_string(),
                source,
            }),
            Err(e) => {
                return fail(
                    Diagnostic::unlocated(format!(
                        "cannot read template `{}`: {e}",
                        path.display()
                    ))
                    .hint("give the path of a Tera template, relative to where you run gpuflow"),
                    ExitCode::Usage,
                );
            }
        },
    };
    let store = match args.store.open_existing(render_opts) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    // The log folder sits beside the store: `.gpuflow/runs/<id>/`.
    let runs = store
        .path()
        .parent()
        .map(|p| p.join("runs"))
        .unwrap_or_else(|| PathBuf::from(".gpuflow/runs"));
    let run_dir = runs.join(&args.run);
    let source = ReportSource {
        store: &store,
        run_id: &args.run,
        run_dir: Some(&run_dir),
        compare: StepInputs::default(),
        title: args.title.clone(),
        now_ms: now_ms(),
    };
    let data = match ReportData::gather(&source) {
        Ok(d) => d,
        Err(ReportError::Store(e)) => return Ok(report_store_error(&e, render_opts)),
        Err(e) => {
            return fail(
                Diagnostic::unlocated(e.to_string()).maybe_hint(e.hint()),
                ExitCode::Usage,
            );
        }
    };
    let files = match report_files(&data, format, template.as_ref()) {
        Ok(f) => f,
        Err(e) => return fail(e.to_diagnostic(), ExitCode::Usage),
    };
    let out = args.out.clone().unwrap_or_else(|| run_dir.join("report"));
    if let Err(e) = write_files(&out, &files) {
        return fail(
            Diagnostic::unlocated(format!(
                "cannot write the report to `{}`: {e}",
                out.display()
            ))
            .hint("pass `--out DIR` with a folder you can write to"),
            ExitCode::Infrastructure,
        );
    }
    println!(
        "{}",
        out.join(format!("report.{}", format.extension())).display()
    );
    if let Some(branch) = &args.commit {
        let cwd = std::env::current_dir().unwrap_or_default();
        let committed = ResultsBranch::new(&cwd, branch)
            .map(|b| b.push_to(args.push.clone()))
            .and_then(|b| commit_report(&b, &data, &files));
        match committed {
            Ok(c) => {
                println!(
                    "committed {} to {}",
                    &c.commit[..12.min(c.commit.len())],
                    c.reference
                );
                if let Some(remote) = c.pushed_to {
                    println!("pushed {} to {remote}", c.reference);
                }
            }
            Err(e) => {
                return fail(
                    Diagnostic::unlocated(e.to_string()).maybe_hint(e.hint()),
                    ExitCode::Failure,
                );
            }
        }
    }
    Ok(ExitCode::Success)
}
