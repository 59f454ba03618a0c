//! The metrics the built-in generator's result is stored with, level by level: the first
//! level's under the metrics' own names (`output_tok_s`, as the step's outputs are), each
//! further level of a sweep under `NAME@TAG` (`output_tok_s@c8`, the tag of its result file
//! `….c8.json`), so every level of `concurrency: [1, 8, 64]` reaches the store and can be
//! compared with `compare-to-baseline`.

use std::collections::BTreeMap;

use crate::bench::request::RequestRecord;
use crate::bench::result::{Level, LevelResult};
use crate::bench::{BenchResult, Mode};
use crate::store::{Direction, NewMetric};

/// Every level's metrics, the first level's under their own names.
pub fn generator_metrics(result: &BenchResult) -> Vec<NewMetric> {
    let mode = &result.config.mode;
    let mut out = Vec::new();
    for (i, level) in result.levels.iter().enumerate() {
        let suffix = if i == 0 {
            String::new()
        } else {
            format!("@{}", tag(&level.level))
        };
        out.extend(level_metrics(level, mode).into_iter().map(|mut m| {
            m.name.push_str(&suffix);
            m
        }));
    }
    out
}

/// What each stored metric is, in words (`output_tok_s@c8` → `output tok/s, median of
/// runs, at concurrency 8`), for the comparison's log lines.
pub fn meanings(metrics: &[NewMetric], result: &BenchResult) -> BTreeMap<String, String> {
    let mode = &result.config.mode;
    metrics
        .iter()
        .filter_map(|m| {
            let (base, at) = match m.name.split_once('@') {
                Some((base, tag)) => (base, describe_tag(tag)),
                None => (m.name.as_str(), String::new()),
            };
            crate::bench::report::metric_meaning(base, mode)
                .map(|meaning| (m.name.clone(), format!("{meaning}{at}")))
        })
        .collect()
}

/// `c8` for concurrency 8, `r20` for 20 requests per second: the per-level file's tag.
pub fn tag(level: &Level) -> String {
    match (level.request_rate, level.concurrency) {
        (Some(r), _) => format!("r{r}"),
        (None, c) => format!("c{}", c.unwrap_or(1)),
    }
}

pub fn describe_tag(tag: &str) -> String {
    match (tag.strip_prefix('c'), tag.strip_prefix('r')) {
        (Some(n), _) => format!(", at concurrency {n}"),
        (_, Some(r)) => format!(", at {r} requests/s"),
        _ => String::new(),
    }
}

/// The samples stored per metric of one level: per request where a request has its own value
/// (so the comparison has many samples), per run for rates over a whole run.
fn level_metrics(level: &LevelResult, mode: &Mode) -> Vec<NewMetric> {
    use Direction::{Higher, Lower};
    let ok: Vec<&RequestRecord> = level
        .runs
        .iter()
        .flat_map(|r| r.records.iter().filter(|x| x.ok()))
        .collect();
    let per_request = |f: fn(&RequestRecord) -> Option<f64>| -> Vec<f64> {
        ok.iter().filter_map(|r| f(r)).collect()
    };
    let per_run = |name: &str| -> Vec<f64> {
        level
            .across_runs
            .get(name)
            .map(|a| a.values.clone())
            .unwrap_or_default()
    };
    let single = matches!(mode, Mode::SingleStream);
    let mut out = Vec::new();
    let mut push = |name: &str, unit: &str, direction: Direction, samples: Vec<f64>| {
        if !samples.is_empty() {
            out.push(NewMetric {
                name: name.into(),
                unit: unit.into(),
                direction: Some(direction),
                samples,
            });
        }
    };
    // The same samples the benchmark's table shows the median of as `output_tok_s (…)`.
    push(
        "output_tok_s",
        "tok/s",
        Higher,
        crate::bench::report::output_tok_s_samples(level, mode),
    );
    push(
        "output_throughput",
        "tok/s",
        Higher,
        per_run("output_throughput"),
    );
    push(
        "request_throughput",
        "req/s",
        Higher,
        per_run("request_throughput"),
    );
    push(
        "total_token_throughput",
        "tok/s",
        Higher,
        per_run("total_token_throughput"),
    );
    push("ttft_ms", "ms", Lower, per_request(|r| r.ttft_ms()));
    push("tpot_ms", "ms", Lower, per_request(|r| r.tpot_ms()));
    push("itl_ms", "ms", Lower, per_run("itl_ms"));
    push("e2el_ms", "ms", Lower, per_request(|r| r.e2el_ms()));
    if single {
        push(
            "decode_tok_s",
            "tok/s",
            Higher,
            per_request(|r| r.decode_tok_s()),
        );
        push("e2e_tok_s", "tok/s", Higher, per_request(|r| r.e2e_tok_s()));
    }
    push(
        "tokens_per_chunk",
        "tok/chunk",
        Higher,
        per_request(|r| r.tokens_per_chunk()),
    );
    out.extend(server_metrics(level));
    out
}

