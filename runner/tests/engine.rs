//! The engine on the host backend: real `sh` processes, real files, real process groups.
//! Each test writes a workflow into its own folder (with a `.git`, so `./actions` resolve
//! there), runs it, and asserts on the events, the stored logs and the file system.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuflow::engine::LogStore;
use gpuflow::engine::dispatcher::RunError;
use gpuflow::engine::{CollectSink, Event, EventKind, JobResult, RunOptions, StepOutcome, Tee};
use tokio_util::sync::CancellationToken;

use crate::support::engine::{
    on_host, on_host_in, prepare, try_on_host, try_on_host_unchecked, validate_errors,
};
use crate::support::{Workspace, peak_rss_kib};

/// Whether the process runs (a zombie waiting for a parent that does not reap is gone).
fn pid_alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).is_ok_and(|stat| {
        // The state follows the command name, which is in parentheses.
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
    })
}

#[tokio::test]
async fn a_dag_passes_outputs_between_jobs_and_starts_jobs_as_soon_as_their_needs_are_met() {
    let ran = on_host(r#"
on: workflow_dispatch
jobs:
  slow:
    steps:
      - run: sleep 2
  build:
    outputs:
      version: ${{ steps.v.outputs.version }}
    steps:
      - id: v
        run: echo "version=1.2.3" >> "$GITHUB_OUTPUT"
  test:
    needs: build
    outputs:
      verdict: ${{ steps.t.outputs.verdict }}
    steps:
      - id: t
        run: echo "verdict=ok-${{ needs.build.outputs.version }}" >> "$GPUFLOW_OUTPUT"
  report:
    needs: [build, test, slow]
    steps:
      - run: echo "report ${{ needs.build.outputs.version }} ${{ needs.test.outputs.verdict }} ${{ needs.slow.result }}"
"#)
    .await;
    assert_eq!(ran.report.result, JobResult::Success);
    assert_eq!(ran.report.exit_code().code(), 0);
    assert_eq!(
        ran.lines_of_jobs_starting_with("report"),
        ["report 1.2.3 ok-1.2.3 success"]
    );
    // `test` waits for `build` only, not for the slow job of the same level.
    let test_started =
        ran.index(|k| matches!(k, EventKind::JobStarted { job } if job.job == "test"));
    let slow_done =
        ran.index(|k| matches!(k, EventKind::JobFinished { job, .. } if job.job == "slow"));
    let report_started =
        ran.index(|k| matches!(k, EventKind::JobStarted { job } if job.job == "report"));
    assert!(test_started < slow_done, "{:#?}", ran.events);
    assert!(report_started > slow_done);
}

#[tokio::test]
async fn a_matrix_respects_max_parallel() {
    let ran = on_host(
        r#"
on: workflow_dispatch
jobs:
  cells:
    strategy:
      max-parallel: 2
      matrix:
        n: [1, 2, 3, 4, 5]
    steps:
      - run: sleep 0.3; echo "cell ${{ matrix.n }} of ${{ strategy.job-total }}"
"#,
    )
    .await;
    assert_eq!(ran.report.result, JobResult::Success);
    let mut running = 0usize;
    let mut most = 0;
    for e in &ran.events {
        match &e.kind {
            EventKind::JobStarted { .. } => running += 1,
            EventKind::JobFinished { .. } => running -= 1,
            _ => {}
        }
        most = most.max(running);
    }
    assert_eq!(most, 2, "{:#?}", ran.events);
    let mut lines = ran.lines_of_jobs_starting_with("cells");
    lines.sort();
    assert_eq!(lines[0], "cell 1 of 5");
    assert_eq!(lines.len(), 5);
}

#[tokio::test]
async fn fail_fast_cancels_the_unfinished_cells_and_kills_their_processes() {
    let dir = Workspace::new();
    let started = Instant::now();
    let ran = on_host_in(
        dir,
        r#"
on: workflow_dispatch
jobs:
  cells:
    strategy:
      matrix:
        n: [1, 2, 3]
    steps:
      - run: |
          if [ "${{ matrix.n }}" = 1 ]; then sleep 0.5; exit 3; fi
          echo $$ > "pid-${{ matrix.n }}"
          sleep 60
"#,
        |_| {},
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(ran.report.result, JobResult::Failure);
    assert_eq!(ran.report.exit_code().code(), 1);
    assert_eq!(ran.job("cells (1)"), JobResult::Failure);
    assert_eq!(ran.job("cells (2)"), JobResult::Cancelled);
    assert_eq!(ran.job("cells (3)"), JobResult::Cancelled);
    for n in [2, 3] {
        let pid = std::fs::read_to_string(ran.workspace.path().join(format!("pid-{n}"))).unwrap();
        assert!(!pid_alive(&pid), "the process of cell {n} survived");
    }
}

#[tokio::test]
async fn if_always_and_continue_on_error() {
    let ran = on_host(
        r#"
on: workflow_dispatch
jobs:
  first:
    steps:
      - id: flaky
        name: flaky
        run: exit 1
        continue-on-error: true
      - name: after flaky
        run: echo "flaky was ${{ steps.flaky.outcome }}/${{ steps.flaky.conclusion }}"
      - name: broken
        run: exit 2
      - name: skipped
        run: echo never
      - name: cleanup
        if: always()
        run: echo "status ${{ job.status }}"
      - name: on failure
        if: failure()
        run: echo failed
      - name: implicit success
        if: steps.flaky.outcome == 'failure'
        run: echo never
  needs-first:
    needs: first
    steps:
      - run: echo never
  always-after:
    needs: first
    if: always()
    steps:
      - run: echo "first was ${{ needs.first.result }}"
  allowed:
    continue-on-error: true
    steps:
      - run: exit 1
"#,
    )
    .await;
    assert_eq!(
        ran.step_in("first", "flaky"),
        (StepOutcome::Failure, StepOutcome::Success)
    );
    assert_eq!(ran.step_in("first", "after flaky").0, StepOutcome::Success);
    assert_eq!(ran.step_in("first", "broken").0, StepOutcome::Failure);
    assert_eq!(ran.step_in("first", "skipped").0, StepOutcome::Skipped);
    assert_eq!(ran.step_in("first", "cleanup").0, StepOutcome::Success);
    assert_eq!(ran.step_in("first", "on failure").0, StepOutcome::Success);
    assert_eq!(
        ran.step_in("first", "implicit success").0,
        StepOutcome::Skipped
    );
    let lines = ran.lines_of_jobs_starting_with("first");
    assert!(
        lines.contains(&"flaky was failure/success".to_string()),
        "{lines:?}"
    );
    assert!(lines.contains(&"status failure".to_string()), "{lines:?}");
    assert!(!lines.contains(&"never".to_string()));
    assert_eq!(ran.job("needs-first"), JobResult::Skipped);
    // Every queued run ends with exactly one `job_finished`, skipped ones included.
    let finished: Vec<&str> = ran
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::JobFinished { job, .. } => Some(job.display.as_str()),
            _ => None,
        })
        .collect();
    let queued = ran
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::JobQueued { .. }))
        .count();
    assert_eq!(finished.len(), queued);
    assert!(finished.contains(&"needs-first"));
    assert_eq!(
        ran.lines_of_jobs_starting_with("always-after"),
        ["first was failure"]
    );
    assert_eq!(ran.job("allowed"), JobResult::Failure);
    assert!(ran.report.jobs.iter().any(|j| j.failure_allowed));
    assert_eq!(ran.report.result, JobResult::Failure);
}

