//! Tuning campaigns (docs/campaigns.md): the cells of a matrix that would start the same
//! server share one. The servers are the simulator image with a load delay; what is asserted
//! is what the engine did (containers it created, cells that adopted a server), through its
//! events.

use gpuflow::engine::{EventKind, JobResult};
use gpuflow::store::{ResultFilter, ResultStore};

use crate::support::engine::{Ran, validate_errors, workflow};
use crate::support::images;
use crate::support::sim::SimProcess;

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

/// A tuning grid over simulators already serving on the host, one per `rate` (its
/// `--tokens-per-second`), each cell's `url` added by `include`: the higher the rate, the
/// higher the throughput, so the best cell is known. `search` is the search's YAML (or none).
fn rated_grid(sims: &[(u32, &SimProcess)], search: &str) -> String {
    let rates: Vec<String> = sims.iter().map(|(r, _)| r.to_string()).collect();
    let include: String = sims
        .iter()
        .map(|(r, s)| {
            format!(
                "\n          - {{ rate: {r}, url: \"http://{}\" }}",
                s.addr()
            )
        })
        .collect();
    format!(
        r#"
on: workflow_dispatch
jobs:
  tune:
    outputs:
      tok: ${{{{ steps.bench.outputs.output_tok_s }}}}
    strategy:
      fail-fast: false
      matrix:
        rate: [{rates}]
        include:{include}
{search}
    steps:
      - id: bench
        uses: benchmark
        with:
          target: ${{{{ matrix.url }}}}
          mode: concurrency
          concurrency: 2
          requests: 8
          warmup: 0
          output-tokens: 16
          server-metrics: false
{use_best}"#,
        rates = rates.join(", "),
        use_best = if search.is_empty() { "" } else { USE_BEST },
    )
}

/// A job that reads what the search found.
const USE_BEST: &str = r#"  use:
    needs: tune
    steps:
      - run: echo "best=${{ needs.tune.outputs.best }} score=${{ needs.tune.outputs.best-score }} tok=${{ needs.tune.outputs.tok }}"
"#;

/// The simulators of a grid: `gpuflow-sim` processes on the host at these rates (and TTFTs).
fn simulators(rates: &[(u32, &str)]) -> Vec<SimProcess> {
    rates
        .iter()
        .map(|(rate, ttft)| {
            SimProcess::start(&["--tokens-per-second", &rate.to_string(), "--ttft", ttft])
        })
        .collect()
}

