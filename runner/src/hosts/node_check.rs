//! Checking an `ssh://` node before bollard connects to it.
//!
//! bollard logs in with the system `ssh` and runs `docker system dial-stdio` on the node. When
//! that cannot work (no login, no docker CLI there, no engine behind it) all it reports is a
//! closed stream (`IncompleteMessage`). So gpuflow first runs `docker version` over the same
//! `ssh`, non-interactively, and turns what failed into a message that says which part is
//! missing.

use std::process::Stdio;
use std::time::Duration;

use crate::backend::BackendError;

/// How long the whole check may take (login included).
const CHECK_TIMEOUT: Duration = Duration::from_secs(30);
/// Passed to ssh: a node that does not answer is reported instead of waited on.
const SSH_CONNECT_TIMEOUT_S: u32 = 10;
/// `docker version` prints the engine's API version with this format.
const VERSION_FORMAT: &str = "{{.Server.APIVersion}}";

/// Runs `docker version` on `destination` (`user@node`) over ssh; the engine's API version, or
/// an error saying what is missing there.
#[tracing::instrument(level = "debug", skip_all, fields(destination))]
pub async fn check_ssh_node(destination: &str) -> Result<String, BackendError> {
    let endpoint = format!("ssh://{destination}");
    if destination.starts_with('-') {
        return Err(BackendError::InvalidEndpoint {
            value: endpoint,
            reason: "the ssh destination starts with `-`".into(),
            hint: "write `ssh://user@host`".into(),
        });
    }
    let mut command = tokio::process::Command::new("ssh");
    command
        .args(["-o", "BatchMode=yes", "-o"])
        .arg(format!("ConnectTimeout={SSH_CONNECT_TIMEOUT_S}"))
        .arg("--")
        .arg(destination)
        .arg(format!("docker version --format '{VERSION_FORMAT}'"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = match command.spawn() {
        Ok(child) => match tokio::time::timeout(CHECK_TIMEOUT, child.wait_with_output()).await {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => {
                return Err(unreachable(
                    &endpoint,
                    format!("running `ssh` failed: {e}"),
                    login_hint(destination),
                ));
            }
            Err(_) => {
                return Err(unreachable(
                    &endpoint,
                    format!(
                        "`ssh {destination} docker version` did not finish within {}s",
                        CHECK_TIMEOUT.as_secs()
                    ),
                    login_hint(destination),
                ));
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(unreachable(
                &endpoint,
                "the `ssh` command is not installed on this machine".into(),
                "install the OpenSSH client (`apt-get install openssh-client`); gpuflow reaches \
                 `ssh://` hosts through it"
                    .into(),
            ));
        }
        Err(e) => {
            return Err(unreachable(
                &endpoint,
                format!("cannot run `ssh`: {e}"),
                login_hint(destination),
            ));
        }
    };
    let checked = classify_node_check(
        destination,
        output.status.code(),
        &String::from_utf8_lossy(&output.stdout),
        &String::from_utf8_lossy(&output.stderr),
    );
    match &checked {
        Ok(version) => tracing::debug!(api_version = %version, "the node's engine answers"),
        Err(e) => {
            tracing::debug!(exit_code = output.status.code(), error = %e, "node check failed")
        }
    }
    checked
}

/// What `ssh DESTINATION docker version …` ending with `code` (`None`: killed by a signal) and
/// these outputs means.
pub fn classify_node_check(
    destination: &str,
    code: Option<i32>,
    stdout: &str,
    stderr: &str,
) -> Result<String, BackendError> {
    let endpoint = format!("ssh://{destination}");
    let said = last_lines(stderr);
    let lower = stderr.to_ascii_lowercase();
    match code {
        Some(0) => {
            let version = stdout.trim();
            if version.is_empty() {
                Err(unreachable(
                    &endpoint,
                    "`docker version` on the node printed no engine version".into(),
                    engine_hint(destination),
                ))
            } else {
                Ok(version.to_string())
            }
        }
        // ssh's own failures (cannot resolve, refused, authentication) all exit 255.
        Some(255) => Err(unreachable(
            &endpoint,
            format!(
                "ssh could not log in to `{destination}`: {}",
                or_silence(&said)
            ),
            login_hint(destination),
        )),
        Some(127) => Err(unreachable(
            &endpoint,
            format!(
                "the node has no `docker` command (ssh logged in, but `docker` is not on the \
                 PATH of a non-interactive session): {}",
                or_silence(&said)
            ),
            format!(
                "install the docker CLI on `{destination}` (`apt-get install docker.io`, or \
                 Docker's `docker-ce-cli`), or put it on the PATH sshd gives commands: gpuflow \
                 talks to the node's engine through `docker system dial-stdio` there"
            ),
        )),
        _ if lower.contains("permission denied") => Err(unreachable(
            &endpoint,
            format!(
                "the docker CLI on the node may not use its engine: {}",
                or_silence(&said)
            ),
            format!(
                "add the ssh user to the `docker` group on `{destination}` (`sudo usermod -aG \
                 docker USER`), then log in again"
            ),
        )),
        _ => Err(unreachable(
            &endpoint,
            format!("`docker version` on the node failed: {}", or_silence(&said)),
            engine_hint(destination),
        )),
    }
}

fn unreachable(endpoint: &str, reason: String, hint: String) -> BackendError {
    BackendError::Unreachable {
        endpoint: endpoint.to_string(),
        reason,
        hint,
    }
}

fn login_hint(destination: &str) -> String {
    let host = destination.rsplit_once('@').map_or(destination, |(_, h)| h);
    format!(
        "check that `ssh {destination} true` works without a prompt (a key in ssh-agent or \
         `IdentityFile`, the node's host key accepted); a port other than 22 goes in \
         ~/.ssh/config (`Host {host}` / `Port 2222`), not in the endpoint"
    )
}

fn engine_hint(destination: &str) -> String {
    format!(
        "start the Docker engine on `{destination}` (`sudo systemctl start docker`) and check \
         that `ssh {destination} docker version` works"
    )
}

/// The end of what a command said on stderr, on one line.
fn last_lines(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(2)..].join(" / ")
}

fn or_silence(said: &str) -> &str {
    if said.is_empty() {
        "it printed nothing"
    } else {
        said
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test]
    fn success_gives_the_engines_api_version() {
        assert_eq!(
            classify_node_check("me@node", Some(0), "1.41\n", "").unwrap(),
            "1.41"
        );
    }

    #[test_case(Some(255), "ssh: connect to host node port 22: Connection refused", "ssh could not log in to `me@node`: ssh: connect to host node port 22: Connection refused", "Port 2222" ; "ssh failure")]
    #[test_case(Some(127), "sh: 1: docker: not found", "the node has no `docker` command", "docker-ce-cli" ; "no docker cli")]
    #[test_case(Some(1), "permission denied while trying to connect to the Docker daemon socket", "may not use its engine", "`docker` group" ; "no permission")]
    #[test_case(Some(1), "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", "`docker version` on the node failed: Cannot connect", "systemctl start docker" ; "no engine")]
    #[test_case(Some(0), "", "printed no engine version", "systemctl start docker" ; "no version")]
    #[test_case(None, "", "it printed nothing", "systemctl" ; "killed")]
    fn failures_say_what_is_missing(code: Option<i32>, stderr: &str, reason: &str, hint: &str) {
        let e = classify_node_check("me@node", code, "", stderr).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("cannot reach the Docker engine at `ssh://me@node`: "),
            "{text}"
        );
        assert!(text.contains(reason), "{text}");
        let h = e.hint().unwrap();
        assert!(h.contains(hint), "{h}");
    }

    #[tokio::test]
    async fn a_destination_that_looks_like_an_option_is_refused_before_ssh_runs() {
        let e = check_ssh_node("-oProxyCommand=touch /tmp/x")
            .await
            .unwrap_err();
        assert!(matches!(e, BackendError::InvalidEndpoint { .. }), "{e:?}");
    }
}
