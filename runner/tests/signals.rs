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

/// After a job panics (a bug in gpuflow, contained: that job fails), the rest of the run goes
/// on and Ctrl-C still ends it: the other job's 5-minute host step is cancelled and the process
/// exits 130. Before the containment, the dispatcher spun on the panicked job and ignored
/// SIGINT. The panic is a real one, asked for through a debug-build-only variable.
#[test]
fn sigint_ends_a_run_after_a_job_panicked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("w.yml"),
        "jobs:\n  boom:\n    steps:\n      - run: 'true'\n      - run: echo never\n  \
         long:\n    steps:\n      - run: sleep 300\n",
    )
    .unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "w.yml"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "-m",
        "workflow",
    ]);
    let child = Command::new(assert_cmd::cargo::cargo_bin("gpuflow"))
        .args(["run", "--plain", "w.yml"])
        .current_dir(dir.path())
        .env_remove("GPUFLOW_STORE")
        .env("NO_COLOR", "1")
        .env("GPUFLOW_TEST_PANIC_IN_STEP", "2")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reap = Reap(Some(child));
    let mut stdout = BufReader::new(reap.0.as_mut().unwrap().stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let line = read_line(&mut stdout);
        assert!(!line.is_empty(), "gpuflow ended before the panic:\n{seen}");
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("gpuflow panicked in this step") {
            break;
        }
    }
    send(reap.0.as_ref().unwrap(), "INT");
    // A run that ignores the signal would block the read below forever: end it after a
    // minute, so the test fails ("exited, not killed") instead of hanging.
    let pid = reap.0.as_ref().unwrap().id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(60));
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
    });
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let (code, stderr) = finish(&mut reap);
    assert_eq!(code, 130, "{seen}{rest}{stderr}");
    assert!(stderr.contains("received SIGINT: cancelling"), "{stderr}");
}
