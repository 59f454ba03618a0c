//! The engine against the real Docker engine, with the images `make test-images` builds:
//! long-lived `start-container` containers used by later steps, the job's `container:`,
//! `services:`, and clean-up whatever happens. After each run the engine's own API must find
//! no container of the run; the test then removes whatever is left anyway, so a failure does
//! not leak containers into the next test.

use std::time::Duration;

use gpuflow::engine::{EventKind, JobResult, StepOutcome};

use crate::support::docker::connect_or_skip;
use crate::support::engine::{on_docker, on_docker_with};
use crate::support::{Signal, Workspace, wait_until};

#[tokio::test]
async fn a_long_lived_container_serves_later_steps_and_goes_at_job_end() {
    let Some(ran) = on_docker(
        r#"
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
"#,
    )
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
    let Some(ran) = on_docker(r#"
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
    let Some(ran) = on_docker(
        r#"
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
"#,
    )
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
    let Some(ran) = on_docker(
        r#"
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
"#,
    )
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
    let Some(docker) = connect_or_skip().await else {
        return;
    };
    let dir = Workspace::new().file(
        "w.yml",
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
    );
    let mut child = dir.gpuflow().args(["run", "--json", "w.yml"]).spawn();
    let run_id = child.json_line()["run_id"].as_str().unwrap().to_string();
    wait_until("the step to start", Duration::from_secs(60), || {
        dir.path().join("ready").exists()
    });
    assert_eq!(docker.run_containers(&run_id).await.unwrap().len(), 1);
    child.signal(Signal::INT);
    // Drain the events so the runner never blocks on a full pipe.
    let events: Vec<String> = child.rest().lines().map(str::to_string).collect();
    let (status, _) = child.wait();
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
    let Some(ran) = on_docker_with(
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
    let Some(ran) = on_docker(
        r#"
on: workflow_dispatch
jobs:
  twice:
    steps:
      - uses: start-container
        with: { name: box, image: gpuflow-base:test, command: sleep 300 }
      - name: again
        uses: start-container
        with: { name: box, image: gpuflow-base:test, command: sleep 300 }
"#,
    )
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

#[tokio::test]
async fn a_dag_and_a_matrix_pass_outputs_between_jobs_in_containers() {
    let Some(ran) = on_docker(
        r#"
on: workflow_dispatch
jobs:
  make:
    container: gpuflow-base:test
    outputs:
      word: ${{ steps.w.outputs.word }}
    steps:
      - id: w
        run: test -f /.dockerenv && echo "word=made-in-a-container" >> "$GITHUB_OUTPUT"
  use:
    needs: make
    strategy:
      matrix:
        n: [1, 2]
    container: gpuflow-base:test
    outputs:
      seen: ${{ steps.s.outputs.seen }}
    steps:
      - id: s
        run: |
          echo "cell ${{ matrix.n }} got ${{ needs.make.outputs.word }}"
          echo "seen=${{ needs.make.outputs.word }}" >> "$GITHUB_OUTPUT"
  last:
    needs: use
    steps:
      - uses: start-container
        id: box
        with: { image: gpuflow-base:test, command: sleep 300 }
      - container: box
        run: echo "last saw ${{ needs.use.outputs.seen }}"
"#,
    )
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    for n in [1, 2] {
        assert_eq!(
            ran.lines(&format!("use ({n})")),
            [format!("cell {n} got made-in-a-container")]
        );
    }
    assert_eq!(ran.lines("last"), ["last saw made-in-a-container"]);
    // The cells start only once `make` has finished.
    let make_done =
        ran.index(|k| matches!(k, EventKind::JobFinished { job, .. } if job.job == "make"));
    let use_started = ran.index(|k| matches!(k, EventKind::JobStarted { job } if job.job == "use"));
    assert!(make_done < use_started);
    ran.assert_nothing_left().await;
}

#[tokio::test]
async fn if_always_and_continue_on_error_in_a_container() {
    let Some(ran) = on_docker(
        r#"
on: workflow_dispatch
jobs:
  j:
    steps:
      - uses: start-container
        id: box
        with: { image: gpuflow-base:test, command: sleep 300 }
      - id: flaky
        name: flaky
        container: box
        continue-on-error: true
        run: exit 4
      - name: after flaky
        container: box
        run: echo "flaky was ${{ steps.flaky.outcome }}/${{ steps.flaky.conclusion }}"
      - name: broken
        container: box
        run: echo "partial line without a newline"; printf 'no newline'; exit 5
      - name: skipped
        container: box
        run: echo never
      - name: on failure
        if: failure()
        container: box
        run: echo "failure seen"
      - name: cleanup
        if: always()
        container: box
        run: echo "status ${{ job.status }}"
"#,
    )
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    assert_eq!(
        ran.step_in("j", "flaky"),
        (StepOutcome::Failure, StepOutcome::Success)
    );
    assert_eq!(ran.step_in("j", "broken").0, StepOutcome::Failure);
    assert_eq!(ran.step_in("j", "skipped").0, StepOutcome::Skipped);
    assert_eq!(ran.step_in("j", "on failure").0, StepOutcome::Success);
    assert_eq!(ran.step_in("j", "cleanup").0, StepOutcome::Success);
    let lines = ran.lines("j");
    for want in [
        "flaky was failure/success",
        "no newline",
        "failure seen",
        "status failure",
    ] {
        assert!(lines.iter().any(|l| l == want), "{want}: {lines:?}");
    }
    assert!(
        lines.iter().any(|l| l.contains("exited with code 5")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l == "never"), "{lines:?}");
    ran.assert_nothing_left().await;
}

/// A step's timeout ends every process it started in the container (its shell, a child in
/// the background, a grandchild in a subshell) while the container lives on for later steps;
/// a job's timeout stops its running step and still runs its `always()` step.
#[tokio::test]
async fn step_and_job_timeouts_in_a_container_end_the_steps_processes() {
    let Some(ran) = on_docker(
        r#"
on: workflow_dispatch
jobs:
  step-timeout:
    steps:
      - uses: start-container
        id: box
        with: { image: gpuflow-base:test, command: sleep 300 }
      - name: slow
        container: box
        timeout-minutes: 0.03
        run: |
          sleep 287 &
          (sleep 288; echo never) &
          sleep 289
      - name: next
        container: box
        run: echo never
      - name: survivors
        if: always()
        container: box
        run: |
          for i in 1 2 3 4 5 6 7 8 9 10; do
            ps -o args | grep -q '^sleep 28[789]' || { echo "none survived"; exit 0; }
            sleep 0.2
          done
          ps -o pid,args; exit 1
  job-timeout:
    timeout-minutes: 0.05
    steps:
      - uses: start-container
        id: box
        with: { image: gpuflow-base:test, command: sleep 300 }
      - name: slow
        container: box
        run: sleep 120
      - name: cleanup
        if: always()
        container: box
        run: echo "cleanup ran"
"#,
    )
    .await
    else {
        return;
    };
    assert_eq!(ran.step_in("step-timeout", "slow").0, StepOutcome::Failure);
    assert_eq!(ran.step_in("step-timeout", "next").0, StepOutcome::Skipped);
    assert_eq!(
        ran.step_in("step-timeout", "survivors").0,
        StepOutcome::Success,
        "{:?}",
        ran.lines("step-timeout")
    );
    let lines = ran.lines("step-timeout");
    assert!(lines.iter().any(|l| l.contains("timed out")), "{lines:?}");
    assert!(lines.contains(&"none survived".to_string()), "{lines:?}");
    assert_eq!(ran.job("job-timeout"), JobResult::Failure);
    let lines = ran.lines("job-timeout");
    assert!(
        lines.iter().any(|l| l.contains("the job timed out")),
        "{lines:?}"
    );
    assert!(lines.contains(&"cleanup ran".to_string()), "{lines:?}");
    ran.assert_nothing_left().await;
}

/// A lone container runs on Docker's default network and the job makes no network; a second
/// container brings the job's network, and the first joins it, so each reaches the other by
/// name.
#[tokio::test]
async fn the_job_network_comes_with_the_second_container() {
    let Some(ran) = on_docker(r#"
on: workflow_dispatch
jobs:
  j:
    steps:
      - uses: start-container
        id: first
        with: { image: gpuflow-base:test, command: sleep 300 }
      - name: count alone
        run: echo "networks alone $(docker network ls -q --filter label=dev.gpuflow.run-id=$GPUFLOW_RUN_ID | wc -l)"
      - uses: start-container
        id: second
        with: { image: gpuflow-base:test, command: sleep 300 }
      - name: count with two
        run: echo "networks with two $(docker network ls -q --filter label=dev.gpuflow.run-id=$GPUFLOW_RUN_ID | wc -l)"
      - container: first
        run: ping -c 1 -W 5 second >/dev/null && echo "first reaches second"
      - container: second
        run: ping -c 1 -W 5 first >/dev/null && echo "second reaches first"
"#)
    .await
    else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    let lines = ran.lines("j");
    for want in [
        "networks alone 0",
        "networks with two 1",
        "first reaches second",
        "second reaches first",
    ] {
        assert!(lines.iter().any(|l| l == want), "{want}: {lines:?}");
    }
    ran.assert_nothing_left().await;
    let networks = std::process::Command::new("docker")
        .args(["network", "ls", "-q", "--filter"])
        .arg(format!("label=dev.gpuflow.run-id={}", ran.report.run_id))
        .output()
        .unwrap();
    assert!(networks.stdout.is_empty(), "the job's network survived");
}

/// Where the run does not know the host's GPUs (the engine's API given no inventory), a job's
/// `gpus:` reaches Docker as evaluated when the job starts: an expression from the matrix as
/// well as a number written out. This engine has no NVIDIA runtime, so the cell asking for two
/// is refused with that reason; the cell asking for none starts its container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_gpus_from_the_matrix_reach_docker_where_the_hosts_gpus_are_not_known() {
    let Some(ran) = crate::support::engine::workflow(
        r#"
on: workflow_dispatch
jobs:
  cell:
    gpus: ${{ matrix.gpus }}
    strategy:
      fail-fast: false
      matrix:
        gpus: [2, 0]
    steps:
      - uses: start-container
        with:
          name: server
          image: gpuflow-base:test
          command: sleep 30
          ulimits: { memlock: 8388608 }
"#,
    )
    .images(&[crate::support::images::BASE])
    .on_docker()
    .await
    else {
        return;
    };
    assert_eq!(ran.job("cell (2)"), JobResult::Failure, "{}", ran.said());
    let two = ran.lines("cell (2)").join("\n");
    assert!(two.contains("cannot give containers GPUs"), "{two}");
    assert_eq!(ran.job("cell (0)"), JobResult::Success, "{}", ran.said());
}
