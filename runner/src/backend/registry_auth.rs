//! Registry credentials for pulls, and what a registry's refusal of them means.
//!
//! Credentials reach the engine only as the `X-Registry-Auth` header of its create-image call
//! (bollard's `DockerCredentials`): never on a command line, in an environment or in a file, so
//! nothing else on the host can read them. Their `Debug` text hides the password, so a spec or
//! a backend printed for a diagnostic holds none.
//!
//! Which registry an image is pulled from follows Docker's reference rules: the first part of
//! the name when it looks like a host (holds a `.` or a `:`, or is `localhost`), else Docker
//! Hub, whose names (`docker.io`, `index.docker.io`, `registry-1.docker.io`) are one registry.

use std::collections::BTreeMap;

use bollard::auth::DockerCredentials;

/// The name Docker Hub is known by here.
pub const DOCKER_HUB: &str = "docker.io";

/// A username and password for one registry, and where they were given (for the hint when
/// the registry refuses them).
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryAuth {
    pub username: String,
    password: String,
    /// `the step's `credentials:``, `gpuflow.toml:3:1`: where to look when they are refused.
    pub given_by: String,
}

impl RegistryAuth {
    pub fn new(username: String, password: String, given_by: String) -> Self {
        Self {
            username,
            password,
            given_by,
        }
    }

    /// The password, for the masker (a step adds it, so a literal one is hidden too).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The header's content for a pull from `registry`.
    pub(super) fn to_docker(&self, registry: &str) -> DockerCredentials {
        // The engine keys Docker Hub's logins by its v1 index address, as `docker login` does.
        let serveraddress = if registry == DOCKER_HUB {
            "https://index.docker.io/v1/".to_string()
        } else {
            registry.to_string()
        };
        DockerCredentials {
            username: Some(self.username.clone()),
            password: Some(self.password.clone()),
            serveraddress: Some(serveraddress),
            ..Default::default()
        }
    }
}

impl std::fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryAuth")
            .field("username", &self.username)
            .field("password", &"***")
            .field("given_by", &self.given_by)
            .finish()
    }
}

/// The registry `image` is pulled from: `nvcr.io` for `nvcr.io/nvidia/pytorch:24.01`,
/// `127.0.0.1:5000` for `127.0.0.1:5000/sim:1`, [`DOCKER_HUB`] for `lmsysorg/sglang`.
pub fn registry_of(image: &str) -> String {
    match image.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            normalize_registry(first)
        }
        _ => DOCKER_HUB.to_string(),
    }
}

/// A registry's name as written (`gpuflow.toml`'s `[registries."NAME"]`) compared as the
/// engine would: host names in lower case, Docker Hub's aliases as one.
pub fn normalize_registry(name: &str) -> String {
    let name = name.trim().to_ascii_lowercase();
    match name.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            DOCKER_HUB.to_string()
        }
        _ => name,
    }
}

/// The credentials a run has per registry (`gpuflow.toml`'s `[registries]`), or why one's
/// cannot be made (the secret holding its password was not given): used by every pull of an
/// image from that registry that has no credentials of its own.
#[derive(Clone, Debug, Default)]
pub struct RegistryLogins {
    by_registry: BTreeMap<String, Result<RegistryAuth, String>>,
}

impl RegistryLogins {
    /// `login` for `registry` (a name as [`normalize_registry`] reads it).
    pub fn insert(&mut self, registry: &str, login: Result<RegistryAuth, String>) {
        self.by_registry.insert(normalize_registry(registry), login);
    }

    /// The login for the registry of `image`, if there is one.
    pub fn for_image(&self, image: &str) -> Option<&Result<RegistryAuth, String>> {
        self.by_registry.get(&registry_of(image))
    }

    pub fn is_empty(&self) -> bool {
        self.by_registry.is_empty()
    }
}

/// What a registry answered to a pull that it refused for want of a (good) login.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    /// The registry's words, without the request the engine prefixes them with:
    /// `unauthorized: authentication required`, `no basic auth credentials`.
    pub(super) answer: String,
    /// The HTTP status those words stand for (the engine answers 500 and passes the words on).
    pub(super) status: u16,
}

/// The refusal in the engine's reason for a failed pull, if it is one: a registry that wants
/// a login answers 401 (`unauthorized: …`; the engine's own `no basic auth credentials` when
/// it was given none to send); one that refuses the login it got may say `denied: …` (403),
/// which without credentials may just as well mean a repository that does not exist, so it
/// counts only when `with_credentials` (and only as the registry's error code, not a local
/// `permission denied`).
pub(super) fn refusal(reason: &str, with_credentials: bool) -> Option<Refusal> {
    let lower = reason.to_ascii_lowercase();
    let status = if lower.contains("no basic auth credentials")
        || lower.contains("unauthorized")
        || lower.contains("authentication required")
    {
        401
    } else if with_credentials && (lower.starts_with("denied: ") || lower.contains(": denied: ")) {
        403
    } else {
        return None;
    };
    Some(Refusal {
        answer: without_request(reason).to_string(),
        status,
    })
}

