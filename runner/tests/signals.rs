//! Real signals sent to a real `gpuflow` process: `__wait-for-signal` runs the signal handling
//! `gpuflow run` uses (runner/src/signal.rs). Asserts outcomes (exit status, what it printed),
//! not timings.

use std::time::Duration;

use crate::support::process::signal;
use crate::support::{Running, Signal, Workspace, gpuflow};

/// `gpuflow __wait-for-signal ARGS`, once it says `ready`: its handler is installed, so a
/// signal sent now is caught, not fatal.
fn spawn_waiting(args: &[&str]) -> Running {
    let mut child = gpuflow().arg("__wait-for-signal").args(args).spawn();
    assert_eq!(child.line(), "ready");
    child
}

/// Waits for the exit: (exit code, stderr); a process ended by a signal fails the test.
fn finish(child: Running) -> (i32, String) {
    let (status, stderr) = child.wait();
    (status.code().expect("exited, not killed"), stderr)
}

#[test]
fn sigint_cancels_and_exits_130() {
    let mut child = spawn_waiting(&[]);
    child.signal(Signal::INT);
    assert_eq!(child.line(), "cancelled by SIGINT");
    assert_eq!(child.line(), "cleaned up");
    let (code, stderr) = finish(child);
    assert_eq!(code, 130, "{stderr}");
    assert!(
        stderr.contains("received SIGINT (#1): cancelling (again to force)"),
        "{stderr}"
    );
}

#[test]
fn sigterm_is_a_shutdown_too() {
    let mut child = spawn_waiting(&[]);
    child.signal(Signal::TERM);
    assert_eq!(child.line(), "cancelled by SIGTERM");
    let (code, _) = finish(child);
    assert_eq!(code, 130);
}

#[test]
fn a_second_signal_forces_the_clean_up_to_stop_waiting() {
    // The pretended clean-up would take ten minutes: only the second signal ends it.
    let mut child = spawn_waiting(&["--cleanup-secs", "600"]);
    child.signal(Signal::TERM);
    assert_eq!(child.line(), "cancelled by SIGTERM");
    child.signal(Signal::INT);
    assert_eq!(child.line(), "forced");
    let (code, stderr) = finish(child);
    assert_eq!(code, 130, "{stderr}");
    assert!(stderr.contains("received SIGINT (#2): forcing"), "{stderr}");
}

/// After a job panics (a bug in gpuflow, contained: that job fails), the rest of the run goes
/// on and Ctrl-C still ends it: the other job's 5-minute host step is cancelled and the process
/// exits 130. Before the containment, the dispatcher spun on the panicked job and ignored
/// SIGINT. The panic is a real one, asked for through a debug-build-only variable.
#[test]
fn sigint_ends_a_run_after_a_job_panicked() {
    let dir = Workspace::repository()
        .file(
            "w.yml",
            "jobs:\n  boom:\n    steps:\n      - run: 'true'\n      - run: echo never\n  \
             long:\n    steps:\n      - run: sleep 300\n",
        )
        .committed("workflow");
    let mut child = dir
        .gpuflow()
        .args(["run", "--plain", "w.yml"])
        .env("GPUFLOW_TEST_PANIC_IN_STEP", "2")
        .spawn();
    let mut seen = String::new();
    loop {
        let line = child.line();
        assert!(!line.is_empty(), "gpuflow ended before the panic:\n{seen}");
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("gpuflow panicked in this step") {
            break;
        }
    }
    child.signal(Signal::INT);
    // A run that ignores the signal would block the read below forever: end it after a
    // minute, so the test fails ("exited, not killed") instead of hanging.
    let pid = child.id();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        let _ = signal(pid as i32, Signal::KILL);
    });
    let rest = child.rest();
    let (code, stderr) = finish(child);
    assert_eq!(code, 130, "{seen}{rest}{stderr}");
    assert!(stderr.contains("received SIGINT: cancelling"), "{stderr}");
}
