//! A server's key: everything that shapes the server a `start-container` step starts (the
//! image's id, not its tag; command; entrypoint; env; mounts; ports; GPUs; memory, IPC and
//! limits), so two steps with equal keys would start the same server and one can serve both.
//! The container's own name and the job's network are not part of it.

use sha2::{Digest, Sha256};

use crate::backend::{BackendError, ContainerSpec, DockerBackend};

/// The key of the server `spec` starts on `docker`.
pub async fn server_key(
    docker: &DockerBackend,
    spec: &ContainerSpec,
) -> Result<String, BackendError> {
    let image_id = match &spec.image_id {
        Some(id) => id.clone(),
        None => docker.image_id(&spec.image).await?,
    };
    Ok(key_of(&image_id, spec))
}

/// The key of `spec` with its image resolved to `image_id`: a digest of the spec without its
/// name and network aliases. The spec's `Debug` text is what is digested: it names every
/// field, so a field added to the spec is in the key without anyone remembering to add it
/// (a key is only compared within one gpuflow version's runs).
pub fn key_of(image_id: &str, spec: &ContainerSpec) -> String {
    let mut shaping = spec.clone();
    shaping.image = image_id.to_string();
    shaping.image_id = None;
    shaping.name = None;
    shaping.network_aliases.clear();
    // How the image is pulled does not shape the server.
    shaping.registry_auth = None;
    let digest = Sha256::digest(format!("{shaping:?}").as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::GpuRequest;

    fn spec(command: &str) -> ContainerSpec {
        let mut spec = ContainerSpec::new("gpuflow-sim:test");
        spec.command = Some(command.split(' ').map(String::from).collect());
        spec
    }

    #[test]
    fn what_shapes_the_server_is_in_the_key_and_its_name_is_not() {
        let base = key_of("sha256:1", &spec("serve --cuda-graph-max-bs 128"));
        assert_eq!(base.len(), 16);
        assert_eq!(
            base,
            key_of("sha256:1", &spec("serve --cuda-graph-max-bs 128"))
        );
        let mut named = spec("serve --cuda-graph-max-bs 128");
        named.name = Some("gpuflow-run-bench-2-server".into());
        named.network_aliases = vec!["server".into()];
        assert_eq!(
            base,
            key_of("sha256:1", &named),
            "the name is not the server"
        );
        assert_ne!(
            base,
            key_of("sha256:2", &spec("serve --cuda-graph-max-bs 128")),
            "a rebuilt image"
        );
        assert_ne!(
            base,
            key_of("sha256:1", &spec("serve --cuda-graph-max-bs 512")),
            "a flag"
        );
        let mut gpus = spec("serve --cuda-graph-max-bs 128");
        gpus.gpus = GpuRequest::Count(2);
        assert_ne!(base, key_of("sha256:1", &gpus), "GPUs");
        let mut env = spec("serve --cuda-graph-max-bs 128");
        env.env.insert("NCCL_ALGO".into(), "Ring".into());
        assert_ne!(base, key_of("sha256:1", &env), "env");
    }
}
