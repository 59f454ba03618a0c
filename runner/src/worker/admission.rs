//! Which queued run the worker starts next, while others run (docs/triggers.md, "Several
//! runs at once"):
//!
//! - at most `max_runs` runs are in flight;
//! - a run whose `concurrency:` group (per repository) has a run in flight waits for it, and
//!   does not hold up the runs behind it (it waits for its group, not for GPUs);
//! - otherwise the oldest queued run starts when its GPU need ([`super::gpu_need`]) fits in
//!   the machine's GPUs not yet promised to the runs in flight. When it does not fit, nothing
//!   behind it starts (strict queue order): a large request is never starved by a stream of
//!   small ones, at the price of GPUs idling until enough are free for it.
//!
//! - a run whose jobs go to a Slurm cluster (docs/slurm.md) needs none of this machine's GPUs
//!   and does not count against `max_runs`: it only submits and follows, and Slurm limits it.
//!
//! The promise is only the worker's bookkeeping: each job's GPUs are still leased when the job
//! starts (docs/gpus.md), so a run whose need was under-counted waits for its leases inside
//! `gpuflow run`, as it would if started by hand.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::trigger::QueuedRun;

/// What the runs in flight hold.
#[derive(Debug, Default)]
pub struct Held {
    pub runs: usize,
    /// The sum of their GPU needs.
    pub gpus: u32,
    /// Their concurrency groups: (repository, group).
    pub groups: HashSet<(PathBuf, String)>,
}

/// What a queued run needs of this machine ([`super::gpu_need`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Need {
    pub gpus: u32,
    /// Its jobs go to a Slurm cluster: this machine only submits and follows them.
    pub on_cluster: bool,
}

impl Need {
    pub fn gpus(gpus: u32) -> Self {
        Self {
            gpus,
            on_cluster: false,
        }
    }
}

impl Held {
    pub fn add(&mut self, run: &QueuedRun, need: Need) {
        if !need.on_cluster {
            self.runs += 1;
        }
        self.gpus += need.gpus;
        if let Some(key) = group_key(run) {
            self.groups.insert(key);
        }
    }
}

/// The worker's limits: runs in flight, and the machine's GPUs.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_runs: usize,
    pub gpus: u32,
}

/// What the queue allows now.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Start `queued[index]`, promising it `need` GPUs.
    Start { index: usize, need: Need },
    /// `queued[index]` is next but needs `need` GPUs and only `free` are not promised: it and
    /// every run behind it wait.
    WaitsForGpus { index: usize, need: u32, free: u32 },
    /// `max_runs` runs are in flight.
    Full,
    /// Nothing queued can start (none, or each waits for its group).
    Nothing,
}

/// The next step for `queued` (in queue order), given what runs in flight `held`; `need`
/// says a run's GPU need (asked only of the runs it decides about).
pub fn next(
    queued: &[QueuedRun],
    held: &Held,
    limits: Limits,
    mut need: impl FnMut(&QueuedRun) -> Need,
) -> Next {
    let free = limits.gpus.saturating_sub(held.gpus);
    for (index, run) in queued.iter().enumerate() {
        if group_key(run).is_some_and(|key| held.groups.contains(&key)) {
            continue;
        }
        let need = need(run);
        return if need.on_cluster {
            Next::Start { index, need }
        } else if held.runs >= limits.max_runs {
            Next::Full
        } else if need.gpus <= free {
            Next::Start { index, need }
        } else {
            Next::WaitsForGpus {
                index,
                need: need.gpus,
                free,
            }
        };
    }
    Next::Nothing
}

