//! What ran, recorded, against the test kit's real registry (`support::registry`, Debian's
//! `docker-registry` on 127.0.0.1) and the real servers' images: `gpuflow images lock` pins
//! the digest a pushed tag names in `gpuflow.lock` and `images update` moves the pin when the
//! tag moves; a benchmark of a server pulled from the registry records the image's repository
//! digest and the server's own version, and `compare-to-baseline` says when its baseline's
//! server said another; vLLM's and llama-server's images tell their versions.

use std::path::Path;

use gpuflow::actions::LockFile;
use gpuflow::backend::{ContainerSpec, RunLabels, VolumeMount};
use gpuflow::steps::server_version::{ServerContainer, of_server};
use gpuflow::store::{NewMetric, NewResult, ResultStore};

use super::llama_process::llama_dir;
use super::vllm_process::vllm_site_packages;
use crate::support::images::{BASE, LLAMACPP, VLLM, docker_with};
use crate::support::registry::Registry;
use crate::support::{Workspace, free_port, shipped};

/// A workflow whose job starts a container of each of `images` (a matrix cell each).
fn starting(images: &[&str]) -> String {
    let list: Vec<String> = images.iter().map(|i| format!("\"{i}\"")).collect();
    format!(
        r#"on: workflow_dispatch
jobs:
  start:
    strategy:
      matrix:
        image: [{}]
    steps:
      - uses: start-container
        with:
          name: c
          image: ${{{{ matrix.image }}}}
          command: sleep 1
"#,
        list.join(", ")
    )
}

#[tokio::test]
async fn images_lock_pins_what_the_tag_names_and_update_moves_the_pin() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let registry = Registry::start();
    let first = registry.push(BASE, "base:1");
    let image = registry.image("base:1");
    let dir = Workspace::repository()
        .file("workflows/w.yml", &starting(&[&image, BASE]))
        .committed("workflow");

    let out = dir.gpuflow().args(["images", "lock"]).output();
    assert_eq!(out.code(), Some(0), "{}", out.all());
    assert_eq!(first, registry.manifest("base:1").digest);
    assert_eq!(out.stdout, format!("{image}  {first}\n"), "{}", out.all());
    assert!(
        out.stderr.contains(
            "`gpuflow-base:test` was built on this engine and is in no registry: not pinned"
        ),
        "{}",
        out.stderr
    );
    let lock_path = dir.path().join("gpuflow.lock");
    let pinned = |path: &Path| {
        LockFile::read(path)
            .unwrap()
            .image_pin(&image)
            .map(|p| p.digest.clone())
    };
    assert_eq!(pinned(&lock_path).as_deref(), Some(first.as_str()));
    let listed = dir.gpuflow().args(["images"]).success();
    assert!(
        listed.stdout.starts_with(&format!("{image}  {first}  ")),
        "{}",
        listed.stdout
    );

    // Locked again: nothing moves, the registry is not asked.
    let again = dir.gpuflow().args(["images", "lock"]).success();
    assert_eq!(again.stdout, "");
    assert!(
        again
            .stderr
            .contains(&format!("`{image}` is already pinned to {first}")),
        "{}",
        again.stderr
    );

    // The tag moves in the registry; the pin stays until `update` moves it.
    let second = registry.push_unique("base:1", &[1]).digest;
    assert_ne!(first, second);
    assert_eq!(pinned(&lock_path).as_deref(), Some(first.as_str()));
    let updated = dir.gpuflow().args(["images", "update"]).success();
    assert_eq!(
        updated.stdout,
        format!("{image}: {first} -> {second}\n"),
        "{}",
        updated.all()
    );
    assert_eq!(second, registry.manifest("base:1").digest);
    assert_eq!(pinned(&lock_path).as_deref(), Some(second.as_str()));
    let current = dir.gpuflow().args(["images", "update", &image]).success();
    assert_eq!(current.stdout, "");
    assert!(
        current.stderr.contains("is up to date"),
        "{}",
        current.stderr
    );

    // An image that is not pinned is named, with the one that is.
    let typo = image.replace("base:1", "bsae:1");
    let out = dir.gpuflow().args(["images", "update", &typo]).failure();
    assert!(
        out.stderr
            .contains(&format!("`{typo}` is not pinned in `gpuflow.lock`")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!("did you mean `{image}`?")),
        "{}",
        out.stderr
    );
}

/// `w.yml` of a repository holding the shipped `llamacpp-server` action: llama-server from
/// `image` serving the tiny model, benchmarked, compared with the previous run.
fn llama_bench(image: &str) -> Workspace {
    let yaml = format!(
        r#"on: workflow_dispatch
jobs:
  bench:
    steps:
      - id: server
        uses: ./actions/llamacpp-server
        with:
          image: {image}
          models: {models}
          model: /models/tiny.gguf
          port: {port}
          args: -c 512 -np 1
          timeout: 1m
      - id: bench
        uses: benchmark
        with:
          target: ${{{{ steps.server.outputs.url }}}}
          mode: single-stream
          input-tokens: 8
          output-tokens: 4
          runs: 2
      - uses: compare-to-baseline
        with: {{ metric: output_tok_s, baseline: previous, fail-on: never }}
"#,
        models = llama_dir().join("models").display(),
        port = free_port(),
    );
    let path = "actions/llamacpp-server/action.yml";
    Workspace::repository()
        .file("w.yml", &yaml)
        .file(path, &shipped(path))
        .committed("workflow")
}

