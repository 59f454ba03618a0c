//! Whether a push starts a workflow, by GitHub's rules for `on.push`:
//! - a branch push is checked against `branches`/`branches-ignore`, a tag push against
//!   `tags`/`tags-ignore`; a workflow that filters only branches does not run for tags, and
//!   one that filters only tags does not run for branches; with no ref filter at all, every
//!   ref counts;
//! - `paths` needs at least one changed file selected; `paths-ignore` skips the push when every
//!   changed file is ignored; a push that changes no file does not pass a path filter; path
//!   filters are not evaluated for tags;
//! - ref and path filters must both pass;
//! - a deleted ref starts nothing (there is no commit to run).
//!
//! Each list is ordered: a later `!pattern` takes back what an earlier pattern selected.

use std::sync::Arc;

use crate::diag::{Diagnostic, Diagnostics, SourceFile, Spanned};
use crate::workflow::model::PushTrigger;

use super::pattern::{Filter, PatternError};
use super::push_event::PushEvent;

/// Why a push does or does not start a workflow, for `gpuflow trigger`'s output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Runs,
    Skipped(String),
}

/// `on.push`'s filters, parsed.
#[derive(Debug, Default)]
pub struct PushFilters {
    branches: Option<Filter>,
    branches_ignore: Option<Filter>,
    tags: Option<Filter>,
    tags_ignore: Option<Filter>,
    paths: Option<Filter>,
    paths_ignore: Option<Filter>,
}

impl PushFilters {
    /// Parses every list; each bad pattern is an error at its place in `file`, all of them
    /// at once (fixing one to be told of the next is a slow way to learn the syntax).
    pub fn parse(push: &PushTrigger, file: &Arc<SourceFile>) -> Result<Self, Diagnostics> {
        let mut errors = Diagnostics::new();
        let mut list = |key: &str, patterns: &[Spanned<String>]| -> Option<Filter> {
            if patterns.is_empty() {
                return None;
            }
            let mut filter = Filter::default();
            let mut bad = false;
            for p in patterns {
                match Filter::parse([p.value.as_str()]) {
                    Ok(parsed) => filter.patterns.extend(parsed.patterns),
                    Err(e) => {
                        errors.push(pattern_diagnostic(key, p, &e, file));
                        bad = true;
                    }
                }
            }
            // GitHub's rule: a `!` takes back what an earlier pattern selected, so a list
            // of `!` patterns alone selects nothing and the workflow would never run.
            if !bad && !key.ends_with("-ignore") && filter.patterns.iter().all(|p| p.negated) {
                let first = &patterns[0];
                errors.push(
                        Diagnostic::error(
                            file,
                            first.span,
                            format!(
                                "every pattern of `on.push.{key}` starts with `!`, so it selects nothing and the workflow never runs"
                            ),
                        )
                        .label("only exceptions, nothing they are exceptions to")
                        .hint(format!(
                            "put a pattern that selects first (`'**'`), then the `!` exceptions, or list the exceptions under `{key}-ignore` without `!`"
                        )),
                    );
            }
            Some(filter)
        };
        let filters = Self {
            branches: list("branches", &push.branches),
            branches_ignore: list("branches-ignore", &push.branches_ignore),
            tags: list("tags", &push.tags),
            tags_ignore: list("tags-ignore", &push.tags_ignore),
            paths: list("paths", &push.paths),
            paths_ignore: list("paths-ignore", &push.paths_ignore),
        };
        if errors.is_empty() {
            Ok(filters)
        } else {
            Err(errors)
        }
    }

