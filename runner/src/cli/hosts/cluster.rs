//! A Slurm host in `gpuflow hosts`: the cluster as Slurm describes it (its partitions, nodes
//! with their GPUs, what is queued and running), or why it could not be asked.

use std::collections::HashMap;

use crate::hosts::{Host, HostConfig, SlurmSettings};
use crate::slurm::client::JobInfo;
use crate::slurm::overview::{self, Overview};
use crate::slurm::state::Phase;

/// The cluster of each Slurm host, by host name, or why it could not be described.
pub type Clusters = HashMap<String, Result<Overview, String>>;

/// At most this many nodes and jobs are listed in the text; `sinfo` and `squeue` list all.
const SHOWN: usize = 30;

/// Asks Slurm once for all Slurm hosts: its client commands reach one cluster, the one this
/// machine's Slurm configuration names.
pub async fn look(config: &HostConfig) -> Clusters {
    let names: Vec<&str> = config
        .hosts()
        .iter()
        .filter(|h| h.slurm.is_some())
        .map(|h| h.name.as_str())
        .collect();
    if names.is_empty() {
        return Clusters::new();
    }
    let looked = overview::look().await;
    names
        .into_iter()
        .map(|n| (n.to_string(), looked.clone()))
        .collect()
}

/// The ENDPOINT cell: where its jobs go.
pub fn endpoint_cell(settings: &SlurmSettings) -> String {
    match &settings.partition {
        Some(p) => format!("slurm (partition {p})"),
        None => "slurm (default partition)".into(),
    }
}

/// The GPUS cell: the GPUs of the nodes its jobs may go to, `-` when Slurm did not say.
pub fn gpus_cell(host: &Host, settings: &SlurmSettings, clusters: &Clusters) -> String {
    match clusters.get(&host.name) {
        Some(Ok(overview)) => {
            let nodes = overview.nodes_in(settings.partition.as_deref());
            let (gpus, _) = overview::gpus_of(&nodes);
            format!(
                "{gpus} on {} node{}",
                nodes.len(),
                if nodes.len() == 1 { "" } else { "s" }
            )
        }
        _ => "-".into(),
    }
}

