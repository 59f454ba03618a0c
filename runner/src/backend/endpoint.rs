//! Where a Docker engine listens: parsed from `DOCKER_HOST` (or, later, a host file entry)
//! before any connection is tried, so a typo is reported as a typo and not as "unreachable".

use std::fmt;
use std::path::PathBuf;

use super::BackendError;

/// The socket every Docker install uses when `DOCKER_HOST` is unset.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// Docker's own default port for plain TCP.
const DEFAULT_TCP_PORT: u16 = 2375;

/// A Docker engine's address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `unix:///path/to/docker.sock`: the local engine.
    Unix(PathBuf),
    /// `tcp://host:port` (plain HTTP; TLS is not built in yet).
    Tcp { host: String, port: u16 },
    /// `ssh://[user@]host`: bollard runs the system `ssh` and `docker system dial-stdio` there.
    Ssh { destination: String },
}

impl Endpoint {
    /// The engine `DOCKER_HOST` names, or the local socket when it is unset or empty.
    pub fn from_env() -> Result<Self, BackendError> {
        let host = std::env::var("DOCKER_HOST").unwrap_or_default();
        let tls = std::env::var_os("DOCKER_TLS_VERIFY").is_some_and(|v| !v.is_empty());
        Self::from_docker_host(&host, tls)
    }

    /// `DOCKER_HOST`'s value (empty means the default socket). `tls_verify` is whether
    /// `DOCKER_TLS_VERIFY` is set: a TCP endpoint that expects TLS is refused rather than
    /// spoken to in plain text.
    pub fn from_docker_host(value: &str, tls_verify: bool) -> Result<Self, BackendError> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(Self::Unix(PathBuf::from(DEFAULT_SOCKET)));
        }
        let endpoint = Self::parse(value)?;
        if tls_verify && matches!(endpoint, Self::Tcp { .. }) {
            return Err(invalid(
                value,
                "`DOCKER_TLS_VERIFY` is set but gpuflow does not speak TLS to Docker yet",
                "reach the engine over `ssh://user@host` instead, or unset `DOCKER_TLS_VERIFY` \
                 if the engine listens without TLS",
            ));
        }
        Ok(endpoint)
    }

    /// Parses `unix://`, `tcp://` (or `http://`) and `ssh://` addresses.
    pub fn parse(value: &str) -> Result<Self, BackendError> {
        let Some((scheme, rest)) = value.split_once("://") else {
            let hint = if value.starts_with('/') {
                format!("a socket path is written `unix://{value}`")
            } else if let Some(path) = value.strip_prefix("unix:") {
                format!("write `unix:///{}`", path.trim_start_matches('/'))
            } else {
                format!("write `tcp://{value}`, `ssh://{value}` or `unix:///path/to/docker.sock`")
            };
            return Err(invalid(value, "it has no scheme", &hint));
        };
        match scheme {
            "unix" => {
                if !rest.starts_with('/') {
                    return Err(invalid(
                        value,
                        "the socket path must be absolute",
                        &format!("write `unix:///{rest}`"),
                    ));
                }
                Ok(Self::Unix(PathBuf::from(rest)))
            }
            "tcp" | "http" => parse_tcp(value, rest),
            "ssh" => parse_ssh(value, rest),
            "https" => Err(invalid(
                value,
                "gpuflow does not speak TLS to Docker yet",
                "reach the engine over `ssh://user@host` instead",
            )),
            "npipe" => Err(invalid(
                value,
                "Windows named pipes are not supported",
                "run gpuflow on a Linux host, or use `tcp://` or `ssh://`",
            )),
            other => Err(invalid(
                value,
                &format!("unknown scheme `{other}`"),
                "use `unix://`, `tcp://` or `ssh://`",
            )),
        }
    }

    /// The address as bollard takes it.
    pub(crate) fn url(&self) -> String {
        self.to_string()
    }
}

fn parse_tcp(value: &str, rest: &str) -> Result<Endpoint, BackendError> {
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') {
        return Err(invalid(
            value,
            "expected `host:port` after `tcp://`",
            "write e.g. `tcp://gpu-node:2375`",
        ));
    }
    let (host, port) = match authority.rsplit_once(':') {
        // An IPv6 literal without a port (`[::1]`) has colons but ends with `]`.
        Some((host, port)) if !port.ends_with(']') => {
            let port = port.parse::<u16>().map_err(|_| {
                invalid(
                    value,
                    &format!("`{port}` is not a port number"),
                    "write e.g. `tcp://gpu-node:2375`",
                )
            })?;
            (host, port)
        }
        _ => (authority, DEFAULT_TCP_PORT),
    };
    if host.is_empty() {
        return Err(invalid(
            value,
            "the host name is empty",
            "write e.g. `tcp://gpu-node:2375`",
        ));
    }
    Ok(Endpoint::Tcp {
        host: host.to_string(),
        port,
    })
}

