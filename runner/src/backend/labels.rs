//! The labels that make clean-up possible: every container and network gpuflow creates says
//! which run and job it belongs to and which runner process owns it (its lock token; pid,
//! host and start time for people reading them). A run's things are removed by run id;
//! things whose runner's lock is free are swept (`runner_lock.rs`).

use std::collections::HashMap;

/// The prefix of every label gpuflow sets; users may not set labels under it.
pub const LABEL_PREFIX: &str = "dev.gpuflow.";
/// Present (`true`) on everything gpuflow created.
pub const LABEL_MANAGED: &str = "dev.gpuflow.managed";
/// The run that created it.
pub const LABEL_RUN_ID: &str = "dev.gpuflow.run-id";
/// The job (within the run) that created it.
pub const LABEL_JOB: &str = "dev.gpuflow.job";
/// The pid of the runner process that owns it, on [`LABEL_OWNER_HOST`].
pub const LABEL_OWNER_PID: &str = "dev.gpuflow.owner-pid";
/// The host name of the machine the owning runner runs on (not the engine's host).
pub const LABEL_OWNER_HOST: &str = "dev.gpuflow.owner-host";
/// The owner's start time (clock ticks since boot, from `/proc/<pid>/stat`), so a recycled pid
/// is not mistaken for the owner.
pub const LABEL_OWNER_STARTED: &str = "dev.gpuflow.owner-started";
/// The owner's runner-lock token: the sweep's only evidence that the owner is gone.
pub const LABEL_OWNER_TOKEN: &str = "dev.gpuflow.owner-token";
/// Present (`true`) on what `gpuflow run --keep-containers` was asked to keep: the sweep at the
/// start of the next run leaves it, `gpuflow gc` removes it.
pub const LABEL_KEPT: &str = "dev.gpuflow.kept";

/// Present (`true`) on a server started to be kept warm after its run (`keep-warm:`): the sweep
/// of dead runners' things leaves it to the warm servers' own sweep (`crate::warm`).
pub const LABEL_KEEP_WARM: &str = "dev.gpuflow.keep-warm";
/// The user id of the runner that owns it, on servers kept warm: each user's sweep judges
/// only its own (their expiries are in that user's registry).
pub const LABEL_OWNER_UID: &str = "dev.gpuflow.owner-uid";

/// The runner process that owns containers: what sweeping compares against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub host: String,
    /// `None` where `/proc` is not available.
    pub started: Option<u64>,
    /// The runner lock it holds while it lives (`runner_lock.rs`); `None`: none could be made
    /// (or an older gpuflow), and its things are never swept.
    pub token: Option<String>,
}

impl Owner {
    /// This process.
    pub fn current() -> Self {
        let pid = std::process::id();
        Self {
            pid,
            host: host_name(),
            started: process_start_time(pid),
            token: super::runner_lock::current_token().map(str::to_owned),
        }
    }

    /// Whether the owner is known to be gone: its runner lock is free. A pid that cannot be
    /// seen proves nothing (`hidepid`, another PID namespace, another machine of the same
    /// name), so without a lock to ask the answer is no.
    pub fn is_gone(&self) -> bool {
        self.token.as_deref().is_some_and(|token| {
            super::runner_lock::liveness(token) == super::runner_lock::Liveness::Dead
        })
    }

    pub(crate) fn from_labels(labels: &HashMap<String, String>) -> Option<Self> {
        Some(Self {
            pid: labels.get(LABEL_OWNER_PID)?.parse().ok()?,
            host: labels.get(LABEL_OWNER_HOST)?.clone(),
            started: labels.get(LABEL_OWNER_STARTED).and_then(|s| s.parse().ok()),
            token: labels.get(LABEL_OWNER_TOKEN).cloned(),
        })
    }
}

