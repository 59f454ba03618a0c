/// The closest candidate to a misspelt name, as a ready hint: "did you mean `timeout-minutes`?".
///
/// Jaro-Winkler favours shared prefixes, which is how keys are usually mistyped
/// (`timeout-minute`, `runs_on`); the threshold is the one clap uses for subcommands. A
/// case-only difference always wins, since YAML keys are case-sensitive but people are not.
pub fn did_you_mean<'a, I, S>(input: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a S>,
    S: AsRef<str> + 'a + ?Sized,
{
    let normalized = input.replace('_', "-").to_ascii_lowercase();
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        let candidate = candidate.as_ref();
        let score = if candidate.eq_ignore_ascii_case(&normalized) {
            2.0
        } else {
            strsim::jaro_winkler(&normalized, &candidate.to_ascii_lowercase())
        };
        if score > 0.8 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, c)| format!("did you mean `{c}`?"))
}

/// "`a`, `b`, or `c`": user-facing lists read as prose, values in backticks.
pub fn join_quoted<I, S>(items: I, conjunction: &str) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let items: Vec<String> = items
        .into_iter()
        .map(|s| format!("`{}`", s.as_ref()))
        .collect();
    match items.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [a, b] => format!("{a} {conjunction} {b}"),
        [rest @ .., last] => format!("{}, {conjunction} {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_keys() {
        let keys = ["timeout-minutes", "runs-on", "steps", "needs"];
        assert_eq!(
            did_you_mean("timeout-minute", &keys).as_deref(),
            Some("did you mean `timeout-minutes`?")
        );
        assert_eq!(
            did_you_mean("runs_on", &keys).as_deref(),
            Some("did you mean `runs-on`?")
        );
        assert_eq!(
            did_you_mean("Steps", &keys).as_deref(),
            Some("did you mean `steps`?")
        );
        assert_eq!(did_you_mean("zzz", &keys), None);
    }

    #[test]
    fn lists_read_as_prose() {
        assert_eq!(join_quoted(["a"], "or"), "`a`");
        assert_eq!(join_quoted(["a", "b"], "or"), "`a` or `b`");
        assert_eq!(join_quoted(["a", "b", "c"], "and"), "`a`, `b`, and `c`");
    }
}
