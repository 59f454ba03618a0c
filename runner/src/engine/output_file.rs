//! The files a step writes to talk back: `$GITHUB_OUTPUT` (= `$GPUFLOW_OUTPUT`) for its
//! outputs and `$GITHUB_ENV` for variables of later steps. Both hold `name=value` lines or
//! heredocs (`name<<DELIM` … `DELIM`), as in GitHub Actions.

use indexmap::IndexMap;

/// A line of the file that is neither form, or a heredoc that never ends.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OutputFileError {
    #[error("line {line} of `{file}` is not `name=value` or `name<<DELIMITER`")]
    BadLine { file: String, line: usize },
    #[error("the value of `{name}` in `{file}` starts a heredoc `<<{delimiter}` that never ends")]
    Unterminated {
        file: String,
        name: String,
        delimiter: String,
    },
}

/// Parses the file's text; later assignments of a name win. `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<IndexMap<String, String>, OutputFileError> {
    let mut out = IndexMap::new();
    let mut lines = text.split('\n').enumerate();
    while let Some((i, raw)) = lines.next() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            continue;
        }
        let eq = line.find('=');
        let heredoc = line.find("<<");
        match (eq, heredoc) {
            (Some(e), h) if h.is_none_or(|h| e < h) => {
                let name = &line[..e];
                if name.trim().is_empty() {
                    return Err(OutputFileError::BadLine {
                        file: file.into(),
                        line: i + 1,
                    });
                }
                out.insert(name.to_string(), line[e + 1..].to_string());
            }
            (_, Some(h)) => {
                let name = line[..h].to_string();
                let delimiter = line[h + 2..].to_string();
                if name.trim().is_empty() || delimiter.trim().is_empty() {
                    return Err(OutputFileError::BadLine {
                        file: file.into(),
                        line: i + 1,
                    });
                }
                let mut value: Vec<&str> = Vec::new();
                let mut closed = false;
                for (_, raw) in lines.by_ref() {
                    let body = raw.strip_suffix('\r').unwrap_or(raw);
                    if body == delimiter {
                        closed = true;
                        break;
                    }
                    value.push(body);
                }
                if !closed {
                    return Err(OutputFileError::Unterminated {
                        file: file.into(),
                        name,
                        delimiter,
                    });
                }
                out.insert(name, value.join("\n"));
            }
            _ => {
                return Err(OutputFileError::BadLine {
                    file: file.into(),
                    line: i + 1,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("a=1\nb=two words\n", &[("a", "1"), ("b", "two words")] ; "simple")]
    #[test_case("a=x=y", &[("a", "x=y")] ; "equals in value")]
    #[test_case("m<<EOF\nline 1\nline 2\nEOF\nz=9\n", &[("m", "line 1\nline 2"), ("z", "9")] ; "heredoc")]
    #[test_case("a=1\na=2", &[("a", "2")] ; "last wins")]
    #[test_case("a<<X\n\nX", &[("a", "")] ; "empty heredoc line")]
    #[test_case("\r\na=1\r\n", &[("a", "1")] ; "crlf")]
    fn parses(text: &str, want: &[(&str, &str)]) {
        let got = parse(text, "out").unwrap();
        let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn errors_name_the_line_or_the_delimiter() {
        assert_eq!(
            parse("ok=1\nnonsense\n", "out").unwrap_err().to_string(),
            "line 2 of `out` is not `name=value` or `name<<DELIMITER`"
        );
        assert!(
            parse("m<<EOF\nnever closed", "out")
                .unwrap_err()
                .to_string()
                .contains("never ends")
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn never_panics(text in "(?s).{0,200}") {
            let _ = parse(&text, "out");
        }
    }
}
