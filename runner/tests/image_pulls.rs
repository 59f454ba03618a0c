//! Images pulled as users meet them, from the test kit's real registry (`support::registry`,
//! Debian's `docker-registry` on 127.0.0.1): a gibibyte in several layers with its progress in
//! the `--plain` lines and the `--json` events, and a registry that stops answering caught as a
//! stall that names the image.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Workspace;
use crate::support::images::{BASE, docker_with};
use crate::support::registry::Registry;

const GIB: u64 = 1024 * 1024 * 1024;

/// A workflow whose one job starts a container of `image`: preflight pulls it first.
fn starting(image: &str) -> String {
    format!(
        r#"on: workflow_dispatch
jobs:
  pull:
    steps:
      - uses: start-container
        with:
          name: c
          image: {image}
          command: sleep 1
"#
    )
}

#[tokio::test]
async fn a_gibibyte_pull_shows_its_progress_in_plain_lines_and_json_events() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let registry = Registry::start();
    // Four layers of random data no engine has: the pull downloads all of them.
    registry.push_unique("big:1", &[288, 288, 288, 288]);
    let image = registry.image("big:1");
    let dir = Workspace::repository()
        .file("w.yml", &starting(&image))
        .committed("pull");

    let out = dir.gpuflow().args(["run", "--json", "w.yml"]).output();
    assert_eq!(out.code(), Some(0), "{}", out.all());
    let pulls: Vec<Value> = out
        .json_lines()
        .into_iter()
        .filter(|e| e["type"] == "image_pull")
        .collect();
    let last = pulls
        .last()
        .unwrap_or_else(|| panic!("no image_pull event:\n{}", out.all()));
    assert_eq!(last["finished"], true, "{last}");
    assert_eq!(last["image"], image.as_str());
    assert!(last["layers_total"].as_u64().unwrap() >= 4, "{last}");
    assert_eq!(last["layers_done"], last["layers_total"], "{last}");
    assert!(last["bytes_total"].as_u64().unwrap() >= GIB, "{last}");
    assert!(
        last["text"].as_str().unwrap().contains("(sha256:"),
        "the repository digest is said at the end: {last}"
    );
    // Progress while it ran: bytes grew from one event to the next, at most one a second.
    let during: Vec<u64> = pulls
        .iter()
        .filter(|e| e["finished"] == false)
        .map(|e| e["bytes_done"].as_u64().unwrap())
        .collect();
    assert!(during.len() >= 2, "progress events: {pulls:?}");
    assert!(during.windows(2).all(|w| w[0] <= w[1]), "{during:?}");
    let elapsed = last["elapsed"].as_f64().unwrap();
    assert!(
        (during.len() as f64) <= elapsed + 2.0,
        "{} progress events in {elapsed}s",
        during.len()
    );

    // The same pull again, as a user watching plain lines sees it.
    registry.delete_local(&image);
    let out = dir.gpuflow().args(["run", "--plain", "w.yml"]).output();
    let text = out.all();
    assert_eq!(out.code(), Some(0), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(&format!("pulling `{image}`: ")) && l.contains(" layers")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains(&format!("image `{image}` pulled in ")) && l.contains("GiB")),
        "{text}"
    );
    // Preflight's pull is in no step's time: the run's headline says it.
    assert!(
        text.contains(&format!("  pulled     [pull] `{image}`: ")),
        "{text}"
    );
    registry.delete_local(&image);
}

#[tokio::test]
async fn a_registry_that_stops_answering_fails_the_pull_as_a_stall_naming_the_image() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let registry = Registry::start();
    registry.push_unique("stalled:1", &[8]);
    let image = registry.image("stalled:1");
    let dir = Workspace::repository()
        .file("w.yml", &starting(&image))
        .committed("pull");
    // Stopped, not gone: connections are accepted and never answered, so the engine waits.
    registry.pause();
    let started = Instant::now();
    let out = dir
        .gpuflow()
        .env("GPUFLOW_PULL_STALL", "3s")
        .args(["run", "--plain", "w.yml"])
        .output();
    let took = started.elapsed();
    registry.resume();
    let text = out.all();
    assert_eq!(out.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("pulling `{image}` on "))
            && text.contains("made no progress for 3s"),
        "{text}"
    );
    assert!(
        text.contains("GPUFLOW_PULL_STALL"),
        "the fix is said: {text}"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
}

#[tokio::test]
async fn a_registry_gone_mid_run_is_tried_again_and_a_missing_tag_is_named_at_once() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let mut registry = Registry::start();
    registry.push_unique("back:1", &[8]);
    let image = registry.image("back:1");
    let dir = Workspace::repository()
        .file("w.yml", &starting(&image))
        .committed("pull");
    // Gone when the pull starts: the engine's connection is refused, gpuflow says it tries
    // again, and the registry is back before that try.
    registry.kill();
    let mut run = dir.gpuflow().args(["run", "--plain", "w.yml"]).spawn();
    let mut seen = Vec::new();
    loop {
        let line = run.line();
        assert!(!line.is_empty(), "no retry said:\n{}", seen.join("\n"));
        seen.push(line.clone());
        if line.contains("try 2 (the last failed: ") {
            assert!(line.contains("connection refused"), "{line}");
            break;
        }
    }
    registry.restart();
    let rest = run.rest();
    let (status, stderr) = run.wait();
    assert!(status.success(), "{}\n{rest}\n{stderr}", seen.join("\n"));
    assert!(
        rest.contains(&format!("image `{image}` pulled in ")),
        "{rest}"
    );
    registry.delete_local(&image);

    // Gone for good: three tries, then the engine's reason.
    registry.kill();
    let out = dir.gpuflow().args(["run", "--plain", "w.yml"]).output();
    let text = out.all();
    assert_eq!(out.code(), Some(1), "{text}");
    assert!(
        text.contains("connection refused") && text.contains("(tried 3 times)"),
        "{text}"
    );

    // A tag the registry does not have is its answer at once, not retried.
    registry.restart();
    let missing = registry.image("back:2");
    let dir = Workspace::repository()
        .file("w.yml", &starting(&missing))
        .committed("pull");
    let out = dir.gpuflow().args(["run", "--plain", "w.yml"]).output();
    let text = out.all();
    assert_eq!(out.code(), Some(1), "{text}");
    assert!(text.contains("manifest unknown"), "{text}");
    assert!(!text.contains("tried") && !text.contains("try 2"), "{text}");
}
