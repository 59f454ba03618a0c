//! Triggers end to end, with real git repositories: a bare "GPU node" repository pushed to
//! over `file://` with gpuflow's `post-receive` hook, the SQLite queue, the worker running
//! the queued runs (host steps here; the crash test uses Docker), `runs`/`logs`/`cancel`, and
//! hooks chained to the ones a repository already had.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::process::signal;
use crate::support::{
    Signal, Workspace, command::Gpuflow, git, gpuflow, poll_until, text, wait_until,
};

/// A bare node repository with gpuflow's hook, a developer clone of it, and a private
/// `GPUFLOW_HOME` (queue, worker lock). Dropping it stops the worker it started.
pub(crate) struct Node {
    bare: Workspace,
    dev: Workspace,
    home: Workspace,
}

const IDLE_EXIT: &str = "3s";

impl Node {
    /// `workflows` are committed in the clone (not pushed yet), beside `configs/a.toml` and
    /// `README.md`.
    pub(crate) fn new(workflows: &[(&str, &str)]) -> Self {
        let node = Self {
            bare: Workspace::empty(),
            dev: Workspace::repository(),
            home: Workspace::empty(),
        };
        node.bare.git(&["init", "-q", "--bare"]);
        // The hooks run plain `git commit` and `git push`: the clone has an identity.
        for (k, v) in [("user.email", "dev@example.com"), ("user.name", "dev")] {
            node.dev.git(&["config", k, v]);
        }
        let url = format!("file://{}", node.bare().display());
        node.dev.git(&["remote", "add", "node", &url]);
        for (name, text) in workflows {
            node.write(&format!("workflows/{name}"), text);
        }
        node.write("configs/a.toml", "a = 1\n");
        node.write("README.md", "hello\n");
        node.commit("initial");
        node
    }

    fn bare(&self) -> PathBuf {
        self.bare.path().to_path_buf()
    }

    pub(crate) fn dev(&self) -> PathBuf {
        self.dev.path().to_path_buf()
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.home.path().to_path_buf()
    }

    fn write(&self, path: &str, text: &str) {
        self.dev.write(path, text);
    }

    fn commit(&self, message: &str) {
        self.dev.commit(message);
    }

    fn gpuflow(&self) -> Gpuflow {
        self.dev
            .gpuflow()
            .home(self.home())
            .env("GPUFLOW_WORKER_IDLE_EXIT", IDLE_EXIT)
    }

    pub(crate) fn install_node_hook(&self) {
        self.gpuflow()
            .args(["hooks", "install", "--repo"])
            .arg(self.bare())
            .success();
    }

