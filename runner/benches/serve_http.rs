//! Shared by `serve.rs`: `gpuflow serve` as a child process (its address, its memory from
//! `/proc`), a plain HTTP/1.1 client on fresh connections, and latency quantiles.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

const GPUFLOW: &str = env!("CARGO_BIN_EXE_gpuflow");

/// `gpuflow serve` on a free loopback port.
pub struct Server {
    child: Child,
    pub addr: String,
}

#[derive(Clone, Copy)]
pub struct Memory {
    /// KiB.
    pub rss: u64,
    pub hwm: u64,
    /// Its threads: the blocking pool's count in (a request's file reads run there).
    pub threads: u64,
}

impl Server {
    pub fn start(project: &Path, store: &Path, home: &Path) -> Self {
        let mut child = Command::new(GPUFLOW)
            .args(["serve", "--listen", "127.0.0.1:0", "--project"])
            .arg(project)
            .arg("--store")
            .arg(store)
            .env("GPUFLOW_HOME", home)
            .stdout(Stdio::piped())
            .spawn()
            .expect("gpuflow serve starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout
            .read_line(&mut first)
            .expect("it says where it listens");
        let addr = first
            .trim()
            .strip_prefix("gpuflow serve: http://")
            .and_then(|a| a.strip_suffix('/'))
            .unwrap_or_else(|| panic!("where it listens: {first:?}"))
            .to_string();
        // The rest of what it says, read so that it never writes to a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Self { child, addr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn memory(&self) -> Memory {
        Memory {
            rss: status_kib(self.pid(), "VmRSS:"),
            hwm: status_kib(self.pid(), "VmHWM:"),
            threads: status_kib(self.pid(), "Threads:"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `/proc/PID/status` figure (KiB for the memory ones).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let mut status = String::new();
    std::fs::File::open(format!("/proc/{pid}/status"))
        .and_then(|mut f| f.read_to_string(&mut status))
        .expect("the server's /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The server's highest RSS, sampled every 20 ms from another thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl Sampler {
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                p.fetch_max(status_kib(pid, "VmRSS:"), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self { stop, peak, thread }
    }

    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the sampler");
        self.peak.load(Ordering::SeqCst)
    }
}

/// One GET on a fresh connection: status and body.
pub async fn get(addr: &str, path: &str) -> (u16, Bytes) {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("the server accepts");
    stream.set_nodelay(true).ok();
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .expect("an HTTP/1.1 connection");
    tokio::spawn(conn);
    let request = Request::get(path)
        .header("host", addr)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.expect("an answer");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    (status, body)
}

/// [`timed`] from a thread and runtime of its own: the followers' tasks on this runtime must
/// not queue ahead of the page's request and count as the server's time.
pub async fn timed_apart(addr: &str, path: &str, n: usize, gap: Duration) -> Latencies {
    let (addr, path) = (addr.to_string(), path.to_string());
    tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(timed(&addr, &path, n, gap))
    })
    .await
    .expect("the page's requests")
}

/// `n` requests of `path`, each `gap` after the previous one ended, after one to warm up.
pub async fn timed(addr: &str, path: &str, n: usize, gap: Duration) -> Latencies {
    get(addr, path).await;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        tokio::time::sleep(gap).await;
        let start = Instant::now();
        let (status, _) = get(addr, path).await;
        times.push(start.elapsed());
        assert_eq!(status, 200, "GET {path}");
    }
    Latencies::of(times)
}

pub struct Latencies(Vec<Duration>);

impl Latencies {
    pub fn of(mut times: Vec<Duration>) -> Self {
        times.sort();
        Self(times)
    }

    /// Nearest rank.
    pub fn quantile(&self, q: f64) -> Duration {
        let rank = ((q * self.0.len() as f64).ceil() as usize).clamp(1, self.0.len());
        self.0[rank - 1]
    }

    pub fn show(&self) -> String {
        format!(
            "p50 {:>6.2} ms  p99 {:>6.2} ms  max {:>6.2} ms",
            ms(self.quantile(0.5)),
            ms(self.quantile(0.99)),
            ms(self.0[self.0.len() - 1])
        )
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Who kept the CPUs busy over a stretch: the machine, this client, the server. The machine
/// is shared, so the rest (other work, here also a run's step) says how much the tails of
/// the latencies measured meanwhile owe to others.
pub struct CpuShare {
    start: Instant,
    machine: f64,
    client: f64,
    server: f64,
    server_pid: u32,
}

impl CpuShare {
    pub fn begin(server_pid: u32) -> Self {
        Self {
            start: Instant::now(),
            machine: machine_busy_s(),
            client: gpuflow::bench::process_cpu_time().as_secs_f64(),
            server: process_cpu_s(server_pid),
            server_pid,
        }
    }

    /// `machine busy 1.2 of 2 CPUs: client 0.4, server 0.5, others 0.3`, in CPUs.
    pub fn end(&self) -> String {
        let wall = self.start.elapsed().as_secs_f64().max(1e-9);
        let machine = (machine_busy_s() - self.machine) / wall;
        let client = (gpuflow::bench::process_cpu_time().as_secs_f64() - self.client) / wall;
        let server = (process_cpu_s(self.server_pid) - self.server) / wall;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        format!(
            "CPUs busy meanwhile: {machine:.2} of {cpus} — client {client:.2}, server {server:.2}, others {:.2}",
            (machine - client - server).max(0.0)
        )
    }
}

/// CPU seconds the whole machine has spent busy (`/proc/stat`: all but idle and iowait).
fn machine_busy_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        // user nice system idle iowait irq softirq steal; guest time is within user.
        .skip(1)
        .take(8)
        .filter_map(|t| t.parse().ok())
        .collect();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    let busy = ticks.iter().sum::<u64>().saturating_sub(idle);
    busy as f64 / rustix::param::clock_ticks_per_second() as f64
}

/// Process `pid`'s CPU seconds (user + system).
fn process_cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command name, which may hold spaces: state is field 3, utime and stime 14, 15.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / rustix::param::clock_ticks_per_second() as f64
}
