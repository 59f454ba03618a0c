//! `gpuflow run FILE`: validates the workflow (exit 3 on errors, nothing started), refuses
//! steps that cannot run yet, chooses each job's host from `runs-on`, `--host` and
//! `gpuflow.toml` (exit 3 when none fits `runs-on`, 2 for an unknown `--host`; nothing
//! started), then runs it, connecting to a host's Docker engine when a job there first needs
//! it (exit 4 when it cannot). It shows a live view, plain lines or `--json` events, stores
//! the logs under `.gpuflow/runs/<run-id>/`, and exits 0 (success), 1 (a job failed) or 130
//! (interrupted: signals, see `signal.rs`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use crate::check::load_and_check;
use crate::cli::hosts::{ConfigArg, config_errors};
use crate::diag::{Diagnostic, Diagnostics, ExitCode, RenderOptions, Span, render_all};
use crate::engine::dispatcher::RunError;
use crate::engine::options::EventContext;
use crate::engine::{
    Connect, Engines, EventSink, LogStore, RunOptions, RunReport, Tee, new_run_id, preflight,
};
use crate::hosts::{Host, HostConfig};
use crate::plan::{Plan, build_with_names, from_workflow};
use crate::signal::{Escalation, SignalEvent, SignalHandlerKind, cancel_on_signals};
use crate::ui::{JsonView, LiveView, PlainView, headline_text, summary};
use crate::workflow::Loaded;
use crate::workflow::model::Workflow;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workflow file.
    pub file: PathBuf,

    /// A `workflow_dispatch` input, as `NAME=VALUE` (repeatable).
    #[arg(long = "input", value_name = "NAME=VALUE")]
    pub inputs: Vec<String>,

    /// A secret read from the environment variable of the same name, as `secrets.NAME`
    /// (repeatable); its value is masked in every log.
    #[arg(long = "secret", value_name = "NAME")]
    pub secrets: Vec<String>,

    /// A file of `NAME=VALUE` lines, each a secret.
    #[arg(long, value_name = "FILE")]
    pub secrets_file: Option<PathBuf>,

    /// A configuration variable, as `NAME=VALUE` (repeatable), read as `vars.NAME`; replaces
    /// the `[vars]` value of `gpuflow.toml` of the same name.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,

    /// Print every event as a JSON line (docs/running.md) instead of plain lines.
    #[arg(long, conflicts_with = "plain")]
    pub json: bool,

    /// Plain lines even on a terminal (instead of the live view of jobs and steps).
    #[arg(long)]
    pub plain: bool,

    #[command(flatten)]
    pub store: super::store_path::StoreArgs,

    /// The most log text the run stores (`2GiB`, `512MiB`, `unlimited`): past it, output lines
    /// are dropped from the stored logs (not from the screen or `--json`), and the run says so
    /// at its end.
    #[arg(
        long,
        env = "GPUFLOW_LOG_CAP",
        value_name = "SIZE",
        default_value = "2GiB",
        value_parser = crate::run_logs::files::parse_size
    )]
    pub log_cap: u64,

    /// Leave the run's containers and networks in place, to look at them after; later runs
    /// leave them too, until `gpuflow gc` removes them.
    #[arg(long)]
    pub keep_containers: bool,

    /// Run only the preflight checks (flags, files, images; docs/running.md) and stop: no job
    /// starts. Exit 0 when they pass, 1 when one fails.
    #[arg(long)]
    pub preflight_only: bool,

    /// Run every job on this host (a name from `gpuflow.toml`, or `local`), whatever its
    /// `runs-on` says.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,

    #[command(flatten)]
    pub config: ConfigArg,

    /// Set by the queue's worker (docs/triggers.md): the run's id, given when it was queued.
    #[arg(long, hide = true)]
    pub run_id: Option<String>,

    /// Set by the queue's worker: where the run's logs go (default `.gpuflow/runs/<run-id>`).
    #[arg(long, hide = true, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,

    /// Set by the queue's worker: a JSON file with the event that started the run (the
    /// `github` context: event name, sha, ref, payload).
    #[arg(long, hide = true, value_name = "FILE")]
    pub event: Option<PathBuf>,

    /// Set by the queue's worker: cancel the run (as SIGTERM does) when stdin reaches its
    /// end, which happens when the worker holding the other end dies, however it dies.
    #[arg(long, hide = true)]
    pub stop_on_stdin_eof: bool,
}

