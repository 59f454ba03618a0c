//! `gpuflow hosts`: the hosts of `gpuflow.toml` (and `local`), and `gpuflow hosts check`,
//! which connects to them. Also the `--config` argument that every command choosing a host
//! shares.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::backend::{BackendError, ContainerSpec, DockerBackend, RunLabels};
use crate::diag::{Diagnostic, Diagnostics, ExitCode, RenderOptions, render, render_all};
use crate::gpu::{Discovery, Inventory};
use crate::hosts::{Host, HostConfig};

mod cluster;

use cluster::Clusters;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,

    #[command(flatten)]
    pub config: ConfigArg,

    /// Print the hosts as JSON.
    #[arg(long)]
    pub json: bool,

    /// Also ask remote hosts for their GPUs (`nvidia-smi` in a short-lived container there);
    /// without it only this machine's GPUs and stand-in inventories are shown.
    #[arg(long)]
    pub probe: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Connect to a host (or every host) and report its Docker API version or why not.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The host to check; every host when left out.
    pub name: Option<String>,

    #[command(flatten)]
    pub config: ConfigArg,

    /// Also run a throw-away container of IMAGE there (`true` as its command), then remove
    /// it: proves the host can run containers, not only answer.
    #[arg(long, value_name = "IMAGE")]
    pub container: Option<String>,
}

/// Where the host file is: `--config`, else `gpuflow.toml` in the workspace root.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArg {
    /// The host file (default: `gpuflow.toml` in the workspace root, the nearest directory
    /// up from here holding `.git`; none means only the `local` host).
    #[arg(long, value_name = "PATH", env = "GPUFLOW_CONFIG")]
    pub config: Option<PathBuf>,
}

impl ConfigArg {
    pub fn load(&self) -> Result<HostConfig, Diagnostics> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        HostConfig::find(self.config.as_deref(), &cwd)
    }

    /// [`Self::load`] for a command that uses the hosts' GPUs (`run`, `hosts`): a stand-in
    /// inventory given by `GPUFLOW_GPU_INVENTORY` is checked too, so its problems are
    /// reported as the host file's are, each at its place, before anything starts.
    pub fn load_for_gpus(&self) -> Result<HostConfig, Diagnostics> {
        let config = self.load()?;
        crate::gpu::stand_in::check_env()?;
        Ok(config)
    }
}

pub fn run(args: &Args, render: RenderOptions) -> anyhow::Result<ExitCode> {
    match &args.action {
        Some(Action::Check(check)) => run_check(check, render),
        None => {
            let config = match args.config.load_for_gpus() {
                Ok(config) => config,
                Err(diags) => return Ok(config_errors(&diags, render)),
            };
            let (inventories, clusters) = runtime()?.block_on(async {
                tokio::join!(inventories(&config, args.probe), cluster::look(&config))
            });
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&to_json(&config, &inventories, &clusters))?
                );
            } else {
                print!("{}", render_list(&config, &inventories, &clusters));
                print!("{}", render_gpus(&config, &inventories, &clusters));
            }
            Ok(ExitCode::Success)
        }
    }
}

/// The host `--host NAME` names (default `local`); an unknown one is said, as a usage error.
pub(crate) fn named_host<'c>(
    config: &'c HostConfig,
    name: Option<&str>,
    render_opts: RenderOptions,
) -> Result<&'c crate::hosts::Host, ExitCode> {
    config
        .select(&[], Some(name.unwrap_or(crate::hosts::LOCAL)))
        .map_err(|e| {
            eprint!("{}\n\n", render(&e.to_diagnostic(), render_opts));
            ExitCode::Usage
        })
}

/// Prints a host file's problems; a bad host file is a wrong input, like a bad argument.
pub(crate) fn config_errors(diags: &Diagnostics, render: RenderOptions) -> ExitCode {
    eprint!("{}", render_all(diags, render));
    ExitCode::Usage
}

