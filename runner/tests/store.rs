//! The results store and compare-to-baseline end to end, on real SQLite files in temporary
//! directories: the write-ups' numbers, concurrent writers (threads and processes), schema
//! upgrades, pinned baselines and the `history` / `baseline` commands.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{self, Workspace, command::Gpuflow};
use gpuflow::compare::{
    BaselineSpec, CompareOptions, Comparison, CurrentRun, FailOn, MetricInput, StepInputs, Test,
    Verdict, compare, compare_result, resolve, step_outcome,
};
use gpuflow::store::{
    Direction, Fingerprint, GitInfo, HistoryQuery, Identity, Info, NewMetric, NewResult,
    ResultStore, RunStatus, SCHEMA_VERSION, StoreError,
};

/// The write-ups' host: 8 Blackwell GPUs serving with SGLang.
fn identity() -> Identity {
    Identity {
        host_label: "blackwell".into(),
        gpu_model: Some("NVIDIA RTX PRO 6000 Blackwell".into()),
        gpu_count: 8,
        driver: Some("580.65.06".into()),
        cuda: Some("12.9".into()),
        image_digest: Some("sha256:5d41402abc4b2a76b9719d911017c592".into()),
        server_command: [
            "python3",
            "-m",
            "sglang.launch_server",
            "--tp",
            "8",
            "--cuda-graph-max-bs",
            "128",
        ]
        .map(String::from)
        .to_vec(),
        benchmark: BTreeMap::from([
            ("mode".into(), "single-stream".into()),
            ("output-tokens".into(), "256".into()),
        ]),
    }
}

/// A store's path, `.gpuflow/results.db` of an empty folder (no file yet).
struct Tmp {
    _dir: Workspace,
    path: PathBuf,
}

fn tmp_store() -> Tmp {
    let dir = Workspace::empty();
    let path = dir.path().join(".gpuflow").join("results.db");
    Tmp { _dir: dir, path }
}

/// A finished `bench` step of workflow `eagle3` with one `output_tok_s` metric.
fn result(run: &str, at_ms: i64, identity: &Identity, samples: &[f64]) -> NewResult {
    NewResult {
        run_id: run.into(),
        workflow: "eagle3".into(),
        job: "bench".into(),
        matrix: BTreeMap::from([("allreduce".into(), "nccl".into())]),
        step: "bench".into(),
        git: GitInfo {
            commit: Some(format!("{at_ms:x}")),
            ref_name: Some("main".into()),
            dirty: false,
        },
        started_at_ms: at_ms - 60_000,
        finished_at_ms: at_ms,
        status: RunStatus::Success,
        fingerprint: Fingerprint {
            identity: identity.clone(),
            info: Info {
                host_name: Some("gpu-node-7".into()),
                gpu_uuids: vec!["GPU-1b2c".into()],
                temperature: Some("64 C".into()),
                ..Info::default()
            },
        },
        metrics: vec![NewMetric {
            name: "output_tok_s".into(),
            unit: "tok/s".into(),
            direction: None,
            samples: samples.to_vec(),
        }],
    }
}

/// Judges `output_tok_s` of `samples` (run `run`) against `spec`, as the
/// `compare-to-baseline` step does.
fn judge(
    store: &ResultStore,
    run: &str,
    identity: &Identity,
    samples: &[f64],
    spec: &str,
    opts: &CompareOptions,
) -> Comparison {
    let current = CurrentRun {
        run_id: run,
        workflow: "eagle3",
        job: "bench",
        step: "bench",
        git_ref: Some("main"),
        identity,
        node: None,
        server_version: None,
    };
    let spec = BaselineSpec::parse(spec, 10).unwrap();
    let baseline = resolve(
        store,
        &spec,
        &current,
        "output_tok_s",
        "tok/s",
        opts.allow_incomparable,
    )
    .unwrap();
    let metric = MetricInput {
        name: "output_tok_s",
        unit: "tok/s",
        direction: Direction::Higher,
        samples,
    };
    compare(&metric, baseline.as_ref(), opts)
}

const NCCL: [f64; 5] = [89.2, 89.8, 89.5, 89.9, 89.1];
const CUSTOM_ALLREDUCE: [f64; 5] = [38.1, 37.8, 38.0, 38.3, 37.9];

