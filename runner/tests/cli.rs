use crate::support::repo_root;
use crate::support::{Workspace, gpuflow};

#[test]
fn help_lists_the_commands() {
    let out = gpuflow().arg("--help").success();
    let text = out.stdout.clone();
    for cmd in ["validate", "plan", "eval", "completions"] {
        assert!(text.contains(cmd), "`{cmd}` missing from --help:\n{text}");
    }
}

#[test]
fn completions_are_generated_for_bash() {
    let out = gpuflow().args(["completions", "bash"]).success();
    assert!(out.stdout.contains("_gpuflow"));
}

#[test]
fn shipped_workflows_and_actions_validate() {
    let out = gpuflow().current_dir(repo_root()).arg("validate").status(0);
    let err = out.stderr;
    assert!(err.contains("files valid"), "{err}");
    assert!(!err.contains("error"), "{err}");
}

#[test]
fn plan_shows_the_eagle3_graph() {
    let out = gpuflow()
        .current_dir(repo_root())
        .args(["plan", "workflows/eagle3.yml"])
        .status(0);
    insta::assert_snapshot!("plan_eagle3", out.stdout);
}

#[test]
fn plan_json_lists_every_matrix_cell_with_its_needs() {
    let out = gpuflow()
        .current_dir(repo_root())
        .args(["plan", "--json", "workflows/eagle3.yml"])
        .status(0);
    let plan: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let jobs = plan["jobs"].as_array().unwrap();
    let bench: Vec<_> = jobs.iter().filter(|j| j["job_id"] == "bench").collect();
    // 2 all-reduce × 2 batch sizes × 2 speculation modes, minus custom without speculation.
    assert_eq!(bench.len(), 6);
    assert!(bench.iter().all(|j| j["gpus"] == "8" && j["level"] == 1));
    let report = jobs.iter().find(|j| j["job_id"] == "report").unwrap();
    assert_eq!(report["needs"], serde_json::json!(["bench", "vllm"]));
    assert_eq!(report["level"], 3);
    // Runs come in an order where every run follows what it waits on.
    assert_eq!(jobs.last().unwrap()["job_id"], "report");
}

#[test]
fn plan_refuses_an_invalid_workflow_with_exit_3() {
    let dir = Workspace::empty();
    let path = dir.path().join("w.yml");
    std::fs::write(
        &path,
        "on: push\njobs:\n  a:\n    needs: b\n    steps: [{run: x}]\n  b:\n    needs: a\n    steps: [{run: y}]\n",
    )
    .unwrap();
    gpuflow()
        .arg("plan")
        .arg(&path)
        .stderr_contains("`needs` form a cycle: `a` → `b` → `a`")
        .stderr_contains("not planned")
        .stdout("")
        .status(3);
}

#[test]
fn plan_of_a_missing_file_is_a_usage_error() {
    gpuflow().args(["plan", "no/such/workflow.yml"]).status(2);
}

#[test]
fn docs_show_a_builtin_and_suggest_on_a_typo() {
    let out = gpuflow().args(["docs", "wait-for-health"]).status(0);
    assert!(out.stdout.contains("| `timeout` |"));
    let out = gpuflow().args(["docs", "wait-for-healt"]).status(2);
    assert!(out.stderr.contains("did you mean `wait-for-health`?"));
}

#[test]
fn schema_prints_valid_json_for_both_file_kinds() {
    for which in ["workflow", "action"] {
        let out = gpuflow().args(["schema", which]).status(0);
        let schema: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(schema["additionalProperties"], false, "{which}");
    }
}

/// Runs gpuflow with its stdout a pipe whose reader is already gone, as when `| head -c1` has
/// read what it wanted: every write to stdout then fails with EPIPE.
fn with_closed_stdout(args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    std::process::Command::new(env!("CARGO_BIN_EXE_gpuflow"))
        .args(args)
        .current_dir(repo_root())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap()
}

/// `gpuflow plan x.yml | head -c1` used to panic ("failed printing to stdout: Broken pipe",
/// exit 101). Every command now ends quietly, as a process SIGPIPE ended: exit 141, nothing on
/// stderr.
#[test]
fn commands_whose_reader_went_away_end_quietly() {
    let cases: [&[&str]; 6] = [
        &["schema"],
        &["plan", "workflows/demo.yml"],
        &["plan", "--json", "workflows/demo.yml"],
        &["validate", "--format", "json", "workflows/demo.yml"],
        &["eval", "--json", "--", "1 + 1 == 2"],
        &["eval", "--", "format('{0}', 1)"],
    ];
    for args in cases {
        let out = with_closed_stdout(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "gpuflow {args:?}: {stderr}");
        assert_eq!(stderr, "", "gpuflow {args:?}");
    }
}

