//! A real image registry for the tests: Debian's `docker-registry` (the CNCF Distribution
//! registry, 2.8; `make test-deps` installs it) started on a free port of 127.0.0.1, plain
//! ([`Registry::start`]) or asking for HTTP basic auth ([`Registry::with_auth`]).
//!
//! The engine needs no configuration for it: Docker treats registries on 127.0.0.0/8 as
//! insecure-allowed (plain HTTP) by default, so `docker push 127.0.0.1:PORT/sim:1` just works.
//!
//! Each registry owns a private temporary folder: its `config.yml`, its storage (deleting
//! manifests enabled), its `htpasswd`, its log, and a Docker CLI configuration folder
//! (`DOCKER_CONFIG`), so a login never reads or writes the developer's `~/.docker`. It runs in
//! a process group of its own, so a test can kill it half way through a pull ([`Registry::kill`],
//! and [`Registry::restart`] on the same port and storage) or make it stop answering without
//! closing anything ([`Registry::pause`], SIGSTOP; [`Registry::resume`]).
//!
//! Images reach it with the Docker CLI, as a developer pushes them ([`Registry::push`]). A pull
//! only moves bytes for layers the engine lacks, and a pushed test image stays in the engine
//! under its own tag: [`Registry::push_unique`] pushes an image made for this test alone and
//! then removes it from the engine, so that a pull of it really downloads every layer above the
//! base.
//!
//! When dropped, the registry is killed, every image the engine holds under its address
//! (`127.0.0.1:PORT/…`) is removed, and the folder goes with its storage. Drop a registry after
//! the containers of its images are gone (make it before [`super::docker::with_docker`], not
//! inside its body): the engine refuses to remove an image a container still uses.
//!
//! All of it blocks (processes, a plain HTTP/1.0 client): call it outside a runtime's busy
//! moments, or from `spawn_blocking`.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::Value;

use super::images::BASE;
use super::ports::free_port;
use super::process::{Signal, poll_until, signal};

/// Debian's name for the Distribution registry's binary (upstream calls it `registry`).
const REGISTRY_BIN: &str = "docker-registry";

/// How long a started registry may take to answer `GET /v2/` (it takes ~50 ms).
const START_LIMIT: Duration = Duration::from_secs(15);

/// How long one API request may wait for an answer: a paused registry must fail a request, not
/// hang the test.
const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// What a manifest request accepts: what `docker push` makes (Docker's v2 schema 2) and OCI's
/// image manifest. Without it the registry would answer with the old schema 1.
const MANIFEST_TYPES: &str = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json";

/// A running registry; killed, its images removed from the engine and its folder deleted when
/// dropped.
pub(crate) struct Registry {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    credentials: Option<(String, String)>,
    child: Option<Child>,
}

/// A registry's answer to an API request.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    /// Names in lower case.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// The first header called `name` (any case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn text(&self) -> String {
        super::text(&self.body)
    }
}

/// An image manifest as the registry serves it.
#[derive(Debug)]
pub(crate) struct Manifest {
    /// `sha256:…`: what `docker push` printed, and what `repo@digest` pins.
    pub(crate) digest: String,
    pub(crate) media_type: String,
    pub(crate) config: Blob,
    /// Bottom first, as the image applies them.
    pub(crate) layers: Vec<Blob>,
}

impl Manifest {
    /// The bytes a pull of every layer downloads (compressed, as stored).
    pub(crate) fn layers_size(&self) -> u64 {
        self.layers.iter().map(|l| l.size).sum()
    }
}

/// A blob a manifest names.
#[derive(Debug)]
pub(crate) struct Blob {
    pub(crate) digest: String,
    pub(crate) size: u64,
    pub(crate) media_type: String,
}

/// An image [`Registry::push_unique`] pushed and removed from the engine.
#[derive(Debug)]
pub(crate) struct Unique {
    /// The manifest's digest.
    pub(crate) digest: String,
    /// The content of `/nonce` in the image, unique to it: proof that a container ran what a
    /// pull brought.
    pub(crate) nonce: String,
}

impl Registry {
    /// A registry anyone may push to and pull from.
    pub(crate) fn start() -> Self {
        Self::launch(None)
    }