#[tokio::test]
async fn a_job_whose_only_failure_is_allowed_does_not_fail_the_run() {
    let ran = on_host(
        r#"
on: workflow_dispatch
jobs:
  allowed:
    continue-on-error: true
    steps:
      - run: exit 1
  after:
    needs: allowed
    steps:
      - run: echo "ran after ${{ needs.allowed.result }}"
"#,
    )
    .await;
    assert_eq!(ran.report.result, JobResult::Success);
    assert_eq!(
        ran.lines_of_jobs_starting_with("after"),
        ["ran after success"]
    );
}

#[tokio::test]
async fn step_and_job_timeouts_stop_the_process_group() {
    let ran = on_host(
        r#"
on: workflow_dispatch
jobs:
  step-timeout:
    steps:
      - name: slow
        timeout-minutes: 0.02
        run: |
          sleep 60 &
          echo $! > child.pid
          echo $$ > shell.pid
          wait
      - name: next
        run: echo never
      - name: cleanup
        if: always()
        run: echo cleaned
  job-timeout:
    timeout-minutes: 0.02
    steps:
      - name: slow
        run: |
          echo $$ > job.pid
          sleep 60
"#,
    )
    .await;
    assert_eq!(ran.step_in("step-timeout", "slow").0, StepOutcome::Failure);
    assert_eq!(ran.step_in("step-timeout", "next").0, StepOutcome::Skipped);
    assert_eq!(
        ran.step_in("step-timeout", "cleanup").0,
        StepOutcome::Success
    );
    assert!(
        ran.lines_of_jobs_starting_with("step-timeout")
            .iter()
            .any(|l| l.contains("timed out"))
    );
    assert_eq!(ran.job("job-timeout"), JobResult::Failure);
    assert!(
        ran.lines_of_jobs_starting_with("job-timeout")
            .iter()
            .any(|l| l.contains("the job timed out"))
    );
    for f in ["child.pid", "shell.pid", "job.pid"] {
        let pid = std::fs::read_to_string(ran.workspace.path().join(f)).unwrap();
        assert!(!pid_alive(&pid), "{f}: {pid} survived");
    }
}

