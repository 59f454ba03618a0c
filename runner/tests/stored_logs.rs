//! What a run leaves on disk (docs/running.md, "Stored logs"), measured on real files: each
//! output line stored once, finished logs compressed, a cap per run, and `gpuflow gc` pruning
//! old runs' logs while keeping a run in progress. Host `run:` steps only: no engine needed,
//! but they run `gpuflow run` (nextest's `docker-sweep` group, one at a time).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use gpuflow::run_logs::files::{compressed_path, disk_size, last_lines, stored_len};

use crate::support::{Output, Signal, Workspace, text, wait_until};

const MIB: u64 = 1 << 20;

/// `bytes` of 1024-byte lines (1023 digits and a newline), as a shell command.
fn print_bytes(bytes: u64) -> String {
    format!(r#"{{ yes "$(printf '%01023d' 0)" || true; }} | head -c {bytes}"#)
}

fn number(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}

/// A step printing 128 MiB leaves about 128 MiB while it runs (no copy in `events.jsonl`), and
/// a small fraction of it once the step is over and its log compressed.
#[test]
fn a_step_printing_128_mib_is_stored_once_and_compressed_when_it_ends() {
    const N: u64 = 128 * MIB;
    // The step measures its own run's folder before it ends, after the runner has read the
    // pipe to its end (it blocks the printer, so a second is plenty).
    let yaml = format!(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - name: print\n        run: |\n          {}\n          sleep 2\n          run=.gpuflow/runs/$GPUFLOW_RUN_ID\n          du -sb \"$run\" > during-total.txt\n          du -sb \"$run/events.jsonl\" > during-events.txt\n          ls \"$run/j\" > during-files.txt\n",
        print_bytes(N)
    );
    let dir = Workspace::new().file("w.yml", &yaml);
    let started = Instant::now();
    // stdout discarded: the plain view shows all 128 MiB again.
    let out = dir
        .gpuflow()
        .args(["run", "w.yml", "--plain"])
        .into_std()
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let during_total = number(&dir.path().join("during-total.txt"));
    let during_events = number(&dir.path().join("during-events.txt"));
    let during_files = std::fs::read_to_string(dir.path().join("during-files.txt")).unwrap();
    let run = dir.only_run();
    let after_total = disk_size(&run);
    let after_events = std::fs::metadata(run.join("events.jsonl")).unwrap().len();
    eprintln!(
        "a step printing {} MiB: while it ran the run folder held {:.1} MiB (events.jsonl {} KiB); after, {:.1} KiB (events.jsonl {} KiB); {:.1}s",
        N / MIB,
        during_total as f64 / MIB as f64,
        during_events / 1024,
        after_total as f64 / 1024.0,
        after_events / 1024,
        started.elapsed().as_secs_f64()
    );
    // Once: the log and little else (before, events.jsonl held every line again, as JSON).
    assert!(
        (N..N + N / 20).contains(&during_total),
        "while running: {during_total} bytes for {N} bytes of output"
    );
    assert!(during_events < MIB, "events.jsonl: {during_events} bytes");
    assert!(
        during_files.contains("1-print.log") && !during_files.contains(".zst"),
        "{during_files}"
    );
    // Compressed when the step ended; the plain file is gone, every byte still there.
    let log = run.join("j/1-print.log");
    assert!(!log.exists(), "the plain log is still there");
    assert!(compressed_path(&log).is_file());
    assert!(after_total < N / 50, "after the step: {after_total} bytes");
    assert!(
        after_events < 64 * 1024,
        "events.jsonl: {after_events} bytes"
    );
    assert_eq!(stored_len(&log).unwrap(), N);
    // events.jsonl points at the lines: one record per run of lines, together all of them.
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "log_line")
        .collect();
    assert!(records.iter().all(|r| r.get("text").is_none()));
    assert!(records.iter().all(|r| r["file"] == "j/1-print.log"));
    let lines: u64 = records.iter().map(|r| r["lines"].as_u64().unwrap()).sum();
    assert_eq!(lines, N / 1024);
    assert_eq!(records[0]["line"], 1);
    assert_eq!(records[0]["offset"], 0);
}

