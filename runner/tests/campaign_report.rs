//! The campaign report (docs/campaigns.md, "The campaign report"): a run's tuning campaign —
//! one job's cells or a search's probes — as one page, from the run's stored events and its
//! results. A search on the host (no engine needed) checks statuses, causes, the best cell and
//! the commit; a grid of simulated servers checks server keys, reuse and the Pareto chart.

use std::sync::Arc;

use gpuflow::engine::JobResult;
use gpuflow::events::EventSink;
use gpuflow::report::Format;
use gpuflow::report::campaign::{self, CampaignOptions, CampaignSource};
use gpuflow::run_logs::LogStore;
use gpuflow::store::ResultStore;

use crate::support::Workspace;
use crate::support::engine::{Ran, workflow};
use crate::support::git::git;
use crate::support::images;

/// A bisect over `frac` (70 and below work) whose probes measure a scripted benchmark, and a
/// job after it that renders the campaign report and commits it.
const SEARCH: &str = r#"name: fit
on: workflow_dispatch
jobs:
  probe:
    strategy:
      matrix:
        frac: [50, 60, 70, 80, 90]
      search: { bisect: frac }
    steps:
      - run: test ${{ matrix.frac }} -le 70
      - uses: benchmark
        with:
          command: echo "speed $(( ${{ matrix.frac }} * 2 ))"; echo "lat 5"
          runs: 2
          warmup: 0
          metrics:
            speed: { regex: 'speed (?P<value>[0-9.]+)', unit: tok/s }
            lat: { regex: 'lat (?P<value>[0-9.]+)', unit: ms }
  report:
    needs: probe
    steps:
      - id: r
        uses: report
        with:
          campaign: probe
          throughput: speed
          latency: lat
          commit: { branch: results }
      - run: echo "report=${{ steps.r.outputs.path }}"
"#;

fn repository() -> Workspace {
    let repo = Workspace::repository();
    repo.git(&["config", "user.name", "Test"]);
    repo.git(&["config", "user.email", "test@example.com"]);
    repo.write("w.yml", SEARCH);
    repo.write(".gitignore", ".gpuflow/\n");
    repo.commit("workflow");
    repo
}

