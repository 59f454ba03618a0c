//! A run with a pinned image (`gpuflow.lock`'s `[[image]]`, `gpuflow images lock`), against the
//! test kit's real registry: the container runs the pinned digest after the tag moved, and a
//! pinned digest the registry no longer has is refused before anything starts, naming both
//! digests.
//!
//! Ignored until the run side is wired: preflight's pulls and `start-container` are to pull and
//! run `LockFile::image_to_run(image).reference()` (`repo@sha256:…`) and, when that pull fails,
//! say `ImagePin::unavailable(now, why)` with what `DockerBackend::registry_digest` gives now.

use crate::support::Workspace;
use crate::support::images::{BASE, docker_with};
use crate::support::registry::Registry;

/// A workflow that starts `image` and prints the nonce `push_unique` baked into it.
fn printing_the_nonce(image: &str) -> String {
    format!(
        r#"on: workflow_dispatch
jobs:
  pinned:
    steps:
      - uses: start-container
        with:
          name: c
          image: {image}
          command: sleep 30
      - container: c
        run: echo "nonce=$(cat /nonce)"
"#
    )
}

#[tokio::test]
async fn a_run_starts_the_pinned_digest_after_the_tag_moved() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let registry = Registry::start();
    let pinned = registry.push_unique("pinned:1", &[1]);
    let image = registry.image("pinned:1");
    let dir = Workspace::repository()
        .file("workflows/w.yml", &printing_the_nonce(&image))
        .committed("workflow");
    dir.gpuflow().args(["images", "lock"]).success();
    let moved = registry.push_unique("pinned:1", &[1]);
    assert_ne!(pinned.digest, moved.digest);

    let out = dir
        .gpuflow()
        .args(["run", "--plain", "workflows/w.yml"])
        .output();
    assert_eq!(out.code(), Some(0), "{}", out.all());
    assert!(
        out.stdout.contains(&format!("nonce={}", pinned.nonce)),
        "{}",
        out.all()
    );
    assert!(!out.stdout.contains(&moved.nonce), "{}", out.all());
}

#[tokio::test]
async fn a_pinned_digest_the_registry_lost_is_refused_before_anything_starts() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let registry = Registry::start();
    let pinned = registry.push_unique("pinned:1", &[1]);
    let image = registry.image("pinned:1");
    let dir = Workspace::repository()
        .file("workflows/w.yml", &printing_the_nonce(&image))
        .committed("workflow");
    dir.gpuflow().args(["images", "lock"]).success();
    let moved = registry.push_unique("pinned:1", &[1]);
    registry.delete_manifest(&format!("pinned@{}", pinned.digest));

    let out = dir
        .gpuflow()
        .args(["run", "--plain", "workflows/w.yml"])
        .output();
    assert_ne!(out.code(), Some(0), "{}", out.all());
    let all = out.all();
    for expected in [
        format!("`gpuflow.lock` pins `{image}` to {}", pinned.digest),
        format!("`{image}` names {} there now", moved.digest),
    ] {
        assert!(all.contains(&expected), "missing {expected:?} in:\n{all}");
    }
    assert!(!all.contains("container c started"), "{all}");
}
