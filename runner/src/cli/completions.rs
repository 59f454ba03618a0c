use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;
use crate::diag::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to generate completions for.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "gpuflow", &mut std::io::stdout());
    Ok(ExitCode::Success)
}
