//! Host files read in order, and every problem at its place with a fix.

use super::*;
use crate::diag::{RenderOptions, render_all};
use crate::hosts::HostEndpoint;

fn parse(text: &str) -> Result<HostConfig, Diagnostics> {
    HostConfig::parse(&SourceFile::new("gpuflow.toml", text))
}

fn rendered(text: &str) -> String {
    render_all(&parse(text).unwrap_err(), RenderOptions::default())
}

#[test]
fn reads_hosts_in_file_order_with_local_first() {
    let config = parse(
        r#"
# a laptop driving two GPU nodes
[hosts.node-b]
endpoint = "ssh://me@node-b"
labels = ["blackwell", "8gpu"]
gpus = 8

[hosts.old]
endpoint = "tcp://10.0.0.7:2375"
"#,
    )
    .unwrap();
    let names: Vec<&str> = config.names().collect();
    assert_eq!(names, ["local", "node-b", "old"]);
    let node = config.get("node-b").unwrap();
    assert_eq!(node.labels, ["blackwell", "8gpu"]);
    assert_eq!(node.gpus, Some(8));
    assert_eq!(node.endpoint().unwrap().to_string(), "ssh://me@node-b");
    assert_eq!(config.get("local").unwrap().endpoint, HostEndpoint::FromEnv);
    let file = config.file().unwrap();
    assert_eq!(file.location(node.span.unwrap()), "gpuflow.toml:3:8");
}

#[test]
fn local_may_be_given_labels_and_keeps_docker_host() {
    let config = parse("[hosts.local]\nlabels = [\"cpu\"]\n").unwrap();
    assert_eq!(config.hosts().len(), 1);
    let local = config.get("local").unwrap();
    assert_eq!(local.endpoint, HostEndpoint::FromEnv);
    assert_eq!(local.labels, ["cpu"]);
}

#[test]
fn every_problem_is_reported_at_its_place_with_a_fix() {
    let text = r#"[host]
x = 1

[hosts.node-a]
endpoint = "ssh://me@node-a:2222"
lables = ["blackwell"]

[hosts.node-b]
labels = ["gpu", "gpu", "node-a", "has space"]
gpus = -1

[hosts."bad name"]
endpoint = 5
"#;
    insta::assert_snapshot!("host_file_problems", rendered(text));
}

#[test]
fn engine_leases_are_on_for_remote_engines_unless_a_host_says() {
    let config = parse(
        r#"
[hosts.node]
endpoint = "ssh://me@node"

[hosts.lab]
endpoint = "tcp://10.0.0.7:2375"
engine-leases = false

[hosts.local]
engine-leases = true
lease-image = "busybox:1.36"
"#,
    )
    .unwrap();
    let (node, lab, local) = (
        config.get("node").unwrap(),
        config.get("lab").unwrap(),
        config.get("local").unwrap(),
    );
    assert!(local.engine_leases_on());
    assert!(!lab.engine_leases_on());
    assert_eq!(local.lease_image(), "busybox:1.36");
    // The default image is the GPU probe's, which the probe pulls on a remote host.
    assert_eq!(node.lease_image(), "ubuntu:24.04");
    if std::env::var_os(crate::gpu::engine_lease::ENGINE_LEASES_ENV).is_none() {
        assert!(
            node.engine_leases_on(),
            "a remote engine may have other clients"
        );
        let implicit = HostConfig::implicit();
        assert!(!implicit.get("local").unwrap().engine_leases_on());
    }
    let out = rendered("[hosts.local]\nengine-leases = \"yes\"\n");
    assert!(
        out.contains("`engine-leases` must be `true` or `false`"),
        "{out}"
    );
    assert!(out.contains("gpuflow.toml:2:17"), "{out}");
}

#[test]
fn a_label_naming_another_host_is_refused() {
    let text =
        "[hosts.a]\nendpoint = \"ssh://a\"\nlabels = [\"b\"]\n[hosts.b]\nendpoint = \"ssh://b\"\n";
    let out = rendered(text);
    assert!(
        out.contains("host `a` has the label `b`, which is also the name of another host"),
        "{out}"
    );
    assert!(out.contains("gpuflow.toml:1:8"), "{out}");
}

