//! The registry of the test kit (`support::registry`) proven against the real engine: what a
//! test of pulls (progress, stalls, a registry killed half way, moved tags, credentials, pinned
//! digests) relies on. Debian's `docker-registry` on 127.0.0.1, no daemon configuration.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::images::{BASE, BIG, SIM, docker_with};
use crate::support::registry::Registry;

const MIB: u64 = 1024 * 1024;

#[tokio::test]
async fn an_image_pushed_to_the_plain_registry_pulls_back_through_the_engine() {
    let Some(docker) = docker_with(&[SIM]).await else {
        return;
    };
    let registry = Registry::start();

    let digest = registry.push(SIM, "sim:1");
    let manifest = registry.manifest("sim:1");
    assert_eq!(manifest.digest, digest);
    assert_eq!(
        manifest.media_type,
        "application/vnd.docker.distribution.manifest.v2+json"
    );
    assert_eq!(
        manifest.config.media_type,
        "application/vnd.docker.container.image.v1+json"
    );
    assert_eq!(
        manifest.config.digest,
        docker.image_id(SIM).await.unwrap(),
        "an image's id is its config's digest"
    );
    assert!(
        manifest
            .layers
            .iter()
            .all(|l| l.media_type == "application/vnd.docker.image.rootfs.diff.tar.gzip"),
        "{manifest:#?}"
    );

    // The push left the engine as it was: the image is there only under its own tag.
    let remote = registry.image("sim:1");
    assert!(!docker.has_image(&remote).await.unwrap());
    docker.pull_image(&remote).await.unwrap();
    assert_eq!(
        docker.image_id(&remote).await.unwrap(),
        docker.image_id(SIM).await.unwrap()
    );
    // The engine had the layers: it only asked the registry what the tag points at.
    let asked = "\"HEAD /v2/sim/manifests/1 HTTP/1.1\" 200";
    assert!(
        registry.log().contains(asked),
        "no {asked} in:\n{}",
        registry.log()
    );
}

#[tokio::test]
async fn a_unique_image_is_downloaded_whole_and_its_tag_moves() {
    let Some(docker) = docker_with(&[BASE]).await else {
        return;
    };
    let registry = Registry::start();

    let first = registry.push_unique("fresh:1", &[4, 4]);
    let remote = registry.image("fresh:1");
    assert!(!docker.has_image(&remote).await.unwrap());
    let manifest = registry.manifest("fresh:1");
    assert_eq!(manifest.digest, first.digest);
    // The base's layer, the nonce's and the two of random bytes, which gzip cannot shrink.
    assert_eq!(manifest.layers.len(), 4, "{manifest:#?}");
    assert!(manifest.layers[2..].iter().all(|l| l.size >= 4 * MIB));

    docker.pull_image(&remote).await.unwrap();
    // Every layer the engine lacked came from the registry.
    for layer in &manifest.layers[1..] {
        let get = format!("\"GET /v2/fresh/blobs/{} HTTP/1.1\" 200", layer.digest);
        assert!(
            registry.log().contains(&get),
            "no {get} in:\n{}",
            registry.log()
        );
    }
    let mut run = registry.docker();
    run.args(["run", "--rm", &remote, "cat", "/nonce"]);
    let out = run.output().unwrap();
    assert_eq!(crate::support::text(&out.stdout).trim(), first.nonce);

    let second = registry.push_unique("fresh:1", &[]);
    assert_ne!(second.digest, first.digest);
    assert_eq!(registry.manifest("fresh:1").digest, second.digest);
    assert_eq!(
        registry.manifest(&format!("fresh@{}", first.digest)).digest,
        first.digest,
        "a moved tag leaves the old manifest pullable by its digest"
    );

    registry.delete_manifest("fresh:1");
    let gone = registry.api("GET", "/v2/fresh/manifests/1", &[]);
    assert_eq!(gone.status, 404, "{}", gone.text());
    let refused = registry.try_pull("fresh:1").unwrap_err();
    assert!(refused.contains("manifest unknown"), "{refused}");
}

