//! The whole `compare-to-baseline` step as one call: the step's inputs and the result its
//! `benchmark` step just recorded in, every metric's comparison and pass/fail out. The engine's
//! step calls this; it holds no state of its own.

use super::{
    BaselineSpec, CompareError, CompareOptions, Comparison, CurrentRun, FailOn, MetricInput,
    StepOutcome, Verdict, compare, resolve, step_outcome,
};
use crate::store::{Direction, ResultStore, StoredResult};

/// The step's evaluated inputs (docs/steps/compare-to-baseline.md).
#[derive(Clone, Debug, PartialEq)]
pub struct StepInputs {
    /// `metric` or `metrics`: at least one.
    pub metrics: Vec<String>,
    /// `baseline`: a pinned name, `previous`, `window` or a number.
    pub baseline: String,
    /// `window`: how many past runs `baseline: window` uses.
    pub window: usize,
    /// `tolerance` as a fraction (0.05 for `5%`).
    pub tolerance: f64,
    /// `direction`: overrides the recorded one for every metric compared.
    pub direction: Option<Direction>,
    pub fail_on: FailOn,
    pub allow_incomparable: bool,
}

impl Default for StepInputs {
    fn default() -> Self {
        Self {
            metrics: Vec::new(),
            baseline: "window".into(),
            window: 10,
            tolerance: 0.05,
            direction: None,
            fail_on: FailOn::Regression,
            allow_incomparable: false,
        }
    }
}

/// Every metric's comparison and whether the step passes.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    pub comparisons: Vec<Comparison>,
    pub outcome: StepOutcome,
}

impl StepReport {
    /// The verdict that speaks for the step when several metrics were compared: the most
    /// alarming one (regression, then incomparable, inconclusive, no-baseline, improvement,
    /// unchanged).
    pub fn overall_verdict(&self) -> Option<Verdict> {
        let rank = |v: Verdict| match v {
            Verdict::Regression => 0,
            Verdict::Incomparable => 1,
            Verdict::Inconclusive => 2,
            Verdict::NoBaseline => 3,
            Verdict::Improvement => 4,
            Verdict::Unchanged => 5,
        };
        self.comparisons
            .iter()
            .map(|c| c.verdict)
            .min_by_key(|v| rank(*v))
    }
}

/// Compares the metrics of `current` (already recorded, so it is excluded from its own
/// baseline) as `inputs` ask.
pub fn compare_result(
    store: &ResultStore,
    current: &StoredResult,
    inputs: &StepInputs,
) -> Result<StepReport, CompareError> {
    let spec = BaselineSpec::parse(&inputs.baseline, inputs.window)?;
    let opts = CompareOptions {
        tolerance: inputs.tolerance,
        allow_incomparable: inputs.allow_incomparable,
        ..CompareOptions::default()
    };
    let run = CurrentRun {
        run_id: &current.run_id,
        workflow: &current.workflow,
        job: &current.job,
        step: &current.step,
        git_ref: current.git.ref_name.as_deref(),
        identity: &current.fingerprint.identity,
        node: current
            .fingerprint
            .info
            .slurm
            .as_ref()
            .map(|p| p.node.as_str()),
        server_version: current.fingerprint.info.server_version.as_deref(),
    };
    let mut comparisons = Vec::with_capacity(inputs.metrics.len());
    for name in &inputs.metrics {
        let Some(metric) = current.metric(name) else {
            let names: Vec<&str> = current.metrics.iter().map(|m| m.name.as_str()).collect();
            return Err(CompareError::NotMeasured {
                metric: name.clone(),
                step: current.step.clone(),
                suggestion: crate::diag::did_you_mean(name, &names).or_else(|| {
                    Some(format!(
                        "it measured {}",
                        crate::diag::join_quoted(&names, "and")
                    ))
                }),
            });
        };
        let baseline = resolve(
            store,
            &spec,
            &run,
            name,
            &metric.unit,
            inputs.allow_incomparable,
        )?;
        let input = MetricInput {
            name,
            unit: &metric.unit,
            direction: inputs.direction.unwrap_or(metric.direction),
            samples: &metric.samples,
        };
        comparisons.push(compare(&input, baseline.as_ref(), &opts));
    }
    let outcome = step_outcome(inputs.fail_on, &comparisons);
    Ok(StepReport {
        comparisons,
        outcome,
    })
}
