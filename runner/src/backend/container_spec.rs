//! What a container is made of, as plain Rust values, and its translation into Docker's create
//! request. The translation is pure (no engine), so every default and refusal is unit-tested:
//! an init process always, `tty=false` (so stdout and stderr stay apart), NVIDIA's recommended
//! settings for PyTorch servers when GPUs are requested, no label under gpuflow's prefix, and
//! volumes as `Mounts`, so a missing host folder is refused instead of created.

use std::collections::{BTreeMap, HashMap};

use bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, Mount, MountType, NetworkingConfig,
    PortBinding, ResourcesUlimits, RestartPolicy, RestartPolicyNameEnum,
};
use indexmap::IndexMap;

use super::labels::LABEL_PREFIX;
use super::{BackendError, GpuRequest, RegistryAuth};

/// `ulimit -l unlimited`: pinned memory for CUDA host buffers and NCCL.
const MEMLOCK_UNLIMITED: i64 = -1;
/// 64 MiB stack, NVIDIA's recommendation for PyTorch containers.
const STACK_BYTES: i64 = 67_108_864;

/// Everything needed to create a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerSpec {
    /// An image reference (`name:tag`, `registry/name@sha256:…`).
    pub image: String,
    /// The local image id (`sha256:…`) the run resolved `image` to: the container is created
    /// from it when set, so a tag that moved since is not followed ([`super::RunImages`]).
    /// `image` stays what the step wrote, for what is shown.
    pub image_id: Option<String>,
    /// The container's name; the engine picks one when `None`.
    pub name: Option<String>,
    /// Replaces the image's `CMD`.
    pub command: Option<Vec<String>>,
    /// Replaces the image's `ENTRYPOINT`.
    pub entrypoint: Option<Vec<String>>,
    /// Environment, in order; keys are unique.
    pub env: IndexMap<String, String>,
    pub ports: Vec<PortMapping>,
    pub volumes: Vec<VolumeMount>,
    /// The working directory inside the container.
    pub workdir: Option<String>,
    /// The user (and group) the command runs as (`1000:1000`, `nobody`); the image's by default.
    pub user: Option<String>,
    /// A network name, or `host` / `bridge` / `none` / `container:<name>`.
    pub network: Option<String>,
    /// Extra names the container answers to on `network` (a service's `redis`), so several
    /// runs can use the same short name without clashing container names.
    pub network_aliases: Vec<String>,
    /// Size of `/dev/shm` in bytes.
    pub shm_size: Option<u64>,
    /// A memory limit in bytes (swap included, so the limit is real): past it the kernel
    /// OOM-kills the container, which `inspect_state` reports as `oom_killed`.
    pub memory: Option<u64>,
    /// What the engine does when the container exits (Docker's `--restart`).
    pub restart: Restart,
    /// `host`, `private`, `shareable`, `container:<name>`; `host` by default with GPUs.
    pub ipc: Option<String>,
    /// Limits by name (`memlock`, `stack`, `nofile`); with GPUs, `memlock` and `stack` default
    /// to NVIDIA's recommendation unless named here.
    pub ulimits: Vec<Ulimit>,
    pub gpus: GpuRequest,
    /// The user's labels; gpuflow adds its own (run, job, owner) beside them.
    pub labels: BTreeMap<String, String>,
    /// Run an init process as PID 1 (Docker's `--init`). On by default: a server running as
    /// PID 1 ignores SIGTERM, so stopping it would wait out the whole grace period. Turn it off
    /// only for images whose entrypoint is an init already.
    pub init: bool,
    /// The credentials a pull of `image` sends (a step's `credentials:`); `None`: the
    /// backend's login for its registry, if any. Not part of what the container is: a server
    /// key leaves it out.
    pub registry_auth: Option<RegistryAuth>,
}

/// Docker's restart policies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Restart {
    /// Never restart (Docker's default; a server that dies should fail the step watching it).
    #[default]
    No,
    Always,
    UnlessStopped,
    /// Restart after a non-zero exit, at most this many times (`None`: without limit).
    OnFailure(Option<u32>),
}

