//! The engine against the real Docker engine, with the images `make test-images` builds:
//! long-lived `start-container` containers used by later steps, the job's `container:`,
//! `services:`, and clean-up whatever happens. After each run the engine's own API must find
//! no container of the run; the test then removes whatever is left anyway, so a failure does
//! not leak containers into the next test.

use std::sync::Arc;
use std::time::Duration;

use gpuflow::backend::DockerBackend;
use gpuflow::check::load_and_check;
use gpuflow::engine::{
    CollectSink, Event, EventKind, JobResult, RunOptions, RunReport, StepOutcome,
};
use gpuflow::plan::{build, from_workflow};
use gpuflow::workflow::Loaded;
use tokio_util::sync::CancellationToken;

use super::docker::connect_or_skip;

pub(crate) struct Ran {
    pub(crate) report: RunReport,
    pub(crate) events: Vec<Event>,
    docker: DockerBackend,
}

impl Ran {
    pub(crate) fn lines(&self, job: &str) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::LogLine { job: j, text, .. } if j.display == job => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn step(&self, name: &str) -> StepOutcome {
        self.events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::StepFinished {
                    name: n, outcome, ..
                } if n == name => Some(*outcome),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no step `{name}`"))
    }

    /// Asserts with the engine's API that nothing of the run is left.
    pub(crate) async fn assert_nothing_left(&self) {
        let left = self
            .docker
            .run_containers(&self.report.run_id)
            .await
            .unwrap();
        assert_eq!(left, Vec::<String>::new(), "containers of the run survived");
    }
}

/// Runs `yaml` on the local engine; `None` only when Docker tests are skipped knowingly.
pub(crate) async fn run(yaml: &str) -> Option<Ran> {
    run_with(yaml, &[]).await
}

/// Like [`run`], with more files (`path`, text) in the workspace.
pub(crate) async fn run_with(yaml: &str, files: &[(&str, &str)]) -> Option<Ran> {
    let docker = connect_or_skip().await?;
    for image in ["gpuflow-base:test", "gpuflow-sim:test"] {
        assert!(
            docker.has_image(image).await.unwrap(),
            "the test image `{image}` is missing: run `make test-images`"
        );
    }
    let (dir, wf, plan) = prepare(yaml, files);
    let run_id = format!("test-engine-{}", gpuflow::engine::new_run_id());
    let mut opts = RunOptions::new(&run_id, dir.path());
    opts.grace = Duration::from_secs(1);
    let collect = CollectSink::new();
    let result = gpuflow::engine::run(
        Arc::new(*wf),
        plan,
        opts,
        Arc::new(collect.clone()),
        Some(docker.clone()),
        CancellationToken::new(),
    )
    .await;
    let left = docker.run_containers(&run_id).await.unwrap();
    // The guard: whatever the engine did, nothing of this test stays behind.
    docker.remove_run(&run_id).await.unwrap();
    let report = result.unwrap();
    assert_eq!(
        left,
        Vec::<String>::new(),
        "containers of the run survived the run"
    );
    Some(Ran {
        report,
        events: collect.events(),
        docker,
    })
}

#[tokio::test]
async fn a_long_lived_container_serves_later_steps_and_goes_at_job_end() {
    let Some(ran) = run(r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        name: start
        uses: start-container
        with:
          image: gpuflow-base:test
          command: sh -c 'echo booted; sleep 300'
      - name: first
        container: server
        run: |
          echo "hello from ${{ steps.server.outputs.name }}" > /tmp/state
          echo "seen=$(cat /tmp/state)" >> "$GITHUB_OUTPUT"
        id: first
      - name: second
        container: server
        run: cat /tmp/state; echo "${{ steps.first.outputs.seen }}"
"#)
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    let lines = ran.lines("serve");
    assert!(lines.contains(&"booted".to_string()), "{lines:?}");
    assert!(
        lines.contains(&"hello from server".to_string()),
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|l| *l == "hello from server").count(),
        2
    );
    assert!(
        ran.events.iter().any(
            |e| matches!(&e.kind, EventKind::ContainerRemoved { name, .. } if name == "server")
        )
    );
    ran.assert_nothing_left().await;
}

#[tokio::test]
async fn the_job_container_runs_every_step_and_services_answer_by_name() {
    let Some(ran) = run(r#"
on: workflow_dispatch
jobs:
  inside:
    container: gpuflow-base:test
    services:
      llm:
        image: gpuflow-sim:test
    steps:
      - id: where
        run: |
          test -f /.dockerenv && echo "in a container"
          echo "host=$(hostname)" >> "$GITHUB_OUTPUT"
      - name: reach the service
        run: |
          for i in $(seq 1 50); do
            if wget -qO- http://llm:30000/health >/dev/null 2>&1; then echo "llm answered"; exit 0; fi
            sleep 0.2
          done
          exit 1
      - run: echo "host was ${{ steps.where.outputs.host }}"; mkdir -p sub
      - working-directory: sub
        run: echo "in $(basename "$PWD")"
"#)
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    let lines = ran.lines("inside");
    assert!(lines.contains(&"in a container".to_string()), "{lines:?}");
    assert!(lines.contains(&"llm answered".to_string()), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("host was ") && l.len() > 9),
        "{lines:?}"
    );
    ran.assert_nothing_left().await;
}