/// JSON has no NaN or infinities; `eval --json` writes them as the text GitHub prints for them
/// (`format('{0}', NaN)` is `NaN`), as JSON strings, with the kind still `Number`.
#[test]
fn eval_json_is_json_for_nan_and_the_infinities() {
    for (expr, text) in [
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
    ] {
        let out = gpuflow().args(["eval", "--json", "--", expr]).success();
        let stdout = out.stdout;
        let v: serde_json::Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("`{expr}` printed no JSON ({e}): {stdout}"));
        assert_eq!(
            v,
            serde_json::json!({"kind": "Number", "value": text}),
            "{expr}"
        );
    }
}

/// `make test` on a fresh machine used to fail in the tests themselves (no sshd, no Chromium,
/// no g++ for llama-server): only `.ci/run` installed them. The Makefile's `test` now runs
/// `scripts/test-deps.sh` first; on a machine lacking the tools (a PATH holding only a shell
/// and apt-get, checking only), it names each missing package, what needs it, and the one
/// command that installs them, and fails.
#[test]
fn make_test_checks_its_tools_first_and_names_what_is_missing() {
    let make = std::process::Command::new("make")
        .args(["-n", "test"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&make.stdout);
    let at = |what: &str| {
        plan.find(what)
            .unwrap_or_else(|| panic!("`make -n test` does not run {what}:\n{plan}"))
    };
    assert!(
        at("scripts/test-deps.sh") < at("images/base/build.sh"),
        "{plan}"
    );
    assert!(at("images/base/build.sh") < at("nextest run"), "{plan}");
    // llama-server comes with the images: images/llamacpp/build.sh builds it.
    let llamacpp = std::fs::read_to_string(repo_root().join("images/llamacpp/build.sh")).unwrap();
    assert!(llamacpp.contains("llama-server.sh"));

    let bin = Workspace::empty();
    for tool in ["bash", "id", "apt-get"] {
        let found = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
            .iter()
            .map(|d| std::path::Path::new(d).join(tool))
            .find(|p| p.exists());
        // A stand-in apt-get where there is none: only `command -v` looks for it.
        match found {
            Some(path) => std::os::unix::fs::symlink(path, bin.path().join(tool)).unwrap(),
            None => {
                let stand_in = bin.path().join(tool);
                std::fs::write(&stand_in, "#!/bin/sh\nexit 1\n").unwrap();
                std::fs::set_permissions(
                    &stand_in,
                    std::os::unix::fs::PermissionsExt::from_mode(0o755),
                )
                .unwrap();
            }
        }
    }
    let out = std::process::Command::new(bin.path().join("bash"))
        .arg("scripts/test-deps.sh")
        .current_dir(repo_root())
        .env("PATH", bin.path())
        .env("GPUFLOW_TEST_DEPS", "check")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for package in [
        "openssh-client",
        "chromium",
        "sqlite3",
        "g++",
        "python3-venv",
        "git",
    ] {
        assert!(
            stderr.contains(&format!("  {package}: ")),
            "{package}: {stderr}"
        );
    }
    assert!(
        stderr.contains("sudo apt-get install -y git docker.io"),
        "{stderr}"
    );
}

/// A workspace (a folder with `.git`) holding `files` (path, text).
fn workspace_with(files: &[(&str, &str)]) -> Workspace {
    Workspace::new().files(files)
}

/// `gpuflow validate` and `gpuflow run` agree: what `run` refuses before starting anything,
/// `validate` reports as an error at its place, with a fix, instead of "1 file valid".
#[test]
fn validate_reports_the_steps_run_refuses() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "      - uses: docker://alpine\n",
            "w.yml:6:15",
            "`docker://alpine` steps are not supported yet",
        ),
        (
            "      - uses: actions/checkout@v4\n",
            "w.yml:6:15",
            "`actions/checkout@v4` is one of GitHub's JavaScript actions",
        ),
        (
            "      - run: print('${{ github.ref_name }}')\n        shell: python\n",
            "w.yml:6:25",
            "`github.ref_name` is written into a `python` script as text",
        ),
        (
            "      - run: echo hi\n        shell: ${{ github.head_ref }}\n",
            "w.yml:7:20",
            "`shell` reads `github.head_ref`",
        ),
    ];
    for (step, at, message) in cases {
        let yaml = format!(
            "on: workflow_dispatch\njobs:\n  j:\n    steps:\n      - run: touch started\n{step}"
        );
        let dir = workspace_with(&[("w.yml", &yaml)]);
        let out = gpuflow()
            .current_dir(dir.path())
            .args(["validate", "--color", "never", "w.yml"])
            .status(1);
        let err = out.stderr;
        assert!(err.contains(&format!("error: {message}")), "{step}: {err}");
        assert!(err.contains(&format!("--> {at}")), "{step}: {err}");
        assert!(err.contains("help: "), "{step}: {err}");
        assert!(err.contains("1 error in 1 of 1 file"), "{step}: {err}");
        // `run` refuses the same file, and nothing starts.
        let out = gpuflow()
            .current_dir(dir.path())
            .args(["run", "--plain", "w.yml"])
            .status(3);
        assert!(out.stderr.contains(message), "{step}: {}", out.stderr);
        assert!(!dir.path().join("started").exists(), "{step}");
    }
}

