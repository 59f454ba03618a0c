use crate::diag::{ExitCode, RenderOptions};

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _render: RenderOptions) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`gpuflow plan` is being written")
}
