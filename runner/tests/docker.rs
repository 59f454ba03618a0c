//! The Docker backend against the real engine, with the images `make test-images` builds.
//!
//! Docker is required: with the engine unreachable these tests fail (always under `CI`; locally
//! `GPUFLOW_SKIP_DOCKER=1` skips them, loudly). Each test labels what it creates with its own
//! run id; `with_docker` (the test kit's) removes everything of that run after the test body,
//! also when the body panics, and then asserts that no container of the run survives.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures_util::FutureExt;

use gpuflow::backend::{
    BackendError, ContainerSpec, DockerBackend, ExecSpec, GpuRequest, LABEL_MANAGED, LogLine,
    LogStart, OutputStream,
};

use crate::support::docker::{
    Unreachable, base_spec, dead_owner, raw_docker, when_missing, with_docker,
};
use crate::support::peak_rss_kib;

#[test]
fn an_unreachable_engine_fails_the_tests_unless_skipped_knowingly_outside_ci() {
    assert!(
        matches!(when_missing("Docker", "x", true, true), Unreachable::Fail(m) if m.contains("CI"))
    );
    assert!(matches!(
        when_missing("Docker", "x", true, false),
        Unreachable::Fail(_)
    ));
    assert!(
        matches!(when_missing("Docker", "x", false, false), Unreachable::Fail(m) if m.contains("GPUFLOW_SKIP_DOCKER=1"))
    );
    assert!(
        matches!(when_missing("Docker", "x", false, true), Unreachable::Skip(m) if m.contains("SKIPPED"))
    );
}

fn collect(lines: &mut Vec<LogLine>) -> impl FnMut(LogLine) + Send + '_ {
    move |line| lines.push(line)
}

