//! Room on the engine's disk for a pull, asked before the pull begins: the image's manifest
//! (from its registry) says how many bytes its layers are, the engine says which of them it
//! has already, and the disk of its data root says how much is free. A pull whose download
//! alone does not fit is refused with those numbers, instead of failing after writing 20 GB.
//!
//! Only what is sure is refused: unpacked layers take at least their compressed size, so a
//! download larger than the free space cannot succeed, while one that fits may still fail
//! unpacking (so it is not refused). `GPUFLOW_PULL_DISK_RESERVE` (`20g`) keeps that much of the
//! disk for everything else on the node. Where the numbers cannot be had (an engine on another
//! machine, a registry gpuflow cannot reach or that asks for a login (the manifest is read
//! anonymously), a manifest it cannot read) nothing is refused.

use std::collections::HashSet;

use bollard::query_parameters::ListImagesOptionsBuilder;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::{DockerBackend, Endpoint};
use crate::backend::pull_progress::bytes_text;

/// How long the registry and the engine are given to tell the numbers: a registry that does
/// not answer is left to the pull's own stall watch, not waited for here.
const ASK_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

/// What the engine's disk says of a pull.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Room {
    /// The download fits, leaving the reserve.
    Fits,
    /// The download does not fit: the refusal, with the numbers and the fix.
    Short(String),
    /// The numbers could not be had: why (said in the debug log; nothing is refused).
    Unknown(String),
}

/// The registry's account of an image: its layers' compressed sizes and the digests of their
/// unpacked contents (`rootfs.diff_ids` of its config), in one order.
struct Layers {
    sizes: Vec<u64>,
    diff_ids: Vec<String>,
}

impl DockerBackend {
    /// Whether the engine's data root has room for pulling `image` (see the module's text).
    pub async fn room_for_pull(&self, image: &str) -> Room {
        let asked = tokio::time::timeout(ASK_LIMIT, self.room_numbers(image)).await;
        let numbers = asked.unwrap_or_else(|_| {
            Err(format!(
                "no answer in {}s (the pull itself is watched for stalls)",
                ASK_LIMIT.as_secs()
            ))
        });
        match numbers {
            Ok((download, missing, free, root)) => {
                judge(image, (download, missing), (free, &root), disk_reserve())
            }
            Err(why) => {
                tracing::debug!(image, why, "the room for a pull is not known");
                Room::Unknown(why)
            }
        }
    }

    /// (bytes to download, layers the engine lacks, free bytes, the data root).
    async fn room_numbers(&self, image: &str) -> Result<(u64, usize, u64, String), String> {
        if !matches!(self.endpoint(), Endpoint::Unix(_)) {
            return Err("the engine is on another machine: its disk is not read from here".into());
        }
        let info = self
            .api("info", "")
            .info()
            .await
            .map_err(|e| e.to_string())?;
        let root = info
            .docker_root_dir
            .ok_or("the engine does not say its data root")?;
        let free = free_bytes(&root)?;
        let layers = registry_layers(image).await?;
        let present = self.present_layers().await?;
        let mut download = 0;
        let mut missing = 0;
        for (size, diff_id) in layers.sizes.iter().zip(&layers.diff_ids) {
            if !present.contains(diff_id) {
                download += size;
                missing += 1;
            }
        }
        Ok((download, missing, free, root))
    }

    /// The unpacked layers (`sha256:…` diff ids) of every image the engine has.
    async fn present_layers(&self) -> Result<HashSet<String>, String> {
        let options = ListImagesOptionsBuilder::new().all(false).build();
        let images = self
            .api("list_images", "")
            .list_images(Some(options))
            .await
            .map_err(|e| e.to_string())?;
        let mut layers = HashSet::new();
        for summary in images {
            let Ok(inspected) = self
                .api("inspect_image", &summary.id)
                .inspect_image(&summary.id)
                .await
            else {
                continue;
            };
            layers.extend(inspected.root_fs.and_then(|r| r.layers).unwrap_or_default());
        }
        Ok(layers)
    }
}

/// The verdict on the numbers.
fn judge(
    image: &str,
    (download, missing): (u64, usize),
    (free, root): (u64, &str),
    reserve: u64,
) -> Room {
    if download.saturating_add(reserve) <= free {
        return Room::Fits;
    }
    let kept = if reserve > 0 {
        format!(
            ", of which GPUFLOW_PULL_DISK_RESERVE keeps {}",
            bytes_text(reserve)
        )
    } else {
        String::new()
    };
    Room::Short(format!(
        "pulling `{image}` downloads {} in {missing} layer{} the engine lacks, and its data root \
         `{root}` has {} free{kept} (unpacked, the layers take more still); nothing was pulled. \
         Free space on that disk first (`docker system df` shows what holds it, `docker image \
         prune` removes unused images), or run on a node with room",
        bytes_text(download),
        if missing == 1 { "" } else { "s" },
        bytes_text(free),
    ))
}

