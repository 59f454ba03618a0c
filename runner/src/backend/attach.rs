//! A container's whole output, read live: attached before the container starts, as
//! `docker run` does, so not one line is missed.
//!
//! Reading the log back (`logs.rs`) goes through the engine's log driver, which may rotate
//! (Debian's default `json-file` with `max-size`) and drop what was not read in time; Docker
//! 20.10 was seen losing lines at a rotation even while following. The attached stream does
//! not touch the log files. A slow sink slows the container's output rather than growing a
//! buffer here.

use std::fmt;
use std::pin::Pin;

use bollard::container::LogOutput;
use bollard::query_parameters::AttachContainerOptionsBuilder;
use futures_util::{Stream, StreamExt};

use super::error::describe;
use super::log_line::{FrameLines, LineSink};
use super::{BackendError, Container, ContainerSpec, DockerBackend, RunLabels};

type Frames = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// The live stdout and stderr of a container started by
/// [`DockerBackend::start_container_attached`].
pub struct AttachedOutput {
    frames: Frames,
    endpoint: String,
}

impl fmt::Debug for AttachedOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttachedOutput")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl AttachedOutput {
    /// Hands every line to `sink` until the container's output closes (it exited or was
    /// removed).
    pub async fn forward(mut self, mut sink: impl LineSink) -> Result<(), BackendError> {
        let mut lines = FrameLines::new();
        while let Some(frame) = self.frames.next().await {
            let frame = frame.map_err(|e| BackendError::Engine {
                operation: "read a container's output".into(),
                endpoint: self.endpoint.clone(),
                message: describe(&e),
            })?;
            for line in lines.push(&frame) {
                sink.line(line).await;
            }
        }
        for line in lines.finish() {
            sink.line(line).await;
        }
        Ok(())
    }
}

impl DockerBackend {
    /// Like [`DockerBackend::start_container`], with the container's output attached before
    /// it starts. The output must be read ([`AttachedOutput::forward`]); dropping it detaches.
    pub async fn start_container_attached(
        &self,
        run: &RunLabels,
        spec: &ContainerSpec,
    ) -> Result<(Container, AttachedOutput), BackendError> {
        let container = self.create_container(run, spec).await?;
        let options = AttachContainerOptionsBuilder::new()
            .stream(true)
            .stdout(true)
            .stderr(true)
            .logs(false)
            .build();
        let attached = match self
            .api("attach_container", container.display_name())
            .attach_container(&container.id, Some(options))
            .await
        {
            Ok(attached) => attached,
            Err(e) => {
                // As in `start`: the attach failure is the news; `remove_run` retries removal.
                let _ = self.remove_container(&container.id).await;
                return Err(self.engine_error("attach to a container", &e));
            }
        };
        self.start(&container).await?;
        Ok((
            container,
            AttachedOutput {
                frames: attached.output,
                endpoint: self.endpoint_text(),
            },
        ))
    }
}
