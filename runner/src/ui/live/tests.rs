//! The live board's tests: what it shows for the events of a run.

use super::*;
use crate::events::Stream;

fn job(name: &str) -> JobRef {
    JobRef {
        job: name.into(),
        cell: 0,
        display: name.into(),
    }
}

fn at(secs: f64, kind: EventKind) -> Event {
    Event {
        elapsed: Duration::from_secs_f64(secs),
        kind,
    }
}

fn step_started(secs: f64, j: &str, step: &str, name: &str) -> Event {
    at(
        secs,
        EventKind::StepStarted {
            job: job(j),
            step: step.into(),
            name: name.into(),
        },
    )
}

fn step_finished(secs: f64, j: &str, step: &str, outcome: StepOutcome, took: f64) -> Event {
    at(
        secs,
        EventKind::StepFinished {
            job: job(j),
            step: step.into(),
            name: String::new(),
            outcome,
            conclusion: outcome,
            duration: Duration::from_secs_f64(took),
            outputs: Default::default(),
        },
    )
}

fn log(secs: f64, j: &str, step: &str, text: &str) -> Event {
    at(
        secs,
        EventKind::LogLine {
            job: job(j),
            step: Some(step.into()),
            container: None,
            stream: Stream::Stdout,
            text: text.into(),
        },
    )
}

fn events() -> Vec<Event> {
    vec![
        at(
            0.0,
            EventKind::RunStarted {
                run_id: "20261130-090000-ab12".into(),
                workflow: "demo".into(),
                log_dir: ".gpuflow/runs/x".into(),
                jobs: 4,
            },
        ),
        at(
            0.0,
            EventKind::JobQueued {
                job: job("build"),
                matrix: Default::default(),
                needs: Vec::new(),
            },
        ),
        at(
            0.0,
            EventKind::JobQueued {
                job: job("bench"),
                matrix: Default::default(),
                needs: Vec::new(),
            },
        ),
        at(
            0.0,
            EventKind::JobQueued {
                job: job("report"),
                matrix: Default::default(),
                needs: Vec::new(),
            },
        ),
        at(
            0.0,
            EventKind::JobQueued {
                job: job("lint"),
                matrix: Default::default(),
                needs: Vec::new(),
            },
        ),
        at(0.0, EventKind::JobStarted { job: job("build") }),
        step_started(0.1, "build", "1", "compile"),
        log(0.5, "build", "1", "compiling"),
        step_finished(1.1, "build", "1", StepOutcome::Success, 1.0),
        at(
            1.2,
            EventKind::JobFinished {
                job: job("build"),
                result: JobResult::Success,
                duration: Duration::from_secs_f64(1.2),
                failure: None,
            },
        ),
        at(
            1.2,
            EventKind::JobSkipped {
                job: job("lint"),
                reason: "`if` is false".into(),
            },
        ),
        at(1.3, EventKind::JobStarted { job: job("bench") }),
        step_started(1.3, "bench", "1", "start the server"),
        step_finished(2.3, "bench", "1", StepOutcome::Success, 1.0),
        step_started(2.3, "bench", "2", "run the client"),
        log(2.5, "bench", "2", "warming up"),
        log(3.0, "bench", "2", "89.5 tok/s\twith a\ttab"),
    ]
}

fn board(events: &[Event]) -> Board {
    let mut board = Board::new();
    for e in events {
        board.apply(e);
    }
    board
}

