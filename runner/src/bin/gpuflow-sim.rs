//! The `gpuflow-sim` binary: parse the flags, run the simulated server (gpuflow::sim).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let config = gpuflow::sim::SimConfig::parse();
    std::process::ExitCode::from(gpuflow::sim::run(config))
}