    /// `git push node <refspec>` from the clone, with the test's `GPUFLOW_HOME` (the hook
    /// runs in the push's environment).
    pub(crate) fn push(&self, refspec: &str) -> std::process::Output {
        let out = std::process::Command::new("git")
            .args(["push", "-q", "node", refspec])
            .current_dir(self.dev())
            .env("GPUFLOW_HOME", self.home())
            .env("GPUFLOW_WORKER_IDLE_EXIT", IDLE_EXIT)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git push failed: {}",
            text(&out.stderr)
        );
        out
    }

    /// `gpuflow logs -f ID`: the run's output, followed to its end (a minute at most).
    fn follow_logs(&self, id: &str) -> String {
        self.gpuflow()
            .args(["logs", "-f", id])
            .timeout(Duration::from_secs(60))
            .output()
            .stdout
    }

    pub(crate) fn runs(&self) -> Vec<Value> {
        let out = self.gpuflow().args(["runs", "--json"]).success();
        serde_json::from_str::<Vec<Value>>(&out.stdout).unwrap()
    }

    fn workflows_of_runs(&self) -> Vec<(String, String)> {
        self.runs()
            .iter()
            .map(|r| {
                (
                    r["workflow"].as_str().unwrap().to_string(),
                    r["ref"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    pub(crate) fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        poll_until(what, timeout, || self.runs(), |runs| done(runs))
    }

    fn worker_pid(&self) -> Option<u32> {
        let home = gpuflow::trigger::GpuflowHome::at(self.home());
        gpuflow::worker::worker_running(&home)
            .then(|| gpuflow::worker::worker_pid(&home))
            .flatten()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(pid) = self.worker_pid() {
            let _ = signal(pid as i32, Signal::TERM);
            // The worker cancels its run and leaves; give it a moment before the folder goes.
            let deadline = Instant::now() + Duration::from_secs(20);
            while self.worker_pid().is_some() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// The commit `what` names in `dir`.
fn rev(dir: &std::path::Path, what: &str) -> String {
    git(dir, &["rev-parse", what])
}

const ON_CONFIGS: &str =
    "on:\n  push:\n    paths: ['configs/**']\njobs:\n  a:\n    steps:\n      - run: echo configs\n";
const NOT_ON_CONFIGS: &str = "on:\n  push:\n    paths-ignore: ['configs/**']\njobs:\n  a:\n    steps:\n      - run: echo not-configs\n";
const ON_TAGS: &str =
    "on:\n  push:\n    tags: ['v[0-9]*']\njobs:\n  a:\n    steps:\n      - run: echo tag\n";
const ON_MAIN: &str =
    "on:\n  push:\n    branches: [main]\njobs:\n  a:\n    steps:\n      - run: echo main\n";

#[test]
fn a_push_touching_configs_queues_the_paths_workflow_and_not_the_paths_ignore_one() {
    let node = Node::new(&[("configs.yml", ON_CONFIGS), ("other.yml", NOT_ON_CONFIGS)]);
    node.push("HEAD:refs/heads/main"); // before the hook: nothing queued
    node.install_node_hook();
    assert!(node.runs().is_empty());

    node.write("configs/a.toml", "a = 2\n");
    node.commit("tune");
    node.push("HEAD:refs/heads/main");
    assert_eq!(
        node.workflows_of_runs(),
        [(
            "workflows/configs.yml".to_string(),
            "refs/heads/main".to_string()
        )]
    );

    node.write("README.md", "more\n");
    node.commit("docs");
    node.push("HEAD:refs/heads/main");
    let queued: Vec<String> = node.workflows_of_runs().into_iter().map(|w| w.0).collect();
    assert_eq!(queued, ["workflows/configs.yml", "workflows/other.yml"]);
}

#[test]
fn a_tag_push_matches_tags_and_not_a_branch_only_workflow() {
    let node = Node::new(&[("tags.yml", ON_TAGS), ("main.yml", ON_MAIN)]);
    node.install_node_hook();
    node.push("HEAD:refs/heads/main");
    git(&node.dev(), &["tag", "v1.0"]);
    git(&node.dev(), &["tag", "nightly"]);
    node.push("refs/tags/v1.0");
    node.push("refs/tags/nightly");
    assert_eq!(
        node.workflows_of_runs(),
        [
            (
                "workflows/main.yml".to_string(),
                "refs/heads/main".to_string()
            ),
            (
                "workflows/tags.yml".to_string(),
                "refs/tags/v1.0".to_string()
            ),
        ]
    );
}

#[test]
fn the_worker_runs_the_queued_run_from_a_checkout_with_the_push_as_github() {
    let workflow = r#"
name: show
on: push
jobs:
  show:
    steps:
      - run: |
          echo "event=${{ github.event_name }} ref=${{ github.ref }} name=${{ gpuflow.ref_name }} type=${{ github.ref_type }}"
          echo "sha=${{ github.sha }} before=${{ github.event.before }}"
          echo "files=${{ join(github.event.changed_files, ',') }}"
          echo "commits=${{ github.event.commits[0].message }}"
          cat configs/a.toml
"#;
    let node = Node::new(&[("show.yml", workflow)]);
    node.push("HEAD:refs/heads/main");
    let before = rev(&node.dev(), "HEAD");
    node.install_node_hook();
    node.write("configs/a.toml", "a = 42\n");
    git(&node.dev(), &["rm", "-q", "README.md"]);
    node.commit("tune a");
    let after = rev(&node.dev(), "HEAD");
    node.push("HEAD:refs/heads/main");

    // The hook queued it before the push returned; `logs -f` follows it to its end.
    let id = node.runs()[0]["id"].as_str().unwrap().to_string();
    let id = id.as_str();
    let logs = node.follow_logs(id);
    let runs = node.runs();
    assert_eq!(runs[0]["state"], "success", "{logs}");
    assert!(
        logs.contains("event=push ref=refs/heads/main name=main type=branch"),
        "{logs}"
    );
    assert!(
        logs.contains(&format!("sha={after} before={before}")),
        "{logs}"
    );
    // A deleted file is a changed file.
    assert!(logs.contains("files=README.md,configs/a.toml"), "{logs}");
    assert!(logs.contains("commits=tune a"), "{logs}");
    assert!(
        logs.contains("a = 42"),
        "the checkout is of the pushed commit: {logs}"
    );
    // Logs stay with the node repository; the checkout is gone.
    assert!(
        node.bare()
            .join(".gpuflow/runs")
            .join(id)
            .join("events.jsonl")
            .is_file()
    );
    assert!(!node.home().join("work").join(id).exists());
}

/// A triggered run reads `[vars]` of the pushed commit's `gpuflow.toml`, as a run by hand in
/// that checkout would: in its steps, and already in the `concurrency` group it is queued in.
#[test]
fn a_triggered_run_reads_vars_from_the_commits_gpuflow_toml() {
    let workflow = "on: push\nconcurrency: bench-${{ vars.POOL }}\njobs:\n  show:\n    steps:\n      - run: echo \"model=${{ vars.MODEL }}\"\n";
    let node = Node::new(&[("show.yml", workflow)]);
    node.push("HEAD:refs/heads/main");
    node.install_node_hook();
    node.write(
        "gpuflow.toml",
        "[vars]\nPOOL = \"l40s\"\nMODEL = \"llama-3-8b\"\n",
    );
    node.commit("vars");
    node.push("HEAD:refs/heads/main");

    let run = &node.runs()[0];
    assert_eq!(run["concurrency_group"], "bench-l40s", "{run:#}");
    let id = run["id"].as_str().unwrap().to_string();
    let logs = node.follow_logs(&id);
    assert_eq!(node.runs()[0]["state"], "success", "{logs}");
    assert!(logs.contains("model=llama-3-8b"), "{logs}");
}

#[test]
fn an_annotated_tag_runs_the_commit_it_tags() {
    let workflow = "on:\n  push:\n    tags: ['v*']\njobs:\n  show:\n    steps:\n      - run: echo \"sha=${{ github.sha }} after=${{ github.event.after }}\"\n";
    let node = Node::new(&[("release.yml", workflow)]);
    node.push("HEAD:refs/heads/main");
    node.install_node_hook();
    git(&node.dev(), &["tag", "-a", "v2.0", "-m", "release 2.0"]);
    let commit = rev(&node.dev(), "HEAD");
    let tag_object = rev(&node.dev(), "v2.0");
    assert_ne!(
        commit, tag_object,
        "an annotated tag is an object of its own"
    );
    node.push("refs/tags/v2.0");

    let id = node.runs()[0]["id"].as_str().unwrap().to_string();
    let logs = node.follow_logs(&id);
    assert_eq!(node.runs()[0]["state"], "success", "{logs}");
    // As on GitHub: `github.sha` is the tagged commit, the payload keeps the tag object.
    assert!(
        logs.contains(&format!("sha={commit} after={tag_object}")),
        "{logs}"
    );
}

#[test]
fn git_push_returns_before_the_run_finishes() {
    let slow = "on: push\njobs:\n  a:\n    steps:\n      - run: sleep 5\n";
    let node = Node::new(&[("slow.yml", slow)]);
    node.install_node_hook();
    let started = Instant::now();
    node.push("HEAD:refs/heads/main");
    let pushed_in = started.elapsed();
    let runs = node.runs();
    assert_eq!(runs.len(), 1);
    assert!(
        pushed_in < Duration::from_secs(4) && runs[0]["state"] != "success",
        "the push took {pushed_in:?} and the run is {}",
        runs[0]["state"]
    );
    node.wait_for("the run to succeed", Duration::from_secs(60), |runs| {
        runs[0]["state"] == "success"
    });
}

#[test]
fn a_hook_already_there_still_runs_and_uninstall_puts_it_back() {
    let node = Node::new(&[(
        "any.yml",
        "on: push\njobs:\n  a:\n    steps:\n      - run: 'true'\n",
    )]);
    let hook = node.bare().join("hooks/post-receive");
    let seen = node.home().join("seen");
    let original = format!("#!/bin/sh\ncat >> '{}'\n", seen.display());
    std::fs::write(&hook, &original).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let out = node
        .gpuflow()
        .args(["hooks", "install", "--repo"])
        .arg(node.bare())
        .output();
    assert!(out.stdout.contains("kept as"), "{}", out.stdout);
    // Installing twice rewrites gpuflow's hook; it does not chain gpuflow to itself.
    node.gpuflow()
        .args(["hooks", "install", "--repo"])
        .arg(node.bare())
        .status(0);
    node.push("HEAD:refs/heads/main");
    let head = rev(&node.dev(), "HEAD");
    let seen_text = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(seen_text.lines().count(), 1, "{seen_text}");
    assert!(
        seen_text.contains(&format!("{head} refs/heads/main")),
        "{seen_text}"
    );
    assert_eq!(node.runs().len(), 1);

    node.gpuflow()
        .args(["hooks", "uninstall", "--repo"])
        .arg(node.bare())
        .status(0);
    assert_eq!(std::fs::read_to_string(&hook).unwrap(), original);
    assert!(
        !node
            .bare()
            .join("hooks/post-receive.gpuflow-chained")
            .exists()
    );
}

#[test]
fn pre_push_with_wait_fails_the_push_when_the_run_fails() {
    let node = Node::new(&[(
        "gate.yml",
        "on: push\njobs:\n  gate:\n    steps:\n      - run: test ! -e configs/broken\n",
    )]);
    node.gpuflow()
        .args(["hooks", "install", "--hook", "pre-push", "--wait"])
        .status(0);
    node.push("HEAD:refs/heads/main");
    assert_eq!(node.runs()[0]["state"], "success");

    node.write("configs/broken", "x");
    node.commit("break it");
    let out = std::process::Command::new("git")
        .args(["push", "-q", "node", "HEAD:refs/heads/main"])
        .current_dir(node.dev())
        .env("GPUFLOW_HOME", node.home())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "the push went through: {stderr}");
    assert!(stderr.contains("failure"), "{stderr}");
    // The node did not get the commit.
    let remote = git(&node.bare(), &["rev-parse", "refs/heads/main"]);
    assert_ne!(remote.trim(), rev(&node.dev(), "HEAD"));
}

#[test]
fn a_commit_with_the_post_commit_hook_queues_a_run() {
    let node = Node::new(&[("on-commit.yml", ON_CONFIGS)]);
    node.gpuflow().args(["hooks", "install"]).status(0);
    assert!(node.dev().join(".git/hooks/post-commit").is_file());
    node.write("configs/b.toml", "b = 1\n");
    git(&node.dev(), &["add", "-A"]);
    let out = std::process::Command::new("git")
        .args(["commit", "-q", "-m", "b"])
        .current_dir(node.dev())
        .env("GPUFLOW_HOME", node.home())
        .env("GPUFLOW_WORKER_IDLE_EXIT", IDLE_EXIT)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let runs = node.runs();
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0]["sha"], rev(&node.dev(), "HEAD"));
    // Logs of a work-tree repository go to its own `.gpuflow/`.
    let log_dir = runs[0]["log_dir"].as_str().unwrap();
    assert!(
        log_dir.starts_with(&node.dev().canonicalize().unwrap().display().to_string()),
        "{log_dir}"
    );
}

#[test]
fn a_newer_run_of_a_concurrency_group_supersedes_the_queued_one() {
    let grouped = "on: push\nconcurrency: bench-${{ github.ref }}\njobs:\n  a:\n    steps:\n      - run: 'true'\n";
    let node = Node::new(&[("grouped.yml", grouped)]);
    let first = rev(&node.dev(), "HEAD");
    node.write("configs/a.toml", "a = 3\n");
    node.commit("next");
    let second = rev(&node.dev(), "HEAD");
    let trigger = |before: &str, after: &str| {
        let out = node
            .gpuflow()
            .trigger_main_push(Some(before), after)
            .args(["--no-worker", "--json"])
            .output();
        assert!(out.status.success(), "{}", out.stderr);
        // JSON Lines: one object per workflow.
        out.stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let zero = "0".repeat(40);
    let a = trigger(&zero, &first);
    let b = trigger(&first, &second);
    let a_id = a[0]["run_id"].as_str().unwrap();
    assert_eq!(b[0]["superseded"][0], a_id);
    let runs = node.runs();
    assert_eq!(runs[0]["state"], "cancelled");
    assert!(
        runs[0]["message"]
            .as_str()
            .unwrap()
            .contains("superseded by run")
    );
    assert_eq!(runs[1]["state"], "queued");
    assert_eq!(runs[1]["concurrency_group"], "bench-refs/heads/main");

    // `cancel` takes a queued run out; a second cancel says it already ended (exit 1).
    let b_id = b[0]["run_id"].as_str().unwrap();
    node.gpuflow().args(["cancel", b_id]).status(0);
    node.gpuflow().args(["cancel", b_id]).status(1);
    assert_eq!(node.runs()[1]["state"], "cancelled");
}

#[test]
fn cancel_stops_a_running_run() {
    let node = Node::new(&[(
        "long.yml",
        "on: push\njobs:\n  a:\n    steps:\n      - run: sleep 120\n",
    )]);
    node.install_node_hook();
    node.push("HEAD:refs/heads/main");
    let runs = node.wait_for("the run to start", Duration::from_secs(30), |r| {
        r[0]["state"] == "running"
    });
    let id = runs[0]["id"].as_str().unwrap().to_string();
    node.gpuflow().args(["cancel", &id]).status(0);
    let runs = node.wait_for("the run to be cancelled", Duration::from_secs(30), |r| {
        r[0]["state"] != "running"
    });
    assert_eq!(runs[0]["state"], "cancelled", "{runs:#?}");
}

#[test]
fn bad_trigger_arguments_say_what_is_wrong() {
    let node = Node::new(&[]);
    let out = node
        .gpuflow()
        .args([
            "trigger", "--event", "push", "--ref", "main", "--before", "x", "--after", "y",
        ])
        .output();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stderr.contains("`main` is not a full ref"),
        "{}",
        out.stderr
    );
    let out = node
        .gpuflow()
        .trigger_main_push(None, &"1".repeat(40))
        .output();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stderr.contains("is not in the repository"),
        "{}",
        out.stderr
    );
    let out = node.gpuflow().args(["logs", "nope"]).output();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.contains("no run `nope`"), "{}", out.stderr);
    let out = node
        .gpuflow()
        .args(["hooks", "install", "--hook", "post-commit", "--wait"])
        .output();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.contains("pre-push"), "{}", out.stderr);
}

