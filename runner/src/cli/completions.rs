use clap_complete::Shell;

use crate::diag::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to generate completions for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `cli` is gpuflow's whole command line, passed in because it contains this command.
pub fn run(args: &Args, mut cli: clap::Command) -> anyhow::Result<ExitCode> {
    clap_complete::generate(args.shell, &mut cli, "gpuflow", &mut std::io::stdout());
    Ok(ExitCode::Success)
}
