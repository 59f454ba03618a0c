//! Shared by the serving benchmarks: `gpuflow-sim` run as its own process on CPU 0, and the
//! `taskset` pinning that keeps a client off the simulator's core.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SIM: &str = env!("CARGO_BIN_EXE_gpuflow-sim");

/// The simulator's core; clients that run as their own process go on `CLIENT_CPU`.
pub const SIM_CPU: &str = "0";
#[allow(dead_code, reason = "serving.rs runs its clients in-process")]
pub const CLIENT_CPU: &str = "1";

/// Whether this machine has two CPUs to separate server and client, and `taskset` to do it.
pub fn can_pin() -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    cpus >= 2 && Command::new("taskset").arg("-V").output().is_ok()
}

/// `program` on `cpu` when the machine allows it (`taskset` execs it: same process), else as is.
pub fn pinned(cpu: &str, program: impl AsRef<OsStr>) -> Command {
    if can_pin() {
        let mut c = Command::new("taskset");
        c.args(["-c", cpu]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

pub struct Sim {
    child: Child,
    pub url: String,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

pub fn start_sim(args: &[&str]) -> Sim {
    let mut child = pinned(SIM_CPU, SIM)
        .args(["--host", "127.0.0.1", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("gpuflow-sim starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .split("listening on ")
        .nth(1)
        .expect("the first line gives the address")
        .trim()
        .to_owned();
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    // `--port 0` servers are ready at once; wait for /health anyway.
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr = url.trim_start_matches("http://").to_owned();
    while std::net::TcpStream::connect(&addr).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    Sim { child, url }
}
