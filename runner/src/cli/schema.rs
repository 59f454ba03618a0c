//! `gpuflow schema`: prints or writes the JSON Schemas of workflow and action files.

use std::path::PathBuf;

use crate::diag::ExitCode;
use crate::schema::{
    ACTION_SCHEMA_FILE, WORKFLOW_SCHEMA_FILE, action_schema, to_file_text, workflow_schema,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which schema to print.
    #[arg(value_enum, default_value_t = Which::Workflow)]
    pub which: Which,

    /// Write both schemas into this folder instead (as `make schema` does for `schemas/`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Which {
    Workflow,
    Action,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
        for (name, schema) in [
            (WORKFLOW_SCHEMA_FILE, workflow_schema()),
            (ACTION_SCHEMA_FILE, action_schema()),
        ] {
            super::generated_file::write_if_changed(&dir.join(name), &to_file_text(&schema))?;
        }
        return Ok(ExitCode::Success);
    }
    let schema = match args.which {
        Which::Workflow => workflow_schema(),
        Which::Action => action_schema(),
    };
    print!("{}", to_file_text(&schema));
    Ok(ExitCode::Success)
}