/// The algorithm: a valid workflow, the run's values, a plan, a host for every job, then the
/// run with its views; each stage that stops it has already said why, and ends it with its
/// exit code.
pub fn run(args: &Args, render: RenderOptions) -> anyhow::Result<ExitCode> {
    match run_stages(args, render) {
        Ok(code) | Err(EarlyExit::Code(code)) => Ok(code),
        Err(EarlyExit::Error(e)) => Err(e),
    }
}

fn run_stages(args: &Args, render: RenderOptions) -> Result<ExitCode, EarlyExit> {
    let wf = runnable_workflow(&args.file, render)?;
    let given = GivenValues::read(args, render)?;
    let plan = plan_jobs(&wf, &args.file)?;
    let mut opts = run_options(args, given.event)?;
    opts.inputs = given.inputs;
    opts.secrets = given.secrets;

    let hosts = args
        .config
        .load_for_gpus()
        .map_err(|diags| EarlyExit::Code(config_errors(&diags, render)))?;
    opts.vars = merge_vars(hosts.vars(), given.vars);
    opts.registries = hosts.registries().to_vec();
    check_host_override(&hosts, args.host.as_deref(), render)?;
    let engines = choose_hosts(&wf, &plan, &hosts, args.host.as_deref())
        .map_err(|diags| not_started(&diags, render))?;
    let cluster = cluster_host(&wf, &plan, &hosts, args.host.as_deref())
        .map_err(|diags| not_started(&diags, render))?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_with_views(
        args,
        render,
        Arc::new(*wf),
        plan,
        opts,
        Placement { engines, cluster },
    ))
}
/// Where the run's jobs go: Docker engines, or one Slurm cluster for the whole run.
struct Placement {
    engines: Engines,
    cluster: Option<Host>,
}

/// The Slurm cluster the run goes to, if its jobs choose one: then every job must (a run is
/// submitted to one cluster whole, its `needs` as Slurm dependencies).
fn cluster_host(
    wf: &Workflow,
    plan: &Plan,
    hosts: &HostConfig,
    host_override: Option<&str>,
) -> Result<Option<Host>, Diagnostics> {
    let mut chosen: Vec<(&str, Host)> = Vec::new();
    for run in &plan.jobs {
        let job = &wf.jobs[run.job_id.as_str()];
        let runs_on: Vec<String> = job
            .runs_on
            .iter()
            .map(|r| crate::cli::plan::evaluate_name(&r.value, &run.matrix))
            .collect();
        if let Ok(host) = hosts.select(&runs_on, host_override) {
            chosen.push((run.job_id.as_str(), host.clone()));
        }
    }
    let Some((first_job, cluster)) = chosen.iter().find(|(_, h)| h.slurm.is_some()).cloned() else {
        return Ok(None);
    };
    let mut errors = Diagnostics::new();
    let mut told = HashSet::new();
    for (job_id, host) in &chosen {
        if host.name == cluster.name || !told.insert(*job_id) {
            continue;
        }
        let job = &wf.jobs[*job_id];
        let span = match (job.runs_on.first(), job.runs_on.last()) {
            (Some(a), Some(b)) => Span::new(a.span.start, b.span.end),
            _ => job.id.span,
        };
        errors.push(
            Diagnostic::error(
                &wf.file,
                span,
                format!(
                    "job `{job_id}` runs on `{}`, but job `{first_job}` runs on the Slurm cluster `{}`",
                    host.name, cluster.name
                ),
            )
            .label("a run on a cluster is submitted there whole")
            .hint(format!(
                "give every job `runs-on: {}` (or run with `--host {}`), or split the workflow",
                cluster.name, cluster.name
            )),
        );
    }
    if errors.is_empty() {
        Ok(Some(cluster))
    } else {
        Err(errors)
    }
}

/// How [`run`] ends early: with an exit code whose reason is already printed, or with an
/// error for `main` to print.
pub(super) enum EarlyExit {
    Code(ExitCode),
    Error(anyhow::Error),
}

impl From<anyhow::Error> for EarlyExit {
    fn from(e: anyhow::Error) -> Self {
        Self::Error(e)
    }
}

impl From<std::io::Error> for EarlyExit {
    fn from(e: std::io::Error) -> Self {
        Self::Error(e.into())
    }
}