/// Past `--log-cap` lines are dropped from the stored logs (not from `--json`), the log ends
/// with one marker saying how much, and the run's last line says so too.
#[test]
fn a_run_past_its_log_cap_says_so_in_its_log_and_at_its_end() {
    const N: u64 = 4 * MIB;
    let yaml = format!(
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - name: print\n        run: |\n          {}\n",
        print_bytes(N)
    );
    let dir = Workspace::new().file("w.yml", &yaml);
    let out = dir
        .gpuflow()
        .args(["run", "w.yml", "--json", "--log-cap", "1MiB"])
        .success();
    let stderr = &out.stderr;
    // The live stream keeps every line.
    let shown = out
        .json_lines()
        .into_iter()
        .filter(|e| e["type"] == "log_line" && e["text"].as_str().is_some_and(|t| t.len() == 1023))
        .count() as u64;
    assert_eq!(shown, N / 1024);

    let run = dir.only_run();
    let log = run.join("j/1-print.log");
    let stored = stored_len(&log).unwrap();
    let marker = last_lines(&log, 1).unwrap().pop().unwrap();
    let kept = stored - marker.len() as u64 - 1;
    let dropped = N - kept;
    let message = format!(
        "truncated: {dropped} bytes dropped (log cap 1 MiB reached; raise it with --log-cap)"
    );
    assert_eq!(marker, format!("… {message}"));
    assert!(kept <= MIB && kept > MIB - 64 * 1024, "kept {kept} bytes");
    assert_eq!(kept % 1024, 0, "whole lines are kept or dropped");
    assert_eq!(
        stderr.lines().last(),
        Some(format!("warning: the run's stored logs were {message}").as_str()),
        "{stderr}"
    );
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert!(
        events.contains(&format!(
            r#""type":"warning","job":null,"message":"the run's stored logs were {message}""#
        )),
        "{events}"
    );

    // The environment variable does the same; a run within its cap says nothing.
    let dir = Workspace::new().file("w.yml", &yaml);
    dir.gpuflow()
        .args(["run", "w.yml", "--plain"])
        .env("GPUFLOW_LOG_CAP", "512KiB")
        .success();
    let log = dir.only_run().join("j/1-print.log");
    let marker = last_lines(&log, 1).unwrap().pop().unwrap();
    assert!(marker.contains("(log cap 512 KiB reached;"), "{marker}");
    dir.gpuflow()
        .args(["run", "w.yml", "--plain", "--log-cap", "5MiB"])
        .stderr_lacks("truncated")
        .success();
}

/// A failed step's report excerpt: its last lines, read from its compressed log.
#[test]
fn the_failure_excerpt_reads_the_failed_steps_compressed_log() {
    let dir = Workspace::new().file(
        "w.yml",
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - name: fail\n        run: |\n          seq 1 5000\n          echo 'CUDA error: out of memory'\n          exit 3\n",
    );
    dir.gpuflow().args(["run", "w.yml", "--plain"]).status(1);
    let run = dir.only_run();
    let log = run.join("j/1-fail.log");
    assert!(!log.exists() && compressed_path(&log).is_file());
    let excerpt = gpuflow::report::failure_excerpt(&run).unwrap();
    assert_eq!(excerpt.step.as_deref(), Some("fail"));
    assert_eq!(excerpt.container, None);
    assert!(
        excerpt
            .lines
            .iter()
            .any(|l| l == "CUDA error: out of memory"),
        "{:?}",
        excerpt.lines
    );
    assert!(
        excerpt.lines.iter().any(|l| l == "5000"),
        "{:?}",
        excerpt.lines
    );
    assert!(excerpt.lines.len() <= 30);
}

/// Sets the modification time of everything in `dir` (and `dir`) to `days` ago.
fn age(dir: &Path, days: u64) {
    let when = SystemTime::now() - Duration::from_secs(days * 86_400);
    let mut paths: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .collect();
    // Children first: touching a file does not change its folder's time, but be safe.
    paths.reverse();
    for p in paths {
        std::fs::File::open(&p).unwrap().set_modified(when).unwrap();
    }
}

