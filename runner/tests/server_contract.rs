//! The contract with the servers gpuflow ships command lines for: every SGLang and vLLM
//! command line in `workflows/`, `examples/`, the shipped actions, README.md and docs/ —
//! every matrix cell filled in, evaluated as preflight evaluates them
//! (`engine::preflight::server_lines`) — is parsed by the servers' own parsers of the pinned
//! versions: SGLang 0.5.23's (`images/sglang/sglang-parser.sh`, built from the wheel's own
//! argument definitions) and vLLM 0.32.0's (`images/vllm/parse_serve.py` in the real vLLM of
//! `images/vllm/vllm-cpu.sh`). A flag a server no longer takes fails here, not on a GPU node
//! after a model load. The SGLang `/metrics` series gpuflow reads are checked against the
//! declarations in SGLang's source (vLLM's live: `vllm_server.rs`).
//!
//! Bumping a pin (the scripts' versions) re-runs all of it against the new parser.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use gpuflow::bench::server_metrics::series;
use gpuflow::engine::options::RunOptions;
use gpuflow::engine::preflight::server_lines;
use gpuflow::steps::server_cli::{Program, recognise};
use gpuflow::workflow::Loaded;
use indexmap::IndexMap;

use super::vllm_process::{VLLM_CPU_ENV, vllm_dir};
use crate::support::doc_blocks::{blocks, wrapped};
use crate::support::{Workspace, repo_root, shipped};

/// One server command line found, and where.
#[derive(Debug)]
struct Found {
    origin: String,
    program: Program,
    /// The arguments after the program (`sglang serve`, `vllm serve`, …).
    args: Vec<String>,
}

