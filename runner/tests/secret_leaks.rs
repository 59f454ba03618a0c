//! A secret never leaves gpuflow in any form: `gpuflow run --json` with a secret in a
//! server's argv, in a step's name and in a 100 KiB line whose 64 KiB cut falls inside it, on
//! the local engine with the simulator image, a benchmark, and a report committed to a
//! results branch of a real git repository. Every file the run wrote (the run's folder, the
//! results store, the report, `record.json`, the results branch's commit) and what it printed
//! is searched for the secret, its base64 and its URL-encoded forms. Runs `gpuflow run`,
//! which sweeps orphans: nextest's `docker-sweep` group.

use std::path::Path;

use crate::support::images::SIM;
use crate::support::sim::{SimProcess, container_steps};
use crate::support::{Output, Workspace, free_port};

/// `/`, `+`, `?` and `=` make its URL-encoded form differ from it; long enough that its base64
/// forms are told apart from chance.
const SECRET: &str = "s3cr3t/Key+x?=Z9q";
/// The same, as the steps' `sed` below writes it.
const SECRET_URL: &str = "s3cr3t%2FKey%2Bx%3F%3DZ9q";

/// The standard base64 of `bytes` (what `base64` prints), written here so the test does not
/// share the code it checks.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
        for _ in chunk.len()..3 {
            out.push('=');
        }
    }
    out
}

/// Every form of the secret that must not be found, with what it is.
fn forms() -> Vec<(&'static str, String)> {
    let b64 = base64(SECRET.as_bytes());
    vec![
        ("the secret", SECRET.to_string()),
        ("its base64", b64.trim_end_matches('=').to_string()),
        ("its URL-encoded form", SECRET_URL.to_string()),
        // What a file name made from it would hold (`log_store::slug`).
        ("its file-name form", "s3cr3t-Key-x-Z9q".to_string()),
    ]
}

/// Finds any form of the secret in `bytes`, or in `name`.
fn leaks(name: &str, bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    forms()
        .into_iter()
        .filter(|(_, f)| text.contains(f.as_str()) || name.contains(f.as_str()))
        .map(|(what, _)| format!("{what} in {name}"))
        .collect()
}

fn workflow(port: u16) -> String {
    // The long line: the secret straddles the 64 KiB cut (65536 bytes in), then its base64
    // and URL-encoded forms; a short line holds those forms too.
    format!(
        r#"
name: leaks
on: workflow_dispatch
jobs:
  bench:
    steps:
{server}      - name: print ${{{{ secrets.K }}}} in every form
        env:
          K: ${{{{ secrets.K }}}}
        run: |
          b64=$(printf %s "$K" | base64)
          url=$(printf %s "$K" | sed 's,/,%2F,g; s,+,%2B,g; s,?,%3F,g; s,=,%3D,g')
          echo "short: $K $b64 $url"
          {{ head -c 65531 /dev/zero | tr '\0' a; printf %s "$K"; head -c 40000 /dev/zero | tr '\0' b; echo " $b64 $url"; }}
          {{ head -c 65531 /dev/zero | tr '\0' c; printf %s "$K"; head -c 40000 /dev/zero | tr '\0' d; echo " $b64 $url"; }} >&2
      - id: bench
        name: single-stream
        uses: benchmark
        with:
          target: http://127.0.0.1:{port}
          mode: single-stream
          output-tokens: 8
          requests: 2
          runs: 2
          warmup: 0
  report:
    needs: bench
    steps:
      - uses: report
        with:
          format: html
          commit: {{ branch: results }}
"#,
        server = container_steps(
            "sh -c 'exec gpuflow-sim --host 0.0.0.0 --port 30000 --ttft 5ms --tokens-per-second 400' sim --api-key ${{ secrets.K }}",
            Some(port),
        ),
    )
}

/// A file's bytes as a reader of it sees them: a compressed log (`.zst`) decompressed, since
/// its compressed bytes would hide a secret from the search.
pub(crate) fn stored_text(path: &Path) -> Vec<u8> {
    if path.extension().is_some_and(|e| e == "zst") {
        let file = std::fs::File::open(path).unwrap();
        return zstd::decode_all(file)
            .unwrap_or_else(|e| panic!("`{}` is not zstd: {e}", path.display()));
    }
    std::fs::read(path).unwrap()
}

pub(crate) fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .map(walkdir::DirEntry::into_path)
        .collect()
}

