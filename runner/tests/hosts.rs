//! `gpuflow hosts`, `gpuflow hosts check` and `gpuflow gc`'s argument checks, through the
//! binary; none of these needs a Docker engine (see gc.rs and remote.rs for those that do).

use assert_cmd::Command;

fn gpuflow() -> Command {
    let mut cmd = Command::cargo_bin("gpuflow").unwrap();
    cmd.env_remove("GPUFLOW_CONFIG").env_remove("DOCKER_HOST");
    cmd
}

fn config(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpuflow.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn out(a: &assert_cmd::assert::Assert) -> (String, String) {
    let o = a.get_output();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
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
    let a = gpuflow()
        .arg("hosts")
        .arg("--config")
        .arg(&path)
        .assert()
        .code(0);
    let (stdout, _) = out(&a);
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
        .assert()
        .code(0);
    let json: serde_json::Value = serde_json::from_str(&out(&a).0).unwrap();
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
    let a = gpuflow()
        .arg("hosts")
        .arg("--config")
        .arg(&path)
        .assert()
        .code(2);
    let (_, stderr) = out(&a);
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
        .assert()
        .code(0);
    let json: serde_json::Value = serde_json::from_str(&out(&a).0).unwrap();
    assert_eq!(json["hosts"].as_array().unwrap().len(), 3);
}

#[test]
fn check_names_an_unreachable_endpoint_and_exits_4() {
    let (_dir, path) = config(TWO_NODES);
    let a = gpuflow()
        .args(["hosts", "check", "old", "--config"])
        .arg(&path)
        .assert()
        .code(4);
    let (_, stderr) = out(&a);
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
        .assert()
        .code(2);
    let (_, stderr) = out(&a);
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
        .assert()
        .code(4);
    let (_, stderr) = out(&a);
    assert!(
        stderr.contains("cannot reach the Docker engine at `ssh://me@gpuflow-test.invalid`: ssh could not log in"),
        "{stderr}"
    );
    assert!(stderr.contains("Port 2222"), "{stderr}");
}

#[test]
fn gc_all_runs_asks_for_yes() {
    let dir = tempfile::tempdir().unwrap();
    let a = gpuflow()
        .args(["gc", "--all-runs"])
        .current_dir(dir.path())
        .assert()
        .code(2);
    let (stdout, stderr) = out(&a);
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
    let dir = tempfile::tempdir().unwrap();
    let a = gpuflow()
        .args(["gc", "--host", "blackwell"])
        .current_dir(dir.path())
        .assert()
        .code(2);
    let (_, stderr) = out(&a);
    assert!(stderr.contains("no host named `blackwell`"), "{stderr}");
    assert!(stderr.contains("[hosts.blackwell]"), "{stderr}");
}
