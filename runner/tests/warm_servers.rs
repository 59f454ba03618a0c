//! Warm servers across runs (docs/campaigns.md#warm-servers-across-runs): `keep-warm` keeps a
//! `gpuflow-sim` server running on its stand-in GPU after `gpuflow run` ends; the next run
//! adopts it. What is asserted is what the engine and the lease folder hold between the runs
//! (the same container ids, claimed GPUs), what `gpuflow servers` shows, and that a killed
//! run's server is cleared by `gpuflow gc`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gpuflow::gpu::LeaseDir;

use crate::support::images::{self, docker_with};
use crate::support::{Running, Workspace, wait_until};

/// A matrix over a server flag (`graph-bs`, through the environment: one server per value)
/// whose step keeps its server warm; `then` is more steps after the benchmark.
fn workflow(graph_bs: &str, then: &str) -> String {
    format!(
        r#"
on: workflow_dispatch
jobs:
  tune:
    gpus: 1
    strategy:
      matrix:
        graph-bs: {graph_bs}
    steps:
      - id: server
        uses: start-container
        with:
          name: server
          image: {sim}
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 1s --ttft 2ms --tokens-per-second 5000
          env: {{ CUDA_GRAPH_MAX_BS: "${{{{ matrix.graph-bs }}}}" }}
          keep-warm: 10m
          # The job leases a stand-in GPU; this engine has no NVIDIA runtime to hand it on.
          gpus: none
      - uses: wait-for-health
        with: {{ url: "http://server:30000/health", container: server, timeout: 1m }}
      - uses: benchmark
        with:
          target: http://server:30000
          mode: concurrency
          concurrency: 2
          requests: 4
          warmup: 0
          output-tokens: 4
{then}"#,
        sim = images::SIM,
    )
}

/// A workspace with its own gpuflow home (the warm registry), lease folder and the 8 stand-in
/// GPUs; every warm server it made is stopped when it is dropped.
struct Node {
    repo: Workspace,
}

impl Node {
    fn new() -> Self {
        let repo = Workspace::empty();
        std::fs::create_dir_all(repo.path().join("leases")).unwrap();
        std::fs::create_dir_all(repo.path().join("home")).unwrap();
        Self { repo }
    }

    fn stand_in() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stand-in-8gpu-pcie.toml")
    }

    fn leases(&self) -> LeaseDir {
        LeaseDir::at(&self.repo.path().join("leases"), "local")
    }

    fn gpuflow(&self) -> crate::support::command::Gpuflow {
        self.repo
            .gpuflow()
            .home(self.repo.path().join("home"))
            .env(gpuflow::gpu::STAND_IN_ENV, Self::stand_in())
            .env("GPUFLOW_LEASE_DIR", self.repo.path().join("leases"))
    }

    /// `gpuflow run --plain w.yml` with `yaml`: exit code and all it said.
    fn run(&self, yaml: &str) -> (Option<i32>, String) {
        self.repo.write("w.yml", yaml);
        let out = self.gpuflow().args(["run", "--plain", "w.yml"]).output();
        (out.code(), out.all())
    }

    /// `gpuflow servers --json`: one object per warm server.
    fn servers(&self) -> Vec<serde_json::Value> {
        self.gpuflow()
            .args(["servers", "--json"])
            .success()
            .json_lines()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.gpuflow().args(["servers", "stop", "--all"]).output();
    }
}