#[tokio::test]
async fn a_secret_is_found_in_no_file_the_run_wrote_in_any_form() {
    let port = free_port();
    let Some(dir) = Workspace::workflow_repository(&workflow(port), &[SIM]).await else {
        return;
    };
    dir.write(".git/info/exclude", ".gpuflow/\n");
    let ws = dir.path();

    let out = dir
        .gpuflow()
        .env("K", SECRET)
        .args(["run", "--json", "w.yml", "--secret", "K"])
        .success();
    let stdout = &out.stdout;
    let mut found = leaks("stdout", out.stdout.as_bytes());
    found.extend(leaks("stderr", out.stderr.as_bytes()));
    let written = files_under(&ws.join(".gpuflow"));
    assert!(
        written.iter().any(|p| p.ends_with("results.db")),
        "the results store: {written:?}"
    );
    assert!(
        written.iter().any(|p| p.ends_with("record.json")),
        "the report's record: {written:?}"
    );
    for path in &written {
        let bytes = if path.is_file() {
            stored_text(path)
        } else {
            Vec::new()
        };
        found.extend(leaks(&path.display().to_string(), &bytes));
    }
    // The results branch: every file of its tip and the commit's message.
    let log = dir.git(&["log", "-p", "--format=%B", "results"]);
    assert!(log.contains("record.json"), "{log}");
    found.extend(leaks("the results branch", log.as_bytes()));
    assert!(found.is_empty(), "leaked: {found:#?}");
    // The long lines did reach the output, masked where the cut fell.
    assert!(
        stdout.contains(&format!("{}***", "a".repeat(8))),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("***{}", "d".repeat(8))),
        "{stdout}"
    );
}

/// A secret in the benchmark's `model` (`m-${{ secrets.K }}`): the load generator sends it in
/// every request and the result echoes it. Against gpuflow-sim on the host (no Docker), with a
/// report committed to a results branch: every file under `.gpuflow/` (compressed logs
/// decompressed), the results store and the results branch hold no form of it.
#[test]
fn a_secret_in_the_benchmarks_model_is_in_no_file_the_run_wrote() {
    let model = format!("m-{SECRET}");
    let sim = SimProcess::start(&[
        "--model-name",
        &model,
        "--ttft",
        "5ms",
        "--tokens-per-second",
        "400",
    ]);
    let dir = Workspace::repository()
        .file(
            "w.yml",
            &format!(
                r#"
name: model-leak
on: workflow_dispatch
jobs:
  bench:
    steps:
      - id: bench
        uses: benchmark
        with:
          target: http://{addr}
          model: m-${{{{ secrets.K }}}}
          mode: single-stream
          output-tokens: 4
          requests: 2
          runs: 2
          warmup: 0
      - run: echo "result at ${{{{ steps.bench.outputs.result-file }}}}"
  report:
    needs: bench
    steps:
      - uses: report
        with:
          commit: {{ branch: results }}
"#,
                addr = sim.addr()
            ),
        )
        .committed("workflow");
    dir.write(".git/info/exclude", ".gpuflow/\n");
    let out = dir
        .gpuflow()
        .without_docker()
        .env("K", SECRET)
        .args(["run", "--json", "w.yml", "--secret", "K"])
        .success();
    let mut found = leaks("stdout", out.stdout.as_bytes());
    found.extend(leaks("stderr", out.stderr.as_bytes()));
    let written = files_under(&dir.path().join(".gpuflow"));
    for wanted in [
        ".result.json",
        ".result.requests.jsonl",
        "results.db",
        "record.json",
    ] {
        assert!(
            written
                .iter()
                .any(|p| p.to_string_lossy().ends_with(wanted)),
            "no `{wanted}` among {written:?}"
        );
    }
    for path in written.iter().filter(|p| p.is_file()) {
        found.extend(leaks(&path.display().to_string(), &stored_text(path)));
    }
    let log = dir.git(&["log", "-p", "--format=%B", "results"]);
    assert!(log.contains("record.json"), "{log}");
    found.extend(leaks("the results branch", log.as_bytes()));
    assert!(found.is_empty(), "leaked: {found:#?}");
    // The requests did carry the model: the simulator served them under that name.
    let result = written
        .iter()
        .find(|p| p.to_string_lossy().ends_with(".result.json"))
        .unwrap();
    let text = std::fs::read_to_string(result).unwrap();
    assert!(text.contains("\"m-***\""), "{text}");
}

