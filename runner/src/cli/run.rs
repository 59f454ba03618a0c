//! `gpuflow run FILE`: validates the workflow (exit 3 on errors, nothing started), refuses
//! steps that cannot run yet, connects to Docker when the workflow needs it (exit 4 when it
//! cannot), then runs it, showing plain lines or `--json` events, storing the logs under
//! `.gpuflow/runs/<run-id>/`, and exits 0 (success), 1 (a job failed) or 130 (interrupted).

use std::path::PathBuf;
use std::sync::Arc;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use crate::backend::DockerBackend;
use crate::check::load_and_check;
use crate::diag::{Diagnostic, Diagnostics, ExitCode, RenderOptions, render_all};
use crate::engine::dispatcher::RunError;
use crate::engine::{EventSink, LogStore, RunOptions, Tee, new_run_id, preflight};
use crate::plan::{build_with_names, from_workflow};
use crate::ui::{JsonView, PlainView, summary};
use crate::workflow::Loaded;

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

    /// A configuration variable, as `NAME=VALUE` (repeatable), read as `vars.NAME`.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,

    /// Print every event as a JSON line (docs/running.md) instead of plain lines.
    #[arg(long, conflicts_with = "plain")]
    pub json: bool,

    /// Plain lines even on a terminal.
    #[arg(long)]
    pub plain: bool,

    #[command(flatten)]
    pub store: super::store_path::StoreArgs,

    /// Leave the run's containers and networks in place, to look at them after.
    #[arg(long)]
    pub keep_containers: bool,
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
            "not run: `{}` does not validate (nothing was started)",
            args.file.display()
        );
        return Ok(ExitCode::InvalidWorkflow);
    }
    let wf = match loaded {
        Loaded::Workflow(Some(wf)) => wf,
        Loaded::Action(_) => {
            eprintln!(
                "error: `{}` is an action, not a workflow\n  = help: run a workflow that uses it",
                args.file.display()
            );
            return Ok(ExitCode::Usage);
        }
        Loaded::Workflow(None) => return Ok(ExitCode::InvalidWorkflow),
    };
    if !diags.is_empty() {
        eprint!("{}", render_all(&diags, render));
    }
    let refused = preflight::check(&wf);
    if refused.has_errors() {
        eprint!("{}", render_all(&refused, render));
        eprintln!("not run: nothing was started");
        return Ok(ExitCode::InvalidWorkflow);
    }
    let inputs = match parse_pairs(&args.inputs, "--input") {
        Ok(i) => i,
        Err(message) => return Ok(usage(&message, render)),
    };
    let vars = match parse_pairs(&args.vars, "--var") {
        Ok(v) => v,
        Err(message) => return Ok(usage(&message, render)),
    };
    let secrets = match read_secrets(&args.secrets, args.secrets_file.as_deref()) {
        Ok(s) => s,
        Err(message) => return Ok(usage(&message, render)),
    };

    let stem = args
        .file
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let model = from_workflow(&wf, &stem);
    let plan = build_with_names(&model.input, &|name, cell| {
        crate::cli::plan::evaluate_name(name, cell)
    })
    .map_err(|errors| anyhow::anyhow!("planning failed after validation passed: {errors:?}"))?;

    let workspace = std::env::current_dir()?;
    let mut opts = RunOptions::new(new_run_id(), &workspace);
    opts.inputs = inputs;
    opts.secrets = secrets;
    opts.vars = vars;
    opts.keep_containers = args.keep_containers;
    if let Some(path) = &args.store.path {
        opts.store = path.clone();
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let docker = if preflight::needs_docker(&wf) {
            match DockerBackend::connect_local().await {
                Ok(d) => {
                    // Containers of runners that died are not this run's problem to keep.
                    let _ = d.sweep_orphans().await;
                    Some(d)
                }
                Err(e) => {
                    eprint!(
                        "{}",
                        render_all(&Diagnostics::from(e.to_diagnostic()), render)
                    );
                    eprintln!("not run: this workflow needs a Docker engine");
                    return Ok(ExitCode::Infrastructure);
                }
            }
        } else {
            None
        };
        let store = match LogStore::create(&opts.log_dir) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                eprintln!(
                    "error: could not create the log folder `{}`: {e}",
                    opts.log_dir.display()
                );
                return Ok(ExitCode::Infrastructure);
            }
        };
        let view: Arc<dyn EventSink> = if args.json {
            Arc::new(JsonView::new(std::io::stdout()))
        } else {
            Arc::new(PlainView::new(std::io::stdout()))
        };
        let sink: Arc<dyn EventSink> = Arc::new(Tee(vec![store.clone(), view]));
        let cancel = CancellationToken::new();
        let on_ctrl_c = tokio::spawn(cancel_on_signals(cancel.clone()));
        let wf = Arc::new(*wf);
        let result = crate::engine::run(wf, plan, opts, sink, docker, cancel).await;
        on_ctrl_c.abort();
        if let Some(problem) = store.write_error() {
            eprintln!("warning: the run's logs are incomplete: {problem}");
        }
        match result {
            Ok(report) => {
                if !args.json {
                    print!("{}", summary(&report.jobs));
                }
                Ok(report.exit_code())
            }
            Err(RunError::Refused(d)) => {
                eprint!("{}", render_all(&d, render));
                Ok(ExitCode::InvalidWorkflow)
            }
            Err(RunError::Input(e)) => {
                let mut d = Diagnostic::unlocated(e.message);
                if let Some(h) = e.hint {
                    d = d.hint(h);
                }
                eprint!("{}", render_all(&Diagnostics::from(d), render));
                Ok(ExitCode::Usage)
            }
        }
    })
}

/// The first Ctrl-C or SIGTERM cancels the run (steps stopped, `always()` steps run,
/// containers removed); a second one exits at once. A stop-gap until `signal.rs` owns this.
async fn cancel_on_signals(cancel: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    eprintln!(
        "cancelling: stopping steps, running `always()` steps, removing containers (again to force)"
    );
    cancel.cancel();
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    eprintln!("forced: containers of this run may be left; `gpuflow gc` removes them");
    std::process::exit(i32::from(ExitCode::Interrupted.code()));
}

fn usage(message: &str, render: RenderOptions) -> ExitCode {
    eprint!(
        "{}",
        render_all(&Diagnostics::from(Diagnostic::unlocated(message)), render)
    );
    ExitCode::Usage
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

fn read_secrets(
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