/// A runtime for the commands that talk to engines.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Each host's GPUs and who holds them (the lease files, and a shared engine's lease
/// containers), by host name; remote hosts only when `probe` (asking them starts a container
/// there).
type Inventories = HashMap<String, (Arc<Inventory>, Vec<Option<String>>)>;

async fn inventories(config: &HostConfig, probe: bool) -> Inventories {
    let mut out = HashMap::new();
    for host in config.hosts() {
        // A cluster's GPUs are Slurm's: shown from `sinfo` ([`cluster`]).
        let remote = matches!(host.gpu_discovery(), Discovery::Remote(_));
        if remote && !probe || host.slurm.is_some() {
            continue;
        }
        let gpus = host.gpus();
        let inv = gpus.inventory().await;
        // Where leases are shared on the engine, its lease containers name the holders of
        // other machines; asked of a remote engine only with `--probe`, like its GPUs.
        let remote = !matches!(host.endpoint(), Ok(crate::backend::Endpoint::Unix(_)));
        let engine = match gpus.engine_leases() {
            Some(_) if probe || !remote => host.connect().await.ok(),
            _ => None,
        };
        let holders = gpus.holders(engine.as_ref()).await;
        out.insert(host.name.clone(), (inv, holders));
    }
    out
}

/// The GPUS column: what was found (`8 stand-in`), else the configured hint, else `-`.
fn gpus_cell(host: &Host, inventories: &Inventories) -> String {
    match inventories.get(&host.name) {
        Some((inv, _)) if !inv.gpus.is_empty() => {
            if inv.is_stand_in() {
                format!("{} stand-in", inv.gpus.len())
            } else {
                inv.gpus.len().to_string()
            }
        }
        _ => host.gpus.map_or_else(|| "-".into(), |n| n.to_string()),
    }
}