    /// A registry that answers 401 to any request without the basic-auth credentials
    /// `user`/`password` (bcrypt in its `htpasswd`, made with apache2-utils' `htpasswd`).
    pub(crate) fn with_auth(user: &str, password: &str) -> Self {
        Self::launch(Some((user.to_owned(), password.to_owned())))
    }

    fn launch(credentials: Option<(String, String)>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gpuflow-registry-")
            .tempdir()
            .unwrap();
        std::fs::create_dir(dir.path().join("docker-config")).unwrap();
        if let Some((user, password)) = &credentials {
            write_htpasswd(&dir.path().join("htpasswd"), user, password);
        }
        let mut registry = Self {
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            credentials,
            child: None,
        };
        // The port is free when chosen and taken by the registry a moment later: another test
        // may take it in between. Then the registry exits saying so, and another port is tried.
        for _ in 0..3 {
            registry.addr.set_port(free_port());
            registry.write_config();
            match registry.run() {
                Ok(()) => return registry,
                Err(log) if log.contains("address already in use") => continue,
                Err(log) => panic!("the registry did not start:\n{log}"),
            }
        }
        panic!(
            "the registry found no free port in three tries:\n{}",
            registry.log()
        );
    }

    /// `127.0.0.1:PORT`: the registry part of an image reference.
    pub(crate) fn host(&self) -> String {
        self.addr.to_string()
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `repo_tag` (`sim:1`, `team/sim@sha256:…`) in this registry: `127.0.0.1:PORT/sim:1`.
    pub(crate) fn image(&self, repo_tag: &str) -> String {
        format!("{}/{repo_tag}", self.host())
    }

    /// The Docker CLI configuration folder of this registry's logins (`DOCKER_CONFIG`).
    pub(crate) fn docker_config(&self) -> PathBuf {
        self.dir.path().join("docker-config")
    }

    /// The registry's log so far: a line per request (`"GET /v2/sim/manifests/1 HTTP/1.1" 200`,
    /// Apache's combined format) and the errors and warnings, with their reasons.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The engine's data root (`/var/lib/docker`): the disk pulls write to.
    pub(crate) fn docker_root(&self) -> String {
        let mut info = self.docker();
        info.args(["info", "--format", "{{.DockerRootDir}}"]);
        cli(info, None).unwrap().trim().to_owned()
    }

    /// The `docker` CLI with this registry's `DOCKER_CONFIG`.
    pub(crate) fn docker(&self) -> Command {
        let mut docker = Command::new("docker");
        docker.env("DOCKER_CONFIG", self.docker_config());
        docker
    }

    /// `docker login` with the registry's own credentials; panics if it has none or they fail.
    pub(crate) fn login(&self) {
        let (user, password) = self
            .credentials
            .as_ref()
            .expect("`login` is for a registry made `with_auth`");
        if let Err(e) = self.try_login(user, password) {
            panic!("docker login to {} failed: {e}", self.host());
        }
    }

    /// `docker login` as `user` with `password` (on stdin): the CLI's stderr when refused.
    pub(crate) fn try_login(&self, user: &str, password: &str) -> Result<(), String> {
        let mut login = self.docker();
        login.args(["login", "--username", user, "--password-stdin"]);
        login.arg(self.host());
        cli(login, Some(password)).map(drop)
    }

    /// `docker logout`: later pushes and pulls of the CLI go without credentials.
    pub(crate) fn logout(&self) {
        let mut logout = self.docker();
        logout.arg("logout").arg(self.host());
        cli(logout, None).unwrap();
    }

    /// Pushes the local image `local` as `repo_tag` (logged in first when the registry asks for
    /// credentials) and returns the manifest's digest. The engine keeps only `local`: the tag
    /// under this registry's address is removed again.
    pub(crate) fn push(&self, local: &str, repo_tag: &str) -> String {
        if self.credentials.is_some() {
            self.login();
        }
        self.try_push(local, repo_tag)
            .unwrap_or_else(|e| panic!("pushing `{local}` as `{repo_tag}`: {e}"))
    }

    /// As [`Registry::push`], with whatever login the CLI holds (none unless a test logged in):
    /// the digest, or the CLI's stderr (`no basic auth credentials`…).
    pub(crate) fn try_push(&self, local: &str, repo_tag: &str) -> Result<String, String> {
        let remote = self.image(repo_tag);
        let mut tag = self.docker();
        tag.args(["tag", local, &remote]);
        cli(tag, None).unwrap();
        self.push_and_untag(&remote)
    }

    /// `docker push remote`, then `remote` removed from the engine, pushed or not: the digest,
    /// or the CLI's stderr.
    fn push_and_untag(&self, remote: &str) -> Result<String, String> {
        let mut push = self.docker();
        push.args(["push", remote]);
        let pushed = cli(push, None);
        self.delete_local(remote);
        // Its last line: `1: digest: sha256:… size: 739`.
        let out = pushed?;
        let digest = out
            .split_whitespace()
            .skip_while(|w| *w != "digest:")
            .nth(1)
            .unwrap_or_else(|| panic!("no digest in docker push's output:\n{out}"));
        Ok(digest.to_owned())
    }

    /// `docker pull` of `repo_tag` with whatever login the CLI holds: the CLI's stderr when it
    /// fails. The image stays in the engine (until [`Registry::delete_local`] or the drop).
    pub(crate) fn try_pull(&self, repo_tag: &str) -> Result<(), String> {
        let mut pull = self.docker();
        pull.args(["pull", "--quiet", &self.image(repo_tag)]);
        cli(pull, None).map(drop)
    }

    /// Removes the reference `image` from the engine (nothing if it has none). The image's
    /// layers go with it only when no other tag holds them.
    pub(crate) fn delete_local(&self, image: &str) {
        let mut rm = self.docker();
        rm.args(["image", "rm", image]);
        if let Err(e) = cli(rm, None) {
            assert!(e.contains("No such image"), "removing `{image}`: {e}");
        }
    }

    /// Builds an image only this call has, `/nonce` plus one layer of random bytes per entry of
    /// `layers_mib` on the base image, pushes it as `repo_tag` and removes it from the engine:
    /// a pull of it downloads every layer above the base's. Two calls with one `repo_tag` move
    /// the tag.
    pub(crate) fn push_unique(&self, repo_tag: &str, layers_mib: &[u64]) -> Unique {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let nonce = format!("{}-{}-{nanos}", self.addr.port(), std::process::id());
        let mut dockerfile = format!("FROM {BASE}\nRUN echo {nonce} >/nonce\n");
        for (i, mib) in layers_mib.iter().enumerate() {
            dockerfile.push_str(&format!(
                "RUN head -c {} /dev/urandom >/layer-{i}\n",
                mib * 1024 * 1024
            ));
        }
        // Built straight under this registry's address, so no other tag holds its layers and
        // removing that tag removes them.
        let remote = self.image(repo_tag);
        let mut build = self.docker();
        build
            .args(["build", "--quiet", "--tag", &remote, "-"])
            .env("DOCKER_BUILDKIT", "0");
        cli(build, Some(&dockerfile)).unwrap_or_else(|e| panic!("building `{remote}`: {e}"));
        if self.credentials.is_some() {
            self.login();
        }
        let digest = self
            .push_and_untag(&remote)
            .unwrap_or_else(|e| panic!("pushing `{remote}`: {e}"));
        Unique { digest, nonce }
    }

    /// The manifest of `reference` (`repo:tag` or `repo@sha256:…`), as a pull reads it.
    pub(crate) fn manifest(&self, reference: &str) -> Manifest {
        let path = manifest_path(reference);
        let answer = self.api("GET", &path, &[("Accept", MANIFEST_TYPES)]);
        assert_eq!(answer.status, 200, "GET {path}: {}", answer.text());
        let json: Value = serde_json::from_slice(&answer.body).unwrap();
        let blob = |b: &Value| Blob {
            digest: b["digest"].as_str().unwrap().to_owned(),
            size: b["size"].as_u64().unwrap(),
            media_type: b["mediaType"].as_str().unwrap_or_default().to_owned(),
        };
        Manifest {
            digest: answer
                .header("Docker-Content-Digest")
                .expect("the registry names a manifest's digest")
                .to_owned(),
            media_type: json["mediaType"].as_str().unwrap_or_default().to_owned(),
            config: blob(&json["config"]),
            layers: json["layers"]
                .as_array()
                .unwrap_or_else(|| panic!("not an image manifest: {json}"))
                .iter()
                .map(blob)
                .collect(),
        }
    }

    /// Deletes the manifest `reference` names (a tag is resolved to its digest first): every
    /// tag of it goes, and a pull of it answers `manifest unknown`.
    pub(crate) fn delete_manifest(&self, reference: &str) {
        let digest = self.manifest(reference).digest;
        let repo = split_reference(reference).0;
        let path = format!("/v2/{repo}/manifests/{digest}");
        let answer = self.api("DELETE", &path, &[]);
        assert_eq!(answer.status, 202, "DELETE {path}: {}", answer.text());
    }

    /// One request to the registry's API, with its credentials when it has them.
    pub(crate) fn api(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        let credentials = self
            .credentials
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()));
        self.api_as(credentials, method, path, headers)
    }

    /// One request as `credentials` (`None`: anonymous); panics when the registry does not
    /// answer within 30 s.
    pub(crate) fn api_as(
        &self,
        credentials: Option<(&str, &str)>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Response {
        let mut all: Vec<(&str, String)> =
            headers.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        if let Some((user, password)) = credentials {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            all.push(("Authorization", format!("Basic {token}")));
        }
        request(self.addr, method, path, &all, ANSWER_LIMIT)
            .unwrap_or_else(|e| panic!("{method} {path} on the registry: {e}\n{}", self.log()))
    }

    /// The status of `GET /v2/` if the registry answers within `limit`; `None` when nothing
    /// listens (killed) or it listens and stays silent (paused).
    pub(crate) fn probe(&self, limit: Duration) -> Option<u16> {
        request(self.addr, "GET", "/v2/", &[], limit)
            .ok()
            .map(|r| r.status)
    }

    /// SIGKILL: the registry is gone at once, mid-transfer; its storage stays for
    /// [`Registry::restart`].
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = signal(-pid(&child), Signal::KILL);
            let _ = child.wait();
        }
    }

    /// Starts the registry again on the same port and storage (after [`Registry::kill`]).
    pub(crate) fn restart(&mut self) {
        self.kill();
        if let Err(log) = self.run() {
            panic!(
                "the registry did not start again on {}:\n{log}",
                self.host()
            );
        }
    }

    /// SIGSTOP: connections stay open and new ones are accepted by the kernel, but nothing is
    /// answered or sent (a stalled registry) until [`Registry::resume`]. Returns once every
    /// thread of it has stopped: a signal is only delivered when a thread next runs.
    pub(crate) fn pause(&self) {
        self.signal_group(Signal::STOP);
        self.wait_for_threads("stopped", |state| state == 'T');
    }

    /// SIGCONT: a paused registry carries on where it stopped.
    pub(crate) fn resume(&self) {
        self.signal_group(Signal::CONT);
        self.wait_for_threads("running again", |state| state != 'T');
    }

    fn signal_group(&self, sig: Signal) {
        let child = self.child.as_ref().expect("the registry is running");
        signal(-pid(child), sig).unwrap_or_else(|e| panic!("sending {sig:?} to the registry: {e}"));
    }

    /// Waits until the state (`/proc/PID/task/*/stat`) of every thread of the registry is `done`.
    fn wait_for_threads(&self, what: &str, done: impl Fn(char) -> bool) {
        let pid = pid(self.child.as_ref().expect("the registry is running"));
        poll_until(
            &format!("the registry's threads {what}"),
            Duration::from_secs(10),
            || thread_states(pid),
            |states| !states.is_empty() && states.iter().all(|s| done(*s)),
        );
    }

    fn write_config(&self) {
        let dir = self.dir.path();
        let mut config = format!(
            "version: 0.1\n\
             log:\n  level: warn\n\
             storage:\n  filesystem:\n    rootdirectory: \"{}\"\n  delete:\n    enabled: true\n\
             http:\n  addr: \"{}\"\n  secret: gpuflow-test-registry\n",
            dir.join("storage").display(),
            self.addr
        );
        if self.credentials.is_some() {
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: gpuflow-test\n    path: \"{}\"\n",
                dir.join("htpasswd").display()
            ));
        }
        std::fs::write(dir.join("config.yml"), config).unwrap();
    }

    /// Starts the process and waits for `GET /v2/` to answer (200, or 401 with auth); the log
    /// when it exits first.
    fn run(&mut self) -> Result<(), String> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.dir.path().join("registry.log"))
            .unwrap();
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            // Its own group: a signal reaches it whole, and the tests' group's never does.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "`{REGISTRY_BIN}` does not run ({e}): install Debian's docker-registry \
                     (`sudo make test-deps`)"
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let child = self.child.as_mut().unwrap();
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return Err(format!("it exited with {status}:\n{}", self.log()));
            }
            if let Some(200 | 401) = self.probe(Duration::from_millis(500)) {
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "the registry did not answer GET /v2/ on {} within {START_LIMIT:?}:\n{}",
                self.addr,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every reference the engine holds under this registry's address, as `docker image rm`
    /// takes them (`repo:tag`, or `repo@digest` for an image pulled by digest); the CLI's
    /// stderr when it cannot list them.
    fn local_images(&self) -> Result<Vec<String>, String> {
        let mut ls = self.docker();
        ls.args([
            "image",
            "ls",
            "--digests",
            "--format",
            "{{.Repository}}\t{{.Tag}}\t{{.Digest}}",
        ]);
        let listed = cli(ls, None)?;
        let prefix = format!("{}/", self.host());
        Ok(listed
            .lines()
            .filter_map(|line| {
                let mut fields = line.split('\t');
                let (repo, tag, digest) = (fields.next()?, fields.next()?, fields.next()?);
                if !repo.starts_with(&prefix) {
                    None
                } else if tag != "<none>" {
                    Some(format!("{repo}:{tag}"))
                } else {
                    Some(format!("{repo}@{digest}"))
                }
            })
            .collect())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.kill();
        // A panic here would abort a test that is already failing: say what stays instead.
        let images = self.local_images().unwrap_or_else(|e| {
            eprintln!(
                "the images of the registry at {} stay in the engine: {e}",
                self.host()
            );
            Vec::new()
        });
        for image in images {
            let mut rm = self.docker();
            rm.args(["image", "rm", &image]);
            if let Err(e) = cli(rm, None) {
                eprintln!("the registry's image `{image}` stays in the engine: {e}");
            }
        }
    }
}

