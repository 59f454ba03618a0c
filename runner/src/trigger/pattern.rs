//! GitHub's filter patterns for `branches`, `tags` and `paths` (the "filter pattern cheat
//! sheet" of GitHub's workflow syntax): `*` (anything but `/`), `**` (anything, `/` too; `**/`
//! also matches no folder at all), `?` and `+` (zero-or-one / one-or-more of the character
//! before), `[...]` (one character of a set or `a-z`/`A-Z`/`0-9` range), `\` escapes, and a
//! leading `!` negating an earlier match. Patterns are translated once into an anchored regex.

use regex::Regex;

/// One pattern of a filter list, translated.
#[derive(Clone, Debug)]
pub struct FilterPattern {
    /// As written (without the leading `!`).
    pub text: String,
    /// A `!pattern`: a match takes the ref or path back out.
    pub negated: bool,
    regex: Regex,
}

/// Why a pattern cannot be used; `column` is a byte offset into the pattern as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PatternError {
    pub message: String,
    pub column: usize,
    pub hint: &'static str,
}

impl FilterPattern {
    pub fn parse(written: &str) -> Result<Self, PatternError> {
        let (negated, text) = match written.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, written),
        };
        let offset = written.len() - text.len();
        let regex = translate(text).map_err(|mut e| {
            e.column += offset;
            e
        })?;
        Ok(Self {
            text: text.to_string(),
            negated,
            regex,
        })
    }

    pub fn is_match(&self, subject: &str) -> bool {
        self.regex.is_match(subject)
    }
}

/// An ordered list of patterns: a subject is selected when the last pattern matching it is
/// not negated (GitHub: "the order you define patterns matters").
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub patterns: Vec<FilterPattern>,
}

impl Filter {
    pub fn parse<'a>(written: impl IntoIterator<Item = &'a str>) -> Result<Self, PatternError> {
        Ok(Self {
            patterns: written
                .into_iter()
                .map(FilterPattern::parse)
                .collect::<Result<_, _>>()?,
        })
    }

    pub fn selects(&self, subject: &str) -> bool {
        self.patterns
            .iter()
            .rev()
            .find(|p| p.is_match(subject))
            .is_some_and(|p| !p.negated)
    }
}

fn translate(text: &str) -> Result<Regex, PatternError> {
    let error = |column: usize, message: String, hint: &'static str| PatternError {
        message,
        column,
        hint,
    };
    if text.is_empty() {
        return Err(error(
            0,
            "an empty pattern matches nothing".into(),
            "remove it, or write `**` for everything",
        ));
    }
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = String::from("^");
    // Whether the last thing written is a single character (or set) that `?`/`+` can repeat.
    let mut repeatable = false;
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        match c {
            '*' if chars.get(i + 1).is_some_and(|&(_, n)| n == '*') => {
                if chars.get(i + 2).is_some_and(|&(_, n)| n == '/') {
                    // `docs/**/*.md` matches `docs/README.md`: the folders are optional.
                    out.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    out.push_str(".*");
                    i += 2;
                }
                repeatable = false;
                continue;
            }
            '*' => {
                out.push_str("[^/]*");
                repeatable = false;
            }
            '?' | '+' => {
                if !repeatable {
                    return Err(error(
                        at,
                        format!("`{c}` repeats the character before it, and there is none here"),
                        "escape it as `\\?` / `\\+` to match it literally",
                    ));
                }
                out.push(c);
                repeatable = false;
            }
            '[' => {
                let close = chars[i + 1..]
                    .iter()
                    .position(|&(_, n)| n == ']')
                    .map(|p| p + i + 1)
                    .ok_or_else(|| {
                        error(
                            at,
                            "`[` opens a character set that is never closed".into(),
                            "close it with `]`, or escape it as `\\[`",
                        )
                    })?;
                let set: Vec<char> = chars[i + 1..close].iter().map(|&(_, c)| c).collect();
                out.push_str(&character_set(&set).map_err(|m| {
                    error(
                        at,
                        m,
                        "list letters and digits, or ranges `a-z`, `A-Z`, `0-9`",
                    )
                })?);
                i = close + 1;
                repeatable = true;
                continue;
            }
            '\\' => {
                let Some(&(_, next)) = chars.get(i + 1) else {
                    return Err(error(
                        at,
                        "`\\` at the end escapes nothing".into(),
                        "remove it, or write `\\\\`",
                    ));
                };
                out.push_str(&regex::escape(&next.to_string()));
                i += 2;
                repeatable = true;
                continue;
            }
            other => {
                out.push_str(&regex::escape(&other.to_string()));
                repeatable = true;
            }
        }
        i += 1;
    }
    out.push('$');
    Regex::new(&out).map_err(|e| error(0, format!("cannot be matched: {e}"), "simplify it"))
}

