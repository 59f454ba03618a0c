//! `benchmark` and `compare-to-baseline` as steps of `gpuflow run`, on the local engine with
//! the simulator image and a real SQLite store in a real git repository: the same server twice
//! is `unchanged`, a slowed one a `regression` that fails the run, scripted benchmarks read
//! regex and JSON metrics, every result is stored with its fingerprint and `gpuflow history`
//! shows the series. These run `gpuflow run`, which sweeps orphans: nextest's `docker-sweep`
//! group.

use gpuflow::store::{ResultStore, RunStatus};

use crate::support::images::{BASE, SIM};
use crate::support::{Workspace, free_port, sim};

/// A git repository holding `w.yml`, committed; `None` only when Docker tests are skipped.
async fn repository(yaml: &str) -> Option<Workspace> {
    Workspace::workflow_repository(yaml, &[BASE, SIM]).await
}

/// The simulator published on `port`, waited for with busybox `wget` inside it, benchmarked
/// single-stream and compared with the previous run.
fn simulator_workflow(port: u16, tokens_per_second: u32, allow_incomparable: bool) -> String {
    let server = sim::container_steps(
        &format!(
            "gpuflow-sim --host 0.0.0.0 --port 30000 --ttft 20ms --tokens-per-second {tokens_per_second}"
        ),
        Some(port),
    );
    format!(
        r#"
name: sim-bench
on: workflow_dispatch
jobs:
  bench:
    steps:
{server}      - id: bench
        name: single-stream
        uses: benchmark
        with:
          target: http://127.0.0.1:{port}
          mode: single-stream
          output-tokens: 24
          requests: 4
          runs: 3
          warmup: 1
      - id: compare
        uses: compare-to-baseline
        with:
          metric: output_tok_s
          baseline: previous
          allow-incomparable: {allow_incomparable}
      - if: always()
        run: echo "verdict=${{{{ steps.compare.outputs.verdict }}}} tok/s=${{{{ steps.bench.outputs.output_tok_s }}}}"
"#
    )
}

/// `gpuflow run --plain w.yml` of `yaml` in `dir`: the exit code and all it printed.
fn run_workflow(dir: &Workspace, yaml: &str) -> (i32, String) {
    dir.write("w.yml", yaml);
    let out = dir.run_plain(&[]);
    (out.code().unwrap_or(-1), out.all())
}

