//! Remote actions (`uses: owner/repo[/path]@ref`) end to end: a second real git repository
//! holds the action and is served as a bare repository over `file://`, as a team's own git
//! server would; `gpuflow validate`, `run` and `actions update` run as a user runs them.
//! Workflows here use `run:` steps on the host only, so no container is started (`run`
//! still sweeps at start, hence the docker-sweep group).

use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::Duration;

use crate::support::{Running, Workspace, free_port, git, gpuflow, wait_until};

/// A team's action repository (`team/gpu-actions`, the action in `hello/`) with tag `v1`,
/// pushed to a bare "server" repository, and a workspace whose `gpuflow.toml` names a
/// source without it first, then the server.
struct Setup {
    root: Workspace,
}

const ACTION: &str = r#"name: hello
inputs:
  who: { required: true }
outputs:
  said: { value: "${{ steps.say.outputs.said }}" }
runs:
  using: composite
  steps:
    - id: say
      run: echo "said=hello ${{ inputs.who }} from VERSION" >> "$GITHUB_OUTPUT"
"#;

const WORKFLOW: &str = r#"jobs:
  greet:
    steps:
      - id: hello
        uses: team/gpu-actions/hello@v1
        with: { who: gpus }
      - run: echo "${{ steps.hello.outputs.said }}"
"#;

impl Setup {
    fn new() -> Self {
        let root = Workspace::empty();
        let p = &root.path().to_path_buf();
        let src = p.join("src");
        std::fs::create_dir_all(src.join("hello")).unwrap();
        git(&src, &["init", "-q", "-b", "main"]);
        let s = Self { root };
        s.commit_version("v1");
        git(&src, &["tag", "v1"]);
        std::fs::create_dir_all(p.join("srv/team")).unwrap();
        git(
            p,
            &["clone", "-q", "--bare", "src", "srv/team/gpu-actions.git"],
        );
        let ws = s.workspace();
        std::fs::create_dir_all(&ws).unwrap();
        git(&ws, &["init", "-q", "-b", "main"]);
        std::fs::write(
            ws.join("gpuflow.toml"),
            format!(
                "[actions]\nsources = [\"file://{0}/mirror/{{owner}}/{{repo}}.git\", \"file://{0}/srv/{{owner}}/{{repo}}.git\"]\ncache = \"{0}/cache\"\n",
                p.display()
            ),
        )
        .unwrap();
        std::fs::write(ws.join("w.yml"), WORKFLOW).unwrap();
        s
    }

    fn path(&self) -> &Path {
        self.root.path()
    }

    fn workspace(&self) -> PathBuf {
        self.path().join("ws")
    }

    fn commit_version(&self, version: &str) {
        let src = self.path().join("src");
        std::fs::write(
            src.join("hello/action.yml"),
            ACTION.replace("VERSION", version),
        )
        .unwrap();
        git(&src, &["add", "-A"]);
        git(&src, &["commit", "-q", "-m", version]);
    }

    /// Moves tag `v1` to a new commit and force-pushes it to the server; returns the commit.
    fn move_tag_to_v2(&self) -> String {
        self.commit_version("v2");
        let src = self.path().join("src");
        git(&src, &["tag", "-f", "v1"]);
        let server = self.path().join("srv/team/gpu-actions.git");
        git(
            &src,
            &["push", "-q", "-f", server.to_str().unwrap(), "main", "v1"],
        );
        git(&src, &["rev-parse", "v1"])
    }

    fn tag_commit(&self) -> String {
        git(
            &self.path().join("srv/team/gpu-actions.git"),
            &["rev-parse", "v1^{commit}"],
        )
    }

    fn gpuflow(&self, args: &[&str]) -> (i32, String, String) {
        let out = gpuflow().current_dir(self.workspace()).args(args).output();
        (out.code().unwrap_or(-1), out.stdout, out.stderr)
    }

    fn locked_commit(&self) -> String {
        let lock = std::fs::read_to_string(self.workspace().join("gpuflow.lock")).unwrap();
        let line = lock
            .lines()
            .find(|l| l.starts_with("commit = "))
            .unwrap_or_else(|| panic!("no commit in the lock:\n{lock}"));
        line.trim_start_matches("commit = ")
            .trim_matches('"')
            .to_owned()
    }
}