#[test]
fn custom_allreduce_at_38_is_a_regression_against_89_5() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    store.record(&result("r1", 1_000_000, &id, &NCCL)).unwrap();

    let c = judge(
        &store,
        "r2",
        &id,
        &CUSTOM_ALLREDUCE,
        "previous",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::Regression, "{}", c.explanation);
    assert!((c.ratio.unwrap() - 0.42).abs() < 0.01, "{c:?}");
    assert!((c.change_pct.unwrap() + 57.5).abs() < 0.5, "{c:?}");
    assert_eq!(c.test, Some(Test::MannWhitneyU));
    assert!(c.p_value.unwrap() < 0.01);
    assert_eq!(c.threshold_pct, 5.0);
    assert!(c.baseline.contains("`r1`"), "{}", c.baseline);
    assert!(
        c.explanation
            .starts_with("output_tok_s is 38.00 tok/s against 89.50 tok/s (-57.5%, ratio 0.42)"),
        "{}",
        c.explanation
    );
    assert!(!step_outcome(FailOn::Regression, std::slice::from_ref(&c)).passed);
    assert!(step_outcome(FailOn::Never, &[c]).passed);
}

#[test]
fn a_pinned_nccl_baseline_across_server_flags_needs_permission() {
    // The custom-allreduce server runs with another flag: another series. Compared with the
    // pinned NCCL run it is incomparable, unless allowed, and then the flag is named.
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let nccl = identity();
    store
        .record(&result("nccl-run", 1_000_000, &nccl, &NCCL))
        .unwrap();
    store.set_baseline("nccl", "nccl-run", None).unwrap();
    let mut custom = nccl.clone();
    custom
        .server_command
        .push("--enable-custom-allreduce".into());

    let c = judge(
        &store,
        "r2",
        &custom,
        &CUSTOM_ALLREDUCE,
        "nccl",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::Incomparable, "{}", c.explanation);
    assert_eq!(c.differences.len(), 1);
    assert_eq!(c.differences[0].field, "server-command");
    assert!(
        c.explanation.contains("allow-incomparable"),
        "{}",
        c.explanation
    );
    // The numbers are still there for the report.
    assert!((c.ratio.unwrap() - 0.42).abs() < 0.01);

    let allowed = CompareOptions {
        allow_incomparable: true,
        ..CompareOptions::default()
    };
    let c = judge(&store, "r2", &custom, &CUSTOM_ALLREDUCE, "nccl", &allowed);
    assert_eq!(c.verdict, Verdict::Regression, "{}", c.explanation);
    assert!(
        c.explanation.contains("server-command"),
        "{}",
        c.explanation
    );
    assert!(
        c.baseline
            .starts_with("pinned baseline `nccl` (run `nccl-run`"),
        "{}",
        c.baseline
    );
}

#[test]
fn a_previous_run_of_another_series_is_not_called_comparable() {
    // With `allow-incomparable`, `previous` may take a run of another series (another
    // server flag): the baseline's words must say so, not "the previous comparable run".
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let nccl = identity();
    store
        .record(&result("nccl-run", 1_000_000, &nccl, &NCCL))
        .unwrap();
    let mut custom = nccl.clone();
    custom
        .server_command
        .push("--enable-custom-allreduce".into());
    let allowed = CompareOptions {
        allow_incomparable: true,
        ..CompareOptions::default()
    };
    for spec in ["previous", "window"] {
        let c = judge(&store, "r2", &custom, &CUSTOM_ALLREDUCE, spec, &allowed);
        assert!(
            !c.baseline.contains("comparable run"),
            "{spec}: {}",
            c.baseline
        );
        assert!(
            c.baseline
                .contains("from another series: allow-incomparable"),
            "{spec}: {}",
            c.baseline
        );
    }
    let c = judge(
        &store,
        "r2",
        &custom,
        &CUSTOM_ALLREDUCE,
        "previous",
        &allowed,
    );
    assert!(
        c.baseline
            .starts_with("the previous run `nccl-run` (5 samples; "),
        "{}",
        c.baseline
    );
    // The same series keeps its words.
    let c = judge(&store, "r3", &nccl, &NCCL, "previous", &allowed);
    assert!(
        c.baseline
            .starts_with("the previous comparable run `nccl-run`"),
        "{}",
        c.baseline
    );
}

#[test]
fn a_different_driver_is_incomparable_and_named() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let old = identity();
    store.record(&result("r1", 1_000_000, &old, &NCCL)).unwrap();
    store.set_baseline("before-upgrade", "r1", None).unwrap();
    let mut new = old.clone();
    new.driver = Some("590.12".into());

    let c = judge(
        &store,
        "r2",
        &new,
        &NCCL,
        "before-upgrade",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::Incomparable);
    assert_eq!(c.differences[0].field, "driver");
    assert_eq!(
        (
            c.differences[0].baseline.as_str(),
            c.differences[0].current.as_str()
        ),
        ("580.65.06", "590.12")
    );
    assert!(
        c.explanation.contains("driver `580.65.06` → `590.12`"),
        "{}",
        c.explanation
    );

    // `previous` and `window` look only at the same series: nothing there yet.
    let c = judge(
        &store,
        "r2",
        &new,
        &NCCL,
        "previous",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::NoBaseline);
    let c = judge(
        &store,
        "r2",
        &new,
        &NCCL,
        "window",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::NoBaseline);
    assert!(step_outcome(FailOn::Regression, &[c]).passed);
}

