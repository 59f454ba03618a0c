//! `make gpu-check` (scripts/gpu-check.sh, docs/gpus.md "Checking a new node"): its no-GPU
//! branch, run as a smoke test on the stand-in inventory with the debug binaries. The GPU
//! branch needs a GPU machine and is not run here.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Every check the script reports, in its order.
const CHECKS: [&str; 6] = [
    "hosts",
    "leases",
    "telemetry",
    "before-timing",
    "gpu-busy",
    "docker-gpu",
];

#[test]
fn gpu_check_without_a_gpu_runs_the_stand_in_checks_and_skips_the_rest() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let started = Instant::now();
    let run = Command::new("bash")
        .arg(repo.join("scripts/gpu-check.sh"))
        .arg(&out)
        .current_dir(repo)
        .env("GPUFLOW_BIN", env!("CARGO_BIN_EXE_gpuflow"))
        .env("GPUFLOW_SIM_BIN", env!("CARGO_BIN_EXE_gpuflow-sim"))
        // The stand-in branch even on a machine with a GPU.
        .env("GPU_CHECK_NO_GPU", "1")
        .env_remove("GPUFLOW_GPU_INVENTORY")
        .env_remove("GPUFLOW_LEASE_DIR")
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{}\n{stderr}", run.status);
    assert!(stderr.contains("NO GPU"), "{stderr}");
    assert!(
        took < Duration::from_secs(300),
        "took {took:?}, over the 5 minutes"
    );

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["gpu"], false, "{summary:#}");
    assert!(
        summary["no_gpu_reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{summary:#}"
    );
    let checks = summary["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, CHECKS, "{summary:#}");
    let status = |name: &str| {
        let c = checks.iter().find(|c| c["name"] == name).unwrap();
        assert!(
            c["why"].as_str().is_some_and(|w| !w.is_empty()),
            "{name} says no why: {c:#}"
        );
        assert!(c["values"].is_object(), "{name}: {c:#}");
        c["status"].as_str().unwrap().to_string()
    };

    // What the stand-in inventory can show passes.
    assert_eq!(status("hosts"), "pass", "{summary:#}");
    assert_eq!(status("leases"), "pass", "{summary:#}");
    let leases = checks.iter().find(|c| c["name"] == "leases").unwrap();
    let uuid = leases["values"]["leased_uuid"].as_str().unwrap();
    assert!(uuid.starts_with("GPU-5a1d0000-"), "{leases:#}");
    assert_eq!(leases["values"]["cuda_visible_devices_b"], uuid);
    // The before-timing checks need the benchmark step, which needs a Docker engine (even for
    // a host target): judged where there is one, skipped with that reason where not.
    let before = status("before-timing");
    assert!(before == "pass" || before == "skipped", "{summary:#}");
    // GPU-only checks are skipped, saying why.
    for name in ["telemetry", "gpu-busy", "docker-gpu"] {
        assert_eq!(status(name), "skipped", "{summary:#}");
    }
    assert_eq!(summary["failed"], serde_json::json!([]));

    // Every command's log is there.
    for log in [
        "hosts.json",
        "lease-a.log",
        "lease-b.log",
        "bench.log",
        "sim.log",
    ] {
        assert!(out.join(log).exists(), "no {log} in {}", out.display());
    }
}
