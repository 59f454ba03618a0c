//! One host as configured: its name, where its Docker engine listens and its labels.

use crate::backend::{BackendError, Endpoint};
use crate::diag::Span;

/// The name of the host that is always there: the local engine (`DOCKER_HOST` honoured).
pub const LOCAL: &str = crate::events::LOCAL_HOST;

/// Where a host's engine listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostEndpoint {
    /// `DOCKER_HOST`, or the local socket when it is unset: the `local` host without an
    /// `endpoint` key. Read when connecting, so the environment of that moment counts.
    FromEnv,
    /// Written in `gpuflow.toml`.
    Configured(Endpoint),
}

/// A Docker host jobs can run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub endpoint: HostEndpoint,
    /// In file order, without duplicates.
    pub labels: Vec<String>,
    /// How many GPUs the host has, as configured (a hint, shown when discovery finds none).
    pub gpus: Option<u32>,
    /// A stand-in GPU inventory file (`gpu-inventory`, docs/gpus.md) used instead of
    /// discovery, resolved against the host file's folder.
    pub gpu_inventory: Option<std::path::PathBuf>,
    /// The image the GPU probe (`nvidia-smi` in a short-lived container) runs on a remote
    /// host (`gpu-probe-image`).
    pub gpu_probe_image: Option<String>,
    /// `engine-leases`: whether its GPUs are also leased on its engine, for every machine
    /// using that engine to see (docs/gpus.md); `None`: as `GPUFLOW_ENGINE_LEASES` says, else
    /// on for remote engines only ([`Host::engine_leases_on`]).
    pub engine_leases: Option<bool>,
    /// `lease-image`: the image of the lease containers; default the GPU probe's.
    pub lease_image: Option<String>,
    /// Where `[hosts.NAME]` is written; `None` for the implicit `local` host.
    pub span: Option<Span>,
    /// A Slurm cluster rather than one Docker engine (`[hosts.NAME.slurm]`): its jobs are
    /// submitted there, and each runs on its node's own engine.
    pub slurm: Option<std::sync::Arc<super::slurm_settings::SlurmSettings>>,
}

impl Host {
    /// The implicit local host: `DOCKER_HOST` or the local socket, no labels.
    pub fn local() -> Self {
        Self {
            name: LOCAL.to_string(),
            endpoint: HostEndpoint::FromEnv,
            labels: Vec::new(),
            gpus: None,
            gpu_inventory: None,
            gpu_probe_image: None,
            engine_leases: None,
            lease_image: None,
            span: None,
            slurm: None,
        }
    }

    /// The endpoint to connect to; for [`HostEndpoint::FromEnv`] as `DOCKER_HOST` says now.
    pub fn endpoint(&self) -> Result<Endpoint, BackendError> {
        match &self.endpoint {
            HostEndpoint::FromEnv => Endpoint::from_env(),
            HostEndpoint::Configured(endpoint) => Ok(endpoint.clone()),
        }
    }

    /// Where the endpoint comes from, for listings: `gpuflow.toml`, `DOCKER_HOST` or the
    /// default socket.
    pub fn endpoint_source(&self) -> &'static str {
        match &self.endpoint {
            HostEndpoint::Configured(_) => "config",
            HostEndpoint::FromEnv
                if std::env::var_os("DOCKER_HOST").is_some_and(|v| !v.is_empty()) =>
            {
                "DOCKER_HOST"
            }
            HostEndpoint::FromEnv => "default",
        }
    }

    /// Whether a job asking for `wanted` (`runs-on`'s values) may run here: each value must be
    /// this host's name or one of its labels.
    pub fn matches(&self, wanted: &[String]) -> bool {
        let gpu_types = self.slurm.iter().flat_map(|s| &s.gpu_types);
        let gpu_types: Vec<&String> = gpu_types.collect();
        wanted.iter().all(|w| {
            *w == self.name || self.labels.iter().any(|l| l == w) || gpu_types.contains(&w)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn node() -> Host {
        Host {
            name: "node-a".into(),
            endpoint: HostEndpoint::Configured(Endpoint::parse("ssh://me@node-a").unwrap()),
            labels: vec!["blackwell".into(), "8gpu".into()],
            gpus: Some(8),
            gpu_inventory: None,
            gpu_probe_image: None,
            engine_leases: None,
            lease_image: None,
            span: None,
            slurm: None,
        }
    }

    #[test_case(&[], true ; "no requirement")]
    #[test_case(&["node-a"], true ; "by name")]
    #[test_case(&["blackwell"], true ; "by label")]
    #[test_case(&["blackwell", "8gpu"], true ; "all labels")]
    #[test_case(&["node-a", "8gpu"], true ; "name and label")]
    #[test_case(&["blackwell", "4gpu"], false ; "one label missing")]
    #[test_case(&["local"], false ; "another name")]
    fn matching(wanted: &[&str], expected: bool) {
        let wanted: Vec<String> = wanted.iter().map(ToString::to_string).collect();
        assert_eq!(node().matches(&wanted), expected);
    }

    #[test]
    fn configured_endpoints_do_not_read_the_environment() {
        assert_eq!(node().endpoint().unwrap().to_string(), "ssh://me@node-a");
        assert_eq!(node().endpoint_source(), "config");
    }
}
