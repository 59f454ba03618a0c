//! Real signals sent to a real `gpuflow` process: `__wait-for-signal` runs the signal handling
//! `gpuflow run` uses (runner/src/signal.rs). Asserts outcomes (exit status, what it printed),
//! not timings.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

fn spawn_waiting(args: &[&str]) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("gpuflow"))
        .arg("__wait-for-signal")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // `ready` comes after the handler is installed: a signal sent now is caught, not fatal.
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    (child, stdout)
}

fn send(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} failed");
}

fn read_line(stdout: &mut BufReader<std::process::ChildStdout>) -> String {
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    line.trim_end().to_string()
}

/// Ends the child if an assertion failed before it exited.
struct Reap(Option<Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn finish(reap: &mut Reap) -> (i32, String) {
    let mut child = reap.0.take().unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code().expect("exited, not killed"), stderr)
}

#[test]
fn sigint_cancels_and_exits_130() {
    let (child, mut stdout) = spawn_waiting(&[]);
    let mut reap = Reap(Some(child));
    send(reap.0.as_ref().unwrap(), "INT");
    assert_eq!(read_line(&mut stdout), "cancelled by SIGINT");
    assert_eq!(read_line(&mut stdout), "cleaned up");
    let (code, stderr) = finish(&mut reap);
    assert_eq!(code, 130, "{stderr}");
    assert!(
        stderr.contains("received SIGINT (#1): cancelling (again to force)"),
        "{stderr}"
    );
}

#[test]
fn sigterm_is_a_shutdown_too() {
    let (child, mut stdout) = spawn_waiting(&[]);
    let mut reap = Reap(Some(child));
    send(reap.0.as_ref().unwrap(), "TERM");
    assert_eq!(read_line(&mut stdout), "cancelled by SIGTERM");
    let (code, _) = finish(&mut reap);
    assert_eq!(code, 130);
}

#[test]
fn a_second_signal_forces_the_clean_up_to_stop_waiting() {
    // The pretended clean-up would take ten minutes: only the second signal ends it.
    let (child, mut stdout) = spawn_waiting(&["--cleanup-secs", "600"]);
    let mut reap = Reap(Some(child));
    send(reap.0.as_ref().unwrap(), "TERM");
    assert_eq!(read_line(&mut stdout), "cancelled by SIGTERM");
    send(reap.0.as_ref().unwrap(), "INT");
    assert_eq!(read_line(&mut stdout), "forced");
    let (code, stderr) = finish(&mut reap);
    assert_eq!(code, 130, "{stderr}");
    assert!(stderr.contains("received SIGINT (#2): forcing"), "{stderr}");
}