#[test]
fn a_search_campaign_is_reported_by_its_step_and_committed() {
    let repo = repository();
    let out = repo.run_plain(&[]);
    assert_eq!(out.code(), Some(0), "{}", out.all());
    let run = repo.only_run();
    let run_id = run.file_name().unwrap().to_string_lossy().into_owned();
    let md = std::fs::read_to_string(run.join("campaign-probe/report.md")).unwrap();
    // 70 ok (the boundary), 80 infeasible, the other three not needed.
    assert!(
        md.contains("| probe (70) ★ ◆ | 70 | — | ok | 140.0 tok/s | 5.00 ms | — |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| probe (80) | 80 | — | infeasible: the script exited with code 1 | — | — | — |"
        ),
        "{md}"
    );
    assert_eq!(
        md.matches("| skipped: not needed: the bisect of `frac`")
            .count(),
        3,
        "{md}"
    );
    assert!(
        md.contains("5 cells: 1 ok, 1 infeasible, 3 skipped"),
        "{md}"
    );
    assert!(
        md.contains("- **probe (70)**: speed mean 140.0 tok/s, lat p50 5.00 ms (bisect of `frac`: 70 ok, 80 failed (the script exited with code 1) → the largest `frac` that succeeds is 70 (2 probes of 5 cells))"),
        "{md}"
    );
    let commit = git(repo.path(), &["rev-parse", "--short=10", "HEAD"]);
    let generated = regex::Regex::new(r"generated \S+").unwrap();
    let stable = md.replace(&run_id, "RUN").replace(commit.trim(), "COMMIT");
    insta::assert_snapshot!(
        "campaign_report_of_a_search",
        generated.replace(&stable, "generated NOW")
    );
    // Committed beside the run's own reports, the checkout untouched.
    let listed = git(repo.path(), &["ls-tree", "-r", "--name-only", "results"]);
    for file in ["report.md", "pareto.svg", "record.json"] {
        let path = format!("runs/{run_id}/campaign-probe/{file}");
        assert!(listed.lines().any(|l| l == path), "{path} in {listed}");
    }
    let subject = git(repo.path(), &["log", "-1", "--format=%s", "results"]);
    assert_eq!(
        subject.trim(),
        format!("gpuflow: fit run {run_id}: campaign `probe`")
    );
    assert_eq!(git(repo.path(), &["status", "--porcelain"]), "");

    // The command gives the same page as HTML, and names the jobs when one is misspelt.
    let html = repo
        .gpuflow()
        .args(["report", &run_id, "--campaign", "probe", "--format", "html"])
        .args(["--throughput", "speed", "--latency", "lat"])
        .output();
    assert_eq!(html.code(), Some(0), "{}", html.all());
    let page = std::fs::read_to_string(run.join("campaign-probe/report.html")).unwrap();
    assert!(
        page.contains(r#"<span class="status s-infeasible">infeasible</span>"#),
        "{page}"
    );
    let wrong = repo
        .gpuflow()
        .args(["report", &run_id, "--campaign", "prob"])
        .output();
    assert_eq!(wrong.code(), Some(2), "{}", wrong.all());
    assert!(
        wrong.all().contains("run `") && wrong.all().contains("has no job `prob`"),
        "{}",
        wrong.all()
    );
    assert!(
        wrong.all().contains("did you mean `probe`?"),
        "{}",
        wrong.all()
    );
}

/// A tuning grid of simulated servers: `graph-bs` a server flag (two servers), `concurrency`
/// a client input (two levels each).
fn grid() -> String {
    format!(
        r#"
on: workflow_dispatch
jobs:
  tune:
    strategy:
      fail-fast: false
      matrix:
        graph-bs: [128, 256]
        concurrency: [1, 4]
    steps:
      - uses: start-container
        with:
          name: server
          image: {sim}
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 1500ms --ttft 2ms --tokens-per-second 5000
          env: {{ CUDA_GRAPH_MAX_BS: "${{{{ matrix.graph-bs }}}}" }}
      - uses: wait-for-health
        with: {{ url: "http://server:30000/health", container: server, timeout: 1m }}
      - uses: benchmark
        with:
          target: http://server:30000
          mode: concurrency
          concurrency: ${{{{ matrix.concurrency }}}}
          requests: 8
          warmup: 0
          output-tokens: 4
"#,
        sim = images::SIM,
    )
}

/// The run's events stored as `gpuflow run` stores them (the engine test harness collects
/// them in memory).
fn store_logs(ran: &Ran) -> std::path::PathBuf {
    let dir = ran.report.log_dir.clone();
    let store = Arc::new(LogStore::create(&dir).unwrap());
    for e in &ran.events {
        store.emit(e.clone());
    }
    drop(store);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grid_of_servers_is_reported_with_keys_reuse_and_its_front() {
    let Some(ran) = workflow(&grid()).on_docker().await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{}", ran.said());
    let run_dir = store_logs(&ran);
    let store = ResultStore::open(&ran.workspace.path().join(".gpuflow/results.db")).unwrap();
    let data = campaign::gather(&CampaignSource {
        store: &store,
        run_id: &ran.report.run_id,
        run_dir: &run_dir,
        job: "tune",
        options: CampaignOptions::default(),
        title: None,
        now_ms: 0,
    })
    .unwrap();
    assert_eq!(data.cells.len(), 4);
    assert!(
        data.cells.iter().all(|c| c.status == "ok"),
        "{:#?}",
        data.cells
    );
    // Two keys, each started once and adopted once.
    let keys: std::collections::BTreeSet<_> = data
        .cells
        .iter()
        .filter_map(|c| c.server_key.clone())
        .collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(data.cells.iter().filter(|c| c.reused).count(), 2);
    let adopted = data
        .cells
        .iter()
        .filter(|c| c.server_text.ends_with(", reused (1 cell before)"))
        .count();
    assert_eq!(adopted, 2, "{:#?}", data.cells);
    // Each load waited out the 1.5 s start-up delay; adopting took a fraction of it.
    assert!(data.reuse.saved_s > 2.0, "{:?}", data.reuse);
    let line = data.reuse.line.clone().unwrap();
    assert!(line.starts_with("2 servers for 4 cells; ~"), "{line}");
    assert!(
        line.ends_with(" of loading saved (2 cells adopted a running server)"),
        "{line}"
    );
    assert_eq!(data.throughput.metric, "output_throughput");
    assert_eq!(data.latency.label, "ttft_ms p50");
    assert!(
        data.cells
            .iter()
            .all(|c| c.metrics.iter().any(|m| m.ci_low.is_some()))
    );
    assert_eq!(data.best.len(), 1);
    let files = campaign::campaign_files(&data, Format::Markdown, None).unwrap();
    let md = String::from_utf8(files[0].contents.clone()).unwrap();
    assert!(md.contains(&format!("**Servers:** {line}.")), "{md}");
    for c in &data.cells {
        assert!(md.contains(&format!("| {}", c.label)), "{md}");
    }
    let svg = String::from_utf8(files[1].contents.clone()).unwrap();
    let on_front = data.cells.iter().filter(|c| c.pareto).count();
    assert!(on_front >= 1);
    assert_eq!(
        svg.matches(r#"class="point front-point""#).count(),
        on_front,
        "{svg}"
    );
    assert!(svg.contains(r#"<polyline class="front""#), "{svg}");
}
