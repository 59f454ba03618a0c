//! Docs that cannot drift: every fenced block of README.md, SECURITY.md and docs/ is checked
//! against the program, the way trycmd and snapbox check clap's and cargo's docs. One test
//! per page; each page gets a scratch workspace holding a copy of the shipped files (a fresh
//! clone, committed), and its blocks run in order, so a block may use a file an earlier
//! block wrote.
//!
//! What a block's info string means (the first word is the language):
//!
//! - ```` ```yaml ```` — a workflow (or an action, when it has `runs:`) that `gpuflow validate`
//!   accepts. `file=PATH`: a shipped file's excerpt (it must appear in PATH verbatim), or, when
//!   PATH is not shipped, a file the page's later blocks use (written to the workspace).
//!   `invalid`: validate must refuse it, and the next block must be a `console` block running
//!   `gpuflow validate PATH`, whose output shows the error. `steps`: a list of steps (or
//!   `steps:` with one), `jobs`: jobs by id — validated inside the smallest workflow around
//!   them. `fragment`: any other part of a file; only its YAML syntax is checked.
//! - ```` ```console ```` — `$ command` lines, each followed by its output. Every command runs
//!   in the page's workspace (`sh -c`, stderr with stdout, the built `gpuflow` and
//!   `gpuflow-sim` first on PATH), must exit 0 (the last one: `status=N`), and its output
//!   must match (`command &`: started in the background for the page's later commands, and
//!   ended with the page). In the shown output, a line `…` (or `...`) stands for any number
//!   of lines and `…` (or `[..]`) within a line for any text; run ids, commit hashes,
//!   timestamps, durations and decimal numbers match any other of their kind, so a page can
//!   show real values; the workspace's path is shown as `/home/you/gpuflow`. `skip="why"`:
//!   cannot run here (a GPU, a remote node), and says why.
//! - ```` ```sh ```` — commands without their output: each `gpuflow …` command line must be
//!   accepted by the command-line parser and each `make TARGET` must name a Makefile target.
//!   `synopsis`: a command's synopsis, which must name every option the command takes (and
//!   only those; `synopsis=partial`: some of them).
//! - ```` ```toml ```` — parsed; `gpuflow.toml` (or `file=gpuflow.toml`) is read as a host
//!   file with every check `gpuflow` makes. `file=` as for YAML.
//! - ```` ```json ```` — parsed (`lines`: one document a line; `fragment`: not checked).
//! - `text`, `tera`, `html`, `markdown`, `python`, `dockerfile` — shown, not checked.
//!
//! `GPUFLOW_BLESS=1` (`make docs`) rewrites the shown output of every `console` block that no
//! longer matches with what the program printed, and passes.

use std::ops::Range;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use clap::Parser as _;

use regex::Regex;

use crate::support::doc_blocks::{Block, blocks, wrapped};
use crate::support::docker::connect_or_skip;
use crate::support::process::signal;
use crate::support::{self, Signal, git, gpuflow, repo_root};

macro_rules! pages {
    ($($test:ident => $path:literal,)*) => {
        $(
            #[tokio::test]
            async fn $test() {
                check_page($path).await;
            }
        )*
        const PAGES: &[&str] = &[$($path),*];
    };
}

pages! {
    readme => "README.md",
    security => "SECURITY.md",
    architecture => "ARCHITECTURE.md",
    images_readme => "images/README.md",
    actions => "docs/actions.md",
    benchmark => "docs/benchmark.md",
    campaigns => "docs/campaigns.md",
    editors => "docs/editors.md",
    expressions => "docs/expressions.md",
    gpus => "docs/gpus.md",
    hosts => "docs/hosts.md",
    kubernetes => "docs/kubernetes.md",
    memory => "docs/memory.md",
    reports => "docs/reports.md",
    results => "docs/results.md",
    running => "docs/running.md",
    serve => "docs/serve.md",
    simulator => "docs/simulator.md",
    slurm => "docs/slurm.md",
    testing => "docs/testing.md",
    triggers => "docs/triggers.md",
    workflow_syntax => "docs/workflow-syntax.md",
    steps_readme => "docs/steps/README.md",
    step_assert_file => "docs/steps/assert-file.md",
    step_benchmark => "docs/steps/benchmark.md",
    step_check_cli_interface => "docs/steps/check-cli-interface.md",
    step_compare_to_baseline => "docs/steps/compare-to-baseline.md",
    step_report => "docs/steps/report.md",
    step_start_container => "docs/steps/start-container.md",
    step_stop_container => "docs/steps/stop-container.md",
    step_wait_for_health => "docs/steps/wait-for-health.md",
}

