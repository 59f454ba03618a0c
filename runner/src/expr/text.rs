//! Case-insensitive string comparison as GitHub does it: .NET's `OrdinalIgnoreCase`, which
//! compares character by character after each character's *simple* upper-case mapping. That
//! is not lower-casing (`'i' == 'İ'` is false), not full case folding (`'ß'` stays `ß`; it
//! never becomes `SS`), and, as .NET's ordinal casing table has it, a non-ASCII character never
//! maps into ASCII (`'ı'` is not `'I'`, `'ſ'` is not `'S'`).

use std::cmp::Ordering;

/// The simple (one-to-one) upper-case mapping of a character; characters whose upper case is
/// several characters (`ß` → `SS`) keep themselves, as in .NET's invariant `ToUpper`.
pub fn simple_upper(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) if !u.is_ascii() => u,
        _ => c,
    }
}

fn upper_chars(s: &str) -> impl DoubleEndedIterator<Item = char> + '_ {
    s.chars().map(simple_upper)
}

pub fn cmp_ignore_case(a: &str, b: &str) -> Ordering {
    upper_chars(a).cmp(upper_chars(b))
}

pub fn eq_ignore_case(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.eq_ignore_ascii_case(b) || cmp_ignore_case(a, b) == Ordering::Equal
}

/// Upper-cases a whole string character by character, for substring searches.
pub fn upper(s: &str) -> String {
    upper_chars(s).collect()
}

pub fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    upper(haystack).contains(&upper(needle))
}

pub fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    let mut chars = upper_chars(s);
    upper_chars(prefix).all(|p| chars.next() == Some(p))
}

pub fn ends_with_ignore_case(s: &str, suffix: &str) -> bool {
    let mut chars = upper_chars(s).rev();
    upper_chars(suffix).rev().all(|p| chars.next() == Some(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("abc", "ABC", true; "ascii")]
    #[test_case("straße", "STRASSE", false; "sharp s is not expanded")]
    #[test_case("ſ", "s", false; "long s does not map into ascii")]
    #[test_case("ı", "I", false; "dotless i does not map into ascii")]
    #[test_case("ı", "i", false; "dotless i is not i")]
    #[test_case("i", "İ", false; "dotted capital I is not lower-cased")]
    #[test_case("ǅ", "ǆ", true; "titlecase digraph")]
    #[test_case("é", "É", true; "latin-1")]
    #[test_case("σ", "ς", true; "both sigmas upper-case to capital sigma")]
    fn compares_by_simple_upper_case(a: &str, b: &str, want: bool) {
        assert_eq!(eq_ignore_case(a, b), want, "{a} vs {b}");
    }

    #[test]
    fn orders_after_upper_casing() {
        // `_` (0x5F) sorts after `A`..`Z` but before `a`..`z`: upper-casing decides.
        assert_eq!(cmp_ignore_case("a", "_"), Ordering::Less);
        assert_eq!(cmp_ignore_case("abc", "ABD"), Ordering::Less);
        assert!(starts_with_ignore_case("Hello", "hE"));
        assert!(ends_with_ignore_case("Hello", "LO"));
        assert!(!ends_with_ignore_case("lo", "hello"));
        assert!(contains_ignore_case("Hello", "ELL"));
    }
}
