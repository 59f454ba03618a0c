//! The `metrics:` input of a scripted benchmark, and reading its values from the script's
//! output: `{json: path}` looks the path up in the JSON the script printed, `{regex: '…'}`
//! takes the named capture `value` of the last match. Knows nothing of how the script ran.

use std::collections::VecDeque;

use indexmap::IndexMap;

use crate::expr::Value;
use crate::store::Direction;

/// How much of a script's standard output is kept to read metrics from: its last 16 MiB, so
/// a script printing gigabytes keeps the runner's memory bounded (every line still reaches
/// the step's log). Metrics are what a script prints at its end.
pub const OUTPUT_TAIL_BYTES: usize = 16 * 1024 * 1024;

/// The end of a script's standard output, whole lines, at most `limit` bytes (one line more
/// when a single line is longer).
#[derive(Debug)]
pub struct OutputTail {
    lines: VecDeque<String>,
    bytes: usize,
    limit: usize,
    dropped: u64,
}

impl OutputTail {
    pub fn new(limit: usize) -> Self {
        Self {
            lines: VecDeque::new(),
            bytes: 0,
            limit,
            dropped: 0,
        }
    }

    pub fn push_line(&mut self, line: &str) {
        self.lines.push_back(line.to_owned());
        self.bytes += line.len() + 1;
        while self.bytes > self.limit && self.lines.len() > 1 {
            let first = self.lines.pop_front().expect("more than one line");
            self.bytes -= first.len() + 1;
            self.dropped += first.len() as u64 + 1;
        }
    }

