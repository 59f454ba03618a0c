//! `gpuflow hosts`, `gpuflow hosts check` and `gpuflow gc`'s argument checks, through the
//! binary; none of these needs a Docker engine (see gc.rs and remote.rs for those that do).

use std::path::PathBuf;

use crate::support::{self, Workspace, command::Gpuflow};

/// `gpuflow` with the developer's `DOCKER_HOST` kept out (it would change host `local`).
fn gpuflow() -> Gpuflow {
    support::gpuflow().without_docker_host()
}

/// A folder holding `gpuflow.toml` (`text`), and that file's path.
fn config(text: &str) -> (Workspace, PathBuf) {
    let ws = Workspace::empty().file("gpuflow.toml", text);
    let path = ws.path().join("gpuflow.toml");
    (ws, path)
}

const TWO_NODES: &str = r#"
[hosts.node-a]
endpoint = "ssh://me@node-a"
labels = ["blackwell", "8gpu"]
gpus = 8

[hosts.old]
endpoint = "tcp://127.0.0.1:9"
"#;

#[test]
fn lists_configured_hosts_and_local() {
    let (_dir, path) = config(TWO_NODES);
    let a = gpuflow().arg("hosts").arg("--config").arg(&path).status(0);
    let stdout = a.stdout;
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("hosts from ") && lines[0].ends_with("gpuflow.toml"),
        "{stdout}"
    );
    let words = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(words(lines[1]), ["NAME", "ENDPOINT", "LABELS", "GPUS"]);
    assert_eq!(
        words(lines[2]),
        [
            "local",
            "unix:///var/run/docker.sock",
            "(default)",
            "-",
            "-"
        ]
    );
    assert_eq!(
        words(lines[3]),
        ["node-a", "ssh://me@node-a", "blackwell,", "8gpu", "8"]
    );
    assert_eq!(words(lines[4]), ["old", "tcp://127.0.0.1:9", "-", "-"]);
}

#[test]
fn lists_as_json_and_honours_docker_host_for_local() {
    let (_dir, path) = config(TWO_NODES);
    let a = gpuflow()
        .args(["hosts", "--json"])
        .env("GPUFLOW_CONFIG", &path)
        .env("DOCKER_HOST", "ssh://me@laptop-engine")
        .status(0);
    let json: serde_json::Value = serde_json::from_str(&a.stdout).unwrap();
    assert_eq!(json["hosts"][0]["name"], "local");
    assert_eq!(json["hosts"][0]["endpoint"], "ssh://me@laptop-engine");
    assert_eq!(json["hosts"][0]["endpoint_source"], "DOCKER_HOST");
    assert_eq!(
        json["hosts"][1]["labels"],
        serde_json::json!(["blackwell", "8gpu"])
    );
    assert_eq!(json["hosts"][1]["gpus"], 8);
    assert_eq!(json["hosts"][2]["gpus"], serde_json::Value::Null);
}

#[test]
fn a_bad_host_file_is_reported_with_its_location() {
    let (_dir, path) = config("[hosts.a]\nendpont = \"ssh://a\"\n");
    let a = gpuflow().arg("hosts").arg("--config").arg(&path).status(2);
    let stderr = a.stderr;
    assert!(stderr.contains("error: unknown key `endpont`"), "{stderr}");
    assert!(stderr.contains("gpuflow.toml:2:1"), "{stderr}");
    assert!(stderr.contains("did you mean `endpoint`?"), "{stderr}");
}

#[test]
fn the_workspace_roots_file_is_found_from_a_subdirectory() {
    let (dir, _) = config(TWO_NODES);
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::create_dir_all(dir.path().join("sub/dir")).unwrap();
    let a = gpuflow()
        .args(["hosts", "--json"])
        .current_dir(dir.path().join("sub/dir"))
        .status(0);
    let json: serde_json::Value = serde_json::from_str(&a.stdout).unwrap();
    assert_eq!(json["hosts"].as_array().unwrap().len(), 3);
}

#[test]
fn check_names_an_unreachable_endpoint_and_exits_4() {
    let (_dir, path) = config(TWO_NODES);
    let a = gpuflow()
        .args(["hosts", "check", "old", "--config"])
        .arg(&path)
        .status(4);
    let stderr = a.stderr;
    assert!(
        stderr.contains("error: cannot reach the Docker engine at `tcp://127.0.0.1:9`"),
        "{stderr}"
    );
    assert!(stderr.contains("note: host `old`"), "{stderr}");
    assert!(
        stderr.contains("help: check that the engine on `127.0.0.1` listens on port 9"),
        "{stderr}"
    );
}

#[test]
fn check_of_an_unknown_host_suggests_one() {
    let (_dir, path) = config(TWO_NODES);
    let a = gpuflow()
        .args(["hosts", "check", "node-b", "--config"])
        .arg(&path)
        .status(2);
    let stderr = a.stderr;
    assert!(stderr.contains("error: no host named `node-b`"), "{stderr}");
    assert!(stderr.contains("did you mean `node-a`?"), "{stderr}");
}

#[test]
fn an_ssh_node_that_cannot_be_logged_in_to_is_explained() {
    // `.invalid` never resolves (RFC 2606): ssh fails at once, before any network traffic.
    let (_dir, path) = config("[hosts.gone]\nendpoint = \"ssh://me@gpuflow-test.invalid\"\n");
    let a = gpuflow()
        .args(["hosts", "check", "gone", "--config"])
        .arg(&path)
        .status(4);
    let stderr = a.stderr;
    assert!(
        stderr.contains("cannot reach the Docker engine at `ssh://me@gpuflow-test.invalid`: ssh could not log in"),
        "{stderr}"
    );
    assert!(stderr.contains("Port 2222"), "{stderr}");
}

#[test]
fn gc_all_runs_asks_for_yes() {
    let a = gpuflow()
        .in_scratch_folder()
        .args(["gc", "--all-runs"])
        .status(2);
    let (stdout, stderr) = (a.stdout, a.stderr);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("`--all-runs` removes every gpuflow container and network on `local`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("add `--yes` to confirm, or `--dry-run`"),
        "{stderr}"
    );
}

#[test]
fn gc_of_an_unknown_host_lists_the_hosts() {
    let a = gpuflow()
        .in_scratch_folder()
        .args(["gc", "--host", "blackwell"])
        .status(2);
    let stderr = a.stderr;
    assert!(stderr.contains("no host named `blackwell`"), "{stderr}");
    assert!(stderr.contains("[hosts.blackwell]"), "{stderr}");
}