#[tokio::test]
async fn env_is_layered_workflow_job_step_and_github_env_reaches_later_steps() {
    let ran = on_host(
        r#"
on: workflow_dispatch
env:
  A: wf
  B: wf
jobs:
  env:
    env:
      B: job
      C: job
    steps:
      - name: layers
        env:
          C: step-${{ env.B }}
        run: echo "$A $B $C"
      - name: set
        run: |
          echo "LATER=from-env-file" >> "$GITHUB_ENV"
          echo "MULTI<<END" >> "$GITHUB_ENV"
          echo "two" >> "$GITHUB_ENV"
          echo "lines" >> "$GITHUB_ENV"
          echo "END" >> "$GITHUB_ENV"
      - name: read
        run: echo "$LATER ${{ env.LATER }} $(echo "$MULTI" | wc -l)"
"#,
    )
    .await;
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    let lines = ran.lines_of_jobs_starting_with("env");
    assert_eq!(lines[0], "wf job step-job");
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["from-env-file", "from-env-file", "2"]
    );
}

#[tokio::test]
async fn heredoc_outputs_reach_later_steps_and_job_outputs() {
    let ran = on_host(
        r#"
on: workflow_dispatch
jobs:
  produce:
    outputs:
      text: ${{ steps.p.outputs.text }}
    steps:
      - id: p
        run: |
          {
            echo "text<<EOF"
            echo "first line"
            echo "second = line"
            echo "EOF"
          } >> "$GITHUB_OUTPUT"
      - run: |
          echo "${{ steps.p.outputs.text }}"
          echo "made 2 lines" >> "$GITHUB_STEP_SUMMARY"
  consume:
    needs: produce
    steps:
      - run: echo "${{ needs.produce.outputs.text }}" | tail -n 1
"#,
    )
    .await;
    assert_eq!(
        ran.lines_of_jobs_starting_with("produce"),
        ["first line", "second = line"]
    );
    assert_eq!(
        ran.lines_of_jobs_starting_with("consume"),
        ["second = line"]
    );
    let summary = std::fs::read_to_string(ran.report.log_dir.join("produce/summary.md")).unwrap();
    assert_eq!(summary, "made 2 lines\n");
}

#[tokio::test]
async fn expression_values_never_run_as_shell_code() {
    let dir = Workspace::new();
    let marker = dir.path().join("pwned");
    let value = format!(
        "$(touch {}); echo x `touch {}`",
        marker.display(),
        marker.display()
    );
    let ran = on_host_in(
        dir,
        r#"
on:
  workflow_dispatch:
    inputs:
      who: { required: true }
jobs:
  safe:
    steps:
      - run: |
          echo ${{ inputs.who }}
          echo "quoted ${{ inputs.who }}"
          echo 'single ${{ inputs.who }}'
"#,
        |o| {
            o.inputs.insert("who".into(), value.clone());
        },
    )
    .await;
    assert_eq!(ran.report.result, JobResult::Success);
    assert!(!marker.exists(), "an expression value ran as code");
    let lines = ran.lines_of_jobs_starting_with("safe");
    assert_eq!(lines[1], format!("quoted {value}"));
    assert_eq!(lines[2], format!("single {value}"));
}

