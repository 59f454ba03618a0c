//! Resolving a [`BaselineSpec`] against the store into the data a comparison needs.

use serde::{Deserialize, Serialize};

use super::{BaselineSpec, CompareError};
use crate::store::{FieldDiff, Identity, ResultFilter, ResultStore, SeriesKey, StoredResult};

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
    /// The Slurm node it ran on, if any: a baseline from another node is said to be.
    pub node: Option<&'a str>,
    /// The server's own version (`vllm 0.32.0`), if known: a baseline whose server said
    /// another is said to be.
    pub server_version: Option<&'a str>,
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
    let ask = Asking {
        store,
        current,
        metric,
        key: current.identity.series_key(),
        allow_incomparable,
    };
    match spec {
        BaselineSpec::Fixed { value, unit: given } => {
            fixed(*value, given.as_deref(), metric, unit).map(Some)
        }
        BaselineSpec::Previous => ask.previous(),
        BaselineSpec::Window(n) => ask.window(*n),
        BaselineSpec::Pinned(name) => ask.pinned(name).map(Some),
    }
}

/// A number the user gave, in the metric's unit.
fn fixed(
    value: f64,
    given: Option<&str>,
    metric: &str,
    unit: &str,
) -> Result<Baseline, CompareError> {
    if let Some(given) = given.filter(|g| *g != unit) {
        return Err(CompareError::UnitMismatch {
            input: format!("{value} {given}"),
            given: given.to_string(),
            metric: metric.to_string(),
            unit: unit.to_string(),
        });
    }
    let shown = super::value_text::format_value(value, unit);
    Ok(Baseline {
        description: format!("the fixed value {shown}"),
        data: BaselineData::Fixed(value),
        differences: Vec::new(),
    })
}

/// A baseline looked up in the store for one metric of the current result.
struct Asking<'a> {
    store: &'a ResultStore,
    current: &'a CurrentRun<'a>,
    metric: &'a str,
    /// The current result's series.
    key: SeriesKey,
    allow_incomparable: bool,
}

