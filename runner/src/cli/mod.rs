//! The command line: clap arguments, one file per subcommand. Each subcommand wires library
//! layers together and chooses how to print; none of them knows YAML shapes or renders
//! locations itself.

mod actions;
mod baseline;
mod bench;
mod cancel;
mod completions;
mod docs;
mod eval;
mod gc;
mod generated_file;
mod history;
mod hooks;
mod hosts;
mod images;
mod logs;
mod plan;
mod report;
mod run;
mod runs;
mod schema;
mod serve;
mod servers;
mod slurm_job;
mod store_path;
mod trigger;
mod validate;
mod wait_for_signal;
mod worker;

use std::io::IsTerminal;

use clap::{CommandFactory, Parser, Subcommand};

use crate::diag::{ExitCode, RenderOptions};

#[derive(Debug, Parser)]
#[command(
    name = "gpuflow",
    version,
    about = "GitHub Actions-style workflows for reproducible experiments on GPU hosts",
    propagate_version = true
)]
pub struct Cli {
    /// When to colour output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,

    /// Print gpuflow's own diagnostics on stderr: -v info (runs, jobs, steps), -vv debug
    /// (Docker API calls, retries, host connections), -vvv trace. GPUFLOW_LOG (env-filter
    /// syntax, e.g. `gpuflow::backend=debug`) replaces the level.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check workflow and action files: every error at once, with file:line:col and a fix.
    Validate(validate::Args),
    /// Show the expanded job graph of a workflow (matrix cells, needs, steps).
    Plan(plan::Args),
    /// Run a workflow: jobs as a dependency graph, steps on the host or in containers.
    Run(run::Args),
    /// Evaluate a `${{ }}` expression, to try the language out.
    Eval(eval::Args),
    /// Measure an OpenAI-compatible server with the `benchmark` step's load generator.
    Bench(Box<bench::Args>),
    /// List the remote actions `gpuflow.lock` pins; `actions update` moves them to what their
    /// refs name now.
    Actions(actions::Args),
    /// List the images `gpuflow.lock` pins to a digest; `images lock` pins those the
    /// workflows start, `images update` moves pins to what their tags name now.
    Images(images::Args),
    /// Show a built-in step's inputs, outputs and an example.
    Docs(docs::Args),
    /// Print the JSON Schema of workflow or action files (for editors).
    Schema(schema::Args),
    /// Show a metric's results over time, per comparable series.
    History(history::Args),
    /// Render a run's report (Markdown or HTML, with charts); `--commit` puts it on a
    /// results branch.
    Report(report::Args),
    /// Pin, list or remove named baselines for `compare-to-baseline`.
    Baseline(baseline::Args),
    /// Print a shell completion script.
    Completions(completions::Args),
    /// List the hosts of `gpuflow.toml` (and `local`); `hosts check` connects to them.
    Hosts(hosts::Args),
    /// Remove containers and networks of runs whose runner is gone, and your warm servers
    /// that expired or that a killed run left orphaned (or, with `--all-runs`, every gpuflow
    /// container and network on the host).
    Gc(gc::Args),
    /// List this user's warm servers (`keep-warm:`) on a host; `servers stop` stops them.
    Servers(servers::Args),
    /// Queue the runs a push starts: every workflow whose `on: push` matches (what the git
    /// hooks call).
    Trigger(Box<trigger::Args>),
    /// Run the host's queued runs in order, several at once as far as their GPUs fit.
    Worker(worker::Args),
    /// List the triggered runs: queued, running and finished.
    Runs(runs::Args),
    /// Print a triggered run's output; `-f` follows it.
    Logs(logs::Args),
    /// Cancel a queued or running triggered run.
    Cancel(cancel::Args),
    /// Install or remove the git hooks that trigger workflows.
    Hooks(hooks::Args),
    /// Serve the node's web page: runs (live), GPUs, history, comparisons, and their JSON.
    Serve(serve::Args),
    /// Run one job of a run on a Slurm cluster, on the node Slurm placed it on (what the
    /// run's batch script calls; docs/slurm.md).
    #[command(hide = true)]
    SlurmJob(slurm_job::Args),
    /// Test hook: wait for SIGINT/SIGTERM with gpuflow's signal handling, exit 130.
    #[command(name = "__wait-for-signal", hide = true)]
    WaitForSignal(wait_for_signal::Args),
}