#[test]
fn a_running_job_shows_its_steps_and_the_latest_line() {
    insta::assert_snapshot!(board(&events()).render(Duration::from_secs(5)), @r"
    run 20261130-090000-ab12 of `demo` (logs: .gpuflow/runs/x)
    ✓ build  1.2s
    ● bench  3.7s
        ✓ start the server  1.0s
        ● run the client  2.7s
            │ 89.5 tok/s    with a    tab
    ○ report  queued
    − lint  skipped: `if` is false
    ");
}

#[test]
fn a_wait_shows_the_servers_latest_line_and_a_benchmark_its_progress() {
    let mut events = events();
    events.push(at(
        3.5,
        EventKind::StepProgress {
            job: job("bench"),
            step: "2".into(),
            waited: Duration::from_secs(2),
            message: "waited 2s: Load weight begin".into(),
        },
    ));
    let waiting = board(&events).render(Duration::from_secs(5));
    assert!(
        waiting.contains("│ waited 2s: Load weight begin"),
        "{waiting}"
    );
    events.push(at(
        4.0,
        EventKind::BenchmarkProgress {
            job: job("bench"),
            step: "2".into(),
            level: "single-stream".into(),
            phase: "run 2/3".into(),
            done: 3,
            total: Some(4),
            errors: 0,
            output_tok_s: 89.5,
        },
    ));
    let measuring = board(&events).render(Duration::from_secs(5));
    assert!(
        measuring.contains("│ single-stream run 2/3: 3/4 requests, 89.5 tok/s, 0 errors"),
        "{measuring}"
    );
}

#[test]
fn a_pull_shows_on_the_steps_row_and_preflights_on_the_jobs() {
    let pull = |step: Option<&str>, finished: bool| EventKind::ImagePull {
        job: job("bench"),
        step: step.map(String::from),
        image: "lmsysorg/sglang:v0.5.23".into(),
        layers_done: 2,
        layers_total: 5,
        bytes_done: 412 << 20,
        bytes_total: 1157 << 20,
        elapsed: Duration::from_secs(8),
        finished,
        text: "412.0 MiB of 1.13 GiB, 2 of 5 layers, 51.5 MiB/s, about 14s left".into(),
    };
    let mut events = events();
    events.push(at(3.5, pull(Some("2"), false)));
    let on_step = board(&events).render(Duration::from_secs(5));
    assert!(
        on_step
            .contains("│ pulling `lmsysorg/sglang:v0.5.23`: 412.0 MiB of 1.13 GiB, 2 of 5 layers"),
        "{on_step}"
    );
    // Before its job starts, preflight's pull is what the job waits for, then it is queued.
    let mut early: Vec<Event> = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::RunStarted { .. } | EventKind::JobQueued { .. }
            )
        })
        .cloned()
        .collect();
    early.push(at(0.5, pull(None, false)));
    let waiting = board(&early).render(Duration::from_secs(1));
    assert!(
        waiting.contains("pulling `lmsysorg/sglang:v0.5.23`"),
        "{waiting}"
    );
    early.push(at(0.9, pull(None, true)));
    let done = board(&early).render(Duration::from_secs(1));
    assert!(!done.contains("pulling"), "{done}");
}

#[test]
fn a_job_waiting_for_gpus_says_so_until_it_starts() {
    let mut events = events();
    events.push(at(
        4.0,
        EventKind::JobWaiting {
            job: job("report"),
            reason: "waiting for 2 GPUs (0 of 8 free)".into(),
        },
    ));
    let text = board(&events).render(Duration::from_secs(5));
    assert!(
        text.contains("○ report  waiting for 2 GPUs (0 of 8 free)"),
        "{text}"
    );
    events.push(at(4.5, EventKind::JobStarted { job: job("report") }));
    let text = board(&events).render(Duration::from_secs(5));
    assert!(text.contains("● report  0.5s"), "{text}");
}