#[tokio::test]
async fn a_failed_step_and_a_timeout_leave_no_container() {
    let Some(ran) = run(r#"
on: workflow_dispatch
jobs:
  fails:
    steps:
      - uses: start-container
        id: box
        with:
          image: gpuflow-base:test
          command: sleep 300
      - container: box
        run: exit 7
  times-out:
    steps:
      - uses: start-container
        id: box
        with:
          image: gpuflow-base:test
          command: sleep 300
      - name: slow
        container: box
        timeout-minutes: 0.03
        run: sleep 120
"#)
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    assert!(
        ran.lines("fails")
            .iter()
            .any(|l| l.contains("exited with code 7"))
    );
    assert_eq!(ran.step("slow"), StepOutcome::Failure);
    assert!(
        ran.lines("times-out")
            .iter()
            .any(|l| l.contains("timed out"))
    );
    ran.assert_nothing_left().await;
}

#[tokio::test]
async fn stop_container_ends_a_container_early_with_its_exit_code() {
    let Some(ran) = run(r#"
on: workflow_dispatch
jobs:
  stop:
    steps:
      - uses: start-container
        id: box
        with:
          image: gpuflow-base:test
          command: sh -c 'trap "exit 3" TERM; while true; do sleep 0.1; done'
          init: false
      - id: stopped
        uses: stop-container
        with:
          container: box
          timeout: 5s
      - run: echo "exit ${{ steps.stopped.outputs.exit-code }}"
"#)
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    assert!(
        ran.lines("stop").contains(&"exit 3".to_string()),
        "{:?}",
        ran.lines("stop")
    );
    ran.assert_nothing_left().await;
}

/// SIGINT to `gpuflow run` while a container of the run is up: exit 130 and, asked through
/// the engine's API, nothing of the run is left.
#[tokio::test]
async fn ctrl_c_during_a_step_leaves_no_container() {
    use std::io::BufRead;
    let Some(docker) = connect_or_skip().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(
        dir.path().join("w.yml"),
        r#"
on: workflow_dispatch
jobs:
  j:
    steps:
      - id: box
        uses: start-container
        with:
          image: gpuflow-base:test
          command: sleep 300
      - run: touch ready; sleep 60
"#,
    )
    .unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpuflow"))
        .current_dir(dir.path())
        .args(["run", "--json", "w.yml"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let started: serde_json::Value = serde_json::from_str(&first).unwrap();
    let run_id = started["run_id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !dir.path().join("ready").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the step never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(docker.run_containers(&run_id).await.unwrap().len(), 1);
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    // Drain the events so the runner never blocks on a full pipe.
    let events: Vec<String> = stdout.lines().map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    let left = docker.run_containers(&run_id).await.unwrap();
    docker.remove_run(&run_id).await.unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        left,
        Vec::<String>::new(),
        "containers of the run survived Ctrl-C"
    );
    assert!(
        events.last().unwrap().contains("\"cancelled\""),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_container_started_inside_an_action_serves_the_workflows_later_steps() {
    let action = r#"
name: box
inputs:
  name: { default: box }
outputs:
  id:
    value: ${{ steps.start.outputs.id }}
runs:
  using: composite
  steps:
    - id: start
      uses: start-container
      with:
        name: ${{ inputs.name }}
        image: gpuflow-base:test
        command: sleep 300
    - container: ${{ inputs.name }}
      run: echo "ready" > /tmp/state
"#;
    let Some(ran) = run_with(
        r#"
on: workflow_dispatch
jobs:
  j:
    steps:
      - id: make
        uses: ./actions/box
        with: { name: worker }
      - container: worker
        run: echo "$(cat /tmp/state) ${{ steps.make.outputs.id != '' }}"
"#,
        &[("actions/box/action.yml", action)],
    )
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    assert_eq!(ran.lines("j"), ["ready true"]);
    ran.assert_nothing_left().await;
}

#[tokio::test]
async fn a_second_container_with_the_same_name_is_a_clear_error() {
    let Some(ran) = run(r#"
on: workflow_dispatch
jobs:
  twice:
    steps:
      - uses: start-container
        with: { name: box, image: gpuflow-base:test, command: sleep 300 }
      - name: again
        uses: start-container
        with: { name: box, image: gpuflow-base:test, command: sleep 300 }
"#)
    .await
    else {
        return;
    };
    assert_eq!(ran.step("again"), StepOutcome::Failure);
    let lines = ran.lines("twice").join("\n");
    assert!(
        lines.contains("this job already started a container named `box`"),
        "{lines}"
    );
    assert!(lines.contains("another `name`"), "{lines}");
    ran.assert_nothing_left().await;
}

/// A workspace (a `.git` folder, `w.yml`, and `files`) holding a valid workflow, loaded and
/// planned: what every engine test starts from.
pub(crate) fn prepare(
    yaml: &str,
    files: &[(&str, &str)],
) -> (
    tempfile::TempDir,
    Box<gpuflow::workflow::Workflow>,
    gpuflow::plan::Plan,
) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join("w.yml"), yaml).unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let (loaded, diags) = load_and_check(&dir.path().join("w.yml")).unwrap();
    assert!(!diags.has_errors(), "{diags:#?}");
    let Loaded::Workflow(Some(wf)) = loaded else {
        panic!("not a workflow")
    };
    let plan = build(&from_workflow(&wf, "w").input).unwrap();
    (dir, wf, plan)
}