/// Deterministic noise of about ±1%: the same code measured again.
fn around(center: f64, seed: u64, n: usize) -> Vec<f64> {
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            #[allow(clippy::cast_precision_loss)]
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            center * (1.0 + (u - 0.5) * 0.02)
        })
        .collect()
}

#[test]
fn the_same_code_twice_is_unchanged() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    store
        .record(&result("r1", 1_000_000, &id, &around(89.5, 1, 8)))
        .unwrap();
    let c = judge(
        &store,
        "r2",
        &id,
        &around(89.5, 2, 8),
        "previous",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::Unchanged, "{}", c.explanation);
    assert!(c.change_pct.unwrap().abs() < 2.0);

    // Against a window of eight such runs as well.
    for i in 3..10 {
        store
            .record(&result(
                &format!("r{i}"),
                1_000_000 + i * 1000,
                &id,
                &around(89.5, i as u64, 8),
            ))
            .unwrap();
    }
    let c = judge(
        &store,
        "r99",
        &id,
        &around(89.5, 99, 8),
        "window",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::Unchanged, "{}", c.explanation);
    assert!(
        c.baseline
            .starts_with("a window of the last 8 comparable runs on `main`"),
        "{}",
        c.baseline
    );
}

#[test]
fn cuda_graph_max_bs_128_is_a_9_percent_improvement() {
    // 82 tok/s with --cuda-graph-max-bs 512 was the stable baseline; 128 gave 89.5.
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    for i in 0..6 {
        store
            .record(&result(
                &format!("bs512-{i}"),
                1_000_000 + i * 1000,
                &id,
                &around(82.0, i as u64, 5),
            ))
            .unwrap();
    }
    let current = around(89.5, 42, 5);
    let window = judge(
        &store,
        "bs128",
        &id,
        &current,
        "window",
        &CompareOptions::default(),
    );
    assert_eq!(
        window.verdict,
        Verdict::Improvement,
        "{}",
        window.explanation
    );
    assert_eq!(window.test, Some(Test::PredictionInterval));
    assert!((window.change_pct.unwrap() - 9.1).abs() < 1.0, "{window:?}");

    let previous = judge(
        &store,
        "bs128",
        &id,
        &current,
        "previous",
        &CompareOptions::default(),
    );
    assert_eq!(
        previous.verdict,
        Verdict::Improvement,
        "{}",
        previous.explanation
    );
    assert_eq!(previous.test, Some(Test::MannWhitneyU));

    let fixed = judge(
        &store,
        "bs128",
        &id,
        &current,
        "82 tok/s",
        &CompareOptions::default(),
    );
    assert_eq!(fixed.verdict, Verdict::Improvement, "{}", fixed.explanation);
    assert_eq!(fixed.test, Some(Test::OneSampleT));
    assert_eq!(fixed.baseline, "the fixed value 82.00 tok/s");
}

#[test]
fn three_samples_against_three_are_inconclusive_unless_gross() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    store
        .record(&result("r1", 1_000_000, &id, &[82.1, 81.8, 82.2]))
        .unwrap();

    let c = judge(
        &store,
        "r2",
        &id,
        &[89.4, 89.7, 89.3],
        "previous",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::Inconclusive, "{}", c.explanation);
    assert_eq!(c.p_value, None);
    assert!(
        c.explanation.contains("too few samples"),
        "{}",
        c.explanation
    );
    assert!(step_outcome(FailOn::Regression, std::slice::from_ref(&c)).passed);
    assert!(!step_outcome(FailOn::Inconclusive, &[c]).passed);

    let gross = judge(
        &store,
        "r2",
        &id,
        &[38.1, 37.9, 38.0],
        "previous",
        &CompareOptions::default(),
    );
    assert_eq!(gross.verdict, Verdict::Regression, "{}", gross.explanation);
    assert_eq!(gross.test, Some(Test::GrossChange));
}

#[test]
fn failed_steps_are_stored_but_never_a_baseline() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    let mut failed = result("r1", 1_000_000, &id, &[12.0]);
    failed.status = RunStatus::Failure;
    let rid = store.record(&failed).unwrap();
    let back = store.result(rid).unwrap().unwrap();
    assert_eq!(back.status, RunStatus::Failure);
    assert_eq!(
        back.metrics[0].direction,
        Direction::Higher,
        "defaulted from tok/s"
    );
    assert_eq!(back.fingerprint.info.temperature.as_deref(), Some("64 C"));
    assert_eq!(back.series_key, id.series_key());
    let c = judge(
        &store,
        "r2",
        &id,
        &NCCL,
        "previous",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::NoBaseline);
}

