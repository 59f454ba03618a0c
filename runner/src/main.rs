use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = gpuflow::cli::Cli::parse();
    gpuflow::cli::run(cli).into()
}
