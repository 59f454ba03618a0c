//! Reading a container's log back from the engine, following it until the container stops.
//! Nothing is kept: lines go to the sink one by one (see `log_line.rs` for the bound).
//!
//! This reads what the engine's log driver stored, so it works for any container, running or
//! stopped, including ones another runner started. But a driver that rotates (`json-file`
//! with `max-size`, Debian's default) drops what was not read in time, and Docker 20.10 was
//! seen losing lines at a rotation while following. For the whole output of a container
//! gpuflow starts itself, attach before starting it (`attach.rs`).

use bollard::query_parameters::LogsOptionsBuilder;
use futures_util::StreamExt;

use super::log_line::{FrameLines, LineSink};
use super::{BackendError, DockerBackend};

/// Where in the log to start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogStart {
    /// From the container's first line.
    #[default]
    Beginning,
    /// The last `n` lines, then what follows.
    Tail(u64),
}

impl DockerBackend {
    /// Streams the container's stdout and stderr to `sink` until the container stops (or, for
    /// a stopped container, until its log has been read).
    pub async fn follow_logs(
        &self,
        container: &str,
        start: LogStart,
        mut sink: impl LineSink,
    ) -> Result<(), BackendError> {
        let tail = match start {
            LogStart::Beginning => "all".to_string(),
            LogStart::Tail(n) => n.to_string(),
        };
        let options = LogsOptionsBuilder::new()
            .follow(true)
            .stdout(true)
            .stderr(true)
            .tail(&tail)
            .build();
        let mut stream = self.api("logs", container).logs(container, Some(options));
        let mut lines = FrameLines::new();
        while let Some(frame) = stream.next().await {
            let frame =
                frame.map_err(|e| self.not_found_or(container, "follow a container's log", &e))?;
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
