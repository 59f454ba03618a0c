//! Images on the engine: pulling one that is missing, and saying why a pull failed.
//!
//! A pull of gpuflow's own test images (`gpuflow-*`) can only fail (they are in no registry),
//! so their error points at `make test-images` rather than at registry access.

use bollard::query_parameters::CreateImageOptionsBuilder;
use futures_util::StreamExt;

use super::error::describe;
use super::{BackendError, DockerBackend};

impl DockerBackend {
    /// Whether the engine has `image` locally.
    pub async fn has_image(&self, image: &str) -> Result<bool, BackendError> {
        match self.api("inspect_image", image).inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(e) if super::error::status_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(self.engine_error("inspect an image", &e)),
        }
    }

    /// The id (`sha256:…`) of the local image `image` names: what a tag points at now, so a
    /// server key changes when the image is rebuilt under the same tag.
    pub async fn image_id(&self, image: &str) -> Result<String, BackendError> {
        let inspected = self
            .api("inspect_image", image)
            .inspect_image(image)
            .await
            .map_err(|e| self.engine_error("inspect an image", &e))?;
        Ok(inspected.id.unwrap_or_else(|| image.to_string()))
    }

    /// The id (`sha256:…`) of the local image `image` and its entrypoint (empty for none): what
    /// a container of it runs before its command.
    pub async fn image_entrypoint(
        &self,
        image: &str,
    ) -> Result<(String, Vec<String>), BackendError> {
        let inspected = self
            .api("inspect_image", image)
            .inspect_image(image)
            .await
            .map_err(|e| self.engine_error("inspect an image", &e))?;
        let entrypoint = inspected
            .config
            .and_then(|c| c.entrypoint)
            .unwrap_or_default();
        Ok((
            inspected.id.unwrap_or_else(|| image.to_string()),
            entrypoint,
        ))
    }

    /// Pulls `image` from its registry; the engine's progress is not shown.
    pub async fn pull_image(&self, image: &str) -> Result<(), BackendError> {
        let (repository, tag) = split_reference(image);
        let options = CreateImageOptionsBuilder::new()
            .from_image(repository)
            .tag(tag)
            .build();
        let mut progress = self
            .api("create_image", image)
            .create_image(Some(options), None, None);
        while let Some(item) = progress.next().await {
            let failure = match item {
                Ok(info) => info
                    .error_detail
                    .and_then(|d| d.message)
                    .filter(|m| !m.is_empty()),
                Err(e) => Some(describe(&e)),
            };
            if let Some(reason) = failure {
                return Err(BackendError::ImagePullFailed {
                    image: image.to_string(),
                    endpoint: self.endpoint_text(),
                    reason,
                });
            }
        }
        Ok(())
    }
}

/// `registry:5000/name:tag` → (`registry:5000/name`, `tag`); no tag means `latest` (without a
/// tag the engine would pull every tag); a digest is passed as the tag, as the API expects.
fn split_reference(image: &str) -> (&str, &str) {
    if let Some((repository, digest)) = image.split_once('@') {
        return (repository, digest);
    }
    let name_start = image.rfind('/').map_or(0, |i| i + 1);
    match image[name_start..].rfind(':') {
        Some(colon) => (
            &image[..name_start + colon],
            &image[name_start + colon + 1..],
        ),
        None => (image, "latest"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("busybox", "busybox", "latest" ; "no tag")]
    #[test_case("gpuflow-base:test", "gpuflow-base", "test" ; "tag")]
    #[test_case("localhost:5000/team/sglang", "localhost:5000/team/sglang", "latest" ; "registry port is not a tag")]
    #[test_case("localhost:5000/sglang:v0.5", "localhost:5000/sglang", "v0.5" ; "registry port and tag")]
    #[test_case("sglang@sha256:abcd", "sglang", "sha256:abcd" ; "digest")]
    fn splits(image: &str, repository: &str, tag: &str) {
        assert_eq!(split_reference(image), (repository, tag));
    }
}