/// The workflow, loaded and checked, with its warnings printed; exit 3 when it does not
/// validate or has a step that cannot run yet, 2 when it is an action or cannot be read.
pub(super) fn runnable_workflow(
    file: &Path,
    render: RenderOptions,
) -> Result<Box<Workflow>, EarlyExit> {
    let (loaded, diags) = load_and_check(file).map_err(|d| {
        eprint!("{}", render_all(&Diagnostics::from(*d), render));
        EarlyExit::Code(ExitCode::Usage)
    })?;
    if diags.has_errors() {
        eprint!("{}", render_all(&diags, render));
        eprintln!(
            "not run: `{}` does not validate (nothing was started)",
            file.display()
        );
        return Err(EarlyExit::Code(ExitCode::InvalidWorkflow));
    }
    let wf = match loaded {
        Loaded::Workflow(Some(wf)) => wf,
        Loaded::Action(_) => {
            eprintln!(
                "error: `{}` is an action, not a workflow\n  = help: run a workflow that uses it",
                file.display()
            );
            return Err(EarlyExit::Code(ExitCode::Usage));
        }
        Loaded::Workflow(None) => return Err(EarlyExit::Code(ExitCode::InvalidWorkflow)),
    };
    if !diags.is_empty() {
        eprint!("{}", render_all(&diags, render));
    }
    let refused = preflight::check(&wf);
    if refused.has_errors() {
        return Err(not_started(&refused, render));
    }
    Ok(wf)
}

/// What the command line gives the run besides the workflow: `--input`, `--var`, secrets and
/// the triggering event.
struct GivenValues {
    inputs: IndexMap<String, String>,
    vars: IndexMap<String, String>,
    secrets: IndexMap<String, String>,
    event: Option<EventContext>,
}

impl GivenValues {
    /// Exit 2 on a malformed pair, a missing secret or an unreadable event file.
    fn read(args: &Args, render: RenderOptions) -> Result<Self, EarlyExit> {
        let bad_argument = |message: String| EarlyExit::Code(usage(&message, render));
        let inputs = parse_pairs(&args.inputs, "--input").map_err(bad_argument)?;
        let vars = parse_pairs(&args.vars, "--var").map_err(bad_argument)?;
        let secrets =
            read_secrets(&args.secrets, args.secrets_file.as_deref()).map_err(bad_argument)?;
        // gpuflow's own diagnostics (`-v`) do not go through the run's masker: they mask these.
        crate::diag_log::hide(secrets.values().map(String::as_str));
        let event = args
            .event
            .as_deref()
            .map(read_event)
            .transpose()
            .map_err(bad_argument)?;
        Ok(Self {
            inputs,
            vars,
            secrets,
            event,
        })
    }
}

fn read_event(path: &Path) -> Result<EventContext, String> {
    std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        .map_err(|e| format!("the event file `{}` cannot be read: {e}", path.display()))
}

/// The job runs, matrix cells expanded and named. Validation has passed, so a failure here is
/// gpuflow's own bug.
pub(super) fn plan_jobs(wf: &Workflow, file: &Path) -> anyhow::Result<Plan> {
    let stem = file
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let model = from_workflow(wf, &stem);
    build_with_names(&model.input, &|name, cell| {
        crate::cli::plan::evaluate_name(name, cell)
    })
    .map_err(|errors| anyhow::anyhow!("planning failed after validation passed: {errors:?}"))
}

/// The run's id, folders and switches from the command line.
fn run_options(args: &Args, event: Option<EventContext>) -> std::io::Result<RunOptions> {
    let workspace = std::env::current_dir()?;
    let run_id = args.run_id.clone().unwrap_or_else(new_run_id);
    let mut opts = RunOptions::new(run_id, &workspace);
    opts.event = event;
    if let Some(dir) = &args.log_dir {
        opts.log_dir = dir.clone();
    }
    if let Some(path) = &args.store.path {
        opts.store = path.clone();
    }
    opts.keep_containers = args.keep_containers;
    opts.preflight_only = args.preflight_only;
    Ok(opts)
}

/// An unknown `--host` is a bad argument (exit 2), not a problem of the workflow.
fn check_host_override(
    hosts: &HostConfig,
    host: Option<&str>,
    render: RenderOptions,
) -> Result<(), EarlyExit> {
    if let Some(Err(e)) = host.map(|h| hosts.select(&[], Some(h))) {
        eprint!(
            "{}",
            render_all(&Diagnostics::from(e.to_diagnostic()), render)
        );
        return Err(EarlyExit::Code(ExitCode::Usage));
    }
    Ok(())
}

/// Problems found before anything started: exit 3.
fn not_started(diags: &Diagnostics, render: RenderOptions) -> EarlyExit {
    eprint!("{}", render_all(diags, render));
    eprintln!("not run: nothing was started");
    EarlyExit::Code(ExitCode::InvalidWorkflow)
}

