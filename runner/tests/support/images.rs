//! The test images `make test-images` builds into the local engine. A test names the images
//! it needs; a missing one fails it with the command that builds them, before anything starts.

use gpuflow::backend::DockerBackend;

use super::docker::connect_or_skip;

/// busybox: a shell, `sleep`, `wget`.
pub(crate) const BASE: &str = "gpuflow-base:test";
/// The simulated OpenAI-compatible server (`gpuflow-sim` on the `PATH`), busybox beside it.
pub(crate) const SIM: &str = "gpuflow-sim:test";
/// Python 3 with the write-ups' benchmark script (`/tmp/benchmark_eagle3.py`).
pub(crate) const PYTHON: &str = "gpuflow-python:test";
/// llama.cpp's real `llama-server`.
pub(crate) const LLAMACPP: &str = "gpuflow-llamacpp:test";
/// The base plus four layers of 288 MiB of random bytes: 1152 MiB a gzip cannot shrink, for
/// pulls that take a while (`images/big/build.sh`).
pub(crate) const BIG: &str = "gpuflow-big:test";
/// Python 3.11 with a `vllm` command running real vLLM from a mounted `site-packages`.
pub(crate) const VLLM: &str = "gpuflow-vllm:test";

/// The engine, every one of `images` present in it; `None` only when Docker tests are skipped
/// knowingly.
pub(crate) async fn docker_with(images: &[&str]) -> Option<DockerBackend> {
    let docker = connect_or_skip().await?;
    for image in images {
        assert!(
            docker.has_image(image).await.unwrap(),
            "the test image `{image}` is missing: run `make test-images`"
        );
    }
    Some(docker)
}
