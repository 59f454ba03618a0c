//! `gpuflow gc`: removes what gpuflow left on a host's engine. By default only containers and
//! networks whose runner process is gone (killed, crashed, or ended having kept them with
//! `--keep-containers`): the sweep `gpuflow run` also does at start, which leaves kept ones. `--all-runs` removes every gpuflow-labelled thing there, runs in progress
//! included, so it asks for `--yes`; `--dry-run` lists without removing. GPU lease containers
//! that hold nothing any more (`crate::gpu::engine_lease`) go too, whoever made them.
//!
//! With `--logs-older-than` or `--logs-max-total` it prunes stored run logs instead
//! (`.gpuflow/runs/<id>/`, [`logs`]), on this machine, without an engine.

mod logs;

use std::path::PathBuf;
use std::time::Duration;

use crate::backend::{BackendError, DockerBackend, Managed, ManagedKind};
use crate::hosts::Host;
use crate::warm::{Registry, State, WarmEntry};

/// This user's warm servers, each with its state.
type WarmServers = Vec<(WarmEntry, State)>;
use crate::diag::{Diagnostic, ExitCode, RenderOptions, render};

use super::hosts::{ConfigArg, config_errors, host_error, named_host, runtime};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The host whose engine to clean (default: `local`).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,

    /// Remove every gpuflow container and network on the host, also of runs in progress and
    /// of other machines sharing the engine (needs `--yes`).
    #[arg(long)]
    pub all_runs: bool,

    /// Confirm `--all-runs`.
    #[arg(long)]
    pub yes: bool,

    /// List what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Remove the stored logs of runs last written longer ago than this (`7d`, `12h`), instead
    /// of containers. Runs in progress are kept.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration,
          conflicts_with_all = ["all_runs", "host"])]
    pub logs_older_than: Option<Duration>,

    /// Keep the stored logs of the newest runs within this total size (`20GiB`) and remove the
    /// older ones, instead of containers. Runs in progress are kept and counted.
    #[arg(long, value_name = "SIZE", value_parser = crate::run_logs::files::parse_size,
          conflicts_with_all = ["all_runs", "host"])]
    pub logs_max_total: Option<u64>,

    /// The folder of stored run logs `--logs-*` prune (default: `.gpuflow/runs` here, where
    /// `gpuflow run` writes them).
    #[arg(long, value_name = "DIR")]
    pub runs_dir: Option<PathBuf>,

    #[command(flatten)]
    pub config: ConfigArg,
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    if args.runs_dir.is_some() && args.logs_older_than.is_none() && args.logs_max_total.is_none() {
        let d = Diagnostic::unlocated("`--runs-dir` names the run logs `--logs-older-than` and `--logs-max-total` prune, and neither is given")
            .hint("add `--logs-older-than DURATION` or `--logs-max-total SIZE`");
        eprint!("{}\n\n", render(&d, render_opts));
        return Ok(ExitCode::Usage);
    }
    if args.logs_older_than.is_some() || args.logs_max_total.is_some() {
        let runs = args
            .runs_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".gpuflow").join("runs"));
        return logs::run(
            &runs,
            args.logs_older_than,
            args.logs_max_total,
            args.dry_run,
        );
    }
    let config = match args.config.load() {
        Ok(config) => config,
        Err(diags) => return Ok(config_errors(&diags, render_opts)),
    };
    let host = match named_host(&config, args.host.as_deref(), render_opts) {
        Ok(host) => host,
        Err(code) => return Ok(code),
    };
    if let Some(slurm) = &host.slurm {
        // Nothing of a cluster's runs is on an engine gpuflow reaches from here: each job
        // removes its containers on its node, and Slurm ends what a run left.
        let d = Diagnostic::unlocated(format!(
            "`{}` is a Slurm cluster: `gpuflow gc` cleans a Docker host's engine",
            host.name
        ))
        .hint(format!(
            "each job removes its containers on its node; the run folders under `{}` stay (remove those of runs that ended; docs/slurm.md)",
            slurm.shared_dir.display()
        ));
        eprint!("{}\n\n", render(&d, render_opts));
        return Ok(ExitCode::Usage);
    }
    if args.all_runs && !args.yes && !args.dry_run {
        let d = Diagnostic::unlocated(format!(
            "`--all-runs` removes every gpuflow container and network on `{}`, including those of \
         runs in progress",
            host.name
        ))
        .hint("add `--yes` to confirm, or `--dry-run` to list them first");
        eprint!("{}\n\n", render(&d, render_opts));
        return Ok(ExitCode::Usage);
    }
    let runtime = runtime()?;
    let registry = Registry::from_env();
    let outcome = runtime.block_on(clean(host, &registry, args));
    let (warm, things) = match outcome {
        Ok(things) => things,
        Err(e) => {
            eprint!("{}\n\n", render(&host_error(host, &e), render_opts));
            return Ok(ExitCode::Infrastructure);
        }
    };
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for (entry, state) in &warm {
        println!("{verb} {}", describe_warm(entry, *state));
    }
    for thing in &things {
        println!("{verb} {}", describe(thing));
    }
    let what = if args.all_runs {
        "gpuflow containers or networks"
    } else {
        "gpuflow containers or networks of runners that are gone"
    };
    if things.is_empty() && warm.is_empty() {
        println!("nothing to remove on `{}`: no {what}", host.name);
    } else {
        let containers = things
            .iter()
            .filter(|t| t.kind == ManagedKind::Container)
            .count();
        let networks = things.len() - containers;
        println!(
            "{verb} {} and {} on `{}`",
            plural(containers, "container"),
            plural(networks, "network"),
            host.name
        );
    }
    Ok(ExitCode::Success)
}