/// Runs the plan with its log store and the chosen view watching, cancelled by signals (and
/// by the worker going away), then says how it ended.
async fn run_with_views(
    args: &Args,
    render: RenderOptions,
    wf: Arc<Workflow>,
    plan: Plan,
    mut opts: RunOptions,
    placement: Placement,
) -> Result<ExitCode, EarlyExit> {
    let store = match LogStore::create(&opts.log_dir) {
        Ok(s) => Arc::new(s.with_log_cap(args.log_cap)),
        Err(e) => {
            eprintln!(
                "error: could not create the log folder `{}`: {e}",
                opts.log_dir.display()
            );
            return Ok(ExitCode::Infrastructure);
        }
    };
    let view = View::chosen(args);
    let sink: Arc<dyn EventSink> = Arc::new(Tee(vec![store.clone(), view.sink()]));
    let flushing = store.keep_flushed(crate::run_logs::FOLLOWED_FLUSH);
    let cancel = CancellationToken::new();
    let shutdown = match cancel_on_signals(SignalHandlerKind::Standard, cancel.clone(), say) {
        Ok(shutdown) => shutdown,
        Err(e) => {
            eprintln!("error: could not install the signal handlers: {e}");
            return Ok(ExitCode::Infrastructure);
        }
    };
    opts.force = shutdown.force.clone();
    if args.stop_on_stdin_eof {
        cancel_at_stdin_eof(cancel.clone());
    }
    let result = match &placement.cluster {
        Some(cluster) => {
            crate::slurm::coordinator::run(wf, plan, opts, sink, cluster, cancel).await
        }
        None => crate::engine::run(wf, plan, opts, sink, placement.engines, cancel).await,
    };
    drop(flushing);
    if let Some(problem) = store.write_error() {
        eprintln!("warning: the run's logs are incomplete: {problem}");
    }
    Ok(ending(result, &store, view, render))
}

/// Where the run's events are shown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum View {
    Json,
    Live,
    Plain,
}

impl View {
    fn chosen(args: &Args) -> Self {
        if args.json {
            Self::Json
        } else if live_view_wanted(args.plain) {
            Self::Live
        } else {
            Self::Plain
        }
    }

    fn sink(self) -> Arc<dyn EventSink> {
        match self {
            Self::Json => Arc::new(JsonView::new(std::io::stdout())),
            Self::Live => Arc::new(LiveView::stdout()),
            Self::Plain => Arc::new(PlainView::new(std::io::stdout())),
        }
    }
}

/// The run's last words and its exit code.
fn ending(
    result: Result<RunReport, RunError>,
    store: &LogStore,
    view: View,
    render: RenderOptions,
) -> ExitCode {
    match result {
        Ok(report) => {
            // The run ends with its answer: in JSON the `run_headline` event, on the live
            // board its final frame (the board is the summary there), in plain lines
            // after the summary.
            if view == View::Plain {
                print!("{}", summary(&report.jobs));
                print!("{}", headline_text(&report.headline));
            }
            for problem in &report.unreachable {
                eprintln!("error: could not reach the Docker engine of {problem}");
            }
            // The last line: a log cut short is worth knowing before reading it.
            if let Some(warning) = store.log_cap_warning() {
                eprintln!("warning: {warning}");
            }
            report.exit_code()
        }
        Err(RunError::Refused(d)) => {
            eprint!("{}", render_all(&d, render));
            ExitCode::InvalidWorkflow
        }
        Err(RunError::Input(e)) => {
            let mut d = Diagnostic::unlocated(e.message);
            if let Some(h) = e.hint {
                d = d.hint(h);
            }
            eprint!("{}", render_all(&Diagnostics::from(d), render));
            ExitCode::Usage
        }
    }
}

/// The host of every job run, from its `runs-on` (with `matrix` values filled in) or
/// `--host`; an [`Engines`] that connects to each chosen host the first time a job there needs
/// Docker, sweeping there what runners that are gone left behind. Errors point at `runs-on`.
fn choose_hosts(
    wf: &Workflow,
    plan: &Plan,
    hosts: &HostConfig,
    host_override: Option<&str>,
) -> Result<Engines, Diagnostics> {
    let mut engines = Engines::none();
    let mut errors = Diagnostics::new();
    let mut reported = HashSet::new();
    for run in &plan.jobs {
        let Some(job) = wf.jobs.get(run.job_id.as_str()) else {
            continue;
        };
        let runs_on: Vec<String> = job
            .runs_on
            .iter()
            .map(|r| crate::cli::plan::evaluate_name(&r.value, &run.matrix))
            .collect();
        match hosts.select(&runs_on, host_override) {
            Ok(host) => {
                if engines.gpus_for_host(&host.name).is_none() {
                    engines.set_gpus(&host.name, host.gpus());
                }
                let index = engines.add_host(&host.name, connect_and_sweep(host.clone()));
                engines.assign(&run.job_id, run.cell, index);
            }
            Err(e) if !reported.insert(e.to_string()) => {}
            Err(e) => errors.push(match (job.runs_on.first(), job.runs_on.last()) {
                (Some(first), Some(last)) if host_override.is_none() => {
                    e.located(&wf.file, Span::new(first.span.start, last.span.end))
                }
                _ => e.to_diagnostic(),
            }),
        }
    }
    if errors.is_empty() {
        Ok(engines)
    } else {
        Err(errors)
    }
}