fn texts(lines: &[LogLine], stream: OutputStream) -> Vec<&str> {
    lines
        .iter()
        .filter(|l| l.stream == stream)
        .map(|l| l.text.as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_version_is_negotiated_down_to_the_engines() {
    with_docker("version", |t| async move {
        let engine = raw_docker().await.version().await.unwrap();
        let engine_api = engine.api_version.unwrap();
        let parse = |v: &str| -> (u32, u32) {
            let (major, minor) = v.split_once('.').unwrap();
            (major.parse().unwrap(), minor.parse().unwrap())
        };
        // bollard's default (1.5x) is newer than Debian's Docker 20.10 speaks (1.41): both
        // sides must settle on the older one.
        let client_default = bollard::API_DEFAULT_VERSION.to_string();
        let expected = parse(&engine_api).min(parse(&client_default));
        assert_eq!(parse(t.backend.api_version()), expected);
    })
    .await;
}

/// The harness itself: a panicking test still has its containers removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_test_still_has_its_containers_removed() {
    let run_id = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = run_id.clone();
    let outcome = AssertUnwindSafe(with_docker("guard", |t| async move {
        t.start(&["sleep", "300"]).await;
        *seen.lock().unwrap() = Some(t.run.run_id.clone());
        panic!("the test body failed");
    }))
    .catch_unwind()
    .await;
    let Some(run_id) = run_id.lock().unwrap().clone() else {
        return; // skipped: no engine, and GPUFLOW_SKIP_DOCKER=1
    };
    assert!(outcome.is_err(), "the body's panic must reach the test");
    let backend = DockerBackend::connect_local().await.unwrap();
    assert!(backend.run_containers(&run_id).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_streams_lines_and_returns_exit_codes() {
    with_docker("exec", |t| async move {
        let c = t.start(&["sleep", "300"]).await;
        let b = &t.backend;

        let mut lines = Vec::new();
        let script = ExecSpec::new(["sh", "-c", "echo out; echo err >&2; printf tail; exit 3"]);
        let code = b.exec(&c.id, &script, collect(&mut lines)).await.unwrap();
        assert_eq!(code, 3);
        assert_eq!(texts(&lines, OutputStream::Stdout), ["out", "tail"]);
        assert_eq!(texts(&lines, OutputStream::Stderr), ["err"]);

        let mut lines = Vec::new();
        let mut spec = ExecSpec::new(["sh", "-c", "echo \"$GREETING\"; pwd"]);
        spec.env.insert("GREETING".into(), "hello there".into());
        spec.workdir = Some("/tmp".into());
        assert_eq!(b.exec(&c.id, &spec, collect(&mut lines)).await.unwrap(), 0);
        assert_eq!(texts(&lines, OutputStream::Stdout), ["hello there", "/tmp"]);

        // A channel sink: lines arrive while the command runs, counted not stored.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<LogLine>(16);
        let counter = tokio::spawn(async move {
            let (mut n, mut last) = (0u64, String::new());
            while let Some(line) = rx.recv().await {
                n += 1;
                last = line.text;
            }
            (n, last)
        });
        let code = b
            .exec(&c.id, &ExecSpec::new(["seq", "1", "20000"]), tx)
            .await
            .unwrap();
        assert_eq!(code, 0);
        assert_eq!(counter.await.unwrap(), (20_000, "20000".to_string()));

        // Like a shell: a command that is not there exits 126/127, with the reason printed.
        let mut lines = Vec::new();
        let code = b
            .exec(
                &c.id,
                &ExecSpec::new(["no-such-command"]),
                collect(&mut lines),
            )
            .await
            .unwrap();
        assert!(
            code == 126 || code == 127,
            "exit code {code}, output {lines:?}"
        );

        // The init process is PID 1, so SIGTERM reaches the command.
        let mut lines = Vec::new();
        let init = ExecSpec::new(["cat", "/proc/1/comm"]);
        b.exec(&c.id, &init, collect(&mut lines)).await.unwrap();
        assert_eq!(texts(&lines, OutputStream::Stdout), ["docker-init"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_in_a_stopped_container_says_it_is_not_running() {
    with_docker("exec-stopped", |t| async move {
        let c = t.start(&["true"]).await;
        assert_eq!(t.backend.wait_exit(&c.id).await.unwrap(), 0);
        let e = t
            .backend
            .exec(&c.id, &ExecSpec::new(["true"]), |_| {})
            .await
            .unwrap_err();
        assert!(matches!(e, BackendError::NotRunning { .. }), "{e:?}");
        assert!(e.hint().unwrap().contains("docker logs"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_returns_the_exit_code_and_inspect_the_state() {
    with_docker("wait", |t| async move {
        let c = t.start(&["sh", "-c", "exit 7"]).await;
        assert_eq!(t.backend.wait_exit(&c.id).await.unwrap(), 7);
        let state = t.backend.inspect_state(&c.id).await.unwrap();
        assert_eq!(state.status, "exited");
        assert!(!state.running);
        assert_eq!(state.exit_code, Some(7));
        assert!(!state.oom_killed);

        let c = t.start(&["sleep", "300"]).await;
        let state = t.backend.inspect_state(&c.id).await.unwrap();
        assert!(state.running);
        assert_eq!(state.exit_code, None);

        // The init forwards SIGTERM: stopping does not wait out the grace period.
        let started = Instant::now();
        t.backend
            .stop_container(&c.id, Duration::from_secs(60))
            .await
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
        assert!(!t.backend.inspect_state(&c.id).await.unwrap().running);

        let e = t
            .backend
            .inspect_state("gpuflow-no-such-container")
            .await
            .unwrap_err();
        assert!(matches!(e, BackendError::NoSuchContainer { .. }), "{e:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_requests_become_device_requests_on_the_created_container() {
    with_docker("gpu-request", |t| async move {
        let ids = vec![
            "0".to_string(),
            "GPU-8d1b9b5e-0c5e-4f8d-9a43-4c0d5b7b2a11".to_string(),
        ];
        let mut spec = base_spec(&["true"]);
        spec.gpus = GpuRequest::Devices(ids.clone());
        spec.env
            .insert("NVIDIA_VISIBLE_DEVICES".into(), ids.join(","));
        // Created, not started: the engine here has no NVIDIA runtime, but the request is
        // recorded on the container as it would be sent to a GPU host.
        let c = t.backend.create_container(&t.run, &spec).await.unwrap();

        let inspected = raw_docker()
            .await
            .inspect_container(&c.id, None)
            .await
            .unwrap();
        let host = inspected.host_config.unwrap();
        let requests = host.device_requests.unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].driver.as_deref(), Some("nvidia"));
        assert_eq!(requests[0].device_ids.as_ref(), Some(&ids));
        assert_eq!(
            requests[0].capabilities,
            Some(vec![vec!["gpu".to_string()]])
        );
        assert_eq!(host.init, Some(true));
        assert_eq!(host.ipc_mode.as_deref(), Some("host"));
        let ulimits = host.ulimits.unwrap();
        let limit = |name: &str| {
            ulimits
                .iter()
                .find(|u| u.name.as_deref() == Some(name))
                .map(|u| (u.soft.unwrap(), u.hard.unwrap()))
        };
        assert_eq!(limit("memlock"), Some((-1, -1)));
        assert_eq!(limit("stack"), Some((67_108_864, 67_108_864)));
        let labels = inspected.config.unwrap().labels.unwrap();
        assert_eq!(labels[LABEL_MANAGED], "true");

        let mut all = base_spec(&["true"]);
        all.gpus = GpuRequest::All;
        let c = t.backend.create_container(&t.run, &all).await.unwrap();
        let host = raw_docker()
            .await
            .inspect_container(&c.id, None)
            .await
            .unwrap()
            .host_config
            .unwrap();
        assert_eq!(host.device_requests.unwrap()[0].count, Some(-1));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_nvidia_visible_devices_is_refused_before_anything_is_created() {
    with_docker("gpu-conflict", |t| async move {
        let mut spec = base_spec(&["true"]);
        spec.gpus = GpuRequest::Devices(vec!["1".into()]);
        spec.env
            .insert("NVIDIA_VISIBLE_DEVICES".into(), "all".into());
        let e = t.backend.start_container(&t.run, &spec).await.unwrap_err();
        assert!(
            matches!(e, BackendError::VisibleDevicesConflict { .. }),
            "{e:?}"
        );
        assert!(
            t.backend
                .run_containers(&t.run.run_id)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_without_the_nvidia_runtime_gives_a_clear_error_and_leaves_nothing() {
    with_docker("no-nvidia", |t| async move {
        let mut spec = base_spec(&["sleep", "300"]);
        spec.gpus = GpuRequest::All;
        match t.backend.start_container(&t.run, &spec).await {
            Err(e @ BackendError::NvidiaRuntimeMissing { .. }) => {
                let text = e.to_string();
                assert!(text.contains("cannot give containers GPUs"), "{text}");
                assert!(text.contains("could not select device driver"), "{text}");
                assert!(text.contains(&t.backend.endpoint().to_string()), "{text}");
                assert!(e.hint().unwrap().contains("NVIDIA Container Toolkit"));
                // Docker created the container before refusing to start it: it must be gone.
                let left = t.backend.run_containers(&t.run.run_id).await.unwrap();
                assert_eq!(left, Vec::<String>::new());
            }
            Err(e) => panic!("expected the NVIDIA runtime error, got {e:?}"),
            Ok(c) => {
                // An engine with the NVIDIA Container Toolkit: the GPU container runs.
                eprintln!("this engine has the NVIDIA runtime; the missing-runtime error was not exercised");
                assert!(t.backend.inspect_state(&c.id).await.unwrap().running);
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_image_is_pulled_and_the_failure_points_at_make_test_images() {
    with_docker("missing-image", |t| async move {
        let mut spec = ContainerSpec::new("gpuflow-no-such-image:test");
        spec.command = Some(vec!["true".into()]);
        let e = t.backend.start_container(&t.run, &spec).await.unwrap_err();
        assert!(matches!(e, BackendError::ImagePullFailed { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.starts_with("image `gpuflow-no-such-image:test` is not on the engine at `"),
            "{text}"
        );
        assert!(text.contains("pulling it failed: "), "{text}");
        assert!(e.hint().unwrap().contains("make test-images"));
        assert!(
            t.backend
                .run_containers(&t.run.run_id)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_network_is_not_mistaken_for_a_missing_image() {
    with_docker("no-network", |t| async move {
        let mut spec = base_spec(&["true"]);
        spec.network = Some("gpuflow-no-such-network".into());
        let e = t.backend.start_container(&t.run, &spec).await.unwrap_err();
        assert!(!matches!(e, BackendError::ImagePullFailed { .. }), "{e:?}");
        assert!(e.to_string().contains("gpuflow-no-such-network"), "{e}");
        assert!(
            t.backend
                .run_containers(&t.run.run_id)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_that_cannot_start_is_removed() {
    with_docker("start-fails", |t| async move {
        // Without an init the runtime itself execs the program, and fails at start (with one,
        // the init starts and then exits 127).
        let mut spec = base_spec(&["/no/such/program"]);
        spec.init = false;
        let e = t.backend.start_container(&t.run, &spec).await.unwrap_err();
        assert!(matches!(e, BackendError::StartFailed { .. }), "{e:?}");
        assert!(e.to_string().contains("/no/such/program"), "{e}");
        assert!(
            t.backend
                .run_containers(&t.run.run_id)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_name_is_a_clear_error() {
    with_docker("name-in-use", |t| async move {
        let mut spec = base_spec(&["sleep", "300"]);
        spec.name = Some(format!("gpuflow-test-name-{}", std::process::id()));
        t.backend.start_container(&t.run, &spec).await.unwrap();
        let e = t.backend.start_container(&t.run, &spec).await.unwrap_err();
        assert!(matches!(e, BackendError::NameInUse { .. }), "{e:?}");
        assert!(
            e.hint()
                .unwrap()
                .contains("docker rm -f gpuflow-test-name-")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_run_removes_its_containers_and_networks() {
    with_docker("remove-run", |t| async move {
        let network = format!("gpuflow-test-net-{}", std::process::id());
        t.backend.create_network(&t.run, &network).await.unwrap();
        let mut spec = base_spec(&["sleep", "300"]);
        spec.network = Some(network.clone());
        t.backend.start_container(&t.run, &spec).await.unwrap();
        t.backend
            .create_container(&t.run, &base_spec(&["true"]))
            .await
            .unwrap();

        let removed = t.backend.remove_run(&t.run.run_id).await.unwrap();
        assert_eq!((removed.containers, removed.networks), (2, 1));
        assert!(
            t.backend
                .run_containers(&t.run.run_id)
                .await
                .unwrap()
                .is_empty()
        );
        let gone = raw_docker().await.inspect_network(&network, None).await;
        assert!(gone.is_err(), "network `{network}` survived");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_removes_what_dead_runners_left_and_keeps_live_ones() {
    with_docker("sweep", |t| async move {
        let dead = dead_owner();
        let orphaned_by = t.backend.clone().with_owner(dead);
        let orphan = orphaned_by
            .start_container(&t.run, &base_spec(&["sleep", "300"]))
            .await
            .unwrap();
        let never_started = orphaned_by
            .create_container(&t.run, &base_spec(&["true"]))
            .await
            .unwrap();
        let network = format!("gpuflow-test-orphan-{}", std::process::id());
        orphaned_by.create_network(&t.run, &network).await.unwrap();
        let alive = t.start(&["sleep", "300"]).await;

        let removed = t.backend.sweep_orphans().await.unwrap();
        assert!(
            removed.containers >= 2 && removed.networks >= 1,
            "{removed:?}"
        );
        let left = t.backend.run_containers(&t.run.run_id).await.unwrap();
        assert_eq!(left, vec![alive.id.clone()]);
        assert!(!left.contains(&orphan.id) && !left.contains(&never_started.id));
        assert!(
            raw_docker()
                .await
                .inspect_network(&network, None)
                .await
                .is_err()
        );
    })
    .await;
}

/// Peak resident memory of this process (`VmHWM`), in KiB.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chatty_containers_whole_output_is_read_with_bounded_memory() {
    with_docker("attach", |t| async move {
        const LINES: u64 = 200_000;
        // ~100-byte lines: 20 MB in all, more than the engine's log rotation keeps here and
        // more than the memory bound checked below.
        let script = format!(
            "seq 1 {LINES} | sed 's/$/ {}/'; echo done >&2",
            "x".repeat(90)
        );
        let spec = base_spec(&["sh", "-c", &script]);
        let before = peak_rss_kib();
        let (c, output) = t
            .backend
            .start_container_attached(&t.run, &spec)
            .await
            .unwrap();
        let (mut stdout, mut stderr, mut last) = (0u64, Vec::new(), String::new());
        output
            .forward(|line: LogLine| match line.stream {
                OutputStream::Stdout => {
                    stdout += 1;
                    last = line.text;
                }
                OutputStream::Stderr => stderr.push(line.text),
            })
            .await
            .unwrap();
        let grown_kib = peak_rss_kib().saturating_sub(before);
        eprintln!("peak memory grew by {grown_kib} KiB");
        assert_eq!(stdout, LINES);
        assert!(last.starts_with(&format!("{LINES} xxx")), "{last}");
        assert_eq!(stderr, ["done"]);
        assert!(
            grown_kib < 8 * 1024,
            "peak memory grew by {grown_kib} KiB while reading 20 MB of output"
        );
        assert_eq!(t.backend.wait_exit(&c.id).await.unwrap(), 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn following_the_log_reads_every_line_until_the_container_stops() {
    with_docker("logs", |t| async move {
        // Small enough that the engine's log rotation (10 MB here) keeps it all.
        const LINES: u64 = 20_000;
        let script = format!("seq 1 {LINES}; echo done >&2; sleep 1; echo after-sleep");
        let c = t.start(&["sh", "-c", &script]).await;
        let (mut stdout, mut stderr, mut last) = (0u64, Vec::new(), String::new());
        t.backend
            .follow_logs(&c.id, LogStart::Beginning, |line: LogLine| {
                match line.stream {
                    OutputStream::Stdout => {
                        stdout += 1;
                        last = line.text;
                    }
                    OutputStream::Stderr => stderr.push(line.text),
                }
            })
            .await
            .unwrap();
        // It followed past the sleep, to the container's end.
        assert_eq!(stdout, LINES + 1);
        assert_eq!(last, "after-sleep");
        assert_eq!(stderr, ["done"]);

        let mut tail = Vec::new();
        t.backend
            .follow_logs(&c.id, LogStart::Tail(2), collect(&mut tail))
            .await
            .unwrap();
        // Only the end: the engine counts the tail in log entries of either stream.
        assert!(tail.len() <= 3, "{tail:?}");
        assert_eq!(
            texts(&tail, OutputStream::Stdout).last(),
            Some(&"after-sleep")
        );

        let e = t
            .backend
            .follow_logs("gpuflow-no-such-container", LogStart::Beginning, |_| {})
            .await
            .unwrap_err();
        assert!(matches!(e, BackendError::NoSuchContainer { .. }), "{e:?}");
    })
    .await;
}
