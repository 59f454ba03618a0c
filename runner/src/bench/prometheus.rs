//! The Prometheus text exposition format (version 0.0.4), read: the samples of a server's
//! `/metrics` with their labels, and the family types that say which are counters.
//!
//! Written here because the crates that parse it take a name to be `\w+`, and vLLM's and
//! SGLang's names have colons (`vllm:num_requests_running`). It reads what the format allows:
//! `# HELP`/`# TYPE` lines, other comments, names of `[a-zA-Z_:][a-zA-Z0-9_:]*`, label values
//! with `\\`, `\"` and `\n` escapes, `NaN`/`+Inf`/`-Inf`, and an optional timestamp (ignored).

use std::collections::HashMap;

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Labels,
    pub value: f64,
}

/// A family's `# TYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

/// A whole scrape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    types: HashMap<String, Kind>,
}

/// Which series to read: a name, and labels they must have (`name{label="value"}`).
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    pub name: String,
    pub labels: Labels,
}

impl Selector {
    /// `name` or `name{label="value",…}`; the problem in words otherwise.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (name, rest) = split_name(text).ok_or_else(|| {
            format!("`{text}` is not a metric name (letters, digits, `_` and `:`)")
        })?;
        let (labels, rest) = match rest.strip_prefix('{') {
            Some(inner) => read_labels(inner)?,
            None => (Vec::new(), rest),
        };
        if !rest.trim().is_empty() {
            return Err(format!(
                "`{text}` has `{}` after its name and labels",
                rest.trim()
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            labels,
        })
    }

    fn matches(&self, sample: &Sample) -> bool {
        sample.name == self.name
            && self
                .labels
                .iter()
                .all(|wanted| sample.labels.contains(wanted))
    }
}

impl Exposition {
    /// The samples `selector` picks.
    pub fn select<'a>(&'a self, selector: &'a Selector) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(|s| selector.matches(s))
    }

    /// Whether a sample of this name only ever grows: a counter's (`x_total` of family `x`,
    /// or family `x_total` as some clients write it), or a histogram's or summary's
    /// `_count`, `_sum` and `_bucket`.
    pub fn is_counter(&self, name: &str) -> bool {
        if self.types.get(name) == Some(&Kind::Counter) {
            return true;
        }
        let family = |suffix: &str| name.strip_suffix(suffix).and_then(|f| self.types.get(f));
        family("_total") == Some(&Kind::Counter)
            || ["_count", "_sum", "_bucket"]
                .iter()
                .any(|s| matches!(family(s), Some(Kind::Histogram | Kind::Summary)))
            // Untyped, as some servers leave them: the naming convention says it.
            || (name.ends_with("_total") && !self.types.contains_key(name))
    }
}

/// Reads a whole exposition; the first bad line is an error naming its number.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut out = Exposition::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        let at = |e: String| format!("line {}: {e}", i + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.split_whitespace();
            if words.next() == Some("TYPE")
                && let (Some(name), Some(kind)) = (words.next(), words.next())
            {
                out.types.insert(name.to_owned(), kind_of(kind));
            }
            continue;
        }
        out.samples.push(sample(line).map_err(at)?);
    }
    Ok(out)
}

fn kind_of(word: &str) -> Kind {
    match word {
        "counter" => Kind::Counter,
        "gauge" => Kind::Gauge,
        "histogram" => Kind::Histogram,
        "summary" => Kind::Summary,
        _ => Kind::Untyped,
    }
}

fn sample(line: &str) -> Result<Sample, String> {
    let (name, rest) =
        split_name(line).ok_or_else(|| format!("`{line}` does not start with a metric name"))?;
    let (labels, rest) = match rest.strip_prefix('{') {
        Some(inner) => read_labels(inner)?,
        None => (Vec::new(), rest),
    };
    let mut fields = rest.split_whitespace();
    let value = fields
        .next()
        .ok_or_else(|| format!("`{name}` has no value"))?;
    let value = value
        .parse::<f64>()
        .map_err(|_| format!("`{name}` has the value `{value}`, not a number"))?;
    if fields.next().is_some_and(|t| t.parse::<i64>().is_err()) || fields.next().is_some() {
        return Err(format!(
            "`{name}` has more than a value and a timestamp after it"
        ));
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// The leading metric name and the rest; `None` when the text does not start with one.
fn split_name(text: &str) -> Option<(&str, &str)> {
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit()))
        })
        .map_or(text.len(), |(i, _)| i);
    (end > 0).then(|| text.split_at(end))
}