#[tokio::test]
async fn other_shells_refuse_untrusted_contexts_with_a_clear_error() {
    let yaml = r#"
on: workflow_dispatch
jobs:
  refuse:
    steps:
      - name: custom shell
        shell: sh {0}
        run: echo "${{ github.ref_name }}"
      - name: chosen shell
        if: always()
        shell: ${{ github.head_ref }} {0}
        run: echo hi
"#;
    // `validate` reports both, so `gpuflow run` never starts this; the engine refuses them
    // at their steps too.
    let dir = Workspace::new();
    let text = validate_errors(&dir, yaml);
    assert!(
        text.contains("`github.ref_name` is written into a `sh` script as text")
            && text.contains("`shell` reads `github.head_ref`"),
        "{text}"
    );
    let Ok(ran) = try_on_host_unchecked(dir, yaml, |_| {}).await else {
        panic!("refused before the steps")
    };
    assert_eq!(
        ran.step_in("refuse", "custom shell").0,
        StepOutcome::Failure
    );
    assert_eq!(
        ran.step_in("refuse", "chosen shell").0,
        StepOutcome::Failure
    );
    let lines = ran.lines_of_jobs_starting_with("refuse").join("\n");
    assert!(lines.contains("github.ref_name"), "{lines}");
    assert!(lines.contains("w.yml:"), "{lines}");
    assert!(lines.contains("env:"), "{lines}");
    assert!(lines.contains("`shell` reads `github.head_ref`"), "{lines}");
}

#[tokio::test]
async fn secrets_and_added_masks_never_reach_events_or_stored_logs() {
    let ran = on_host_in(
        Workspace::new(),
        r#"
on: workflow_dispatch
jobs:
  secret:
    steps:
      - env:
          TOKEN: ${{ secrets.TOKEN }}
        run: |
          echo "token is $TOKEN"
          echo "direct ${{ secrets.TOKEN }}" >&2
          echo "::add-mask::runtime-value-42"
          echo "later runtime-value-42"
"#,
        |o| {
            o.secrets
                .insert("TOKEN".into(), "hunter2-very-secret".into());
        },
    )
    .await;
    assert_eq!(ran.report.result, JobResult::Success);
    let lines = ran.lines_of_jobs_starting_with("secret");
    assert!(lines.contains(&"token is ***".to_string()), "{lines:?}");
    assert!(lines.contains(&"direct ***".to_string()), "{lines:?}");
    assert!(lines.contains(&"later ***".to_string()), "{lines:?}");
    let events = serde_json::to_string(&ran.events).unwrap();
    let mut stored = String::new();
    for entry in walkdir::WalkDir::new(&ran.report.log_dir) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            // Finished logs are stored compressed: read them as a reader of the logs would.
            let bytes = if entry.path().extension().is_some_and(|e| e == "zst") {
                zstd::decode_all(std::fs::File::open(entry.path()).unwrap()).unwrap()
            } else {
                std::fs::read(entry.path()).unwrap()
            };
            stored.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    assert!(stored.contains("token is ***"), "{stored}");
    for text in [&events, &stored] {
        assert!(!text.contains("hunter2-very-secret"));
        assert!(!text.contains("runtime-value-42"));
    }
}

#[tokio::test]
async fn a_composite_action_with_inputs_and_outputs_runs_twice_in_one_job() {
    let dir = Workspace::new();
    dir.write(
        "actions/greet/action.yml",
        r#"
name: greet
inputs:
  who:
    required: true
  greeting:
    default: hello
outputs:
  message:
    value: ${{ steps.make.outputs.message }}
runs:
  using: composite
  steps:
    - id: make
      run: echo "message=${{ inputs.greeting }} ${{ inputs.who }}" >> "$GITHUB_OUTPUT"
    - run: echo "inside for ${{ inputs.who }}"
"#,
    );
    let ran = on_host_in(
        dir,
        r#"
on: workflow_dispatch
jobs:
  greet:
    steps:
      - id: one
        uses: ./actions/greet
        with:
          who: world
      - id: two
        uses: ./actions/greet
        with:
          who: gpus
          greeting: hi
      - run: echo "${{ steps.one.outputs.message }} / ${{ steps.two.outputs.message }}"
"#,
        |_| {},
    )
    .await;
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    let lines = ran.lines_of_jobs_starting_with("greet");
    assert_eq!(
        lines,
        [
            "inside for world",
            "inside for gpus",
            "hello world / hi gpus"
        ]
    );
    // The action's steps are numbered under the step that used it.
    assert!(
        ran.events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::StepStarted { step, .. } if step == "2.1"))
    );
}