fn pid(child: &Child) -> i32 {
    i32::try_from(child.id()).unwrap()
}

/// The state letter (`R`, `S`, `T` for stopped…) of each thread of process `pid`.
fn thread_states(pid: i32) -> Vec<char> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("stat")).ok())
        // `PID (COMMAND) STATE …`: the command may hold spaces and parentheses.
        .filter_map(|stat| stat.rsplit_once(") ")?.1.chars().next())
        .collect()
}

/// `repo:tag` or `repo@digest` → (`repo`, `tag` or `digest`); no tag means `latest`.
fn split_reference(reference: &str) -> (&str, &str) {
    if let Some(split) = reference.split_once('@') {
        return split;
    }
    let name_start = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[name_start..].rfind(':') {
        Some(colon) => (
            &reference[..name_start + colon],
            &reference[name_start + colon + 1..],
        ),
        None => (reference, "latest"),
    }
}

fn manifest_path(reference: &str) -> String {
    let (repo, tag) = split_reference(reference);
    format!("/v2/{repo}/manifests/{tag}")
}

/// Runs a Docker CLI command (with `stdin` written to it): its stdout, or its stderr when it
/// fails.
fn cli(mut command: Command, stdin: Option<&str>) -> Result<String, String> {
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("the docker CLI does not run: {e}"));
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(super::text(&out.stdout))
    } else {
        Err(super::text(&out.stderr))
    }
}

/// `user:bcrypt(password)` into `path`, by apache2-utils' `htpasswd` (the password on stdin).
fn write_htpasswd(path: &Path, user: &str, password: &str) {
    let mut htpasswd = Command::new("htpasswd");
    htpasswd.args(["-n", "-i", "-B", user]);
    let line = cli(htpasswd, Some(password)).unwrap_or_else(|e| {
        panic!("htpasswd failed: {e} (install Debian's apache2-utils: `sudo make test-deps`)")
    });
    std::fs::write(path, line.trim_end()).unwrap();
}

/// One HTTP/1.0 request (the answer ends with the connection, never chunked); an error when
/// nothing listens or no answer comes within `limit`.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    limit: Duration,
) -> io::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, limit)?;
    stream.set_read_timeout(Some(limit))?;
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    stream.write_all(format!("{head}\r\n").as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::other(format!("no HTTP head in {:?}", super::text(&answer))))?;
    let head = super::text(&answer[..split]);
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("no HTTP status in {head:?}")))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(Response {
        status,
        headers,
        body: answer[split + 4..].to_vec(),
    })
}