#[test]
fn bad_metrics_are_refused_before_anything_is_written() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let mut r = result("r1", 1_000_000, &identity(), &[1.0, f64::NAN]);
    let err = store.record(&r).unwrap_err();
    assert!(
        matches!(err, StoreError::BadSample { index: 1, .. }),
        "{err}"
    );
    r.metrics[0] = NewMetric {
        name: "accept_length".into(),
        unit: "tokens".into(),
        direction: None,
        samples: vec![2.5],
    };
    let err = store.record(&r).unwrap_err();
    assert_eq!(
        err.to_string(),
        "metric `accept_length` has no direction: unit `tokens` does not say whether higher or lower is better"
    );
    assert!(err.hint().unwrap().contains("direction: higher"));
    assert_eq!(store.count().unwrap(), 0);
}

#[test]
fn pinned_baselines_per_metric_and_for_all() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    store.record(&result("r1", 1_000_000, &id, &NCCL)).unwrap();
    store
        .record(&result("r2", 2_000_000, &id, &around(82.0, 3, 5)))
        .unwrap();
    store.set_baseline("nccl", "r1", None).unwrap();
    store
        .set_baseline("nccl", "r2", Some("output_tok_s"))
        .unwrap();
    // The per-metric pin wins.
    assert_eq!(
        store
            .baseline("nccl", "output_tok_s")
            .unwrap()
            .unwrap()
            .run_id,
        "r2"
    );
    assert_eq!(
        store.baseline("nccl", "ttft_ms").unwrap().unwrap().run_id,
        "r1"
    );
    assert_eq!(store.baselines().unwrap().len(), 2);
    // Setting again moves the pin.
    store
        .set_baseline("nccl", "r1", Some("output_tok_s"))
        .unwrap();
    assert_eq!(
        store
            .baseline("nccl", "output_tok_s")
            .unwrap()
            .unwrap()
            .run_id,
        "r1"
    );
    assert_eq!(
        store.remove_baseline("nccl", Some("output_tok_s")).unwrap(),
        1
    );
    assert_eq!(store.remove_baseline("nccl", None).unwrap(), 1);
    assert!(store.baselines().unwrap().is_empty());

    let err = store.set_baseline("x", "r3", None).unwrap_err();
    assert_eq!(err.to_string(), "no run `r3` in the results store");
    assert_eq!(err.hint().as_deref(), Some("recent runs: `r2` and `r1`"));
    let err = store.set_baseline("x", "R1", None).unwrap_err();
    assert_eq!(err.hint().as_deref(), Some("did you mean `r1`?"));
    let err = store
        .set_baseline("x", "r1", Some("output_tok"))
        .unwrap_err();
    assert_eq!(err.hint().as_deref(), Some("did you mean `output_tok_s`?"));
    let err = store.set_baseline("previous", "r1", None).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`previous` cannot name a baseline"),
        "{err}"
    );

    let current = CurrentRun {
        run_id: "r9",
        workflow: "eagle3",
        job: "bench",
        step: "bench",
        git_ref: None,
        identity: &id,
        node: None,
        server_version: None,
    };
    store.set_baseline("nccl", "r1", None).unwrap();
    let err = resolve(
        &store,
        &BaselineSpec::parse("nccI", 10).unwrap(),
        &current,
        "output_tok_s",
        "tok/s",
        false,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "no baseline named `nccI`");
    assert_eq!(err.hint().as_deref(), Some("did you mean `nccl`?"));
    let err = resolve(
        &store,
        &BaselineSpec::parse("89.5 ms", 10).unwrap(),
        &current,
        "output_tok_s",
        "tok/s",
        false,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("write the number in `tok/s`"),
        "{err}"
    );
}

#[test]
fn windows_stay_on_their_branch() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    for i in 0..4 {
        let mut r = result(
            &format!("main-{i}"),
            1_000_000 + i * 1000,
            &id,
            &around(82.0, i as u64, 5),
        );
        r.git.ref_name = Some("main".into());
        store.record(&r).unwrap();
        let mut r = result(
            &format!("exp-{i}"),
            1_000_500 + i * 1000,
            &id,
            &around(38.0, i as u64, 5),
        );
        r.git.ref_name = Some("experiment".into());
        store.record(&r).unwrap();
    }
    let c = judge(
        &store,
        "now",
        &id,
        &around(82.0, 9, 5),
        "window",
        &CompareOptions::default(),
    );
    assert_eq!(c.verdict, Verdict::Unchanged, "{}", c.explanation);
    assert!(
        c.baseline
            .contains("last 4 comparable runs on `main`, of 10 asked for"),
        "{}",
        c.baseline
    );
}