/// A secret with the characters HTML escapes (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`):
/// its escaped form is not the secret, so masking the escaped text alone would miss it. Its
/// start is found in no output in any form (escaped, JSON-escaped, cut short).
const HTML_SECRET: &str = "s3cr3t&Key<x>\"q'z";
/// What every form of [`HTML_SECRET`] starts with, and nothing else a run prints.
const HTML_SECRET_START: &str = "s3cr3t";

/// The run's output (stdout, stderr) and every file under `.gpuflow/` holding the start of
/// [`HTML_SECRET`], by name.
fn html_secret_leaks(ws: &Path, out: &Output) -> Vec<String> {
    let mut found = Vec::new();
    for (name, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        if text.contains(HTML_SECRET_START) {
            found.push(name.to_string());
        }
    }
    for path in files_under(&ws.join(".gpuflow")) {
        let text = if path.is_file() {
            String::from_utf8_lossy(&stored_text(&path)).into_owned()
        } else {
            String::new()
        };
        let name = path.display().to_string();
        if text.contains(HTML_SECRET_START) || name.contains(HTML_SECRET_START) {
            found.push(name);
        }
    }
    found
}

/// An HTML report escapes what it shows: a secret in its title (a step input) used to be
/// written as `s3cr3t&amp;Key&lt;x…`, which the masking of the written file did not know. On
/// the host with `gpuflow-sim`, so neither Docker nor an image is needed.
#[test]
fn an_html_report_holds_no_escaped_form_of_a_secret() {
    let sim = SimProcess::start(&["--ttft", "5ms", "--tokens-per-second", "2000"]);
    let dir = Workspace::repository().file(
        "w.yml",
        &format!(
            r#"
name: html
on: workflow_dispatch
jobs:
  bench:
    steps:
      - name: measure ${{{{ secrets.K }}}}
        uses: benchmark
        with:
          target: http://{addr}
          mode: single-stream
          output-tokens: 8
          requests: 2
          warmup: 0
  report:
    needs: bench
    steps:
      - uses: report
        with:
          format: html
          title: perf ${{{{ secrets.K }}}}
"#,
            addr = sim.addr()
        ),
    );
    dir.write(".git/info/exclude", ".gpuflow/\n");
    dir.commit("workflow");
    let ws = dir.path();
    let out = dir
        .gpuflow()
        .without_docker()
        .env("K", HTML_SECRET)
        .args(["run", "--plain", "w.yml", "--secret", "K"])
        .success();
    let all = out.all();
    let report = files_under(&ws.join(".gpuflow"))
        .into_iter()
        .find(|p| p.ends_with("report/report.html"))
        .unwrap_or_else(|| panic!("no report.html: {all}"));
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("perf ***"), "the title, masked: {html}");
    let found = html_secret_leaks(ws, &out);
    assert!(found.is_empty(), "leaked: {found:#?}\n{all}");
}

/// The plain view's closing summary lists every job run by name: a secret that is a matrix
/// value (`bench (…)`) or in a job's `name:` was printed there as it is, while every event
/// (and so every other line, and all of `--json`) was masked. Host `run:` steps only.
#[test]
fn the_closing_summary_holds_no_secret_from_a_matrix_value_or_a_job_name() {
    // Inside single-quoted YAML: its `'` doubled.
    let quoted = HTML_SECRET.replace('\'', "''");
    let dir = Workspace::new().file(
        "w.yml",
        &format!(
            r#"
name: summary
on: workflow_dispatch
jobs:
  bench:
    strategy:
      matrix:
        token: ['{quoted}', plain]
    steps:
      - run: echo measured
  deploy:
    name: 'deploy {quoted}'
    steps:
      - run: echo deployed
"#
        ),
    );
    for mode in ["--plain", "--json"] {
        let out = dir
            .gpuflow()
            .without_docker()
            .env("K", HTML_SECRET)
            .args(["run", mode, "w.yml", "--secret", "K"])
            .output();
        let all = out.all();
        assert_eq!(out.code(), Some(0), "{mode}: {all}");
        let found = html_secret_leaks(dir.path(), &out);
        assert!(found.is_empty(), "{mode}: leaked: {found:#?}\n{all}");
        if mode == "--plain" {
            let summary = all
                .split_once("summary:\n")
                .unwrap_or_else(|| panic!("no summary: {all}"))
                .1;
            assert!(summary.contains("  bench (***)  "), "{summary}");
            assert!(summary.contains("  bench (plain)  "), "{summary}");
            assert!(summary.contains("  deploy ***  "), "{summary}");
        }
    }
}