fn parse_ssh(value: &str, rest: &str) -> Result<Endpoint, BackendError> {
    let destination = rest.trim_end_matches('/');
    let host = destination.rsplit_once('@').map_or(destination, |(_, h)| h);
    if host.is_empty() {
        return Err(invalid(
            value,
            "the host name is empty",
            "write e.g. `ssh://user@gpu-node`",
        ));
    }
    if destination.contains('/') {
        return Err(invalid(
            value,
            "an ssh endpoint has no path",
            "write `ssh://user@host`",
        ));
    }
    // bollard hands `user@host:port` to ssh as one host name, so a port would silently be
    // part of the name and the connection would fail with an unrelated message.
    if let Some((name, port)) = host.rsplit_once(':') {
        return Err(invalid(
            value,
            &format!("a port (`{port}`) in an ssh endpoint is not supported"),
            &format!(
                "add a `Host` entry for `{name}` with `Port {port}` to ~/.ssh/config and use \
                 its alias, or use port 22"
            ),
        ));
    }
    Ok(Endpoint::Ssh {
        destination: destination.to_string(),
    })
}

fn invalid(value: &str, reason: &str, hint: &str) -> BackendError {
    BackendError::InvalidEndpoint {
        value: value.to_string(),
        reason: reason.to_string(),
        hint: hint.to_string(),
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unix(path) => write!(f, "unix://{}", path.display()),
            Self::Tcp { host, port } => write!(f, "tcp://{host}:{port}"),
            Self::Ssh { destination } => write!(f, "ssh://{destination}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("", "unix:///var/run/docker.sock" ; "empty means the local socket")]
    #[test_case("unix:///run/user/1000/docker.sock", "unix:///run/user/1000/docker.sock" ; "unix")]
    #[test_case("tcp://10.0.0.5:2375", "tcp://10.0.0.5:2375" ; "tcp")]
    #[test_case("tcp://gpu-node", "tcp://gpu-node:2375" ; "tcp default port")]
    #[test_case("http://gpu-node:2376/", "tcp://gpu-node:2376" ; "http is tcp")]
    #[test_case("ssh://me@gpu-node", "ssh://me@gpu-node" ; "ssh")]
    #[test_case("ssh://gpu-node", "ssh://gpu-node" ; "ssh without user")]
    fn parses(value: &str, shown: &str) {
        let endpoint = Endpoint::from_docker_host(value, false).unwrap();
        assert_eq!(endpoint.to_string(), shown);
    }

    #[test_case("/var/run/docker.sock", "it has no scheme", "unix:///var/run/docker.sock" ; "bare path")]
    #[test_case("unix://var/run/docker.sock", "must be absolute", "unix:///var/run/docker.sock" ; "relative socket")]
    #[test_case("ssh://me@gpu-node:2222", "port (`2222`)", "Port 2222" ; "ssh port")]
    #[test_case("tcp://gpu-node:http", "`http` is not a port", "tcp://gpu-node:2375" ; "bad port")]
    #[test_case("https://gpu-node:2376", "TLS", "ssh://" ; "https")]
    #[test_case("ftp://gpu-node", "unknown scheme `ftp`", "tcp://" ; "unknown scheme")]
    fn refuses_with_a_hint(value: &str, reason: &str, hint: &str) {
        let e = Endpoint::from_docker_host(value, false).unwrap_err();
        assert!(e.to_string().contains(reason), "{e}");
        let h = e.hint().unwrap();
        assert!(h.contains(hint), "{h}");
        assert!(e.to_string().contains(&format!("`{value}`")), "{e}");
    }

    #[test]
    fn tls_verify_with_tcp_is_refused_not_downgraded() {
        let e = Endpoint::from_docker_host("tcp://gpu-node:2376", true).unwrap_err();
        assert!(e.to_string().contains("DOCKER_TLS_VERIFY"), "{e}");
        assert!(Endpoint::from_docker_host("unix:///x.sock", true).is_ok());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn never_panics_and_round_trips(value in "\\PC{0,40}") {
            if let Ok(endpoint) = Endpoint::parse(&value) {
                let shown = endpoint.to_string();
                proptest::prop_assert_eq!(Endpoint::parse(&shown).unwrap(), endpoint);
            }
        }
    }
}
