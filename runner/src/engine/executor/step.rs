//! One step's life in a job: whether it runs (`if:`), the token that stops it (a fresh one
//! for a step after cancellation), its `timeout-minutes`, a panic inside it contained, and
//! its conclusion (`continue-on-error`) written into the job's status and `steps` context.

use std::time::Instant;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use super::job_run::{JobRun, Scope, StepResult};
use super::timeout::Timeout;
use crate::diag::SourceFile;
use crate::engine::evaluate::{eval_string, expr_message, number, object};
use crate::events::{EventKind, StepOutcome};
use crate::expr::{JobStatus, MapContext, Value, parse_condition, parse_template};
use crate::workflow::model::{BoolOrExpr, Step};

impl JobRun {
    /// Runs `steps` in order; each step's result goes into `scope.steps` and the job status.
    /// Boxed: a composite action's steps run through here too.
    pub(super) fn run_steps<'a>(
        &'a mut self,
        steps: &'a [Step],
        scope: &'a mut Scope,
    ) -> futures_util::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            for (i, step) in steps.iter().enumerate() {
                let key = format!("{}{}", scope.prefix, i + 1);
                self.run_step(step, &key, scope).await;
            }
        })
    }

    #[tracing::instrument(name = "step", skip_all, fields(step = key, id = step.id.as_ref().map(|i| i.value.as_str())))]
    async fn run_step(&mut self, step: &Step, key: &str, scope: &mut Scope) {
        if self.cancel.is_cancelled() {
            self.status = JobStatus::Cancelled;
        }
        let file = scope.file.clone();
        let label = self.step_label(step, scope);
        let started = Instant::now();
        let ctx = self.ctx(scope, None);
        let run_it = match self.condition_holds(step, &ctx, &file) {
            Ok(run_it) => run_it,
            Err(message) => {
                self.tell_started(key, &label);
                self.say(
                    Some(key),
                    &self.in_caller(scope, &format!("`if` failed: {message}")),
                );
                self.finish_step(step, key, &label, scope, StepResult::failed(), started);
                return;
            }
        };
        if !run_it {
            let skipped = StepResult {
                outcome: StepOutcome::Skipped,
                outputs: IndexMap::new(),
            };
            self.finish_step(step, key, &label, scope, skipped, started);
            return;
        }
        self.tell_started(key, &label);
        let token = self.step_token();
        let timeout = match &step.timeout_minutes {
            None => None,
            Some(n) => match number(n, &ctx, &file) {
                Ok(minutes) => Some(Timeout::start(minutes, token.clone())),
                Err(message) => {
                    self.say(Some(key), &message);
                    self.finish_step(step, key, &label, scope, StepResult::failed(), started);
                    return;
                }
            },
        };
        let mut result = match self.execute_contained(step, key, scope, token).await {
            Ok(r) => r,
            Err(message) => {
                let message = self.in_caller(scope, &message);
                self.fail_with(key, &message);
                StepResult::failed()
            }
        };
        if let Some(timeout) = timeout {
            let message = timeout.message("step");
            if timeout.stop() {
                self.fail_with(key, &message);
                result.outcome = StepOutcome::Failure;
            }
        }
        if result.outcome == StepOutcome::Cancelled && !self.cancel.is_cancelled() {
            // Stopped by its own clean-up limit.
            result.outcome = StepOutcome::Failure;
        }
        self.finish_step(step, key, &label, scope, result, started);
    }

    /// Whether the step's `if:` holds (without one: whether the job still succeeds).
    fn condition_holds(
        &self,
        step: &Step,
        ctx: &MapContext,
        file: &SourceFile,
    ) -> Result<bool, String> {
        match &step.condition {
            None => Ok(self.status == JobStatus::Success),
            Some(cond) => parse_condition(&cond.value)
                .and_then(|c| c.evaluate(ctx))
                .map_err(|e| expr_message(cond, &e, file)),
        }
    }

    fn tell_started(&self, key: &str, label: &str) {
        self.shared.emit(EventKind::StepStarted {
            job: self.jref.clone(),
            step: key.into(),
            name: label.into(),
        });
    }

    /// The token that stops a starting step: a child of the job's, or after cancellation a
    /// fresh one, fired by the clean-up limit or a forced stop.
    fn step_token(&self) -> CancellationToken {
        // A step running after cancellation (an `always()` step) must not be stopped by the
        // token that already fired.
        if !self.cancel.is_cancelled() {
            return self.cancel.child_token();
        }
        let t = CancellationToken::new();
        let (t2, limit) = (t.clone(), self.shared.opts.cleanup_timeout);
        let force = self.shared.opts.force.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(limit) => {}
                () = force.cancelled() => {}
            }
            t2.cancel();
        });
        t
    }

    /// Runs the step, a panic inside it turned into its failure.
    async fn execute_contained(
        &mut self,
        step: &Step,
        key: &str,
        scope: &mut Scope,
        token: CancellationToken,
    ) -> Result<StepResult, String> {
        use futures_util::FutureExt;
        // A panic inside a step (a bug in gpuflow) fails that step with its message; the job
        // then ends as after any failure: `always()` steps run and its containers are removed.
        std::panic::AssertUnwindSafe(self.execute(step, key, scope, token))
            .catch_unwind()
            .await
            .unwrap_or_else(|payload| {
                Err(format!(
                    "gpuflow panicked in this step: {} (help: this is a bug in gpuflow; please report it with this message and the workflow)",
                    crate::engine::panic_text::panic_text(payload.as_ref())
                ))
            })
    }

    fn finish_step(
        &mut self,
        step: &Step,
        key: &str,
        label: &str,
        scope: &mut Scope,
        result: StepResult,
        started: Instant,
    ) {
        let continue_on_error = match &step.continue_on_error {
            None => false,
            Some(BoolOrExpr::Bool(b)) => *b,
            Some(BoolOrExpr::Expr(e)) => {
                let ctx = self.ctx(scope, None);
                parse_template(&e.value)
                    .and_then(|t| t.evaluate(&ctx))
                    .is_ok_and(|v| v.is_truthy())
            }
        };
        let conclusion = match result.outcome {
            StepOutcome::Failure if continue_on_error => StepOutcome::Success,
            other => other,
        };
        match conclusion {
            StepOutcome::Failure if self.status == JobStatus::Success => {
                self.status = JobStatus::Failure;
            }
            StepOutcome::Cancelled => self.status = JobStatus::Cancelled,
            _ => {}
        }
        if scope.caller.is_none() {
            self.step_outputs
                .insert(key.to_string(), result.outputs.clone());
        }
        if let Some(id) = &step.id {
            let outputs = result
                .outputs
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            scope.steps.insert(
                id.value.clone(),
                object([
                    ("outputs", Value::Object(outputs)),
                    ("outcome", Value::String(result.outcome.as_str().into())),
                    ("conclusion", Value::String(conclusion.as_str().into())),
                ]),
            );
        }
        self.shared.emit(EventKind::StepFinished {
            job: self.jref.clone(),
            step: key.into(),
            name: label.into(),
            outcome: result.outcome,
            conclusion,
            duration: started.elapsed(),
            outputs: result.outputs.clone(),
        });
    }

    pub(super) fn step_label(&self, step: &Step, scope: &Scope) -> String {
        if let Some(name) = &step.name {
            let ctx = self.ctx(scope, None);
            return parse_template(&name.value)
                .and_then(|t| t.evaluate(&ctx))
                .map_or_else(|_| name.value.clone(), |v| v.to_expr_string());
        }
        if let Some(id) = &step.id {
            return id.value.clone();
        }
        if let Some(uses) = &step.uses {
            return uses.value.to_string();
        }
        let first = step
            .run
            .as_ref()
            .and_then(|r| r.value.lines().find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .trim();
        format!("Run {first}")
    }

    /// The step's environment: the job's, then the step's `env:` evaluated over it.
    pub(super) fn step_env(
        &self,
        step: &Step,
        scope: &Scope,
    ) -> Result<IndexMap<String, String>, String> {
        let mut env = self.env.clone();
        for (k, v) in &step.env {
            let ctx = self.ctx(scope, Some(&env));
            let value = eval_string(v, &ctx, &scope.file)?;
            env.insert(k.clone(), value);
        }
        Ok(env)
    }
}