/// `Head "http://127.0.0.1:5000/v2/sim/manifests/1": no basic auth credentials` → `no basic
/// auth credentials`: the registry is named apart, and the request adds nothing for a user.
fn without_request(reason: &str) -> &str {
    let trimmed = reason.trim();
    let Some(rest) = ["Head \"", "Get \"", "Post \""]
        .iter()
        .find_map(|verb| trimmed.strip_prefix(verb))
    else {
        return trimmed;
    };
    rest.split_once("\": ")
        .map_or(trimmed, |(_, answer)| answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("busybox", "docker.io" ; "official image")]
    #[test_case("lmsysorg/sglang:latest", "docker.io" ; "hub user")]
    #[test_case("docker.io/lmsysorg/sglang", "docker.io" ; "hub written out")]
    #[test_case("index.docker.io/library/busybox", "docker.io" ; "hub index alias")]
    #[test_case("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io" ; "host with a dot")]
    #[test_case("127.0.0.1:5000/sim:1", "127.0.0.1:5000" ; "host and port")]
    #[test_case("localhost/sim", "localhost" ; "localhost")]
    #[test_case("GHCR.io/Org/img", "ghcr.io" ; "host in upper case")]
    #[test_case("team/img@sha256:abcd", "docker.io" ; "digest on the hub")]
    fn the_registry_of_an_image(image: &str, registry: &str) {
        assert_eq!(registry_of(image), registry);
    }

    #[test]
    fn a_login_is_found_by_the_registry_of_the_image() {
        let mut logins = RegistryLogins::default();
        let auth = RegistryAuth::new("u".into(), "p".into(), "gpuflow.toml:2:1".into());
        logins.insert("NVCR.io", Ok(auth.clone()));
        logins.insert("index.docker.io", Err("no secret".into()));
        assert_eq!(logins.for_image("nvcr.io/nvidia/x:1"), Some(&Ok(auth)));
        assert_eq!(
            logins.for_image("lmsysorg/sglang"),
            Some(&Err("no secret".into()))
        );
        assert_eq!(logins.for_image("ghcr.io/x/y"), None);
    }

    #[test]
    fn debug_text_hides_the_password() {
        let auth = RegistryAuth::new("gpuflow".into(), "hunter2!".into(), "here".into());
        let text = format!("{auth:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("gpuflow") && text.contains("***"), "{text}");
    }

    #[test]
    fn the_hub_is_given_its_v1_address_and_others_their_host() {
        let auth = RegistryAuth::new("u".into(), "p".into(), "here".into());
        let hub = auth.to_docker(DOCKER_HUB);
        assert_eq!(
            hub.serveraddress.as_deref(),
            Some("https://index.docker.io/v1/")
        );
        assert_eq!(
            (hub.username.as_deref(), hub.password.as_deref()),
            (Some("u"), Some("p"))
        );
        assert_eq!(
            auth.to_docker("nvcr.io").serveraddress.as_deref(),
            Some("nvcr.io")
        );
    }

    // The engine's words (Docker 20.10 against the Distribution registry with htpasswd).
    #[test_case("Head \"http://127.0.0.1:5000/v2/sim/manifests/1\": no basic auth credentials", false, Some(("no basic auth credentials", 401)) ; "none given")]
    #[test_case("unauthorized: authentication required", true, Some(("unauthorized: authentication required", 401)) ; "wrong password")]
    #[test_case("Get \"https://registry-1.docker.io/v2/\": unauthorized: incorrect username or password", true, Some(("unauthorized: incorrect username or password", 401)) ; "hub's words")]
    #[test_case("denied: requested access to the resource is denied", true, Some(("denied: requested access to the resource is denied", 403)) ; "denied with a login")]
    #[test_case("pull access denied for x, repository does not exist or may require 'docker login': denied: requested access to the resource is denied", false, None ; "denied without one may be a missing repository")]
    #[test_case("failed to register layer: open /var/lib/docker/x: permission denied", true, None ; "a local permission is no login")]
    #[test_case("manifest for 127.0.0.1:5000/sim:2 not found: manifest unknown: manifest unknown", true, None ; "missing tag")]
    #[test_case("Get \"http://127.0.0.1:5000/v2/\": dial tcp 127.0.0.1:5000: connect: connection refused", true, None ; "registry gone")]
    fn a_refused_login_is_told_from_other_failures(
        reason: &str,
        with_credentials: bool,
        expected: Option<(&str, u16)>,
    ) {
        let got = refusal(reason, with_credentials);
        assert_eq!(
            got.as_ref().map(|r| (r.answer.as_str(), r.status)),
            expected
        );
    }
}