/// ARCHITECTURE.md's map stays true: every source file it names in backticks exists, from
/// the repository root, from `runner/src/`, or (a bare name such as `probe.rs`, said of the
/// folder just named) somewhere below `runner/src/`.
#[test]
fn every_file_architecture_md_names_exists() {
    let root = repo_root();
    let page = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let src = root.join("runner/src");
    let mut names_below_src = Vec::new();
    let mut folders = vec![src.clone()];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                names_below_src.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    let named = Regex::new(r"`([A-Za-z0-9_./]+\.rs)`").unwrap();
    let missing: Vec<&str> = named
        .captures_iter(&page)
        .map(|c| c.get(1).unwrap().as_str())
        .filter(|path| {
            !root.join(path).is_file()
                && !src.join(path).is_file()
                && (path.contains('/') || !names_below_src.iter().any(|n| n == path))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names files that are not there: {missing:?}"
    );
}

/// A new page gets its test: every Markdown file a user reads is in [`PAGES`].
#[test]
fn every_page_has_a_test() {
    let root = repo_root();
    let mut on_disk: Vec<String> = [
        "README.md",
        "SECURITY.md",
        "ARCHITECTURE.md",
        "images/README.md",
    ]
    .into_iter()
    .filter(|p| root.join(p).is_file())
    .map(String::from)
    .collect();
    for dir in ["docs", "docs/steps", "examples"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".md") {
                on_disk.push(format!("{dir}/{name}"));
            }
        }
    }
    on_disk.sort();
    let mut tested: Vec<String> = PAGES.iter().map(|p| p.to_string()).collect();
    tested.sort();
    assert_eq!(
        tested, on_disk,
        "add each new page to `pages!` in runner/tests/doc_examples.rs"
    );
}

/// Every shipped workflow, example and action validates: the docs run them.
#[test]
fn the_shipped_workflows_examples_and_actions_validate() {
    gpuflow()
        .args(["validate", "workflows/", "examples/", "actions/"])
        .current_dir(repo_root())
        .success();
}

/// docs/running.md lists every event type `--json` prints: each variant of the event enum
/// (`StepProgress` → `step_progress`) is named there.
#[test]
fn every_event_type_is_documented() {
    let root = repo_root();
    let source = std::fs::read_to_string(root.join("runner/src/events/event.rs")).unwrap();
    let start = source
        .find("#[serde(tag = \"type\", rename_all = \"snake_case\")]")
        .expect("the event enum's serde attributes");
    let body = &source[start..];
    let body = &body[body.find('{').unwrap()..];
    let variant = Regex::new(r"(?m)^    ([A-Z][A-Za-z]+)\b").unwrap();
    let doc = std::fs::read_to_string(root.join("docs/running.md")).unwrap();
    let mut missing = Vec::new();
    let variants: Vec<_> = variant
        .captures_iter(&body[..body.find("\n}").unwrap()])
        .collect();
    assert!(
        variants.len() >= 20,
        "the event enum was not found in event.rs"
    );
    for name in variants {
        let snake: String = name[1]
            .chars()
            .enumerate()
            .flat_map(|(i, c)| {
                let lower = c.to_ascii_lowercase();
                if c.is_ascii_uppercase() && i > 0 {
                    vec!['_', lower]
                } else {
                    vec![lower]
                }
            })
            .collect();
        if !doc.contains(&format!("`{snake}`")) {
            missing.push(snake);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/running.md does not list the events {missing:?}"
    );
}

/// A scratch workspace for one page: the shipped files, committed, as a fresh clone has them
/// (a kit [`support::Workspace`]), and a private `GPUFLOW_HOME`.
struct Workspace {
    dir: support::Workspace,
    home: support::Workspace,
    /// Process groups of the page's `command &` lines, ended with the page.
    background: std::cell::RefCell<Vec<std::process::Child>>,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        for child in self.background.borrow_mut().iter_mut() {
            let _ = signal(-(child.id() as i32), Signal::KILL);
            let _ = child.wait();
        }
    }
}

