//! Writing a finished `benchmark` step to the results store: who ran it (run, job, matrix
//! cell, step), the repository's state, the metrics with their raw samples, and the
//! environment fingerprint that decides which later results it may be compared with.
//!
//! The fingerprint is read from what this job actually started: the image and argv of its
//! containers (by `docker inspect`, so a re-tagged image or a changed flag is seen), the
//! image's repository digest and the server's own version ([`super::server_version`]), and the
//! GPUs from the host's inventory (docs/gpus.md): the job's leased ones, their model, driver,
//! CUDA and the host's topology; clocks, power and temperature from the step's telemetry. It
//! knows nothing of how verdicts are decided.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::server_version::ServerContainer;
use crate::engine::containers::JobContainers;
use crate::expr::Value;
use crate::gpu::telemetry::Telemetry;
use crate::steps::StepHost;
use crate::steps::{Recorded, StepContext, StepGpus};
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
    /// What each metric is, in words, where known ([`crate::bench::report::metric_meaning`]).
    pub meanings: BTreeMap<String, String>,
}

/// Records `measured` in one transaction; returns the store's id of the result and remembers
/// it for `compare-to-baseline`.
pub fn record(
    host: &Arc<dyn StepHost>,
    step: &mut StepContext<'_>,
    server: &ServerFacts,
    measured: Measured,
    telemetry: &Telemetry,
) -> Result<i64, String> {
    let github = host.github();
    let field = |name: &str| {
        github
            .and_then(|g| g.get_property(name))
            .map(Value::to_expr_string)
            .filter(|s| !s.is_empty())
    };
    let git = GitInfo {
        commit: field("sha"),
        ref_name: field("ref_name"),
        dirty: is_dirty(host.workspace()),
    };
    let gpus = GpuFacts::of(step.gpus.as_ref(), telemetry);
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
            telemetry: Some(super::gpu_timing::telemetry_value(telemetry)),
            server_reuse: server.reuse.clone(),
            slurm: crate::store::SlurmPlace::of_this_process(),
            image_repo_digest: server.repo_digest.clone(),
            server_version: server.version.clone(),
        },
    };
    let result = NewResult {
        run_id: host.run_id().to_owned(),
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
    // The store outlives the run and is read by reports and `gpuflow history`: a secret in a
    // server's argv, an input or a name is masked before it is written (and before the series
    // key is made of it, so a rotated secret keeps the series).
    let result = host.masker().mask_serde(&result);
    let path = host.store();
    let mut store = ResultStore::open(path)
        .map_err(|e| format!("could not open the results store `{}`: {e}", path.display()))?;
    let id = store
        .record(&result)
        .map_err(|e| format!("could not record the result in `{}`: {e}", path.display()))?;
    step.recorded.push(Recorded {
        step_id: step.step_id.map(String::from),
        key: step.key.to_string(),
        step: step.label.to_string(),
        result_id: id,
        meanings: measured.meanings,
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
    /// The servers an earlier cell started and this one adopted, warm
    /// ([`crate::store::Info::server_reuse`]).
    pub reuse: Option<String>,
    /// `repo@sha256:…` of each started container's image, `name=…` when there are several;
    /// none for an image built here and never pushed.
    pub repo_digest: Option<String>,
    /// The server's own version (`vllm 0.32.0`), `name=…` when there are several.
    pub version: Option<String>,
}

impl ServerFacts {
    /// Inspects the containers `start-container` steps of this job started (not the job's own
    /// container, which only hosts steps). Unreadable ones are left out.
    pub async fn of(containers: &JobContainers) -> Self {
        let mut images = Vec::new();
        let mut command = Vec::new();
        let reuse: Vec<String> = containers
            .started
            .iter()
            .filter_map(|(name, s)| {
                let (cells, age) = s.reused()?;
                let requests = s.requests_served();
                Some(format!(
                    "{name}: {cells} cell{} and {requests} request{} before, up {:.0}s",
                    if cells == 1 { "" } else { "s" },
                    if requests == 1 { "" } else { "s" },
                    age.as_secs_f64()
                ))
            })
            .collect();
        let servers: Vec<(&String, &String)> = containers
            .started
            .iter()
            .filter(|(name, _)| name.as_str() != "job-container")
            .map(|(name, s)| (name, &s.id))
            .collect();
        let several = servers.len() > 1;
        let named = |name: &str, value: String| {
            if several {
                format!("{name}={value}")
            } else {
                value
            }
        };
        let (mut repo_digests, mut versions) = (Vec::new(), Vec::new());
        for (name, id) in servers {
            let Ok(info) = containers
                .docker
                .api("inspect_container", id)
                .inspect_container(id, None)
                .await
            else {
                continue;
            };
            let config = info.config.unwrap_or_default();
            let argv: Vec<String> = config
                .entrypoint
                .unwrap_or_default()
                .into_iter()
                .chain(config.cmd.unwrap_or_default())
                .collect();
            if let Some(image) = info.image {
                let server = ServerContainer {
                    id: id.clone(),
                    running: info.state.and_then(|s| s.running).unwrap_or(false),
                    argv: argv.clone(),
                    env: config.env.unwrap_or_default(),
                    mounts: mounts(info.mounts.unwrap_or_default()),
                };
                let (digest, version) =
                    image_facts(containers, &image, config.image.as_deref(), &server).await;
                repo_digests.extend(digest.map(|d| named(name, d)));
                versions.extend(version.map(|v| named(name, v)));
                images.push(named(name, image));
            }
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
            reuse: (!reuse.is_empty()).then(|| reuse.join("; ")),
            repo_digest: (!repo_digests.is_empty()).then(|| repo_digests.join(" ")),
            version: (!versions.is_empty()).then(|| versions.join("; ")),
        }
    }
}

/// The repository digest of the image `image_id` (the one of the repository `reference`
/// names, when it was pulled from several) and the version of the server `server` runs.
async fn image_facts(
    containers: &JobContainers,
    image_id: &str,
    reference: Option<&str>,
    server: &ServerContainer,
) -> (Option<String>, Option<String>) {
    let Ok(facts) = containers.docker.image_facts(image_id).await else {
        return (None, None);
    };
    let digest = repo_digest(&facts.repo_digests, reference);
    let version = super::server_version::of_server(
        &containers.docker,
        containers.labels(),
        &facts,
        server,
        &super::server_version::cache_dir(),
    )
    .await;
    (digest, version)
}

/// A container's mounts as `SOURCE:TARGET`.
fn mounts(mounts: Vec<bollard::models::MountPoint>) -> Vec<String> {
    let part = |p: Option<String>| p.unwrap_or_default();
    mounts
        .into_iter()
        .map(|m| format!("{}:{}", part(m.source), part(m.destination)))
        .collect()
}

/// Of an image's `RepoDigests`, the one of the repository the container named it by
/// (`127.0.0.1:5000/sim:1` → `127.0.0.1:5000/sim@sha256:…`), else the first: an image pulled
/// from two registries has one per registry.
fn repo_digest(repo_digests: &[String], reference: Option<&str>) -> Option<String> {
    use crate::actions::image_pins::{normalise, repository};
    let wanted = reference.map(|r| normalise(repository(r)));
    repo_digests
        .iter()
        .find(|d| {
            let repo = d.split_once('@').map_or(d.as_str(), |(r, _)| r);
            wanted.as_deref() == Some(normalise(repo).as_str())
        })
        .or(repo_digests.first())
        .cloned()
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

/// The GPUs a result was measured on, from the host's inventory; all empty where the run does
/// not know them.
#[derive(Debug, Default, PartialEq)]
struct GpuFacts {
    model: Option<String>,
    count: u32,
    driver: Option<String>,
    cuda: Option<String>,
    uuids: Vec<String>,
    /// Per GPU, `index: mean value` joined by `; ` — informational, never part of the series
    /// key: they vary run to run and explain a result rather than define what is comparable.
    clocks: Option<String>,
    power: Option<String>,
    temperature: Option<String>,
    topology: Option<String>,
}

impl GpuFacts {
    /// The job's leased GPUs (the whole host's when it leased none). A stand-in inventory's
    /// model says so, so its results never join a series of real GPUs.
    fn of(gpus: Option<&StepGpus>, telemetry: &Telemetry) -> Self {
        let Some(g) = gpus else {
            return Self::default();
        };
        let inv = &g.inventory;
        let used: Vec<&crate::gpu::Gpu> = if g.leased.is_empty() {
            inv.gpus.iter().collect()
        } else {
            inv.gpus
                .iter()
                .filter(|gpu| g.leased.iter().any(|(_, u)| *u == gpu.uuid))
                .collect()
        };
        let mut facts = Self {
            model: used.first().map(|gpu| {
                if inv.is_stand_in() {
                    format!("{} (stand-in)", gpu.model)
                } else {
                    gpu.model.clone()
                }
            }),
            count: used.len() as u32,
            driver: inv.driver.clone(),
            cuda: inv.cuda.clone(),
            uuids: used.iter().map(|gpu| gpu.uuid.clone()).collect(),
            topology: inv.topology_summary(),
            ..Self::default()
        };
        if let Telemetry::Sampled {
            summary, stand_in, ..
        } = telemetry
        {
            // Scripted values are made up: said where they are shown.
            let made_up = if *stand_in { " (stand-in)" } else { "" };
            let join = |pick: &dyn Fn(&crate::gpu::telemetry::Summary) -> Option<String>| {
                let v: Vec<String> = summary
                    .iter()
                    .filter_map(|s| pick(s).map(|t| format!("{}: {t}", s.index)))
                    .collect();
                (!v.is_empty()).then(|| v.join("; ") + made_up)
            };
            facts.clocks = join(&|s| s.sm_clock_mhz.map(|m| format!("{:.0} MHz", m.mean)));
            facts.power = join(&|s| s.power_w.map(|m| format!("{:.1} W", m.mean)));
            facts.temperature = join(&|s| s.temperature_c.map(|m| format!("{:.0} C", m.mean)));
        }
        facts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_repository_digest_is_the_one_of_the_name_the_container_used() {
        let digests = [
            "127.0.0.1:5000/sim@sha256:aa".to_string(),
            "registry.example/team/sim@sha256:bb".to_string(),
            "ubuntu@sha256:cc".to_string(),
        ];
        let pick = |r: Option<&str>| repo_digest(&digests, r);
        assert_eq!(
            pick(Some("registry.example/team/sim:2")).as_deref(),
            Some("registry.example/team/sim@sha256:bb")
        );
        assert_eq!(
            pick(Some("docker.io/library/ubuntu")).as_deref(),
            Some("ubuntu@sha256:cc")
        );
        assert_eq!(
            pick(Some("sha256:1234")).as_deref(),
            Some("127.0.0.1:5000/sim@sha256:aa")
        );
        assert_eq!(repo_digest(&[], Some("sim:1")), None);
    }

    #[test]
    fn the_fingerprint_names_the_leased_gpus_and_a_stand_in() {
        let inv = crate::gpu::stand_in::parse(&crate::diag::SourceFile::new(
            "s.toml",
            "driver = \"570\"\ncuda = \"12.8\"\nmodel = \"L40S\"\n[[gpus]]\nindex = 0\n[[gpus]]\nindex = 1\n[[gpus]]\nindex = 2\n",
        ))
        .unwrap();
        let gpus = StepGpus {
            inventory: Arc::new(inv),
            leased: vec![(2, "GPU-stand-in-0002".into())],
        };
        let unavailable = Telemetry::Unavailable { reason: "x".into() };
        let f = GpuFacts::of(Some(&gpus), &unavailable);
        assert_eq!(f.model.as_deref(), Some("L40S (stand-in)"));
        assert_eq!(f.count, 1);
        assert_eq!(f.uuids, ["GPU-stand-in-0002"]);
        assert_eq!(f.driver.as_deref(), Some("570"));
        assert!(f.topology.unwrap().starts_with("3 GPUs;"));
        assert_eq!(GpuFacts::of(None, &unavailable), GpuFacts::default());
    }
}