#[tokio::test]
async fn a_benchmark_records_the_repository_digest_and_the_servers_version() {
    if docker_with(&[LLAMACPP]).await.is_none() {
        return;
    }
    let registry = Registry::start();
    let digest = registry.push(LLAMACPP, "llama:1");
    let image = registry.image("llama:1");
    let dir = llama_bench(&image);
    let home = Workspace::empty();
    let run = || {
        dir.gpuflow()
            .home(home.path())
            .args(["run", "--plain", "w.yml"])
            .output()
    };
    let out = run();
    assert_eq!(out.code(), Some(0), "{}", out.all());

    let store_path = dir.path().join(".gpuflow/results.db");
    let mut store = ResultStore::open(&store_path).unwrap();
    let (run_id, _, _) = store.recent_runs(1).unwrap().remove(0);
    let result = store.run_results(&run_id).unwrap().remove(0);
    let info = &result.fingerprint.info;
    assert_eq!(
        info.image_repo_digest.as_deref(),
        Some(format!("{}/llama@{digest}", registry.host()).as_str())
    );
    let version = info.server_version.clone().unwrap_or_default();
    assert!(
        version.starts_with("llama-server version: "),
        "{info:?}\n{}",
        out.all()
    );
    // Asked once: kept for the next run in the user's state folder.
    let cached = std::fs::read_dir(home.path().join("server-versions"))
        .unwrap()
        .count();
    assert_eq!(cached, 1);

    // An earlier result of the same series from another llama-server build: the next run's
    // `compare-to-baseline` compares with it and says what changed.
    let mut older = NewResult {
        run_id: "older-server".into(),
        workflow: result.workflow.clone(),
        job: result.job.clone(),
        matrix: result.matrix.clone(),
        step: result.step.clone(),
        git: result.git.clone(),
        started_at_ms: result.started_at_ms + 1,
        finished_at_ms: result.finished_at_ms + 1,
        status: result.status,
        fingerprint: result.fingerprint.clone(),
        metrics: result
            .metrics
            .iter()
            .map(|m| NewMetric {
                name: m.name.clone(),
                unit: m.unit.clone(),
                direction: Some(m.direction),
                samples: m.samples.clone(),
            })
            .collect(),
    };
    older.fingerprint.info.server_version = Some("llama-server version: 1 (0000000)".into());
    store.record(&older).unwrap();
    drop(store);
    let out = run();
    assert_eq!(out.code(), Some(0), "{}", out.all());
    let said = format!(
        "server version differs: baseline llama-server version: 1 (0000000), this run {version})"
    );
    assert!(
        out.stdout
            .contains("the previous comparable run `older-server`"),
        "{}",
        out.all()
    );
    assert!(
        out.stdout.contains(&said),
        "missing {said:?} in:\n{}",
        out.all()
    );
}

/// SGLang's command-line test image (images/sglang/build.sh).
const SGLANG_CLI: &str = "gpuflow-test/sglang-cli:0.5.23";

/// The server programs' real answers: vLLM 0.32.0's CPU build (`0.32.0+cpu`, its local label)
/// asked in its running container, whose `site-packages` is mounted; llama-server and SGLang
/// asked in throw-away containers of their images. Each kept, so asking again starts nothing.
#[tokio::test]
async fn the_real_servers_images_tell_their_versions() {
    let Some(docker) = docker_with(&[VLLM, LLAMACPP, SGLANG_CLI]).await else {
        return;
    };
    let home = Workspace::empty();
    let cache = home.path().join("server-versions");
    let labels = RunLabels::new(format!("versions-{}", std::process::id()), "versions");

    let site = vllm_site_packages().display().to_string();
    let mut spec = ContainerSpec::new(VLLM);
    spec.entrypoint = Some(vec!["sleep".into()]);
    spec.command = Some(vec!["60".into()]);
    spec.volumes.push(VolumeMount {
        source: site.clone(),
        target: "/opt/vllm/site-packages".into(),
        read_only: true,
    });
    let container = docker.start_container(&labels, &spec).await.unwrap();
    let facts = docker.image_facts(VLLM).await.unwrap();
    let server = ServerContainer {
        id: container.id.clone(),
        running: true,
        argv: ["vllm", "serve", "/models/tiny"].map(String::from).to_vec(),
        env: Vec::new(),
        mounts: vec![format!("{site}:/opt/vllm/site-packages")],
    };
    let vllm = of_server(&docker, &labels, &facts, &server, &cache).await;
    let _ = docker.remove_container(&container.id).await;
    assert_eq!(vllm.as_deref(), Some("vllm 0.32.0+cpu"));
    // Kept: asked again after its container is gone, the answer is the same.
    assert_eq!(
        of_server(&docker, &labels, &facts, &server, &cache)
            .await
            .as_deref(),
        Some("vllm 0.32.0+cpu")
    );

    let facts = docker.image_facts(LLAMACPP).await.unwrap();
    let server = ServerContainer {
        argv: ["/app/llama-server", "-m", "/models/tiny.gguf"]
            .map(String::from)
            .to_vec(),
        ..ServerContainer::default()
    };
    let llama = of_server(&docker, &labels, &facts, &server, &cache)
        .await
        .unwrap_or_default();
    assert!(llama.starts_with("llama-server version: "), "{llama:?}");

    // SGLang's test image has its parser without the package's metadata on the path: its own
    // `sglang version` answers.
    let facts = docker.image_facts(SGLANG_CLI).await.unwrap();
    let server = ServerContainer {
        argv: ["sglang", "serve", "/models/qwen"]
            .map(String::from)
            .to_vec(),
        ..ServerContainer::default()
    };
    assert_eq!(
        of_server(&docker, &labels, &facts, &server, &cache)
            .await
            .as_deref(),
        Some("sglang 0.5.23")
    );
    let _ = docker.remove_run(&labels.run_id).await;
}
