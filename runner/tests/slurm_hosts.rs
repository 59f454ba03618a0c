//! `gpuflow hosts` on a Slurm host (docs/slurm.md), against the real test cluster that
//! `scripts/slurm-cluster.sh up` starts (`make test` does): three nodes `gpu1`..`gpu3` of eight
//! stand-in GPUs in partition `gpu`. The cluster is shared with other tests, so a test looks
//! only at what it knows is there (the nodes) and at the job it submitted itself.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::{Workspace, gpuflow};

/// A workspace whose `gpuflow.toml` names the test cluster as host `cluster`.
fn cluster_workspace() -> (Workspace, Workspace) {
    crate::support::slurm::require_cluster();
    let (ws, shared) = (Workspace::new(), Workspace::empty());
    ws.write(
        "gpuflow.toml",
        &format!(
            "[hosts.cluster]\nlabels = [\"blackwell\"]\n\n[hosts.cluster.slurm]\nshared-dir = \"{}\"\npartition = \"gpu\"\n",
            shared.path().display()
        ),
    );
    (ws, shared)
}

/// A job held in the queue (it takes no GPU while held), cancelled when dropped.
struct HeldJob(u64);

impl HeldJob {
    fn submit(name: &str, dir: &Path) -> Self {
        let out = Command::new("sbatch")
            .args([
                "--parsable",
                "--hold",
                "--partition=gpu",
                "--gres=gpu:2",
                "--output=/dev/null",
                &format!("--job-name={name}"),
                &format!("--chdir={}", dir.display()),
                "--wrap=true",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sbatch: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        Self(text.trim().split(';').next().unwrap().parse().unwrap())
    }
}

impl Drop for HeldJob {
    fn drop(&mut self) {
        let _ = Command::new("scancel").arg(self.0.to_string()).status();
    }
}

#[test]
fn hosts_shows_the_clusters_partition_nodes_and_queue() {
    let (ws, _shared) = cluster_workspace();
    let name = format!("gpuflow-hosts-test-{}", std::process::id());
    let held = HeldJob::submit(&name, ws.path());
    let out = gpuflow().current_dir(ws.path()).args(["hosts"]).success();
    let text = out.stdout;
    let row = |first: &str| -> Vec<String> {
        text.lines()
            .map(str::split_whitespace)
            .map(|w| w.map(String::from).collect::<Vec<_>>())
            .find(|w| w.first().map(String::as_str) == Some(first))
            .unwrap_or_else(|| panic!("no line starting with `{first}`:\n{text}"))
    };
    // The host's line: where its jobs go and the GPUs of its partition.
    assert_eq!(
        row("cluster")[..5],
        ["cluster", "slurm", "(partition", "gpu)", "blackwell"],
        "{text}"
    );
    assert!(
        text.contains("nodes of partition `gpu` (3 nodes, 24 GPUs"),
        "{text}"
    );
    assert_eq!(row("gpu")[..2], ["gpu", "3"], "{text}");
    for node in ["gpu1", "gpu2", "gpu3"] {
        let cells = row(node);
        assert_eq!(cells[2..4], ["gpu", "gpu:8"], "{text}");
    }
    // The job it holds in the queue, with Slurm's reason.
    let me = Command::new("id").arg("-un").output().unwrap().stdout;
    let me = String::from_utf8_lossy(&me).trim().to_string();
    let job = row(&held.0.to_string());
    assert_eq!(
        job[1..],
        [
            name,
            me,
            "PENDING".into(),
            "gpu:2".into(),
            "JobHeldUser".into()
        ],
        "{text}"
    );
}

#[test]
fn hosts_json_describes_the_cluster() {
    let (ws, _shared) = cluster_workspace();
    let name = format!("gpuflow-hosts-json-{}", std::process::id());
    let held = HeldJob::submit(&name, ws.path());
    let out = gpuflow()
        .current_dir(ws.path())
        .args(["hosts", "--json"])
        .success();
    let json: Value = serde_json::from_str(&out.stdout).unwrap();
    let cluster = &json["hosts"][1];
    assert_eq!(cluster["name"], "cluster");
    assert_eq!(cluster["endpoint"], Value::Null);
    let slurm = &cluster["slurm"];
    assert_eq!(slurm["partition"], "gpu");
    assert_eq!(slurm["error"], Value::Null, "{slurm}");
    let gpu = slurm["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "gpu")
        .unwrap();
    assert_eq!(
        (gpu["nodes"].as_u64(), gpu["gpus"].as_u64()),
        (Some(3), Some(24))
    );
    let mut nodes: Vec<(String, String, u64)> = slurm["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["gres"].as_str().unwrap().to_string(),
                n["gpus"].as_u64().unwrap(),
            )
        })
        .collect();
    nodes.sort();
    assert_eq!(
        nodes,
        ["gpu1", "gpu2", "gpu3"].map(|n| (n.to_string(), "gpu:8".to_string(), 8))
    );
    let job = slurm["queue"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == held.0)
        .unwrap_or_else(|| panic!("job {} not in the queue: {slurm}", held.0));
    assert_eq!(job["name"], name);
    assert_eq!(job["state"], "PENDING");
    assert_eq!(job["reason"], "JobHeldUser");
    // Jobs that ended are not in the queue.
    assert!(
        slurm["queue"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["state"] != "COMPLETED" && j["state"] != "CANCELLED"),
        "{slurm}"
    );
}

#[test]
fn a_cluster_without_slurms_commands_is_shown_with_the_reason() {
    let (ws, _shared) = cluster_workspace();
    let empty = Workspace::empty();
    let out = gpuflow()
        .current_dir(ws.path())
        .env("PATH", empty.path())
        .args(["hosts"])
        .success();
    assert!(
        out.stdout
            .contains("  not described: `sinfo` is not on PATH"),
        "{}",
        out.stdout
    );
    let out = gpuflow()
        .current_dir(ws.path())
        .env("PATH", empty.path())
        .args(["hosts", "--json"])
        .success();
    let json: Value = serde_json::from_str(&out.stdout).unwrap();
    let error = json["hosts"][1]["slurm"]["error"].as_str().unwrap();
    assert!(error.contains("slurm-client"), "{error}");
}

#[test]
fn a_cluster_whose_controller_does_not_answer_is_shown_with_the_reason() {
    let (ws, _shared) = cluster_workspace();
    // A controller where nothing listens: Slurm's commands answer `--json` with exit status 0,
    // no nodes and an error, which must not read as an empty cluster.
    ws.write(
        "gone/slurm.conf",
        "ClusterName=gone\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\nMessageTimeout=2\nAuthType=auth/munge\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n",
    );
    let out = gpuflow()
        .current_dir(ws.path())
        .env("SLURM_CONF", ws.path().join("gone/slurm.conf"))
        .args(["hosts"])
        .success();
    assert!(
        out.stdout
            .contains("not described: `sinfo --json` got no answer from the Slurm controller"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("scontrol ping"), "{}", out.stdout);
}