#[test]
fn a_remote_action_runs_at_the_locked_commit_until_actions_update_moves_it() {
    let s = Setup::new();
    let v1 = s.tag_commit();

    let (code, stdout, stderr) = s.gpuflow(&["run", "--plain", "w.yml"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("hello gpus from v1"), "{stdout}");
    assert_eq!(s.locked_commit(), v1);
    let lock = std::fs::read_to_string(s.workspace().join("gpuflow.lock")).unwrap();
    assert!(
        lock.contains(&format!(
            "[[action]]\nrepo = \"team/gpu-actions\"\nref = \"v1\"\ncommit = \"{v1}\"\nsource = \"file://{}/srv/team/gpu-actions.git\"\n",
            s.path().display()
        )),
        "{lock}"
    );

    // The team moves the tag: gpuflow says so, with both commits, and keeps running v1.
    let v2 = s.move_tag_to_v2();
    assert_ne!(v1, v2);
    let (code, _, stderr) = s.gpuflow(&["validate", "w.yml"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "warning: `team/gpu-actions@v1` moved: `gpuflow.lock` pins {}",
            &v1[..7]
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("now has {}", &v2[..7])),
        "{stderr}"
    );
    assert!(stderr.contains("w.yml:5:15"), "{stderr}");
    assert!(
        stderr.contains("gpuflow actions update team/gpu-actions@v1"),
        "{stderr}"
    );
    let (code, stdout, stderr) = s.gpuflow(&["run", "--plain", "w.yml"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("hello gpus from v1"), "{stdout}");
    assert_eq!(s.locked_commit(), v1);

    // `actions update` moves the lock; the next run runs v2 and warns no more.
    let (code, stdout, stderr) = s.gpuflow(&["actions", "update", "team/gpu-actions@v1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), format!("team/gpu-actions@v1: {v1} -> {v2}"));
    assert_eq!(s.locked_commit(), v2);
    let (code, stdout, stderr) = s.gpuflow(&["run", "--plain", "w.yml"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("hello gpus from v2"), "{stdout}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn a_missing_ref_and_an_unreachable_source_are_errors_at_the_uses() {
    let s = Setup::new();
    std::fs::write(
        s.workspace().join("w.yml"),
        "jobs:\n  a:\n    steps:\n      - uses: team/gpu-actions/hello@v9\n        with: { who: x }\n      - uses: team/absent@v1\n",
    )
    .unwrap();
    let (code, _, stderr) = s.gpuflow(&["validate", "w.yml"]);
    assert_eq!(code, 1, "{stderr}");
    let root = s.path().display().to_string();
    for expected in [
        "error: `team/gpu-actions` has no branch, tag or commit `v9`\n --> w.yml:4:15",
        &format!("not in file://{root}/srv/team/gpu-actions.git"),
        "= note: tags: `v1`",
        "= help: write a tag, a branch or a full commit id after `@`",
        "error: cannot fetch action repository `team/absent`\n --> w.yml:6:15",
        &format!("= note: tried file://{root}/mirror/team/absent.git: "),
        &format!("= note: tried file://{root}/srv/team/absent.git: "),
        "[actions] sources",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in\n{stderr}"
        );
    }
    // `plan` and `run` resolve the same way, and refuse before anything starts.
    let (code, _, plan_err) = s.gpuflow(&["plan", "w.yml"]);
    assert_eq!(code, 3, "{plan_err}");
    assert!(
        plan_err.contains("has no branch, tag or commit `v9`"),
        "{plan_err}"
    );
    // Nothing half-made is left: no lock entry, no empty repository for the mirror that
    // does not have it, no temporary checkout.
    assert!(!s.workspace().join("gpuflow.lock").exists());
    let repos: Vec<String> = std::fs::read_dir(s.path().join("cache/repos"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".git"))
        .collect();
    assert_eq!(
        repos.len(),
        1,
        "only the server's repository is cached: {repos:?}"
    );
}

#[test]
fn concurrent_first_uses_pin_one_commit_and_share_one_checkout() {
    let s = Setup::new();
    let children: Vec<_> = (0..6)
        .map(|_| {
            gpuflow()
                .current_dir(s.workspace())
                .args(["validate", "w.yml"])
                .spawn()
        })
        .collect();
    for child in children {
        let (status, stderr) = child.wait();
        assert!(status.success(), "{stderr}");
    }
    assert_eq!(s.locked_commit(), s.tag_commit());
    let trees: Vec<String> = std::fs::read_dir(s.path().join("cache/trees"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(trees, [s.tag_commit()]);
}

/// A source that is not `file://` is fetched by the `git` program: here a real `git daemon`
/// on the loopback, as a team's server would serve it over `git://` (or `ssh://`, `https://`).
#[test]
fn a_git_server_source_is_fetched_with_the_git_program() {
    let s = Setup::new();
    let port = free_port();
    let srv = s.path().join("srv");
    // `git-daemon` itself, not `git daemon`: the wrapper would run it as a child that
    // outlives the wrapper's kill.
    let exec_path = git(s.path(), &["--exec-path"]);
    // Stopped when dropped.
    let _daemon = Running::new(
        Process::new(Path::new(&exec_path).join("git-daemon"))
            .args(["--reuseaddr", "--export-all", "--listen=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", srv.display()))
            .arg(&srv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon starts"),
    );
    wait_until("git daemon to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    std::fs::write(
        s.workspace().join("gpuflow.toml"),
        format!(
            "[actions]\nsources = [\"git://127.0.0.1:{port}/{{owner}}/{{repo}}.git\"]\ncache = \"{}/cache\"\n",
            s.path().display()
        ),
    )
    .unwrap();
    let (code, stdout, stderr) = s.gpuflow(&["run", "--plain", "w.yml"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("hello gpus from v1"), "{stdout}");
    assert_eq!(s.locked_commit(), s.tag_commit());
    let lock = std::fs::read_to_string(s.workspace().join("gpuflow.lock")).unwrap();
    assert!(
        lock.contains(&format!(
            "source = \"git://127.0.0.1:{port}/team/gpu-actions.git\""
        )),
        "{lock}"
    );
    // A repository the server does not have: the git program's own reason, at the `uses:`.
    std::fs::write(
        s.workspace().join("w.yml"),
        "jobs:\n  a:\n    steps:\n      - uses: team/absent@v1\n",
    )
    .unwrap();
    let (code, _, stderr) = s.gpuflow(&["validate", "w.yml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "tried git://127.0.0.1:{port}/team/absent.git: `git fetch` failed:"
        )),
        "{stderr}"
    );
}

/// A lock committed by someone else is data: a `source` that git would read as an option
/// (`--upload-pack=…` runs a program) is refused before any git runs, naming the file.
#[test]
fn a_lock_source_that_is_an_option_is_refused_and_runs_nothing() {
    let s = Setup::new();
    let marker = s.path().join("marker");
    let hostile = format!("--upload-pack=touch {};", marker.display());
    let lock = format!(
        "version = 1\n\n[[action]]\nrepo = \"team/gpu-actions\"\nref = \"v1\"\ncommit = \"{}\"\nsource = {}\n",
        s.tag_commit(),
        toml_string(&hostile)
    );
    std::fs::write(s.workspace().join("gpuflow.lock"), lock).unwrap();
    for args in [&["validate", "w.yml"][..], &["run", "--plain", "w.yml"]] {
        let (code, stdout, stderr) = s.gpuflow(args);
        assert!(
            !marker.exists(),
            "{args:?} ran the source as an option:\n{stderr}"
        );
        assert_ne!(code, 0, "{args:?}: {stdout}\n{stderr}");
        assert!(stderr.contains("gpuflow.lock"), "{args:?}: {stderr}");
        assert!(stderr.contains(&hostile), "{args:?}: {stderr}");
    }
}

/// The same through a source template of `gpuflow.toml`, and schemes git would run programs
/// for (`ext::`): refused at their place in the file.
#[test]
fn a_source_template_outside_the_scheme_allow_list_is_refused() {
    let s = Setup::new();
    let marker = s.path().join("marker");
    for source in [
        format!(
            "--upload-pack=touch {}; {{owner}}/{{repo}}",
            marker.display()
        ),
        format!("ext::sh -c touch% {}% {{owner}}/{{repo}}", marker.display()),
        "ssh://-oProxyCommand=touch/{owner}/{repo}".to_string(),
    ] {
        std::fs::write(
            s.workspace().join("gpuflow.toml"),
            format!(
                "[actions]\nsources = [{}]\ncache = \"{}/cache\"\n",
                toml_string(&source),
                s.path().display()
            ),
        )
        .unwrap();
        let (code, stdout, stderr) = s.gpuflow(&["validate", "w.yml"]);
        assert!(!marker.exists(), "{source}: ran:\n{stderr}");
        assert_ne!(code, 0, "{source}: {stdout}\n{stderr}");
        assert!(stderr.contains("gpuflow.toml:2:"), "{source}: {stderr}");
        assert!(
            stderr.contains("https"),
            "{source}: the allowed schemes: {stderr}"
        );
    }
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}