impl Restart {
    /// `no`, `always`, `unless-stopped`, `on-failure` or `on-failure:N`, as `docker run
    /// --restart` takes it.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "no" => Some(Self::No),
            "always" => Some(Self::Always),
            "unless-stopped" => Some(Self::UnlessStopped),
            "on-failure" => Some(Self::OnFailure(None)),
            other => other
                .strip_prefix("on-failure:")
                .and_then(|n| n.parse().ok())
                .map(|n| Self::OnFailure(Some(n))),
        }
    }

    fn policy(self) -> Option<RestartPolicy> {
        let (name, retries) = match self {
            Self::No => return None,
            Self::Always => (RestartPolicyNameEnum::ALWAYS, None),
            Self::UnlessStopped => (RestartPolicyNameEnum::UNLESS_STOPPED, None),
            Self::OnFailure(n) => (RestartPolicyNameEnum::ON_FAILURE, n.map(i64::from)),
        };
        Some(RestartPolicy {
            name: Some(name),
            maximum_retry_count: retries,
        })
    }
}

/// A published port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortMapping {
    pub container_port: u16,
    pub protocol: Protocol,
    /// `None`: the engine picks a free host port.
    pub host_port: Option<u16>,
    /// `None`: all interfaces.
    pub host_ip: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Udp,
}

/// A bind mount (host path) or named volume mounted at `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeMount {
    /// An absolute path on the engine's host (a bind mount, which must exist), else the name
    /// of a Docker volume (created empty when missing), as `docker run -v` reads it.
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

/// A resource limit (`ulimit`); `-1` means unlimited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ulimit {
    pub name: String,
    pub soft: i64,
    pub hard: i64,
}

impl ContainerSpec {
    /// This spec made harmless, for a throw-away container that only looks: same image,
    /// environment, working directory and (read-only) volumes, so files and programs are where
    /// the real container will look for them; no GPUs, ports or network, and it idles instead
    /// of loading a model.
    pub fn harmless(mut self) -> Self {
        self.entrypoint = Some(vec!["tail".into()]);
        self.command = Some(vec!["-f".into(), "/dev/null".into()]);
        self.ports.clear();
        self.gpus = GpuRequest::None;
        self.network = Some("none".into());
        self.network_aliases.clear();
        self.ipc = None;
        self.ulimits.clear();
        for v in &mut self.volumes {
            v.read_only = true;
        }
        self
    }

    /// A container of `image` with the defaults: no GPU, an init process, the image's command.
    pub fn new(image: impl Into<String>) -> Self {
        Self {
            image: image.into(),
            image_id: None,
            name: None,
            command: None,
            entrypoint: None,
            env: IndexMap::new(),
            ports: Vec::new(),
            volumes: Vec::new(),
            workdir: None,
            user: None,
            network: None,
            network_aliases: Vec::new(),
            shm_size: None,
            memory: None,
            restart: Restart::No,
            ipc: None,
            ulimits: Vec::new(),
            gpus: GpuRequest::None,
            labels: BTreeMap::new(),
            init: true,
            registry_auth: None,
        }
    }

