//! What a Slurm cluster has and runs now, for `gpuflow hosts`: its partitions, its nodes with
//! their GPUs (GRES, in all and in use) and the jobs queued or running, everyone's, from
//! `sinfo --json` and `squeue --json`. Slurm's own client configuration says which cluster
//! that is: the one this machine submits to.

use std::time::Duration;

use super::client::{self, JobInfo, NodeInfo};
use super::state::Phase;

/// How long the controller gets to answer: a cluster that does not answer is shown as such,
/// it does not hold up the listing of the other hosts.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// The cluster as Slurm described it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overview {
    pub nodes: Vec<NodeInfo>,
    /// Pending and running jobs (not those that ended), running first, each by id.
    pub queue: Vec<JobInfo>,
}

/// One partition: what its nodes have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub name: String,
    pub nodes: usize,
    pub gpus: u32,
    pub gpus_used: u32,
}

/// Asks Slurm; an error says why the cluster could not be described (its commands missing,
/// its controller not answering).
pub async fn look() -> Result<Overview, String> {
    let asked = async { tokio::join!(client::nodes(), client::queue()) };
    let (nodes, queue) = tokio::time::timeout(ANSWER_WITHIN, asked)
        .await
        .map_err(|_| {
            format!(
                "the Slurm controller did not answer within {} s (`sinfo`, `squeue`)",
                ANSWER_WITHIN.as_secs()
            )
        })?;
    Ok(Overview::new(nodes?, queue?))
}

impl Overview {
    /// The overview of these nodes and jobs: ended jobs left out.
    pub fn new(nodes: Vec<NodeInfo>, jobs: Vec<JobInfo>) -> Self {
        let mut queue: Vec<JobInfo> = jobs
            .into_iter()
            .filter(|j| !matches!(Phase::of(j), Phase::Ended(_)))
            .collect();
        queue.sort_by_key(|j| (!matches!(Phase::of(j), Phase::Running { .. }), j.id));
        Self { nodes, queue }
    }

    /// Each partition with its nodes' GPUs, in the order the nodes name them.
    pub fn partitions(&self) -> Vec<Partition> {
        let mut out: Vec<Partition> = Vec::new();
        for node in &self.nodes {
            for name in &node.partitions {
                let at = match out.iter().position(|p| p.name == *name) {
                    Some(at) => at,
                    None => {
                        out.push(Partition {
                            name: name.clone(),
                            nodes: 0,
                            gpus: 0,
                            gpus_used: 0,
                        });
                        out.len() - 1
                    }
                };
                out[at].nodes += 1;
                out[at].gpus += gpu_count(&node.gres);
                out[at].gpus_used += gpu_count(&node.gres_used);
            }
        }
        out
    }

    /// The nodes in `partition`, or all of them.
    pub fn nodes_in(&self, partition: Option<&str>) -> Vec<&NodeInfo> {
        self.nodes
            .iter()
            .filter(|n| partition.is_none_or(|p| n.partitions.iter().any(|q| q == p)))
            .collect()
    }

    /// The queued and running jobs of `partition`, or all of them.
    pub fn queue_in(&self, partition: Option<&str>) -> Vec<&JobInfo> {
        self.queue
            .iter()
            .filter(|j| partition.is_none_or(|p| j.partition.split(',').any(|q| q == p)))
            .collect()
    }
}

/// The GPUs a GRES text counts: `gpu:8` → 8, `gpu:h100:4(S:0),gpu:a100:4(S:1)` → 8,
/// `gpu:2(IDX:0,2)` → 2, `shard:16` → 0.
pub fn gpu_count(gres: &str) -> u32 {
    let mut total = 0;
    let mut depth = 0;
    let mut start = 0;
    let mut entries = Vec::new();
    // Commas inside `(IDX:0,2-3)` do not separate entries.
    for (i, c) in gres.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(&gres[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.push(&gres[start..]);
    for entry in entries {
        let entry = entry.split('(').next().unwrap_or_default().trim();
        let fields: Vec<&str> = entry.split(':').collect();
        if fields.first() == Some(&"gpu") && fields.len() >= 2 {
            total += fields
                .last()
                .and_then(|n| n.parse::<u32>().ok())
                .unwrap_or(0);
        }
    }
    total
}

/// The GPUs of these nodes: in all, and in use.
pub fn gpus_of(nodes: &[&NodeInfo]) -> (u32, u32) {
    nodes.iter().fold((0, 0), |(all, used), n| {
        (all + gpu_count(&n.gres), used + gpu_count(&n.gres_used))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("gpu:8", 8 ; "a count")]
    #[test_case("gpu:h100:8(S:0-1)", 8 ; "a type and sockets")]
    #[test_case("gpu:h100:4(S:0),gpu:a100:4(S:1)", 8 ; "two types")]
    #[test_case("gpu:3(IDX:0,2-3)", 3 ; "indices with a comma")]
    #[test_case("gpu:0", 0 ; "none used")]
    #[test_case("shard:16,gpu:2", 2 ; "another kind of GRES")]
    #[test_case("(null)", 0 ; "no GRES")]
    #[test_case("", 0 ; "empty")]
    fn gpus_counted(gres: &str, count: u32) {
        assert_eq!(gpu_count(gres), count);
    }

    fn node(name: &str, partitions: &[&str], gres: &str, used: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            state: "mixed".into(),
            partitions: partitions.iter().map(ToString::to_string).collect(),
            gres: gres.into(),
            gres_used: used.into(),
            ..NodeInfo::default()
        }
    }

    fn job(id: u64, state: &str, partition: &str) -> JobInfo {
        JobInfo {
            id,
            state: state.into(),
            partition: partition.into(),
            ..JobInfo::default()
        }
    }

    #[test]
    fn partitions_add_up_their_nodes_gpus() {
        let overview = Overview::new(
            vec![
                node("a1", &["gpu", "all"], "gpu:8", "gpu:2(IDX:0-1)"),
                node("a2", &["gpu", "all"], "gpu:8", "gpu:0"),
                node("c1", &["cpu", "all"], "(null)", "gpu:0"),
            ],
            Vec::new(),
        );
        let shown: Vec<(String, usize, u32, u32)> = overview
            .partitions()
            .into_iter()
            .map(|p| (p.name, p.nodes, p.gpus, p.gpus_used))
            .collect();
        assert_eq!(
            shown,
            [
                ("gpu".into(), 2, 16, 2),
                ("all".into(), 3, 16, 2),
                ("cpu".into(), 1, 0, 0)
            ]
        );
        assert_eq!(overview.nodes_in(Some("cpu")).len(), 1);
        assert_eq!(gpus_of(&overview.nodes_in(Some("gpu"))), (16, 2));
    }

    #[test]
    fn the_queue_keeps_what_waits_or_runs_running_first() {
        let overview = Overview::new(
            Vec::new(),
            vec![
                job(3, "PENDING", "gpu"),
                job(9, "RUNNING", "gpu"),
                job(1, "COMPLETED", "gpu"),
                job(4, "CANCELLED", "gpu"),
                job(5, "PENDING", "cpu"),
            ],
        );
        let ids: Vec<u64> = overview.queue.iter().map(|j| j.id).collect();
        assert_eq!(ids, [9, 3, 5]);
        let in_gpu: Vec<u64> = overview
            .queue_in(Some("gpu"))
            .iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(in_gpu, [9, 3]);
    }
}