impl Asking<'_> {
    /// Past results with the metric: of the same series, or with `allow_incomparable` of the
    /// same workflow, job and step; never of the current run.
    fn filter(&self, limit: usize) -> ResultFilter {
        let loose = self.allow_incomparable;
        ResultFilter {
            metric: self.metric.to_string(),
            series_key: (!loose).then(|| self.key.clone()),
            workflow: loose.then(|| self.current.workflow.to_string()),
            job: loose.then(|| self.current.job.to_string()),
            step: loose.then(|| self.current.step.to_string()),
            git_ref: None,
            exclude_run: Some(self.current.run_id.to_string()),
            limit,
        }
    }

    fn samples_of(&self, r: &StoredResult) -> Vec<f64> {
        r.metric(self.metric)
            .map(|m| m.samples.clone())
            .unwrap_or_default()
    }

    fn differences(&self, r: &StoredResult) -> Vec<FieldDiff> {
        self.current.identity.differences(&r.fingerprint.identity)
    }

    /// `; it ran on node gpu1, this on gpu3` when the two ran on different Slurm nodes: the
    /// comparison stands (nodes of one type are alike), and says so.
    fn node_note(&self, r: &StoredResult) -> String {
        let theirs = r.fingerprint.info.slurm.as_ref().map(|p| p.node.as_str());
        match (theirs, self.current.node) {
            (Some(theirs), Some(ours)) if theirs != ours => {
                format!("; it ran on node {theirs}, this on {ours}")
            }
            _ => String::new(),
        }
    }

    /// `; server version differs: baseline vllm 0.31.0, this run vllm 0.32.0` when the
    /// baseline's server said another version than the current one (both known). The image
    /// digest usually differs too and makes the runs incomparable; this says what changed in
    /// it, and with `allow-incomparable` or a pinned baseline it is the news. For a window,
    /// how many of its runs had each other version.
    fn version_note(&self, baseline: &[&StoredResult]) -> String {
        let Some(ours) = self.current.server_version else {
            return String::new();
        };
        let mut others: Vec<(&str, usize)> = Vec::new();
        for r in baseline {
            let Some(theirs) = r.fingerprint.info.server_version.as_deref() else {
                continue;
            };
            if theirs == ours {
                continue;
            }
            match others.iter_mut().find(|(v, _)| *v == theirs) {
                Some((_, n)) => *n += 1,
                None => others.push((theirs, 1)),
            }
        }
        if others.is_empty() {
            return String::new();
        }
        let theirs: Vec<String> = others
            .iter()
            .map(|(v, n)| {
                if baseline.len() > 1 {
                    format!("{v} in {n} of {} runs", baseline.len())
                } else {
                    (*v).to_string()
                }
            })
            .collect();
        format!(
            "; server version differs: baseline {}, this run {ours}",
            theirs.join(", ")
        )
    }

    fn previous(&self) -> Result<Option<Baseline>, CompareError> {
        let found = self.store.find(&self.filter(1))?;
        Ok(found.first().map(|r| {
            let samples = self.samples_of(r);
            Baseline {
                // With `allow-incomparable` the run may be of another series: "comparable"
                // would then claim what the differences below deny.
                description: if r.series_key == self.key {
                    format!(
                        "the previous comparable run `{}` ({} samples{}{})",
                        r.run_id,
                        samples.len(),
                        self.node_note(r),
                        self.version_note(&[r])
                    )
                } else {
                    format!(
                        "the previous run `{}` ({} samples; from another series: allow-incomparable{})",
                        r.run_id,
                        samples.len(),
                        self.version_note(&[r])
                    )
                },
                data: BaselineData::Samples(samples),
                differences: self.differences(r),
            }
        }))
    }

    /// The last `n` results on the current branch.
    fn window(&self, n: usize) -> Result<Option<Baseline>, CompareError> {
        let mut f = self.filter(n);
        f.git_ref = self.current.git_ref.map(str::to_string);
        let found = self.store.find(&f)?;
        if found.is_empty() {
            return Ok(None);
        }
        let mut differences: Vec<FieldDiff> = Vec::new();
        for r in &found {
            for d in self.differences(r) {
                if !differences.iter().any(|x| x.field == d.field) {
                    differences.push(d);
                }
            }
        }
        Ok(Some(Baseline {
            description: self.window_description(&found, n),
            data: BaselineData::Window(found.iter().map(|r| self.samples_of(r)).collect()),
            differences,
        }))
    }

    /// `a window of the last 5 comparable runs on `main``, saying when fewer were found
    /// than asked for and how many are of another series.
    fn window_description(&self, found: &[StoredResult], n: usize) -> String {
        let on = self
            .current
            .git_ref
            .map(|b| format!(" on `{b}`"))
            .unwrap_or_default();
        let asked = if found.len() < n {
            format!(", of {n} asked for")
        } else {
            String::new()
        };
        let other = found.iter().filter(|r| r.series_key != self.key).count();
        let versions = self.version_note(&found.iter().collect::<Vec<_>>());
        let versions = versions.trim_start_matches("; ");
        if other == 0 {
            let versions = if versions.is_empty() {
                String::new()
            } else {
                format!(" ({versions})")
            };
            format!(
                "a window of the last {} comparable runs{on}{asked}{versions}",
                found.len()
            )
        } else {
            let versions = if versions.is_empty() {
                String::new()
            } else {
                format!("; {versions}")
            };
            format!(
                "a window of the last {} runs{on}{asked} ({other} from another series: allow-incomparable{versions})",
                found.len()
            )
        }
    }

    /// The result of the run pinned as `name` that has the metric: of this series, else of
    /// the same job and step, else the first (a pinned run may hold several matrix cells).
    fn pinned(&self, name: &str) -> Result<Baseline, CompareError> {
        let Some(pin) = self.store.baseline(name, self.metric)? else {
            return Err(self.unknown_baseline(name)?);
        };
        let results = self.store.run_results(&pin.run_id)?;
        let with_metric: Vec<&StoredResult> = results
            .iter()
            .filter(|r| r.metric(self.metric).is_some_and(|m| !m.samples.is_empty()))
            .collect();
        let current = self.current;
        let chosen = with_metric
            .iter()
            .find(|r| r.series_key == self.key)
            .or_else(|| {
                with_metric
                    .iter()
                    .find(|r| r.job == current.job && r.step == current.step)
            })
            .or_else(|| with_metric.first())
            .ok_or_else(|| CompareError::MetricMissing {
                name: name.to_string(),
                run: pin.run_id.clone(),
                metric: self.metric.to_string(),
            })?;
        let samples = self.samples_of(chosen);
        Ok(Baseline {
            description: format!(
                "pinned baseline `{name}` (run `{}`, {} samples{}{})",
                pin.run_id,
                samples.len(),
                self.node_note(chosen),
                self.version_note(&[chosen])
            ),
            data: BaselineData::Samples(samples),
            differences: self.differences(chosen),
        })
    }

    /// No baseline is pinned as `name`: the nearest pinned name, or how to pin one.
    fn unknown_baseline(&self, name: &str) -> Result<CompareError, CompareError> {
        let names: Vec<String> = self
            .store
            .baselines()?
            .into_iter()
            .map(|b| b.name)
            .collect();
        let suggestion = crate::diag::did_you_mean(name, &names).or_else(|| {
            Some(if names.is_empty() {
                "pin one with `gpuflow baseline set NAME RUN`".to_string()
            } else {
                format!("pinned: {}", crate::diag::join_quoted(&names, "and"))
            })
        });
        Ok(CompareError::UnknownBaseline {
            name: name.to_string(),
            suggestion,
        })
    }
}