/// The server's own metrics (`spec_accept_length`, `server.<name>`, …), one sample per run,
/// in the order the first run that has each gave them.
fn server_metrics(level: &LevelResult) -> Vec<NewMetric> {
    let mut out: Vec<NewMetric> = Vec::new();
    for value in level.runs.iter().flat_map(|r| &r.server) {
        match out.iter_mut().find(|m| m.name == value.name) {
            Some(metric) => metric.samples.push(value.value),
            None => out.push(NewMetric {
                name: value.name.clone(),
                unit: value.unit.into(),
                direction: Some(value.direction),
                samples: vec![value.value],
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::metrics::{Honesty, RunMetrics};
    use crate::bench::result::{RunResult, WarmUp};
    use crate::bench::{BenchConfig, BenchInputs, Slo};

    /// A sweep's result: one run of three requests per level, each level's tokens 10 ms
    /// slower than the last's.
    fn sweep(levels: &[u32]) -> BenchResult {
        let inputs = BenchInputs {
            target: Some("http://h:1".into()),
            concurrency: Some(levels.to_vec()),
            ..BenchInputs::default()
        };
        let config = BenchConfig::from_inputs(&inputs).unwrap();
        let results = Level::all(&config.mode)
            .into_iter()
            .enumerate()
            .map(|(i, level)| {
                let step = 10.0 * (i as f64 + 1.0);
                let records: Vec<RequestRecord> = (0..3)
                    .map(|_| RequestRecord {
                        chunks_ms: vec![step, 2.0 * step, 3.0 * step],
                        end_ms: 3.0 * step,
                        prompt_tokens: Some(4),
                        completion_tokens: Some(3),
                        ..RequestRecord::default()
                    })
                    .collect();
                let run = RunResult {
                    run: 1,
                    metrics: RunMetrics::compute(
                        &records,
                        1.0,
                        &Slo::default(),
                        Honesty::default(),
                    ),
                    records,
                    warmup: WarmUp::default(),
                    started_at: None,
                    server: Vec::new(),
                };
                LevelResult::new(level, vec![run], &Slo::default())
            })
            .collect();
        BenchResult::new(&config, "m".into(), 0, results)
    }

    #[test]
    fn every_level_of_a_sweep_is_stored() {
        let result = sweep(&[1, 8]);
        let metrics = generator_metrics(&result);
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        for name in ["output_tok_s", "ttft_ms", "output_tok_s@c8", "ttft_ms@c8"] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
        let ttft = |name: &str| {
            metrics
                .iter()
                .find(|m| m.name == name)
                .map(|m| m.samples.clone())
                .unwrap()
        };
        assert_eq!(ttft("ttft_ms"), [10.0; 3], "the first level's own samples");
        assert_eq!(
            ttft("ttft_ms@c8"),
            [20.0; 3],
            "the second level's own samples"
        );
        let meanings = meanings(&metrics, &result);
        assert_eq!(meanings["ttft_ms"], "TTFT, per-request median");
        assert_eq!(
            meanings["ttft_ms@c8"],
            "TTFT, per-request median, at concurrency 8"
        );
    }

    #[test]
    fn one_level_keeps_the_plain_names() {
        let metrics = generator_metrics(&sweep(&[4]));
        assert!(metrics.iter().all(|m| !m.name.contains('@')));
        assert!(metrics.iter().any(|m| m.name == "output_tok_s"));
    }
}