/// Which run and job a container or network belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLabels {
    pub run_id: String,
    pub job: String,
    /// Kept for the user to look at (`--keep-containers`): labelled [`LABEL_KEPT`].
    pub kept: bool,
    /// To be kept warm after the run: labelled [`LABEL_KEEP_WARM`].
    pub warm: bool,
}

impl RunLabels {
    pub fn new(run_id: impl Into<String>, job: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            job: job.into(),
            kept: false,
            warm: false,
        }
    }

    /// The same labels, marked kept (or not).
    pub fn kept(self, kept: bool) -> Self {
        Self { kept, ..self }
    }

    /// The same labels, marked as a server to be kept warm (or not).
    pub fn warm(self, warm: bool) -> Self {
        Self { warm, ..self }
    }

    /// gpuflow's labels for a thing of this run owned by `owner`.
    pub(crate) fn to_labels(&self, owner: &Owner) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_RUN_ID.to_string(), self.run_id.clone()),
            (LABEL_JOB.to_string(), self.job.clone()),
            (LABEL_OWNER_PID.to_string(), owner.pid.to_string()),
            (LABEL_OWNER_HOST.to_string(), owner.host.clone()),
        ]);
        if let Some(started) = owner.started {
            labels.insert(LABEL_OWNER_STARTED.to_string(), started.to_string());
        }
        if let Some(token) = &owner.token {
            labels.insert(LABEL_OWNER_TOKEN.to_string(), token.clone());
        }
        if self.kept {
            labels.insert(LABEL_KEPT.to_string(), "true".to_string());
        }
        if self.warm {
            labels.insert(LABEL_KEEP_WARM.to_string(), "true".to_string());
            labels.insert(
                LABEL_OWNER_UID.to_string(),
                rustix::process::geteuid().as_raw().to_string(),
            );
        }
        labels
    }
}

/// A `label=key=value` filter for list calls.
pub(crate) fn label_filter(pairs: &[(&str, &str)]) -> HashMap<String, Vec<String>> {
    HashMap::from([(
        "label".to_string(),
        pairs.iter().map(|(k, v)| format!("{k}={v}")).collect(),
    )])
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Field 22 of `/proc/<pid>/stat`. The command name (field 2) may hold spaces and parentheses,
/// so fields are counted from the last `)`.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name come field 3 (state) onwards; field 22 is the 20th of those.
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_read_past_a_name_with_spaces_and_parens() {
        let stat = "1234 (a b) c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 99 100";
        assert_eq!(parse_start_time(stat), Some(424_242));
        assert_eq!(parse_start_time("garbage"), None);
    }

    #[test]
    fn this_process_is_not_gone_and_a_pid_alone_proves_nothing() {
        let me = Owner::current();
        assert!(me.token.is_some(), "a runner lock is held");
        assert!(!me.is_gone());
        // Above Linux's maximum pid (2^22): never a real process, yet without a lock token
        // there is no evidence the owner is gone (hidepid, another PID namespace).
        let unseen = Owner {
            pid: 4_194_305,
            host: host_name(),
            started: None,
            token: None,
        };
        assert!(!unseen.is_gone());
    }

    #[test]
    fn labels_round_trip_to_the_owner() {
        let owner = Owner {
            pid: 7,
            host: "node-a".into(),
            started: Some(99),
            token: Some("0123456789abcdef0123456789abcdef".into()),
        };
        let labels = RunLabels::new("run-1", "bench").to_labels(&owner);
        assert_eq!(labels[LABEL_MANAGED], "true");
        assert_eq!(labels[LABEL_RUN_ID], "run-1");
        assert_eq!(labels[LABEL_JOB], "bench");
        assert_eq!(Owner::from_labels(&labels), Some(owner.clone()));
        assert!(labels.keys().all(|k| k.starts_with(LABEL_PREFIX)));
        assert!(!labels.contains_key(LABEL_KEPT));
        let kept = RunLabels::new("run-1", "bench")
            .kept(true)
            .to_labels(&owner);
        assert_eq!(kept[LABEL_KEPT], "true");
    }
}
