//! A laptop driving a GPU node over `ssh://`: the test starts its own sshd on 127.0.0.1 (a
//! throw-away host key and authorized key in a temp dir), and `gpuflow hosts check` reaches
//! the "node" through it. The node's engine is this machine's (`docker system dial-stdio` runs
//! there), so what gpuflow did on the node is checked with the engine's own API.
//!
//! OpenSSH reads `~/.ssh/config` from the passwd entry's home, not `$HOME`, so setting `HOME`
//! is not enough to give the client its config: the gpuflow process gets a `PATH` whose `ssh`
//! is a wrapper adding `-F <temp config>` (bollard and gpuflow's node check both run the
//! `ssh` on the `PATH`), and a temp `HOME` for the control sockets bollard's ssh library keeps.
//! The test process's own environment is never changed.
//!
//! sshd listens on two ports: on the second, commands run with an empty `PATH`, which plays a
//! node without the docker CLI.
//!
//! Needs Docker and sshd (Debian's `openssh-server`, installed by .ci/run): missing ones fail
//! the test under `CI`, and locally unless `GPUFLOW_SKIP_DOCKER=1` says to skip knowingly.

use std::collections::HashMap;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bollard::query_parameters::EventsOptionsBuilder;
use futures_util::StreamExt;

use crate::support::docker::{Unreachable, raw_docker, skip_or_fail, when_missing};
use crate::support::images::{self, BASE};
use crate::support::process::signal;
use crate::support::{Signal, Workspace, free_port};

/// The longest the test's sshd may live, whatever happens to the test process.
const SSHD_LIFETIME_S: u32 = 300;

/// Where Debian puts sshd.
const SSHD_PATHS: [&str; 2] = ["/usr/sbin/sshd", "/usr/bin/sshd"];

/// An sshd of this test's own (its `timeout` wrapper's process), stopped when dropped, also
/// when the test panics.
struct Sshd {
    child: Child,
    dir: Workspace,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // `timeout` passes SIGTERM on to sshd (a SIGKILL would orphan sshd instead).
        let _ = signal(self.child.id() as i32, Signal::TERM);
        let _ = self.child.wait();
    }
}

impl Sshd {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
    }
}

/// sshd, or `None` when it is missing and skipping was asked for (never under `CI`).
fn sshd_or_skip() -> Option<PathBuf> {
    if let Some(path) = SSHD_PATHS.iter().map(PathBuf::from).find(|p| p.exists()) {
        return Some(path);
    }
    skip_or_fail(
        "sshd",
        "sshd is not installed (Debian's `openssh-server`; .ci/run installs it)",
    );
    None
}

#[test]
fn missing_sshd_fails_under_ci_even_when_skipping_is_asked() {
    assert!(
        matches!(when_missing("sshd", "x", true, true), Unreachable::Fail(m) if m.contains("CI"))
    );
    assert!(
        matches!(when_missing("sshd", "x", false, false), Unreachable::Fail(m) if m.contains("GPUFLOW_SKIP_DOCKER=1"))
    );
    assert!(
        matches!(when_missing("sshd", "x", false, true), Unreachable::Skip(m) if m.contains("SKIPPED"))
    );
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "`{program} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn keygen(path: &Path) {
    run(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            path.to_str().unwrap(),
        ],
    );
}

