//! Secret masking: every secret value, and every value a step registers with
//! `::add-mask::VALUE`, becomes `***` in log lines before they become events, so neither the
//! terminal nor the stored logs ever hold one.

use std::sync::RwLock;

/// What replaces a masked value.
pub const MASK: &str = "***";

/// The values to hide, shared by every job of a run (a mask added in one job holds for all).
#[derive(Debug, Default)]
pub struct Masker {
    /// Longest first, so a secret containing another is hidden whole.
    values: RwLock<Vec<String>>,
}

impl Masker {
    pub fn new<I: IntoIterator<Item = String>>(secrets: I) -> Self {
        let m = Self::default();
        for s in secrets {
            m.add(&s);
        }
        m
    }

    /// Hides `value` from now on. A multi-line value is also hidden line by line, since log
    /// lines never hold it whole; blank values would hide everything and are ignored.
    pub fn add(&self, value: &str) {
        let Ok(mut values) = self.values.write() else {
            return;
        };
        let parts = std::iter::once(value).chain(value.lines().filter(|_| value.contains('\n')));
        for part in parts {
            let part = part.trim_end_matches('\r');
            if part.trim().is_empty() || values.iter().any(|v| v == part) {
                continue;
            }
            values.push(part.to_string());
        }
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// `text` with every masked value replaced by `***`.
    pub fn mask(&self, text: &str) -> String {
        let Ok(values) = self.values.read() else {
            return text.to_string();
        };
        let mut out = text.to_string();
        for v in values.iter() {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASK);
            }
        }
        out
    }

    /// Reads a workflow command in a step's output: `::add-mask::VALUE` adds VALUE. Returns
    /// whether the line was one.
    pub fn observe(&self, line: &str) -> bool {
        match line.trim_start().strip_prefix("::add-mask::") {
            Some(value) => {
                self.add(value.trim());
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_added_masks_are_hidden_longest_first() {
        let m = Masker::new([
            "hunter2".to_string(),
            "hunter2-extra".to_string(),
            String::new(),
        ]);
        assert_eq!(m.mask("pw=hunter2-extra and hunter2"), "pw=*** and ***");
        assert_eq!(m.mask("nothing here"), "nothing here");
        assert!(m.observe("::add-mask::s3cr3t"));
        assert!(!m.observe("plain line"));
        assert_eq!(m.mask("token s3cr3t"), "token ***");
    }

    #[test]
    fn multi_line_secrets_are_hidden_line_by_line() {
        let m = Masker::new(["line-one\nline-two".to_string()]);
        assert_eq!(m.mask("got line-two"), "got ***");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn a_masked_value_never_survives(secret in "[a-z0-9]{3,12}", pre in ".{0,20}", post in ".{0,20}") {
            let m = Masker::new([secret.clone()]);
            let masked = m.mask(&format!("{pre}{secret}{post}"));
            proptest::prop_assert!(!masked.contains(&secret) || masked.contains(MASK));
            proptest::prop_assert!(!m.mask(&secret).contains(&secret));
        }
    }
}
