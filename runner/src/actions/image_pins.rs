//! The `[[image]]` tables of `gpuflow.lock`: the repository digest (`sha256:…`) an image
//! reference of the workflows (`vllm/vllm-openai:v0.32.0`) is pinned to, so a tag moved in
//! its registry changes nothing until `gpuflow images update` moves the pin (docs/running.md).
//!
//! This file is data only: what a pin is, how a reference is matched to one, and what a run
//! pulls and runs for a pinned image ([`ImageToRun`], which `LockFile::image_to_run` gives).
//! Asking a registry what a tag names now is the engine's (`backend`), choosing which images
//! to pin the CLI's.
//!
//! A pin's `image` and `digest` come with whatever repository is opened, and the digest is
//! handed to the engine as part of an image reference: both are checked when the file is read
//! ([`problem`]), so a hand edit cannot make a reference the engine would read otherwise.

use serde::Deserialize;

/// One image reference and the repository digest it is pinned to.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagePin {
    /// The reference as the workflows write it (`registry/repo:tag`).
    pub image: String,
    /// The manifest (or index) digest the registry gave for it: `sha256:` and 64 hex digits.
    pub digest: String,
    /// When the digest was read from the registry (RFC 3339, UTC): a reader of the lock sees
    /// how old a pin is.
    #[serde(default)]
    pub resolved: Option<String>,
}

/// What a run pulls and runs for an image a workflow names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageToRun<'a> {
    /// Not pinned (or already a digest reference): the reference as written.
    AsWritten(&'a str),
    /// Pinned: `repo@sha256:…`, the pinned content whatever the tag names now.
    Pinned {
        reference: String,
        pin: &'a ImagePin,
    },
}

impl ImageToRun<'_> {
    /// The reference to pull and to create containers from.
    pub fn reference(&self) -> &str {
        match self {
            Self::AsWritten(image) => image,
            Self::Pinned { reference, .. } => reference,
        }
    }
}

impl ImagePin {
    /// `repo@sha256:…`: the image's repository (its tag dropped, since a reference with both
    /// is read by some engines' pulls as the tag) at the pinned digest.
    pub fn reference(&self) -> String {
        format!("{}@{}", repository(&self.image), self.digest)
    }

    /// Why a run refuses a pinned image it cannot have: the registry has no manifest of the
    /// pinned digest any more (`now`: what the tag names there now, when known; `why`: the
    /// engine's reason). Both digests are named so the choice is the user's.
    pub fn unavailable(&self, now: Option<&str>, why: &str) -> String {
        let now = match now {
            Some(d) if d != self.digest => format!("; `{}` names {d} there now", self.image),
            Some(_) => String::new(),
            None => String::new(),
        };
        format!(
            "`gpuflow.lock` pins `{}` to {}, which could not be pulled ({why}){now} (help: `gpuflow images update {}` pins what the tag names now, if that is the image to run)",
            self.image, self.digest, self.image
        )
    }

    /// Whether a pulled image is the pinned one: `repo_digests` are the image's
    /// `RepoDigests` (`repo@sha256:…`); one of them must carry the pinned digest.
    pub fn matches(&self, repo_digests: &[String]) -> bool {
        repo_digests
            .iter()
            .any(|r| r.rsplit_once('@').is_some_and(|(_, d)| d == self.digest))
    }
}

/// `image` names its content itself (`repo@sha256:…`): nothing to pin.
pub fn is_digest_reference(image: &str) -> bool {
    image.contains('@')
}

/// The repository of a reference: without its tag or digest (`127.0.0.1:5000/sim:1` →
/// `127.0.0.1:5000/sim`; a registry's port is not a tag).
pub fn repository(image: &str) -> &str {
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    let last = name.rfind('/').map_or(0, |i| i + 1);
    match name[last..].rfind(':') {
        Some(colon) => &name[..last + colon],
        None => name,
    }
}

/// The reference as the engine reads it, for matching: registry (`docker.io` when none),
/// repository (`library/` for a single name on Docker Hub), and tag (`latest` when none) or
/// digest.
pub fn normalise(image: &str) -> String {
    let repo = repository(image);
    let rest = &image[repo.len()..];
    let suffix = if rest.is_empty() { ":latest" } else { rest };
    let (registry, path) = match repo.split_once('/') {
        Some((first, path))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first, path.to_string())
        }
        _ if repo.contains('/') => ("docker.io", repo.to_string()),
        _ => ("docker.io", format!("library/{repo}")),
    };
    let registry = if registry == "index.docker.io" {
        "docker.io"
    } else {
        registry
    };
    format!("{registry}/{path}{suffix}")
}

