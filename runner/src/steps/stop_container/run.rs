//! Stopping a container the job started: SIGTERM, then SIGKILL after `timeout`; removed
//! unless `remove: false`.

use std::time::Duration;

use indexmap::IndexMap;

use crate::steps::{Outputs, StepCall, StepError};

/// Runs the step; returns `exit-code`.
pub async fn run(mut call: StepCall<'_, '_>) -> Result<Outputs, StepError> {
    let container = call
        .text("container")
        .ok_or("the input `container` is required")?;
    let timeout = call.text("timeout").unwrap_or_else(|| "10s".into());
    let grace = humantime::parse_duration(&timeout)
        .map_err(|_| format!("`timeout` is `{timeout}`, not a duration such as `30s`"))?;
    let remove = call.text("remove").is_none_or(|r| r != "false");
    let (host, job) = (call.host, call.job);
    let code = call
        .engine()?
        .stop(
            host,
            job,
            &container,
            grace.max(Duration::from_secs(0)),
            remove,
        )
        .await
        .map_err(|e| {
            let mut m = format!("could not stop container `{container}`: {e}");
            if let Some(h) = e.hint() {
                m.push_str(&format!(" (help: {h})"));
            }
            m
        })?;
    Ok(IndexMap::from([(
        "exit-code".to_string(),
        code.to_string(),
    )]))
}
