//! A run on a cluster outlives the process that submitted it: its jobs finish and write their
//! ends whether or not anyone follows them. The run's log folder remembers where its folder on
//! the cluster is, so `gpuflow runs` and `gpuflow logs` can complete the record of a run whose
//! coordinator died.

use std::path::{Path, PathBuf};

/// The file in a run's log folder that names its folder on the cluster.
const POINTER: &str = "slurm-run";

/// Writes the pointer; a run that cannot write it still runs (its record just cannot be
/// completed later).
pub fn remember(log_dir: &Path, bundle_dir: &Path) {
    if let Err(e) = std::fs::write(log_dir.join(POINTER), bundle_dir.display().to_string()) {
        tracing::warn!("could not write {POINTER} in {}: {e}", log_dir.display());
    }
}

/// The run's folder on the cluster, if the run went to one.
pub fn bundle_of(log_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(log_dir.join(POINTER)).ok()?;
    Some(PathBuf::from(text.trim()))
}