/// Under the table: each host's GPUs, their topology and leases, or why it has none; a
/// cluster's partitions, nodes and queue.
fn render_gpus(config: &HostConfig, inventories: &Inventories, clusters: &Clusters) -> String {
    let mut out = String::new();
    for host in config.hosts() {
        if let Some(settings) = &host.slurm {
            out.push_str(&cluster::render(host, settings, clusters.get(&host.name)));
            continue;
        }
        let Some((inv, holders)) = inventories.get(&host.name) else {
            out.push_str(&format!(
                "\n{}: GPUs not asked (a remote host: `gpuflow hosts --probe` runs `nvidia-smi` there)\n",
                host.name
            ));
            continue;
        };
        if inv.gpus.is_empty() {
            out.push_str(&format!("\n{}: {}\n", host.name, inv.source_text()));
            continue;
        }
        let versions = [
            inv.driver.as_ref().map(|d| format!("driver {d}")),
            inv.cuda.as_ref().map(|c| format!("CUDA {c}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
        out.push_str(&format!(
            "\n{}: {} GPU{} from {}{}\n",
            host.name,
            inv.gpus.len(),
            if inv.gpus.len() == 1 { "" } else { "s" },
            inv.source_text(),
            if versions.is_empty() {
                String::new()
            } else {
                format!("; {versions}")
            }
        ));
        let mut rows = vec![
            [
                "INDEX",
                "UUID",
                "MODEL",
                "MEMORY",
                "MIG",
                "NUMA",
                "LEASED BY",
            ]
            .map(String::from),
        ];
        for (g, holder) in inv.gpus.iter().zip(holders) {
            rows.push([
                g.index.to_string(),
                g.uuid.clone(),
                g.model.clone(),
                format!("{} MiB", g.memory_mib),
                match g.mig {
                    Some(true) => "on".into(),
                    Some(false) => "off".into(),
                    None => "-".into(),
                },
                g.numa_node.map_or_else(|| "-".into(), |n| n.to_string()),
                holder.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        out.push_str(&indent(&columns(&rows), "  "));
        if let Some(summary) = inv.topology_summary() {
            out.push_str(&format!("  topology: {summary}\n"));
        }
        out.push_str(&indent(&inv.matrix_text(), "  "));
    }
    out
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}\n")).collect()
}

/// Rows as aligned columns.
fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// One line per host: name, endpoint, labels, GPUs; columns aligned.
fn render_list(config: &HostConfig, inventories: &Inventories, clusters: &Clusters) -> String {
    let mut out = match config.file() {
        Some(file) => format!("hosts from {}\n", file.name),
        None => "no gpuflow.toml found: only the local engine (docs/hosts.md)\n".to_string(),
    };
    let rows: Vec<[String; 4]> = config
        .hosts()
        .iter()
        .map(|h| {
            [
                h.name.clone(),
                match &h.slurm {
                    Some(settings) => cluster::endpoint_cell(settings),
                    None => endpoint_shown(h),
                },
                if h.labels.is_empty() {
                    "-".into()
                } else {
                    h.labels.join(", ")
                },
                match &h.slurm {
                    Some(settings) => cluster::gpus_cell(h, settings, clusters),
                    None => gpus_cell(h, inventories),
                },
            ]
        })
        .collect();
    let header = ["NAME", "ENDPOINT", "LABELS", "GPUS"].map(String::from);
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            std::iter::once(&header)
                .chain(&rows)
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The endpoint as it will be used, and where it comes from when not from the file.
fn endpoint_shown(host: &Host) -> String {
    match host.endpoint() {
        Ok(endpoint) => match host.endpoint_source() {
            "config" => endpoint.to_string(),
            source => format!("{endpoint} ({source})"),
        },
        Err(e) => format!("invalid DOCKER_HOST: {e}"),
    }
}

fn to_json(
    config: &HostConfig,
    inventories: &Inventories,
    clusters: &Clusters,
) -> serde_json::Value {
    let hosts: Vec<serde_json::Value> = config
        .hosts()
        .iter()
        .map(|h| {
            // `null` when not asked (a remote host without `--probe`).
            let inventory = inventories.get(&h.name).map(|(inv, holders)| {
                serde_json::json!({
                    "source": inv.source,
                    "stand_in": inv.is_stand_in(),
                    "driver": inv.driver,
                    "cuda": inv.cuda,
                    "gpus": inv.gpus.iter().zip(holders).map(|(g, holder)| {
                        let mut v = serde_json::to_value(g).unwrap_or_default();
                        v["leased_by"] = serde_json::json!(holder);
                        v
                    }).collect::<Vec<_>>(),
                    "topology": inv.topology_summary(),
                    "links": inv.gpus.iter().enumerate().map(|(a, _)| {
                        (0..inv.gpus.len()).map(|b| inv.link(a, b).label()).collect::<Vec<_>>()
                    }).collect::<Vec<_>>(),
                })
            });
            // A cluster has no endpoint of its own: each job uses its node's engine.
            let endpoint = match h.slurm {
                Some(_) => None,
                None => h.endpoint().ok().map(|e| e.to_string()),
            };
            serde_json::json!({
                "name": h.name,
                "endpoint": endpoint,
                "endpoint_source": h.slurm.is_none().then(|| h.endpoint_source()),
                "labels": h.labels,
                "gpus": h.gpus,
                "inventory": inventory,
                "slurm": h.slurm.as_ref().map(|s| cluster::to_json(s, clusters.get(&h.name))),
            })
        })
        .collect();
    serde_json::json!({
        "config": config.file().map(|f| f.name.clone()),
        "hosts": hosts,
    })
}

fn run_check(args: &CheckArgs, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let config = match args.config.load_for_gpus() {
        Ok(config) => config,
        Err(diags) => return Ok(config_errors(&diags, render_opts)),
    };
    let hosts: Vec<&Host> = match &args.name {
        Some(name) => match config.select(&[], Some(name)) {
            Ok(host) => vec![host],
            Err(e) => {
                eprint!("{}\n\n", render(&e.to_diagnostic(), render_opts));
                return Ok(ExitCode::Usage);
            }
        },
        None => config.hosts().iter().collect(),
    };
    let runtime = runtime()?;
    let mut failed = 0usize;
    for host in hosts {
        match runtime.block_on(check_one(host, args.container.as_deref())) {
            Ok(lines) => {
                for line in lines {
                    println!("{line}");
                }
            }
            Err(e) => {
                failed += 1;
                let d = host_error(host, &e);
                eprint!("{}\n\n", render(&d, render_opts));
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::Success
    } else {
        ExitCode::Infrastructure
    })
}

/// A backend error with the host it concerns.
pub(crate) fn host_error(host: &Host, e: &BackendError) -> Diagnostic {
    e.to_diagnostic().note(format!("host `{}`", host.name))
}

async fn check_one(host: &Host, image: Option<&str>) -> Result<Vec<String>, BackendError> {
    let backend = host.connect().await?;
    let mut lines = vec![format!(
        "ok: `{}` at `{}` speaks Docker API {}",
        host.name,
        backend.endpoint(),
        backend.api_version()
    )];
    if let Some(image) = image {
        lines.push(run_throwaway(&backend, &host.name, image).await?);
    }
    Ok(lines)
}

/// Starts a container of `image` running `true`, waits for it and removes it, whatever
/// happened in between.
async fn run_throwaway(
    backend: &DockerBackend,
    host: &str,
    image: &str,
) -> Result<String, BackendError> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let run = RunLabels::new(
        format!("hosts-check-{}-{nanos}", std::process::id()),
        "hosts-check",
    );
    let mut spec = ContainerSpec::new(image);
    spec.command = Some(vec!["true".into()]);
    let outcome = async {
        let container = backend.start_container(&run, &spec).await?;
        let code = backend.wait_exit(&container.id).await?;
        Ok::<_, BackendError>((container, code))
    }
    .await;
    let removed = backend.remove_run(&run.run_id).await;
    let (container, code) = outcome?;
    removed?;
    let verdict = if code == 0 { "ok" } else { "failed" };
    Ok(format!(
        "{verdict}: container `{}` of `{image}` ran `true` on `{host}` (exit {code}) and was \
         removed (run `{}`)",
        container.id, run.run_id
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::SourceFile;

    #[test]
    fn the_list_aligns_columns_and_marks_what_is_not_configured() {
        let file = SourceFile::new(
            "gpuflow.toml",
            "[hosts.node-a]\nendpoint = \"ssh://me@node-a\"\nlabels = [\"blackwell\", \"8gpu\"]\ngpus = 8\n",
        );
        let config = HostConfig::parse(&file).unwrap();
        let text = render_list(&config, &Inventories::new(), &Clusters::new());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "hosts from gpuflow.toml");
        assert!(lines[1].starts_with("NAME    ENDPOINT"), "{text}");
        assert!(lines[2].starts_with("local   "), "{text}");
        let node = lines[3];
        let words: Vec<&str> = node.split_whitespace().collect();
        assert_eq!(
            words,
            ["node-a", "ssh://me@node-a", "blackwell,", "8gpu", "8"]
        );
        // Columns line up under their headers.
        assert_eq!(lines[1].find("ENDPOINT"), node.find("ssh://"), "{text}");
        assert_eq!(lines[1].find("LABELS"), node.find("blackwell"), "{text}");
        assert_eq!(lines[1].find("GPUS"), node.rfind('8'), "{text}");
    }

    #[test]
    fn json_lists_every_host() {
        let config = HostConfig::implicit();
        let json = to_json(&config, &Inventories::new(), &Clusters::new());
        assert_eq!(json["config"], serde_json::Value::Null);
        assert_eq!(json["hosts"][0]["name"], "local");
        assert_eq!(json["hosts"][0]["labels"], serde_json::json!([]));
    }
}
