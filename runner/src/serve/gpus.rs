//! The GPUs page: each host's GPUs (real or stand-in, and which), their topology, who holds
//! each (run, job, since when) and, for this machine's real GPUs, their utilisation and power
//! now. Read afresh for every request, as `gpuflow hosts` reads them; remote hosts are not
//! asked (that starts a container there: `gpuflow hosts --probe`), a Slurm cluster's GPUs are
//! Slurm's (`gpuflow hosts` shows them).

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Serialize;

use super::app::App;
use super::respond::{Want, json};
use crate::gpu::{Discovery, Inventory};
use crate::hosts::{Host, HostConfig};

#[derive(Serialize)]
struct HostGpusView {
    name: String,
    /// Where the GPUs were read from (`NVML`, `stand-in file …`), or why there are none.
    source: String,
    stand_in: bool,
    driver: Option<String>,
    cuda: Option<String>,
    gpus: Vec<GpuView>,
    topology: Option<String>,
    /// `nvidia-smi topo -m` style, as `gpuflow hosts` prints it.
    matrix: String,
    /// Why nothing is shown for this host.
    note: Option<String>,
}

#[derive(Serialize)]
struct GpuView {
    index: u32,
    uuid: String,
    model: String,
    memory_mib: u64,
    mig: Option<bool>,
    numa_node: Option<u32>,
    /// As the holder wrote it: `pid 4711, run 20261202-…, bench (2)`.
    holder: Option<String>,
    /// The run the holder names, for a link.
    holder_run: Option<String>,
    /// Unix seconds.
    held_since: Option<f64>,
    utilization_pct: Option<u32>,
    memory_used_mib: Option<u64>,
    power_w: Option<f64>,
}

pub async fn page(State(app): State<Arc<App>>, headers: HeaderMap, api: bool) -> Response {
    let want = Want::of(api, &headers);
    let config = HostConfig::find(app.settings.hosts_file.as_deref(), &app.settings.project);
    let config = match config {
        Ok(c) => c,
        Err(diags) => {
            let text: Vec<String> = diags
                .iter()
                .map(|d| format!("{} {}", d.location(), d.message))
                .collect();
            return app.problem(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the host file has problems: {}", text.join("; ")),
                Some("`gpuflow hosts` shows each at its place"),
                want,
            );
        }
    };
    let mut hosts = Vec::new();
    for host in config.hosts() {
        hosts.push(host_view(host).await);
    }
    let file = config.file().map(|f| f.name.clone());
    let data = json(&serde_json::json!({ "host_file": file, "hosts": hosts }));
    app.page("gpus.html", "gpus", "GPUs".into(), data)
        .respond(want)
}

async fn host_view(host: &Host) -> HostGpusView {
    let empty = |note: &str| HostGpusView {
        name: host.name.clone(),
        source: String::new(),
        stand_in: false,
        driver: None,
        cuda: None,
        gpus: Vec::new(),
        topology: None,
        matrix: String::new(),
        note: Some(note.to_string()),
    };
    if host.slurm.is_some() {
        return empty(
            "a Slurm cluster: its GPUs are Slurm's (`gpuflow hosts` shows partitions, nodes and the queue)",
        );
    }
    if matches!(host.gpu_discovery(), Discovery::Remote(_)) {
        return empty(
            "a remote host: its GPUs are not asked from here (`gpuflow hosts --probe` runs `nvidia-smi` there)",
        );
    }
    let gpus = host.gpus();
    let inv = gpus.inventory().await;
    let holders = gpus.holders(None).await;
    let now = live_samples(&inv).await;
    let views = inv
        .gpus
        .iter()
        .zip(holders)
        .zip(now)
        .map(|((g, holder), sample)| GpuView {
            index: g.index,
            uuid: g.uuid.clone(),
            model: g.model.clone(),
            memory_mib: g.memory_mib,
            mig: g.mig,
            numa_node: g.numa_node,
            holder_run: holder.as_deref().and_then(run_named),
            held_since: holder
                .as_ref()
                .and_then(|_| gpus.leases().held_since(&g.uuid))
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map(|d| d.as_secs_f64()),
            holder,
            utilization_pct: sample.as_ref().and_then(|s| s.utilization_pct),
            memory_used_mib: sample
                .as_ref()
                .and_then(|s| s.memory_used_mib)
                .or(g.state.memory_used_mib),
            power_w: sample.as_ref().and_then(|s| s.power_w).or(g.state.power_w),
        })
        .collect();
    HostGpusView {
        name: host.name.clone(),
        source: inv.source_text(),
        stand_in: inv.is_stand_in(),
        driver: inv.driver.clone(),
        cuda: inv.cuda.clone(),
        gpus: views,
        topology: inv.topology_summary(),
        matrix: inv.matrix_text(),
        note: None,
    }
}

/// Utilisation, memory and power now, for GPUs NVML reads on this machine; nothing for
/// stand-ins (their file's figures are shown instead).
async fn live_samples(inv: &Arc<Inventory>) -> Vec<Option<crate::gpu::sample::Sample>> {
    if !matches!(inv.source, crate::gpu::inventory::Source::Nvml) {
        return vec![None; inv.gpus.len()];
    }
    let indexes: Vec<u32> = inv.gpus.iter().map(|g| g.index).collect();
    tokio::task::spawn_blocking(move || match crate::gpu::nvml::open() {
        Ok(nvml) => indexes
            .iter()
            .map(|&i| Some(crate::gpu::nvml::sample(&nvml, i)))
            .collect(),
        Err(_) => vec![None; indexes.len()],
    })
    .await
    .unwrap_or_default()
}

/// The run id in a holder's text (`pid 4711, run ID, job`).
fn run_named(holder: &str) -> Option<String> {
    holder
        .split(", ")
        .find_map(|part| part.strip_prefix("run "))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_run_is_read_from_a_holders_text() {
        let text = crate::gpu::lease::holder_text("20261202-abc", "bench (2)");
        assert_eq!(super::run_named(&text).as_deref(), Some("20261202-abc"));
        assert_eq!(
            super::run_named("warm server abc (keep-warm, 3 min left)"),
            None
        );
    }
}