    /// Docker's create request, with `managed_labels` (gpuflow's own) added to the user's.
    pub(crate) fn to_create_body(
        &self,
        managed_labels: HashMap<String, String>,
    ) -> Result<ContainerCreateBody, BackendError> {
        self.validate()?;
        let gpus = self.gpus.is_requested();

        let mut labels: HashMap<String, String> = self.labels.clone().into_iter().collect();
        labels.extend(managed_labels);

        let mut exposed_ports = Vec::new();
        let mut port_bindings: HashMap<String, Option<Vec<PortBinding>>> = HashMap::new();
        for port in &self.ports {
            let key = port.key();
            exposed_ports.push(key.clone());
            port_bindings
                .entry(key)
                .or_insert_with(|| Some(Vec::new()))
                .get_or_insert_with(Vec::new)
                .push(PortBinding {
                    host_ip: port.host_ip.clone(),
                    host_port: Some(port.host_port.map(|p| p.to_string()).unwrap_or_default()),
                });
        }

        // `Mounts`, not the legacy `Binds`: with `Binds` Docker creates a missing host folder,
        // empty and owned by root, so a mistyped `models:` path starts a server on nothing and
        // leaves that folder behind; with `Mounts` it refuses to create the container.
        let mounts: Vec<Mount> = self.volumes.iter().map(VolumeMount::mount).collect();

        let host_config = HostConfig {
            init: Some(self.init),
            mounts: (!mounts.is_empty()).then_some(mounts),
            port_bindings: (!port_bindings.is_empty()).then_some(port_bindings),
            network_mode: self.network.clone(),
            shm_size: self
                .shm_size
                .map(|bytes| i64::try_from(bytes).unwrap_or(i64::MAX)),
            memory: self
                .memory
                .map(|bytes| i64::try_from(bytes).unwrap_or(i64::MAX)),
            memory_swap: self
                .memory
                .map(|bytes| i64::try_from(bytes).unwrap_or(i64::MAX)),
            restart_policy: self.restart.policy(),
            ipc_mode: self
                .ipc
                .clone()
                .or_else(|| gpus.then(|| "host".to_string())),
            ulimits: Some(self.effective_ulimits()).filter(|u| !u.is_empty()),
            device_requests: self.gpus.device_request().map(|r| vec![r]),
            ..Default::default()
        };

        Ok(ContainerCreateBody {
            image: Some(self.image_id.clone().unwrap_or_else(|| self.image.clone())),
            cmd: self.command.clone(),
            entrypoint: self.entrypoint.clone(),
            env: Some(self.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            working_dir: self.workdir.clone(),
            user: self.user.clone(),
            labels: Some(labels),
            exposed_ports: (!exposed_ports.is_empty()).then_some(exposed_ports),
            tty: Some(false),
            attach_stdin: Some(false),
            open_stdin: Some(false),
            host_config: Some(host_config),
            networking_config: self
                .network
                .as_ref()
                .filter(|_| !self.network_aliases.is_empty())
                .map(|network| NetworkingConfig {
                    endpoints_config: Some(HashMap::from([(
                        network.clone(),
                        EndpointSettings {
                            aliases: Some(self.network_aliases.clone()),
                            ..Default::default()
                        },
                    )])),
                }),
            ..Default::default()
        })
    }

    /// The refusals that need no engine.
    pub(crate) fn validate(&self) -> Result<(), BackendError> {
        if let Some(key) = self.labels.keys().find(|k| k.starts_with(LABEL_PREFIX)) {
            return Err(BackendError::ReservedLabel { key: key.clone() });
        }
        if let Some(name) = self.env.keys().find(|k| k.is_empty() || k.contains('=')) {
            return Err(BackendError::InvalidEnvName { name: name.clone() });
        }
        if let Some(value) = self.env.get("NVIDIA_VISIBLE_DEVICES") {
            self.gpus
                .check_visible_devices(value)
                .map_err(|requested| BackendError::VisibleDevicesConflict {
                    value: value.clone(),
                    requested,
                })?;
        }
        Ok(())
    }

    /// The user's ulimits, plus NVIDIA's `memlock` and `stack` when GPUs are requested and the
    /// user did not set them.
    fn effective_ulimits(&self) -> Vec<ResourcesUlimits> {
        let mut ulimits: Vec<ResourcesUlimits> = self
            .ulimits
            .iter()
            .map(|u| ResourcesUlimits {
                name: Some(u.name.clone()),
                soft: Some(u.soft),
                hard: Some(u.hard),
            })
            .collect();
        if self.gpus.is_requested() {
            for (name, value) in [("memlock", MEMLOCK_UNLIMITED), ("stack", STACK_BYTES)] {
                if !self.ulimits.iter().any(|u| u.name == name) {
                    ulimits.push(ResourcesUlimits {
                        name: Some(name.to_string()),
                        soft: Some(value),
                        hard: Some(value),
                    });
                }
            }
        }
        ulimits
    }
}

impl PortMapping {
    /// A TCP port published on the same host port.
    pub fn tcp(port: u16) -> Self {
        Self {
            container_port: port,
            protocol: Protocol::Tcp,
            host_port: Some(port),
            host_ip: None,
        }
    }

