//! A real llama.cpp `llama-server` as a process on 127.0.0.1, for the real-server tests
//! (`llama_server.rs`) and `make bench` (`benches/real_server.rs`, which includes this file):
//! the build script's folder, a free port, start-up until `/health` answers 200, and the kill
//! when dropped (a panic included).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The folder the build script prints: `bin/llama-server`, `models/{tiny,small}.gguf`.
/// Building takes ~10 minutes the first time; `make test` (through `make test-images`),
/// `.ci/run` and `make bench` build it first, so here it is normally found at once.
pub fn llama_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/llamacpp/llama-server.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs the llama-server build script");
        assert!(
            out.status.success(),
            "images/llamacpp/llama-server.sh failed: the real-server tests and benches need llama-server"
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// A llama-server process on 127.0.0.1, killed when dropped.
pub struct LlamaServer {
    pub child: Child,
    pub addr: SocketAddr,
}

impl LlamaServer {
    /// Starts it serving `models/<model>.gguf` and waits until `/health` answers 200.
    pub fn ready(model: &str, args: &[&str]) -> Result<Self, String> {
        let dir = llama_dir();
        // A free port of 127.0.0.1: the OS's choice, released at once.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(dir.join("bin/llama-server"))
            .arg("-m")
            .arg(dir.join("models").join(format!("{model}.gguf")))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--threads", "2", "--no-webui"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("llama-server does not start: {e}"))?;
        // Drain its log so it never blocks on a full pipe.
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || BufReader::new(stderr).lines().for_each(drop));
        let mut server = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while health(server.addr) != Some(200) {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("llama-server ({model}) exited at start: {status}"));
            }
            if Instant::now() > deadline {
                return Err(format!("llama-server ({model}) not ready within 60 s"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(server)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /health`'s status, or `None` when nothing listens yet.
pub fn health(addr: SocketAddr) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}
