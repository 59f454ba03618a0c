//! Composite actions (`uses: ./actions/NAME`, or a remote `owner/repo/NAME@ref` the loader
//! fetched and pinned): the action's steps run as a nested level of
//! the job, with the action's `inputs` (defaults, required) and its `outputs` mapped back to
//! the step that used it. Errors inside name the using step and the action file's line.

use indexmap::IndexMap;

use super::job_run::{JobRun, Scope, StepResult};
use crate::engine::evaluate::{eval_string, eval_value};
use crate::events::StepOutcome;
use crate::expr::{JobStatus, Value};
use crate::workflow::model::Step;

impl JobRun {
    pub(super) async fn run_action(
        &mut self,
        step: &Step,
        path: &str,
        key: &str,
        scope: &Scope,
        env: &IndexMap<String, String>,
    ) -> Result<StepResult, String> {
        let shared = self.shared.clone();
        let Some(action) = shared.wf.actions.get(path) else {
            return Err(format!("the action `{path}` was not loaded"));
        };
        let ctx = self.ctx(scope, Some(env));
        let caller = format!(
            "step `{}` ({}, uses `{path}`)",
            self.step_label(step, scope),
            scope.file.location(step.span)
        );
        let mut inputs = IndexMap::new();
        for (name, input) in &action.inputs {
            let value = match (step.with.get(name), &input.default) {
                (Some(v), _) => eval_value(v, &ctx, &scope.file)?.to_expr_string(),
                (None, Some(d)) => eval_string(d, &ctx, &action.file)?,
                (None, None) if input.required => {
                    return Err(format!(
                        "the action's input `{name}` is required ({}); give it under `with:`",
                        action.file.location(input.name.span)
                    ));
                }
                (None, None) => String::new(),
            };
            inputs.insert(name.clone(), Value::String(value));
        }
        let mut inner = Scope {
            steps: IndexMap::new(),
            inputs: Some(Value::Object(inputs)),
            prefix: format!("{key}."),
            file: action.file.clone(),
            caller: Some(caller),
        };
        let before = self.status;
        self.run_steps(&action.runs.steps, &mut inner).await;
        // Inside the action a failure changes the status its later steps see; outside, only
        // the using step's conclusion counts (its `continue-on-error` may forgive it).
        let failed = self.status == JobStatus::Failure && before == JobStatus::Success;
        if self.status != JobStatus::Cancelled {
            self.status = before;
        }
        let mut outputs = IndexMap::new();
        let ctx = self.ctx(&inner, Some(env));
        for (name, output) in &action.outputs {
            let v = eval_string(&output.value, &ctx, &action.file)
                .map_err(|m| format!("{}: {m}", inner.caller.as_deref().unwrap_or_default()))?;
            outputs.insert(name.clone(), v);
        }
        Ok(StepResult {
            outcome: if self.status == JobStatus::Cancelled {
                StepOutcome::Cancelled
            } else if failed {
                StepOutcome::Failure
            } else {
                StepOutcome::Success
            },
            outputs,
        })
    }
}