#[test]
fn vars_are_strings_in_file_order() {
    let config = parse("[vars]\nMODEL = \"llama-3-8b\"\n_tp = '2'\n").unwrap();
    let vars: Vec<(&str, &str)> = config
        .vars()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(vars, [("MODEL", "llama-3-8b"), ("_tp", "2")]);
    assert!(HostConfig::implicit().vars().is_empty());
}

#[test]
fn a_var_that_is_not_a_string_is_refused_at_its_value_with_the_quoted_form() {
    let out = rendered("[vars]\nGPUS = 8\nFAST = true\nLIST = [1]\n");
    assert!(out.contains("error: `vars.GPUS` must be a string"), "{out}");
    assert!(out.contains("gpuflow.toml:2:8"), "{out}");
    assert!(out.contains("quote it: `GPUS = \"8\"`"), "{out}");
    assert!(out.contains("fromJSON(vars.GPUS)"), "{out}");
    assert!(out.contains("gpuflow.toml:3:8"), "{out}");
    assert!(out.contains("quote it: `FAST = \"true\"`"), "{out}");
    assert!(out.contains("gpuflow.toml:4:8"), "{out}");
    assert!(out.contains("a list, not a string"), "{out}");
}

#[test]
fn parse_vars_reads_vars_without_the_hosts_files() {
    let file = SourceFile::new(
        "gpuflow.toml",
        "[hosts.ci]\nendpoint = \"ssh://ci\"\ngpu-inventory = \"not-here.toml\"\n[vars]\nPOOL = \"a\"\n",
    );
    assert!(
        HostConfig::parse(&file).is_err(),
        "the inventory is missing"
    );
    let vars = HostConfig::parse_vars(&file).unwrap();
    assert_eq!(vars.get("POOL").map(String::as_str), Some("a"));
    let bad = SourceFile::new("gpuflow.toml", "[vars]\nN = 1\n");
    assert!(HostConfig::parse_vars(&bad).is_err());
}

#[test]
fn var_names_are_checked_and_case_insensitively_unique() {
    let out = rendered("[vars]\n\"my-var\" = \"x\"\nModel = \"a\"\nMODEL = \"b\"\n");
    assert!(out.contains("invalid variable name `my-var`"), "{out}");
    assert!(out.contains("gpuflow.toml:2:1"), "{out}");
    assert!(out.contains("variable `MODEL` is given twice"), "{out}");
    assert!(out.contains("gpuflow.toml:4:1"), "{out}");
    assert!(out.contains("the same as `Model`"), "{out}");
    let out = rendered("vars = \"x\"\n");
    assert!(out.contains("`vars` must be a table"), "{out}");
}

#[test]
fn toml_syntax_errors_point_at_the_place() {
    let out = rendered("[hosts.a]\nendpoint = \"ssh://a\nlabels = []\n");
    assert!(out.starts_with("error: invalid TOML: "), "{out}");
    assert!(out.contains("gpuflow.toml:2:"), "{out}");
}

#[test]
fn hosts_must_be_tables() {
    let out = rendered("hosts = 3\n");
    assert!(out.contains("`hosts` must be a table"), "{out}");
    let out = rendered("[hosts]\nnode = \"ssh://x\"\n");
    assert!(out.contains("host `node` must be a table"), "{out}");
    assert!(out.contains("[hosts.node]"), "{out}");
}

#[test]
fn the_file_is_found_in_the_workspace_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    let cwd = root.join("a/b");
    assert_eq!(
        HostConfig::find(None, &cwd).unwrap(),
        HostConfig::implicit()
    );

    std::fs::write(
        root.join(CONFIG_FILE),
        "[hosts.n]\nendpoint = \"ssh://n\"\n",
    )
    .unwrap();
    let config = HostConfig::find(None, &cwd).unwrap();
    assert!(config.get("n").is_some());

    let missing = root.join("nope.toml");
    let e = HostConfig::find(Some(&missing), &cwd).unwrap_err();
    let out = render_all(&e, RenderOptions::default());
    assert!(out.contains("cannot read host file `"), "{out}");
    assert!(out.contains("nope.toml`: no such file"), "{out}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
    #[test]
    fn never_panics(text in "(\\[hosts\\.[a-z]{1,3}\\]\n|endpoint = \"[a-z:/@]{0,12}\"\n|labels = \\[\"[a-z]{0,3}\"\\]\n|gpus = -?[0-9]{1,3}\n|[a-z =\"\\[\\]]{0,8}\n){0,6}") {
        let _ = parse(&text);
    }
}