/// What is wrong with a pin read from the file, if anything: the digest must be `sha256:` and
/// 64 lowercase hex digits, the image a plain reference with a tag or none (no digest, no
/// blanks, not starting like an option). `(field, message)`.
pub fn problem(pin: &ImagePin) -> Option<(&'static str, String)> {
    let hex = pin.digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Some((
            "digest",
            format!(
                "`gpuflow.lock` pins `{}` to `{}`, which is not an image digest",
                pin.image.escape_debug(),
                pin.digest.escape_debug()
            ),
        ));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-/:".contains(c);
    if pin.image.is_empty()
        || pin.image.starts_with(['-', '/', ':', '.'])
        || !pin.image.chars().all(allowed)
        || pin.image.len() > 512
    {
        return Some((
            "image",
            format!(
                "`gpuflow.lock` pins `{}`, which is not an image reference",
                pin.image.escape_debug()
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::LockFile;
    use test_case::test_case;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn pin(image: &str) -> ImagePin {
        ImagePin {
            image: image.into(),
            digest: DIGEST.into(),
            resolved: None,
        }
    }

    #[test_case("ubuntu", "docker.io/library/ubuntu:latest" ; "a single name is Docker Hub's library")]
    #[test_case("ubuntu:22.04", "docker.io/library/ubuntu:22.04" ; "tag kept")]
    #[test_case("docker.io/library/ubuntu:latest", "docker.io/library/ubuntu:latest" ; "already whole")]
    #[test_case("index.docker.io/lmsysorg/sglang:v0.5", "docker.io/lmsysorg/sglang:v0.5" ; "hub's other name")]
    #[test_case("vllm/vllm-openai", "docker.io/vllm/vllm-openai:latest" ; "an organisation on Docker Hub")]
    #[test_case("127.0.0.1:5000/sim", "127.0.0.1:5000/sim:latest" ; "a registry's port is not a tag")]
    #[test_case("localhost/team/sim:2", "localhost/team/sim:2" ; "localhost is a registry")]
    #[test_case("ghcr.io/ggml-org/llama.cpp:server", "ghcr.io/ggml-org/llama.cpp:server" ; "a registry with a dot")]
    fn references_are_read_as_the_engine_reads_them(image: &str, whole: &str) {
        assert_eq!(normalise(image), whole);
    }

    #[test]
    fn a_pinned_image_runs_as_its_repository_at_the_digest() {
        let lock = LockFile {
            images: vec![pin("127.0.0.1:5000/sim:1"), pin("ubuntu")],
            ..LockFile::default()
        };
        let run = lock.image_to_run("127.0.0.1:5000/sim:1");
        assert_eq!(run.reference(), format!("127.0.0.1:5000/sim@{DIGEST}"));
        assert!(
            matches!(run, ImageToRun::Pinned { pin, .. } if pin.image == "127.0.0.1:5000/sim:1")
        );
        // Matched as the engine reads the name.
        assert_eq!(
            lock.image_to_run("docker.io/library/ubuntu:latest")
                .reference(),
            format!("ubuntu@{DIGEST}")
        );
        // Another tag, an unpinned image, a digest reference: as written.
        for image in [
            "127.0.0.1:5000/sim:2",
            "gpuflow-sim:test",
            "127.0.0.1:5000/sim@sha256:ff",
        ] {
            assert_eq!(lock.image_to_run(image), ImageToRun::AsWritten(image));
        }
    }

    #[test]
    fn a_pin_that_cannot_be_had_names_both_digests() {
        let p = pin("127.0.0.1:5000/sim:1");
        let said = p.unavailable(Some("sha256:ff"), "manifest unknown");
        assert_eq!(
            said,
            format!(
                "`gpuflow.lock` pins `127.0.0.1:5000/sim:1` to {DIGEST}, which could not be pulled (manifest unknown); `127.0.0.1:5000/sim:1` names sha256:ff there now (help: `gpuflow images update 127.0.0.1:5000/sim:1` pins what the tag names now, if that is the image to run)"
            )
        );
        assert!(!p.unavailable(None, "x").contains("there now"));
        assert!(p.matches(&[format!("127.0.0.1:5000/sim@{DIGEST}")]));
        assert!(!p.matches(&["127.0.0.1:5000/sim@sha256:ff".into()]));
    }

    #[test_case("sha256:abc", "digest" ; "too short")]
    #[test_case("sha512:0123", "digest" ; "another algorithm")]
    #[test_case(&DIGEST.to_uppercase().replace("SHA256", "sha256"), "digest" ; "upper case")]
    #[test_case(&format!("{DIGEST} --x"), "digest" ; "more after it")]
    fn digests_are_checked(digest: &str, field: &str) {
        let mut p = pin("sim:1");
        p.digest = digest.into();
        assert_eq!(problem(&p).map(|(f, _)| f), Some(field));
    }

    #[test_case("--entrypoint=sh" ; "an option")]
    #[test_case("sim:1 x" ; "a blank")]
    #[test_case("sim@sha256:ab" ; "a digest")]
    #[test_case("" ; "empty")]
    fn images_are_checked(image: &str) {
        assert_eq!(problem(&pin(image)).map(|(f, _)| f), Some("image"));
        assert_eq!(problem(&pin("127.0.0.1:5000/team/sim_x-1.2:v1")), None);
    }
}