/// The worker and its `gpuflow run` are killed together with SIGKILL (their process group,
/// as a crash of the whole service would) while a container step runs: nothing can clean up. The next worker marks the run failed and removes the
/// container.
#[tokio::test]
async fn killing_the_worker_mid_run_leaves_no_run_running_and_no_container() {
    let Some(docker) = crate::support::docker::connect_or_skip().await else {
        return;
    };
    let node_dir = Workspace::empty();
    let ready = node_dir.path().join("ready");
    let workflow = format!(
        "on: push\njobs:\n  j:\n    steps:\n      - uses: start-container\n        with: {{ name: box, image: gpuflow-base:test, command: sleep 300 }}\n      - run: touch '{}'; sleep 120\n",
        ready.display()
    );
    let node = Node::new(&[("box.yml", &workflow)]);
    node.push("HEAD:refs/heads/main");
    let head = rev(&node.dev(), "HEAD");
    let mut worker = spawn_worker(&node);
    node.gpuflow()
        .trigger_main_push(None, &head)
        .arg("--no-worker")
        .status(0);
    wait_until("the step to start", Duration::from_secs(60), || {
        ready.exists()
    });
    let run = node.runs().remove(0);
    let run_id = run["id"].as_str().unwrap().to_string();
    assert!(run["process"]["pid"].as_u64().is_some(), "{run:#?}");
    let group = -i32::try_from(worker.id()).unwrap();
    assert!(signal(group, Signal::KILL).is_ok());
    worker.wait().unwrap();
    assert_eq!(
        docker.run_containers(&run_id).await.unwrap().len(),
        1,
        "nothing was left to sweep"
    );
    assert_eq!(node.runs()[0]["state"], "running");
    let table = node.gpuflow().args(["runs"]).output().stdout;
    assert!(table.contains("its worker is gone"), "{table}");

    let out = node
        .gpuflow()
        .args(["worker", "--idle-exit", "1s"])
        .output();
    let left = docker.run_containers(&run_id).await.unwrap();
    docker.remove_run(&run_id).await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert_eq!(left, Vec::<String>::new(), "the container survived");
    let run = node.runs().remove(0);
    assert_eq!(run["state"], "failure");
    let message = run["message"].as_str().unwrap();
    assert!(
        message.contains("stopped before it ended") && message.contains("1 container"),
        "{message}"
    );
}

