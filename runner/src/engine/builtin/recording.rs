//! Writing a finished `benchmark` step to the results store: who ran it (run, job, matrix
//! cell, step), the repository's state, the metrics with their raw samples, and the
//! environment fingerprint that decides which later results it may be compared with.
//!
//! The fingerprint is read from what this job actually started: the image and argv of its
//! containers (by `docker inspect`, so a re-tagged image or a changed flag is seen), and the
//! GPUs `nvidia-smi` reports on this machine. It knows nothing of how verdicts are decided.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::step_context::{Recorded, StepContext};
use crate::engine::containers::JobContainers;
use crate::engine::executor::Shared;
use crate::expr::Value;
use crate::store::{
    Fingerprint, GitInfo, Identity, Info, NewMetric, NewResult, ResultStore, RunStatus,
};

/// What the step measured, ready to be stored.
pub struct Measured {
    /// The benchmark's definition: its evaluated inputs, minus those that do not change the
    /// experiment (the target's address).
    pub definition: BTreeMap<String, String>,
    pub metrics: Vec<NewMetric>,
    pub status: RunStatus,
    pub started_at_ms: i64,
}

/// Records `measured` in one transaction; returns the store's id of the result and remembers
/// it for `compare-to-baseline`.
pub fn record(
    shared: &Arc<Shared>,
    step: &mut StepContext<'_>,
    server: &ServerFacts,
    measured: Measured,
) -> Result<i64, String> {
    let github = shared.base.get("github");
    let field = |name: &str| {
        github
            .and_then(|g| g.get_property(name))
            .map(Value::to_expr_string)
            .filter(|s| !s.is_empty())
    };
    let git = GitInfo {
        commit: field("sha"),
        ref_name: field("ref_name"),
        dirty: is_dirty(&shared.opts.workspace),
    };
    let gpus = GpuFacts::probe();
    let fingerprint = Fingerprint {
        identity: Identity {
            host_label: server.host_label.clone(),
            gpu_model: gpus.model,
            gpu_count: gpus.count,
            driver: gpus.driver,
            cuda: gpus.cuda,
            image_digest: server.image_digest.clone(),
            server_command: server.command.clone(),
            benchmark: measured.definition,
        },
        info: Info {
            host_name: host_name(),
            gpu_uuids: gpus.uuids,
            clocks: gpus.clocks,
            power: gpus.power,
            temperature: gpus.temperature,
            topology: gpus.topology,
        },
    };
    let result = NewResult {
        run_id: shared.opts.run_id.clone(),
        workflow: field("workflow").unwrap_or_default(),
        job: step.job_id.to_string(),
        matrix: step.matrix.clone(),
        step: step.label.to_string(),
        git,
        started_at_ms: measured.started_at_ms,
        finished_at_ms: crate::store::now_ms(),
        status: measured.status,
        fingerprint,
        metrics: measured.metrics,
    };
    let path = &shared.opts.store;
    let mut store = ResultStore::open(path)
        .map_err(|e| format!("could not open the results store `{}`: {e}", path.display()))?;
    let id = store
        .record(&result)
        .map_err(|e| format!("could not record the result in `{}`: {e}", path.display()))?;
    step.recorded.push(Recorded {
        step_id: step.step_id.map(String::from),
        step: step.label.to_string(),
        result_id: id,
    });
    Ok(id)
}

/// What the job's containers run: the identity of the server being measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerFacts {
    /// `local` for the local engine, else the engine's address (`ssh://gpu-node`): the
    /// machine the server ran on.
    pub host_label: String,
    /// The image id (`sha256:…`) of each started container, `name=id` when there are several.
    pub image_digest: Option<String>,
    /// Entrypoint and command of each started container; several are prefixed with
    /// `name:` so a flag moved from one to another is a change.
    pub command: Vec<String>,
}

impl ServerFacts {
    /// Inspects the containers `start-container` steps of this job started (not the job's own
    /// container, which only hosts steps). Unreadable ones are left out.
    pub async fn of(containers: &JobContainers) -> Self {
        let mut images = Vec::new();
        let mut command = Vec::new();
        let servers: Vec<(&String, &String)> = containers
            .started
            .iter()
            .filter(|(name, _)| name.as_str() != "job-container")
            .map(|(name, s)| (name, &s.id))
            .collect();
        let several = servers.len() > 1;
        for (name, id) in servers {
            let Ok(info) = containers.docker.client().inspect_container(id, None).await else {
                continue;
            };
            if let Some(image) = info.image {
                images.push(if several {
                    format!("{name}={image}")
                } else {
                    image
                });
            }
            let config = info.config.unwrap_or_default();
            let argv = config
                .entrypoint
                .unwrap_or_default()
                .into_iter()
                .chain(config.cmd.unwrap_or_default());
            if several {
                command.push(format!("{name}:"));
            }
            command.extend(argv);
        }
        let host_label = match containers.docker.endpoint() {
            crate::backend::Endpoint::Unix(_) => "local".to_string(),
            other => other.to_string(),
        };
        Self {
            host_label,
            image_digest: (!images.is_empty()).then(|| images.join(" ")),
            command,
        }
    }
}