    /// Docker's `80/tcp` key.
    fn key(&self) -> String {
        let protocol = match self.protocol {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        };
        format!("{}/{protocol}", self.container_port)
    }
}

impl VolumeMount {
    /// Whether `source` is a host path (a bind mount) rather than a volume's name: an absolute
    /// path, as for `docker run -v`.
    pub fn is_bind(&self) -> bool {
        self.source.starts_with('/')
    }

    /// As written: `source:target[:ro]`.
    pub fn written(&self) -> String {
        let mode = if self.read_only { ":ro" } else { "" };
        format!("{}:{}{mode}", self.source, self.target)
    }

    /// Docker's mount: a bind of a host path, else the named volume.
    fn mount(&self) -> Mount {
        Mount {
            typ: Some(if self.is_bind() {
                MountType::BIND
            } else {
                MountType::VOLUME
            }),
            source: Some(self.source.clone()),
            target: Some(self.target.clone()),
            read_only: Some(self.read_only),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(spec: &ContainerSpec) -> ContainerCreateBody {
        spec.to_create_body(HashMap::from([(
            "dev.gpuflow.run-id".to_string(),
            "r1".to_string(),
        )]))
        .unwrap()
    }

    fn host(spec: &ContainerSpec) -> HostConfig {
        body(spec).host_config.unwrap()
    }

    fn ulimit(h: &HostConfig, name: &str) -> Option<(i64, i64)> {
        h.ulimits
            .as_ref()?
            .iter()
            .find(|u| u.name.as_deref() == Some(name))
            .map(|u| (u.soft.unwrap(), u.hard.unwrap()))
    }

    #[test]
    fn defaults_init_no_tty_no_gpu_settings() {
        let spec = ContainerSpec::new("gpuflow-base:test");
        let b = body(&spec);
        assert_eq!(b.tty, Some(false));
        let h = b.host_config.unwrap();
        assert_eq!(h.init, Some(true));
        assert_eq!(h.ipc_mode, None);
        assert_eq!(h.ulimits, None);
        assert_eq!(h.device_requests, None);
        assert_eq!(b.labels.unwrap()["dev.gpuflow.run-id"], "r1");
    }

    #[test]
    fn gpus_bring_nvidias_recommended_settings() {
        let mut spec = ContainerSpec::new("img");
        spec.gpus = GpuRequest::All;
        let h = host(&spec);
        assert_eq!(h.ipc_mode.as_deref(), Some("host"));
        assert_eq!(ulimit(&h, "memlock"), Some((-1, -1)));
        assert_eq!(ulimit(&h, "stack"), Some((67_108_864, 67_108_864)));
        assert_eq!(h.device_requests.unwrap().len(), 1);
    }

    #[test]
    fn the_users_settings_win_over_gpu_defaults() {
        let mut spec = ContainerSpec::new("img");
        spec.gpus = GpuRequest::Count(2);
        spec.ipc = Some("private".into());
        spec.shm_size = Some(1 << 30);
        spec.memory = Some(64 << 20);
        spec.user = Some("1000:1000".into());
        spec.restart = Restart::OnFailure(Some(3));
        spec.ulimits = vec![Ulimit {
            name: "stack".into(),
            soft: 8_388_608,
            hard: 8_388_608,
        }];
        assert_eq!(body(&spec).user.as_deref(), Some("1000:1000"));
        let h = host(&spec);
        assert_eq!(h.ipc_mode.as_deref(), Some("private"));
        assert_eq!(h.shm_size, Some(1 << 30));
        assert_eq!(h.memory, Some(64 << 20));
        assert_eq!(
            h.memory_swap,
            Some(64 << 20),
            "swap adds nothing to the limit"
        );
        let policy = h.restart_policy.clone().unwrap();
        assert_eq!(policy.name, Some(RestartPolicyNameEnum::ON_FAILURE));
        assert_eq!(policy.maximum_retry_count, Some(3));
        assert_eq!(ulimit(&h, "stack"), Some((8_388_608, 8_388_608)));
        assert_eq!(ulimit(&h, "memlock"), Some((-1, -1)));
    }

    #[test]
    fn ports_volumes_env_and_command() {
        let mut spec = ContainerSpec::new("img");
        spec.ports = vec![
            PortMapping::tcp(30000),
            PortMapping {
                container_port: 9000,
                protocol: Protocol::Udp,
                host_port: None,
                host_ip: Some("127.0.0.1".into()),
            },
        ];
        spec.volumes = vec![
            VolumeMount {
                source: "/srv/models".into(),
                target: "/models".into(),
                read_only: true,
            },
            VolumeMount {
                source: "hf-cache".into(),
                target: "/root/.cache/huggingface".into(),
                read_only: false,
            },
        ];
        spec.env.insert("B".into(), "2".into());
        spec.env.insert("A".into(), "x=y".into());
        spec.command = Some(vec!["serve".into(), "--port".into(), "30000".into()]);
        let b = body(&spec);
        assert_eq!(b.env.unwrap(), ["B=2", "A=x=y"]);
        assert_eq!(b.cmd.unwrap()[0], "serve");
        let mut exposed = b.exposed_ports.unwrap();
        exposed.sort();
        assert_eq!(exposed, ["30000/tcp", "9000/udp"]);
        let h = b.host_config.unwrap();
        // Mounts, never binds: Docker would create a missing host folder for a bind.
        assert_eq!(h.binds, None);
        let mounts = h.mounts.unwrap();
        let summary: Vec<_> = mounts
            .iter()
            .map(|m| {
                (
                    m.typ,
                    m.source.as_deref().unwrap(),
                    m.target.as_deref().unwrap(),
                    m.read_only,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (Some(MountType::BIND), "/srv/models", "/models", Some(true)),
                (
                    Some(MountType::VOLUME),
                    "hf-cache",
                    "/root/.cache/huggingface",
                    Some(false)
                ),
            ]
        );
        let ports = h.port_bindings.unwrap();
        let tcp = ports["30000/tcp"].as_ref().unwrap();
        assert_eq!(tcp[0].host_port.as_deref(), Some("30000"));
        let udp = ports["9000/udp"].as_ref().unwrap();
        assert_eq!(udp[0].host_port.as_deref(), Some(""));
        assert_eq!(udp[0].host_ip.as_deref(), Some("127.0.0.1"));
    }

    #[test]
    fn a_conflicting_visible_devices_is_refused_with_both_sides_named() {
        let mut spec = ContainerSpec::new("img");
        spec.gpus = GpuRequest::Devices(vec!["0".into()]);
        spec.env
            .insert("NVIDIA_VISIBLE_DEVICES".into(), "all".into());
        let e = spec.to_create_body(HashMap::new()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`NVIDIA_VISIBLE_DEVICES=all` in the container's env conflicts with its GPU request (GPU device `0`)"
        );
        assert!(
            e.hint()
                .unwrap()
                .contains("remove `NVIDIA_VISIBLE_DEVICES`")
        );
    }

    #[test]
    fn reserved_labels_and_bad_env_names_are_refused() {
        let mut spec = ContainerSpec::new("img");
        spec.labels
            .insert("dev.gpuflow.run-id".into(), "mine".into());
        assert!(matches!(
            spec.to_create_body(HashMap::new()),
            Err(BackendError::ReservedLabel { .. })
        ));
        let mut spec = ContainerSpec::new("img");
        spec.env.insert("A=B".into(), "1".into());
        assert!(matches!(
            spec.to_create_body(HashMap::new()),
            Err(BackendError::InvalidEnvName { .. })
        ));
    }

    #[test]
    fn throwaway_containers_are_harmless() {
        let mut spec = ContainerSpec::new("img");
        spec.gpus = GpuRequest::All;
        spec.ports.push(PortMapping::tcp(30000));
        spec.volumes.push(VolumeMount {
            source: "/models".into(),
            target: "/models".into(),
            read_only: false,
        });
        let t = spec.harmless();
        assert_eq!(t.gpus, GpuRequest::None);
        assert!(t.ports.is_empty());
        assert!(t.volumes[0].read_only);
        assert_eq!(t.network.as_deref(), Some("none"));
    }
}
