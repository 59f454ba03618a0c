//! What a step is and how it runs: a `run:` script ([`super::script_step`]), a built-in step
//! (asked through the registry, given what it needs of the job), or a composite action
//! ([`super::composite`]).

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use super::job_run::{JobRun, Scope, StepResult};
use crate::engine::step_inputs;
use crate::events::StepOutcome;
use crate::expr::Value;
use crate::steps::{self, Builtin, EngineUse, StepCall, StepContext, StepGpus};
use crate::workflow::model::{Step, Uses};

impl JobRun {
    pub(super) async fn execute(
        &mut self,
        step: &Step,
        key: &str,
        scope: &mut Scope,
        cancel: CancellationToken,
    ) -> Result<StepResult, String> {
        let env = self.step_env(step, scope)?;
        // Tests reach the panic containment above through a real panic in a real run; debug
        // builds only, so no release binary can be made to panic on purpose.
        #[cfg(debug_assertions)]
        if std::env::var("GPUFLOW_TEST_PANIC_IN_STEP").is_ok_and(|k| k == key) {
            panic!("a panic asked for by GPUFLOW_TEST_PANIC_IN_STEP in step {key}");
        }
        if let Some(source) = &step.run {
            return self.run_script(step, source, key, scope, env, cancel).await;
        }
        let Some(uses) = &step.uses else {
            return Err("the step has neither `run` nor `uses`".into());
        };
        match &uses.value {
            Uses::Builtin(name) => self.run_builtin(name, step, key, scope, &env, cancel).await,
            Uses::Local(path) => self.run_action(step, path, key, scope, &env).await,
            remote @ Uses::Remote { .. } => {
                self.run_action(step, &remote.to_string(), key, scope, &env)
                    .await
            }
            other => Err(format!(
                "`{other}` steps cannot run (refused before the run)"
            )),
        }
    }

    /// Runs the built-in step `name` with its inputs evaluated, the engine and GPUs it asks
    /// for, and the job's recorded results.
    async fn run_builtin(
        &mut self,
        name: &str,
        step: &Step,
        key: &str,
        scope: &Scope,
        env: &IndexMap<String, String>,
        cancel: CancellationToken,
    ) -> Result<StepResult, String> {
        // Validation refuses an unknown name before the run.
        let builtin =
            steps::registered(name).ok_or_else(|| format!("`{name}` is not a built-in step"))?;
        let ctx = self.ctx(scope, Some(env));
        let inputs = step_inputs::inputs(name, step, &ctx, &scope.file)?;
        let shell = step_inputs::shell_inputs(name, step, &ctx, &scope.file)?;
        let host = self.step_host();
        let jref = self.jref.clone();
        let job_gpus = self.job_gpus();
        let step_id = step.id.as_ref().map(|i| i.value.clone());
        let label = self.step_label(step, scope);
        let matrix = self.matrix_text();
        let job_id = self.job_id.clone();
        // Only a step that needs the engine connects to it: a GPU machine without Docker still
        // runs the others. It connects before the job's recorded results are lent to the
        // step, so a failed connection loses none of them for later steps.
        if builtin.engine() == EngineUse::Required {
            self.containers().await?;
        }
        let mut recorded = std::mem::take(&mut self.recorded);
        let step_gpus = self.step_gpus(builtin).await;
        let containers = self.containers.as_mut();
        let mut context = StepContext {
            key,
            step_id: step_id.as_deref(),
            label: &label,
            job_id: &job_id,
            matrix,
            env,
            recorded: &mut recorded,
            cancel: cancel.clone(),
            gpus: step_gpus,
            shell,
            action_inputs: action_inputs_text(scope),
            outputs_on_failure: IndexMap::new(),
            budget: self
                .budget
                .as_ref()
                .filter(|b| b.step_key == key)
                .map(|b| b.fraction),
        };
        let outputs = builtin
            .run(StepCall {
                name: builtin.spec().name,
                inputs: &inputs,
                containers,
                host: &host,
                job: &jref,
                job_gpus,
                step: &mut context,
            })
            .await;
        let outputs_on_failure = std::mem::take(&mut context.outputs_on_failure);
        drop(context);
        self.recorded = recorded;
        let outputs = outputs
            .map_err(|e| step_inputs::error_text(&e, &step_inputs::places(step, &scope.file)));
        self.builtin_result(outputs, outputs_on_failure, key, scope, &cancel)
    }

    /// What a built-in is told of the GPUs. Asking for the inventory may probe a remote host,
    /// so only the steps that read the GPUs (checks, telemetry, the fingerprint) are told.
    async fn step_gpus(&self, builtin: &dyn Builtin) -> Option<StepGpus> {
        match self.shared.engines.gpus_for(&self.jref) {
            Some(gpus) if builtin.reads_gpus() => Some(StepGpus {
                inventory: gpus.inventory().await,
                leased: self
                    .gpus
                    .as_ref()
                    .map(|g| g.devices.clone())
                    .unwrap_or_default(),
            }),
            _ => None,
        }
    }

    /// A built-in's answer as the step's result.
    fn builtin_result(
        &mut self,
        outputs: Result<IndexMap<String, String>, String>,
        outputs_on_failure: IndexMap<String, String>,
        key: &str,
        scope: &Scope,
        cancel: &CancellationToken,
    ) -> Result<StepResult, String> {
        match outputs {
            Ok(outputs) => Ok(StepResult {
                outcome: StepOutcome::Success,
                outputs,
            }),
            // Stopped (Ctrl-C, fail-fast, a timeout), as a script would be: said, and
            // cancelled rather than failed; a timeout turns it into a failure later.
            Err(message) if cancel.is_cancelled() => {
                self.say(Some(key), &message);
                Ok(StepResult {
                    outcome: StepOutcome::Cancelled,
                    outputs: IndexMap::new(),
                })
            }
            // A step that says something before failing (a regression's `verdict`)
            // keeps those outputs for `if: always()` steps and job outputs.
            Err(message) if !outputs_on_failure.is_empty() => {
                let message = self.in_caller(scope, &message);
                self.fail_with(key, &message);
                Ok(StepResult {
                    outcome: StepOutcome::Failure,
                    outputs: outputs_on_failure,
                })
            }
            Err(message) => Err(message),
        }
    }
}

/// Inside a composite action: its inputs, so a message can name the one the workflow gave a
/// value as.
fn action_inputs_text(scope: &Scope) -> IndexMap<String, String> {
    match &scope.inputs {
        Some(Value::Object(given)) => given
            .iter()
            .map(|(k, v)| (k.clone(), v.to_expr_string()))
            .collect(),
        _ => IndexMap::new(),
    }
}
