//! `[actions]` of `gpuflow.toml`: the URL templates remote actions are fetched from, and the
//! cache folder. Read strictly, like the host tables: every problem at its place.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span, did_you_mean, join_quoted};

/// Used when `gpuflow.toml` names no sources: GitHub, as `uses: owner/repo@ref` means there.
pub const DEFAULT_SOURCE: &str = "https://github.com/{owner}/{repo}.git";

const ACTIONS_KEYS: [&str; 2] = ["sources", "cache"];
const PLACEHOLDERS: [&str; 2] = ["{owner}", "{repo}"];

/// Where remote actions come from and where they are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionsConfig {
    /// URL templates, tried in order; `{owner}` and `{repo}` are replaced.
    pub sources: Vec<String>,
    /// The cache of fetched repositories and checked-out commits.
    pub cache: PathBuf,
}

impl ActionsConfig {
    /// The `[actions]` table of `workspace`'s `gpuflow.toml`; defaults for what it leaves out
    /// (or when there is no such file).
    pub fn find(workspace: &Path) -> Result<Self, Diagnostics> {
        let path = workspace.join(crate::hosts::CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(
                &SourceFile::new(path.display().to_string(), text),
                workspace,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::defaults()),
            Err(e) => Err(Diagnostics::from(Diagnostic::unlocated(format!(
                "cannot read `{}`: {e}",
                path.display()
            )))),
        }
    }

    /// No `[actions]`: GitHub, and the user's cache folder.
    pub fn defaults() -> Self {
        Self {
            sources: vec![DEFAULT_SOURCE.to_owned()],
            cache: default_cache(),
        }
    }

    /// Reads `[actions]` from a `gpuflow.toml` text; a relative `cache` is taken from the
    /// file's folder (`base`). Other tables are the host reader's.
    pub fn parse(file: &Arc<SourceFile>, base: &Path) -> Result<Self, Diagnostics> {
        let mut config = Self::defaults();
        // A file that is not TOML at all is reported by the host reader, with the same words;
        // here it only means "no actions table".
        let Ok(root) = DeTable::parse(&file.text) else {
            return Ok(config);
        };
        let root = root.into_inner();
        let Some(table) = root.get("actions") else {
            return Ok(config);
        };
        let mut diags = Diagnostics::new();
        let DeValue::Table(table) = table.get_ref() else {
            diags.push(
                Diagnostic::error(file, Span::from(table.span()), "`actions` must be a table")
                    .hint("write `[actions]` followed by `sources = [\"file:///srv/git/{owner}/{repo}.git\"]`"),
            );
            return Err(diags);
        };
        for (key, value) in table {
            match key.get_ref().as_ref() {
                "sources" => {
                    if let Some(sources) = sources(file, value, &mut diags) {
                        config.sources = sources;
                    }
                }
                "cache" => match value.get_ref() {
                    DeValue::String(s) if !s.is_empty() => config.cache = base.join(s.as_ref()),
                    _ => diags.push(
                        Diagnostic::error(
                            file,
                            Span::from(value.span()),
                            "`cache` must be a folder path",
                        )
                        .hint("write e.g. `cache = \"/var/cache/gpuflow/actions\"`"),
                    ),
                },
                other => diags.push(
                    Diagnostic::error(
                        file,
                        Span::from(key.span()),
                        format!("unknown key `{other}`"),
                    )
                    .label("not a key of `[actions]`")
                    .maybe_hint(did_you_mean(other, &ACTIONS_KEYS))
                    .note(format!("expected {}", join_quoted(ACTIONS_KEYS, "or"))),
                ),
            }
        }
        if diags.has_errors() {
            Err(diags.sorted())
        } else {
            Ok(config)
        }
    }

    /// The URL of `owner/repo` from one template.
    pub fn url(template: &str, owner: &str, repo: &str) -> String {
        template.replace("{owner}", owner).replace("{repo}", repo)
    }
}