/// Uncommitted changes in the workspace's repository (false outside one).
fn is_dirty(workspace: &Path) -> bool {
    std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .current_dir(workspace)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty())
}

fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The GPUs of this machine as `nvidia-smi` reports them; all empty where there is none.
#[derive(Debug, Default, PartialEq)]
struct GpuFacts {
    model: Option<String>,
    count: u32,
    driver: Option<String>,
    cuda: Option<String>,
    uuids: Vec<String>,
    /// Per GPU, `index: value` joined by `; ` — informational, never part of the series key:
    /// they vary run to run and explain a result rather than define what is comparable.
    clocks: Option<String>,
    power: Option<String>,
    temperature: Option<String>,
    /// `nvidia-smi topo -m`'s matrix: NVLink or the PCIe path between each pair.
    topology: Option<String>,
}

impl GpuFacts {
    fn probe() -> Self {
        let run = |args: &[&str]| {
            std::process::Command::new("nvidia-smi")
                .args(args)
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let Some(list) = run(&[
            "--query-gpu=name,driver_version,uuid",
            "--format=csv,noheader",
        ]) else {
            return Self::default();
        };
        let mut facts = Self::parse_query(&list);
        facts.cuda = run(&[]).and_then(|banner| Self::parse_cuda(&banner));
        if let Some(state) = run(&[
            "--query-gpu=index,clocks.sm,power.draw,temperature.gpu",
            "--format=csv,noheader",
        ]) {
            (facts.clocks, facts.power, facts.temperature) = Self::parse_state(&state);
        }
        facts.topology = run(&["topo", "-m"]).map(|t| t.trim_end().to_string());
        facts
    }

    /// `0, 1980 MHz, 120.50 W, 45` per line → (`0: 1980 MHz; …`, `0: 120.50 W; …`, `0: 45 C; …`).
    fn parse_state(text: &str) -> (Option<String>, Option<String>, Option<String>) {
        let (mut clocks, mut power, mut temp) = (Vec::new(), Vec::new(), Vec::new());
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let parts: Vec<&str> = line.split(',').map(str::trim).collect();
            let [index, clock, watts, celsius] = parts[..] else {
                continue;
            };
            clocks.push(format!("{index}: {clock}"));
            power.push(format!("{index}: {watts}"));
            temp.push(format!("{index}: {celsius} C"));
        }
        let join = |v: Vec<String>| (!v.is_empty()).then(|| v.join("; "));
        (join(clocks), join(power), join(temp))
    }

    /// `NVIDIA H200, 570.86.15, GPU-…` per line.
    fn parse_query(text: &str) -> Self {
        let mut facts = Self::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let parts: Vec<&str> = line.split(',').map(str::trim).collect();
            facts.count += 1;
            if facts.model.is_none() {
                facts.model = parts.first().map(|s| s.to_string());
                facts.driver = parts.get(1).map(|s| s.to_string());
            }
            if let Some(uuid) = parts.get(2) {
                facts.uuids.push(uuid.to_string());
            }
        }
        facts
    }

    /// `CUDA Version: 12.8` from the banner.
    fn parse_cuda(banner: &str) -> Option<String> {
        let rest = banner.split("CUDA Version:").nth(1)?;
        rest.split_whitespace()
            .next()
            .map(|v| v.trim_end_matches('|').to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_lines_become_model_count_driver_and_uuids() {
        let f = GpuFacts::parse_query(
            "NVIDIA H200, 570.86.15, GPU-aaa\nNVIDIA H200, 570.86.15, GPU-bbb\n",
        );
        assert_eq!(f.model.as_deref(), Some("NVIDIA H200"));
        assert_eq!(f.count, 2);
        assert_eq!(f.driver.as_deref(), Some("570.86.15"));
        assert_eq!(f.uuids, ["GPU-aaa", "GPU-bbb"]);
    }

    #[test]
    fn clocks_power_and_temperature_are_listed_per_gpu() {
        let (clocks, power, temp) = GpuFacts::parse_state(
            "0, 1980 MHz, 120.50 W, 45\n1, 1755 MHz, 98.10 W, 41\nnot, a, row\n",
        );
        assert_eq!(clocks.as_deref(), Some("0: 1980 MHz; 1: 1755 MHz"));
        assert_eq!(power.as_deref(), Some("0: 120.50 W; 1: 98.10 W"));
        assert_eq!(temp.as_deref(), Some("0: 45 C; 1: 41 C"));
        assert_eq!(GpuFacts::parse_state(""), (None, None, None));
    }

    #[test]
    fn the_cuda_version_is_read_from_the_banner() {
        let banner =
            "| NVIDIA-SMI 570.86.15   Driver Version: 570.86.15   CUDA Version: 12.8     |";
        assert_eq!(GpuFacts::parse_cuda(banner).as_deref(), Some("12.8"));
        assert_eq!(GpuFacts::parse_cuda("no gpus"), None);
    }
}
