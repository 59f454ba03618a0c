//! How a host's GPUs are found: a stand-in inventory file when one is configured
//! (`gpu-inventory`, or `GPUFLOW_GPU_INVENTORY` for `local`), NVML when the host's engine is
//! on this machine, else `nvidia-smi` (query and `topo -m`) in a short-lived container on the
//! host, with all its GPUs, removed again whatever happens. And how they are leased: in the
//! lease folder, and on the host's engine too where that engine is shared by several machines
//! (`engine-leases`).

use std::sync::Arc;

use crate::backend::{ContainerSpec, Endpoint, GpuRequest, OutputStream, RunLabels};
use crate::gpu::engine_lease::ENGINE_LEASES_ENV;
use crate::gpu::{Discovery, EngineLeases, HostGpus, Inventory, LeaseDir, STAND_IN_ENV};

use super::host::{Host, LOCAL};

/// The image the probe runs when the host names none: the NVIDIA Container Toolkit puts
/// `nvidia-smi` into any image it gives GPUs to.
pub const DEFAULT_PROBE_IMAGE: &str = "ubuntu:24.04";
const PULL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Host {
    /// How this host's GPUs are found.
    pub fn gpu_discovery(&self) -> Discovery {
        if self.name == LOCAL
            && let Some(path) = std::env::var_os(STAND_IN_ENV).filter(|v| !v.is_empty())
        {
            return Discovery::StandIn(path.into());
        }
        if let Some(path) = &self.gpu_inventory {
            return Discovery::StandIn(path.clone());
        }
        match self.endpoint() {
            Ok(Endpoint::Unix(_)) | Err(_) => Discovery::Local,
            Ok(_) => {
                let host = self.clone();
                Discovery::Remote(Arc::new(move || {
                    let host = host.clone();
                    Box::pin(async move { host.probe_gpus().await })
                }))
            }
        }
    }

    /// This host's GPUs for a run: found as [`Self::gpu_discovery`] says, leased in the lease
    /// folder of this host (by endpoint, so two names for one engine share leases) and, when
    /// [`Self::engine_leases_on`], on its engine too.
    pub fn gpus(&self) -> HostGpus {
        let key = match self.endpoint() {
            Ok(Endpoint::Unix(_)) | Err(_) => LOCAL.to_string(),
            Ok(endpoint) => endpoint.to_string(),
        };
        let gpus = HostGpus::new(self.gpu_discovery(), LeaseDir::for_host(&key));
        if self.engine_leases_on() {
            gpus.with_engine_leases(EngineLeases::new(self.lease_image()))
        } else {
            gpus
        }
    }

    /// Whether this host's GPUs are also leased on its engine: its `engine-leases`, else
    /// `GPUFLOW_ENGINE_LEASES` (`1`/`0`), else on for a remote engine (`ssh://`, `tcp://`: other
    /// machines may drive it too) and off for one on this machine, whose other users share
    /// the lease folder already. A node whose engine is also driven from elsewhere (a laptop
    /// over ssh) turns it on for its own runs (its worker) with either.
    pub fn engine_leases_on(&self) -> bool {
        if let Some(on) = self.engine_leases {
            return on;
        }
        let from_env = std::env::var(ENGINE_LEASES_ENV).ok().and_then(|v| {
            match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Some(true),
                "0" | "false" | "no" | "off" => Some(false),
                _ => None,
            }
        });
        from_env.unwrap_or_else(|| !matches!(self.endpoint(), Ok(Endpoint::Unix(_)) | Err(_)))
    }

    /// The image of this host's lease containers: `lease-image`, else the GPU probe's (which
    /// the probe pulls on a remote host before any lease is taken there).
    pub fn lease_image(&self) -> String {
        self.lease_image
            .clone()
            .or_else(|| self.gpu_probe_image.clone())
            .unwrap_or_else(|| DEFAULT_PROBE_IMAGE.to_string())
    }

    /// Runs `nvidia-smi` in a throw-away container on the host; what goes wrong becomes an
    /// inventory without GPUs that says why.
    pub async fn probe_gpus(&self) -> Inventory {
        match self.try_probe_gpus().await {
            Ok(inv) => inv,
            Err(reason) => Inventory::none(reason),
        }
    }

    async fn try_probe_gpus(&self) -> Result<Inventory, String> {
        let docker = self
            .connect()
            .await
            .map_err(|e| format!("cannot reach the host's engine to ask for its GPUs: {e}"))?;
        let image = self
            .gpu_probe_image
            .clone()
            .unwrap_or_else(|| DEFAULT_PROBE_IMAGE.to_string());
        if !docker.has_image(&image).await.map_err(|e| e.to_string())? {
            // Bounded: jobs of this host wait for the probe before they start.
            match tokio::time::timeout(PULL_TIMEOUT, docker.pull_image(&image)).await {
                Ok(pulled) => pulled.map_err(|e| {
                    format!("the GPU probe image `{image}` is not on the host and could not be pulled: {e} (set `gpu-probe-image` in gpuflow.toml)")
                })?,
                Err(_) => {
                    return Err(format!(
                        "pulling the GPU probe image `{image}` took over {}s (set `gpu-probe-image` in gpuflow.toml to an image the host has)",
                        PULL_TIMEOUT.as_secs()
                    ));
                }
            }
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let run = RunLabels::new(
            format!("gpu-probe-{}-{nanos}", std::process::id()),
            "gpu-probe",
        );
        let mut spec = ContainerSpec::new(&image);
        spec.entrypoint = Some(vec!["sh".into(), "-c".into()]);
        spec.command = Some(vec![crate::gpu::nvidia_smi::probe_script()]);
        spec.gpus = GpuRequest::All;
        let outcome = async {
            let container = docker.create_container(&run, &spec).await?;
            docker.start(&container).await?;
            let code = docker.wait_exit(&container.id).await?;
            let mut out = String::new();
            docker
                .follow_logs(
                    &container.id,
                    crate::backend::LogStart::Beginning,
                    |l: crate::backend::LogLine| {
                        if l.stream == OutputStream::Stdout {
                            out.push_str(&l.text);
                            out.push('\n');
                        }
                    },
                )
                .await?;
            Ok::<_, crate::backend::BackendError>((code, out))
        };
        // A hung `nvidia-smi` (a GPU fallen off the bus) must not hold the run's jobs for ever.
        let outcome = match tokio::time::timeout(PROBE_TIMEOUT, outcome).await {
            Ok(outcome) => outcome,
            Err(_) => {
                let _ = docker.remove_run(&run.run_id).await;
                return Err(format!(
                    "`nvidia-smi` on the host did not answer within {}s",
                    PROBE_TIMEOUT.as_secs()
                ));
            }
        };
        // Removed on every path; a failed removal is left to `gpuflow gc`.
        let _ = docker.remove_run(&run.run_id).await;
        let (code, out) = outcome.map_err(|e| match e.hint() {
            Some(h) => format!("the GPU probe container failed: {e} ({h})"),
            None => format!("the GPU probe container failed: {e}"),
        })?;
        if code != 0 {
            return Err(format!(
                "`nvidia-smi` exited with {code} on the host (is the NVIDIA driver installed there?)"
            ));
        }
        crate::gpu::nvidia_smi::parse_probe(&out).map_err(|e| e.to_string())
    }
}