/// A series' labels: name and value pairs, in the order written.
pub type Labels = Vec<(String, String)>;

/// The labels after a `{`, up to its `}`, and what follows it.
fn read_labels(text: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    let mut rest = text.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let (name, after) =
            split_name(rest).ok_or_else(|| format!("a label name was expected at `{rest}`"))?;
        let after = after
            .trim_start()
            .strip_prefix('=')
            .ok_or_else(|| format!("label `{name}` has no `=`"))?;
        let after = after
            .trim_start()
            .strip_prefix('"')
            .ok_or_else(|| format!("the value of label `{name}` is not in double quotes"))?;
        let (value, after) = quoted(after)
            .ok_or_else(|| format!("the value of label `{name}` has no closing quote"))?;
        labels.push((name.to_owned(), value));
        rest = after.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
}

/// A label value after its opening quote, unescaped, and the text after its closing quote.
fn quoted(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &text[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# HELP vllm:prompt_tokens Number of prefill tokens processed.
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1234.0
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 7.0
vllm:e2e_request_latency_seconds_count{model_name="m"} 7.0
odd{path="C:\\DIR",msg="say \"hi\"\nbye"} -Inf 1712345678000
"#;

    #[test]
    fn reads_vllm_names_labels_escapes_and_special_values() {
        let e = parse(VLLM).unwrap();
        assert_eq!(e.samples.len(), 6);
        assert_eq!(
            e.samples[0],
            Sample {
                name: "vllm:num_requests_running".into(),
                labels: vec![
                    ("engine".into(), "0".into()),
                    ("model_name".into(), "m".into())
                ],
                value: 3.0,
            }
        );
        assert_eq!(e.samples[2].value, 1.7e9);
        let odd = &e.samples[5];
        assert_eq!(odd.labels[0].1, r"C:\DIR");
        assert_eq!(odd.labels[1].1, "say \"hi\"\nbye");
        assert_eq!(odd.value, f64::NEG_INFINITY);
    }

    #[test]
    fn counters_are_known_by_their_family_type() {
        let e = parse(VLLM).unwrap();
        assert!(e.is_counter("vllm:prompt_tokens_total"));
        assert!(e.is_counter("vllm:e2e_request_latency_seconds_count"));
        assert!(!e.is_counter("vllm:num_requests_running"));
        assert!(!e.is_counter("vllm:prompt_tokens_created"));
        assert!(e.is_counter("untyped_total"), "by the naming convention");
    }

    #[test]
    fn selectors_pick_series_by_labels() {
        let e = parse(
            "x{engine=\"0\",r=\"stop\"} 1\nx{engine=\"1\",r=\"stop\"} 2\nx{engine=\"0\",r=\"length\"} 4\n",
        )
        .unwrap();
        let sum = |s: &str| -> f64 {
            let selector = Selector::parse(s).unwrap();
            e.select(&selector).map(|s| s.value).sum()
        };
        assert_eq!(sum("x"), 7.0);
        assert_eq!(sum(r#"x{r="stop"}"#), 3.0);
        assert_eq!(sum(r#"x{engine="0", r="length"}"#), 4.0);
        assert_eq!(sum("y"), 0.0);
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse("ok 1\nbroken{a=1} 2\n").unwrap_err();
        assert_eq!(
            err,
            "line 2: the value of label `a` is not in double quotes"
        );
        assert_eq!(
            parse("x{a=\"1\"} many\n").unwrap_err(),
            "line 1: `x` has the value `many`, not a number"
        );
        assert!(Selector::parse("9lives").is_err());
        assert!(Selector::parse("x y").is_err());
    }
}
