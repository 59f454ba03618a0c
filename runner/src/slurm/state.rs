//! What a Slurm job's state means for the gpuflow job it carries: still waiting (with Slurm's
//! reason in words), running on a node, or ended, and how.

use super::client::JobInfo;

/// Where a Slurm job is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Queued: why, in words (`waiting for GPUs (Resources)`).
    Pending(String),
    /// Running on `node`.
    Running { node: String },
    /// Ended.
    Ended(Ending),
}

/// How a Slurm job ended, as far as Slurm knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The batch script exited 0.
    Completed,
    /// The batch script exited non-zero: gpuflow on the node says why in its result.
    Failed { exit_code: Option<i64> },
    /// Cancelled before it ran because a job it needs did not succeed (`afterok` could never
    /// be met).
    DependencyFailed,
    /// Slurm ended it; the reason in words (TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, PREEMPTED,
    /// CANCELLED, …). gpuflow on the node could not say more.
    EndedBySlurm { state: String, why: String },
}

impl Phase {
    pub fn of(job: &JobInfo) -> Self {
        match job.state.as_str() {
            "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "RESV_DEL_HOLD" => {
                Self::Pending(pending_reason(&job.reason))
            }
            "RUNNING" | "CONFIGURING" | "COMPLETING" | "SUSPENDED" | "STAGE_OUT" | "SIGNALING"
            | "RESIZING" | "STOPPED" => Self::Running {
                node: job.nodes.clone(),
            },
            "COMPLETED" => Self::Ended(Ending::Completed),
            "FAILED" => Self::Ended(Ending::Failed {
                exit_code: job.exit_code,
            }),
            "CANCELLED" if job.reason == "DependencyNeverSatisfied" => {
                Self::Ended(Ending::DependencyFailed)
            }
            state => Self::Ended(Ending::EndedBySlurm {
                state: state.to_string(),
                why: ended_reason(state).to_string(),
            }),
        }
    }
}

/// Slurm's pending reasons that a user sees most, in words; others as Slurm names them.
fn pending_reason(reason: &str) -> String {
    let words = match reason {
        "Resources" => "waiting for free GPUs or nodes",
        "Priority" => "waiting behind jobs of higher priority",
        "Dependency" => "waiting for the jobs it needs",
        "JobArrayTaskLimit" | "JobHeldUser" => "held back by `max-parallel`",
        "BeginTime" => "waiting for its start time",
        "QOSMaxGRESPerUser" | "QOSMaxJobsPerUserLimit" | "AssocGrpGRES" => {
            "held by a limit of its QoS or account"
        }
        "PartitionDown" | "PartitionInactive" => "its partition is down",
        "ReqNodeNotAvail" => "the nodes it needs are not available",
        "None" | "" => "queued",
        _ => "",
    };
    if words.is_empty() {
        format!("Slurm: pending ({reason})")
    } else {
        format!("Slurm: pending, {words} ({reason})")
    }
}

fn ended_reason(state: &str) -> &'static str {
    match state {
        "TIMEOUT" | "DEADLINE" => {
            "it ran past its time limit (`timeout-minutes` or the host's `time-limit`)"
        }
        "OUT_OF_MEMORY" => "it used more memory than it was allocated",
        "NODE_FAIL" => "its node failed",
        "PREEMPTED" => "a job of higher priority took its resources",
        "CANCELLED" => "it was cancelled (scancel)",
        "BOOT_FAIL" => "its node could not boot",
        "SPECIAL_EXIT" => "it ended in a special state",
        _ => "Slurm ended it",
    }
}

impl Ending {
    /// One line for the job's log and its failure reason.
    pub fn describe(&self, slurm_id: u64) -> String {
        match self {
            Self::Completed => format!("Slurm job {slurm_id} completed"),
            Self::Failed { exit_code } => match exit_code {
                Some(code) => format!("Slurm job {slurm_id} failed (exit status {code})"),
                None => format!("Slurm job {slurm_id} failed"),
            },
            Self::DependencyFailed => format!(
                "Slurm job {slurm_id} was cancelled before it ran: a job it needs did not succeed"
            ),
            Self::EndedBySlurm { state, why } => {
                format!("Slurm job {slurm_id} ended {state}: {why}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn job(state: &str, reason: &str) -> JobInfo {
        JobInfo {
            id: 4,
            state: state.into(),
            reason: reason.into(),
            nodes: "gpu2".into(),
            exit_code: Some(256),
            submit_time: 0,
            start_time: 0,
            end_time: 0,
            ..JobInfo::default()
        }
    }

    #[test_case(
        "PENDING",
        "Resources",
        "Slurm: pending, waiting for free GPUs or nodes (Resources)"
    )]
    #[test_case(
        "PENDING",
        "Dependency",
        "Slurm: pending, waiting for the jobs it needs (Dependency)"
    )]
    #[test_case("PENDING", "AssocMaxJobsLimit", "Slurm: pending (AssocMaxJobsLimit)")]
    fn pending(state: &str, reason: &str, words: &str) {
        assert_eq!(Phase::of(&job(state, reason)), Phase::Pending(words.into()));
    }

    #[test]
    fn running_says_where() {
        assert_eq!(
            Phase::of(&job("RUNNING", "None")),
            Phase::Running {
                node: "gpu2".into()
            }
        );
    }

    #[test_case(
        "TIMEOUT",
        "Slurm job 4 ended TIMEOUT: it ran past its time limit (`timeout-minutes` or the host's `time-limit`)"
    )]
    #[test_case(
        "OUT_OF_MEMORY",
        "Slurm job 4 ended OUT_OF_MEMORY: it used more memory than it was allocated"
    )]
    #[test_case("NODE_FAIL", "Slurm job 4 ended NODE_FAIL: its node failed")]
    #[test_case(
        "PREEMPTED",
        "Slurm job 4 ended PREEMPTED: a job of higher priority took its resources"
    )]
    fn ended_by_slurm(state: &str, words: &str) {
        let Phase::Ended(ending) = Phase::of(&job(state, "None")) else {
            panic!("{state} is an end");
        };
        assert_eq!(ending.describe(4), words);
    }

    #[test]
    fn a_dependency_that_failed_is_told_apart_from_a_cancel() {
        assert_eq!(
            Phase::of(&job("CANCELLED", "DependencyNeverSatisfied")),
            Phase::Ended(Ending::DependencyFailed)
        );
        assert!(matches!(
            Phase::of(&job("CANCELLED", "None")),
            Phase::Ended(Ending::EndedBySlurm { .. })
        ));
        assert_eq!(
            Phase::of(&job("FAILED", "NonZeroExitCode")),
            Phase::Ended(Ending::Failed {
                exit_code: Some(256)
            })
        );
    }
}