#[tokio::test]
async fn the_same_simulator_twice_is_unchanged_and_a_slowed_one_a_failing_regression() {
    let Some(dir) = repository("").await else {
        return;
    };
    let port = free_port();
    let (code, out) = run_workflow(&dir, &simulator_workflow(port, 200, false));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("verdict=no-baseline"), "{out}");
    assert!(out.contains("requests,"), "the live progress line: {out}");

    let (code, out) = run_workflow(&dir, &simulator_workflow(port, 200, false));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("verdict=unchanged"), "{out}");
    assert!(
        out.contains("output_tok_s (decode tok/s, per-request median): unchanged"),
        "explained: {out}"
    );

    // Slower server flags are another environment: compared only when allowed, and then the
    // difference is named.
    let (code, out) = run_workflow(&dir, &simulator_workflow(port, 120, true));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("output_tok_s (decode tok/s, per-request median): regression"),
        "{out}"
    );
    assert!(
        out.contains("verdict=regression"),
        "a failed step keeps its outputs: {out}"
    );
    assert!(out.contains("failed `fail-on: regression`"), "{out}");
    assert!(out.contains("server-command"), "the changed field: {out}");

    let store = ResultStore::open(&dir.path().join(".gpuflow/results.db")).unwrap();
    assert_eq!(store.count().unwrap(), 3);
    let all = store
        .find(&gpuflow::store::ResultFilter {
            metric: "output_tok_s".into(),
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(all.len(), 3);
    let newest = &all[0];
    assert_eq!(newest.status, RunStatus::Success);
    assert_eq!(newest.workflow, "sim-bench");
    assert_eq!(newest.job, "bench");
    assert_eq!(newest.step, "single-stream");
    assert_eq!(newest.git.ref_name.as_deref(), Some("main"));
    assert_eq!(newest.git.commit.as_ref().map(String::len), Some(40));
    let id = &newest.fingerprint.identity;
    assert_eq!(id.host_label, "local");
    assert!(
        id.image_digest
            .as_deref()
            .is_some_and(|d| d.starts_with("sha256:")),
        "{id:?}"
    );
    assert!(
        id.server_command
            .windows(2)
            .any(|w| w == ["--tokens-per-second", "120"]),
        "{id:?}"
    );
    assert_eq!(
        id.benchmark.get("mode").map(String::as_str),
        Some("single-stream")
    );
    assert!(
        !id.benchmark.contains_key("target"),
        "the port is not the experiment"
    );
    let samples = &newest.metric("output_tok_s").unwrap().samples;
    assert_eq!(samples.len(), 12, "one per measured request: {samples:?}");
    let slowed = gpuflow::compare::center(samples).unwrap();
    let before = gpuflow::compare::center(&all[1].metric("output_tok_s").unwrap().samples).unwrap();
    assert!(slowed < before * 0.75, "{slowed} vs {before}");
    assert_eq!(
        all[1].fingerprint.identity.series_key(),
        all[2].fingerprint.identity.series_key()
    );
    assert_ne!(id.series_key(), all[1].fingerprint.identity.series_key());

    let runs = std::fs::read_dir(dir.path().join(".gpuflow/runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 3);

    let history = dir
        .gpuflow()
        .args(["history", "output_tok_s", "--json"])
        .success();
    let json: serde_json::Value = serde_json::from_str(&history.stdout).unwrap();
    let points: usize = json["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["points"].as_array().unwrap().len())
        .sum();
    assert_eq!(points, 3, "{json}");
    dir.gpuflow()
        .args(["history", "output_tok_s"])
        .stdout_contains(&all[0].run_id)
        .success();
}

const SCRIPTED: &str = r#"
name: scripted
on: workflow_dispatch
jobs:
  script:
    steps:
      - id: host
        uses: benchmark
        with:
          command: |
            echo "warming the cache"
            echo "decode speed: 41.5 tok/s"
            echo '{"latency": {"p50": 3.25, "runs": [1, 7.5]}}'
          runs: 3
          warmup: 1
          metrics:
            speed: { regex: 'decode speed: (?P<value>[0-9.]+) tok/s', unit: tok/s }
            p50: { json: latency.p50, unit: ms }
            second: { json: latency.runs.1, unit: ms, direction: lower }
      - uses: start-container
        with:
          name: box
          image: gpuflow-base:test
          command: sleep 300
      - id: inside
        uses: benchmark
        with:
          container: box
          command: echo "took 12 ms" && test -f /.dockerenv
          runs: 2
          warmup: 0
          metrics:
            took: { regex: 'took (?P<value>[0-9]+) ms', unit: ms }
      - id: compare
        uses: compare-to-baseline
        with:
          from: host
          metrics: [speed, p50]
      - run: |
          echo "speed=${{ steps.host.outputs.speed }} p50=${{ steps.host.outputs.p50 }} second=${{ steps.host.outputs.second }}"
          echo "took=${{ steps.inside.outputs.took }} verdict=${{ steps.compare.outputs.verdict }}"
          test -f "${{ steps.host.outputs.result-file }}" && echo "result file present"
"#;

#[tokio::test]
async fn scripted_benchmarks_read_regex_and_json_metrics_on_the_host_and_in_a_container() {
    let Some(dir) = repository(SCRIPTED).await else {
        return;
    };
    let (code, out) = run_workflow(&dir, SCRIPTED);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("speed=41.5 p50=3.25 second=7.5"), "{out}");
    assert!(out.contains("took=12 verdict=no-baseline"), "{out}");
    assert!(out.contains("result file present"), "{out}");
    assert!(out.contains("warm-up 1/1"), "{out}");

    let store = ResultStore::open(&dir.path().join(".gpuflow/results.db")).unwrap();
    let results = store
        .find(&gpuflow::store::ResultFilter {
            metric: "speed".into(),
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    let speed = r.metric("speed").unwrap();
    assert_eq!(speed.samples, [41.5, 41.5, 41.5], "runs, not the warm-up");
    assert_eq!(speed.direction.as_str(), "higher", "from the unit");
    assert_eq!(r.metric("second").unwrap().direction.as_str(), "lower");
    assert!(r.fingerprint.identity.benchmark.contains_key("command"));
    assert_eq!(
        store
            .find(&gpuflow::store::ResultFilter {
                metric: "took".into(),
                limit: 10,
                ..Default::default()
            })
            .unwrap()[0]
            .metric("took")
            .unwrap()
            .samples,
        [12.0, 12.0]
    );
}

#[tokio::test]
async fn a_scripted_benchmark_without_its_metric_in_the_output_fails_the_step_saying_which() {
    let yaml = r#"
on: workflow_dispatch
jobs:
  script:
    steps:
      - uses: benchmark
        with:
          command: echo "nothing useful"
          metrics:
            speed: { regex: 'speed: (?P<value>[0-9.]+)' }
"#;
    let Some(dir) = repository(yaml).await else {
        return;
    };
    let (code, out) = run_workflow(&dir, yaml);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("metric `speed`: no line of the output matches"),
        "{out}"
    );
}

/// `workflows/demo.yml` up to `compare-to-baseline`, but for what other parts provide:
/// `wait-for-health` is a `wget` loop in the server's container, the `report` job is left out,
/// and the port is `port` (a free one, so parallel tests cannot collide).
/// [`the_demo_workflow_here_is_demo_yml_but_for_the_wait_the_report_and_the_port`] keeps it
/// in step with the shipped file.
pub(crate) fn demo_without_report(port: u16) -> String {
    format!(
        r#"name: demo
on:
  workflow_dispatch:
    inputs:
      output-tokens:
        description: Tokens generated per request.
        type: number
        default: "64"
env:
  SIM_IMAGE: gpuflow-sim:test
jobs:
  bench:
    name: simulated server
    timeout-minutes: 10
    strategy:
      max-parallel: 1
      matrix:
        tokens-per-chunk: [1, 4]
    outputs:
      tok-s: ${{{{ steps.bench.outputs.output_tok_s }}}}
    steps:
      - id: server
        name: start the simulated server
        uses: start-container
        with:
          name: server
          image: ${{{{ env.SIM_IMAGE }}}}
          command: >-
            gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 2s --tokens-per-second 90
            --tokens-per-chunk ${{{{ matrix.tokens-per-chunk }}}}
          ports: ["127.0.0.1:{port}:30000"]
{wait}      - name: single-stream benchmark
        id: bench
        uses: benchmark
        with:
          target: http://127.0.0.1:{port}
          mode: single-stream
          output-tokens: ${{{{ inputs.output-tokens }}}}
          runs: 3
          warmup: 1
      - name: compare with the previous run
        uses: compare-to-baseline
        with:
          metric: output_tok_s
          baseline: previous
          tolerance: 5%
"#,
        wait = sim::wait_step(),
    )
}

/// The workflow the demo test runs is `workflows/demo.yml` as shipped, but for the wait step,
/// the `report` job and the port: a change to the demo must be made here too.
#[test]
fn the_demo_workflow_here_is_demo_yml_but_for_the_wait_the_report_and_the_port() {
    let parse = |text: &str| -> serde_json::Value { yaml_serde::from_str(text).unwrap() };
    let mut shipped = parse(&crate::support::shipped("workflows/demo.yml"));
    let mut here = parse(&demo_without_report(30000));

    let jobs = shipped["jobs"].as_object_mut().unwrap();
    assert!(
        jobs.shift_remove("report").is_some(),
        "demo.yml has no report job"
    );
    let shipped_steps = shipped["jobs"]["bench"]["steps"].as_array_mut().unwrap();
    let shipped_wait = shipped_steps.remove(1);
    assert_eq!(shipped_wait["uses"], "wait-for-health", "{shipped_wait}");
    let here_steps = here["jobs"]["bench"]["steps"].as_array_mut().unwrap();
    let here_wait = here_steps.remove(1);
    assert_eq!(here_wait["container"], "server", "{here_wait}");

    pretty_assertions::assert_eq!(here, shipped);
}

#[tokio::test]
async fn the_demo_runs_up_to_its_comparison_and_a_second_run_is_unchanged() {
    let yaml = demo_without_report(free_port());
    assert!(
        !yaml.contains("wait-for-health") && !yaml.contains("uses: report"),
        "{yaml}"
    );
    let Some(dir) = repository(&yaml).await else {
        return;
    };
    let run = || {
        let out = dir.run_plain(&["--input", "output-tokens=16"]);
        (out.code(), out.all())
    };
    let (code, out) = run();
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out.matches("output_tok_s (decode tok/s, per-request median): no-baseline —")
            .count(),
        2,
        "{out}"
    );
    let (code, out) = run();
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out.matches("output_tok_s (decode tok/s, per-request median): unchanged —")
            .count(),
        2,
        "one per matrix cell: {out}"
    );
    let store = ResultStore::open(&dir.path().join(".gpuflow/results.db")).unwrap();
    assert_eq!(store.count().unwrap(), 4);
}

#[tokio::test]
async fn a_target_naming_a_container_of_the_job_is_measured_on_its_network() {
    let server = sim::container_steps(
        "gpuflow-sim --host 0.0.0.0 --port 30000 --ttft 10ms --tokens-per-second 400",
        None,
    );
    let yaml = &format!(
        r#"
on: workflow_dispatch
jobs:
  inside:
    steps:
{server}      - id: bench
        uses: benchmark
        with:
          target: http://server:30000
          concurrency: 2
          requests: 6
          output-tokens: 8
          warmup: 0
      - run: echo "errors=${{{{ steps.bench.outputs.errors }}}} throughput=${{{{ steps.bench.outputs.output_tok_s }}}}"
"#
    );
    let Some(dir) = repository(yaml).await else {
        return;
    };
    let (code, out) = run_workflow(&dir, yaml);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("`server` is a container of this job: measuring it at `http://"),
        "{out}"
    );
    assert!(out.contains("errors=0 throughput="), "{out}");
}

#[tokio::test]
async fn the_store_flag_and_variable_choose_where_results_go() {
    let yaml = r#"
on: workflow_dispatch
jobs:
  script:
    steps:
      - uses: benchmark
        with:
          command: echo "ops 3"
          warmup: 0
          metrics:
            ops: { regex: 'ops (?P<value>[0-9]+)', unit: ops/s }
"#;
    let Some(dir) = repository(yaml).await else {
        return;
    };
    let flag = dir.path().join("elsewhere/flag.db");
    dir.gpuflow()
        .args(["run", "--plain", "w.yml", "--store"])
        .arg(&flag)
        .success();
    let variable = dir.path().join("variable.db");
    dir.gpuflow()
        .args(["run", "--plain", "w.yml"])
        .env("GPUFLOW_STORE", &variable)
        .success();
    for path in [&flag, &variable] {
        assert_eq!(
            ResultStore::open(path).unwrap().count().unwrap(),
            1,
            "{path:?}"
        );
    }
    assert!(!dir.path().join(".gpuflow/results.db").exists());
}

/// The server's container crashes during a `duration` benchmark: the step ends at once with
/// "the server went away", how the container ended and the cause its log shows, not after
/// the 60 s it was asked to run, and the job's containers are removed.
#[tokio::test]
async fn a_server_that_crashes_mid_benchmark_ends_the_step_with_its_cause() {
    let Some(dir) = repository("").await else {
        return;
    };
    let port = free_port();
    let yaml = format!(
        r#"
name: crash
on: workflow_dispatch
jobs:
  bench:
    steps:
      - uses: start-container
        with:
          name: server
          image: gpuflow-sim:test
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --ttft 5ms --tokens-per-second 2000 --crash-after-requests 30
          ports: ["127.0.0.1:{port}:30000"]
      - uses: wait-for-health
        with: {{ url: "http://127.0.0.1:{port}/health", timeout: 30s }}
      - uses: benchmark
        with:
          target: http://127.0.0.1:{port}
          mode: concurrency
          concurrency: 2
          duration: 60s
          warmup: 0
          output-tokens: 8
"#
    );
    let started = std::time::Instant::now();
    let (code, out) = run_workflow(&dir, &yaml);
    assert_eq!(code, 1, "{out}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(40),
        "the 60 s benchmark ended with its server: {:?}\n{out}",
        started.elapsed()
    );
    assert!(out.contains("the server went away at "), "{out}");
    assert!(
        out.contains("container `server` exited with code 1"),
        "{out}"
    );
    assert!(
        out.contains("cause: "),
        "the crash's recognised cause: {out}"
    );
}