/// The live view on a terminal, unless `--plain` or a terminal that cannot redraw
/// (`TERM=dumb`).
fn live_view_wanted(plain: bool) -> bool {
    use std::io::IsTerminal;
    !plain && std::io::stdout().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// What each shutdown signal does, said on stderr as it happens.
fn say(SignalEvent::Shutdown { signal, count }: SignalEvent, escalation: Escalation) {
    match escalation {
        Escalation::Cancel => eprintln!(
            "received {signal}: cancelling: stopping steps, running `always()` steps, removing \
             containers (again to force)"
        ),
        Escalation::Force => eprintln!(
            "received {signal} (#{count}): forcing: `always()` steps stopped, only removing \
             containers (again to exit at once)"
        ),
        Escalation::Exit => eprintln!(
            "received {signal} (#{count}): exiting; containers of this run may be left: the \
             next `gpuflow run` or `gpuflow gc` removes them"
        ),
    }
}

/// The queue's worker holds the other end of stdin and never writes: end-of-file means it is
/// gone, and a run nobody watches is cancelled (containers removed) rather than left going.
fn cancel_at_stdin_eof(cancel: CancellationToken) {
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        if !cancel.is_cancelled() {
            eprintln!("the worker that started this run is gone: cancelling");
            cancel.cancel();
        }
    });
}

fn connect_and_sweep(host: Host) -> Connect {
    Arc::new(move || {
        let host = host.clone();
        Box::pin(async move {
            let docker = host.connect().await?;
            // Containers of runners that died are not this run's problem to keep; a failed
            // sweep leaves them for `gpuflow gc` and must not stop the run.
            let _ = docker.sweep_orphans().await;
            // Warm servers that expired, or that a killed run left orphaned: their GPUs are
            // freed before this run asks for any.
            let swept = crate::warm::sweep(&docker, &crate::warm::Registry::from_env(), true).await;
            for (entry, state) in swept.stopped {
                tracing::info!(
                    server = %entry.docker_name,
                    key = %entry.key,
                    state = state.word(),
                    "stopped a warm server"
                );
            }
            Ok(docker)
        })
    })
}

fn usage(message: &str, render: RenderOptions) -> ExitCode {
    eprint!(
        "{}",
        render_all(&Diagnostics::from(Diagnostic::unlocated(message)), render)
    );
    ExitCode::Usage
}

/// `[vars]` of `gpuflow.toml`, then `--var`: a `--var` replaces the file's value of the same
/// name, also one spelt in another case, since `vars.NAME` is looked up case-insensitively
/// and would otherwise still find the file's.
fn merge_vars(
    config: &IndexMap<String, String>,
    given: IndexMap<String, String>,
) -> IndexMap<String, String> {
    let mut vars: IndexMap<String, String> = config
        .iter()
        .filter(|(name, _)| !given.keys().any(|g| g.eq_ignore_ascii_case(name)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    vars.extend(given);
    vars
}

fn parse_pairs(pairs: &[String], flag: &str) -> Result<IndexMap<String, String>, String> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("`{flag} {p}` is not `NAME=VALUE`")),
        })
        .collect()
}

pub(super) fn read_secrets(
    names: &[String],
    file: Option<&std::path::Path>,
) -> Result<IndexMap<String, String>, String> {
    let mut out = IndexMap::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("could not read the secrets file `{}`: {e}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                return Err(format!(
                    "line {} of `{}` is not `NAME=VALUE`",
                    i + 1,
                    path.display()
                ));
            };
            out.insert(k.trim().to_string(), v.to_string());
        }
    }
    for name in names {
        let value = std::env::var(name).map_err(|_| {
            format!("the secret `{name}` is read from the environment variable `{name}`, which is not set")
        })?;
        out.insert(name.clone(), value);
    }
    Ok(out)
}
