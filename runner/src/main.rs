use clap::Parser;

fn main() -> std::process::ExitCode {
    gpuflow::cli::end_quietly_when_stdout_closes();
    let cli = gpuflow::cli::Cli::parse();
    gpuflow::cli::run(cli).into()
}