#[test]
fn the_step_compares_several_metrics_at_once() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    let with_latencies = |run: &str, at: i64, tok: f64, ttft: f64, itl: f64| {
        let mut r = result(run, at, &id, &around(tok, 1, 6));
        r.metrics.push(NewMetric {
            name: "ttft_ms".into(),
            unit: "ms".into(),
            direction: None,
            samples: around(ttft, 2, 6),
        });
        r.metrics.push(NewMetric {
            name: "itl_ms".into(),
            unit: "ms".into(),
            direction: None,
            samples: around(itl, 3, 6),
        });
        r
    };
    store
        .record(&with_latencies("before", 1_000_000, 89.5, 120.0, 11.2))
        .unwrap();
    // Same throughput and ITL, but the first token takes 40% longer.
    let now = store
        .record(&with_latencies("after", 2_000_000, 89.5, 168.0, 11.2))
        .unwrap();
    let current = store.result(now).unwrap().unwrap();
    let inputs = StepInputs {
        metrics: vec!["output_tok_s".into(), "ttft_ms".into(), "itl_ms".into()],
        baseline: "previous".into(),
        ..StepInputs::default()
    };
    let report = compare_result(&store, &current, &inputs).unwrap();
    let verdicts: Vec<(&str, Verdict)> = report
        .comparisons
        .iter()
        .map(|c| (c.metric.as_str(), c.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("output_tok_s", Verdict::Unchanged),
            ("ttft_ms", Verdict::Regression),
            ("itl_ms", Verdict::Unchanged),
        ]
    );
    let ttft = &report.comparisons[1];
    assert_eq!(ttft.direction, Direction::Lower, "defaulted from `ms`");
    assert!((ttft.ratio.unwrap() - 1.4).abs() < 0.01);
    assert!(
        ttft.change_pct.unwrap() < -25.0,
        "positive is better: {ttft:?}"
    );
    assert!(!report.outcome.passed);
    assert_eq!(report.outcome.failing, ["ttft_ms"]);
    assert_eq!(report.overall_verdict(), Some(Verdict::Regression));

    // Overriding the direction turns the slower first token into an improvement.
    let flipped = StepInputs {
        metrics: vec!["ttft_ms".into()],
        direction: Some(Direction::Higher),
        ..inputs.clone()
    };
    let report = compare_result(&store, &current, &flipped).unwrap();
    assert_eq!(report.comparisons[0].verdict, Verdict::Improvement);

    let typo = StepInputs {
        metrics: vec!["ttft".into()],
        ..inputs
    };
    let err = compare_result(&store, &current, &typo).unwrap_err();
    assert_eq!(err.to_string(), "step `bench` measured no metric `ttft`");
    assert_eq!(err.hint().as_deref(), Some("did you mean `ttft_ms`?"));
}

// --- concurrency ---------------------------------------------------------------------------

const WRITES_PER_WRITER: usize = 25;

fn write_many(path: &Path, writer: usize) {
    let mut store = ResultStore::open(path).unwrap();
    let id = identity();
    for i in 0..WRITES_PER_WRITER {
        #[allow(clippy::cast_possible_wrap)]
        let at = (writer * 1000 + i) as i64;
        store
            .record(&result(
                &format!("w{writer}-{i}"),
                at,
                &id,
                &around(89.5, at as u64, 5),
            ))
            .unwrap();
    }
}

fn assert_all_written(path: &Path, writers: usize) {
    let store = ResultStore::open(path).unwrap();
    #[allow(clippy::cast_possible_wrap)]
    let expected = (writers * WRITES_PER_WRITER) as i64;
    assert_eq!(store.count().unwrap(), expected);
    for w in 0..writers {
        for i in 0..WRITES_PER_WRITER {
            let results = store.run_results(&format!("w{w}-{i}")).unwrap();
            assert_eq!(results.len(), 1, "w{w}-{i}");
            assert_eq!(results[0].metrics[0].samples.len(), 5);
        }
    }
}

