//! Every run says where its results went, and says the same thing everywhere (issue "Docs that
//! cannot drift"): the `report` step logs the report's path and the run's closing lines name
//! it; a report (the step's and `gpuflow report`'s, and its results-branch commit) gives the
//! verdict the run's `compare-to-baseline` step gave, not one judged again with other inputs;
//! containers kept with `--keep-containers` survive the next run's sweep until `gpuflow gc`.
//!
//! Real `gpuflow run`s in real git repositories: against `gpuflow-sim` started on this machine
//! (no image), and on the local Docker engine for the kept containers. `gpuflow run` sweeps
//! orphans: nextest's `docker-sweep` group.

use std::path::Path;

use serde_json::Value;

use crate::support::images::{BASE, docker_with};
use crate::support::sim::SimProcess;
use crate::support::{Workspace, command::Gpuflow};

/// The simulator benchmarked single-stream, compared with the previous run whatever its
/// environment, and reported. `output_tokens` is part of the benchmark's identity: two values
/// are two series, which the default comparison (a window of the same series) would not
/// compare.
fn pair_workflow(port: u16, output_tokens: u32) -> String {
    format!(
        r#"
name: pair
on: workflow_dispatch
jobs:
  bench:
    steps:
      - name: single-stream
        uses: benchmark
        with:
          target: http://127.0.0.1:{port}
          mode: single-stream
          output-tokens: {output_tokens}
          requests: 4
          runs: 3
          warmup: 1
      - name: compare with the previous run
        uses: compare-to-baseline
        with:
          metric: output_tok_s
          baseline: previous
          allow-incomparable: true
  report:
    needs: bench
    if: always()
    steps:
      - name: write the report
        uses: report
"#
    )
}

/// `gpuflow` in `repo` with its own home `home`.
fn gpuflow_in(repo: &Workspace, home: &Workspace) -> Gpuflow {
    repo.gpuflow().home(home.path())
}

/// `gpuflow run --plain w.yml` with `yaml`: exit code and stdout + stderr.
fn run(repo: &Workspace, home: &Workspace, yaml: &str, args: &[&str]) -> (Option<i32>, String) {
    repo.write("w.yml", yaml);
    let out = gpuflow_in(repo, home)
        .args(["run", "--plain"])
        .args(args)
        .arg("w.yml")
        .output();
    (out.code(), out.all())
}

/// A git repository with one commit (reports and commits need one).
fn repository() -> Workspace {
    Workspace::repository()
        .file("README.md", "bench\n")
        .committed("start")
}

/// The id `gpuflow run` printed on its first line.
fn run_id(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no run id: {out}"))
        .to_string()
}

