//! Which container `wait-for-health` watches (so it fails the moment that container dies),
//! and reaching a job's container from the host by its address instead of its name.

use crate::backend::DockerBackend;

use super::health_spec::{HealthSpec, Probe, split_host_port};
use crate::engine::containers::JobContainers;

/// A watched container: the job's name for it, the engine's id, and the engine it runs on.
#[derive(Clone, Debug)]
pub(super) struct Watched {
    pub(super) name: String,
    pub(super) id: String,
    pub(super) docker: DockerBackend,
}

/// Which container to watch: `container`, else the one the URL or address names (a job's
/// container answers to its name only inside the job's network, so the host reaches it by its
/// address, which replaces the name). Without `containers` (no step reached an engine) the job
/// started none: nothing is watched, and a `container` named is one it never started.
pub(super) async fn resolve_watched(
    spec: &mut HealthSpec,
    containers: Option<&JobContainers>,
) -> Result<Option<Watched>, String> {
    let by_name = |name: &str| {
        let containers = containers?;
        containers
            .started
            .get(name)
            .map(|s| s.id.clone())
            .or_else(|| {
                containers
                    .started
                    .iter()
                    .find(|(_, s)| s.id == name || s.docker_name == name)
                    .map(|(_, s)| s.id.clone())
            })
            .map(|id| (id, containers.docker.clone()))
    };
    let mut watched = None;
    if let Some(name) = &spec.container {
        let Some((id, docker)) = by_name(name) else {
            let names: Vec<&str> = containers
                .into_iter()
                .flat_map(|c| c.started.keys().map(String::as_str))
                .collect();
            let hint = match crate::diag::did_you_mean(name, &names) {
                Some(d) => d,
                None if names.is_empty() => {
                    "start it in an earlier step of this job with `uses: start-container`".into()
                }
                None => format!(
                    "this job started {}",
                    crate::diag::join_quoted(&names, "and")
                ),
            };
            return Err(format!(
                "no container `{name}` was started in this job (help: {hint})"
            ));
        };
        watched = Some(Watched {
            name: name.clone(),
            id,
            docker,
        });
    }
    let host = match &spec.probe {
        Probe::Http(h) => h.url.host().map(str::to_string),
        Probe::Tcp { address } => split_host_port(address).map(|(h, _)| h.to_string()),
        _ => None,
    };
    if let Some(host) = host
        && let Some((id, docker)) = by_name(&host)
    {
        let ip = docker
            .container_ip(&id)
            .await
            .map_err(|e| format!("could not find the address of container `{host}`: {e}"))?
            .ok_or_else(|| {
                format!("container `{host}` has no address the host can reach (help: publish its port with `ports` and use `localhost`)")
            })?;
        match &mut spec.probe {
            Probe::Http(h) => h.url = replace_host(&h.url, &ip)?,
            Probe::Tcp { address } => {
                let port = split_host_port(address).map(|(_, p)| p).unwrap_or_default();
                *address = format!("{ip}:{port}");
            }
            _ => {}
        }
        if watched.is_none() {
            watched = Some(Watched {
                name: host,
                id,
                docker,
            });
        }
    }
    Ok(watched)
}

fn replace_host(url: &hyper::Uri, ip: &str) -> Result<hyper::Uri, String> {
    let authority = match url.port_u16() {
        Some(port) => format!("{ip}:{port}"),
        None => ip.to_string(),
    };
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    format!("http://{authority}{path}")
        .parse()
        .map_err(|_| format!("could not address `{url}` through `{ip}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ports_split_and_hosts_are_replaced() {
        assert_eq!(split_host_port("server:30000"), Some(("server", 30000)));
        assert_eq!(split_host_port("[::1]:80"), Some(("::1", 80)));
        assert_eq!(split_host_port(":80"), None);
        let url: hyper::Uri = "http://server:30000/health?x=1".parse().unwrap();
        assert_eq!(
            replace_host(&url, "172.17.0.2").unwrap().to_string(),
            "http://172.17.0.2:30000/health?x=1"
        );
    }
}
