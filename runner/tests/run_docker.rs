//! `gpuflow run` as a user runs it, against the real Docker engine: jobs going to the host
//! their `runs-on` selects, a runner killed with SIGKILL and the sweep of the next run, and
//! the runner's memory while a step prints a gigabyte. Outcomes are asserted through the
//! engine's API and the run's events, never through timings.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::docker::connect_or_skip;
use crate::support::{Workspace, peak_rss_kib_of, wait_until};

const TWO_HOSTS: &str = r#"
on: workflow_dispatch
jobs:
  first:
    runs-on: alpha-label
    steps:
      - uses: start-container
        with: { name: box, image: gpuflow-base:test, command: sleep 300 }
      - run: echo hi
        container: box
  second:
    runs-on: [beta-label]
    steps:
      - uses: start-container
        with: { name: box, image: gpuflow-base:test, command: sleep 300 }
  on-host:
    runs-on: beta-label
    steps:
      - run: echo no engine needed
"#;

/// Two configured hosts, both the local engine under different names and labels: each job's
/// container is started on the host its `runs-on` chose (as the events say), and `--host`
/// overrides the choice for every job.
#[tokio::test]
async fn each_job_runs_on_the_host_its_runs_on_selects() {
    let Some(docker) = connect_or_skip().await else {
        return;
    };
    let endpoint = docker.endpoint().to_string();
    let dir = Workspace::new().file("w.yml", TWO_HOSTS).file(
        "gpuflow.toml",
        &format!(
            "[hosts.alpha]\nendpoint = \"{endpoint}\"\nlabels = [\"alpha-label\"]\n\n\
             [hosts.beta]\nendpoint = \"{endpoint}\"\nlabels = [\"beta-label\"]\n"
        ),
    );

    let out = dir
        .gpuflow()
        .args(["run", "--json", "w.yml"])
        .stderr_lacks("runs-on")
        .success();
    let events = out.json_lines();
    let started: Vec<(String, String, String)> = events
        .iter()
        .filter(|e| e["type"] == "container_started")
        .map(|e| {
            (
                e["job"]["job"].as_str().unwrap().to_string(),
                e["host"].as_str().unwrap().to_string(),
                e["endpoint"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut started = started;
    started.sort();
    assert_eq!(
        started,
        vec![
            ("first".into(), "alpha".into(), endpoint.clone()),
            ("second".into(), "beta".into(), endpoint.clone()),
        ]
    );
    let run_id = events[0]["run_id"].as_str().unwrap().to_string();
    assert_eq!(docker.run_containers(&run_id).await.unwrap().len(), 0);

    // `--host` wins over every job's `runs-on`.
    let out = dir
        .gpuflow()
        .args(["run", "--json", "--host", "beta", "w.yml"])
        .success();
    let hosts: Vec<String> = out
        .json_lines()
        .iter()
        .filter(|e| e["type"] == "container_started")
        .map(|e| e["host"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hosts, ["beta", "beta"]);
}

/// A label no host has: refused before anything starts, pointing at `runs-on`, exit 3; an
/// unknown `--host` is a bad argument, exit 2. Needs no engine.
#[test]
fn an_unknown_runs_on_or_host_is_refused_before_anything_starts() {
    let dir = Workspace::new()
        .file(
            "w.yml",
            "on: workflow_dispatch\njobs:\n  j:\n    runs-on: gamma\n    steps:\n      - run: touch ran\n",
        )
        .file(
            "hosts.toml",
            "[hosts.alpha]\nendpoint = \"unix:///var/run/docker.sock\"\nlabels = [\"alpha-label\"]\n",
        );
    let out = dir
        .gpuflow()
        .args(["run", "--config", "hosts.toml", "w.yml"])
        .status(3);
    let stderr = &out.stderr;
    assert!(
        stderr.contains("no host matches `runs-on: gamma`"),
        "{stderr}"
    );
    assert!(stderr.contains("w.yml:4:14"), "{stderr}");
    assert!(stderr.contains("`alpha` (alpha-label)"), "{stderr}");
    assert!(!dir.path().join("ran").exists());
    assert!(!dir.path().join(".gpuflow").exists(), "no run was started");

    let out = dir
        .gpuflow()
        .args(["run", "--config", "hosts.toml", "--host", "alpah", "w.yml"])
        .status(2);
    let stderr = &out.stderr;
    assert!(stderr.contains("no host named `alpah`"), "{stderr}");
    assert!(stderr.contains("did you mean `alpha`?"), "{stderr}");
}

/// `runs-on` with `matrix` values is chosen per cell: the cell asking for a label no host has
/// is refused (exit 3), naming that value.
#[test]
fn runs_on_is_chosen_per_matrix_cell() {
    let dir = Workspace::new()
        .file(
            "w.yml",
            "on: workflow_dispatch\njobs:\n  j:\n    strategy:\n      matrix:\n        node: [alpha-label, gamma]\n    runs-on: ${{ matrix.node }}\n    steps:\n      - run: touch ran\n",
        )
        .file(
            "gpuflow.toml",
            "[hosts.alpha]\nendpoint = \"unix:///var/run/docker.sock\"\nlabels = [\"alpha-label\"]\n",
        );
    let out = dir.gpuflow().args(["run", "w.yml"]).status(3);
    let stderr = &out.stderr;
    assert!(
        stderr.contains("no host matches `runs-on: gamma`"),
        "{stderr}"
    );
    assert!(!stderr.contains("alpha-label`"), "{stderr}");
    assert!(!dir.path().join("ran").exists());
}

/// A runner killed with SIGKILL cannot clean up: its container stays. The next run that
/// connects to the engine sweeps it (its owner process is gone), asked through the API.
#[tokio::test]
async fn the_next_run_sweeps_the_containers_of_a_runner_killed_with_sigkill() {
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
      - uses: start-container
        with: { name: box, image: gpuflow-base:test, command: sleep 300 }
      - run: touch ready; sleep 30
"#,
    );
    let mut child = dir.gpuflow().args(["run", "--json", "w.yml"]).spawn();
    let killed_run = child.json_line()["run_id"].as_str().unwrap().to_string();
    wait_until("the step to start", Duration::from_secs(60), || {
        dir.path().join("ready").exists()
    });
    child.kill();
    let left = docker.run_containers(&killed_run).await.unwrap();
    assert_eq!(
        left.len(),
        1,
        "the killed runner's container is still there"
    );

    dir.write(
        "next.yml",
        "on: workflow_dispatch\njobs:\n  k:\n    steps:\n      - uses: start-container\n        with: { name: b, image: gpuflow-base:test, command: 'true' }\n",
    );
    let out = dir.gpuflow().args(["run", "next.yml"]).output();
    let survivors = docker.run_containers(&killed_run).await.unwrap();
    docker.remove_run(&killed_run).await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        survivors,
        Vec::<String>::new(),
        "the next run did not sweep the killed run's container"
    );
}

/// The peak resident memory (`VmHWM`) of `gpuflow run` while a step prints 1 GiB, read from
/// `/proc` until the process exits (VmHWM only grows, so the last reading is the peak up to
/// a few milliseconds before the end).
fn peak_memory_of_run(dir: &Path) -> (u64, std::process::ExitStatus) {
    let mut child = crate::support::gpuflow()
        .current_dir(dir)
        .args(["run", "--plain", "w.yml"])
        .into_std()
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let mut peak_kib = 0;
    loop {
        if let Some(kib) = peak_rss_kib_of(&pid) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            return (peak_kib * 1024, status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// 1 GiB in lines of 1 KiB (1023 digits and a newline).
/// `yes` ends by SIGPIPE when `head` has had enough, which `pipefail` would count as failure.
const GIB_OF_LINES: &str = r#"{ yes "$(printf '%01023d' 0)" || true; } | head -c 1073741824"#;

const MEMORY_LIMIT: u64 = 100 * 1024 * 1024;

fn assert_memory_bounded(yaml: &str) {
    let dir = Workspace::new().file("w.yml", yaml);
    let (peak, status) = peak_memory_of_run(dir.path());
    assert!(
        status.success(),
        "the run failed: {status}: {}",
        std::fs::read_to_string(dir.path().join("stderr.txt")).unwrap_or_default()
    );
    // All of it went through the runner, into the step's log (compressed once the step ended).
    let logs = walkdir::WalkDir::new(dir.path().join(".gpuflow"))
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file() && e.path().to_string_lossy().ends_with(".log.zst"))
        .map(|e| gpuflow::run_logs::files::stored_len(&e.path().with_extension("")).unwrap())
        .max()
        .unwrap_or(0);
    assert!(
        logs >= 1 << 30,
        "the step's log holds {logs} bytes, not 1 GiB"
    );
    eprintln!(
        "peak memory of `gpuflow run` while a step printed 1 GiB: {} MiB",
        peak >> 20
    );
    assert!(
        peak > 0 && peak < MEMORY_LIMIT,
        "peak memory {} MiB (limit {} MiB)",
        peak >> 20,
        MEMORY_LIMIT >> 20
    );
}

#[test]
fn a_host_step_printing_a_gibibyte_leaves_the_runner_under_100_mb() {
    assert_memory_bounded(&format!(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: |\n          {GIB_OF_LINES}\n"
    ));
}

#[tokio::test]
async fn a_container_step_printing_a_gibibyte_leaves_the_runner_under_100_mb() {
    if connect_or_skip().await.is_none() {
        return;
    }
    let yaml = format!(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - uses: start-container\n        with: {{ name: box, image: gpuflow-base:test, command: sleep 600 }}\n      - container: box\n        run: |\n          {GIB_OF_LINES}\n"
    );
    tokio::task::spawn_blocking(move || assert_memory_bounded(&yaml))
        .await
        .unwrap();
}
