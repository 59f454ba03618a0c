use assert_cmd::Command;

fn gpuflow() -> Command {
    Command::cargo_bin("gpuflow").unwrap()
}

#[test]
fn help_lists_the_commands() {
    let out = gpuflow().arg("--help").assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for cmd in ["validate", "plan", "eval", "completions"] {
        assert!(text.contains(cmd), "`{cmd}` missing from --help:\n{text}");
    }
}

#[test]
fn completions_are_generated_for_bash() {
    let out = gpuflow().args(["completions", "bash"]).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("_gpuflow"));
}