#[test]
fn eight_threads_write_at_once_and_nothing_is_lost() {
    let tmp = tmp_store();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|w| {
            let path = tmp.path.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                write_many(&path, w);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_all_written(&tmp.path, 8);
}

/// Runs as a child process of `eight_processes_write_at_once_and_nothing_is_lost` (this test
/// binary started again with this test's name); does nothing when run on its own.
#[test]
#[ignore = "a child of eight_processes_write_at_once_and_nothing_is_lost"]
fn store_writer_process() {
    let (Ok(path), Ok(writer), Ok(go)) = (
        std::env::var("GPUFLOW_TEST_STORE"),
        std::env::var("GPUFLOW_TEST_WRITER"),
        std::env::var("GPUFLOW_TEST_GO"),
    ) else {
        return;
    };
    // Start together: every child waits for the parent's signal file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !Path::new(&go).exists() {
        assert!(std::time::Instant::now() < deadline, "never told to start");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    write_many(Path::new(&path), writer.parse().unwrap());
}

#[test]
fn eight_processes_write_at_once_and_nothing_is_lost() {
    let tmp = tmp_store();
    let go = tmp.path.with_file_name("go");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..8)
        .map(|w| {
            std::process::Command::new(&exe)
                .args([
                    "store::store_writer_process",
                    "--exact",
                    "--ignored",
                    "--test-threads=1",
                ])
                .env("GPUFLOW_TEST_STORE", &tmp.path)
                .env("GPUFLOW_TEST_WRITER", w.to_string())
                .env("GPUFLOW_TEST_GO", &go)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::fs::create_dir_all(go.parent().unwrap()).unwrap();
    std::fs::write(&go, "").unwrap();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("1 passed"),
            "the child ran no test:\n{stdout}"
        );
    }
    assert_all_written(&tmp.path, 8);
}

// --- schema ----------------------------------------------------------------------------------

#[test]
fn an_older_schema_file_is_upgraded_in_place() {
    let tmp = tmp_store();
    {
        // What the first gpuflow wrote: schema 1, no pinned baselines yet.
        let mut old = ResultStore::open_at(&tmp.path, 1).unwrap();
        old.record(&result("r1", 1_000_000, &identity(), &NCCL))
            .unwrap();
    }
    let version = |path: &Path| -> i64 {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&tmp.path), 1);
    let mut store = ResultStore::open(&tmp.path).unwrap();
    assert_eq!(version(&tmp.path), SCHEMA_VERSION);
    // The old result is intact and the new table works.
    let r = store.run_results("r1").unwrap();
    assert_eq!(r[0].metrics[0].samples, NCCL.to_vec());
    store.set_baseline("nccl", "r1", None).unwrap();
    drop(store);
    // Opening again is a no-op.
    ResultStore::open(&tmp.path).unwrap();
    assert_eq!(version(&tmp.path), SCHEMA_VERSION);
}