#[tokio::test]
async fn continue_on_error_on_a_step_using_an_action_forgives_its_failure() {
    let dir = Workspace::new();
    dir.write(
        "actions/fails/action.yml",
        "name: fails\nruns:\n  using: composite\n  steps:\n    - run: exit 1\n    - if: failure()\n      run: echo inner cleanup\n",
    );
    let ran = on_host_in(
        dir,
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - name: try\n        uses: ./actions/fails\n        continue-on-error: true\n      - run: echo went on\n",
        |_| {},
    )
    .await;
    assert_eq!(
        ran.step_in("j", "try"),
        (StepOutcome::Failure, StepOutcome::Success)
    );
    let lines: Vec<String> = ran
        .lines_of_jobs_starting_with("j")
        .into_iter()
        .filter(|l| !l.contains("exited with code"))
        .collect();
    assert_eq!(lines, ["inner cleanup", "went on"]);
    assert_eq!(ran.report.result, JobResult::Success);
}

#[tokio::test]
async fn an_error_inside_an_action_names_the_workflow_step_and_the_action_line() {
    let dir = Workspace::new();
    dir.write(
        "actions/bad/action.yml",
        "name: bad\nruns:\n  using: composite\n  steps:\n    - shell: sh {0}\n      run: echo ${{ github.event.head_commit.message }}\n",
    );
    // `validate` reports this one already (so `gpuflow run` never starts it); the engine's
    // own refusal at the step is what is tested here.
    let Ok(ran) = try_on_host_unchecked(
        dir,
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - name: use bad\n        uses: ./actions/bad\n",
        |_| {},
    )
    .await
    else {
        panic!("refused before the steps")
    };
    assert_eq!(ran.report.result, JobResult::Failure);
    let lines = ran.lines_of_jobs_starting_with("j").join("\n");
    assert!(lines.contains("step `use bad`"), "{lines}");
    assert!(lines.contains("action.yml:6:"), "{lines}");
}

#[tokio::test]
async fn a_step_not_available_yet_is_refused_before_anything_runs() {
    let dir = Workspace::new();
    // Every built-in runs now; a `docker://` step is what cannot run yet.
    let yaml = r#"
on: workflow_dispatch
jobs:
  j:
    steps:
      - run: touch started
      - uses: docker://gpuflow-base:test
"#;
    // `validate` (and so `gpuflow run`) refuses it first; the engine refuses it too.
    let text = validate_errors(&dir, yaml);
    assert!(
        text.contains("`docker://gpuflow-base:test` steps are not supported yet"),
        "{text}"
    );
    let result = try_on_host_unchecked(dir, yaml, |_| {}).await;
    let Err((RunError::Refused(diags), dir)) = result else {
        panic!("not refused");
    };
    let text = format!("{diags:?}");
    assert!(
        text.contains("`docker://gpuflow-base:test` steps are not supported yet"),
        "{text}"
    );
    assert!(!dir.path().join("started").exists());
}

#[tokio::test]
async fn wrong_inputs_are_refused_before_anything_runs() {
    let yaml = r#"
on:
  workflow_dispatch:
    inputs:
      size: { type: number, required: true }
jobs:
  j:
    steps:
      - run: touch started
"#;
    let Err((RunError::Input(e), dir)) = try_on_host(Workspace::new(), yaml, |o| {
        o.inputs.insert("sise".into(), "1".into());
    })
    .await
    else {
        panic!("not refused");
    };
    assert_eq!(e.message, "unknown input `sise`");
    assert!(e.hint.unwrap().contains("size"));
    assert!(!dir.path().join("started").exists());
}

