//! Runs on a real Slurm cluster (docs/slurm.md): the one `scripts/slurm-cluster.sh up` starts
//! (`make test` does, as root), three emulated nodes of eight stand-in GPUs, Debian's
//! slurmctld, slurmd and munge. Each test submits through `gpuflow run` with a host file whose
//! host is that cluster, and reads back what each job saw (`$SLURMD_NODENAME`, the GPUs it
//! got, when it started and ended), what gpuflow said (`--json` events) and what Slurm says
//! (`squeue`). The jobs are `run:` steps (no container needs a GPU); the tests share the
//! cluster, so each looks only at its own run's Slurm jobs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{Running, Signal, Workspace, gpuflow};

/// A workspace whose `gpuflow.toml` names the cluster as host `cluster`, its shared folder,
/// and a folder the jobs write what they saw to.
struct Cluster {
    ws: Workspace,
    shared: Workspace,
    records: Workspace,
    home: Workspace,
}

/// What one job saw: where, which GPUs, when.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    node: String,
    gpus: Vec<String>,
    start: f64,
    end: f64,
}

impl Cluster {
    fn new(extra: &str) -> Self {
        crate::support::slurm::require_cluster();
        let cluster = Self {
            ws: Workspace::new(),
            shared: Workspace::empty(),
            records: Workspace::empty(),
            home: Workspace::empty(),
        };
        let inventory =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stand-in-8gpu-pcie.toml");
        cluster.ws.write(
            "gpuflow.toml",
            &format!(
                "[hosts.cluster]\ngpu-inventory = \"{}\"\n\n[hosts.cluster.slurm]\nshared-dir = \"{}\"\ngpuflow = \"{}\"\npartition = \"gpu\"\n{extra}",
                inventory.display(),
                cluster.shared.path().display(),
                env!("CARGO_BIN_EXE_gpuflow"),
            ),
        );
        cluster
    }

    /// A `run:` step's script that records, under `name`, the node, GPUs and times of its job
    /// around a `sleep secs`.
    fn recording(&self, name: &str, secs: f64) -> String {
        let file = self.records.path().join(name);
        format!(
            "echo \"start $(date +%s.%N) $SLURMD_NODENAME $GPUFLOW_GPUS\" >> {0}\n          sleep {secs}\n          echo \"end $(date +%s.%N)\" >> {0}",
            file.display()
        )
    }

    fn command(&self) -> crate::support::command::Gpuflow {
        gpuflow()
            .current_dir(self.ws.path())
            .home(self.home.path())
            .env("GPUFLOW_LEASE_DIR", self.home.path().join("leases"))
    }

    /// Runs `wf.yml` to its end with `--json`: its exit code and events.
    fn run(&self) -> (Option<i32>, Vec<Value>) {
        let out = self
            .command()
            .args(["run", "--json", "wf.yml"])
            .timeout(Duration::from_secs(240))
            .output();
        (out.code(), out.json_lines())
    }

    fn spawn(&self) -> Running {
        let child = self
            .command()
            .args(["run", "--json", "wf.yml"])
            .into_std()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Running::new(child)
    }

