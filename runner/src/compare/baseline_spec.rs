//! The `baseline:` input, parsed: a pinned name, `previous`, `window`, or a fixed number with
//! an optional unit (`89.5 tok/s`).

use super::CompareError;

/// What the user asked to compare with.
#[derive(Clone, Debug, PartialEq)]
pub enum BaselineSpec {
    /// A name pinned with `gpuflow baseline set`.
    Pinned(String),
    /// The last comparable successful run.
    Previous,
    /// The last N comparable successful runs on the branch.
    Window(usize),
    /// A number, in the metric's unit when `unit` is given.
    Fixed { value: f64, unit: Option<String> },
}

impl BaselineSpec {
    /// Parses the input; `window` is the size a bare `window` means (the step's `window`
    /// input, 10 by default).
    pub fn parse(input: &str, window: usize) -> Result<Self, CompareError> {
        let text = input.trim();
        let bad = |why: &str| CompareError::BadSpec {
            input: input.to_string(),
            why: why.to_string(),
        };
        match text {
            "" => {
                return Err(bad(
                    "it is empty; use a pinned name, `previous`, `window` or a number",
                ));
            }
            "previous" => return Ok(Self::Previous),
            "window" if window == 0 => {
                return Err(bad(
                    "a window of 0 runs holds nothing; set `window` to 1 or more",
                ));
            }
            "window" => return Ok(Self::Window(window)),
            _ => {}
        }
        if text.starts_with(|c: char| c.is_ascii_digit() || ".+-".contains(c)) {
            let (number, unit) = match text.split_once(char::is_whitespace) {
                Some((n, u)) => (n, Some(u.trim().to_string())),
                None => (text, None),
            };
            let value: f64 = number.parse().map_err(|_| {
                bad("it starts like a number but is not one (e.g. `89.5` or `89.5 tok/s`)")
            })?;
            if !value.is_finite() || value <= 0.0 {
                return Err(bad("a fixed baseline must be a positive number"));
            }
            return Ok(Self::Fixed { value, unit });
        }
        if !text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(bad(
                "a pinned baseline's name has letters, digits, `-`, `_` and `.` only",
            ));
        }
        Ok(Self::Pinned(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use test_case::test_case;

    use super::*;

    #[test_case("nccl", BaselineSpec::Pinned("nccl".into()))]
    #[test_case("previous", BaselineSpec::Previous)]
    #[test_case(" window ", BaselineSpec::Window(10))]
    #[test_case("89.5", BaselineSpec::Fixed { value: 89.5, unit: None })]
    #[test_case("89.5 tok/s", BaselineSpec::Fixed { value: 89.5, unit: Some("tok/s".into()) })]
    fn parses(input: &str, expected: BaselineSpec) {
        assert_eq!(BaselineSpec::parse(input, 10).unwrap(), expected);
    }

    #[test_case("", "empty")]
    #[test_case("89.5x", "is not one")]
    #[test_case("-3", "positive")]
    #[test_case("my baseline", "letters")]
    #[test_case("window", "window of 0"; "zero window")]
    fn refuses(input: &str, why: &str) {
        let window = if why == "window of 0" { 0 } else { 10 };
        let err = BaselineSpec::parse(input, window).unwrap_err().to_string();
        assert!(err.contains(why), "{err}");
        assert!(err.starts_with(&format!("`{input}`")), "{err}");
    }
}