    pub fn decide(&self, event: &PushEvent) -> Decision {
        use Decision::{Runs, Skipped};
        if event.is_deletion() {
            return Skipped(format!("`{}` was deleted", event.git_ref));
        }
        let has_branch_filter = self.branches.is_some() || self.branches_ignore.is_some();
        let has_tag_filter = self.tags.is_some() || self.tags_ignore.is_some();
        let name = event.ref_name();
        if event.is_tag() {
            if has_branch_filter && !has_tag_filter {
                return Skipped("it filters branches only, and this is a tag".into());
            }
            if let Some(f) = &self.tags
                && !f.selects(name)
            {
                return Skipped(format!("tag `{name}` is not in `tags`"));
            }
            if let Some(f) = &self.tags_ignore
                && f.selects(name)
            {
                return Skipped(format!("tag `{name}` is in `tags-ignore`"));
            }
            // GitHub does not evaluate path filters for tags.
            return Runs;
        }
        if event.is_branch() || has_branch_filter || has_tag_filter {
            if has_tag_filter && !has_branch_filter {
                return Skipped("it filters tags only, and this is a branch".into());
            }
            if let Some(f) = &self.branches
                && !f.selects(name)
            {
                return Skipped(format!("branch `{name}` is not in `branches`"));
            }
            if let Some(f) = &self.branches_ignore
                && f.selects(name)
            {
                return Skipped(format!("branch `{name}` is in `branches-ignore`"));
            }
        }
        if let Some(f) = &self.paths
            && !event.changed.iter().any(|p| f.selects(p))
        {
            return Skipped(no_path(event, "is in `paths`"));
        }
        if let Some(f) = &self.paths_ignore
            && event.changed.iter().all(|p| f.selects(p))
        {
            return Skipped(if event.changed.is_empty() {
                "the push changes no file".into()
            } else {
                "every changed file is in `paths-ignore`".into()
            });
        }
        Runs
    }
}

