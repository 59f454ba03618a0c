//! Shared by the benchmarks that run workflows on the local Docker engine: the engine and a
//! test image checked, and one workflow (`w.yml` of a workspace) run to its end.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuflow::backend::DockerBackend;
use gpuflow::check::load_and_check;
use gpuflow::engine::{CollectSink, Event, RunOptions, new_run_id};
use gpuflow::plan::{build, from_workflow};
use gpuflow::warm::Registry;
use gpuflow::workflow::Loaded;
use tokio_util::sync::CancellationToken;

/// A runtime, and the local engine with `image` on it (else a panic saying what to do).
pub fn engine_with(image: &str) -> (tokio::runtime::Runtime, DockerBackend) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let docker = runtime
        .block_on(DockerBackend::connect_local())
        .unwrap_or_else(|e| panic!("the engine benchmarks need Docker: {e}"));
    assert!(
        runtime.block_on(docker.has_image(image)).unwrap(),
        "the image `{image}` is missing: run `make test-images`"
    );
    (runtime, docker)
}

/// Runs `w.yml` of `workspace` to its end (it must succeed); its events and how long the run
/// took, its containers removed after (but the servers it kept warm).
/// Warm servers are found and kept in `warm`.
pub async fn run_workflow(
    docker: &DockerBackend,
    workspace: &Path,
    warm: &Registry,
) -> (Vec<Event>, Duration) {
    let (loaded, diags) = load_and_check(&workspace.join("w.yml")).expect("loads");
    assert!(!diags.has_errors(), "{diags:?}");
    let Loaded::Workflow(Some(wf)) = loaded else {
        panic!("not a workflow")
    };
    let plan = build(&from_workflow(&wf, "w").input).expect("plans");
    let run_id = format!("bench-{}", new_run_id());
    let mut opts = RunOptions::new(&run_id, workspace);
    opts.grace = Duration::from_secs(1);
    opts.warm_registry = warm.clone();
    let collect = CollectSink::new();
    let started = Instant::now();
    let report = gpuflow::engine::run(
        Arc::new(*wf),
        plan,
        opts,
        Arc::new(collect.clone()),
        Some(docker.clone()),
        CancellationToken::new(),
    )
    .await
    .expect("runs");
    let took = started.elapsed();
    // What the run kept warm stays for the next run (`keep-warm`).
    let warm: Vec<String> = warm.list(None).into_iter().map(|e| e.container).collect();
    docker
        .remove_run_except(&run_id, &warm)
        .await
        .expect("clean-up");
    assert_eq!(
        report.exit_code().code(),
        0,
        "the benchmark workflow failed"
    );
    (collect.events(), took)
}