/// Runs a parsed command line and returns the documented exit code.
pub fn run(cli: Cli) -> ExitCode {
    let render = RenderOptions {
        color: match cli.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
            }
        },
        unicode: false,
    };
    let destination = match &cli.command {
        Command::Worker(_) => crate::diag_log::Destination::Worker {
            json_file: crate::trigger::GpuflowHome::from_env().worker_diag_log(),
            ansi: render.color,
        },
        _ => crate::diag_log::Destination::Stderr { ansi: render.color },
    };
    if let Err(e) = crate::diag_log::init(cli.verbose, destination) {
        eprintln!("error: {e}");
        return e.exit_code();
    }
    let result = match cli.command {
        Command::Validate(args) => validate::run(&args, render),
        Command::Plan(args) => plan::run(&args, render),
        Command::Run(args) => run::run(&args, render),
        Command::Eval(args) => eval::run(&args, render),
        Command::Bench(args) => bench::run(&args),
        Command::Actions(args) => actions::run(&args, render),
        Command::Images(args) => images::run(&args, render),
        Command::Docs(args) => docs::run(&args),
        Command::Schema(args) => schema::run(&args),
        Command::History(args) => history::run(&args, render),
        Command::Report(args) => report::run(&args, render),
        Command::Baseline(args) => baseline::run(&args, render),
        Command::Completions(args) => completions::run(&args, Cli::command()),
        Command::Hosts(args) => hosts::run(&args, render),
        Command::Gc(args) => gc::run(&args, render),
        Command::Servers(args) => servers::run(&args, render),
        Command::Trigger(args) => trigger::run(&args, render),
        Command::Worker(args) => worker::run(&args),
        Command::Runs(args) => runs::run(&args, render),
        Command::Logs(args) => logs::run(&args, render),
        Command::Cancel(args) => cancel::run(&args, render),
        Command::Serve(args) => serve::run(&args, render),
        Command::Hooks(args) => hooks::run(&args, render),
        Command::SlurmJob(args) => slurm_job::run(&args, render),
        Command::WaitForSignal(args) => wait_for_signal::run(&args),
    };
    result.unwrap_or_else(|err| {
        // `writeln!(stdout, …)?` (eval, logs, history, …): the reader is gone, not a failure.
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
        {
            std::process::exit(CLOSED_STDOUT_EXIT);
        }
        eprintln!("error: {err:#}");
        ExitCode::Infrastructure
    })
}

/// The exit status when stdout's reader went away (`gpuflow plan x.yml | head -c1`): what a
/// shell reports for a process SIGPIPE ended (128 + 13), as `cat` or `git log` would give.
pub const CLOSED_STDOUT_EXIT: i32 = 141;

/// Makes every command end quietly with [`CLOSED_STDOUT_EXIT`] when its stdout is a pipe whose
/// reader has gone, instead of panicking ("failed printing to stdout: Broken pipe", exit 101).
///
/// Rust ignores SIGPIPE, so a write to such a pipe fails with EPIPE and `println!` panics on
/// it. Restoring SIGPIPE's default action would end the process on any closed pipe or socket —
/// a Docker connection or a step's pipe during `gpuflow run` included — so instead this one
/// panic, and only it, becomes a quiet exit; `writeln!(…)?` errors are handled in [`run`].
pub fn end_quietly_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        // std's wording: "failed printing to stdout: Broken pipe (os error 32)".
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(CLOSED_STDOUT_EXIT);
        }
        default(info);
    }));
}