    /// Hands its folders to the Unix user `user` (`scripts/slurm-cluster.sh up` makes
    /// `gpuflow-peer`): its uid and gid, for [`Self::spawn_as`].
    fn give_to(&self, user: &str) -> (u32, u32) {
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").args([flag, user]).output().unwrap();
            crate::support::text(&out.stdout)
                .trim()
                .parse()
                .unwrap_or_else(|_| {
                    panic!("no user `{user}`: `sudo bash scripts/slurm-cluster.sh up` makes it")
                })
        };
        let (uid, gid) = (id("-u"), id("-g"));
        for folder in [&self.ws, &self.shared, &self.records, &self.home] {
            for entry in walkdir::WalkDir::new(folder.path()) {
                std::os::unix::fs::chown(entry.unwrap().path(), Some(uid), Some(gid)).unwrap();
            }
        }
        (uid, gid)
    }

    /// [`Self::spawn`] as the user `uid`/`gid` (`setpriv`, keeping the environment).
    fn spawn_as(&self, (uid, gid): (u32, u32)) -> Running {
        let inner = self
            .command()
            .env("HOME", self.home.path())
            .args(["run", "--json", "wf.yml"])
            .into_std();
        let mut command = Command::new("setpriv");
        command
            .args([format!("--reuid={uid}"), format!("--regid={gid}")])
            .args(["--clear-groups", "--"])
            .arg(inner.get_program())
            .args(inner.get_args());
        for (key, value) in inner.get_envs() {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        if let Some(dir) = inner.get_current_dir() {
            command.current_dir(dir);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Running::new(child)
    }

    fn seen(&self, name: &str) -> Option<Seen> {
        let text = std::fs::read_to_string(self.records.path().join(name)).ok()?;
        let mut seen = Seen {
            name: name.into(),
            node: String::new(),
            gpus: Vec::new(),
            start: f64::NAN,
            end: f64::NAN,
        };
        for line in text.lines() {
            let words: Vec<&str> = line.split(' ').collect();
            match words.as_slice() {
                ["start", t, node, gpus @ ..] => {
                    seen.start = t.parse().unwrap();
                    seen.node = (*node).to_string();
                    seen.gpus = gpus
                        .first()
                        .unwrap_or(&"")
                        .split(',')
                        .filter(|g| !g.is_empty())
                        .map(String::from)
                        .collect();
                }
                ["end", t] => seen.end = t.parse().unwrap(),
                _ => panic!("{name}: unexpected record {line:?}"),
            }
        }
        Some(seen)
    }

    fn seen_all(&self) -> Vec<Seen> {
        let mut names: Vec<String> = std::fs::read_dir(self.records.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.iter().filter_map(|n| self.seen(n)).collect()
    }

    /// The run's folder on the shared folder (there is one run per test).
    fn run_folder(&self) -> PathBuf {
        let user = std::fs::read_dir(self.shared.path())
            .unwrap()
            .next()
            .expect("a user folder")
            .unwrap()
            .path();
        std::fs::read_dir(user)
            .unwrap()
            .next()
            .expect("a run folder")
            .unwrap()
            .path()
    }

    /// The Slurm job ids the run submitted.
    fn slurm_ids(&self) -> Vec<u64> {
        let manifest: Value = serde_json::from_slice(
            &std::fs::read(self.run_folder().join("manifest.json")).unwrap(),
        )
        .unwrap();
        manifest["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|j| j["slurm_id"].as_u64())
            .collect()
    }
}

/// Each Slurm job's state, as `squeue` says (finished ones included).
fn slurm_states(ids: &[u64]) -> Vec<(u64, String, String)> {
    let list: Vec<String> = ids.iter().map(u64::to_string).collect();
    let out = Command::new("squeue")
        .args([
            "--json",
            "--states=all",
            &format!("--jobs={}", list.join(",")),
        ])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Slurm 22.05's `--json` ignores `--jobs`.
    json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| ids.contains(&j["job_id"].as_u64().unwrap()))
        .map(|j| {
            let state = match &j["job_state"] {
                Value::Array(s) => s[0].as_str().unwrap().to_string(),
                s => s.as_str().unwrap().to_string(),
            };
            (
                j["job_id"].as_u64().unwrap(),
                state,
                j["state_reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The `job_finished` result of each job, by display name.
fn results(events: &[Value]) -> Vec<(String, String)> {
    let mut results: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] == "job_finished")
        .map(|e| {
            (
                e["job"]["display"].as_str().unwrap().to_string(),
                e["result"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    results.sort();
    results
}

fn log_lines(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "log_line")
        .map(|e| {
            format!(
                "[{}] {}\n",
                e["job"]["display"].as_str().unwrap_or(""),
                e["text"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn a_dependant_waits_for_its_parent_and_reads_its_outputs() {
    let cluster = Cluster::new("");
    cluster.ws.write(
        "wf.yml",
        &format!(
            "on: workflow_dispatch\njobs:\n  build:\n    runs-on: cluster\n    gpus: 1\n    outputs:\n      node: ${{{{ steps.w.outputs.node }}}}\n    steps:\n      - id: w\n        run: |\n          {}\n          echo \"node=$SLURMD_NODENAME\" >> \"$GITHUB_OUTPUT\"\n  test:\n    needs: build\n    runs-on: cluster\n    steps:\n      - run: |\n          {}\n          echo \"after ${{{{ needs.build.outputs.node }}}}\"\n",
            cluster.recording("build", 2.0),
            cluster.recording("test", 0.0),
        ),
    );
    let (code, events) = cluster.run();
    let lines = log_lines(&events);
    assert_eq!(code, Some(0), "{lines}");
    assert_eq!(
        results(&events),
        [
            ("build".into(), "success".into()),
            ("test".into(), "success".into())
        ]
    );
    let (build, test) = (
        cluster.seen("build").unwrap(),
        cluster.seen("test").unwrap(),
    );
    assert!(
        test.start >= build.end,
        "the dependant started at {} before its parent ended at {}",
        test.start,
        build.end
    );
    assert_eq!(build.gpus.len(), 1, "{build:?}");
    assert!(lines.contains(&format!("after {}", build.node)), "{lines}");
    // Both were Slurm jobs, the second submitted with the first as its dependency.
    assert!(lines.contains("submitted to Slurm as job"), "{lines}");
    let ids = cluster.slurm_ids();
    assert_eq!(ids.len(), 2);
    assert!(lines.contains(&format!("(after {})", ids[0])), "{lines}");
    assert!(slurm_states(&ids).iter().all(|(_, s, _)| s == "COMPLETED"));
}

#[test]
fn a_matrix_of_two_gpu_cells_is_placed_on_disjoint_gpus() {
    let cluster = Cluster::new("");
    cluster.ws.write(
        "wf.yml",
        &format!(
            "on: workflow_dispatch\njobs:\n  bench:\n    runs-on: cluster\n    gpus: 2\n    strategy:\n      matrix:\n        a: [1, 2, 3, 4]\n        b: [x, y]\n    steps:\n      - run: |\n          {}\n",
            cluster.recording("cell-${{ matrix.a }}-${{ matrix.b }}", 3.0)
        ),
    );
    let (code, events) = cluster.run();
    assert_eq!(code, Some(0), "{}", log_lines(&events));
    let seen = cluster.seen_all();
    assert_eq!(seen.len(), 8, "{seen:?}");
    for s in &seen {
        assert_eq!(s.gpus.len(), 2, "{s:?}");
    }
    let mut overlapping = 0;
    for (i, a) in seen.iter().enumerate() {
        for b in &seen[i + 1..] {
            let together = a.start < b.end && b.start < a.end;
            if together && a.node == b.node {
                overlapping += 1;
                assert!(
                    a.gpus.iter().all(|g| !b.gpus.contains(g)),
                    "{} and {} ran at once on {} with GPUs {:?} and {:?}",
                    a.name,
                    b.name,
                    a.node,
                    a.gpus,
                    b.gpus
                );
            }
        }
    }
    // 8 cells of 2 GPUs fit the 24 GPUs at once: Slurm ran some side by side on one node.
    assert!(
        overlapping > 0,
        "no two cells shared a node at once: {seen:?}"
    );
}

#[test]
fn a_failing_job_cancels_its_dependants() {
    let cluster = Cluster::new("");
    let never = cluster.records.path().join("never");
    cluster.ws.write(
        "wf.yml",
        &format!(
            "on: workflow_dispatch\njobs:\n  a:\n    runs-on: cluster\n    steps:\n      - run: exit 3\n  b:\n    needs: a\n    runs-on: cluster\n    steps:\n      - run: touch {0}\n  c:\n    needs: b\n    runs-on: cluster\n    steps:\n      - run: touch {0}\n",
            never.display()
        ),
    );
    let (code, events) = cluster.run();
    assert_eq!(code, Some(1), "{}", log_lines(&events));
    assert_eq!(
        results(&events),
        [
            ("a".into(), "failure".into()),
            ("b".into(), "skipped".into()),
            ("c".into(), "skipped".into())
        ]
    );
    assert!(!never.exists(), "a dependant of the failed job ran");
    let skipped: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "job_skipped")
        .collect();
    assert!(
        skipped
            .iter()
            .all(|e| e["reason"] == "a job it needs did not succeed"),
        "{skipped:?}"
    );
    // Slurm itself cancelled them: their dependency could never be met.
    let states = slurm_states(&cluster.slurm_ids());
    assert_eq!(
        states.iter().filter(|(_, s, _)| s == "CANCELLED").count(),
        2,
        "{states:?}"
    );
}

#[test]
fn ctrl_c_cancels_every_job_of_the_run_in_slurm() {
    let cluster = Cluster::new("");
    let stopped = cluster.records.path().join("stopped");
    cluster.ws.write(
        "wf.yml",
        &format!(
            "on: workflow_dispatch\njobs:\n  long:\n    runs-on: cluster\n    gpus: 1\n    steps:\n      - run: sleep 300\n      - if: always()\n        run: touch {}\n  after:\n    needs: long\n    runs-on: cluster\n    steps:\n      - run: echo never\n",
            stopped.display()
        ),
    );
    let mut run = cluster.spawn();
    // The first step has started on its node (the events arrive as the node writes them).
    while run.json_line()["type"] != "step_started" {}
    run.signal(Signal::INT);
    let (status, _) = run.wait();
    assert_eq!(status.code(), Some(130));
    let ids = cluster.slurm_ids();
    let states = slurm_states(&ids);
    assert!(
        states
            .iter()
            .all(|(_, s, _)| s != "PENDING" && s != "RUNNING" && s != "COMPLETING"),
        "the run's Slurm jobs after Ctrl-C: {states:?}"
    );
    // The running job was told to stop, not killed: its `always()` step ran on the node.
    assert!(
        stopped.exists(),
        "the cancelled job's always() step did not run"
    );
}

#[test]
fn a_job_past_its_time_limit_is_shown_as_timeout() {
    let cluster = Cluster::new("time-limit = \"1\"\n");
    cluster.ws.write(
        "wf.yml",
        "on: workflow_dispatch\njobs:\n  slow:\n    runs-on: cluster\n    steps:\n      - run: sleep 600\n",
    );
    let (code, events) = cluster.run();
    assert_eq!(code, Some(1));
    let finished = events.iter().find(|e| e["type"] == "job_finished").unwrap();
    assert_eq!(finished["result"], "failure");
    let failure = finished["failure"].as_str().unwrap();
    assert!(failure.contains("ended TIMEOUT"), "{failure}");
    assert!(failure.contains("time limit"), "{failure}");
    let states = slurm_states(&cluster.slurm_ids());
    assert_eq!(states[0].1, "TIMEOUT", "{states:?}");
}

#[test]
fn two_users_runs_share_the_cluster_without_a_gpu_handed_twice() {
    let (one, two) = (Cluster::new(""), Cluster::new(""));
    for (cluster, who) in [(&one, "one"), (&two, "two")] {
        cluster.ws.write(
            "wf.yml",
            &format!(
                "on: workflow_dispatch\njobs:\n  j:\n    runs-on: cluster\n    gpus: 4\n    strategy:\n      matrix:\n        n: [1, 2, 3, 4]\n    steps:\n      - run: |\n          {}\n",
                cluster.recording(&format!("{who}-${{{{ matrix.n }}}}"), 3.0)
            ),
        );
    }
    // The second run is another Unix user's: its own folders, its jobs run as that user.
    let peer = two.give_to("gpuflow-peer");
    // 2 runs × 4 jobs × 4 GPUs = 32 GPUs asked of 24: Slurm queues some.
    let (a, b) = (one.spawn(), two.spawn_as(peer));
    let ((sa, ea), (sb, eb)) = (a.wait(), b.wait());
    assert!(sa.success() && sb.success(), "{ea}\n{eb}");
    let owner = std::os::unix::fs::MetadataExt::uid(
        &std::fs::metadata(two.records.path().join("two-1")).unwrap(),
    );
    assert_eq!(owner, peer.0, "the second user's jobs ran as that user");
    let mut seen = one.seen_all();
    seen.extend(two.seen_all());
    assert_eq!(seen.len(), 8);
    for (i, a) in seen.iter().enumerate() {
        for b in &seen[i + 1..] {
            if a.node == b.node && a.start < b.end && b.start < a.end {
                assert!(
                    a.gpus.iter().all(|g| !b.gpus.contains(g)),
                    "{a:?} and {b:?} held a GPU at once"
                );
            }
        }
    }
}

#[test]
fn a_killed_coordinators_jobs_finish_and_logs_completes_its_record() {
    let cluster = Cluster::new("");
    cluster.ws.write(
        "wf.yml",
        &format!(
            "on: workflow_dispatch\njobs:\n  first:\n    runs-on: cluster\n    gpus: 1\n    steps:\n      - run: |\n          {}\n          echo first-said-this\n  second:\n    needs: first\n    runs-on: cluster\n    steps:\n      - run: |\n          {}\n          echo second-said-this\n",
            cluster.recording("first", 3.0),
            cluster.recording("second", 0.0)
        ),
    );
    let mut run = cluster.spawn();
    let run_id = run.json_line()["run_id"].as_str().unwrap().to_string();
    while run.json_line()["type"] != "step_started" {}
    run.kill();
    // The jobs go on without it: the dependant runs after its parent, on the cluster's own.
    let ids = cluster.slurm_ids();
    crate::support::poll_until(
        "the run's Slurm jobs to end",
        Duration::from_secs(60),
        || slurm_states(&ids),
        |states| states.len() == 2 && states.iter().all(|(_, s, _)| s == "COMPLETED"),
    );
    assert!(
        cluster.seen("second").is_some(),
        "the dependant did not run"
    );
    let out = cluster.command().args(["logs", &run_id]).success();
    assert!(
        out.stderr.contains("completed from the cluster: success"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("first-said-this"), "{}", out.stdout);
    assert!(out.stdout.contains("second-said-this"), "{}", out.stdout);
    assert!(out.stdout.contains("run success"), "{}", out.stdout);
    // The record is whole now: asked again, nothing is redone.
    let again = cluster.command().args(["logs", &run_id]).success();
    assert!(
        !again.stderr.contains("completed from the cluster"),
        "{}",
        again.stderr
    );
    assert_eq!(again.stdout, out.stdout);
    let kept = cluster
        .ws
        .path()
        .join(".gpuflow/runs")
        .join(&run_id)
        .join("coordinator/events.jsonl");
    assert!(
        kept.is_file(),
        "the coordinator's partial record was not kept"
    );
}

#[test]
fn triggered_runs_go_to_the_cluster_many_at_once() {
    let cluster = Cluster::new("");
    let repo = Workspace::repository();
    let config = std::fs::read_to_string(cluster.ws.path().join("gpuflow.toml")).unwrap();
    repo.write("gpuflow.toml", &config);
    for name in ["a", "b", "c"] {
        repo.write(
            &format!("workflows/{name}.yml"),
            &format!(
                "on: push\njobs:\n  j:\n    runs-on: cluster\n    gpus: 1\n    steps:\n      - run: |\n          {}\n",
                cluster.recording(name, 4.0)
            ),
        );
    }
    let sha = repo.commit("workflows");
    let command = || {
        gpuflow()
            .current_dir(repo.path())
            .home(cluster.home.path())
            .env("GPUFLOW_LEASE_DIR", cluster.home.path().join("leases"))
    };
    command()
        .trigger_main_push(Some("0000000000000000000000000000000000000000"), &sha)
        .arg("--no-worker")
        .success();
    // One run at a time for this machine's own GPUs; runs on the cluster are Slurm's to limit.
    let out = command()
        .args(["worker", "--max-runs", "1", "--idle-exit", "1s"])
        .timeout(Duration::from_secs(180))
        .success();
    let runs: Vec<Value> =
        serde_json::from_str(&command().args(["runs", "--json"]).success().stdout).unwrap();
    assert_eq!(runs.len(), 3);
    assert!(
        runs.iter().all(|r| r["state"] == "success"),
        "{runs:?}\n{}",
        out.stderr
    );
    let seen = cluster.seen_all();
    assert_eq!(seen.len(), 3, "{seen:?}");
    let latest_start = seen.iter().map(|s| s.start).fold(f64::MIN, f64::max);
    let earliest_end = seen.iter().map(|s| s.end).fold(f64::MAX, f64::min);
    assert!(
        latest_start < earliest_end,
        "the three runs did not run at once: {seen:?}"
    );
}

#[test]
fn what_a_cluster_cannot_run_is_refused_before_anything_is_submitted() {
    let cluster = Cluster::new("");
    cluster.ws.write(
        "wf.yml",
        "on: workflow_dispatch\njobs:\n  serve:\n    runs-on: cluster\n    steps:\n      - uses: start-container\n        with:\n          name: server\n          image: gpuflow-sim:test\n          keep-warm: 10m\n",
    );
    let out = cluster
        .command()
        .args(["run", "--plain", "wf.yml"])
        .output();
    assert_eq!(out.code(), Some(3), "{}", out.all());
    assert!(out.stderr.contains("wf.yml:10:22"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("`keep-warm` cannot be used on a Slurm host"),
        "{}",
        out.stderr
    );
    let preflight = cluster
        .command()
        .args(["run", "--plain", "--preflight-only", "wf.yml"])
        .output();
    assert!(
        preflight
            .stderr
            .contains("`--preflight-only` cannot run on a Slurm host"),
        "{}",
        preflight.stderr
    );
    // A run goes to a cluster whole.
    cluster.ws.write(
        "wf.yml",
        "on: workflow_dispatch\njobs:\n  a:\n    runs-on: cluster\n    steps:\n      - run: 'true'\n  b:\n    runs-on: local\n    steps:\n      - run: 'true'\n",
    );
    let mixed = cluster
        .command()
        .args(["run", "--plain", "wf.yml"])
        .output();
    assert_eq!(mixed.code(), Some(3), "{}", mixed.all());
    assert!(
        mixed
            .stderr
            .contains("job `b` runs on `local`, but job `a` runs on the Slurm cluster `cluster`"),
        "{}",
        mixed.stderr
    );
    // Nothing reached the shared folder: nothing was submitted.
    assert_eq!(std::fs::read_dir(cluster.shared.path()).unwrap().count(), 0);
    // `gc` cleans engines; a cluster is not one it reaches.
    let gc = cluster.command().args(["gc", "--host", "cluster"]).output();
    assert_eq!(gc.code(), Some(2), "{}", gc.all());
    assert!(
        gc.stderr.contains("`cluster` is a Slurm cluster"),
        "{}",
        gc.stderr
    );
}

#[test]
fn max_parallel_holds_on_the_cluster() {
    let cluster = Cluster::new("");
    cluster.ws.write(
        "wf.yml",
        &format!(
            "on: workflow_dispatch\njobs:\n  j:\n    runs-on: cluster\n    strategy:\n      max-parallel: 2\n      matrix:\n        n: [1, 2, 3, 4, 5]\n    steps:\n      - run: |\n          {}\n",
            cluster.recording("cell-${{ matrix.n }}", 2.0)
        ),
    );
    let (code, events) = cluster.run();
    assert_eq!(code, Some(0), "{}", log_lines(&events));
    let seen = cluster.seen_all();
    assert_eq!(seen.len(), 5);
    // At each cell's start, how many cells run (itself included).
    for s in &seen {
        let running = seen
            .iter()
            .filter(|o| o.start <= s.start && s.start < o.end)
            .count();
        assert!(
            running <= 2,
            "{running} cells ran at once at {}: {seen:?}",
            s.start
        );
    }
}

#[test]
fn runs_shows_a_triggered_run_whose_coordinator_was_killed_as_its_jobs_ended() {
    let cluster = Cluster::new("");
    let repo = Workspace::repository();
    let config = std::fs::read_to_string(cluster.ws.path().join("gpuflow.toml")).unwrap();
    repo.write("gpuflow.toml", &config);
    repo.write(
        "workflows/a.yml",
        &format!(
            "on: push\njobs:\n  j:\n    runs-on: cluster\n    steps:\n      - run: |\n          {}\n",
            cluster.recording("a", 4.0)
        ),
    );
    let sha = repo.commit("workflow");
    let command = || {
        gpuflow()
            .current_dir(repo.path())
            .home(cluster.home.path())
            .env("GPUFLOW_LEASE_DIR", cluster.home.path().join("leases"))
    };
    command()
        .trigger_main_push(Some("0000000000000000000000000000000000000000"), &sha)
        .arg("--no-worker")
        .success();
    let runs = || -> Vec<Value> {
        serde_json::from_str(&command().args(["runs", "--json"]).success().stdout).unwrap()
    };
    let worker = command()
        .args(["worker", "--idle-exit", "2s"])
        .into_std()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut worker = Running::new(worker);
    // The job runs on its node; its coordinator is the worker's `gpuflow run`.
    crate::support::wait_until(
        "the job to start on the cluster",
        Duration::from_secs(60),
        || cluster.seen("a").is_some(),
    );
    let pid = runs()[0]["process"]["pid"].as_u64().unwrap();
    crate::support::process::signal(pid as i32, Signal::KILL).unwrap();
    crate::support::wait_until("the worker to end", Duration::from_secs(60), || {
        worker.try_wait().is_some()
    });
    // The job ends on the cluster; `gpuflow runs` then says how the run really ended.
    let ended = crate::support::poll_until(
        "the run to be completed from the cluster",
        Duration::from_secs(60),
        || runs()[0].clone(),
        |run| run["state"] == "success",
    );
    assert!(
        ended["message"]
            .as_str()
            .unwrap()
            .contains("completed from there"),
        "{ended}"
    );
    assert!(cluster.seen("a").unwrap().end.is_finite());
}