/// "warm server `name` (key k, orphaned: run r was killed while using it)".
fn describe_warm(entry: &WarmEntry, state: State) -> String {
    let why = match state {
        State::Orphaned => format!(
            "orphaned: run {} was killed while using it",
            entry.in_use_by.as_deref().unwrap_or("?")
        ),
        other => other.word().to_string(),
    };
    format!(
        "warm server `{}` (key {}, {why})",
        entry.docker_name, entry.key
    )
}

/// This user's warm servers on the engine that `gc` stops: orphaned, expired or gone ones
/// (with `all_runs`, every one), and the containers started to be kept warm whose run was
/// killed before it could keep them (listed with the other things).
async fn warm_to_stop(backend: &DockerBackend, registry: &Registry, all_runs: bool) -> WarmServers {
    crate::warm::list(backend, registry)
        .await
        .into_iter()
        .filter(|(_, state)| {
            all_runs || matches!(state, State::Orphaned | State::Expired | State::Gone)
        })
        .collect()
}

/// What `gc` removes on `host`'s engine (warm servers first: stopping one frees its GPUs'
/// claims and forgets its entry); with `--dry-run` only listed.
async fn clean(
    host: &Host,
    registry: &Registry,
    args: &Args,
) -> Result<(WarmServers, Vec<Managed>), BackendError> {
    let backend = host.connect().await?;
    // Warm servers first: stopping one frees its GPUs' claims and forgets its entry.
    let warm = warm_to_stop(&backend, registry, args.all_runs).await;
    let mut things = if args.all_runs {
        backend.all_managed().await?
    } else {
        backend.orphaned().await?
    };
    if !args.all_runs {
        let known: Vec<String> = registry
            .list(None)
            .into_iter()
            .map(|e| e.container)
            .collect();
        things.extend(backend.unregistered_warm(&known).await?);
    }
    // GPU lease containers that hold nothing any more, whoever made them (those of this
    // machine's dead runners are among the orphans already).
    for lease in crate::gpu::engine_lease::stale_containers(&backend).await? {
        if !things.iter().any(|t| t.id == lease.id) {
            things.push(Managed {
                kind: ManagedKind::Container,
                id: lease.id,
                name: lease.name,
                labels: lease.labels,
            });
        }
    }
    things.retain(|t| !warm.iter().any(|(e, _)| e.container == t.id));
    if args.dry_run {
        return Ok((warm, things));
    }
    for (entry, _) in &warm {
        if let Err(e) = crate::warm::stop(&backend, registry, entry).await {
            eprintln!("warning: {e}");
        }
    }
    Ok((warm, backend.remove_managed(&things).await?.things))
}

/// "container `name` (run `r`, job `j`, runner pid 12 on `laptop`)".
fn describe(thing: &Managed) -> String {
    let kind = match thing.kind {
        ManagedKind::Container => "container",
        ManagedKind::Network => "network",
    };
    let mut about = Vec::new();
    if let Some(run) = thing.run_id() {
        about.push(format!("run `{run}`"));
    }
    if let Some(job) = thing.job() {
        about.push(format!("job `{job}`"));
    }
    if let Some(owner) = thing.owner() {
        about.push(format!("runner pid {} on `{}`", owner.pid, owner.host));
    }
    if thing.kept() {
        about.push("kept with `--keep-containers`".to_string());
    }
    if about.is_empty() {
        format!("{kind} `{}`", thing.name)
    } else {
        format!("{kind} `{}` ({})", thing.name, about.join(", "))
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{LABEL_JOB, LABEL_OWNER_HOST, LABEL_OWNER_PID, LABEL_RUN_ID};
    use std::collections::HashMap;

    #[test]
    fn a_removed_thing_says_whose_it_was() {
        let thing = Managed {
            kind: ManagedKind::Container,
            id: "abc".into(),
            name: "server".into(),
            labels: HashMap::from([
                (LABEL_RUN_ID.to_string(), "r1".to_string()),
                (LABEL_JOB.to_string(), "bench".to_string()),
                (LABEL_OWNER_PID.to_string(), "42".to_string()),
                (LABEL_OWNER_HOST.to_string(), "laptop".to_string()),
            ]),
        };
        assert_eq!(
            describe(&thing),
            "container `server` (run `r1`, job `bench`, runner pid 42 on `laptop`)"
        );
        let bare = Managed {
            kind: ManagedKind::Network,
            labels: HashMap::new(),
            ..thing
        };
        assert_eq!(describe(&bare), "network `server`");
        assert_eq!(plural(1, "network"), "1 network");
        assert_eq!(plural(0, "network"), "0 networks");
    }
}