/// Starts sshd on `node_port` (a normal node) and `bare_port` (no docker on the `PATH`).
fn start_sshd(sshd: &Path, node_port: u16, bare_port: u16) -> Sshd {
    let dir = Workspace::empty();
    let d = dir.path();
    keygen(&d.join("host_key"));
    keygen(&d.join("id"));
    std::fs::copy(d.join("id.pub"), d.join("authorized_keys")).unwrap();
    let config = format!(
        "Port {node_port}\nPort {bare_port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
         PidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\n\
         PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nLogLevel VERBOSE\n\
         Match LocalPort {bare_port}\n  \
         ForceCommand env PATH=/nonexistent /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n",
        d = d.display()
    );
    std::fs::write(d.join("sshd_config"), config).unwrap();
    // sshd refuses to start without its privilege separation directory.
    std::fs::create_dir_all("/run/sshd").unwrap();
    let log = std::fs::File::create(d.join("sshd.log")).unwrap();
    // Under `timeout`: should this test process itself be killed (and `Drop` never run),
    // sshd still ends within SSHD_LIFETIME_S instead of outliving the test run.
    let child = Command::new("timeout")
        .arg(SSHD_LIFETIME_S.to_string())
        .arg(sshd)
        .args(["-D", "-e", "-f"])
        .arg(d.join("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut server = Sshd { child, dir };
    let deadline = Instant::now() + Duration::from_secs(15);
    for port in [node_port, bare_port] {
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("sshd exited ({status}):\n{}", server.log());
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not listen:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    server
}

/// The client side: an ssh config with the two aliases, the `ssh` wrapper, a temp `HOME`.
/// Returns the `PATH` to run gpuflow with.
fn client(server: &Sshd, node_port: u16, bare_port: u16) -> String {
    let d = server.dir.path();
    let alias = |name: &str, port: u16| {
        format!(
            "Host {name}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {d}/id\n  \
             IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile {d}/known_hosts\n  \
             LogLevel ERROR\n",
            d = d.display()
        )
    };
    let config = alias("gpuflow-node", node_port) + &alias("gpuflow-bare", bare_port);
    std::fs::write(d.join("ssh_config"), config).unwrap();
    let real_ssh = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v ssh"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        !real_ssh.trim().is_empty(),
        "the ssh client is not installed"
    );
    std::fs::create_dir_all(d.join("bin")).unwrap();
    std::fs::create_dir_all(d.join("home")).unwrap();
    let wrapper = d.join("bin/ssh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec {} -F {}/ssh_config \"$@\"\n",
            real_ssh.trim(),
            d.display()
        ),
    )
    .unwrap();
    run("chmod", &["+x", wrapper.to_str().unwrap()]);
    std::fs::write(
        d.join("gpuflow.toml"),
        "[hosts.node]\nendpoint = \"ssh://root@gpuflow-node\"\nlabels = [\"gpu-node\"]\n\n\
         [hosts.bare]\nendpoint = \"ssh://root@gpuflow-bare\"\n",
    )
    .unwrap();
    format!(
        "{}:{}",
        d.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn gpuflow(server: &Sshd, path: &str, args: &[&str]) -> (i32, String, String) {
    let out = crate::support::gpuflow()
        .args(args)
        .arg("--config")
        .arg(server.path("gpuflow.toml"))
        .env("PATH", path)
        .env("HOME", server.path("home"))
        .env_remove("XDG_STATE_HOME")
        .env_remove("SSH_AUTH_SOCK")
        .without_docker_host()
        .output();
    (out.code().unwrap_or(-1), out.stdout, out.stderr)
}

/// The text between the first pair of backticks after `marker`.
fn quoted_after<'a>(text: &'a str, marker: &str) -> &'a str {
    let rest = &text[text
        .find(marker)
        .unwrap_or_else(|| panic!("no `{marker}` in {text}"))
        + marker.len()..];
    let start = rest.find('`').unwrap() + 1;
    let end = start + rest[start..].find('`').unwrap();
    &rest[start..end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_node_over_ssh_runs_a_container_and_removes_it() {
    let Some(sshd) = sshd_or_skip() else { return };
    let Some(local) = images::docker_with(&[BASE]).await else {
        return;
    };
    let (node_port, bare_port) = (free_port(), free_port());
    let server = start_sshd(&sshd, node_port, bare_port);
    let path = client(&server, node_port, bare_port);
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 1;

    let (code, stdout, stderr) = gpuflow(
        &server,
        &path,
        &["hosts", "check", "node", "--container", BASE],
    );
    assert_eq!(
        code,
        0,
        "stdout:\n{stdout}\nstderr:\n{stderr}\nsshd:\n{}",
        server.log()
    );
    let engine_api = raw_docker()
        .await
        .version()
        .await
        .unwrap()
        .api_version
        .unwrap();
    assert!(
        stdout.contains(&format!(
            "ok: `node` at `ssh://root@gpuflow-node` speaks Docker API {}",
            local.api_version()
        )),
        "{stdout} (the engine speaks {engine_api})"
    );
    let id = quoted_after(&stdout, "ok: container").to_string();
    let run_id = quoted_after(&stdout, "(run").to_string();
    assert!(
        stdout.contains("ran `true` on `node` (exit 0) and was removed"),
        "{stdout}"
    );
    // The login really went through this test's sshd.
    assert!(
        server.log().contains("Accepted publickey for root"),
        "{}",
        server.log()
    );

    // On the node's engine: the container was created with gpuflow's labels, ran, and is gone.
    let docker = raw_docker().await;
    let until = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1;
    let filters = HashMap::from([("container", vec![id.as_str()])]);
    let options = EventsOptionsBuilder::new()
        .since(&since.to_string())
        .until(&until.to_string())
        .filters(&filters)
        .build();
    let events: Vec<_> = docker
        .events(Some(options))
        .map(|e| e.unwrap())
        .collect()
        .await;
    let actions: Vec<String> = events.iter().filter_map(|e| e.action.clone()).collect();
    for action in ["create", "start", "die", "destroy"] {
        assert!(
            actions.iter().any(|a| a == action),
            "no `{action}` event: {actions:?}"
        );
    }
    let created = events
        .iter()
        .find(|e| e.action.as_deref() == Some("create"))
        .unwrap();
    let attributes = created.actor.as_ref().unwrap().attributes.as_ref().unwrap();
    assert_eq!(attributes["dev.gpuflow.managed"], "true");
    assert_eq!(attributes["dev.gpuflow.run-id"], run_id);
    assert!(
        docker.inspect_container(&id, None).await.is_err(),
        "container `{id}` survived"
    );
    assert!(local.run_containers(&run_id).await.unwrap().is_empty());

    // A node where ssh works but there is no docker CLI: said plainly, exit 4.
    let (code, stdout, stderr) = gpuflow(&server, &path, &["hosts", "check", "bare"]);
    assert_eq!(code, 4, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("cannot reach the Docker engine at `ssh://root@gpuflow-bare`: the node has no `docker` command"),
        "{stderr}"
    );
    assert!(stderr.contains("docker: not found"), "{stderr}");
    drop(server);
}