fn finished_run(runs: &Path, id: &str, bytes: usize) -> PathBuf {
    let dir = runs.join(id);
    std::fs::create_dir_all(dir.join("j")).unwrap();
    std::fs::write(
        dir.join("events.jsonl"),
        format!(
            "{{\"elapsed\":1.0,\"type\":\"run_finished\",\"run_id\":\"{id}\",\"result\":\"success\"}}\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("j/1-a.log.zst"), vec![b'x'; bytes]).unwrap();
    dir
}

/// `gpuflow gc ARGS` in `dir`: its exit code and all it said.
fn gc(dir: &Workspace, args: &[&str]) -> (i32, String) {
    let out: Output = dir.gpuflow().arg("gc").args(args).output();
    (out.code().unwrap(), out.all())
}

/// `gc --logs-older-than` removes old runs' folders, keeps a fresh one, and keeps a run in
/// progress however old its files look (its store holds the lock on `events.jsonl`).
#[test]
fn gc_logs_older_than_removes_old_runs_and_keeps_fresh_and_running_ones() {
    let dir = Workspace::new().file(
        "w.yml",
        "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: echo started; sleep 60\n",
    );
    let runs = dir.path().join(".gpuflow/runs");
    let old = finished_run(&runs, "20250101-000000-old", 1000);
    age(&old, 30);
    let fresh = finished_run(&runs, "20250102-000000-fresh", 1000);

    let running = dir
        .gpuflow()
        .args([
            "run",
            "w.yml",
            "--plain",
            "--run-id",
            "20250103-000000-running",
        ])
        .spawn();
    let live = runs.join("20250103-000000-running");
    wait_until("the run to start", Duration::from_secs(30), || {
        std::fs::read_dir(live.join("j")).is_ok_and(|mut d| d.next().is_some())
    });
    // Its files look a month old: only the lock keeps it.
    age(&live, 30);

    let (code, out) = gc(&dir, &["--logs-older-than", "7d", "--dry-run"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("would remove the logs of run `20250101-000000-old` (")
            && out.contains("last written 30 days ago"),
        "{out}"
    );
    assert!(old.is_dir(), "a dry run removed it");

    let (code, out) = gc(&dir, &["--logs-older-than", "7d"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("removed the logs of run `20250101-000000-old`"),
        "{out}"
    );
    assert!(
        out.contains("kept the logs of run `20250103-000000-running`: in progress"),
        "{out}"
    );
    assert!(!old.exists(), "{out}");
    assert!(fresh.is_dir(), "{out}");
    assert!(live.join("events.jsonl").is_file(), "{out}");

    // Stopped (SIGTERM: cancelled, its step stopped), the run is old like the other.
    running.signal(Signal::TERM);
    assert!(!running.wait().0.success());
    age(&live, 30);
    let (code, out) = gc(&dir, &["--logs-older-than", "7d"]);
    assert_eq!(code, 0, "{out}");
    assert!(!live.exists(), "{out}");
    assert!(fresh.is_dir(), "{out}");
}

/// `gc --logs-max-total` keeps the newest runs within the size and removes the older ones.
#[test]
fn gc_logs_max_total_keeps_the_newest_runs_within_the_size() {
    let dir = Workspace::empty();
    let runs = dir.path().join(".gpuflow/runs");
    for (i, id) in ["r1", "r2", "r3", "r4"].iter().enumerate() {
        let run = finished_run(&runs, id, 400 * 1024);
        age(&run, 10 - i as u64);
    }
    let (code, out) = gc(&dir, &["--logs-max-total", "1MiB"]);
    assert_eq!(code, 0, "{out}");
    let left: Vec<bool> = ["r1", "r2", "r3", "r4"]
        .iter()
        .map(|id| runs.join(id).exists())
        .collect();
    assert_eq!(left, [false, false, true, true], "{out}");
    assert!(out.contains("removed the logs of 2 run(s)"), "{out}");
}
