//! Hostile values never become code: a `${{ }}` in a built-in step's command-like input
//! (`benchmark`'s `command`, `wait-for-health`'s command probe) reaches `sh -c` as an
//! environment variable, not as shell text; a panicking job ends the run instead of hanging
//! it. These run `gpuflow run` (which sweeps orphans): nextest's `docker-sweep` group.

use std::time::Duration;

use crate::support::Workspace;
use crate::support::images::BASE;

/// The value reaches both commands through `--input` (what `validate` cannot see), in plain,
/// double-quoted and single-quoted places.
const COMMANDS: &str = r#"
on:
  workflow_dispatch:
    inputs:
      tag: { default: safe }
jobs:
  bench:
    steps:
      - uses: wait-for-health
        with:
          probe: command
          command: echo ${{ inputs.tag }} "${{ inputs.tag }}" '${{ inputs.tag }}' >/dev/null
          timeout: 10s
      - id: script
        uses: benchmark
        with:
          command: echo "took 12 ms" ${{ inputs.tag }} "${{ inputs.tag }}" 'q ${{ inputs.tag }} q'
          runs: 1
          warmup: 0
          metrics:
            took: { regex: 'took (?P<value>[0-9]+) ms', unit: ms }
      - run: echo "took=${{ steps.script.outputs.took }}"
"#;

#[tokio::test]
async fn hostile_values_in_builtin_commands_are_data_not_code() {
    let Some(dir) = Workspace::workflow_repository(COMMANDS, &[]).await else {
        return;
    };
    let marker = dir.path().join("pwned");
    let marker_text = marker.display().to_string();
    // A branch name git accepts: no blanks (`${IFS}` stands in for them).
    let hostile = format!(
        "x$(touch${{IFS}}{marker_text})`touch${{IFS}}{marker_text}`;touch${{IFS}}{marker_text}"
    );
    let out = dir
        .gpuflow()
        .args(["run", "--plain", "w.yml", "--input"])
        .arg(format!("tag={hostile}"))
        .timeout(Duration::from_secs(120))
        .output();
    let text = out.all();
    assert!(!marker.exists(), "a value ran as shell code:\n{text}");
    assert_eq!(out.code(), Some(0), "{text}");
    assert!(text.contains("took=12"), "{text}");
    // The value is still there, as the text it is.
    assert!(text.contains(&format!("took 12 ms {hostile}")), "{text}");
}

/// A target with a blank in its path passes no request line: refused by `validate` at its
/// place, instead of panicking the run's request builder.
#[test]
fn a_target_no_request_can_be_sent_to_is_refused_by_validate() {
    let dir = Workspace::empty().file(
        "w.yml",
        "jobs:\n  bench:\n    steps:\n      - uses: benchmark\n        with:\n          target: \"http://localhost:30000/my model\"\n",
    );
    let out = dir.gpuflow().args(["validate", "w.yml"]).status(1);
    let text = out.all();
    assert!(text.contains("w.yml:6:20"), "{text}");
    assert!(text.contains("holds a blank"), "{text}");
    assert!(text.contains("%20"), "{text}");
}

/// A value anyone who can push chooses, handed to a local composite action that writes the
/// input into a built-in's shell command: `validate` follows the `with:` value into the action
/// and refuses it where it is passed (file:line:col), pointing at the action's line and giving
/// the `env:` form. The same action fed a value nobody can push, and an action that only
/// writes the input into a `bash` script (which gets it as a variable), validate.
#[test]
fn a_hostile_value_reaching_shell_text_through_a_composite_action_is_refused_by_validate() {
    let dir = Workspace::empty();
    let workflow = |tag: &str, action: &str| {
        format!(
            "on: push\njobs:\n  bench:\n    steps:\n      - uses: ./actions/{action}\n        with:\n          tag: {tag}\n"
        )
    };
    for (name, steps) in [
        (
            "bench",
            "    - uses: benchmark\n      with:\n        command: ./bench.sh --tag ${{ inputs.tag }}\n",
        ),
        ("echo", "    - run: echo ${{ inputs.tag }}\n"),
    ] {
        dir.write(
            &format!("actions/{name}/action.yml"),
            &format!(
                "name: {name}\ninputs:\n  tag: {{ required: true }}\nruns:\n  using: composite\n  steps:\n{steps}"
            ),
        );
    }
    let validate = |yaml: String| {
        dir.write("w.yml", &yaml);
        dir.gpuflow().args(["validate", "w.yml"]).output()
    };

    let out = validate(workflow("${{ github.head_ref }}", "bench"));
    let text = out.all();
    assert_eq!(out.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "error: `github.head_ref` is handed to input `tag` of `./actions/bench`, which writes it into `command` of `benchmark`, a shell command"
        ),
        "{text}"
    );
    assert!(text.contains("--> w.yml:7:20"), "{text}");
    assert!(text.contains("actions/bench/action.yml:9:39"), "{text}");
    assert!(
        text.contains("help: in `actions/bench/action.yml`, pass `inputs.tag` through `env:` (`env: { VALUE: ${{ inputs.tag }} }`) and use \"$VALUE\" in `command`"),
        "{text}"
    );

    for (tag, action) in [
        ("${{ github.run_id }}", "bench"),
        ("nightly", "bench"),
        ("${{ github.head_ref }}", "echo"),
    ] {
        let out = validate(workflow(tag, action));
        assert_eq!(out.code(), Some(0), "{tag} into {action}: {}", out.all());
    }
}

/// A panic inside a job (a bug in gpuflow) fails that job with the panic's message and a hint
/// to report it; the job's clean-up runs and the run ends at once, with no container left.
/// The panic is a real one, asked for through a debug-build-only variable.
#[tokio::test]
async fn a_panicking_step_fails_its_job_and_the_run_ends_with_nothing_left() {
    let yaml = r#"
jobs:
  boom:
    steps:
      - uses: start-container
        with: { name: box, image: gpuflow-base:test, command: sleep 300 }
      - run: echo never
      - if: always()
        run: echo "always ran"
"#;
    let Some(dir) = Workspace::workflow_repository(yaml, &[BASE]).await else {
        return;
    };
    let started = std::time::Instant::now();
    let out = dir
        .gpuflow()
        .args(["run", "--plain", "w.yml"])
        .env("GPUFLOW_TEST_PANIC_IN_STEP", "2")
        .timeout(Duration::from_secs(60))
        .output();
    let text = out.all();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the run took {:?}:\n{text}",
        started.elapsed()
    );
    assert_eq!(out.code(), Some(1), "{text}");
    assert!(
        text.contains("gpuflow panicked in this step: a panic asked for by GPUFLOW_TEST_PANIC_IN_STEP in step 2"),
        "{text}"
    );
    assert!(text.contains("please report it"), "{text}");
    assert!(text.contains("always ran"), "{text}");
    let run_id = text
        .lines()
        .find_map(|l| l.strip_prefix("run ")?.split_whitespace().next())
        .unwrap_or_else(|| panic!("no run id in:\n{text}"));
    let left = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter"])
        .arg(format!("label=dev.gpuflow.run-id={run_id}"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "containers left: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}
