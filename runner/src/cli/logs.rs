//! `gpuflow logs RUN [-f]`: what a triggered run printed (its `gpuflow run` output, stored as
//! `output.log` beside its other logs); `-f` follows it until the run ends, waiting first
//! when it is still queued. Exit codes: 0, 2 (no such run).

use std::io::{Read, Seek, SeekFrom, Write};
use std::time::Duration;

use crate::diag::{ExitCode, RenderOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run's id (or the start of it).
    pub run: String,

    /// Keep printing as the run goes, until it ends.
    #[arg(short, long)]
    pub follow: bool,
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let queue = match super::runs::open_queue(render_opts) {
        Ok(q) => q,
        Err(code) => return Ok(code),
    };
    let run = match super::runs::find_run(&queue, &args.run, render_opts) {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let path = run.log_dir.join("output.log");
    let mut out = std::io::stdout().lock();
    let mut offset = 0u64;
    loop {
        // Read the state before the file: a run that ended has written all it will.
        let done = queue.get(&run.id)?.is_none_or(|r| r.state.is_final());
        if let Ok(mut file) = std::fs::File::open(&path) {
            file.seek(SeekFrom::Start(offset))?;
            let mut chunk = Vec::new();
            file.read_to_end(&mut chunk)?;
            offset += chunk.len() as u64;
            out.write_all(&chunk)?;
            out.flush()?;
        }
        if done || !args.follow {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if !args.follow && offset == 0 {
        let state = queue.get(&run.id)?.map_or(run.state, |r| r.state);
        eprintln!(
            "run {} is {} and has printed nothing yet",
            run.id,
            state.as_str()
        );
    }
    Ok(ExitCode::Success)
}
