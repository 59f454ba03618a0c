//! A run's images, against the test kit's real registry: each tag resolved once per run, so a
//! tag moved while the run goes on changes nothing for it; every image's pull started by
//! preflight at once, bounded, with the job runs' checks going on beside the pulls.

use serde_json::Value;

use crate::support::Workspace;
use crate::support::images::{BASE, docker_with};
use crate::support::registry::Registry;

#[tokio::test]
async fn a_tag_moved_mid_run_changes_nothing_for_the_run() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let registry = Registry::start();
    let first = registry.push_unique("moving:1", &[1]);
    let image = registry.image("moving:1");
    let go = tempfile::tempdir().unwrap();
    let go_file = go.path().join("go");
    let workflow = format!(
        r#"on: workflow_dispatch
jobs:
  one:
    steps:
      - uses: start-container
        with:
          name: c
          image: {image}
          pull: always
          command: sleep 300
      - name: show one
        container: c
        run: echo "one saw $(cat /nonce)"
      - run: while [ ! -f '{go}' ]; do sleep 0.2; done
  two:
    needs: one
    steps:
      - uses: start-container
        with:
          name: c
          image: {image}
          command: sleep 300
      - name: show two
        container: c
        run: echo "two saw $(cat /nonce)"
"#,
        go = go_file.display()
    );
    let dir = Workspace::repository()
        .file("w.yml", &workflow)
        .committed("moving");
    let mut run = dir.gpuflow().args(["run", "--plain", "w.yml"]).spawn();
    let mut seen = Vec::new();
    loop {
        let line = run.line();
        assert!(
            !line.is_empty(),
            "job one said nothing:\n{}",
            seen.join("\n")
        );
        seen.push(line.clone());
        if line.contains("one saw ") {
            assert!(line.contains(&first.nonce), "{line}");
            break;
        }
    }
    // Mid-run, the tag moves in the registry and on the engine (a colleague's pull).
    let second = registry.push_unique("moving:1", &[1]);
    registry.try_pull("moving:1").unwrap();
    std::fs::write(&go_file, "").unwrap();
    let rest = run.rest();
    let (status, stderr) = run.wait();
    assert!(status.success(), "{}\n{rest}\n{stderr}", seen.join("\n"));
    let two = rest
        .lines()
        .find(|l| l.contains("two saw "))
        .unwrap_or_else(|| panic!("job two said nothing:\n{rest}"));
    assert!(
        two.contains(&first.nonce) && !two.contains(&second.nonce),
        "job two ran the image the run started with: {two}"
    );
    assert_eq!(
        rest.matches(&format!("pulling `{image}`")).count(),
        0,
        "nothing pulled after preflight: {rest}"
    );
}

/// A workflow of one job per image, each starting a container of it.
fn one_job_per_image(images: &[String]) -> String {
    let mut workflow = "on: workflow_dispatch\njobs:\n".to_string();
    for (i, image) in images.iter().enumerate() {
        workflow.push_str(&format!(
            "  j{i}:\n    steps:\n      - uses: start-container\n        with:\n          name: c\n          image: {image}\n          command: sleep 1\n"
        ));
    }
    workflow
}

/// Each image's pull as (image, its first event, its last) by the events' order in the
/// `--json` lines: two pulls overlap when one's events come between the other's.
fn pull_spans(events: &[Value]) -> Vec<(String, usize, usize)> {
    let mut spans: Vec<(String, usize, usize)> = Vec::new();
    for (at, e) in events.iter().enumerate() {
        if e["type"] != "image_pull" {
            continue;
        }
        let image = e["image"].as_str().unwrap().to_owned();
        match spans.iter_mut().find(|(i, ..)| *i == image) {
            Some(span) => span.2 = at,
            None => spans.push((image, at, at)),
        }
    }
    spans
}

#[tokio::test]
async fn preflight_starts_every_pull_at_once_within_its_bound() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let registry = Registry::start();
    let overlapping = |spans: &[(String, usize, usize)]| {
        spans
            .iter()
            .any(|a| spans.iter().any(|b| a.0 != b.0 && a.1 < b.2 && b.1 < a.2))
    };
    for (bound, overlap) in [("3", true), ("1", false)] {
        let images: Vec<String> = (0..2)
            .map(|i| {
                let repo_tag = format!("at-once-{bound}-{i}:1");
                registry.push_unique(&repo_tag, &[96, 96]);
                registry.image(&repo_tag)
            })
            .collect();
        let dir = Workspace::repository()
            .file("w.yml", &one_job_per_image(&images))
            .committed("pulls");
        let out = dir
            .gpuflow()
            .env("GPUFLOW_PULLS_AT_ONCE", bound)
            .args(["run", "--json", "w.yml"])
            .output();
        assert_eq!(out.code(), Some(0), "{}", out.all());
        let spans = pull_spans(&out.json_lines());
        assert_eq!(spans.len(), 2, "{spans:?}");
        assert_eq!(overlapping(&spans), overlap, "{bound} at once: {spans:?}");
        for image in &images {
            registry.delete_local(image);
        }
    }
}

#[tokio::test]
async fn a_pull_the_disk_has_no_room_for_is_refused_before_it_begins() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let registry = Registry::start();
    registry.push_unique("roomy:1", &[288, 288]);
    let image = registry.image("roomy:1");
    let dir = Workspace::repository()
        .file("w.yml", &one_job_per_image(std::slice::from_ref(&image)))
        .committed("room");
    // The disk made nearly full for gpuflow: the reserve leaves 256 MiB of what is free, and
    // the pull downloads 576 MiB.
    let root = registry.docker_root();
    let stat = rustix::fs::statvfs(root.as_str()).unwrap();
    let free = stat.f_bavail * stat.f_frsize;
    let reserve = free - (256 << 20);
    let out = dir
        .gpuflow()
        .env("GPUFLOW_PULL_DISK_RESERVE", reserve.to_string())
        .args(["run", "--plain", "w.yml"])
        .output();
    let text = out.all();
    assert_eq!(out.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("pulling `{image}` downloads 57"))
            && text.contains("layers the engine lacks")
            && text.contains(&format!("its data root `{root}` has "))
            && text.contains("GPUFLOW_PULL_DISK_RESERVE keeps"),
        "the refusal says the numbers: {text}"
    );
    assert!(text.contains("docker system df"), "and the fix: {text}");
    let log = registry.log();
    for layer in registry.manifest("roomy:1").layers {
        let fetched = log
            .lines()
            .any(|l| l.contains("\"GET /v2/roomy/blobs/") && l.contains(&layer.digest));
        assert!(!fetched, "no layer was downloaded: {layer:?}\n{log}");
    }
    // With the disk as it is, the same pull fits and runs.
    let out = dir.gpuflow().args(["run", "--plain", "w.yml"]).output();
    assert_eq!(out.code(), Some(0), "{}", out.all());
    registry.delete_local(&image);
}
