//! `gpuflow docs [STEP]`: a built-in step's inputs, outputs and example in the terminal, or
//! every page written into a folder (`make docs` → `docs/steps/`).

use std::path::PathBuf;

use crate::diag::{ExitCode, did_you_mean};
use crate::steps::{builtin, builtins, docs};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The built-in step to show (`wait-for-health`); without one, all are listed.
    pub step: Option<String>,

    /// Write every page (and an index) into this folder instead.
    #[arg(long, value_name = "DIR", conflicts_with = "step")]
    pub out: Option<PathBuf>,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
        for b in builtins() {
            super::generated_file::write_if_changed(
                &dir.join(format!("{}.md", b.name)),
                &docs::page(b),
            )?;
        }
        super::generated_file::write_if_changed(&dir.join("README.md"), &docs::index())?;
        return Ok(ExitCode::Success);
    }
    match &args.step {
        Some(name) => match builtin(name) {
            Some(b) => {
                print!("{}", docs::page(b));
                Ok(ExitCode::Success)
            }
            None => {
                let names: Vec<&str> = builtins().map(|b| b.name).collect();
                eprintln!("error: there is no built-in step `{name}`");
                if let Some(hint) = did_you_mean(name, &names) {
                    eprintln!("  = help: {hint}");
                }
                eprintln!("  = note: built-ins: {}", names.join(", "));
                Ok(ExitCode::Usage)
            }
        },
        None => {
            let width = builtins().map(|b| b.name.len()).max().unwrap_or(0);
            for b in builtins() {
                println!("{:width$}  {}", b.name, b.summary);
            }
            println!("\n`gpuflow docs STEP` shows a step's inputs, outputs and an example.");
            Ok(ExitCode::Success)
        }
    }
}
