//! Tuning campaigns (docs/campaigns.md): the cells of a matrix that would start the same
//! server share one. The servers are the simulator image with a load delay; what is asserted
//! is what the engine did (containers it created, cells that adopted a server), through its
//! events.

use gpuflow::engine::{EventKind, JobResult};
use gpuflow::store::{ResultFilter, ResultStore};

use crate::support::engine::{Ran, workflow};
use crate::support::images;

/// A tuning grid: `graph-bs` is a server flag (three servers), `concurrency` a client input
/// (four levels per server). `reuse` is the start-container input under test.
fn grid(reuse: &str, graph_bs: &str, concurrency: &str) -> String {
    format!(
        r#"
on: workflow_dispatch
jobs:
  tune:
    strategy:
      fail-fast: false
      matrix:
        graph-bs: {graph_bs}
        concurrency: {concurrency}
    steps:
      - id: server
        uses: start-container
        with:
          name: server
          image: {sim}
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 1s --ttft 2ms --tokens-per-second 5000
          env: {{ CUDA_GRAPH_MAX_BS: "${{{{ matrix.graph-bs }}}}" }}
          reuse: {reuse}
      - uses: wait-for-health
        with: {{ url: "http://server:30000/health", container: server, timeout: 1m }}
      - id: bench
        uses: benchmark
        with:
          target: http://server:30000
          mode: concurrency
          concurrency: ${{{{ matrix.concurrency }}}}
          requests: 4
          warmup: 0
          output-tokens: 4
      - run: echo "reused=${{{{ steps.server.outputs.reused }}}} before=${{{{ steps.server.outputs.cells-before }}}}"
"#,
        sim = images::SIM,
    )
}

/// How many containers the run created (`container_started`).
fn containers_created(ran: &Ran) -> usize {
    ran.events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ContainerStarted { .. }))
        .count()
}

