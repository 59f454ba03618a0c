//! The test kit: what the feature files set up, written once. A feature file says what it
//! checks; how a workspace, a `gpuflow` process, the Docker engine, an image, the simulator or
//! an engine run is made lives here.
//!
//! - [`bench`]: the load generator with a step's inputs, run through the library.
//! - [`workspace`]: a temporary workspace with files, optionally a git repository with commits.
//! - [`command`]: `gpuflow` as a user runs it, in the style of casey/just's `Test` builder.
//! - [`docker`]: the engine, or a loud skip; a labelled run whose containers are always removed.
//! - [`images`]: the test images `make test-images` builds, checked once with a clear message.
//! - [`sim`]: the simulator as a process, as a container of a workflow, or in this process.
//! - [`engine`]: a workflow run through the engine's API, on the host or on Docker, and [`Ran`].
//! - [`registry`]: a real image registry (Debian's `docker-registry`) on 127.0.0.1, plain or
//!   with basic auth; images pushed to it; killed, paused or restarted under a pull.
//! - [`git`], [`ports`]: a git helper with a throw-away identity; a free port of 127.0.0.1.
//! - [`process`]: a spawned `gpuflow` a test talks to while it runs, killed when dropped;
//!   [`wait_until`] and [`poll_until`], the one polling loop with a deadline.

pub(crate) mod bench;
pub(crate) mod browser;
pub(crate) mod command;
pub(crate) mod doc_blocks;
pub(crate) mod docker;
pub(crate) mod engine;
pub(crate) mod git;
pub(crate) mod images;
pub(crate) mod ports;
pub(crate) mod process;
pub(crate) mod registry;
pub(crate) mod sim;
pub(crate) mod slurm;
pub(crate) mod workspace;

use std::path::{Path, PathBuf};

pub(crate) use command::{Output, gpuflow};
pub(crate) use engine::Ran;
pub(crate) use git::git;
pub(crate) use ports::free_port;
pub(crate) use process::{Running, Signal, poll_until, wait_until};
pub(crate) use workspace::Workspace;

/// The repository root: tests run in `runner/`, the shipped files (`workflows/`, `actions/`,
/// `schemas/`, `docs/`) live above it.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A file of this checkout (relative to the repository root), as text.
pub(crate) fn shipped(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path))
        .unwrap_or_else(|e| panic!("reading `{path}` of the checkout: {e}"))
}

/// Bytes a process printed, as text (invalid UTF-8 shown, not fatal).
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The peak resident memory of this process so far, in KiB (`VmHWM`). Per process: meaningful
/// under nextest, which runs each test in a process of its own (`make test`).
pub(crate) fn peak_rss_kib() -> u64 {
    peak_rss_kib_of("self").unwrap()
}

/// The peak resident memory of process `pid` (a number, or `self`) so far, in KiB; `None`
/// once it is gone.
pub(crate) fn peak_rss_kib_of(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