/// A worker started by the test (not detached), in a process group of its own that its
/// `gpuflow run` children join, so the test can kill them all at once.
fn spawn_worker(node: &Node) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    gpuflow()
        .current_dir(node.dev())
        .home(node.home())
        .arg("worker")
        .into_std()
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(node.home().join("worker.err")).unwrap())
        .spawn()
        .unwrap()
}

#[test]
fn validate_points_at_a_bad_filter_pattern() {
    let dir = Workspace::empty().file(
        "w.yml",
        "on:\n  push:\n    branches: [main, 'release/[0-9']\njobs:\n  a:\n    steps:\n      - run: 'true'\n",
    );
    let out = dir
        .gpuflow()
        .args(["validate", "w.yml", "--color", "never"])
        .output();
    let stderr = out.stderr.clone() + &out.stdout;
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("w.yml:3:31"), "{stderr}");
    assert!(stderr.contains("never closed"), "{stderr}");
}

#[test]
fn cancel_in_progress_stops_the_running_run_of_the_group_for_the_newer_one() {
    let grouped = "on: push\nconcurrency:\n  group: gpu\n  cancel-in-progress: true\njobs:\n  a:\n    steps:\n      - run: sleep 120\n";
    let node = Node::new(&[("grouped.yml", grouped)]);
    node.install_node_hook();
    node.push("HEAD:refs/heads/main");
    let runs = node.wait_for("the first run to start", Duration::from_secs(30), |r| {
        r[0]["state"] == "running"
    });
    let first = runs[0]["id"].as_str().unwrap().to_string();
    node.write("configs/a.toml", "a = 9\n");
    node.commit("newer");
    node.push("HEAD:refs/heads/main");
    let runs = node.wait_for("the newer run to take over", Duration::from_secs(30), |r| {
        r.len() == 2 && r[0]["state"] == "cancelled" && r[1]["state"] == "running"
    });
    assert_eq!(runs[0]["id"], first.as_str());
    let why = runs[0]["message"].as_str().unwrap();
    assert!(
        why.contains(&format!(
            "superseded by run {}",
            runs[1]["id"].as_str().unwrap()
        )),
        "{why}"
    );
}