impl Workspace {
    fn new() -> Self {
        let root = repo_root();
        let dir = support::Workspace::repository();
        let listed = git(
            &root,
            &[
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
        );
        for name in listed.split('\0').filter(|n| !n.is_empty()) {
            let from = root.join(name);
            // A file deleted in the working tree but still in the index.
            if !from.is_file() {
                continue;
            }
            let to = dir.path().join(name);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&from, &to).unwrap();
        }
        dir.commit("a fresh clone");
        Self {
            dir,
            home: support::Workspace::empty(),
            background: Default::default(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `sh -c` in the workspace, with the built binaries first on PATH.
    fn shell(&self, script: &str) -> std::process::Command {
        let bin = Path::new(env!("CARGO_BIN_EXE_gpuflow"));
        let bin_dir = bin.parent().unwrap();
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .current_dir(self.path())
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .env("COLUMNS", "100")
            .env("GPUFLOW_HOME", self.home.path())
            .env_remove("GPUFLOW_STORE")
            .env_remove("GPUFLOW_BLESS");
        command
    }

    /// Runs one shell command line here, stderr into stdout.
    fn sh(&self, command: &str) -> Output {
        assert_cmd::Command::from_std(self.shell(&format!("exec 2>&1\n{command}")))
            .timeout(Duration::from_secs(300))
            .output()
            .unwrap()
    }

    /// Starts `command &` in a process group of its own, output discarded, and gives it a
    /// second to start listening.
    fn start_background(&self, command: &str) {
        use std::os::unix::process::CommandExt;
        let child = self
            .shell(command)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        self.background.borrow_mut().push(child);
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Everything wrong with one page, reported together.
#[derive(Default)]
struct Findings {
    problems: Vec<String>,
    /// (content range, new content) for `GPUFLOW_BLESS=1`.
    blessings: Vec<(Range<usize>, String)>,
}

async fn check_page(rel: &str) {
    let root = repo_root();
    let path = root.join(rel);
    let page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let blocks = blocks(&page);
    let needs_docker = blocks.iter().any(|b| {
        b.lang == "console"
            && !b.flag("skip")
            && (b.text.contains("gpuflow run ") || b.text.contains("make demo"))
    });
    if needs_docker && connect_or_skip().await.is_none() {
        return;
    }
    let workspace = Workspace::new();
    let mut findings = Findings::default();
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("{rel}:{}", block.line);
        let next = blocks.get(i + 1);
        match block.lang.as_str() {
            "yaml" | "yml" => check_yaml(&at, block, next, &workspace, &mut findings),
            "console" => check_console(&at, block, &workspace, &mut findings),
            "sh" | "bash" | "shell" if block.flag("synopsis") => {
                check_synopsis(&at, block, &mut findings)
            }
            "sh" | "bash" | "shell" => check_sh(&at, block, &mut findings),
            "toml" => check_toml(&at, block, &workspace, &mut findings),
            "json" if block.flag("fragment") => {}
            "json" => {
                // `json lines`: one document a line (JSON Lines).
                let documents: Vec<&str> = if block.flag("lines") {
                    block
                        .text
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .collect()
                } else {
                    vec![block.text.as_str()]
                };
                for document in documents {
                    if let Err(e) = serde_json::from_str::<serde_json::Value>(document) {
                        findings.problems.push(format!(
                            "{at}: invalid JSON: {e} (`json lines` for JSON Lines, `json \
                             fragment` for a part of a document)"
                        ));
                    }
                }
            }
            "text" | "tera" | "html" | "markdown" | "python" | "dockerfile" => {}
            "" => findings.problems.push(format!(
                "{at}: a code block without a language: give it one (`text` for output shown \
                 without its command; see runner/tests/doc_examples.rs)"
            )),
            other => findings.problems.push(format!(
                "{at}: the language `{other}` is not one the docs tests know: use yaml, \
                 console, sh, toml, json or text (runner/tests/doc_examples.rs)"
            )),
        }
    }
    if std::env::var("GPUFLOW_BLESS").as_deref() == Ok("1") && !findings.blessings.is_empty() {
        let mut text = page.clone();
        findings.blessings.sort_by_key(|(range, _)| range.start);
        for (range, new) in findings.blessings.iter().rev() {
            text.replace_range(range.clone(), new);
        }
        std::fs::write(&path, text).unwrap();
        eprintln!(
            "{rel}: blessed {} block(s) with what the program printed",
            findings.blessings.len()
        );
    }
    assert!(
        findings.problems.is_empty(),
        "{} problem(s) in {rel}:\n\n{}",
        findings.problems.len(),
        findings.problems.join("\n\n")
    );
}

/// Where a `file=PATH` block's text lives: a shipped file it is an excerpt of, or a file of
/// the page's own that later blocks use.
fn place_file(at: &str, block: &Block, workspace: &Workspace, findings: &mut Findings) -> bool {
    let Some(file) = block.attr("file") else {
        return true;
    };
    if file.starts_with('/') || file.split('/').any(|part| part == "..") {
        findings.problems.push(format!(
            "{at}: `file={file}` must be a path inside the workspace"
        ));
        return false;
    }
    let shipped = repo_root().join(file);
    if shipped.is_file() {
        let text = std::fs::read_to_string(&shipped).unwrap();
        if !text.contains(block.text.trim_end()) {
            let first = block.text.lines().next().unwrap_or_default();
            let shown = match text.find(first) {
                Some(start) => {
                    let end = (start + block.text.len() + 200).min(text.len());
                    let end = (end..=text.len())
                        .find(|i| text.is_char_boundary(*i))
                        .unwrap();
                    diff(&block.text, &text[start..end])
                }
                None => format!("its first line `{first}` is not in {file}"),
            };
            findings.problems.push(format!(
                "{at}: the block is not an excerpt of the shipped {file} (copy it from the \
                 file):\n{shown}"
            ));
        }
    } else {
        let to = workspace.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(&to, &block.text).unwrap();
    }
    true
}

fn check_yaml(
    at: &str,
    block: &Block,
    next: Option<&Block>,
    workspace: &Workspace,
    findings: &mut Findings,
) {
    if block.flag("fragment") {
        if let Err(e) = yaml_serde::from_str::<yaml_serde::Value>(&block.text) {
            findings
                .problems
                .push(format!("{at}: a YAML fragment that is not YAML: {e}"));
        }
        return;
    }
    if !place_file(at, block, workspace, findings) {
        return;
    }
    let invalid = block.flag("invalid");
    if invalid {
        let Some(file) = block.attr("file") else {
            findings.problems.push(format!(
                "{at}: an `invalid` example needs `file=NAME.yml`, and a `console` block after \
                 it running `gpuflow validate NAME.yml` to show its error"
            ));
            return;
        };
        let shown = next.is_some_and(|n| {
            n.lang == "console" && n.text.contains(&format!("gpuflow validate {file}"))
        });
        if !shown {
            findings.problems.push(format!(
                "{at}: an `invalid` example is followed by the error it gives: a `console` \
                 block running `gpuflow validate {file}`"
            ));
        }
    }
    // What to validate: the file the block names, else a scratch copy (an action is checked
    // as the `action.yml` of its own folder; steps and jobs inside a workflow around them).
    let target = match block.attr("file") {
        Some(file) => file.to_string(),
        None => {
            let text = wrapped(block);
            let is_action = yaml_serde::from_str::<yaml_serde::Value>(&text)
                .ok()
                .and_then(|v| v.get("runs").cloned())
                .is_some();
            let name = if is_action {
                format!(".docs/line-{}/action.yml", block.line)
            } else {
                format!(".docs/line-{}.yml", block.line)
            };
            let to = workspace.path().join(&name);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(&to, &text).unwrap();
            name
        }
    };
    let out = workspace.sh(&format!("gpuflow validate '{target}'"));
    let text = String::from_utf8_lossy(&out.stdout);
    match (out.status.code(), invalid) {
        (Some(0), false) | (Some(1), true) => {}
        (_, false) => findings.problems.push(format!(
            "{at}: `gpuflow validate` refuses this example (mark it `invalid` and show the \
             error, or fix it):\n{text}"
        )),
        (code, true) => findings.problems.push(format!(
            "{at}: an example marked `invalid` gave exit status {code:?}, not 1:\n{text}"
        )),
    }
}

fn check_toml(at: &str, block: &Block, workspace: &Workspace, findings: &mut Findings) {
    if block.flag("fragment") {
        if let Err(e) = block.text.parse::<toml::Table>() {
            findings
                .problems
                .push(format!("{at}: a TOML fragment that is not TOML: {e}"));
        }
        return;
    }
    if !place_file(at, block, workspace, findings) {
        return;
    }
    let is_host_file = block.attr("file").unwrap_or("gpuflow.toml") == "gpuflow.toml";
    if is_host_file {
        let file = gpuflow::diag::SourceFile::new("gpuflow.toml".to_string(), block.text.clone());
        if let Err(diagnostics) = gpuflow::hosts::HostConfig::parse(&file) {
            let rendered = gpuflow::diag::render_all(&diagnostics, Default::default());
            findings.problems.push(format!(
                "{at}: gpuflow refuses this gpuflow.toml:\n{rendered}"
            ));
        }
    } else if let Err(e) = block.text.parse::<toml::Table>() {
        findings.problems.push(format!("{at}: invalid TOML: {e}"));
    }
}

/// One `$ command` of a console block and the output shown under it.
struct Shown {
    command: String,
    output: String,
}

fn commands(text: &str) -> Vec<Shown> {
    let mut out: Vec<Shown> = Vec::new();
    let mut continuing = false;
    for line in text.lines() {
        if continuing {
            let last = out.last_mut().unwrap();
            last.command.push('\n');
            last.command.push_str(line);
            continuing = line.ends_with('\\');
        } else if let Some(command) = line.strip_prefix("$ ") {
            out.push(Shown {
                command: command.to_string(),
                output: String::new(),
            });
            continuing = command.ends_with('\\');
        } else if let Some(last) = out.last_mut() {
            last.output.push_str(line);
            last.output.push('\n');
        }
    }
    out
}

fn check_console(at: &str, block: &Block, workspace: &Workspace, findings: &mut Findings) {
    if let Some(why) = block.attr("skip") {
        if why.trim().is_empty() {
            findings.problems.push(format!(
                "{at}: `skip` needs its reason: skip=\"needs a GPU\""
            ));
        }
        return;
    }
    let shown = commands(&block.text);
    if shown.is_empty() {
        findings.problems.push(format!(
            "{at}: a console block without a `$ command` line (use `text` for output alone)"
        ));
        return;
    }
    let last_status: i32 = block
        .attr("status")
        .map(|s| s.parse().expect("status=N"))
        .unwrap_or(0);
    let mut blessed = String::new();
    let mut differs = false;
    for (i, one) in shown.iter().enumerate() {
        if let Some(background) = one.command.trim_end().strip_suffix('&')
            && !background.ends_with('&')
        {
            workspace.start_background(background);
            blessed.push_str(&format!("$ {}\n", one.command));
            continue;
        }
        let out = workspace.sh(&one.command);
        let actual = String::from_utf8_lossy(&out.stdout)
            .replace(&workspace.path().display().to_string(), SHOWN_WORKSPACE);
        let want = if i + 1 == shown.len() { last_status } else { 0 };
        if out.status.code() != Some(want) {
            findings.problems.push(format!(
                "{at}: `{}` exited with {:?}, the page expects {want}{}:\n{actual}",
                one.command,
                out.status.code(),
                if i + 1 == shown.len() {
                    " (`status=N` on the block for a failing last command)"
                } else {
                    ""
                }
            ));
        }
        if !output_matches(&one.output, &actual) {
            differs = true;
            findings.problems.push(format!(
                "{at}: the output of `{}` differs from the page (- page, + program; \
                 `make docs` re-blesses):\n{}",
                one.command,
                diff(&normalize(&one.output), &normalize(&actual))
            ));
        }
        blessed.push_str(&format!("$ {}\n{}", one.command, actual));
        if !actual.is_empty() && !actual.ends_with('\n') {
            blessed.push('\n');
        }
    }
    if differs {
        let indented: String = blessed
            .lines()
            .map(|l| {
                if l.is_empty() {
                    "\n".to_string()
                } else {
                    format!("{}{l}\n", block.indent)
                }
            })
            .collect();
        findings.blessings.push((block.content.clone(), indented));
        if std::env::var("GPUFLOW_BLESS").as_deref() == Ok("1") {
            findings
                .problems
                .retain(|p| !p.starts_with(&format!("{at}: the output")));
        }
    }
}

/// Each `gpuflow …` command line is one the parser accepts; each `make X` names a target.
fn check_sh(at: &str, block: &Block, findings: &mut Findings) {
    let makefile = std::fs::read_to_string(repo_root().join("Makefile")).unwrap();
    let mut logical = String::new();
    for line in block.text.lines() {
        if let Some(head) = line.strip_suffix('\\') {
            logical.push_str(head);
            continue;
        }
        logical.push_str(line);
        let command = std::mem::take(&mut logical);
        let Some(mut words) = shlex::split(&command) else {
            findings
                .problems
                .push(format!("{at}: not a shell command line: {command}"));
            continue;
        };
        if let Some(comment) = words.iter().position(|w| w.starts_with('#')) {
            words.truncate(comment);
        }
        // Redirections are not arguments: drop them with their file.
        let mut kept = Vec::new();
        let mut words_left = words.into_iter();
        while let Some(word) = words_left.next() {
            match word.as_str() {
                ">" | ">>" | "<" | "2>" => {
                    words_left.next();
                }
                "2>&1" => {}
                _ => kept.push(word),
            }
        }
        // One simple command per check: the words before a shell operator.
        for simple in kept.split(|w| matches!(w.as_str(), "&&" | "||" | "|" | ";" | "&")) {
            let Some(program) = simple.first() else {
                continue;
            };
            let program = program.rsplit('/').next().unwrap();
            let program = program.trim_end_matches(')');
            if program == "gpuflow" {
                if let Err(e) = gpuflow::cli::Cli::try_parse_from(simple) {
                    use clap::error::ErrorKind;
                    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                        findings.problems.push(format!(
                            "{at}: `{}` is not a command gpuflow accepts:\n{}",
                            simple.join(" "),
                            e.render()
                        ));
                    }
                }
            } else if program == "make" {
                for target in simple.iter().skip(1).filter(|t| !t.contains('=')) {
                    let declared = makefile.lines().any(|l| {
                        l.split(':')
                            .next()
                            .unwrap_or_default()
                            .split_whitespace()
                            .any(|t2| t2 == target)
                            && l.contains(':')
                            && !l.starts_with('\t')
                            && !l.starts_with('#')
                    });
                    if !declared {
                        findings.problems.push(format!(
                            "{at}: `make {target}`: no such target in the Makefile"
                        ));
                    }
                }
            }
        }
    }
}

/// A command's synopsis (`gpuflow run FILE [--input NAME=VALUE]… …`) names every option the
/// command takes (over all its lines in the block; `synopsis=partial`: a part of them), and
/// only those. A short flag (`-f`) stands for its long form.
fn check_synopsis(at: &str, block: &Block, findings: &mut Findings) {
    use clap::CommandFactory;
    let flag = Regex::new(r"(^|[\s\[|(])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b").unwrap();
    let partial = block.attr("synopsis") == Some("partial");
    let cli = gpuflow::cli::Cli::command();
    // Per command (`gpuflow trigger`): what its options are, and which the block shows.
    let mut commands: Vec<(String, &clap::Command, std::collections::BTreeSet<String>)> =
        Vec::new();
    let mut lines = block.text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("gpuflow ") else {
            continue;
        };
        // The subcommand path: the words before the first option or placeholder.
        let mut command = &cli;
        let mut path = vec!["gpuflow".to_string()];
        for word in rest.split_whitespace() {
            match command.find_subcommand(word) {
                Some(sub) => {
                    command = sub;
                    path.push(word.to_string());
                }
                None => break,
            }
        }
        // A synopsis may go on over indented lines.
        let mut text = rest.to_string();
        while let Some(next) = lines.peek() {
            if next.starts_with(' ') && !next.trim_start().starts_with("gpuflow ") {
                text.push(' ');
                text.push_str(lines.next().unwrap());
            } else {
                break;
            }
        }
        let text = text.split(" #").next().unwrap_or_default();
        let path = path.join(" ");
        let index = match commands.iter().position(|(p, _, _)| *p == path) {
            Some(i) => i,
            None => {
                commands.push((path.clone(), command, Default::default()));
                commands.len() - 1
            }
        };
        for shown in flag.captures_iter(text).map(|c| c[2].to_string()) {
            let long = if let Some(short) = shown.strip_prefix('-').filter(|s| s.len() == 1) {
                let short = short.chars().next().unwrap();
                command
                    .get_arguments()
                    .find(|a| a.get_short() == Some(short))
                    .and_then(|a| a.get_long())
                    .map(|l| format!("--{l}"))
            } else {
                command
                    .get_arguments()
                    .any(|a| a.get_long() == Some(&shown[2..]))
                    .then(|| shown.clone())
            };
            match long {
                Some(long) => {
                    commands[index].2.insert(long);
                }
                None if shown == "--" || shown == "-h" => {}
                None => findings.problems.push(format!(
                    "{at}: the synopsis of `{path}` shows `{shown}`, which it does not take"
                )),
            }
        }
    }
    if partial {
        return;
    }
    for (path, command, shown) in commands {
        let missing = command
            .get_arguments()
            // The command's own options (`--store` is one, though marked global for its
            // subcommands); the parent's `--color` is not propagated to an unbuilt command.
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .filter(|l| l != "--help" && l != "--version" && !shown.contains(l));
        for missing in missing {
            findings.problems.push(format!(
                "{at}: the synopsis of `{path}` lacks `{missing}` (or mark it `synopsis=partial`)"
            ));
        }
    }
}

/// Where the docs' outputs say the workspace is: the scratch workspace's path is shown so.
const SHOWN_WORKSPACE: &str = "/home/you/gpuflow";

/// The shown output matches: `…` lines stand for any lines, `…` in a line for any text,
/// after both sides are normalised.
fn output_matches(shown: &str, actual: &str) -> bool {
    let want: Vec<String> = normalize(shown).lines().map(String::from).collect();
    let got: Vec<String> = normalize(actual).lines().map(String::from).collect();
    lines_match(&want, &got)
}

fn lines_match(want: &[String], got: &[String]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((first, rest)) if matches!(first.trim(), "..." | "…") => {
            (0..=got.len()).any(|skip| lines_match(rest, &got[skip..]))
        }
        Some((first, rest)) => {
            !got.is_empty() && line_matches(first, &got[0]) && lines_match(rest, &got[1..])
        }
    }
}

fn line_matches(want: &str, got: &str) -> bool {
    let want = want.replace("[..]", "…");
    let parts: Vec<&str> = want.split('…').collect();
    if parts.len() == 1 {
        return want.as_str() == got;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !got.starts_with(first) || got.len() < first.len() + last.len() || !got.ends_with(last) {
        return false;
    }
    let mut rest = &got[first.len()..got.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

/// Values that differ from run to run, replaced on both sides by what kind they are.
fn normalize(text: &str) -> String {
    static RULES: std::sync::OnceLock<Vec<(Regex, &'static str)>> = std::sync::OnceLock::new();
    let rules = RULES.get_or_init(|| {
        [
            // Run ids: `20261201-134335-30c1…`.
            (r"\b\d{8}-\d{6}-[0-9a-f]{4,}\b", "[RUN]"),
            // Timestamps and times of day.
            (
                r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?",
                "[TIME]",
            ),
            (r"\b\d{2}:\d{2}:\d{2}\b", "[TIME]"),
            // Unix times in seconds (`"created":1796147198`).
            (r"\b1[7-9]\d{8}\b", "[TIME]"),
            // Durations: `340ms`, `1.2s`, `2m03s`, `1h30m`.
            (
                r"\b\d+(\.\d+)?(h|m|s|ms|µs|us|ns)(\d+(\.\d+)?(m|s|ms))*\b",
                "[DURATION]",
            ),
            // Commit hashes (with at least one letter and one digit).
            (r"\b[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b", "[HEX]"),
            // Measured values.
            (r"\b\d+\.\d+\b", "[NUMBER]"),
        ]
        .into_iter()
        .map(|(re, to)| (Regex::new(re).unwrap(), to))
        .collect()
    });
    text.lines()
        .map(|line| {
            let mut line = line.trim_end().to_string();
            for (re, to) in rules {
                line = re.replace_all(&line, *to).into_owned();
            }
            line
        })
        .map(|line| line + "\n")
        .collect()
}

fn diff(want: &str, got: &str) -> String {
    similar::TextDiff::from_lines(want, got)
        .unified_diff()
        .context_radius(3)
        .to_string()
}

#[test]
fn the_matcher_takes_wildcards_and_normalises_run_values() {
    assert!(output_matches("a\n...\nz\n", "a\nb\nc\nz\n"));
    assert!(output_matches("a\n...\n", "a\n"));
    assert!(!output_matches("a\nz\n", "a\nb\nz\n"));
    assert!(output_matches(
        "took [..] in [..]\n",
        "took 3 steps in total\n"
    ));
    assert!(!output_matches("took [..] in x\n", "took 3 steps in y\n"));
    assert!(output_matches(
        "run 20261201-134335-30c1 took 2m03s at 400.1 tok/s\n",
        "run 20261130-091500-a9f0b2c4 took 12s at 38.2 tok/s\n"
    ));
    // Counts are not measurements: a different number of jobs is drift.
    assert!(!output_matches("2 jobs (7 runs)\n", "3 jobs (8 runs)\n"));
}
