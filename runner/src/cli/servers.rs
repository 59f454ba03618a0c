//! `gpuflow servers`: this user's warm servers on a host (`keep-warm:` on `start-container`,
//! docs/campaigns.md#warm-servers-across-runs): what each is, how long it has run, its GPUs,
//! what it served and when it expires. `gpuflow servers stop KEY…` or `--all` stops them.
//! Like every command that looks at them, it first stops the expired ones.

use crate::diag::{Diagnostic, ExitCode, RenderOptions, render};
use crate::warm::{Registry, State, WarmEntry};

use super::hosts::{ConfigArg, config_errors, host_error, named_host, runtime};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The host whose engine runs them (default: `local`).
    #[arg(long, value_name = "NAME", global = true)]
    pub host: Option<String>,

    /// One JSON object a line instead of the table.
    #[arg(long)]
    pub json: bool,

    #[command(subcommand)]
    pub action: Option<Action>,

    #[command(flatten)]
    pub config: ConfigArg,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Stop warm servers: those whose key (or its start), container name or id is given, or
    /// every one with `--all`.
    Stop {
        /// Server keys (as `gpuflow servers` lists them, or their start), container names or
        /// ids.
        #[arg(required_unless_present = "all")]
        servers: Vec<String>,
        /// Every warm server of this user on the host.
        #[arg(long, conflicts_with = "servers")]
        all: bool,
    },
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let config = match args.config.load() {
        Ok(config) => config,
        Err(diags) => return Ok(config_errors(&diags, render_opts)),
    };
    let host = match named_host(&config, args.host.as_deref(), render_opts) {
        Ok(host) => host,
        Err(code) => return Ok(code),
    };
    let registry = Registry::from_env();
    let runtime = runtime()?;
    let docker = match runtime.block_on(host.connect()) {
        Ok(docker) => docker,
        Err(e) => {
            eprint!("{}\n\n", render(&host_error(host, &e), render_opts));
            return Ok(ExitCode::Infrastructure);
        }
    };
    let swept = runtime.block_on(crate::warm::sweep(&docker, &registry, false));
    for (entry, state) in &swept.stopped {
        println!(
            "stopped `{}` (key {}): {}",
            entry.docker_name,
            entry.key,
            state.word()
        );
    }
    for problem in &swept.problems {
        eprintln!("warning: {problem}");
    }
    let servers = runtime.block_on(crate::warm::list(&docker, &registry));
    match &args.action {
        None => {
            if args.json {
                for (entry, state) in &servers {
                    println!("{}", to_json(entry, *state));
                }
            } else {
                print!("{}", render_table(&servers, &host.name));
            }
            Ok(ExitCode::Success)
        }
        Some(Action::Stop {
            servers: asked,
            all,
        }) => {
            let chosen: Vec<&WarmEntry> = servers
                .iter()
                .map(|(e, _)| e)
                .filter(|e| *all || asked.iter().any(|a| names(e, a)))
                .collect();
            let unknown: Vec<&String> = asked
                .iter()
                .filter(|a| !servers.iter().any(|(e, _)| names(e, a)))
                .collect();
            let mut code = ExitCode::Success;
            for entry in chosen {
                match runtime.block_on(crate::warm::stop(&docker, &registry, entry)) {
                    Ok(()) => println!(
                        "stopped `{}` (key {}, {})",
                        entry.docker_name,
                        entry.key,
                        gpus_text(entry)
                    ),
                    Err(e) => {
                        eprintln!("error: {e}");
                        code = ExitCode::Infrastructure;
                    }
                }
            }
            if !unknown.is_empty() {
                let d = Diagnostic::unlocated(format!(
                    "no warm server on `{}` is named {}",
                    host.name,
                    unknown
                        .iter()
                        .map(|u| format!("`{u}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .hint("`gpuflow servers` lists them with their keys");
                eprint!("{}\n\n", render(&d, render_opts));
                return Ok(ExitCode::Usage);
            }
            if *all && servers.is_empty() {
                println!("no warm servers on `{}`", host.name);
            }
            Ok(code)
        }
    }
}

/// Whether `asked` names `entry`: its key or the start of it, its container name or id.
fn names(entry: &WarmEntry, asked: &str) -> bool {
    !asked.is_empty()
        && (entry.key.starts_with(asked)
            || entry.docker_name == asked
            || entry.container.starts_with(asked))
}

fn gpus_text(entry: &WarmEntry) -> String {
    if entry.gpus.is_empty() {
        return "no GPUs".to_string();
    }
    let indexes: Vec<String> = entry.gpu_indexes.iter().map(u32::to_string).collect();
    format!(
        "GPU{} {}",
        if indexes.len() == 1 { "" } else { "s" },
        indexes.join(",")
    )
}

/// `12m`, `2h05m`.
fn span_text(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn render_table(servers: &[(WarmEntry, State)], host: &str) -> String {
    if servers.is_empty() {
        return format!(
            "no warm servers on `{host}` (a `start-container` step with `keep-warm: 30m` keeps its server after the run)\n"
        );
    }
    let now = crate::gpu::warm_claim::now_secs();
    let mut rows = vec![
        [
            "KEY",
            "NAME",
            "IMAGE",
            "STATE",
            "UP",
            "GPUS",
            "CELLS",
            "REQUESTS",
            "EXPIRES IN",
        ]
        .map(String::from),
    ];
    for (e, state) in servers {
        let state_text = match (state, &e.in_use_by) {
            (State::InUse | State::Orphaned, Some(run)) => format!("{} (run {run})", state.word()),
            _ => state.word().to_string(),
        };
        rows.push([
            e.key.clone(),
            e.docker_name.clone(),
            e.image.clone(),
            state_text,
            span_text(now.saturating_sub(e.started_at)),
            if e.gpu_indexes.is_empty() {
                "-".into()
            } else {
                e.gpu_indexes
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            },
            e.cells_served.to_string(),
            e.requests_served.to_string(),
            if e.expires_at > now {
                span_text(e.expires_at - now)
            } else {
                "expired".into()
            },
        ]);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    if servers.iter().any(|(_, s)| *s == State::Orphaned) {
        out.push_str("orphaned: the run using it was killed; `gpuflow gc` stops it (so does the next `gpuflow run`)\n");
    }
    out
}

fn to_json(entry: &WarmEntry, state: State) -> serde_json::Value {
    let mut value = serde_json::to_value(entry).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.insert("state".into(), state.word().into());
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_what_each_server_is_and_how_long_it_stays() {
        let now = crate::gpu::warm_claim::now_secs();
        let mut e = crate::warm::registry::tests::entry("abc");
        e.started_at = now - 125;
        e.expires_at = now + 1790;
        e.gpu_indexes = vec![0, 1];
        let mut orphan = crate::warm::registry::tests::entry("def");
        orphan.in_use_by = Some("r2".into());
        orphan.started_at = now - 4000;
        orphan.expires_at = now + 60;
        let table = render_table(&[(e, State::Warm), (orphan, State::Orphaned)], "local");
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("KEY"), "{table}");
        assert!(
            lines[1].contains("warm") && lines[1].contains("2m"),
            "{table}"
        );
        assert!(
            lines[1].contains("0,1") && lines[1].contains("29m"),
            "{table}"
        );
        assert!(
            lines[2].contains("orphaned (run r2)") && lines[2].contains("1h06m"),
            "{table}"
        );
        assert!(lines[3].contains("`gpuflow gc` stops it"), "{table}");
        assert!(render_table(&[], "local").contains("keep-warm: 30m"));
    }

    #[test]
    fn a_server_is_named_by_its_key_start_its_container_name_or_id() {
        let e = crate::warm::registry::tests::entry("abc123");
        assert!(names(&e, "k1") && names(&e, "k"));
        assert!(names(&e, "gpuflow-abc123") && names(&e, "abc"));
        assert!(!names(&e, "") && !names(&e, "zzz"));
    }
}