/// A step without `shell:` runs with `defaults.run.shell`, in the job's steps and in those of
/// the local actions it uses; an action file checked on its own is judged by its own shells.
#[test]
fn validate_judges_scripts_by_the_shell_they_run_with() {
    let action = "name: a\nruns:\n  using: composite\n  steps:\n    - run: print('${{ github.event.head_commit.message }}')\n";
    let python_action = "name: p\nruns:\n  using: composite\n  steps:\n    - run: print('${{ github.ref }}')\n      shell: python\n";
    let workflow = "on: push\njobs:\n  j:\n    defaults:\n      run:\n        shell: python\n    steps:\n      - run: print('${{ github.ref_name }}')\n      - uses: ./actions/a\n      - run: echo '${{ github.ref_name }}'\n        shell: bash\n";
    let dir = workspace_with(&[
        ("w.yml", workflow),
        ("actions/a/action.yml", action),
        ("actions/p/action.yml", python_action),
    ]);
    let out = gpuflow()
        .current_dir(dir.path())
        .args(["validate", "--color", "never", "w.yml"])
        .status(1);
    let err = out.stderr;
    assert!(err.contains("--> w.yml:8:25"), "{err}");
    assert!(
        err.contains("error: `github.event.head_commit.message` is written into a `python` script"),
        "{err}"
    );
    assert!(err.contains("--> actions/a/action.yml:5:23"), "{err}");
    assert!(
        err.contains("the step's shell, `python`, comes from here"),
        "{err}"
    );
    // The `bash` step passes its value as a variable: fine.
    assert!(err.contains("2 errors in 1 of 1 file"), "{err}");

    // On its own the action's step has no shell: the default, `bash`, is safe.
    gpuflow()
        .current_dir(dir.path())
        .args(["validate", "actions/a/action.yml"])
        .status(0);
    let out = gpuflow()
        .current_dir(dir.path())
        .args(["validate", "--color", "never", "actions/p/action.yml"])
        .status(1);
    let err = out.stderr;
    assert!(
        err.contains("error: `github.ref` is written into a `python` script as text"),
        "{err}"
    );
    assert!(err.contains("--> actions/p/action.yml:5:23"), "{err}");
}

/// `validate` says what `run` would refuse here: a `runs-on` no host of the workspace's
/// `gpuflow.toml` matches is a warning at its place (exit 0: `--host` may still choose one).
/// Without a host file there is nothing to hold `runs-on` against, and nothing is said.
#[test]
fn validate_warns_of_a_runs_on_no_host_of_gpuflow_toml_matches() {
    let dir = Workspace::empty();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(
        dir.path().join("w.yml"),
        "jobs:\n  a:\n    runs-on: [hopper, 8gpu]\n    steps: [{ run: \"true\" }]\n  \
         b:\n    runs-on: blackwell\n    steps: [{ run: \"true\" }]\n  \
         c:\n    runs-on: ${{ matrix.node }}\n    strategy: { matrix: { node: [x] } }\n    \
         steps: [{ run: \"true\" }]\n",
    )
    .unwrap();
    let validate = || {
        gpuflow()
            .args(["validate", "w.yml"])
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .status(0)
    };
    let quiet = validate().stdout + &validate().stderr;
    assert!(!quiet.contains("warning"), "{quiet}");

    std::fs::write(
        dir.path().join("gpuflow.toml"),
        "[hosts.b200]\nendpoint = \"ssh://me@b200-node\"\nlabels = [\"blackwell\", \"8gpu\"]\n",
    )
    .unwrap();
    let out = validate();
    let text = out.stdout + &out.stderr;
    assert!(
        text.contains("warning: no host matches `runs-on: [hopper, 8gpu]`: `gpuflow run` will refuse this job here"),
        "{text}"
    );
    assert!(text.contains("--> w.yml:3:15"), "{text}");
    assert!(text.contains("`b200` (blackwell, 8gpu)"), "{text}");
    assert!(text.contains("1 warning"), "{text}");
}
