//! What a `maximize`/`minimize` search scores a cell's run with: the outputs of its scored
//! `benchmark` step that are numbers (`output_tok_s`, `errors`), and, from the result that
//! step recorded, each metric's statistics over its samples as `NAME.p50`, `.p90`, `.p95`,
//! `.p99`, `.mean`, `.min` and `.max` (and `NAME`, its median, where the step has no such
//! output: `request_goodput`, `server.…`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::engine::executor::JobOutcome;
use crate::stats::quantile;
use crate::store::ResultStore;

/// The statistics of a stored metric, by suffix.
const STATISTICS: &[(&str, Statistic)] = &[
    ("p50", Statistic::Quantile(0.5)),
    ("p90", Statistic::Quantile(0.9)),
    ("p95", Statistic::Quantile(0.95)),
    ("p99", Statistic::Quantile(0.99)),
    ("mean", Statistic::Mean),
    ("min", Statistic::Quantile(0.0)),
    ("max", Statistic::Quantile(1.0)),
];

#[derive(Clone, Copy)]
enum Statistic {
    Quantile(f64),
    Mean,
}

/// The metrics of the step at `step_key` (`3`) in `outcome`, and whether it measured anything
/// (a result recorded, or an output that is a number).
pub(super) fn read(
    outcome: &JobOutcome,
    step_key: &str,
    store: &Path,
) -> (BTreeMap<String, f64>, bool) {
    let mut metrics: BTreeMap<String, f64> = outcome
        .step_outputs
        .get(step_key)
        .into_iter()
        .flatten()
        .filter_map(|(name, text)| Some((name.clone(), text.trim().parse::<f64>().ok()?)))
        .filter(|(_, v)| v.is_finite())
        .collect();
    let recorded = outcome.recorded.iter().find(|r| r.key == step_key);
    // A store that cannot be read leaves the outputs: the benchmark said why when it recorded.
    let stored = recorded.and_then(|r| {
        ResultStore::open(store)
            .ok()?
            .result(r.result_id)
            .ok()
            .flatten()
    });
    if let Some(result) = &stored {
        for metric in &result.metrics {
            add_statistics(&mut metrics, &metric.name, &metric.samples);
        }
    }
    let measured = recorded.is_some() || !metrics.is_empty();
    (metrics, measured)
}

/// `name`'s statistics over `samples`, and its median under its own name unless an output
/// already gave it.
fn add_statistics(metrics: &mut BTreeMap<String, f64>, name: &str, samples: &[f64]) {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return;
    }
    sorted.sort_by(f64::total_cmp);
    metrics
        .entry(name.to_string())
        .or_insert_with(|| quantile(&sorted, 0.5));
    for (suffix, statistic) in STATISTICS {
        let value = match statistic {
            Statistic::Quantile(p) => quantile(&sorted, *p),
            #[allow(clippy::cast_precision_loss)]
            Statistic::Mean => sorted.iter().sum::<f64>() / sorted.len() as f64,
        };
        metrics.insert(format!("{name}.{suffix}"), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_samples_beside_the_outputs() {
        let mut metrics = BTreeMap::from([("ttft_ms".to_string(), 7.0)]);
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        add_statistics(&mut metrics, "ttft_ms", &samples);
        add_statistics(&mut metrics, "request_goodput", &[3.0, 1.0, 2.0]);
        assert_eq!(metrics["ttft_ms"], 7.0, "the step's own output wins");
        assert!((metrics["ttft_ms.p99"] - 99.01).abs() < 1e-9);
        assert_eq!(metrics["ttft_ms.max"], 100.0);
        assert_eq!(metrics["ttft_ms.mean"], 50.5);
        assert_eq!(metrics["request_goodput"], 2.0);
        assert_eq!(metrics["request_goodput.min"], 1.0);
    }
}