fn sources(
    file: &Arc<SourceFile>,
    value: &Spanned<DeValue<'_>>,
    diags: &mut Diagnostics,
) -> Option<Vec<String>> {
    let hint = "write e.g. `sources = [\"file:///srv/git/{owner}/{repo}.git\", \"https://github.com/{owner}/{repo}.git\"]`";
    let DeValue::Array(items) = value.get_ref() else {
        diags.push(
            Diagnostic::error(
                file,
                Span::from(value.span()),
                "`sources` must be a list of URL templates",
            )
            .hint(hint),
        );
        return None;
    };
    if items.is_empty() {
        diags.push(
            Diagnostic::error(file, Span::from(value.span()), "`sources` is empty")
                .label("no place to fetch remote actions from")
                .hint(hint),
        );
        return None;
    }
    let mut out = Vec::new();
    for item in items {
        let span = Span::from(item.span());
        let DeValue::String(text) = item.get_ref() else {
            diags.push(
                Diagnostic::error(file, span, "a source must be a URL template string").hint(hint),
            );
            continue;
        };
        if let Some(problem) = template_problem(text) {
            diags.push(
                Diagnostic::error(file, span, format!("invalid source `{text}`: {problem}"))
                    .label("not a URL template")
                    .hint(hint),
            );
            continue;
        }
        out.push(text.to_string());
    }
    Some(out)
}

/// Why a template cannot name a repository: it must hold `{repo}` (`{owner}` is optional: a
/// team's server may keep every action repository in one folder) and no other `{…}`.
fn template_problem(text: &str) -> Option<String> {
    if !text.contains("{repo}") {
        return Some("it has no `{repo}`".to_owned());
    }
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            return Some("a `{` is not closed".to_owned());
        };
        let placeholder = &rest[start..=start + len];
        if !PLACEHOLDERS.contains(&placeholder) {
            return Some(format!(
                "unknown placeholder `{placeholder}` (only `{{owner}}` and `{{repo}}`)"
            ));
        }
        rest = &rest[start + len + 1..];
    }
    // The filled-in URL goes to git: checked with sample names, so a template that could
    // never be fetched safely is refused at its place in the file, before any git runs.
    super::source_url::url_problem(&ActionsConfig::url(text, "owner", "repo"))
}

/// `$XDG_CACHE_HOME/gpuflow/actions`, else `~/.cache/gpuflow/actions`, else one under the
/// system's temporary folder (a user without a home still gets a cache).
fn default_cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("gpuflow").join("actions")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ActionsConfig, Vec<String>> {
        let file = SourceFile::new("gpuflow.toml", text);
        ActionsConfig::parse(&file, Path::new("/ws")).map_err(|d| {
            d.iter()
                .map(|d| format!("{} {}", d.location(), d.message))
                .collect()
        })
    }

    #[test]
    fn sources_and_cache_are_read() {
        let c = parse(
            "[hosts.a]\nendpoint = \"tcp://x:1\"\n[actions]\nsources = [\"file:///srv/{owner}/{repo}.git\", \"ssh://git@h/{repo}\"]\ncache = \"cache\"\n",
        )
        .unwrap();
        assert_eq!(
            c.sources,
            ["file:///srv/{owner}/{repo}.git", "ssh://git@h/{repo}"]
        );
        assert_eq!(c.cache, Path::new("/ws/cache"));
        assert_eq!(
            ActionsConfig::url(&c.sources[0], "team", "acts"),
            "file:///srv/team/acts.git"
        );
    }

    #[test]
    fn no_table_means_github() {
        assert_eq!(parse("").unwrap().sources, [DEFAULT_SOURCE]);
    }

    #[test]
    fn problems_are_reported_at_their_place() {
        let e = parse("[actions]\nsource = []\n").unwrap_err();
        assert_eq!(e, ["gpuflow.toml:2:1 unknown key `source`"]);
        let e = parse("[actions]\nsources = [\"https://h/{org}/{repo}\", \"https://h/x\"]\n")
            .unwrap_err();
        assert_eq!(
            e,
            [
                "gpuflow.toml:2:12 invalid source `https://h/{org}/{repo}`: unknown placeholder `{org}` (only `{owner}` and `{repo}`)",
                "gpuflow.toml:2:38 invalid source `https://h/x`: it has no `{repo}`"
            ]
        );
        let e = parse("[actions]\nsources = []\n").unwrap_err();
        assert_eq!(e, ["gpuflow.toml:2:11 `sources` is empty"]);
        let e =
            parse("[actions]\nsources = [\"--upload-pack=touch /tmp/x; {repo}\"]\n").unwrap_err();
        assert_eq!(e.len(), 1);
        assert!(
            e[0].starts_with("gpuflow.toml:2:12 invalid source `--upload-pack=touch /tmp/x; {repo}`: it starts with `-`"),
            "{e:?}"
        );
    }
}
