//! What the CLI says matches what it does and what docs/ promise (issue "Docs that cannot
//! drift"): every view names the run's log folder on its first line, `gpuflow logs` finds a
//! run started by hand, `trigger --json` is one object per workflow a line, every bad `paths`
//! pattern is reported, `hooks install --wait`'s help names the hook it writes, and an
//! ambiguous run id counts what it lists. Real `gpuflow` processes in real git repositories;
//! host steps only, no Docker.

use std::ops::Deref;
use std::path::Path;

use serde_json::Value;

use crate::support::{Output, Workspace, command::Gpuflow, gpuflow};

/// A git repository (branch `main`) with a private `GPUFLOW_HOME` beside it.
struct Repo {
    repo: Workspace,
    home: Workspace,
}

impl Deref for Repo {
    type Target = Workspace;

    fn deref(&self) -> &Workspace {
        &self.repo
    }
}

impl Repo {
    fn new() -> Self {
        Self {
            repo: Workspace::repository(),
            home: Workspace::empty(),
        }
    }

    /// Runs [`HOST_STEPS`] with `--plain`; what it printed.
    fn run_host_steps(&self) -> String {
        self.write("w.yml", HOST_STEPS);
        self.gpuflow()
            .args(["run", "--plain", "w.yml"])
            .success()
            .stdout
    }

    /// `gpuflow` in `dir`, with the repository's home.
    fn gpuflow_in(&self, dir: &Path) -> Gpuflow {
        gpuflow().current_dir(dir).home(self.home.path())
    }

    fn gpuflow(&self) -> Gpuflow {
        self.gpuflow_in(self.path())
    }

    /// `gpuflow trigger --no-worker --json` for a push of `main` from nothing to `after`.
    fn trigger(&self, after: &str) -> Output {
        self.gpuflow()
            .trigger_main_push(None, after)
            .args(["--no-worker", "--json"])
            .output()
    }
}

/// The pauses keep the order of the stdout and stderr lines one: lines of the two pipes that
/// arrive at the same instant have no order of their own, in the live view or the replay.
const HOST_STEPS: &str = "name: hello
on: [workflow_dispatch, push]
jobs:
  greet:
    steps:
      - name: say
        run: |
          echo one
          sleep 0.2
          echo two >&2
          sleep 0.2
          echo three
      - name: fail softly
        continue-on-error: true
        run: echo four; exit 3
  after:
    needs: greet
    steps:
      - run: echo five
";

/// Plain lines and `--json` start with the run's log folder, as the live view's header does
/// (its board is tested in `ui::live`): where the results go is known before the run ends.
#[test]
fn the_first_line_of_every_view_names_the_log_folder() {
    let repo = Repo::new();
    let stdout = repo.run_host_steps();
    let first = stdout.lines().next().unwrap();
    let dir = first
        .split_once("(logs: ")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no log folder on the first line: {stdout}"));
    assert!(Path::new(dir).join("events.jsonl").is_file(), "{first}");

    let out = repo.gpuflow().args(["run", "--json", "w.yml"]).output();
    assert!(out.status.success(), "{}", out.stderr);
    let stdout = &out.stdout;
    let first: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "run_started", "{stdout}");
    let dir = first["log_dir"].as_str().unwrap();
    assert!(Path::new(dir).join("events.jsonl").is_file(), "{first}");
}

/// Defect: `gpuflow logs <id of a manual run>` said "no run in the queue". It replays the run's
/// folder as `gpuflow run --plain` printed it, from anywhere in the repository, by a unique
/// start of the id.
#[test]
fn logs_replays_a_run_started_by_hand_as_it_was_printed() {
    let repo = Repo::new();
    let printed = repo.run_host_steps();
    let run_id = printed
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("{printed}"))
        .to_string();

    std::fs::create_dir(repo.path().join("sub")).unwrap();
    let out = repo
        .gpuflow_in(&repo.path().join("sub"))
        .args(["logs", &run_id[..20]])
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(".gpuflow/runs/{run_id}")),
        "says which folder it read: {}",
        out.stderr
    );
    // The same lines, less the summary table (its job lines are above it already).
    let table: Vec<&str> = printed
        .lines()
        .skip_while(|l| *l != "summary:")
        .take_while(|l| !l.starts_with("headline: "))
        .collect();
    assert_eq!(table.len(), 3, "{printed}");
    let want: Vec<&str> = printed.lines().filter(|l| !table.contains(l)).collect();
    let replayed = &out.stdout;
    let got: Vec<&str> = replayed.lines().collect();
    assert_eq!(got, want, "replayed:\n{replayed}\nprinted:\n{printed}");
    assert!(replayed.contains("[greet] say | two"), "{replayed}");
    assert!(
        replayed.contains("[greet] fail softly | gpuflow: "),
        "gpuflow's own lines: {replayed}"
    );

    // Neither queued nor stored: one error that says where a manual run's logs are.
    let out = repo.gpuflow().args(["logs", "19990101"]).output();
    assert_eq!(out.status.code(), Some(2));
    let err = &out.stderr;
    assert!(
        err.contains("no run `19990101` in the queue, nor under `.gpuflow/runs/`"),
        "{err}"
    );
}