/// The host's section under the table.
pub fn render(
    host: &Host,
    settings: &SlurmSettings,
    looked: Option<&Result<Overview, String>>,
) -> String {
    let partition = settings.partition.as_deref();
    let goes_to = match partition {
        Some(p) => format!("jobs go to partition `{p}`"),
        None => "jobs go to Slurm's default partition".into(),
    };
    let mut out = format!(
        "\n{}: a Slurm cluster; {goes_to}, their files through `{}`\n",
        host.name,
        settings.shared_dir.display()
    );
    let overview = match looked {
        Some(Ok(overview)) => overview,
        Some(Err(why)) => {
            out.push_str(&format!("  not described: {why}\n"));
            return out;
        }
        None => return out,
    };
    let partitions: Vec<[String; 4]> = overview
        .partitions()
        .into_iter()
        .map(|p| {
            [
                p.name,
                p.nodes.to_string(),
                p.gpus.to_string(),
                p.gpus_used.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["PARTITION", "NODES", "GPUS", "IN USE"],
        &partitions,
    ));

    let nodes = overview.nodes_in(partition);
    let (gpus, used) = overview::gpus_of(&nodes);
    out.push_str(&format!(
        "  {} ({} node{}, {gpus} GPUs, {used} in use)\n",
        match partition {
            Some(p) => format!("nodes of partition `{p}`"),
            None => "nodes".into(),
        },
        nodes.len(),
        if nodes.len() == 1 { "" } else { "s" },
    ));
    let rows: Vec<[String; 5]> = nodes
        .iter()
        .take(SHOWN)
        .map(|n| {
            [
                n.name.clone(),
                if n.reason.is_empty() {
                    n.state.clone()
                } else {
                    format!("{} ({})", n.state, n.reason)
                },
                n.partitions.join(","),
                n.gres.clone(),
                n.gres_used.clone(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["NODE", "STATE", "PARTITIONS", "GRES", "GRES USED"],
        &rows,
    ));
    out.push_str(&more(nodes.len(), "sinfo"));
    out.push_str(&render_queue(overview, partition));
    out
}

/// The jobs queued and running, everyone's.
fn render_queue(overview: &Overview, partition: Option<&str>) -> String {
    let queue = overview.queue_in(partition);
    let waits = |j: &JobInfo| matches!(Phase::of(j), Phase::Pending(_));
    let running = queue.iter().filter(|j| !waits(j)).count();
    let whose = match partition {
        Some(p) => format!("queue of partition `{p}`"),
        None => "queue".into(),
    };
    if queue.is_empty() {
        return format!("  {whose}: empty\n");
    }
    let mut out = format!(
        "  {whose}: {running} running, {} waiting\n",
        queue.len() - running
    );
    let rows: Vec<[String; 6]> = queue
        .iter()
        .take(SHOWN)
        .map(|j| {
            let place = if waits(j) {
                j.reason.clone()
            } else {
                j.nodes.clone()
            };
            [
                j.id.to_string(),
                j.name.clone(),
                j.user.clone(),
                j.state.clone(),
                if j.gres.is_empty() {
                    "-".into()
                } else {
                    j.gres.clone()
                },
                place,
            ]
        })
        .collect();
    out.push_str(&table(
        &["JOBID", "NAME", "USER", "STATE", "GRES", "NODE/REASON"],
        &rows,
    ));
    out.push_str(&more(queue.len(), "squeue"));
    out
}

/// Aligned columns, indented under the host.
fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut text = Vec::new();
    crate::cli::history::write_table(&mut text, header, rows)
        .expect("writing to memory cannot fail");
    String::from_utf8_lossy(&text)
        .lines()
        .map(|l| format!("  {l}\n"))
        .collect()
}

fn more(count: usize, command: &str) -> String {
    if count > SHOWN {
        format!(
            "  … and {} more (`{command}` lists them all)\n",
            count - SHOWN
        )
    } else {
        String::new()
    }
}

/// The host's `slurm` object in `gpuflow hosts --json`: its settings, and the cluster as Slurm
/// described it (`error` when it could not).
pub fn to_json(
    settings: &SlurmSettings,
    looked: Option<&Result<Overview, String>>,
) -> serde_json::Value {
    let mut json = serde_json::json!({
        "partition": settings.partition,
        "account": settings.account,
        "qos": settings.qos,
        "time_limit": settings.time_limit,
        "sbatch_options": settings.sbatch_options,
        "shared_dir": settings.shared_dir,
        "gpuflow": settings.gpuflow_program(),
        "gpu_types": settings.gpu_types,
        "error": null,
    });
    match looked {
        Some(Ok(overview)) => {
            json["partitions"] = overview
                .partitions()
                .into_iter()
                .map(|p| {
                    serde_json::json!({
                        "name": p.name, "nodes": p.nodes, "gpus": p.gpus, "gpus_used": p.gpus_used,
                    })
                })
                .collect();
            json["nodes"] = overview
                .nodes
                .iter()
                .map(|n| {
                    serde_json::json!({
                        "name": n.name, "state": n.state, "reason": n.reason,
                        "partitions": n.partitions, "gres": n.gres, "gres_used": n.gres_used,
                        "gpus": overview::gpu_count(&n.gres),
                        "gpus_used": overview::gpu_count(&n.gres_used),
                    })
                })
                .collect();
            json["queue"] = overview
                .queue
                .iter()
                .map(|j| {
                    serde_json::json!({
                        "id": j.id, "name": j.name, "user": j.user, "partition": j.partition,
                        "state": j.state, "reason": j.reason, "nodes": j.nodes, "gres": j.gres,
                    })
                })
                .collect();
        }
        Some(Err(why)) => json["error"] = serde_json::json!(why),
        None => {}
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::client::NodeInfo;

    fn settings() -> SlurmSettings {
        SlurmSettings {
            partition: Some("gpu".into()),
            shared_dir: "/shared/gpuflow".into(),
            ..SlurmSettings::default()
        }
    }

    fn host() -> Host {
        Host {
            name: "cluster".into(),
            ..Host::local()
        }
    }

    fn overview() -> Overview {
        let node = |name: &str, state: &str, used: &str, reason: &str| NodeInfo {
            name: name.into(),
            state: state.into(),
            reason: reason.into(),
            partitions: vec!["gpu".into(), "all".into()],
            gres: "gpu:h100:8(S:0-1)".into(),
            gres_used: used.into(),
        };
        let job = |id: u64, name: &str, state: &str, reason: &str, nodes: &str| JobInfo {
            id,
            name: name.into(),
            user: "ana".into(),
            partition: "gpu".into(),
            gres: "gpu:4".into(),
            state: state.into(),
            reason: reason.into(),
            nodes: nodes.into(),
            ..JobInfo::default()
        };
        Overview::new(
            vec![
                node("gpu1", "mixed", "gpu:h100:4(IDX:0-3)", ""),
                node("gpu2", "idle", "gpu:h100:0", ""),
                node("gpu3", "down+drain", "gpu:h100:0", "fan failed"),
                NodeInfo {
                    name: "cpu1".into(),
                    state: "idle".into(),
                    partitions: vec!["cpu".into(), "all".into()],
                    gres: "(null)".into(),
                    gres_used: "gpu:0".into(),
                    ..NodeInfo::default()
                },
            ],
            vec![
                job(41, "gpuflow/20261201-1/bench/1", "PENDING", "Resources", ""),
                job(40, "gpuflow/20261201-1/bench/0", "RUNNING", "None", "gpu1"),
                job(39, "done", "COMPLETED", "None", "gpu2"),
                JobInfo {
                    gres: String::new(),
                    ..job(42, "prep", "PENDING", "Dependency", "")
                },
            ],
        )
    }

    #[test]
    fn a_cluster_shows_its_partitions_nodes_and_queue() {
        let text = render(&host(), &settings(), Some(&Ok(overview())));
        insta::assert_snapshot!(text);
    }

    #[test]
    fn a_cluster_slurm_cannot_describe_says_why() {
        let why =
            "`sinfo` is not on PATH: run gpuflow where Slurm's client commands are".to_string();
        let text = render(&host(), &settings(), Some(&Err(why.clone())));
        assert_eq!(
            text,
            format!(
                "\ncluster: a Slurm cluster; jobs go to partition `gpu`, their files through `/shared/gpuflow`\n  not described: {why}\n"
            )
        );
        assert_eq!(to_json(&settings(), Some(&Err(why.clone())))["error"], why);
    }

    #[test]
    fn the_gpus_cell_counts_the_partitions_nodes() {
        let clusters: Clusters = [("cluster".to_string(), Ok(overview()))].into();
        assert_eq!(gpus_cell(&host(), &settings(), &clusters), "24 on 3 nodes");
        assert_eq!(gpus_cell(&host(), &settings(), &Clusters::new()), "-");
    }

    #[test]
    fn json_has_every_node_and_the_queued_jobs() {
        let json = to_json(&settings(), Some(&Ok(overview())));
        assert_eq!(json["partition"], "gpu");
        assert_eq!(json["error"], serde_json::Value::Null);
        assert_eq!(json["nodes"].as_array().unwrap().len(), 4);
        assert_eq!(json["nodes"][0]["gpus"], 8);
        assert_eq!(json["nodes"][0]["gpus_used"], 4);
        let ids: Vec<u64> = json["queue"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect();
        assert_eq!(ids, [40, 41, 42]);
        assert_eq!(json["partitions"][0]["gpus"], 24);
    }
}