/// Bytes of `GPUFLOW_PULL_DISK_RESERVE` (`20g`, `512m`, plain bytes); none by default.
fn disk_reserve() -> u64 {
    std::env::var("GPUFLOW_PULL_DISK_RESERVE")
        .ok()
        .and_then(|v| parse_size(&v))
        .unwrap_or(0)
}

/// `20g`, `512M`, `1.5GiB`, `1048576`: binary units, as Docker's own sizes.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_lowercase();
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: f64 = number.parse().ok()?;
    let shift = match unit.trim().trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return None,
    };
    Some((number * (1u64 << shift) as f64) as u64)
}

/// Free bytes for unprivileged writers on the filesystem holding `path`.
fn free_bytes(path: &str) -> Result<u64, String> {
    let stat = rustix::fs::statvfs(path).map_err(|e| format!("statvfs `{path}`: {e}"))?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// The layers of `image` as its registry lists them for this machine's platform.
async fn registry_layers(image: &str) -> Result<Layers, String> {
    let reference: Reference = image
        .parse()
        .map_err(|e| format!("`{image}` is not a reference a registry reads: {e}"))?;
    let registry = reference.resolve_registry().to_string();
    // As the engine: plain HTTP to a registry on this machine, HTTPS to any other.
    let protocol = if is_loopback(&registry) {
        ClientProtocol::Http
    } else {
        ClientProtocol::Https
    };
    let client = Client::new(ClientConfig {
        protocol,
        ..Default::default()
    });
    let (manifest, _digest, config) = client
        .pull_manifest_and_config(&reference, &RegistryAuth::Anonymous)
        .await
        .map_err(|e| format!("the manifest of `{image}`: {e}"))?;
    let config: serde_json::Value =
        serde_json::from_str(&config).map_err(|e| format!("the config of `{image}`: {e}"))?;
    let diff_ids = config["rootfs"]["diff_ids"]
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(String::from))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let sizes: Vec<u64> = manifest
        .layers
        .iter()
        .map(|l| u64::try_from(l.size).unwrap_or(0))
        .collect();
    if diff_ids.len() != sizes.len() {
        return Err(format!(
            "the manifest of `{image}` lists {} layers and its config {}",
            sizes.len(),
            diff_ids.len()
        ));
    }
    Ok(Layers { sizes, diff_ids })
}

/// `localhost:5000`, `127.0.0.1:5000`, `[::1]:5000`: a registry the engine reaches over plain
/// HTTP without being told to.
fn is_loopback(registry: &str) -> bool {
    let host = registry
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(registry, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("20g", Some(20 << 30) ; "gigabytes")]
    #[test_case("512M", Some(512 << 20) ; "megabytes")]
    #[test_case("1.5GiB", Some(3 << 29) ; "fraction with iec unit")]
    #[test_case("1048576", Some(1 << 20) ; "bytes")]
    #[test_case("lots", None ; "words")]
    fn sizes_read_as_docker_writes_them(text: &str, bytes: Option<u64>) {
        assert_eq!(parse_size(text), bytes);
    }

    #[test_case("127.0.0.1:5000", true ; "loopback with port")]
    #[test_case("localhost", true ; "localhost")]
    #[test_case("[::1]:5000", true ; "ipv6 loopback")]
    #[test_case("index.docker.io", false ; "docker hub")]
    #[test_case("10.0.0.5:5000", false ; "another machine")]
    fn plain_http_only_on_this_machine(registry: &str, loopback: bool) {
        assert_eq!(is_loopback(registry), loopback);
    }

    #[test]
    fn a_download_past_the_free_space_is_refused_with_the_numbers() {
        let refused = judge("r/big:1", (3 << 30, 4), (1 << 30, "/var/lib/docker"), 0);
        let Room::Short(text) = refused else {
            panic!("{refused:?}")
        };
        assert!(text.contains("3.00 GiB in 4 layers"), "{text}");
        assert!(
            text.contains("`/var/lib/docker` has 1.00 GiB free"),
            "{text}"
        );
        assert_eq!(
            judge("r/big:1", (1 << 30, 4), (3 << 30, "/d"), 0),
            Room::Fits
        );
        let kept = judge("r/big:1", (1 << 30, 4), (3 << 30, "/d"), 5 << 30);
        assert!(
            matches!(&kept, Room::Short(t) if t.contains("GPUFLOW_PULL_DISK_RESERVE keeps 5.00 GiB")),
            "{kept:?}"
        );
    }
}