/// `[12]`, `[0-9]`, `[a-zA-Z_]`: GitHub allows ranges of letters and digits only.
fn character_set(set: &[char]) -> Result<String, String> {
    if set.is_empty() {
        return Err("`[]` is an empty character set".into());
    }
    let mut out = String::from("[");
    let mut i = 0;
    while i < set.len() {
        if set.get(i + 1) == Some(&'-') && i + 2 < set.len() {
            let (from, to) = (set[i], set[i + 2]);
            let same_class = (from.is_ascii_lowercase() && to.is_ascii_lowercase())
                || (from.is_ascii_uppercase() && to.is_ascii_uppercase())
                || (from.is_ascii_digit() && to.is_ascii_digit());
            if !same_class || from > to {
                return Err(format!(
                    "`{from}-{to}` is not a range of lower-case letters, upper-case letters or digits"
                ));
            }
            out.push_str(&format!("{from}-{to}"));
            i += 3;
        } else {
            out.push_str(&regex::escape(&set[i].to_string()));
            i += 1;
        }
    }
    out.push(']');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    // GitHub's "Patterns to match branches and tags" table.
    #[test_case("feature/*", &["feature/my-branch", "feature/your-branch"], &["feature/a/b", "main"])]
    #[test_case("feature/**", &["feature/beta-a/my-branch", "feature/your-branch", "feature/mona/the/octocat"], &["features/x"])]
    #[test_case("main", &["main"], &["main2", "mainx/a"])]
    #[test_case("releases/mona-the-octocat", &["releases/mona-the-octocat"], &["releases/mona"])]
    #[test_case("*", &["main", "releases"], &["releases/x"])]
    #[test_case("**", &["all/branch", "and/tag/names", "main"], &[])]
    #[test_case("*feature", &["mona-feature", "feature", "ver-10-feature"], &["feature-x"])]
    #[test_case("v2*", &["v2", "v2.0", "v2.9"], &["v1.0"])]
    #[test_case("v[12].[0-9]+.[0-9]+", &["v1.10.1", "v2.0.0"], &["v3.0.0", "v1.x.1", "v1..1"])]
    fn branch_and_tag_patterns(pattern: &str, matching: &[&str], not: &[&str]) {
        let p = FilterPattern::parse(pattern).unwrap();
        for m in matching {
            assert!(p.is_match(m), "`{pattern}` should match `{m}`");
        }
        for n in not {
            assert!(!p.is_match(n), "`{pattern}` should not match `{n}`");
        }
    }

    // GitHub's "Patterns to match file paths" table.
    #[test_case("*", &["README.md", "server.rb"], &["docs/x.md"])]
    #[test_case("*.jsx?", &["page.js", "page.jsx"], &["page.jsxx", "a/page.js"])]
    #[test_case("**", &["all/files/in/the/repo", "x"], &[])]
    #[test_case("*.js", &["app.js", "index.js"], &["js/index.js"])]
    #[test_case("**.js", &["index.js", "js/index.js", "src/js/app.js"], &["index.jsx"])]
    #[test_case("docs/*", &["docs/README.md", "docs/file.txt"], &["docs/a/b.md"])]
    #[test_case("docs/**", &["docs/README.md", "docs/mona/octocat.txt"], &["doc/x"])]
    #[test_case("docs/**/*.md", &["docs/README.md", "docs/mona/hello-world.md", "docs/a/markdown/file.md"], &["docs/a.txt"])]
    #[test_case("**/docs/**", &["docs/hello.md", "dir/docs/my-file.txt", "space/docs/plan/space.doc"], &["documents/x"])]
    #[test_case("**/README.md", &["README.md", "js/README.md"], &["README.mdx"])]
    #[test_case("**/*src/**", &["a/src/app.js", "my-src/code/js/app.js"], &["a/sr/app.js"])]
    #[test_case("**/*-post.md", &["my-post.md", "path/their-post.md"], &["post.md"])]
    #[test_case("**/migrate-*.sql", &["migrate-10909.sql", "db/migrate-v1.0.sql", "db/sept/migrate-v1.sql"], &["migrate.sql"])]
    #[test_case("configs/**", &["configs/a.toml", "configs/x/y.yml"], &["configs", "other/configs/a"])]
    fn path_patterns(pattern: &str, matching: &[&str], not: &[&str]) {
        branch_and_tag_patterns(pattern, matching, not);
    }

    #[test]
    fn negation_depends_on_order() {
        // GitHub: `*.md`, `!README.md` → hello.md yes, README.md no, docs/hello.md no.
        let f = Filter::parse(["*.md", "!README.md"]).unwrap();
        assert!(f.selects("hello.md"));
        assert!(!f.selects("README.md"));
        assert!(!f.selects("docs/hello.md"));
        // ...then `README*` takes README.md back in, and README.doc too.
        let f = Filter::parse(["*.md", "!README.md", "README*"]).unwrap();
        assert!(f.selects("hello.md"));
        assert!(f.selects("README.md"));
        assert!(f.selects("README.doc"));
        // Branches: `releases/**` but not `releases/**-alpha`.
        let f = Filter::parse(["releases/**", "!releases/**-alpha"]).unwrap();
        assert!(f.selects("releases/10"));
        assert!(f.selects("releases/beta/mona"));
        assert!(!f.selects("releases/10-alpha"));
        assert!(!f.selects("releases/beta/3-alpha"));
    }

    #[test]
    fn escapes_match_literally() {
        let p = FilterPattern::parse(r"a\*b\?").unwrap();
        assert!(p.is_match("a*b?"));
        assert!(!p.is_match("axb"));
        let p = FilterPattern::parse("file(1).txt").unwrap();
        assert!(p.is_match("file(1).txt"));
    }

    #[test_case("?x", 0, "repeats" ; "question mark first")]
    #[test_case("a/[abc", 2, "never closed" ; "unclosed set")]
    #[test_case("[a-Z]", 0, "not a range" ; "mixed range")]
    #[test_case("!+a", 1, "repeats" ; "offset after negation")]
    #[test_case("", 0, "empty" ; "empty")]
    fn bad_patterns_say_where_and_why(pattern: &str, column: usize, says: &str) {
        let e = FilterPattern::parse(pattern).unwrap_err();
        assert_eq!(e.column, column, "{e}");
        assert!(e.message.contains(says), "{e}");
    }
}