#[test]
fn a_failed_job_keeps_the_step_that_failed() {
    let mut events = events();
    events.push(step_finished(4.0, "bench", "2", StepOutcome::Failure, 1.7));
    events.push(at(
        4.1,
        EventKind::JobFinished {
            job: job("bench"),
            result: JobResult::Failure,
            duration: Duration::from_secs_f64(2.8),
            failure: None,
        },
    ));
    insta::assert_snapshot!(board(&events).render(Duration::from_secs(9)), @r"
    run 20261130-090000-ab12 of `demo` (logs: .gpuflow/runs/x)
    ✓ build  1.2s
    ✗ bench  failure after 2.8s
        ✗ run the client  failure after 1.7s
    ○ report  queued
    − lint  skipped: `if` is false
    ");
}

#[test]
fn a_cell_queued_again_for_a_later_round_shows_that_round() {
    let mut events = events();
    events.push(step_finished(4.0, "bench", "2", StepOutcome::Failure, 1.7));
    events.push(at(
        4.1,
        EventKind::JobFinished {
            job: job("bench"),
            result: JobResult::Success,
            duration: Duration::from_secs_f64(2.8),
            failure: None,
        },
    ));
    let again = JobRef {
        display: "bench, round 2".into(),
        ..job("bench")
    };
    events.push(at(
        4.2,
        EventKind::JobQueued {
            job: again.clone(),
            matrix: Default::default(),
            needs: Vec::new(),
        },
    ));
    events.push(at(4.3, EventKind::JobStarted { job: again }));
    let text = board(&events).render(Duration::from_secs(5));
    assert!(text.contains("● bench, round 2  0.7s"), "{text}");
    assert!(
        !text.contains("run the client"),
        "the first round's steps: {text}"
    );
}

#[test]
fn the_final_frame_ends_with_the_runs_headline() {
    let mut events = events();
    events.push(step_finished(4.0, "bench", "2", StepOutcome::Success, 1.7));
    events.push(at(
        4.1,
        EventKind::JobFinished {
            job: job("bench"),
            result: JobResult::Success,
            duration: Duration::from_secs_f64(2.8),
            failure: None,
        },
    ));
    events.push(at(
        4.2,
        EventKind::RunFinished {
            run_id: "20261130-090000-ab12".into(),
            result: JobResult::Success,
        },
    ));
    let headline = crate::events::Headline {
        run_id: "20261130-090000-ab12".into(),
        result: JobResult::Success,
        log_dir: ".gpuflow/runs/20261130-090000-ab12".into(),
        benchmarks: vec![crate::events::BenchmarkFigure {
            job: job("bench"),
            step: "2".into(),
            name: "run the client".into(),
            metric: "decode_tok_s".into(),
            unit: "tok/s".into(),
            mean: 89.5,
            ci95_low: 88.5,
            ci95_high: 90.5,
            runs: 3,
        }],
        comparisons: vec![crate::events::ComparisonFigure {
            job: job("bench"),
            step: "3".into(),
            name: "compare".into(),
            metric: "output_tok_s".into(),
            meaning: Some("decode tok/s, per-request median".into()),
            verdict: "regression".into(),
            unit: "tok/s".into(),
            current: Some(38.0),
            baseline_value: Some(89.5),
            ratio: Some(0.4246),
            change_pct: Some(-57.54),
            baseline: "the pinned baseline `nccl`".into(),
        }],
        reports: vec![crate::events::ReportFile {
            job: job("report"),
            step: "1".into(),
            path: ".gpuflow/runs/20261130-090000-ab12/report/report.md".into(),
            commit: None,
        }],
        pulls: Vec::new(),
    };
    events.push(at(4.2, EventKind::RunHeadline(headline)));
    insta::assert_snapshot!(board(&events).render(Duration::from_secs(9)), @r"
    run 20261130-090000-ab12 of `demo` (logs: .gpuflow/runs/x)
    ✓ build  1.2s
    ✓ bench  2.8s
    ○ report  queued
    − lint  skipped: `if` is false

    headline: run 20261130-090000-ab12 success
      benchmark  [bench] run the client: decode_tok_s 89.50 ± 1.00 tok/s (mean of 3 runs, 95% CI)
      verdict    [bench] compare: output_tok_s (decode tok/s, per-request median) regression, ratio 0.425 (-57.5%): 38.00 tok/s vs 89.50 tok/s
      report     .gpuflow/runs/20261130-090000-ab12/report/report.md
      logs       .gpuflow/runs/20261130-090000-ab12
    ");

    // The live view draws the board a last time, then prints the headline below it.
    let printed = Printed::default();
    let view = LiveView::new(ProgressDrawTarget::hidden(), Box::new(printed.clone()));
    for e in events {
        view.emit(e);
    }
    let frame = view.frame();
    assert!(
        frame
            .trim_end()
            .ends_with("logs       .gpuflow/runs/20261130-090000-ab12"),
        "{frame}"
    );
    let after = printed.text();
    assert!(
        after.starts_with("\nheadline: run 20261130-090000-ab12 success\n")
            && after.contains("  verdict    [bench] compare: output_tok_s (decode tok/s, per-request median) regression, ratio 0.425")
            && after.ends_with("  logs       .gpuflow/runs/20261130-090000-ab12\n"),
        "{after}"
    );
}

/// What the live view printed below its board.
#[derive(Clone, Default)]
struct Printed(Arc<Mutex<Vec<u8>>>);

impl Printed {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl Write for Printed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn long_lines_are_cut_on_a_character_boundary() {
    let long = "é".repeat(300);
    let c = cut(&long);
    assert_eq!(c.chars().count(), LINE_CHARS);
    assert!(c.ends_with('…'));
}

#[test]
fn the_view_takes_every_event_without_a_terminal() {
    let view = LiveView::new(ProgressDrawTarget::hidden(), Box::new(std::io::sink()));
    for e in events() {
        view.emit(e);
    }
    assert!(
        view.frame().contains("● run the client"),
        "{}",
        view.frame()
    );
    view.emit(at(
        6.0,
        EventKind::RunFinished {
            run_id: "x".into(),
            result: JobResult::Success,
        },
    ));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// Events in any order, even nonsensical, never panic the board.
    #[test]
    fn any_event_order_renders(order in proptest::collection::vec(0usize..17, 0..40)) {
        let all = events();
        let mut board = Board::new();
        for i in order {
            board.apply(&all[i]);
        }
        let _ = board.render(Duration::from_secs(1));
    }
}