fn group_key(run: &QueuedRun) -> Option<(PathBuf, String)> {
    run.concurrency_group
        .as_ref()
        .map(|group| (run.repo.clone(), group.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trigger::RunState;

    fn run(id: &str, group: Option<&str>) -> QueuedRun {
        QueuedRun {
            id: id.into(),
            state: RunState::Queued,
            workflow: "workflows/w.yml".into(),
            name: "w".into(),
            repo: "/r.git".into(),
            home: "/r.git".into(),
            sha: "a".repeat(40),
            git_ref: "refs/heads/main".into(),
            concurrency_group: group.map(String::from),
            cancel_in_progress: false,
            message: None,
            exit_code: None,
            cancel_requested: false,
            worker: None,
            process: None,
            log_dir: "/r.git/.gpuflow/runs/x".into(),
            queued_at: 0.0,
            started_at: None,
            finished_at: None,
            event: crate::engine::options::EventContext::test_push(&"a".repeat(40)),
        }
    }

    /// The runs a worker with `limits` starts from `queued` (id, need) before it must wait.
    fn started(
        queued: &[(&str, u32, Option<&str>)],
        held: &mut Held,
        limits: Limits,
    ) -> Vec<String> {
        let mut queued: Vec<(QueuedRun, u32)> = queued
            .iter()
            .map(|(id, need, group)| (run(id, *group), *need))
            .collect();
        let mut out = Vec::new();
        loop {
            let runs: Vec<QueuedRun> = queued.iter().map(|(r, _)| r.clone()).collect();
            let needs = |r: &QueuedRun| {
                let gpus = queued.iter().find(|(q, _)| q.id == r.id).unwrap().1;
                // A need of `u32::MAX` in these tests stands for a run on a cluster.
                if gpus == u32::MAX {
                    Need {
                        gpus: 0,
                        on_cluster: true,
                    }
                } else {
                    Need::gpus(gpus)
                }
            };
            match next(&runs, held, limits, needs) {
                Next::Start { index, need } => {
                    let (r, _) = queued.remove(index);
                    held.add(&r, need);
                    out.push(r.id);
                }
                _ => return out,
            }
        }
    }

    const EIGHT: Limits = Limits {
        max_runs: 8,
        gpus: 8,
    };

    #[test]
    fn runs_start_while_their_gpus_fit() {
        let mut held = Held::default();
        let queued = [
            ("a", 2, None),
            ("b", 2, None),
            ("c", 2, None),
            ("d", 2, None),
            ("e", 2, None),
        ];
        assert_eq!(started(&queued, &mut held, EIGHT), ["a", "b", "c", "d"]);
        assert_eq!(held.gpus, 8);
    }

    #[test]
    fn a_run_that_does_not_fit_is_not_overtaken() {
        let mut held = Held {
            runs: 3,
            gpus: 6,
            ..Held::default()
        };
        let queued = [("big", 8, None), ("small", 1, None)];
        assert_eq!(started(&queued, &mut held, EIGHT), Vec::<String>::new());
        let runs = [run("big", None), run("small", None)];
        assert_eq!(
            next(&runs, &held, EIGHT, |r| Need::gpus(if r.id == "big" {
                8
            } else {
                1
            })),
            Next::WaitsForGpus {
                index: 0,
                need: 8,
                free: 2
            }
        );
    }

    #[test]
    fn a_run_waiting_for_its_group_lets_the_others_pass() {
        let mut held = Held::default();
        held.add(&run("older", Some("g")), Need::gpus(0));
        let queued = [
            ("newer", 0, Some("g")),
            ("other", 0, Some("h")),
            ("free", 0, None),
        ];
        assert_eq!(started(&queued, &mut held, EIGHT), ["other", "free"]);
        // Two queued runs of one group (a group of another repository is another group).
        let mut held = Held::default();
        let queued = [("g1", 0, Some("g")), ("g2", 0, Some("g"))];
        assert_eq!(started(&queued, &mut held, EIGHT), ["g1"]);
    }

    #[test]
    fn max_runs_caps_runs_without_gpus_too() {
        let mut held = Held::default();
        let limits = Limits {
            max_runs: 2,
            gpus: 0,
        };
        let queued = [("a", 0, None), ("b", 0, None), ("c", 0, None)];
        assert_eq!(started(&queued, &mut held, limits), ["a", "b"]);
        assert_eq!(
            next(&[run("c", None)], &held, limits, |_| Need::gpus(0)),
            Next::Full
        );
    }

    #[test]
    fn runs_on_a_cluster_are_limited_by_the_cluster_not_by_max_runs() {
        let mut held = Held::default();
        let limits = Limits {
            max_runs: 1,
            gpus: 0,
        };
        let queued = [
            ("local", 0, None),
            ("cluster-1", u32::MAX, None),
            ("cluster-2", u32::MAX, None),
            ("local-2", 0, None),
        ];
        // The local run fills `max_runs`; the cluster runs behind it start anyway, and count
        // nothing; the next local run waits.
        assert_eq!(
            started(&queued, &mut held, limits),
            ["local", "cluster-1", "cluster-2"]
        );
        assert_eq!(held.runs, 1);
    }
}