/// docs/triggers.md promises one object per workflow: JSON Lines, as each is decided.
#[test]
fn trigger_json_is_one_object_per_workflow_a_line() {
    let repo = Repo::new();
    let on_push = "on: push\njobs:\n  a:\n    steps:\n      - run: 'true'\n";
    repo.write("workflows/one.yml", on_push);
    repo.write("workflows/two.yml", on_push);
    repo.write(
        "workflows/manual.yml",
        "on: workflow_dispatch\njobs:\n  a:\n    steps:\n      - run: 'true'\n",
    );
    let head = repo.commit("c");
    let out = repo.trigger(&head);
    assert!(out.status.success(), "{}", out.stderr);
    let stdout = &out.stdout;
    let objects: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(objects.len(), 3, "{stdout}");
    for o in &objects {
        assert!(o.is_object(), "{o}");
        assert_eq!(o["ref"], "refs/heads/main");
    }
    let results: Vec<(&str, &str)> = objects
        .iter()
        .map(|o| {
            (
                o["workflow"].as_str().unwrap(),
                o["result"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        results.contains(&("workflows/one.yml", "queued")),
        "{stdout}"
    );
    assert!(
        results.contains(&("workflows/two.yml", "queued")),
        "{stdout}"
    );
    assert!(
        results.contains(&("workflows/manual.yml", "not-on-push")),
        "{stdout}"
    );
}

/// Three bad `paths` patterns are three errors, each at its line, in `validate` and when a
/// push is matched against them.
#[test]
fn every_bad_paths_pattern_is_reported_at_its_place() {
    let repo = Repo::new();
    let workflow = "on:
  push:
    paths:
      - 'a[b'
      - 'src/**'
      - 'c[d'
      - '[]'
jobs:
  a:
    steps:
      - run: 'true'
";
    repo.write("workflows/bad.yml", workflow);
    let head = repo.commit("c");
    let located = |err: &str| {
        ["bad.yml:4:11", "bad.yml:6:11", "bad.yml:7:10"]
            .iter()
            .all(|at| err.contains(at))
    };
    let out = repo
        .gpuflow()
        .args(["validate", "workflows/bad.yml"])
        .output();
    assert_eq!(out.status.code(), Some(1));
    let err = &out.stderr;
    assert_eq!(
        err.matches("error: `on.push.paths` pattern").count(),
        3,
        "{err}"
    );
    assert!(located(err), "{err}");

    let out = repo.trigger(&head);
    assert!(out.status.success(), "{}", out.stderr);
    let err = &out.stderr;
    assert_eq!(
        err.matches("error: `on.push.paths` pattern").count(),
        3,
        "{err}"
    );
    assert!(located(err), "{err}");
    let line: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(line["result"], "invalid");
}

/// `--wait` alone writes `pre-push` (the one hook that can wait), and `--help` says so.
#[test]
fn hooks_install_wait_writes_pre_push_as_its_help_says() {
    let repo = Repo::new();
    let help = repo.gpuflow().args(["hooks", "install", "--help"]).output();
    // Wrapped to the terminal's width: compared word by word.
    let help = help.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("with `--wait`, `pre-push`"),
        "the default with --wait: {help}"
    );
    let out = repo.gpuflow().args(["hooks", "install", "--wait"]).output();
    assert!(out.status.success(), "{}", out.stderr);
    let hooks = repo.path().join(".git/hooks");
    assert!(hooks.join("pre-push").is_file(), "{}", out.stdout);
    assert!(!hooks.join("post-commit").exists());
    let written = std::fs::read_to_string(hooks.join("pre-push")).unwrap();
    assert!(written.contains("--wait"), "{written}");
}

/// An id start naming six runs says six and lists five "and 1 more", for `cancel` and `logs`.
#[test]
fn an_ambiguous_run_id_counts_what_it_lists() {
    let repo = Repo::new();
    for i in 1..=6 {
        repo.write(
            &format!("workflows/w{i}.yml"),
            "on: push\njobs:\n  a:\n    steps:\n      - run: 'true'\n",
        );
    }
    let head = repo.commit("c");
    let out = repo.trigger(&head);
    assert!(out.status.success(), "{}", out.stderr);
    let ids: Vec<String> = out
        .stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["run_id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 6);
    // The longest start all six share.
    let shared = (0..ids[0].len())
        .take_while(|&n| {
            ids.iter()
                .all(|id| id.as_bytes()[n] == ids[0].as_bytes()[n])
        })
        .count();
    let prefix = &ids[0][..shared.max(1)];
    for command in ["cancel", "logs"] {
        let out = repo.gpuflow().args([command, prefix]).output();
        assert_eq!(out.status.code(), Some(2), "{command}");
        let err = &out.stderr;
        assert!(err.contains(&format!("`{prefix}` names 6 runs")), "{err}");
        let listed = ids.iter().filter(|id| err.contains(id.as_str())).count();
        assert_eq!(listed, 5, "{err}");
        assert!(err.contains(", and 1 more"), "{command}: {err}");
    }
}
