//! git as the tests run it: a throw-away identity, and the caller's `GIT_DIR` (set when the
//! suite runs from a git hook) never pointing a test's command at another repository.

use std::path::Path;
use std::process::Command;

/// Runs git in `dir`; fails the test with git's stderr when git fails. Returns stdout without
/// its trailing newline.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}