/// The folder `images/sglang/sglang-parser.sh` prints: `bin/sglang-serve-parser`,
/// `bin/sglang-launch-server-parser`, `lib/sglang/` (the wheel's sources), `venv/`.
pub(crate) fn sglang_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo_root().join("images/sglang/sglang-parser.sh"))
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs images/sglang/sglang-parser.sh");
        assert!(
            out.status.success(),
            "images/sglang/sglang-parser.sh failed"
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// The server command lines of the workflow at `path` (its actions beside it), each job run's.
fn lines_of(path: &Path, origin: &str) -> (Vec<Found>, Vec<String>) {
    let (loaded, diags) =
        gpuflow::check::load_and_check(path).unwrap_or_else(|d| panic!("{origin}: {}", d.message));
    assert!(!diags.has_errors(), "{origin} does not validate: {diags:?}");
    let Loaded::Workflow(Some(wf)) = loaded else {
        return (Vec::new(), Vec::new());
    };
    let model = gpuflow::plan::from_workflow(&wf, "w");
    let plan = gpuflow::plan::build_with_names(&model.input, &|name, _| name.to_string())
        .unwrap_or_else(|e| panic!("{origin}: {e:?}"));
    let inputs = gpuflow::engine::inputs::resolve(&wf, &IndexMap::new())
        .unwrap_or_else(|e| panic!("{origin}: {e}"));
    let workspace = path.parent().unwrap();
    let found = server_lines(&wf, &plan, &RunOptions::new("contract", workspace), inputs);
    let lines = found
        .lines
        .into_iter()
        .map(|l| {
            let cmd = recognise(&l.argv).unwrap();
            Found {
                origin: format!("{origin} {} ({})", l.job, l.at),
                program: cmd.program,
                args: l.argv[cmd.prefix.len()..].to_vec(),
            }
        })
        .collect();
    (lines, found.not_evaluated)
}

/// A git repository holding the shipped actions, for workflows written into it.
fn repository() -> Workspace {
    let mut dir = Workspace::repository();
    for name in [
        "sglang-server",
        "vllm-server",
        "llamacpp-server",
        "openai-bench",
    ] {
        let path = format!("actions/{name}/action.yml");
        dir = dir.file(&path, &shipped(&path));
    }
    dir.committed("actions")
}

/// Every server command line gpuflow ships: workflows, examples, and the docs' examples.
fn shipped_lines() -> Vec<Found> {
    let root = repo_root();
    let mut out = Vec::new();
    for folder in ["workflows", "examples"] {
        for entry in std::fs::read_dir(root.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yml") {
                let rel = path.strip_prefix(&root).unwrap().display().to_string();
                let dir = repository().file("w.yml", &std::fs::read_to_string(&path).unwrap());
                let (lines, not_evaluated) = lines_of(&dir.path().join("w.yml"), &rel);
                // Said, not failed: a start-container fed by an earlier step's output.
                for step in not_evaluated {
                    eprintln!("{rel}: not evaluated before the run: {step}");
                }
                out.extend(lines);
            }
        }
    }
    let mut pages = vec![root.join("README.md")];
    for folder in ["docs", "docs/steps"] {
        for entry in std::fs::read_dir(root.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    for page in pages {
        let rel = page.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        for block in blocks(&text) {
            let servers = [
                "./actions/sglang-server",
                "./actions/vllm-server",
                "sglang serve",
                "vllm serve",
                "launch_server",
            ];
            if block.lang != "yaml"
                || block.flag("fragment")
                || block.flag("invalid")
                || !servers.iter().any(|s| block.text.contains(s))
            {
                continue;
            }
            let dir = repository().file("w.yml", &wrapped(&block));
            out.extend(lines_of(&dir.path().join("w.yml"), &format!("{rel}:{}", block.line)).0);
        }
    }
    out
}

/// What SGLang's own parser says of `found`: `None` when it takes the arguments.
fn sglang_refusal(found: &Found) -> Option<String> {
    let program = match found.program {
        Program::SglangServe => "sglang-serve-parser",
        Program::SglangLaunchServer => "sglang-launch-server-parser",
        _ => unreachable!(),
    };
    let out = Command::new(sglang_dir().join("bin").join(program))
        .args(&found.args)
        .output()
        .unwrap();
    (!out.status.success()).then(|| {
        let err = String::from_utf8_lossy(&out.stderr);
        err.lines().last().unwrap_or_default().to_string()
    })
}

/// What vLLM's own `vllm serve` parser says of each of `lines` (one Python process for all:
/// importing vLLM takes half a minute): `None` where it takes them.
fn vllm_refusals(lines: &[&Found]) -> Vec<Option<String>> {
    if lines.is_empty() {
        return Vec::new();
    }
    let mut child = Command::new(vllm_dir().join("venv/bin/python"))
        .arg(repo_root().join("images/vllm/parse_serve.py"))
        .envs(VLLM_CPU_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for found in lines {
            writeln!(stdin, "{}", serde_json::to_string(&found.args).unwrap()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "images/vllm/parse_serve.py failed");
    let answers: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), lines.len());
    answers
        .into_iter()
        .map(|a| {
            (a["ok"] != true).then(|| {
                let error = a["error"].as_str().unwrap_or_default();
                error.lines().last().unwrap_or_default().to_string()
            })
        })
        .collect()
}

/// Each line with what its server's parser said: `None` where it takes it.
fn judge(lines: &[Found]) -> Vec<(&Found, Option<String>)> {
    let vllm: Vec<&Found> = lines
        .iter()
        .filter(|f| f.program == Program::VllmServe)
        .collect();
    assert!(
        lines.iter().all(|f| f.program != Program::VllmApiServer),
        "a shipped line runs vLLM's api_server module, which parse_serve.py does not parse"
    );
    let mut vllm_answers = vllm_refusals(&vllm).into_iter();
    lines
        .iter()
        .map(|f| {
            let answer = match f.program {
                Program::VllmServe => vllm_answers.next().unwrap(),
                _ => sglang_refusal(f),
            };
            (f, answer)
        })
        .collect()
}

#[test]
fn every_shipped_server_command_line_is_taken_by_the_servers_own_parser() {
    let lines = shipped_lines();
    let count = |p: Program| lines.iter().filter(|f| f.program == p).count();
    // Not vacuous: eagle3's six SGLang cells and its vLLM job, README's four cells, the docs'.
    assert!(
        count(Program::SglangLaunchServer) >= 10 && count(Program::VllmServe) >= 2,
        "{lines:#?}"
    );
    let refused: Vec<String> = judge(&lines)
        .into_iter()
        .filter_map(|(f, r)| r.map(|r| format!("{}: `{}`: {r}", f.origin, f.args.join(" "))))
        .collect();
    assert!(
        refused.is_empty(),
        "refused by the server's own parser:\n{}",
        refused.join("\n")
    );
}

#[test]
fn a_misspelled_or_removed_flag_in_a_shipped_workflow_fails_the_contract() {
    let eagle3 = std::fs::read_to_string(repo_root().join("workflows/eagle3.yml")).unwrap();
    assert!(
        eagle3.contains("--cuda-graph-max-bs-decode") && eagle3.contains("--tensor-parallel-size")
    );
    let broken = eagle3
        .replace("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs")
        .replace("--tensor-parallel-size", "--tensor-parallel-sise");
    let dir = repository().file("w.yml", &broken);
    let (lines, _) = lines_of(&dir.path().join("w.yml"), "eagle3 (broken)");
    let judged = judge(&lines);
    assert_eq!(judged.len(), 7, "{lines:#?}");
    for (f, refusal) in judged {
        let refusal = refusal.unwrap_or_else(|| panic!("{} was taken: {:?}", f.origin, f.args));
        let expected = match f.program {
            Program::VllmServe => "unrecognized arguments: --tensor-parallel-sise",
            _ => {
                "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
            }
        };
        assert!(refusal.contains(expected), "{}: {refusal}", f.origin);
    }
}

/// SGLang's metric declarations in its source: (`Counter`/`Gauge`/…, name) for every
/// `prometheus_client` metric it creates with a literal `name=`, read with Python's `ast`.
const DECLARED_METRICS: &str = r#"
import ast, json, pathlib, sys
out = []
for path in pathlib.Path(sys.argv[1]).rglob("*.py"):
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        continue
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            kind = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            for kw in node.keywords:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    out.append([kind, kw.value.value])
print(json.dumps(out))
"#;

#[test]
fn the_sglang_series_gpuflow_reads_are_declared_in_sglangs_source() {
    let dir = sglang_dir();
    let out = Command::new(dir.join("venv/bin/python"))
        .args(["-c", DECLARED_METRICS])
        .arg(dir.join("lib/sglang/srt"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let declared: Vec<(String, String)> = serde_json::from_slice(&out.stdout).unwrap();
    // The names /metrics shows: prometheus_client exposes a counter as its name with `_total`
    // (added when the declaration lacks it).
    let exposed: Vec<String> = declared
        .iter()
        .filter(|(_, name)| name.starts_with("sglang:"))
        .map(|(kind, name)| match kind.as_str() {
            "Counter" => format!("{}_total", name.trim_end_matches("_total")),
            _ => name.clone(),
        })
        .collect();
    assert!(exposed.len() > 20, "{declared:?}");
    for name in series::SGLANG {
        assert!(
            exposed.iter().any(|e| e == name),
            "SGLang 0.5.23 declares no `{name}`"
        );
    }
}
