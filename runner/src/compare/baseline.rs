//! Resolving a [`BaselineSpec`] against the store into the data a comparison needs.

use serde::{Deserialize, Serialize};

use super::{BaselineSpec, CompareError};
use crate::store::{FieldDiff, Identity, ResultFilter, ResultStore, StoredResult};

/// The baseline's numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum BaselineData {
    /// The raw samples of one run (pinned or previous).
    Samples(Vec<f64>),
    /// The raw samples of each of the last N runs, newest first.
    Window(Vec<Vec<f64>>),
    /// A number the user gave.
    Fixed(f64),
}

/// A resolved baseline: its numbers, what it is in words, and how its environment differs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub description: String,
    pub data: BaselineData,
    /// Identity fields in which the baseline differs from the current run; empty when the
    /// series keys match.
    pub differences: Vec<FieldDiff>,
}

/// Who is asking: the current result's place and environment.
#[derive(Clone, Copy, Debug)]
pub struct CurrentRun<'a> {
    pub run_id: &'a str,
    pub workflow: &'a str,
    pub job: &'a str,
    pub step: &'a str,
    /// The branch; a window stays on it.
    pub git_ref: Option<&'a str>,
    pub identity: &'a Identity,
}

/// Finds what `spec` means for `metric` (in `unit`). `Ok(None)`: nothing comparable yet (the
/// verdict is `no-baseline`). Only results of the same series count, unless
/// `allow_incomparable`: then past results of the same workflow, job and step count too, and
/// the differences are listed. A pinned baseline is used whatever its series; its
/// differences decide whether it may be.
pub fn resolve(
    store: &ResultStore,
    spec: &BaselineSpec,
    current: &CurrentRun<'_>,
    metric: &str,
    unit: &str,
    allow_incomparable: bool,
) -> Result<Option<Baseline>, CompareError> {
    let key = current.identity.series_key();
    let filter = |limit: usize| ResultFilter {
        metric: metric.to_string(),
        series_key: (!allow_incomparable).then(|| key.clone()),
        workflow: allow_incomparable.then(|| current.workflow.to_string()),
        job: allow_incomparable.then(|| current.job.to_string()),
        step: allow_incomparable.then(|| current.step.to_string()),
        git_ref: None,
        exclude_run: Some(current.run_id.to_string()),
        limit,
    };
    let samples_of = |r: &StoredResult| {
        r.metric(metric)
            .map(|m| m.samples.clone())
            .unwrap_or_default()
    };
    match spec {
        BaselineSpec::Fixed { value, unit: given } => {
            if let Some(given) = given.as_deref().filter(|g| *g != unit) {
                return Err(CompareError::UnitMismatch {
                    input: format!("{value} {given}"),
                    given: given.to_string(),
                    metric: metric.to_string(),
                    unit: unit.to_string(),
                });
            }
            let shown = super::value_text::format_value(*value, unit);
            Ok(Some(Baseline {
                description: format!("the fixed value {shown}"),
                data: BaselineData::Fixed(*value),
                differences: Vec::new(),
            }))
        }
        BaselineSpec::Previous => {
            let found = store.find(&filter(1))?;
            Ok(found.first().map(|r| Baseline {
                // With `allow-incomparable` the run may be of another series: "comparable"
                // would then claim what the differences below deny.
                description: if r.series_key == key {
                    format!(
                        "the previous comparable run `{}` ({} samples)",
                        r.run_id,
                        samples_of(r).len()
                    )
                } else {
                    format!(
                        "the previous run `{}` ({} samples; from another series: allow-incomparable)",
                        r.run_id,
                        samples_of(r).len()
                    )
                },
                data: BaselineData::Samples(samples_of(r)),
                differences: current.identity.differences(&r.fingerprint.identity),
            }))
        }
        BaselineSpec::Window(n) => {
            let mut f = filter(*n);
            f.git_ref = current.git_ref.map(str::to_string);
            let found = store.find(&f)?;
            if found.is_empty() {
                return Ok(None);
            }
            let mut differences: Vec<FieldDiff> = Vec::new();
            for r in &found {
                for d in current.identity.differences(&r.fingerprint.identity) {
                    if !differences.iter().any(|x| x.field == d.field) {
                        differences.push(d);
                    }
                }
            }
            let on = current
                .git_ref
                .map(|b| format!(" on `{b}`"))
                .unwrap_or_default();
            let asked = if found.len() < *n {
                format!(", of {n} asked for")
            } else {
                String::new()
            };
            let other = found.iter().filter(|r| r.series_key != key).count();
            let description = if other == 0 {
                format!(
                    "a window of the last {} comparable runs{on}{asked}",
                    found.len()
                )
            } else {
                format!(
                    "a window of the last {} runs{on}{asked} ({other} from another series: allow-incomparable)",
                    found.len()
                )
            };
            Ok(Some(Baseline {
                description,
                data: BaselineData::Window(found.iter().map(samples_of).collect()),
                differences,
            }))
        }
        BaselineSpec::Pinned(name) => {
            let Some(pin) = store.baseline(name, metric)? else {
                let names: Vec<String> = store.baselines()?.into_iter().map(|b| b.name).collect();
                let suggestion = crate::diag::did_you_mean(name, &names).or_else(|| {
                    Some(if names.is_empty() {
                        "pin one with `gpuflow baseline set NAME RUN`".to_string()
                    } else {
                        format!("pinned: {}", crate::diag::join_quoted(&names, "and"))
                    })
                });
                return Err(CompareError::UnknownBaseline {
                    name: name.clone(),
                    suggestion,
                });
            };
            let results = store.run_results(&pin.run_id)?;
            let with_metric: Vec<&StoredResult> = results
                .iter()
                .filter(|r| r.metric(metric).is_some_and(|m| !m.samples.is_empty()))
                .collect();
            // The pinned run may hold several matrix cells: prefer the one of this series, then
            // the same job and step, then the first.
            let chosen = with_metric
                .iter()
                .find(|r| r.series_key == key)
                .or_else(|| {
                    with_metric
                        .iter()
                        .find(|r| r.job == current.job && r.step == current.step)
                })
                .or_else(|| with_metric.first())
                .ok_or_else(|| CompareError::MetricMissing {
                    name: name.clone(),
                    run: pin.run_id.clone(),
                    metric: metric.to_string(),
                })?;
            Ok(Some(Baseline {
                description: format!(
                    "pinned baseline `{name}` (run `{}`, {} samples)",
                    pin.run_id,
                    samples_of(chosen).len()
                ),
                data: BaselineData::Samples(samples_of(chosen)),
                differences: current.identity.differences(&chosen.fingerprint.identity),
            }))
        }
    }
}
