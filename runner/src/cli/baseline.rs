//! `gpuflow baseline set|list|rm`: pinned baselines, names a `compare-to-baseline` step can
//! use (`baseline: nccl`).

use std::io::Write;

use super::store_path::{StoreArgs, report};
use crate::diag::{Diagnostic, ExitCode, RenderOptions, did_you_mean, render};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,

    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Pin NAME to run RUN's results (all metrics, or one with --metric).
    Set {
        name: String,
        /// A run id, as `gpuflow history` shows it.
        run: String,
        /// Pin for this metric only; other metrics keep the name's other pin.
        #[arg(long, value_name = "METRIC")]
        metric: Option<String>,
    },
    /// List the pinned baselines.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Remove a pinned baseline (every metric's pin, or one with --metric).
    Rm {
        name: String,
        #[arg(long, value_name = "METRIC")]
        metric: Option<String>,
    },
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let mut store = match args.store.open_existing(render_opts) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let mut out = std::io::stdout().lock();
    match &args.command {
        Command::Set { name, run, metric } => {
            match store.set_baseline(name, run, metric.as_deref()) {
                Ok(pin) => {
                    let scope = pin
                        .metric
                        .as_ref()
                        .map_or_else(|| "all metrics".to_string(), |m| format!("metric `{m}`"));
                    writeln!(
                        out,
                        "pinned `{}` to run `{}` ({scope})",
                        pin.name, pin.run_id
                    )?;
                    Ok(ExitCode::Success)
                }
                Err(e) => Ok(report(&e, render_opts)),
            }
        }
        Command::List { json } => {
            let pins = match store.baselines() {
                Ok(p) => p,
                Err(e) => return Ok(report(&e, render_opts)),
            };
            if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&pins)?)?;
            } else if pins.is_empty() {
                writeln!(
                    out,
                    "no pinned baselines; pin one with `gpuflow baseline set NAME RUN`"
                )?;
            } else {
                let rows: Vec<[String; 4]> = pins
                    .iter()
                    .map(|p| {
                        [
                            p.name.clone(),
                            p.metric.clone().unwrap_or_else(|| "(all)".into()),
                            p.run_id.clone(),
                            super::history::format_time(p.created_at_ms),
                        ]
                    })
                    .collect();
                super::history::write_table(
                    &mut out,
                    &["NAME", "METRIC", "RUN", "PINNED (UTC)"],
                    &rows,
                )?;
            }
            Ok(ExitCode::Success)
        }
        Command::Rm { name, metric } => match store.remove_baseline(name, metric.as_deref()) {
            Ok(0) => {
                let names: Vec<String> = store
                    .baselines()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|b| b.name)
                    .collect();
                let what = metric.as_ref().map_or_else(
                    || format!("no baseline named `{name}`"),
                    |m| format!("no baseline named `{name}` for metric `{m}`"),
                );
                let d = Diagnostic::unlocated(what).maybe_hint(did_you_mean(name, &names));
                eprintln!("{}", render(&d, render_opts));
                Ok(ExitCode::Usage)
            }
            Ok(n) => {
                writeln!(
                    out,
                    "removed `{name}` ({n} pin{})",
                    if n == 1 { "" } else { "s" }
                )?;
                Ok(ExitCode::Success)
            }
            Err(e) => Ok(report(&e, render_opts)),
        },
    }
}
