//! What a built-in step knows about where it runs beyond its inputs: its place in the job,
//! the matrix cell, the job's earlier recorded results and its cancellation. Built by the job
//! executor for each built-in step; the steps that do not need it ignore it.

use std::collections::BTreeMap;

use tokio_util::sync::CancellationToken;

/// A benchmark result this job run wrote to the results store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The step's `id`, when it has one (`compare-to-baseline`'s `from:` names it).
    pub step_id: Option<String>,
    /// The step's position in the job (`3`, `3.1` inside an action), as events name it.
    pub key: String,
    /// The step's label, as stored in the result.
    pub step: String,
    /// The store's id of the result.
    pub result_id: i64,
    /// What each stored metric is, in words, where the benchmark knows
    /// (`output_tok_s` → `decode tok/s, per-request median`): comparisons name it.
    pub meanings: BTreeMap<String, String>,
}

/// The GPUs a step runs with: the host's inventory and the job's lease.
#[derive(Clone, Debug)]
pub struct StepGpus {
    pub inventory: std::sync::Arc<crate::gpu::Inventory>,
    /// `(index, uuid)` leased to the job; empty when it leased none.
    pub leased: Vec<(u32, String)>,
}

/// One built-in step's surroundings.
pub struct StepContext<'a> {
    /// Position in the job (`3`, `3.1` inside an action), as events name it.
    pub key: &'a str,
    /// The step's `id`, when it has one.
    pub step_id: Option<&'a str>,
    /// The step's display name.
    pub label: &'a str,
    /// The job's key under `jobs:`.
    pub job_id: &'a str,
    /// The matrix cell's values as text.
    pub matrix: BTreeMap<String, String>,
    /// The step's environment (`env:` of the workflow, job and step).
    pub env: &'a indexmap::IndexMap<String, String>,
    /// Results earlier steps of this job run recorded, oldest first.
    pub recorded: &'a mut Vec<Recorded>,
    pub cancel: CancellationToken,
    /// The GPUs of the job's host and those leased to the job; `None` when the run was not
    /// told what the host has.
    pub gpus: Option<StepGpus>,
    /// The shell-text inputs as the shell reads them, with the variables holding their
    /// `${{ }}` values ([`crate::engine::step_inputs::shell_inputs`]); empty where the step has none.
    pub shell: indexmap::IndexMap<String, crate::engine::script::RenderedScript>,
    /// The inputs of the composite action the step is in, as text (empty at the job's level),
    /// so a message about a value can name the input the workflow gave it as (`models`).
    pub action_inputs: indexmap::IndexMap<String, String>,
    /// Outputs a step sets before it fails (a `compare-to-baseline` that found a regression
    /// still says `verdict`), so `if: always()` steps and job outputs can read them.
    pub outputs_on_failure: indexmap::IndexMap<String, String>,
    /// The share of its full length a search's early round gives this step (`0.25`: a
    /// quarter of its requests or duration); `None`: full length. Only `benchmark` reads it.
    pub budget: Option<f64>,
}