/// Defect B: the step said `regression` (the previous run, of another series, allowed), and
/// `gpuflow report` said `no-baseline` (its own comparison: a window of the same series), as
/// did the results-branch commit's title. Defect A2: the report step logged only "success".
#[test]
fn the_report_gives_the_verdict_the_run_gave_and_says_where_it_is() {
    let fast = SimProcess::start(&["--ttft", "10ms", "--tokens-per-second", "200"]);
    let slow = SimProcess::start(&["--ttft", "10ms", "--tokens-per-second", "100"]);
    let repo = repository();
    let home = Workspace::empty();
    let dir = repo.path();

    let (code, out) = run(&repo, &home, &pair_workflow(fast.addr().port(), 16), &[]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = run(&repo, &home, &pair_workflow(slow.addr().port(), 17), &[]);
    assert_eq!(code, Some(1), "the regression fails the run: {out}");
    assert!(
        out.contains("(decode tok/s, per-request median): regression — "),
        "{out}"
    );
    let id = run_id(&out);

    // The step's own line says where the report is, and so does the run's last word.
    let written = out
        .lines()
        .find_map(|l| l.strip_prefix("[report] write the report | gpuflow: wrote the report `"))
        .and_then(|l| l.strip_suffix('`'))
        .unwrap_or_else(|| panic!("the report step does not say where it wrote: {out}"));
    assert!(Path::new(written).is_file(), "{written}");
    assert!(
        written.ends_with(&format!(".gpuflow/runs/{id}/report/report.md")),
        "{written}"
    );
    let closing = out.lines().rev().take(6).collect::<Vec<_>>();
    assert!(
        closing.contains(&format!("  report     {written}").as_str()),
        "the closing lines name the report: {out}"
    );

    // The step's report has the run's verdict, and so has `gpuflow report` made afterwards.
    let md = std::fs::read_to_string(written).unwrap();
    assert!(md.contains("**Verdict: regression**"), "{md}");
    assert!(
        md.contains("(judged by `compare with the previous run`)"),
        "{md}"
    );
    gpuflow_in(&repo, &home)
        .args(["report", &id, "--out", "again", "--commit"])
        .success();
    let md = std::fs::read_to_string(dir.join("again/report.md")).unwrap();
    assert!(md.contains("**Verdict: regression**"), "{md}");
    assert!(md.contains("- regression: 1\n"), "{md}");
    assert!(
        md.contains("not counted in the verdict"),
        "metrics no step judged say so: {md}"
    );
    let record: Value =
        serde_json::from_slice(&std::fs::read(dir.join("again/record.json")).unwrap()).unwrap();
    assert_eq!(record["verdict"], "regression", "{record}");
    let tok = record["cells"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "output_tok_s")
        .unwrap();
    assert_eq!(tok["verdict"], "regression", "{tok}");
    assert_eq!(tok["judged_by"], "compare with the previous run", "{tok}");
    assert!(
        tok["baseline_description"]
            .as_str()
            .unwrap()
            .contains("the previous run `"),
        "the step's baseline, not the report's window: {tok}"
    );

    let title = repo.git(&["log", "-1", "--format=%s", "gpuflow-results"]);
    assert_eq!(title, format!("gpuflow: pair run {id}: regression"));
}

fn kept_workflow(name: &str) -> String {
    format!(
        r#"
name: keep
on: workflow_dispatch
jobs:
  look:
    steps:
      - uses: start-container
        with:
          name: {name}
          image: gpuflow-base:test
          command: sleep 300
      - run: echo started
"#
    )
}

/// Defect A4: containers kept with `--keep-containers` were removed without a word by the
/// next `gpuflow run`'s sweep (their runner had ended). They stay until `gpuflow gc`.
#[tokio::test]
async fn kept_containers_stay_until_gc_removes_them() {
    let Some(docker) = docker_with(&[BASE]).await else {
        return;
    };
    let repo = repository();
    // A private runner-lock folder: `gc` judges only this test's runners gone.
    let home = Workspace::empty();

    let (code, out) = run(&repo, &home, &kept_workflow("kept"), &["--keep-containers"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("they stay until `gpuflow gc` removes them"),
        "{out}"
    );
    let kept_run = run_id(&out);
    let kept = docker.run_containers(&kept_run).await.unwrap();
    assert_eq!(kept.len(), 1, "{out}");

    // The next run connects to the engine, and so sweeps what runners that are gone left.
    let (code, out) = run(&repo, &home, &kept_workflow("other"), &[]);
    assert_eq!(code, Some(0), "{out}");
    let other_run = run_id(&out);
    assert_eq!(
        docker.run_containers(&kept_run).await.unwrap(),
        kept,
        "the sweep left the kept container"
    );
    assert!(docker.run_containers(&other_run).await.unwrap().is_empty());

    let out = gpuflow_in(&repo, &home).args(["gc", "--dry-run"]).success();
    let listed = &out.stdout;
    assert!(
        listed.contains(&format!("run `{kept_run}`"))
            && listed.contains("kept with `--keep-containers`"),
        "{listed}"
    );
    let out = gpuflow_in(&repo, &home).arg("gc").success();
    assert!(
        docker.run_containers(&kept_run).await.unwrap().is_empty(),
        "{}",
        out.stdout
    );
}