#[tokio::test]
async fn cancelling_the_run_stops_steps_runs_always_steps_and_reports_cancelled() {
    let (dir, wf, plan) = prepare(
        r#"
on: workflow_dispatch
jobs:
  long:
    steps:
      - run: echo $$ > long.pid; sleep 60
      - if: always()
        run: echo "cleanup ran (${{ job.status }})"
  later:
    needs: long
    steps:
      - run: echo never
"#,
        &[],
    );
    let mut opts = RunOptions::new(gpuflow::engine::new_run_id(), dir.path());
    opts.grace = Duration::from_millis(500);
    let collect = CollectSink::new();
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let pid_file = dir.path().join("long.pid");
    tokio::spawn(async move {
        while !pid_file.exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        c2.cancel();
    });
    let report = gpuflow::engine::run(
        Arc::new(*wf),
        plan,
        opts,
        Arc::new(collect.clone()),
        None,
        cancel,
    )
    .await
    .unwrap();
    assert_eq!(report.result, JobResult::Cancelled);
    assert_eq!(report.exit_code().code(), 130);
    let texts: Vec<String> = collect
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::LogLine { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert!(
        texts.contains(&"cleanup ran (cancelled)".to_string()),
        "{texts:?}"
    );
    assert!(!texts.contains(&"never".to_string()));
    let pid = std::fs::read_to_string(dir.path().join("long.pid")).unwrap();
    assert!(!pid_alive(&pid));
}

/// Counts log lines without keeping them, like a terminal would.
#[derive(Default)]
struct CountSink {
    lines: std::sync::atomic::AtomicU64,
    last: std::sync::Mutex<String>,
}

impl gpuflow::engine::EventSink for CountSink {
    fn emit(&self, event: Event) {
        if let EventKind::LogLine { text, .. } = event.kind {
            self.lines
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            *self.last.lock().unwrap() = text;
        }
    }
}

/// Peak memory is per process: meaningful under nextest (one process per test), which is how
/// the suite runs (`make test`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_printing_a_lot_is_streamed_with_bounded_memory() {
    const LINES: u64 = 400_000;
    let (dir, wf, plan) = prepare(
        &format!(
            "on: workflow_dispatch\njobs:\n  chatty:\n    steps:\n      - run: seq 1 {LINES} | sed 's/$/ {}/'\n",
            "x".repeat(90)
        ),
        &[],
    );
    let opts = RunOptions::new(gpuflow::engine::new_run_id(), dir.path());
    let count = Arc::new(CountSink::default());
    let store = Arc::new(LogStore::create(&opts.log_dir).unwrap());
    let before = peak_rss_kib();
    let report = gpuflow::engine::run(
        Arc::new(*wf),
        plan,
        opts,
        Arc::new(Tee(vec![count.clone(), store])),
        None,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let grown = peak_rss_kib().saturating_sub(before);
    eprintln!("peak memory grew by {grown} KiB for ~40 MB of output");
    assert_eq!(report.result, JobResult::Success);
    assert_eq!(
        count.lines.load(std::sync::atomic::Ordering::Relaxed),
        LINES
    );
    assert!(
        count
            .last
            .lock()
            .unwrap()
            .starts_with(&format!("{LINES} xxx"))
    );
    // The stored log holds it all, written as it came (compressed once the step ended).
    let step_log = std::fs::read_dir(report.log_dir.join("chatty"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".log.zst"))
        .unwrap();
    let stored = gpuflow::run_logs::files::stored_len(&step_log.with_extension("")).unwrap();
    assert!(stored > LINES * 90);
    assert!(grown < 16 * 1024, "peak memory grew by {grown} KiB");
}

/// Job folders are named after the job's name and matrix values, which the workflow chooses:
/// `..` (or `.`) there must not put the logs beside (or above) the run's folder.
#[tokio::test]
async fn log_folders_of_jobs_named_dot_dot_stay_inside_the_run_folder() {
    let ran = on_host(
        r#"
on: workflow_dispatch
jobs:
  up:
    name: '..'
    steps:
      - name: '..'
        run: echo escaped-job
  cell:
    name: ${{ matrix.p }}
    strategy:
      matrix:
        p: ['..', '.', '../..']
    steps:
      - run: echo escaped-cell
"#,
    )
    .await;
    assert_eq!(ran.report.result, JobResult::Success);
    let runs = ran.workspace.path().join(".gpuflow/runs");
    let entries: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "only the run's folder: {entries:?}");
    let run = &entries[0];
    // Every step log (`.log`, compressed when the run ends) is inside the run's folder.
    let mut logs = Vec::new();
    for e in walkdir::WalkDir::new(ran.workspace.path()) {
        let path = e.unwrap().into_path();
        if path.is_file() && path.to_string_lossy().contains(".log") {
            assert!(path.starts_with(run), "written outside the run: {path:?}");
            logs.push(path);
        }
    }
    assert!(logs.len() >= 2, "{logs:?}");
    let lines = ran.lines_of_jobs_starting_with("");
    assert!(lines.iter().any(|l| l == "escaped-job"), "{lines:?}");
    assert_eq!(lines.iter().filter(|l| *l == "escaped-cell").count(), 3);
}
