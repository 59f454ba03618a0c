//! `docs/workflow-syntax.md` shows only real examples: every YAML block is a run of lines from a
//! file the other tests load and check (a `docs-*.yml` fixture of the valid corpus, a shipped
//! workflow or action), a block that is a whole workflow is a whole fixture, and every
//! `$ gpuflow …` console block prints what the command prints today.

use crate::support::{gpuflow, repo_root};
use std::path::PathBuf;

fn page() -> String {
    std::fs::read_to_string(repo_root().join("docs/workflow-syntax.md")).unwrap()
}

/// The fenced blocks of `lang` in a Markdown text, without their fences (whatever marks the
/// docs tests' info string adds: ```` ```yaml jobs ````).
fn blocks(markdown: &str, lang: &str) -> Vec<String> {
    let open = format!("```{lang}");
    let is_open = |line: &str| {
        let line = line.trim_end();
        line == open || line.starts_with(&format!("{open} "))
    };
    let mut out = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in markdown.lines() {
        match &mut current {
            None if is_open(line) => current = Some(Vec::new()),
            None => {}
            Some(lines) if line.trim_end() == "```" => {
                out.push(lines.join("\n"));
                current = None;
            }
            Some(lines) => lines.push(line),
        }
    }
    assert!(current.is_none(), "a ```{lang} block is not closed");
    out
}

/// The docs fixtures and the shipped workflows and actions, with their text.
fn sources() -> Vec<(PathBuf, String)> {
    let root = repo_root();
    let mut paths = Vec::new();
    for (dir, keep) in [
        ("runner/tests/fixtures/valid", "docs-"),
        ("workflows", ""),
        ("actions", ""),
    ] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                paths.push(path.join("action.yml"));
            } else if name.starts_with(keep) && name.ends_with(".yml") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Whether `block` is a run of consecutive lines of `file`, shifted left by the same number of
/// spaces (so an excerpt of a job can be shown without the indentation of `jobs:`).
fn is_excerpt(block: &str, file: &str) -> bool {
    let want: Vec<&str> = block.lines().collect();
    let have: Vec<&str> = file.lines().collect();
    let Some(first) = want.first() else {
        return false;
    };
    (0..have.len().saturating_sub(want.len() - 1)).any(|start| {
        let Some(shift) = indent(have[start]).checked_sub(indent(first)) else {
            return false;
        };
        want.iter().zip(&have[start..]).all(|(w, h)| {
            if w.is_empty() {
                h.trim().is_empty()
            } else {
                indent(h) >= shift && &h[shift..] == *w
            }
        })
    })
}

#[test]
fn every_yaml_example_comes_from_a_checked_file() {
    let sources = sources();
    assert!(
        sources
            .iter()
            .filter(|(p, _)| p.to_string_lossy().contains("docs-"))
            .count()
            >= 4
    );
    let yaml = blocks(&page(), "yaml");
    assert!(yaml.len() >= 6, "only {} yaml blocks", yaml.len());
    for block in yaml {
        let complete = block.lines().any(|l| l == "jobs:");
        let found = sources.iter().any(|(path, text)| {
            if complete {
                path.to_string_lossy().contains("docs-") && text.trim_end() == block.trim_end()
            } else {
                is_excerpt(&block, text)
            }
        });
        assert!(
            found,
            "this example of docs/workflow-syntax.md is not {} a docs-*.yml fixture, a shipped \
             workflow or a shipped action:\n{block}",
            if complete {
                "the whole of"
            } else {
                "an excerpt of"
            }
        );
    }
}

#[test]
fn every_docs_fixture_is_linked_from_the_page() {
    let page = page();
    for (path, _) in sources() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("docs-") {
            assert!(
                page.contains(&format!("fixtures/valid/{name}")),
                "{name} is not linked"
            );
        }
    }
}

#[test]
fn every_console_example_prints_what_gpuflow_prints() {
    let console = blocks(&page(), "console");
    assert!(!console.is_empty());
    for block in console {
        let (command, expected) = block.split_once('\n').unwrap_or((&block, ""));
        let args = command
            .strip_prefix("$ gpuflow ")
            .unwrap_or_else(|| panic!("not a `$ gpuflow` command: {command}"));
        let printed = gpuflow()
            .current_dir(repo_root())
            .args(args.split_whitespace())
            .output()
            .all();
        pretty_assertions::assert_eq!(
            printed.trim_end(),
            expected.trim_end(),
            "`{command}` prints something else; update docs/workflow-syntax.md"
        );
    }
}

#[test]
fn excerpts_may_be_shifted_but_not_rearranged() {
    let file = "jobs:\n  a:\n    steps:\n      - run: x\n\n      - run: y\n";
    assert!(is_excerpt("a:\n  steps:\n    - run: x", file));
    assert!(is_excerpt("- run: x\n\n- run: y", file));
    assert!(!is_excerpt("- run: y\n- run: x", file));
    assert!(!is_excerpt("  a:\nsteps:", file));
}
