//! Reports end to end on a real SQLite store and real git repositories in temporary
//! directories: the Markdown report (snapshot), template errors with their location, eight
//! concurrent `gpuflow report --commit` processes committing to one results branch without
//! losing a commit or touching the user's checkout, a push to a `file://` remote, and the HTML
//! report's charts screenshotted in headless Chromium.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuflow::compare::StepInputs;
use gpuflow::report::{
    Format, ReportData, ReportSource, ResultsBranch, commit_report, render, report_files,
};
use gpuflow::store::{
    Fingerprint, GitInfo, Identity, Info, NewMetric, NewResult, ResultStore, RunStatus,
};

use crate::support::{Workspace, git, gpuflow};

/// 2026-11-30 09:00 UTC: fixed so reports are the same on every run.
const T0: i64 = 1_796_029_200_000;

fn identity(driver: &str, allreduce: &str) -> Identity {
    let mut command: Vec<String> = ["python3", "-m", "sglang.launch_server", "--tp", "8"]
        .map(String::from)
        .to_vec();
    if allreduce == "custom" {
        command.push("--enable-custom-allreduce".into());
    }
    Identity {
        host_label: "blackwell".into(),
        gpu_model: Some("NVIDIA RTX PRO 6000 Blackwell".into()),
        gpu_count: 8,
        driver: Some(driver.into()),
        cuda: Some("12.9".into()),
        image_digest: Some("sha256:5d41402abc4b2a76b9719d911017c592".into()),
        server_command: command,
        benchmark: BTreeMap::from([("mode".into(), "single-stream".into())]),
    }
}

fn result(run: &str, minute: i64, allreduce: &str, driver: &str, tok_s: &[f64]) -> NewResult {
    let at = T0 + minute * 60_000;
    NewResult {
        run_id: run.into(),
        workflow: "eagle3".into(),
        job: "bench".into(),
        matrix: BTreeMap::from([("allreduce".into(), allreduce.into())]),
        step: "measure".into(),
        git: GitInfo {
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            ref_name: Some("main".into()),
            dirty: false,
        },
        started_at_ms: at - 60_000,
        finished_at_ms: at,
        status: RunStatus::Success,
        fingerprint: Fingerprint {
            identity: identity(driver, allreduce),
            info: Info {
                host_name: Some("gpu-node-7".into()),
                ..Info::default()
            },
        },
        metrics: vec![
            NewMetric {
                name: "output_tok_s".into(),
                unit: "tok/s".into(),
                direction: None,
                samples: tok_s.to_vec(),
            },
            NewMetric {
                name: "ttft_ms".into(),
                unit: "ms".into(),
                direction: None,
                samples: tok_s.iter().map(|v| 4000.0 / v).collect(),
            },
        ],
    }
}

/// The write-ups' story: five NCCL runs around 89.5 tok/s (the first on an older driver),
/// then `run-current` with the custom all-reduce at 38 tok/s beside NCCL within noise.
fn write_ups_store(path: &Path) {
    let mut store = ResultStore::open(path).unwrap();
    let nccl = [
        [89.1, 89.8, 89.4, 90.0, 89.3, 89.6],
        [89.7, 89.2, 89.9, 89.5, 89.0, 89.6],
        [89.4, 89.6, 89.8, 89.3, 89.5, 89.7],
        [89.9, 89.1, 89.5, 89.6, 89.4, 89.2],
        [89.5, 89.7, 89.3, 89.8, 89.6, 89.4],
    ];
    for (i, samples) in nccl.iter().enumerate() {
        let driver = if i == 0 { "570.86.15" } else { "580.65.06" };
        let run = format!("run-{i}");
        store
            .record(&result(&run, i as i64, "nccl", driver, samples))
            .unwrap();
        store
            .record(&result(&run, i as i64, "custom", driver, samples))
            .unwrap();
    }
    store
        .record(&result(
            "run-current",
            10,
            "nccl",
            "580.65.06",
            &[89.6, 89.2, 89.7, 89.4, 89.5, 89.8],
        ))
        .unwrap();
    store
        .record(&result(
            "run-current",
            10,
            "custom",
            "580.65.06",
            &[38.2, 37.9, 38.1, 38.0, 37.8, 38.3],
        ))
        .unwrap();
}

fn gather(store: &ResultStore, run: &str, run_dir: Option<&Path>) -> ReportData {
    ReportData::gather(&ReportSource {
        store,
        run_id: run,
        run_dir,
        compare: StepInputs::default(),
        title: None,
        now_ms: T0 + 3_600_000,
    })
    .unwrap()
}

