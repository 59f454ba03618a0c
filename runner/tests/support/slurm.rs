//! The test Slurm cluster (`scripts/slurm-cluster.sh`, which `make test` starts as root): a
//! test that needs it fails, never skips, when it is not running.

use std::path::Path;
use std::process::Command;

/// Fails the test, saying how to start the cluster, unless it answers with every node usable.
pub(crate) fn require_cluster() {
    let status = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/slurm-cluster.sh"))
        .arg("check")
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the test Slurm cluster is not running: start it with `sudo bash scripts/slurm-cluster.sh up` (`make test` does)"
    );
}
