//! Every `gpuflow run` ends with its answer: each benchmark's key figure with its interval,
//! each comparison's verdict and ratio, the report's path — as the last lines of plain output
//! and as the last `--json` event (`run_headline`). The verdict names the figure it judges
//! (`output_tok_s (decode tok/s, per-request median)`) and the benchmark's table shows that
//! figure under the same name, with the same digits.
//!
//! A real `gpuflow run` of a workflow with `benchmark`, `compare-to-baseline` and `report`
//! steps against `gpuflow-sim` started on this machine (no image needed). `gpuflow run` sweeps
//! orphans: nextest's
//! `docker-sweep` group.

use crate::support::Workspace;
use crate::support::sim::SimProcess;

/// How the verdict and the benchmark's table both name the single-stream `output_tok_s`.
const TITLE: &str = "output_tok_s (decode tok/s, per-request median)";

fn workflow(port: u16) -> String {
    format!(
        r#"
name: headline
on: workflow_dispatch
jobs:
  bench:
    steps:
      - id: bench
        name: single-stream
        uses: benchmark
        with:
          target: http://127.0.0.1:{port}
          mode: single-stream
          output-tokens: 16
          requests: 4
          runs: 3
          warmup: 1
      - name: compare
        uses: compare-to-baseline
        with:
          metric: output_tok_s
          baseline: previous
          fail-on: never
  report:
    needs: bench
    if: always()
    steps:
      - name: write the report
        uses: report
        with:
          format: markdown
"#
    )
}

/// A git repository holding the workflow against `sim`; `None` only when Docker tests are
/// skipped.
async fn repository(sim: &SimProcess) -> Option<Workspace> {
    Workspace::workflow_repository(&workflow(sim.addr().port()), &[]).await
}

/// The value after `label` on the first line that has it, up to the first space.
fn value_after<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        l.split_once(label)
            .and_then(|(_, rest)| rest.split_whitespace().next())
    })
}

#[tokio::test]
async fn plain_output_ends_with_the_headline_and_the_verdict_names_the_figure_it_judges() {
    let sim = SimProcess::start(&["--ttft", "20ms", "--tokens-per-second", "150"]);
    let Some(dir) = repository(&sim).await else {
        return;
    };
    dir.gpuflow()
        .args(["run", "--plain", "w.yml"])
        .stdout_contains(format!("{TITLE} no-baseline"))
        .success();

    let out = dir
        .gpuflow()
        .args(["run", "--plain", "w.yml"])
        .success()
        .stdout;

    // Defect 7: the figure the verdict judges is in the benchmark's table under its name.
    let table = value_after(&out, &format!("gpuflow: {TITLE}:"))
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or_else(|| panic!("no `{TITLE}:` row in the benchmark's table: {out}"));
    let verdict_line = out
        .lines()
        .find(|l| l.contains(&format!("gpuflow: {TITLE}: ")) && l.contains(" — "))
        .unwrap_or_else(|| panic!("no verdict line naming `{TITLE}`: {out}"));
    let judged = verdict_line
        .split_once(" — ")
        .unwrap()
        .1
        .split_whitespace()
        .next()
        .unwrap();
    assert_eq!(judged, table, "{verdict_line}\n{out}");

    // Defect 8: the last lines are the headline.
    let lines: Vec<&str> = out.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.starts_with("headline: run "))
        .unwrap_or_else(|| panic!("no headline: {out}"));
    let headline = &lines[start..];
    assert!(
        lines[..start].contains(&"summary:"),
        "the headline comes after the summary: {out}"
    );
    assert!(headline[0].ends_with(" success"), "{out}");
    assert_eq!(headline.len(), 5, "benchmark, verdict, report, logs: {out}");
    let bench = headline[1];
    assert!(
        bench.starts_with("  benchmark  [bench] single-stream: decode_tok_s ")
            && bench.contains(" ± ")
            && bench.ends_with(" tok/s (mean of 3 runs, 95% CI)"),
        "{bench}"
    );
    // Its figure is the benchmark table's across-runs mean of `decode_tok_s`.
    let mean = bench.split_whitespace().nth(4).unwrap();
    let across_mean = out
        .lines()
        .find(|l| l.contains("gpuflow: decode_tok_s:"))
        .unwrap()
        .split(" · ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert_eq!(mean, across_mean, "{bench}\n{out}");

    let verdict = headline[2];
    assert!(
        verdict.starts_with(&format!("  verdict    [bench] compare: {TITLE} ")),
        "{verdict}"
    );
    assert!(verdict.contains(", ratio "), "{verdict}");
    assert!(
        verdict.contains(&format!(": {judged} tok/s vs ")),
        "the judged figure: {verdict}"
    );
    let report = headline[3].strip_prefix("  report     ").unwrap();
    assert!(report.ends_with("report/report.md"), "{report}");
    assert!(dir.path().join(report).is_file(), "{report}");
    let logs = headline[4].strip_prefix("  logs       ").unwrap();
    assert!(
        dir.path().join(logs).join("events.jsonl").is_file(),
        "{logs}"
    );
}

#[tokio::test]
async fn json_output_ends_with_a_run_headline_event() {
    let sim = SimProcess::start(&["--ttft", "20ms", "--tokens-per-second", "150"]);
    let Some(dir) = repository(&sim).await else {
        return;
    };
    dir.gpuflow().args(["run", "--plain", "w.yml"]).success();
    let run = dir.gpuflow().args(["run", "--json", "w.yml"]).success();
    let events = run.json_lines();
    let out = run.stdout;
    let n = events.len();
    assert_eq!(events[n - 2]["type"], "run_finished", "{out}");
    let h = &events[n - 1];
    assert_eq!(h["type"], "run_headline", "{out}");
    assert_eq!(h["result"], "success");
    assert_eq!(h["run_id"], events[0]["run_id"]);

    let benchmarks = h["benchmarks"].as_array().unwrap();
    assert_eq!(benchmarks.len(), 1, "{h}");
    let b = &benchmarks[0];
    assert_eq!(b["metric"], "decode_tok_s");
    assert_eq!(b["unit"], "tok/s");
    assert_eq!(b["runs"], 3);
    assert_eq!(b["job"]["job"], "bench");
    let (low, mean, high) = (
        b["ci95_low"].as_f64().unwrap(),
        b["mean"].as_f64().unwrap(),
        b["ci95_high"].as_f64().unwrap(),
    );
    assert!(low <= mean && mean <= high && mean > 0.0, "{b}");
    // The benchmark step said the same as it finished.
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "benchmark_result" && e["mean"] == b["mean"]),
        "{out}"
    );

    let comparisons = h["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 1, "{h}");
    let c = &comparisons[0];
    assert_eq!(c["metric"], "output_tok_s");
    assert_eq!(c["meaning"], "decode tok/s, per-request median");
    assert!(
        ["unchanged", "improvement", "regression", "inconclusive"]
            .contains(&c["verdict"].as_str().unwrap()),
        "{c}"
    );
    assert!(c["ratio"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["current"].as_f64().unwrap() > 0.0, "{c}");

    let reports = h["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 1, "{h}");
    let path = reports[0]["path"].as_str().unwrap();
    assert!(dir.path().join(path).is_file(), "{path}");
    assert!(
        dir.path()
            .join(h["log_dir"].as_str().unwrap())
            .join("events.jsonl")
            .is_file()
    );
}
