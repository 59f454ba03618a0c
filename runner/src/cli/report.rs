//! `gpuflow report RUN`: renders a run's report (Markdown or HTML, charts beside it) into a
//! folder, and with `--commit` commits it with a JSON record to a results branch. With
//! `--campaign JOB`, the report is the campaign report of that job's cells instead
//! (docs/campaigns.md).

use std::path::{Path, PathBuf};

use super::store_path::{StoreArgs, report as report_store_error};
use crate::compare::StepInputs;
use crate::diag::{Diagnostic, ExitCode, RenderOptions, render};
use crate::report::campaign::{self, CampaignError, CampaignOptions, CampaignSource};
use crate::report::{
    BranchFile, Committed, DEFAULT_BRANCH, Format, PublishError, ReportData, ReportError,
    ReportSource, ResultsBranch, Template, commit_report, report_files, write_files,
};
use crate::store::{ResultStore, now_ms};

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

    /// The campaign report of this job's cells instead (each cell's server, status and
    /// metrics, the best configuration, a throughput-latency Pareto chart, the loading saved by
    /// reusing servers), into `.gpuflow/runs/RUN/campaign-JOB/`.
    #[arg(long, value_name = "JOB")]
    campaign: Option<String>,

    /// The campaign's throughput metric (up the chart; the best cell without a search)
    /// [default: output_throughput, else output_tok_s].
    #[arg(long, value_name = "METRIC", requires = "campaign")]
    throughput: Option<String>,

    /// The campaign's latency metric (across the chart) [default: ttft_ms].
    #[arg(long, value_name = "METRIC", requires = "campaign")]
    latency: Option<String>,

    /// The percentile of the latency's samples the chart shows [default: 50].
    #[arg(long, value_name = "N", requires = "campaign", value_parser = clap::value_parser!(u8).range(1..=100))]
    latency_percentile: Option<u8>,

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
    if let Some(job) = &args.campaign {
        return report_campaign(args, job, &store, &run_dir, template.as_ref(), render_opts);
    }
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
    write_and_commit(args, &out, &files, render_opts, |b| {
        commit_report(b, &data, &files)
    })
}

/// `--campaign JOB`: the campaign report of that job's cells.
fn report_campaign(
    args: &Args,
    job: &str,
    store: &ResultStore,
    run_dir: &Path,
    template: Option<&Template>,
    render_opts: RenderOptions,
) -> anyhow::Result<ExitCode> {
    let fail = |d: Diagnostic| {
        eprintln!("{}", render(&d, render_opts));
        Ok(ExitCode::Usage)
    };
    let format = Format::parse(&args.format).unwrap_or(Format::Markdown);
    let source = CampaignSource {
        store,
        run_id: &args.run,
        run_dir,
        job,
        options: CampaignOptions {
            throughput: args.throughput.clone(),
            latency: args.latency.clone(),
            latency_percentile: args.latency_percentile.map(f64::from),
        },
        title: args.title.clone(),
        now_ms: now_ms(),
    };
    let data = match campaign::gather(&source) {
        Ok(d) => d,
        Err(CampaignError::Store(e)) => return Ok(report_store_error(&e, render_opts)),
        Err(e) => return fail(Diagnostic::unlocated(e.to_string()).maybe_hint(e.hint())),
    };
    let files = match campaign::campaign_files(&data, format, template) {
        Ok(f) => f,
        Err(e) => return fail(e.to_diagnostic()),
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| run_dir.join(campaign::folder(job)));
    write_and_commit(args, &out, &files, render_opts, |b| {
        campaign::commit_campaign(b, &data, &files)
    })
}

/// Writes `files` into `out`, prints the report's path, and with `--commit` commits them.
fn write_and_commit(
    args: &Args,
    out: &Path,
    files: &[BranchFile],
    render_opts: RenderOptions,
    commit: impl FnOnce(&ResultsBranch) -> Result<Committed, PublishError>,
) -> anyhow::Result<ExitCode> {
    let fail = |d: Diagnostic, code: ExitCode| {
        eprintln!("{}", render(&d, render_opts));
        Ok(code)
    };
    if let Err(e) = write_files(out, files) {
        return fail(
            Diagnostic::unlocated(format!(
                "cannot write the report to `{}`: {e}",
                out.display()
            ))
            .hint("pass `--out DIR` with a folder you can write to"),
            ExitCode::Infrastructure,
        );
    }
    let format = Format::parse(&args.format).unwrap_or(Format::Markdown);
    println!(
        "{}",
        out.join(format!("report.{}", format.extension())).display()
    );
    let Some(branch) = &args.commit else {
        return Ok(ExitCode::Success);
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let committed = ResultsBranch::new(&cwd, branch)
        .map(|b| b.push_to(args.push.clone()))
        .and_then(|b| commit(&b));
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
            Ok(ExitCode::Success)
        }
        Err(e) => fail(
            Diagnostic::unlocated(e.to_string()).maybe_hint(e.hint()),
            ExitCode::Failure,
        ),
    }
}