#[tokio::test]
async fn the_registry_with_auth_refuses_without_credentials_and_serves_with_them() {
    let Some(docker) = docker_with(&[SIM]).await else {
        return;
    };
    let registry = Registry::with_auth("gpuflow", "s3cret pass");

    let anonymous = registry.api_as(None, "GET", "/v2/", &[]);
    assert_eq!(anonymous.status, 401, "{}", anonymous.text());
    assert_eq!(
        anonymous.header("WWW-Authenticate"),
        Some("Basic realm=\"gpuflow-test\"")
    );
    let wrong = registry.api_as(Some(("gpuflow", "s3cret")), "GET", "/v2/", &[]);
    assert_eq!(wrong.status, 401);
    assert_eq!(registry.api("GET", "/v2/", &[]).status, 200);

    // Without a login the engine meets the registry's 401 and says so.
    let refused = registry.try_push(SIM, "sim:1").unwrap_err();
    assert!(refused.contains("no basic auth credentials"), "{refused}");
    let refused = registry.try_login("gpuflow", "s3cret").unwrap_err();
    assert!(refused.contains("401 Unauthorized"), "{refused}");
    assert!(
        !registry.docker_config().join("config.json").exists(),
        "a refused login stores nothing"
    );

    let digest = registry.push(SIM, "sim:1");
    registry.logout();
    let refused = registry.try_pull("sim:1").unwrap_err();
    assert!(refused.contains("no basic auth credentials"), "{refused}");
    assert!(!docker.has_image(&registry.image("sim:1")).await.unwrap());

    registry.login();
    registry.try_pull("sim:1").unwrap();
    assert_eq!(
        docker.image_id(&registry.image("sim:1")).await.unwrap(),
        docker.image_id(SIM).await.unwrap()
    );
    assert_eq!(registry.manifest("sim:1").digest, digest);
}

#[tokio::test]
async fn the_big_image_pushes_as_four_layers_of_random_bytes_over_a_gibibyte() {
    let Some(_docker) = docker_with(&[BIG]).await else {
        return;
    };
    let registry = Registry::start();

    let started = Instant::now();
    let digest = registry.push(BIG, "big:1");
    eprintln!("pushed {BIG} in {:.1?}", started.elapsed());

    let manifest = registry.manifest("big:1");
    assert_eq!(manifest.digest, digest);
    // Compressed, a layer of 288 MiB of random bytes is no smaller than its bytes.
    let random = manifest
        .layers
        .iter()
        .filter(|l| l.size >= 288 * MIB)
        .count();
    assert_eq!(random, 4, "{manifest:#?}");
    assert!(manifest.layers_size() >= 1024 * MIB, "{manifest:#?}");
}

#[tokio::test]
async fn the_registry_stalls_when_paused_restarts_with_its_storage_and_leaves_nothing() {
    let Some(docker) = docker_with(&[SIM]).await else {
        return;
    };
    let mut registry = Registry::start();
    let addr = registry.addr();
    let digest = registry.push(SIM, "sim:1");

    // Paused, it still accepts connections (the kernel does) but answers nothing.
    registry.pause();
    assert!(TcpStream::connect(addr).is_ok());
    assert_eq!(registry.probe(Duration::from_millis(300)), None);
    registry.resume();
    assert_eq!(registry.probe(Duration::from_secs(5)), Some(200));

    registry.kill();
    assert!(
        TcpStream::connect(addr).is_err(),
        "a killed registry refuses"
    );
    registry.restart();
    assert_eq!(registry.addr(), addr);
    assert_eq!(registry.manifest("sim:1").digest, digest);

    registry.try_pull("sim:1").unwrap();
    let pulled = registry.image("sim:1");
    assert!(docker.has_image(&pulled).await.unwrap());
    let folder = registry.docker_config().parent().unwrap().to_path_buf();
    assert!(folder.join("storage").is_dir());

    drop(registry);
    assert!(!docker.has_image(&pulled).await.unwrap());
    assert!(
        docker.has_image(SIM).await.unwrap(),
        "only its own tag went"
    );
    assert!(!folder.exists());
    assert!(TcpStream::connect(addr).is_err());
}