/// Each stored result of the run: its cell's `rate`, its `output_tok_s` and how many requests
/// it measured (one TTFT sample each).
fn measured(ran: &Ran) -> Vec<(String, f64, usize)> {
    let store = ResultStore::open(&ran.workspace.path().join(".gpuflow/results.db")).unwrap();
    store
        .run_results(&ran.report.run_id)
        .unwrap()
        .into_iter()
        .map(|r| {
            let tok = r.metric("output_tok_s").unwrap().summary.unwrap().median;
            let requests = r.metric("ttft_ms").unwrap().samples.len();
            (r.matrix["rate"].clone(), tok, requests)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maximize_search_finds_the_grids_best_cell_with_fewer_benchmark_requests() {
    // Twice as fast from one rate to the next: the order survives a busy machine's noise.
    let sims = simulators(&[(200, "2ms"), (1600, "2ms"), (400, "2ms"), (800, "2ms")]);
    let cells: Vec<(u32, &SimProcess)> = [200, 1600, 400, 800].into_iter().zip(&sims).collect();

    let grid = crate::support::engine::on_host(&rated_grid(&cells, "")).await;
    assert_eq!(grid.report.result, JobResult::Success, "{}", grid.said());
    let full = measured(&grid);
    assert_eq!(full.len(), 4);
    let grid_best = full
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|m| m.0.clone())
        .unwrap();
    assert_eq!(grid_best, "1600", "{full:?}");

    let search = "      search:\n        maximize: output_tok_s";
    let ran = crate::support::engine::on_host(&rated_grid(&cells, search)).await;
    assert_eq!(ran.report.result, JobResult::Success, "{}", ran.said());
    // The same best cell, its outputs the job's.
    let said = ran.value("use", "best=");
    assert!(said.starts_with(r#"{"rate":1600,"url":"#), "{said}");
    let score = said.split(" score=").nth(1).unwrap();
    let (score, tok) = score.split_once(" tok=").unwrap();
    let (score, tok): (f64, f64) = (score.parse().unwrap(), tok.parse().unwrap());
    assert!(
        (score - tok).abs() < 0.001,
        "best-score is the best cell's own output: {score} {tok}"
    );
    // Round 1: 4 cells at 25% (2 of 8 requests); round 2: the best 2 at 50%; then the best
    // one at full length: 4 × 2 + 2 × 4 + 8 = 24 requests instead of 32.
    let searched = measured(&ran);
    let requests = |m: &[(String, f64, usize)]| m.iter().map(|x| x.2).sum::<usize>();
    assert_eq!(requests(&searched), 24, "{searched:?}");
    assert!(requests(&searched) < requests(&full));
    let last = searched.last().unwrap();
    assert_eq!(
        (last.0.as_str(), last.2),
        ("1600", 8),
        "the winner measured at full length"
    );
    let all = ran.said();
    assert!(
        all.contains(
            "a search's early round: 25% of the full length, 2 requests per run instead of 8"
        ),
        "{all}"
    );
    assert!(
        all.contains("maximize `output_tok_s`, round 1 of 3 at 25%: tune (200) "),
        "{all}"
    );
    assert!(all.contains("for round 2 at 50%"), "{all}");
    assert!(
        all.contains("→ the best is tune (1600) with `output_tok_s` ")
            && all.contains("(7 runs measuring for 3 full lengths; the grid measures for 4)"),
        "{all}"
    );
    // A later round's run is a run of its own, with its own log.
    assert!(
        started(&ran).iter().any(|j| j == "tune (1600), round 3"),
        "{:?}",
        started(&ran)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minimize_with_constraints_drops_the_cells_that_break_them() {
    // The fastest server answers its first token late: `ttft_ms.p99 < 50` rules it out.
    let sims = simulators(&[(1500, "150ms"), (1200, "2ms"), (300, "2ms")]);
    let cells: Vec<(u32, &SimProcess)> = [1500, 1200, 300].into_iter().zip(&sims).collect();
    let search = "      search:\n        minimize: e2el_ms\n        budget: { rounds: 2 }\n        constraints: [\"ttft_ms.p99 < 50\", \"errors == 0\"]";
    let ran = crate::support::engine::on_host(&rated_grid(&cells, search)).await;
    assert_eq!(ran.report.result, JobResult::Success, "{}", ran.said());
    assert!(ran.value("use", "best=").starts_with(r#"{"rate":1200,"#));
    let all = ran.said();
    assert!(
        all.contains("minimize `e2el_ms`, round 1 of 2 at 50%: tune (1500)"),
        "{all}"
    );
    assert!(
        all.contains(" dropped: `ttft_ms.p99 < 50` does not hold ("),
        "{all}"
    );

    // No cell within the constraints: the search fails the run, and says so.
    let strict = search.replace("ttft_ms.p99 < 50", "ttft_ms.p99 < 0.001");
    let none = crate::support::engine::on_host(&rated_grid(&cells, &strict)).await;
    assert_eq!(none.report.result, JobResult::Failure, "{}", none.said());
    assert!(
        none.said()
            .contains("→ no cell measured `e2el_ms` within the constraints"),
        "{}",
        none.said()
    );
}

#[test]
fn a_search_that_asks_for_two_things_or_names_no_benchmark_is_refused_where_it_is_written() {
    let workspace = crate::support::Workspace::new();
    let yaml = |search: &str| {
        format!(
            "on: push\njobs:\n  tune:\n    strategy:\n      matrix: {{ rate: [1, 2] }}\n      search:\n{search}\n    steps:\n      - id: bench\n        uses: benchmark\n        with: {{ target: http://localhost:1 }}\n"
        )
    };
    let errors = validate_errors(
        &workspace,
        &yaml("        maximize: output_tok_s\n        bisect: rate"),
    );
    assert!(
        errors.contains("`strategy.search` takes one of `bisect`, `maximize`, or `minimize`, found `maximize` and `bisect`"),
        "{errors}"
    );
    let errors = validate_errors(
        &workspace,
        &yaml("        maximize: output_tok_s\n        step: benhc"),
    );
    assert!(
        errors.contains("`step` names `benhc`, which is not a `benchmark` step of the job"),
        "{errors}"
    );
    assert!(errors.contains("did you mean `bench`?"), "{errors}");
    let errors = validate_errors(
        &workspace,
        &yaml(
            "        minimize: ttft_ms\n        constraints: [\"ttft_ms.p99 <\"]\n        budget: { keep: 2 }",
        ),
    );
    assert!(
        errors.contains("constraint `ttft_ms.p99 <`: `` is not a number"),
        "{errors}"
    );
    assert!(
        errors.contains("`keep` expects a share above 0 and below 1, found `2`"),
        "{errors}"
    );
    let errors = validate_errors(
        &workspace,
        &yaml("        bisect: rate\n        constraints: [\"errors == 0\"]"),
    );
    assert!(
        errors.contains("`constraints` is for `maximize` and `minimize` only"),
        "{errors}"
    );
}

/// On Docker: the server is the simulator image at each cell's rate; one cell's server runs
/// out of memory at start, and is dropped, not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maximize_over_servers_drops_the_one_that_fails_and_finds_the_best() {
    let yaml = format!(
        r#"
on: workflow_dispatch
jobs:
  tune:
    strategy:
      fail-fast: false
      matrix:
        rate: [200, 1600, 400, 800]
        include:
          - {{ rate: 1600, oom: "--oom-at-start" }}
      search:
        maximize: output_tok_s
    steps:
      - id: server
        uses: start-container
        with:
          name: server
          image: {sim}
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --ttft 2ms --tokens-per-second ${{{{ matrix.rate }}}} ${{{{ matrix.oom }}}}
      - uses: wait-for-health
        with: {{ url: "http://server:30000/health", container: server, timeout: 30s }}
      - id: bench
        uses: benchmark
        with:
          target: http://server:30000
          mode: concurrency
          concurrency: 2
          requests: 8
          warmup: 0
          output-tokens: 16
"#,
        sim = images::SIM,
    );
    let Some(ran) = workflow(&yaml).on_docker().await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{}", ran.said());
    let all = ran.said();
    let first = all
        .lines()
        .find(|l| l.starts_with("maximize `output_tok_s`, round 1"))
        .unwrap_or_else(|| panic!("{all}"));
    assert!(first.contains("dropped: failed ("), "{first}");
    assert!(all.contains("→ the best is tune (800) with"), "{all}");
    // The cell whose server failed ran once.
    let oom_runs = started(&ran)
        .iter()
        .filter(|j| j.starts_with("tune (1600)"))
        .count();
    assert_eq!(oom_runs, 1, "{:?}", started(&ran));
}