#[test]
fn a_newer_schema_file_is_refused_untouched() {
    let tmp = tmp_store();
    ResultStore::open(&tmp.path).unwrap();
    let conn = rusqlite::Connection::open(&tmp.path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = ResultStore::open(&tmp.path).unwrap_err();
    assert!(
        err.to_string().ends_with(&format!(
            "has schema version 99, newer than this gpuflow knows ({SCHEMA_VERSION})"
        )),
        "{err}"
    );
    assert!(err.hint().unwrap().starts_with("upgrade gpuflow"));
    let conn = rusqlite::Connection::open(&tmp.path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 99, "the newer file is left as it was");
}

// --- commands --------------------------------------------------------------------------------

/// `gpuflow` with the results store at `store`.
fn gpuflow(store: &Path) -> Gpuflow {
    support::gpuflow().env("GPUFLOW_STORE", store)
}

/// 2026-11-30 08:00 UTC plus `minutes`.
fn at(minutes: i64) -> i64 {
    1_796_025_600_000 + minutes * 60_000
}

fn write_up_store() -> Tmp {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    store
        .record(&result("run-1", at(0), &id, &[81.9, 82.0, 82.1]))
        .unwrap();
    store
        .record(&result("run-2", at(30), &id, &[82.3, 82.0, 82.2]))
        .unwrap();
    store
        .record(&result("run-3", at(60), &id, &[89.4, 89.5, 89.6]))
        .unwrap();
    let mut custom = id.clone();
    custom
        .server_command
        .push("--enable-custom-allreduce".into());
    store
        .record(&result("run-4", at(90), &custom, &[38.0, 38.1, 37.9]))
        .unwrap();
    tmp
}

#[test]
fn history_shows_each_series_with_a_sparkline() {
    let tmp = write_up_store();
    let out = gpuflow(&tmp.path)
        .args(["history", "output_tok_s"])
        .success();
    let stdout = out.stdout;
    let key = identity().series_key();
    let expected = format!(
        "output_tok_s (tok/s, higher is better) · series {} · blackwell, 8× NVIDIA RTX PRO 6000 Blackwell, driver 580.65.06, CUDA 12.9
  ▁▁█  82.00 tok/s … 89.50 tok/s
  WHEN (UTC)        RUN    COMMIT    MEDIAN  N  CV    CHANGE
  2026-11-30 08:00  run-1  1a22b77c  82.00   3  0.1%
  2026-11-30 08:30  run-2  1a22b933  82.20   3  0.2%  +0.2%
  2026-11-30 09:00  run-3  1a22baeb  89.50   3  0.1%  +8.9%
",
        key.short()
    );
    assert!(stdout.starts_with(&expected), "{stdout}");
    assert!(
        stdout.contains("run-4"),
        "the other series follows:\n{stdout}"
    );

    let out = gpuflow(&tmp.path)
        .args([
            "history",
            "output_tok_s",
            "--json",
            "--series",
            key.short(),
            "--limit",
            "2",
        ])
        .success();
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let series = json["series"].as_array().unwrap();
    assert_eq!(series.len(), 1);
    assert_eq!(series[0]["key"], key.0);
    assert_eq!(series[0]["identity"]["driver"], "580.65.06");
    let points = series[0]["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1]["run"], "run-3");
    assert_eq!(points[1]["summary"]["median"], 89.5);
    assert_eq!(points[1]["finished_at"], "2026-11-30T09:00:00Z");
}

/// A prefix naming one series is read as that key, one matching several as the prefix: the
/// same points either way (src/store/history.rs).
#[test]
fn history_of_a_series_prefix_is_every_point_it_matches() {
    let tmp = write_up_store();
    let store = ResultStore::open(&tmp.path).unwrap();
    let query = |series: &str| HistoryQuery {
        metric: "output_tok_s".into(),
        series: Some(series.into()),
        workflow: None,
        limit: 100,
    };
    let all = store.history(&query("")).unwrap();
    assert_eq!(all.len(), 4, "an empty prefix matches both series");
    let key = identity().series_key();
    let one = store.history(&query(&key.short().to_uppercase())).unwrap();
    let expected: Vec<_> = all
        .iter()
        .filter(|p| p.series_key == key)
        .cloned()
        .collect();
    assert_eq!(expected.len(), 3);
    assert_eq!(one, expected);
    assert!(store.history(&query("0000000000")).unwrap().is_empty());
}

#[test]
fn history_svg_draws_one_line_per_series() {
    let tmp = write_up_store();
    let svg_path = tmp.path.with_file_name("history.svg");
    gpuflow(&tmp.path)
        .args(["history", "output_tok_s", "--svg"])
        .arg(&svg_path)
        .success();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    // Two environments (NCCL, then the custom all-reduce): two lines, four points.
    assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
    assert_eq!(svg.matches("<circle").count(), 4, "{svg}");
    assert!(svg.contains(identity().series_key().short()), "{svg}");
    assert!(svg.contains("output_tok_s (tok/s)"), "{svg}");
}

#[test]
fn history_of_a_mistyped_metric_suggests_the_name() {
    let tmp = write_up_store();
    let out = gpuflow(&tmp.path)
        .args(["history", "output_toks"])
        .status(1);
    let stderr = out.stderr;
    assert!(
        stderr.contains("error: no results of metric `output_toks`"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `output_tok_s`?"), "{stderr}");

    let out = gpuflow(&tmp.path)
        .args(["history", "output_tok_s", "--series", "81d3*"])
        .status(2);
    let stderr = out.stderr;
    assert!(
        stderr.contains("error: `81d3*` is not a series key"),
        "{stderr}"
    );

    let out = gpuflow(&tmp.path)
        .args(["history", "output_tok_s", "--workflow", "vllm"])
        .status(1);
    let stderr = out.stderr;
    assert!(
        stderr.contains("error: no results of `output_tok_s` match"),
        "{stderr}"
    );
    assert!(
        stderr.contains("drop `--series` or `--workflow`"),
        "{stderr}"
    );
    gpuflow(&tmp.path)
        .args(["history", "output_tok_s", "--workflow", "eagle3"])
        .success();

    let missing = tmp.path.with_file_name("nothing.db");
    let out = gpuflow(&missing)
        .args(["history", "output_tok_s"])
        .status(2);
    let stderr = out.stderr;
    assert!(stderr.contains("no results store at"), "{stderr}");
    assert!(!missing.exists(), "reading must not create a store");
}

#[test]
fn baseline_commands_set_list_and_remove() {
    let tmp = write_up_store();
    let out = gpuflow(&tmp.path)
        .args(["baseline", "set", "nccl", "run-3"])
        .success();
    assert_eq!(out.stdout, "pinned `nccl` to run `run-3` (all metrics)\n");
    gpuflow(&tmp.path)
        .args([
            "baseline",
            "set",
            "slow",
            "run-4",
            "--metric",
            "output_tok_s",
        ])
        .success();
    let out = gpuflow(&tmp.path).args(["baseline", "list"]).success();
    let stdout = out.stdout;
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "NAME  METRIC        RUN    PINNED (UTC)");
    assert!(
        lines[1].starts_with("nccl  (all)         run-3  "),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with("slow  output_tok_s  run-4  "),
        "{stdout}"
    );

    let out = gpuflow(&tmp.path)
        .args(["baseline", "set", "x", "run-9"])
        .status(2);
    let stderr = out.stderr;
    assert!(
        stderr.contains("error: no run `run-9` in the results store"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `run-"), "{stderr}");

    gpuflow(&tmp.path)
        .args(["baseline", "rm", "nccl"])
        .success();
    let out = gpuflow(&tmp.path).args(["baseline", "rm", "slw"]).status(2);
    let stderr = out.stderr;
    assert!(
        stderr.contains("error: no baseline named `slw`"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `slow`?"), "{stderr}");
    let out = gpuflow(&tmp.path)
        .args(["baseline", "list", "--json"])
        .success();
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(json[0]["name"], "slow");
}

#[test]
fn a_baseline_from_another_slurm_node_is_compared_and_says_so() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    let mut on_gpu1 = result("r1", 1_000_000, &id, &NCCL);
    on_gpu1.fingerprint.info.slurm = Some(gpuflow::store::SlurmPlace {
        node: "gpu1".into(),
        job_id: "41".into(),
    });
    store.record(&on_gpu1).unwrap();
    let ask = |node: Option<&str>| {
        let current = CurrentRun {
            run_id: "r2",
            workflow: "eagle3",
            job: "bench",
            step: "bench",
            git_ref: Some("main"),
            identity: &id,
            node,
            server_version: None,
        };
        let spec = BaselineSpec::parse("previous", 10).unwrap();
        resolve(&store, &spec, &current, "output_tok_s", "tok/s", false)
            .unwrap()
            .unwrap()
    };
    // Same GPU type, same series: compared, and the other node named.
    let other = ask(Some("gpu3"));
    assert!(other.differences.is_empty());
    assert!(
        other
            .description
            .ends_with("; it ran on node gpu1, this on gpu3)"),
        "{}",
        other.description
    );
    assert!(!ask(Some("gpu1")).description.contains("node"));
    assert!(!ask(None).description.contains("node"));
}

/// A baseline whose server said another version than this run's: `compare-to-baseline` says
/// which, for `previous`, a pinned run and a window (how many of its runs), and nothing when
/// the versions agree or one side does not know its own.
#[test]
fn a_baseline_from_another_server_version_says_so() {
    let tmp = tmp_store();
    let mut store = ResultStore::open(&tmp.path).unwrap();
    let id = identity();
    let with_version = |run: &str, at: i64, version: Option<&str>| {
        let mut r = result(run, at, &id, &NCCL);
        r.fingerprint.info.server_version = version.map(String::from);
        r
    };
    store
        .record(&with_version("old-1", 1_000_000, Some("vllm 0.31.0")))
        .unwrap();
    store
        .record(&with_version("old-2", 2_000_000, Some("vllm 0.31.0")))
        .unwrap();
    store
        .record(&with_version("same", 3_000_000, Some("vllm 0.32.0")))
        .unwrap();
    let now = store
        .record(&with_version("now", 4_000_000, Some("vllm 0.32.0")))
        .unwrap();
    let current = store.result(now).unwrap().unwrap();
    store.set_baseline("v031", "old-2", None).unwrap();
    let judged = |baseline: &str| {
        let inputs = StepInputs {
            metrics: vec!["output_tok_s".into()],
            baseline: baseline.into(),
            ..StepInputs::default()
        };
        let report = compare_result(&store, &current, &inputs).unwrap();
        report.comparisons[0].clone()
    };
    let pinned = judged("v031");
    assert_eq!(
        pinned.baseline,
        "pinned baseline `v031` (run `old-2`, 5 samples; server version differs: baseline vllm 0.31.0, this run vllm 0.32.0)"
    );
    // Same series (the image digest is the same here): judged as usual.
    assert_eq!(pinned.verdict, Verdict::Unchanged);
    let window = judged("window");
    assert_eq!(
        window.baseline,
        "a window of the last 3 comparable runs on `main`, of 10 asked for (server version differs: baseline vllm 0.31.0 in 2 of 3 runs, this run vllm 0.32.0)"
    );
    // The previous run had the same version: nothing said.
    assert_eq!(
        judged("previous").baseline,
        "the previous comparable run `same` (5 samples)"
    );
    // A baseline recorded before versions were: nothing to say either.
    store
        .record(&with_version("unknown", 5_000_000, None))
        .unwrap();
    let later = store
        .record(&with_version("later", 6_000_000, Some("vllm 0.32.0")))
        .unwrap();
    let current = store.result(later).unwrap().unwrap();
    let inputs = StepInputs {
        metrics: vec!["output_tok_s".into()],
        baseline: "previous".into(),
        ..StepInputs::default()
    };
    let report = compare_result(&store, &current, &inputs).unwrap();
    assert_eq!(
        report.comparisons[0].baseline,
        "the previous comparable run `unknown` (5 samples)"
    );
}