/// The cells that said they adopted a server.
fn cells_reusing(ran: &Ran) -> usize {
    ran.lines_of_jobs_starting_with("tune")
        .iter()
        .filter(|l| l.starts_with("reused=true"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_cells_over_three_server_keys_start_three_servers() {
    let yaml = grid("true", "[128, 256, 512]", "[1, 2, 4, 8]");
    let Some(ran) = workflow(&yaml).on_docker().await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{}", ran.said());
    assert_eq!(containers_created(&ran), 3, "{}", ran.said());
    assert_eq!(cells_reusing(&ran), 9, "{}", ran.said());
    // The server went on serving: the last cell of a group is its fourth.
    let said = ran.lines_of_jobs_starting_with("tune").join("\n");
    assert!(said.contains("reused=true before=3"), "{said}");
    // Every result says whether its server was warm, so comparisons can tell.
    let store = ResultStore::open(&ran.workspace.path().join(".gpuflow/results.db")).unwrap();
    let results = store
        .find(&ResultFilter {
            metric: "request_throughput".into(),
            limit: 100,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(results.len(), 12);
    let warm: Vec<&str> = results
        .iter()
        .filter_map(|r| r.fingerprint.info.server_reuse.as_deref())
        .collect();
    assert_eq!(warm.len(), 9, "{warm:?}");
    assert!(warm.iter().all(|w| w.starts_with("server: ")), "{warm:?}");
    assert!(
        warm.iter()
            .any(|w| w.contains(" 1 cell and 4 requests before, up ")),
        "{warm:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reuse_false_starts_a_server_per_cell() {
    let yaml = grid("false", "[128]", "[1, 2, 4]");
    let Some(ran) = workflow(&yaml).on_docker().await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{}", ran.said());
    assert_eq!(containers_created(&ran), 3, "{}", ran.said());
    assert_eq!(cells_reusing(&ran), 0, "{}", ran.said());
}

/// A memory fraction that loads up to 70 and not above, played by a step that fails above it.
fn bisect(find: &str, values: &str, works: &str) -> String {
    format!(
        r#"
on: workflow_dispatch
jobs:
  probe:
    outputs:
      frac: ${{{{ matrix.frac }}}}
    strategy:
      matrix:
        frac: {values}
      search:
        bisect: frac
        find: {find}
    steps:
      - run: test ${{{{ matrix.frac }}}} {works}
  use:
    needs: probe
    steps:
      - run: echo "best=${{{{ needs.probe.outputs.best }}}} cell=${{{{ needs.probe.outputs.best-cell }}}} frac=${{{{ needs.probe.outputs.frac }}}}"
"#
    )
}

/// The job runs that started.
fn started(ran: &Ran) -> Vec<String> {
    ran.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::JobStarted { job } => Some(job.display.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_bisect_finds_the_largest_value_that_works_in_log2_probes() {
    let values = "[50, 55, 60, 65, 70, 75, 80, 85, 90]";
    let ran = crate::support::engine::on_host(&bisect("largest", values, "-le 70")).await;
    assert_eq!(ran.report.result, JobResult::Success, "{}", ran.said());
    let probes: Vec<String> = started(&ran)
        .into_iter()
        .filter(|j| j.starts_with("probe"))
        .collect();
    // ⌈log₂(9 + 1)⌉ = 4 at most: 70 ok, 80 failed, 75 failed.
    assert_eq!(
        probes,
        ["probe (70)", "probe (80)", "probe (75)"],
        "{}",
        ran.said()
    );
    assert_eq!(ran.job("probe (90)"), JobResult::Skipped);
    // The job's outputs are the best cell's, not those of the probe that ended last (75).
    assert_eq!(ran.value("use", "best="), "70 cell=probe (70) frac=70");
    assert!(
        ran.said().contains(
            "bisect of `frac`: 70 ok, 80 failed (the script exited with code 1), 75 failed (the script exited with code 1) → the largest `frac` that succeeds is 70 (3 probes of 9 cells)"
        ),
        "{}",
        ran.said()
    );
}

#[tokio::test]
async fn a_bisect_for_the_smallest_value_and_one_that_finds_none() {
    let values = "[1, 2, 4, 8, 16, 32, 64, 128]";
    let ran = crate::support::engine::on_host(&bisect("smallest", values, "-ge 16")).await;
    assert_eq!(ran.report.result, JobResult::Success, "{}", ran.said());
    assert_eq!(ran.value("use", "best="), "16 cell=probe (16) frac=16");
    assert!(started(&ran).len() <= 1 + 4, "{:?}", started(&ran));

    let none = crate::support::engine::on_host(&bisect("largest", values, "-ge 1000")).await;
    assert_eq!(none.report.result, JobResult::Failure, "{}", none.said());
    assert!(
        none.said().contains("no value of `frac` succeeds"),
        "{}",
        none.said()
    );
}

#[test]
fn a_bisect_of_a_dimension_the_matrix_lacks_is_refused_where_it_is_written() {
    let yaml = bisect("largest", "[50, 60]", "-le 70").replace("bisect: frac", "bisect: fracc");
    let errors = crate::support::engine::validate_errors(&crate::support::Workspace::new(), &yaml);
    assert!(
        errors.contains("`bisect` names `fracc`, which is not a dimension of the matrix"),
        "{errors}"
    );
    assert!(errors.contains("did you mean `frac`?"), "{errors}");
}

/// The simulator's memory model: Llama-3-8B on a 46068 MiB GPU runs out of memory capturing
/// CUDA graphs once the share leaves less than 2 GiB outside it (above 0.95).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bisect_over_a_simulated_oom_boundary_finds_it_and_says_why_probes_failed() {
    let yaml = format!(
        r#"
on: workflow_dispatch
jobs:
  fit:
    strategy:
      matrix:
        fraction: [0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.96, 0.98]
      search:
        bisect: fraction
    steps:
      - uses: start-container
        with:
          name: server
          image: {sim}
          volumes: ['${{{{ github.workspace }}}}/models:/models:ro']
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 300ms --model-path /models/llama3-8b --gpu-memory-mib 46068 --mem-fraction-static ${{{{ matrix.fraction }}}}
      - uses: wait-for-health
        with: {{ url: "http://server:30000/health", container: server, timeout: 1m }}
"#,
        sim = images::SIM,
    );
    let Some(ran) = workflow(&yaml)
        .files(&[("models/llama3-8b/config.json", crate::memory::LLAMA3_8B)])
        .on_docker()
        .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{}", ran.said());
    // ⌈log₂(8 + 1)⌉ = 4 at most: 0.90 ok, 0.94 ok, 0.96 out of memory.
    assert_eq!(
        started(&ran),
        ["fit (0.9)", "fit (0.94)", "fit (0.96)"],
        "{}",
        ran.said()
    );
    let said = ran.said();
    let summary = said
        .lines()
        .find(|l| l.starts_with("bisect of `fraction`"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(summary.contains("0.96 failed ("), "{summary}");
    assert!(
        summary.contains("memory"),
        "the cause, not only `failed`: {summary}"
    );
    assert!(
        summary.ends_with("the largest `fraction` that succeeds is 0.94 (3 probes of 8 cells)"),
        "{summary}"
    );
}