fn ids(servers: &[serde_json::Value]) -> Vec<String> {
    let mut ids: Vec<String> = servers
        .iter()
        .map(|s| s["container"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

fn gpus_of(servers: &[serde_json::Value]) -> Vec<String> {
    servers
        .iter()
        .flat_map(|s| s["gpus"].as_array().unwrap().clone())
        .map(|g| g.as_str().unwrap().to_string())
        .collect()
}

async fn running(docker: &gpuflow::backend::DockerBackend, id: &str) -> bool {
    docker.inspect_state(id).await.is_ok_and(|s| s.running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_server_is_adopted_by_the_next_run_and_a_changed_flag_starts_anew() {
    let Some(docker) = docker_with(&[images::SIM]).await else {
        return;
    };
    let node = Node::new();
    let (code, said) = node.run(&workflow("[128, 256]", ""));
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(
        said.matches("container server started").count(),
        2,
        "{said}"
    );
    assert!(
        said.contains("keeping the server `server` warm for 10m after the run"),
        "{said}"
    );
    let first = node.servers();
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(first.iter().all(|s| s["state"] == "warm"), "{first:?}");
    // The runner is gone, and its servers still run and hold their GPUs.
    for id in ids(&first) {
        assert!(running(&docker, &id).await, "{id} stopped");
    }
    let held = gpus_of(&first);
    assert_eq!(held.len(), 2, "{first:?}");
    for uuid in &held {
        assert!(!node.leases().is_free(uuid).unwrap(), "{uuid} is free");
        let holder = node.leases().holder(uuid).unwrap();
        assert!(holder.contains("warm server"), "{holder}");
    }

    // The same workflow again: both servers adopted, no container created.
    let (code, said) = node.run(&workflow("[128, 256]", ""));
    assert_eq!(code, Some(0), "{said}");
    let adopted = said
        .matches("reusing the server `server` that was kept warm")
        .count();
    assert_eq!(adopted, 2, "{said}");
    // The engine started no container (its `container_started` events, as the plain view
    // prints them).
    assert!(!said.contains("container server started"), "{said}");
    let second = node.servers();
    assert_eq!(ids(&second), ids(&first), "the same containers: none new");
    assert!(
        second
            .iter()
            .all(|s| s["cells_served"] == 2 && s["requests_served"] == 8),
        "{second:?}"
    );
    assert_eq!(gpus_of(&second).len(), 2, "still on their GPUs");

    // One server flag changed: that cell starts a fresh server; the other adopts its own.
    let (code, said) = node.run(&workflow("[128, 512]", ""));
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(said.matches("that was kept warm").count(), 1, "{said}");
    assert_eq!(
        said.matches("container server started").count(),
        1,
        "{said}"
    );
    let third = node.servers();
    assert_eq!(third.len(), 3, "{third:?}");
    let kept: Vec<String> = ids(&first)
        .into_iter()
        .filter(|id| ids(&third).contains(id))
        .collect();
    assert_eq!(kept.len(), 2, "128 adopted again, 256 still warm");

    // One stopped by its key: its container gone, its GPU free.
    let first_key = third[0]["key"].as_str().unwrap().to_string();
    node.gpuflow()
        .args(["servers", "stop", &first_key])
        .stdout_contains("stopped `")
        .success();
    assert_eq!(node.servers().len(), 2);
    assert!(!running(&docker, third[0]["container"].as_str().unwrap()).await);
    assert!(node.leases().is_free(&gpus_of(&third[..1])[0]).unwrap());

    // A job that needs every GPU: the warm servers give theirs up (a cache, not a lease).
    let all = "on: workflow_dispatch\njobs:\n  all:\n    gpus: 8\n    steps:\n      - run: echo \"$CUDA_VISIBLE_DEVICES\"\n";
    let (code, said) = node.run(all);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(
        said.matches("stopped the warm server `").count(),
        2,
        "{said}"
    );
    assert!(node.servers().is_empty());
    for id in ids(&third) {
        assert!(!running(&docker, &id).await, "{id} still runs");
    }
    for uuid in gpus_of(&third) {
        assert!(node.leases().is_free(&uuid).unwrap(), "{uuid} still held");
    }
}

/// Starts `gpuflow run` on `yaml` and reads its output until it says `line`.
fn run_until(node: &Node, yaml: &str, line: &str) -> Running {
    node.repo.write("w.yml", yaml);
    let mut run = node.gpuflow().args(["run", "--plain", "w.yml"]).spawn();
    let mut seen = String::new();
    wait_until(
        &format!("`{line}` in the run's output"),
        Duration::from_secs(90),
        || {
            let next = run.line();
            seen.push_str(&next);
            assert!(!next.is_empty(), "the run ended first: {seen}");
            next.contains(line)
        },
    );
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_or_interrupted_while_using_a_warm_server_leaves_it_to_servers_and_gc() {
    let Some(docker) = docker_with(&[images::SIM]).await else {
        return;
    };
    let node = Node::new();
    let (code, said) = node.run(&workflow("[128]", ""));
    assert_eq!(code, Some(0), "{said}");
    let warm = ids(&node.servers());
    let hold = "      - run: echo holding && sleep 120\n";

    // Ctrl-C while using it: the run ends, the server goes back to being warm.
    let run = run_until(&node, &workflow("[128]", hold), "holding");
    run.signal(rustix::process::Signal::INT);
    let (status, _) = run.wait();
    assert_eq!(status.code(), Some(130));
    let after_interrupt = node.servers();
    assert_eq!(ids(&after_interrupt), warm);
    assert_eq!(after_interrupt[0]["state"], "warm", "{after_interrupt:?}");

    // SIGKILL while using it: orphaned, shown so, and cleared by gc with its GPU.
    let mut run = run_until(&node, &workflow("[128]", hold), "holding");
    run.kill();
    let orphaned = node.servers();
    assert_eq!(orphaned[0]["state"], "orphaned", "{orphaned:?}");
    node.gpuflow()
        .arg("servers")
        .stdout_contains("orphaned (run ")
        .success();
    let gpu = gpus_of(&orphaned);
    assert!(!node.leases().is_free(&gpu[0]).unwrap());
    node.gpuflow()
        .arg("gc")
        .stdout_contains("removed warm server `")
        .stdout_contains("orphaned: run ")
        .success();
    assert!(node.servers().is_empty());
    assert!(!running(&docker, &warm[0]).await, "the orphan still runs");
    assert!(
        node.leases().is_free(&gpu[0]).unwrap(),
        "its GPU is still held"
    );
}

/// The engine run in this process (as `make bench` runs it), twice: the second run adopts
/// what the first kept warm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_process_adopts_what_the_one_before_kept_warm() {
    let home = tempfile::tempdir().unwrap();
    let registry = gpuflow::warm::Registry::at(home.path());
    // Two cells of one server: the first parks it for the second, which keeps it warm.
    let yaml = workflow("[128]", "").replace("    gpus: 1\n", "").replace(
        "        graph-bs: [128]\n",
        "        graph-bs: [128]\n        c: [1, 2]\n",
    );
    let started = |ran: &crate::support::engine::Ran| {
        ran.events
            .iter()
            .filter(|e| matches!(e.kind, gpuflow::engine::EventKind::ContainerStarted { .. }))
            .count()
    };
    let run = || {
        let registry = registry.clone();
        crate::support::engine::workflow(&yaml).options(move |o| o.warm_registry = registry)
    };
    let Some(first) = run().on_docker().await else {
        return;
    };
    assert_eq!(started(&first), 1, "{}", first.said());
    assert_eq!(registry.list(None).len(), 1, "{}", first.said());
    let second = run().on_docker().await.unwrap();
    assert_eq!(started(&second), 0, "{}", second.said());
    // `fresh: true` on the benchmark: the warm server (and the first cell's) is replaced,
    // not adopted.
    let fresh_yaml = yaml.replace(
        "          output-tokens: 4\n",
        "          output-tokens: 4\n          fresh: true\n",
    );
    let kept = registry.clone();
    let third = crate::support::engine::workflow(&fresh_yaml)
        .options(move |o| o.warm_registry = kept)
        .on_docker()
        .await
        .unwrap();
    // A fresh server for each of the two cells: neither adopts what ran before it.
    assert_eq!(started(&third), 2, "{}", third.said());
    assert!(
        third
            .said()
            .contains("asks for a fresh one (`fresh: true`)"),
        "{}",
        third.said()
    );
    let docker = docker_with(&[images::SIM]).await.unwrap();
    for (entry, _) in gpuflow::warm::list(&docker, &registry).await {
        gpuflow::warm::stop(&docker, &registry, &entry)
            .await
            .unwrap();
    }
}

/// A maximize search whose servers are kept warm: a cell's later round adopts the server its
/// first round loaded. The cells' speeds are 40x apart so the round-1 winner does not depend on
/// the machine's load (at 2000 vs 4000 tokens/s, 8 tokens are HTTP overhead and either can win).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_round_adopts_the_server_its_first_round_kept_warm() {
    let home = tempfile::tempdir().unwrap();
    let registry = gpuflow::warm::Registry::at(home.path());
    let yaml = format!(
        r#"
on: workflow_dispatch
jobs:
  tune:
    strategy:
      matrix:
        tps: [100, 4000]
      search:
        maximize: output_tok_s
        budget: {{ rounds: 2, keep: 0.5 }}
    steps:
      - uses: start-container
        with:
          name: server
          image: {sim}
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 1s --tokens-per-second ${{{{ matrix.tps }}}}
          keep-warm: 5m
      - uses: wait-for-health
        with: {{ container: server, url: "http://server:30000/health", timeout: 1m }}
      - uses: benchmark
        with:
          target: http://server:30000
          mode: concurrency
          concurrency: 2
          requests: 8
          output-tokens: 8
"#,
        sim = images::SIM
    );
    let kept = registry.clone();
    let Some(ran) = crate::support::engine::workflow(&yaml)
        .options(move |o| o.warm_registry = kept)
        .on_docker()
        .await
    else {
        return;
    };
    let started = ran
        .events
        .iter()
        .filter(|e| matches!(e.kind, gpuflow::engine::EventKind::ContainerStarted { .. }))
        .count();
    assert_eq!(
        started,
        2,
        "one server per cell, none for round 2: {}",
        ran.said()
    );
    let round_two = ran
        .lines_of_jobs_starting_with("tune (4000), round 2")
        .join("\n");
    assert!(
        round_two.contains("reusing the server `server` that was kept warm"),
        "{round_two}"
    );
    let docker = docker_with(&[images::SIM]).await.unwrap();
    for (entry, _) in gpuflow::warm::list(&docker, &registry).await {
        gpuflow::warm::stop(&docker, &registry, &entry)
            .await
            .unwrap();
    }
}