/// A run left "running" by a worker that is gone (it died, or gave up recording the end):
/// `trigger --wait` notices, marks it failed and returns instead of waiting for ever.
#[test]
fn wait_returns_when_the_runs_worker_is_gone_without_recording_its_end() {
    let node = Node::new(&[(
        "w.yml",
        "on: push\njobs:\n  a:\n    steps:\n      - run: 'true'\n",
    )]);
    let sha = rev(&node.dev(), "HEAD");
    let mut waiter = gpuflow()
        .current_dir(node.dev())
        .home(node.home())
        .trigger_main_push(None, &sha)
        .args(["--no-worker", "--wait"])
        .spawn();
    node.wait_for("the run to be queued", Duration::from_secs(30), |r| {
        r.len() == 1
    });
    // A worker claimed it and died before recording its end: a pid that no longer runs.
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let queue = gpuflow::trigger::Queue::open(&node.home().join("queue.db")).unwrap();
    let id = node.runs()[0]["id"].as_str().unwrap().to_string();
    let conn = rusqlite::Connection::open(queue.path()).unwrap();
    conn.execute(
        "UPDATE runs SET state = 'running', started_at = 1, worker_pid = ?1 WHERE id = ?2",
        rusqlite::params![dead_pid, id],
    )
    .unwrap();
    wait_until(
        "`gpuflow trigger --wait` to end, though the run's worker is gone",
        Duration::from_secs(30),
        || waiter.try_wait().is_some(),
    );
    let (status, stderr) = waiter.wait();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is gone"), "{stderr}");
    let runs = node.runs();
    assert_eq!(runs[0]["state"], "failure", "{runs:#?}");
}