    /// Bytes of output no longer kept.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The kept lines, each ending in a newline.
    pub fn text(&self) -> String {
        let mut out = String::with_capacity(self.bytes);
        for line in &self.lines {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// Where one metric's value is in the output.
#[derive(Clone, Debug)]
pub enum Source {
    /// A dotted path into the printed JSON (`results.tok_s`, `runs.0.ttft`).
    Json(String),
    Regex(regex::Regex),
}

/// One metric of the `metrics:` input.
#[derive(Clone, Debug)]
pub struct MetricSpec {
    pub name: String,
    pub source: Source,
    pub unit: String,
    /// `None`: defaulted from the unit when stored.
    pub direction: Option<Direction>,
}

const SHAPE: &str = "write `metrics: {tok_s: {json: results.tok_s, unit: tok/s}}` or `{regex: 'speed: (?P<value>[0-9.]+)'}`";

/// Reads the `metrics:` input (a mapping of metric name to its settings).
pub fn parse(metrics: &Value) -> Result<Vec<MetricSpec>, String> {
    let Value::Object(map) = metrics else {
        return Err(format!(
            "input `metrics` is {}, not a mapping of metric names to where to read them (help: {SHAPE})",
            metrics.kind()
        ));
    };
    if map.is_empty() {
        return Err(format!("input `metrics` names no metric (help: {SHAPE})"));
    }
    map.iter().map(|(name, v)| parse_one(name, v)).collect()
}

fn parse_one(name: &str, v: &Value) -> Result<MetricSpec, String> {
    let Value::Object(settings) = v else {
        return Err(format!(
            "`metrics.{name}` is {}, not a mapping (help: {SHAPE})",
            v.kind()
        ));
    };
    const KEYS: &[&str] = &["json", "regex", "unit", "direction"];
    if let Some(unknown) = settings.keys().find(|k| !KEYS.contains(&k.as_str())) {
        let hint = crate::diag::did_you_mean(unknown, KEYS).unwrap_or_else(|| {
            format!("the settings are {}", crate::diag::join_quoted(KEYS, "and"))
        });
        return Err(format!(
            "`metrics.{name}` has no setting `{unknown}` (help: {hint})"
        ));
    }
    let text = |k: &str| settings.get(k).map(Value::to_expr_string);
    let source = match (text("json"), text("regex")) {
        (Some(path), None) => Source::Json(path),
        (None, Some(pattern)) => {
            let re = regex::Regex::new(&pattern).map_err(|e| {
                format!("`metrics.{name}.regex` is not a valid regular expression: {e}")
            })?;
            if !re.capture_names().flatten().any(|n| n == "value") {
                return Err(format!(
                    "`metrics.{name}.regex` has no capture named `value` (help: name the number `(?P<value>[0-9.]+)`)"
                ));
            }
            Source::Regex(re)
        }
        (Some(_), Some(_)) => {
            return Err(format!(
                "`metrics.{name}` gives both `json` and `regex` (help: keep one)"
            ));
        }
        (None, None) => {
            return Err(format!(
                "`metrics.{name}` says neither `json` nor `regex` (help: {SHAPE})"
            ));
        }
    };
    let direction = match text("direction") {
        None => None,
        Some(d) => Some(Direction::parse(&d).ok_or_else(|| {
            format!("`metrics.{name}.direction` is `{d}`, not `higher` or `lower`")
        })?),
    };
    Ok(MetricSpec {
        name: name.to_string(),
        source,
        unit: text("unit").unwrap_or_default(),
        direction,
    })
}

/// Every metric's value in one run's output, in the order of `specs`.
pub fn extract(specs: &[MetricSpec], output: &str) -> Result<IndexMap<String, f64>, String> {
    let mut json: Option<Option<serde_json::Value>> = None;
    let mut out = IndexMap::new();
    for spec in specs {
        let value = match &spec.source {
            Source::Json(path) => {
                let doc = json.get_or_insert_with(|| find_json(output));
                let Some(doc) = doc else {
                    return Err(format!(
                        "metric `{}`: the script printed no JSON object (help: print one, e.g. `{{\"{}\": 12.5}}`, as the output or its last line)",
                        spec.name, path
                    ));
                };
                lookup(doc, path).ok_or_else(|| {
                    format!(
                        "metric `{}`: the printed JSON has no number at `{path}`",
                        spec.name
                    )
                })?
            }
            Source::Regex(re) => {
                let text = re
                    .captures_iter(output)
                    .last()
                    .and_then(|c| c.name("value"))
                    .map(|m| m.as_str().to_string())
                    .ok_or_else(|| {
                        format!(
                            "metric `{}`: no line of the output matches `{}`",
                            spec.name,
                            re.as_str()
                        )
                    })?;
                text.trim().parse::<f64>().map_err(|_| {
                    format!(
                        "metric `{}`: the capture `value` is `{text}`, not a number",
                        spec.name
                    )
                })?
            }
        };
        out.insert(spec.name.clone(), value);
    }
    Ok(out)
}

/// The whole output as JSON, or else its last line that is a JSON object (scripts log before
/// they print their result).
fn find_json(output: &str) -> Option<serde_json::Value> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(output.trim())
        && v.is_object()
    {
        return Some(v);
    }
    output
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .find(serde_json::Value::is_object)
}

fn lookup(doc: &serde_json::Value, path: &str) -> Option<f64> {
    let mut at = doc;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        at = match at {
            serde_json::Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
            other => other.get(part)?,
        };
    }
    match at {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn specs(json: serde_json::Value) -> Result<Vec<MetricSpec>, String> {
        parse(&Value::from_json(json))
    }

    #[test]
    fn json_paths_and_regex_captures_are_read() {
        let s = specs(serde_json::json!({
            "tok_s": {"json": "result.runs.1.tok_s", "unit": "tok/s"},
            "ttft": {"regex": "ttft=(?P<value>[0-9.]+)ms", "unit": "ms", "direction": "lower"},
        }))
        .unwrap();
        let out = "warming up\nttft=12.0ms\nttft=10.5ms\n{\"result\": {\"runs\": [{\"tok_s\": 1}, {\"tok_s\": 88.5}]}}\n";
        let values = extract(&s, out).unwrap();
        assert_eq!(values["tok_s"], 88.5);
        assert_eq!(values["ttft"], 10.5, "the last match counts");
        assert_eq!(s[1].direction, Some(Direction::Lower));
    }

    #[test]
    fn a_regex_without_a_value_capture_is_refused_with_a_hint() {
        let e = specs(serde_json::json!({"x": {"regex": "speed: ([0-9]+)"}})).unwrap_err();
        assert!(e.contains("no capture named `value`"), "{e}");
        assert!(e.contains("(?P<value>"), "{e}");
    }

    #[test]
    fn unknown_settings_get_a_suggestion() {
        let e = specs(serde_json::json!({"x": {"jsn": "a"}})).unwrap_err();
        assert!(e.contains("no setting `jsn`"), "{e}");
        assert!(e.contains("`json`"), "{e}");
    }

    #[test]
    fn missing_values_say_which_metric() {
        let s = specs(serde_json::json!({"tok_s": {"json": "a.b"}})).unwrap();
        let e = extract(&s, "{\"a\": {}}").unwrap_err();
        assert!(e.contains("metric `tok_s`") && e.contains("`a.b`"), "{e}");
        let e = extract(&s, "nothing here").unwrap_err();
        assert!(e.contains("no JSON object"), "{e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn extraction_never_panics(output in ".{0,200}", path in "[a-z0-9.]{0,12}") {
            let s = specs(serde_json::json!({
                "j": {"json": path},
                "r": {"regex": "v=(?P<value>.*)"},
            })).unwrap();
            let _ = extract(&s, &output);
        }
    }

    #[test]
    fn the_output_tail_keeps_the_last_whole_lines_within_its_limit() {
        let mut tail = OutputTail::new(20);
        for i in 0..100 {
            tail.push_line(&format!("line {i}"));
        }
        tail.push_line("tok/s: 89.5");
        let text = tail.text();
        assert!(text.len() <= 20, "{text:?}");
        assert!(text.ends_with("tok/s: 89.5\n"), "{text:?}");
        assert!(text.starts_with("line 99\n"), "whole lines only: {text:?}");
        let total: u64 = (0..100)
            .map(|i| format!("line {i}\n").len() as u64)
            .sum::<u64>()
            + 12;
        assert_eq!(tail.dropped() + text.len() as u64, total);
        // A line longer than the limit is kept whole, alone.
        tail.push_line(&"x".repeat(50));
        assert_eq!(tail.text().len(), 51);
    }
}