fn no_path(event: &PushEvent, what: &str) -> String {
    if event.changed.is_empty() {
        "the push changes no file".into()
    } else {
        format!(
            "no changed file {what} ({} changed: {})",
            event.changed.len(),
            event
                .changed
                .iter()
                .take(3)
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn pattern_diagnostic(
    key: &str,
    pattern: &Spanned<String>,
    e: &PatternError,
    file: &Arc<SourceFile>,
) -> Diagnostic {
    // The span covers the scalar as written, quotes included when there are any.
    let quoted = file
        .text
        .get(pattern.span.start..pattern.span.end)
        .is_some_and(|t| t.starts_with(['\'', '"']));
    let start = pattern.span.start + usize::from(quoted) + e.column;
    let span = crate::diag::Span::new(start, start + 1);
    Diagnostic::error(
        file,
        span,
        format!("`on.push.{key}` pattern `{}`: {}", pattern.value, e.message),
    )
    .label("here")
    .hint(e.hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Span;

    fn list(items: &[&str]) -> Vec<Spanned<String>> {
        items
            .iter()
            .map(|s| Spanned::new((*s).to_string(), Span::new(0, 0)))
            .collect()
    }

    fn push(git_ref: &str, changed: &[&str]) -> PushEvent {
        PushEvent {
            git_ref: git_ref.into(),
            before: "1".repeat(40),
            after: "2".repeat(40),
            commit: "2".repeat(40),
            commits: Vec::new(),
            changed: changed.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn a_list_of_only_exceptions_is_refused_at_its_first_pattern() {
        let file = SourceFile::new("w.yml", "branches: ['!main']\n");
        let only_exceptions = PushTrigger {
            branches: list(&["!main", "!dev"]),
            ..PushTrigger::default()
        };
        let e = PushFilters::parse(&only_exceptions, &file).unwrap_err();
        let e = e.iter().next().unwrap();
        assert!(e.message.contains("selects nothing"), "{}", e.message);
        let with_a_selector = PushTrigger {
            branches: list(&["**", "!main"]),
            ..PushTrigger::default()
        };
        assert!(PushFilters::parse(&with_a_selector, &file).is_ok());
    }

    fn decide(trigger: PushTrigger, event: &PushEvent) -> Decision {
        PushFilters::parse(&trigger, &SourceFile::new("w.yml", ""))
            .unwrap()
            .decide(event)
    }

    #[test]
    fn no_filter_runs_for_every_ref() {
        assert_eq!(
            decide(PushTrigger::default(), &push("refs/heads/x", &[])),
            Decision::Runs
        );
        assert_eq!(
            decide(PushTrigger::default(), &push("refs/tags/v1", &[])),
            Decision::Runs
        );
    }

    #[test]
    fn branch_filters_ignore_tags_and_tag_filters_ignore_branches() {
        let branches = PushTrigger {
            branches: list(&["main"]),
            ..PushTrigger::default()
        };
        assert_eq!(
            decide(branches.clone(), &push("refs/heads/main", &[])),
            Decision::Runs
        );
        assert!(matches!(
            decide(branches, &push("refs/tags/main", &[])),
            Decision::Skipped(_)
        ));
        let tags = PushTrigger {
            tags: list(&["v*"]),
            ..PushTrigger::default()
        };
        assert_eq!(
            decide(tags.clone(), &push("refs/tags/v1.0", &[])),
            Decision::Runs
        );
        assert!(matches!(
            decide(tags.clone(), &push("refs/tags/x1", &[])),
            Decision::Skipped(_)
        ));
        assert!(matches!(
            decide(tags, &push("refs/heads/v1", &[])),
            Decision::Skipped(_)
        ));
    }

    #[test]
    fn ignore_lists_and_paths() {
        let t = PushTrigger {
            branches_ignore: list(&["wip/**"]),
            paths: list(&["configs/**"]),
            ..PushTrigger::default()
        };
        assert_eq!(
            decide(t.clone(), &push("refs/heads/main", &["configs/a.toml"])),
            Decision::Runs
        );
        assert!(matches!(
            decide(t.clone(), &push("refs/heads/main", &["README.md"])),
            Decision::Skipped(_)
        ));
        assert!(matches!(
            decide(t.clone(), &push("refs/heads/wip/a", &["configs/a"])),
            Decision::Skipped(_)
        ));
        // ...and it filters branches only: a tag does not run it.
        assert!(matches!(
            decide(t, &push("refs/tags/v1", &[])),
            Decision::Skipped(_)
        ));
        // Path filters are not evaluated for tags.
        let only_paths = PushTrigger {
            paths: list(&["configs/**"]),
            ..PushTrigger::default()
        };
        assert_eq!(
            decide(only_paths, &push("refs/tags/v1", &[])),
            Decision::Runs
        );

        let ignore = PushTrigger {
            paths_ignore: list(&["configs/**"]),
            ..PushTrigger::default()
        };
        assert!(matches!(
            decide(ignore.clone(), &push("refs/heads/main", &["configs/a"])),
            Decision::Skipped(_)
        ));
        assert_eq!(
            decide(
                ignore.clone(),
                &push("refs/heads/main", &["configs/a", "src/b"])
            ),
            Decision::Runs
        );
        assert!(matches!(
            decide(ignore, &push("refs/heads/main", &[])),
            Decision::Skipped(_)
        ));
    }

    #[test]
    fn a_deleted_ref_starts_nothing() {
        let mut e = push("refs/heads/main", &[]);
        e.after = super::super::push_event::ZERO_SHA.into();
        assert!(matches!(
            decide(PushTrigger::default(), &e),
            Decision::Skipped(_)
        ));
    }

    #[test]
    fn a_bad_pattern_points_into_the_file() {
        let text = "on:\n  push:\n    branches: ['ma[in']\n";
        let file = SourceFile::new("w.yml", text);
        let start = text.find("'ma").unwrap();
        let t = PushTrigger {
            branches: vec![Spanned::new(
                "ma[in".to_string(),
                Span::new(start, start + 7),
            )],
            ..PushTrigger::default()
        };
        let d = PushFilters::parse(&t, &file).unwrap_err();
        let d = d.iter().next().unwrap();
        assert!(d.location().contains("w.yml:3:"), "{}", d.location());
        assert!(d.message.contains("never closed"), "{}", d.message);
    }

    /// Three bad patterns are three errors, each at its own place.
    #[test]
    fn every_bad_pattern_is_reported_at_its_place() {
        let text = "on:\n  push:\n    paths:\n      - 'a[b'\n      - 'ok/**'\n      - 'c[d'\n    paths-ignore: ['e[f']\n";
        let file = SourceFile::new("w.yml", text);
        let at = |needle: &str| {
            let start = text.find(needle).unwrap();
            Spanned::new(
                needle.trim_matches('\'').to_string(),
                Span::new(start, start + needle.len()),
            )
        };
        let t = PushTrigger {
            paths: vec![at("'a[b'"), at("'ok/**'"), at("'c[d'")],
            paths_ignore: vec![at("'e[f'")],
            ..PushTrigger::default()
        };
        let errors = PushFilters::parse(&t, &file).unwrap_err();
        let found: Vec<(String, String)> = errors
            .iter()
            .map(|d| (d.location(), d.message.clone()))
            .collect();
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].0.contains("w.yml:4:"), "{found:?}");
        assert!(
            found[0].1.contains("`on.push.paths` pattern `a[b`"),
            "{found:?}"
        );
        assert!(found[1].0.contains("w.yml:6:"), "{found:?}");
        assert!(found[1].1.contains("pattern `c[d`"), "{found:?}");
        assert!(found[2].0.contains("w.yml:7:"), "{found:?}");
        assert!(
            found[2].1.contains("`on.push.paths-ignore` pattern `e[f`"),
            "{found:?}"
        );
    }
}