/// A user's repository: one commit, a tracked file with uncommitted changes, a staged file
/// and an untracked one, so "untouched" covers every state a checkout can be in. Its own
/// identity, as a user's has, for the commits gpuflow makes to the results branch.
fn user_repo() -> Workspace {
    let repo = Workspace::repository();
    repo.git(&["config", "user.name", "Test"]);
    repo.git(&["config", "user.email", "test@example.com"]);
    repo.write("workflow.yml", "name: eagle3\n");
    repo.commit("initial");
    repo.write("workflow.yml", "name: eagle3\n# edited\n");
    repo.write("staged.txt", "staged\n");
    repo.git(&["add", "staged.txt"]);
    repo.write("notes.txt", "untracked\n");
    repo
}

/// Everything a checkout is: HEAD, the index file's bytes, the status and every file.
fn checkout_state(p: &Path) -> (String, Vec<u8>, String, BTreeMap<PathBuf, Vec<u8>>) {
    let mut files = BTreeMap::new();
    for e in walkdir::WalkDir::new(p)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git")
    {
        let e = e.unwrap();
        if e.file_type().is_file() {
            files.insert(e.path().to_path_buf(), std::fs::read(e.path()).unwrap());
        }
    }
    (
        git(p, &["rev-parse", "HEAD"]),
        std::fs::read(p.join(".git/index")).unwrap(),
        git(p, &["status", "--porcelain=v1", "--untracked-files=all"]),
        files,
    )
}

#[test]
fn the_markdown_report_of_the_write_ups_run() {
    let dir = Workspace::empty();
    let db = dir.path().join("results.db");
    write_ups_store(&db);
    let store = ResultStore::open(&db).unwrap();
    let data = gather(&store, "run-current", None);
    assert_eq!(data.verdict, "regression");
    let custom = data
        .cells
        .iter()
        .find(|c| c.matrix["allreduce"] == "custom")
        .unwrap();
    let tok = custom
        .metrics
        .iter()
        .find(|m| m.name == "output_tok_s")
        .unwrap();
    assert_eq!(tok.verdict, "regression");
    assert!((tok.ratio.unwrap() - 0.42).abs() < 0.01, "{:?}", tok.ratio);
    // The first NCCL run was on an older driver: its history chart marks the change.
    let nccl = data
        .cells
        .iter()
        .find(|c| c.matrix["allreduce"] == "nccl")
        .unwrap();
    assert!(
        nccl.metrics[0].chart_history_svg.contains("driver changed"),
        "{}",
        nccl.metrics[0].chart_history_svg
    );
    let md = render(&data, Format::Markdown, None).unwrap();
    insta::assert_snapshot!("write_ups_report_md", md);
}

#[test]
fn a_baseline_from_another_environment_is_reported_with_what_changed() {
    let dir = Workspace::empty();
    let db = dir.path().join("results.db");
    write_ups_store(&db);
    let mut store = ResultStore::open(&db).unwrap();
    store
        .record(&result(
            "run-590",
            20,
            "nccl",
            "590.10.01",
            &[89.4, 89.6, 89.5],
        ))
        .unwrap();
    let data = ReportData::gather(&ReportSource {
        store: &store,
        run_id: "run-590",
        run_dir: None,
        compare: StepInputs {
            allow_incomparable: true,
            baseline: "previous".into(),
            ..StepInputs::default()
        },
        title: Some("driver upgrade".into()),
        now_ms: T0,
    })
    .unwrap();
    let cell = &data.cells[0];
    // `previous` with incomparable results allowed is the last result of the same step,
    // whatever its matrix cell: here the custom one, so its command differs too.
    assert!(
        cell.differences.iter().any(|d| d.field == "driver"),
        "{:?}",
        cell.differences
    );
    let md = render(&data, Format::Markdown, None).unwrap();
    assert!(md.contains("What changed since the baseline"), "{md}");
    assert!(md.contains("`580.65.06` → `590.10.01`"), "{md}");
}

#[test]
fn the_report_shows_the_failing_servers_log() {
    let dir = Workspace::empty();
    let db = dir.path().join("results.db");
    write_ups_store(&db);
    let run_dir = dir.path().join("runs").join("run-current");
    std::fs::create_dir_all(&run_dir).unwrap();
    let job = r#"{"job":"bench","cell":1,"display":"bench (custom)"}"#;
    std::fs::write(
        run_dir.join("events.jsonl"),
        [
            format!(r#"{{"elapsed":1.0,"type":"log_line","job":{job},"step":null,"container":"server","stream":"stderr","text":"CUDA error: an illegal memory access was encountered"}}"#),
            format!(r#"{{"elapsed":2.0,"type":"step_finished","job":{job},"step":"3","name":"measure","outcome":"failure","conclusion":"failure","duration":1.0}}"#),
            r#"{"elapsed":3.0,"type":"run_finished","run_id":"run-current","result":"failure"}"#.to_string(),
        ]
        .join("\n"),
    )
    .unwrap();
    let store = ResultStore::open(&db).unwrap();
    let data = gather(&store, "run-current", Some(&run_dir));
    assert_eq!(data.status, "failure");
    for format in [Format::Markdown, Format::Html] {
        let text = render(&data, format, None).unwrap();
        assert!(text.contains("The run failed"), "{text}");
        assert!(
            text.contains("CUDA error: an illegal memory access was encountered"),
            "{text}"
        );
        assert!(text.contains("container"), "{text}");
    }
}

#[test]
fn a_template_error_is_shown_at_its_line_and_column() {
    let dir = Workspace::empty();
    let db = dir.path().join("results.db");
    write_ups_store(&db);
    let template = dir.path().join("bad.md.tera");
    std::fs::write(
        &template,
        "# {{ title }}\n{% for c in cells %}\n- {{ c.lable | upper }}\n{% endfor %}\n",
    )
    .unwrap();
    let out = gpuflow()
        .in_scratch_folder()
        .args(["report", "run-current", "--color", "never", "--store"])
        .arg(&db)
        .arg("--template")
        .arg(&template)
        .arg("--out")
        .arg(dir.path().join("out"))
        .status(2);
    let stderr = &out.stderr;
    eprintln!("{stderr}");
    assert!(stderr.contains("bad.md.tera:3:6"), "{stderr}");
    assert!(stderr.contains("lable"), "{stderr}");
    assert!(stderr.contains("docs/reports.md"), "{stderr}");
}

#[test]
fn eight_concurrent_runs_commit_eight_reports_and_leave_the_checkout_alone() {
    let repo = user_repo();
    let dir = Workspace::empty();
    let db = dir.path().join("results.db");
    {
        let mut store = ResultStore::open(&db).unwrap();
        for i in 0..8 {
            let v = 89.5 + f64::from(i) * 0.1;
            store
                .record(&result(
                    &format!("run-{i}"),
                    i64::from(i),
                    "nccl",
                    "580.65.06",
                    &[v, v + 0.2, v - 0.1],
                ))
                .unwrap();
        }
    }
    let before = checkout_state(repo.path());
    // All spawned before any is waited for, so they really race for the branch.
    let children: Vec<_> = (0..8)
        .map(|i| {
            repo.gpuflow()
                .args(["report", &format!("run-{i}"), "--commit", "--store"])
                .arg(&db)
                .arg("--out")
                .arg(dir.path().join(format!("race-{i}")))
                .spawn()
        })
        .collect();
    for child in children {
        let (status, stderr) = child.wait();
        assert!(status.success(), "{status}: {stderr}");
    }
    {
        let branch = "gpuflow-results";
        let log = git(repo.path(), &["log", "--format=%s", branch]);
        let subjects: Vec<&str> = log.lines().collect();
        assert_eq!(subjects.len(), 8, "{branch}: {log}");
        for i in 0..8 {
            assert!(
                subjects
                    .iter()
                    .any(|s| s.starts_with(&format!("gpuflow: eagle3 run run-{i}: "))),
                "{branch}: run-{i} missing from {log}"
            );
        }
        let files = git(repo.path(), &["ls-tree", "-r", "--name-only", branch]);
        for i in 0..8 {
            assert!(
                files.contains(&format!("runs/run-{i}/report.md")),
                "{files}"
            );
            assert!(
                files.contains(&format!("runs/run-{i}/record.json")),
                "{files}"
            );
        }
    }
    let record: serde_json::Value = serde_json::from_str(&git(
        repo.path(),
        &["show", "gpuflow-results:runs/run-3/record.json"],
    ))
    .unwrap();
    assert_eq!(record["run_id"], "run-3");
    assert_eq!(record["workflow"], "eagle3");
    let after = checkout_state(repo.path());
    assert_eq!(before.0, after.0, "HEAD moved");
    assert!(before.1 == after.1, "the index changed");
    assert_eq!(before.2, after.2, "git status changed");
    assert_eq!(before.3, after.3, "work tree files changed");
    assert_eq!(
        git(repo.path(), &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/main"
    );
}

#[test]
fn threads_racing_in_one_process_lose_no_commit() {
    let repo = user_repo();
    let dir = Workspace::empty();
    let db = dir.path().join("results.db");
    write_ups_store(&db);
    let store = ResultStore::open(&db).unwrap();
    let data = gather(&store, "run-current", None);
    let files = report_files(&data, Format::Markdown, None).unwrap();
    let barrier = std::sync::Barrier::new(8);
    std::thread::scope(|s| {
        for i in 0..8 {
            let (barrier, files, path) = (&barrier, &files, repo.path());
            let mut data = data.clone();
            data.run_id = format!("t-{i}");
            s.spawn(move || {
                let branch = ResultsBranch::new(path, "threads").unwrap();
                barrier.wait();
                commit_report(&branch, &data, files).unwrap();
            });
        }
    });
    let count = git(repo.path(), &["rev-list", "--count", "threads"]);
    assert_eq!(count.trim(), "8");
}

#[test]
fn the_branch_is_pushed_to_a_file_remote() {
    let repo = user_repo();
    let remote = Workspace::empty();
    git(remote.path(), &["init", "-q", "--bare"]);
    let url = format!("file://{}", remote.path().display());
    let dir = Workspace::empty();
    let db = dir.path().join("results.db");
    write_ups_store(&db);
    repo.gpuflow()
        .args([
            "report",
            "run-current",
            "--commit",
            "--push",
            &url,
            "--store",
        ])
        .arg(&db)
        .arg("--out")
        .arg(dir.path().join("out"))
        .success();
    let local = git(repo.path(), &["rev-parse", "gpuflow-results"]);
    let pushed = git(remote.path(), &["rev-parse", "gpuflow-results"]);
    assert_eq!(local, pushed);
    let subject = git(
        remote.path(),
        &["log", "-1", "--format=%s", "gpuflow-results"],
    );
    assert_eq!(
        subject.trim(),
        "gpuflow: eagle3 run run-current: regression"
    );
}

/// The HTML report opened in headless Chromium: the screenshot must show the charts (bars
/// and threshold bands drawn in their colours), not an empty page or broken SVG.
#[test]
fn the_html_reports_charts_render_in_chromium() {
    let Some(chromium) = crate::support::browser::chromium() else {
        return;
    };
    let dir = Workspace::empty();
    let db = dir.path().join("results.db");
    write_ups_store(&db);
    let store = ResultStore::open(&db).unwrap();
    let data = gather(&store, "run-current", None);
    let html = render(&data, Format::Html, None).unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let shot = std::env::var_os("GPUFLOW_KEEP_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().join("shot.png"));
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1100,4000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(shot.is_file(), "no screenshot: {out:?}");
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let near = |px: &[u8], rgb: [u8; 3]| {
        px.iter()
            .zip(rgb)
            .all(|(a, b)| (i16::from(*a) - i16::from(b)).abs() <= 6)
    };
    let width = info.width as usize;
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|px| &px[..3])
        .collect();
    let (mut band, mut baseline_bar) = (0usize, 0usize);
    let (mut min_y, mut max_y) = (usize::MAX, 0usize);
    for (i, px) in pixels.iter().enumerate() {
        if near(px, [0xcf, 0xe3, 0xf7]) {
            band += 1;
            min_y = min_y.min(i / width);
            max_y = max_y.max(i / width);
        } else if near(px, [0x8c, 0x96, 0xa5]) {
            baseline_bar += 1;
        }
    }
    // A regression's bar is red like the verdict badges; only a bar is a long red run.
    let regression_bar = pixels
        .chunks(width)
        .filter(|row| {
            let mut run = 0;
            row.iter().any(|px| {
                run = if near(px, [0xc5, 0x30, 0x30]) {
                    run + 1
                } else {
                    0
                };
                run >= 150
            })
        })
        .count();
    assert!(band > 2_000, "threshold bands barely drawn: {band} px");
    assert!(
        baseline_bar > 2_000,
        "baseline bars barely drawn: {baseline_bar} px"
    );
    assert!(
        regression_bar >= 20,
        "regression bars: {regression_bar} rows of long red runs"
    );
    assert!(max_y > min_y + 100, "charts span {min_y}..{max_y} px");
}

/// The `report` step inside `gpuflow run`'s engine: it reports on the run it is part of (the
/// results the run recorded), writes the HTML beside the run's logs, commits it to the branch
/// it names, and passes `path` and `commit` on to later steps.
#[tokio::test]
async fn the_report_step_reports_on_its_own_run_and_commits_it() {
    use crate::support::engine::with_engine_in;
    use gpuflow::engine::{JobResult, RunOptions};

    let repo = user_repo();
    let ws = repo.path().to_path_buf();
    let ws = ws.as_path();
    let run_id = "20261130-100000-abcd";
    {
        // What the run's benchmark steps would have recorded, and five earlier runs.
        let db = gpuflow::store::default_path(ws);
        let mut store = ResultStore::open(&db).unwrap();
        for i in 0..5 {
            let v = 89.3 + f64::from(i) * 0.1;
            store
                .record(&result(
                    &format!("old-{i}"),
                    i64::from(i),
                    "custom",
                    "580.65.06",
                    &[v, v + 0.3, v - 0.2, v + 0.1, v - 0.1],
                ))
                .unwrap();
        }
        store
            .record(&result(
                run_id,
                30,
                "custom",
                "580.65.06",
                &[38.2, 37.9, 38.1, 38.0, 37.8],
            ))
            .unwrap();
    }
    std::fs::write(ws.join(".git/info/exclude"), ".gpuflow/\nw.yml\n").unwrap();
    let yaml = r#"name: eagle3
on: workflow_dispatch
jobs:
  report:
    steps:
      - id: r
        uses: report
        with:
          format: html
          commit: { branch: results }
      - run: |
          test -f "${{ steps.r.outputs.path }}"
          echo "commit=${{ steps.r.outputs.commit }}"
"#;
    std::fs::write(ws.join("w.yml"), yaml).unwrap();
    let before = checkout_state(ws);
    // The engine runs built-ins with the job's containers at hand, so it wants an engine even
    // for this step, which starts none.
    let Some(docker) = crate::support::docker::connect_or_skip().await else {
        return;
    };
    let ran = with_engine_in(repo, docker, yaml, |opts| {
        *opts = RunOptions::new(run_id, ws)
    })
    .await;
    let ws = ran.workspace.path();
    let lines = ran.lines_of_jobs_starting_with("");
    assert_eq!(ran.report.jobs[0].result, JobResult::Success, "{lines:#?}");
    let tip = git(ws, &["rev-parse", "results"]);
    assert!(
        lines.iter().any(|l| l == &format!("commit={}", tip.trim())),
        "{lines:#?}"
    );
    let html = ws
        .join(".gpuflow/runs")
        .join(run_id)
        .join("report/report.html");
    assert!(
        std::fs::read_to_string(html)
            .unwrap()
            .contains("regression")
    );
    let subject = git(ws, &["log", "-1", "--format=%s", "results"]);
    assert_eq!(
        subject.trim(),
        format!("gpuflow: eagle3 run {run_id}: regression")
    );
    let after = checkout_state(ws);
    assert_eq!(before.0, after.0, "HEAD moved");
    assert!(before.1 == after.1, "the index changed");
    assert_eq!(before.2, after.2, "git status changed");
}

/// `gpuflow run --store PATH` (how the worker runs every triggered run) records to that store,
/// and the run's `report` step reads it: not the workspace's default store, which may not
/// exist or hold other runs.
#[test]
fn the_report_step_reads_the_store_the_run_was_given_with_store() {
    let repo = user_repo();
    let ws = repo.path();
    let elsewhere = Workspace::empty();
    let db = elsewhere.path().join("results.db");
    std::fs::write(
        ws.join("w.yml"),
        r#"name: stored
on: workflow_dispatch
jobs:
  bench:
    steps:
      - id: b
        uses: benchmark
        with:
          command: echo "speed 41.5"
          runs: 2
          warmup: 0
          metrics:
            speed: { regex: 'speed (?P<value>[0-9.]+)', unit: tok/s }
      - id: r
        uses: report
      - run: grep -q speed "${{ steps.r.outputs.path }}" && echo "the report has the speed"
"#,
    )
    .unwrap();
    let out = repo
        .gpuflow()
        .args(["run", "--plain", "w.yml", "--store"])
        .arg(&db)
        .output();
    let text = out.all();
    assert_eq!(out.code(), Some(0), "{text}");
    assert!(text.contains("the report has the speed"), "{text}");
    assert!(db.is_file(), "{text}");
    assert!(!gpuflow::store::default_path(ws).exists(), "{text}");
}
