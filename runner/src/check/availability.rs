//! Which contexts and functions an expression may use, by where it is written — GitHub's
//! "context availability" table, plus gpuflow's own `gpuflow` context (an alias of `github`
//! carrying gpuflow-specific run data). Checking this statically turns a run-time surprise
//! ("`matrix` is not defined here") into a validation error with a place and a fix.

/// Where in a workflow or action an expression is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    RunName,
    WorkflowEnv,
    WorkflowConcurrency,
    JobIf,
    JobName,
    /// `runs-on`, `gpus`, `timeout-minutes`, `continue-on-error`, `container`, `services`.
    JobSetting,
    JobEnv,
    JobStrategy,
    JobOutputs,
    /// A step's `if`.
    StepIf,
    /// A step's `run`, `with`, `env`, `name`, `working-directory`, timeouts.
    Step,
    /// A composite action's step.
    ActionStep,
    ActionStepIf,
    /// A composite action's `outputs.<id>.value`.
    ActionOutput,
}

impl Place {
    /// The contexts GitHub makes available here, in the order its docs list them.
    pub fn contexts(self) -> &'static [&'static str] {
        use Place::*;
        match self {
            RunName | WorkflowConcurrency => &["github", "gpuflow", "inputs", "vars"],
            WorkflowEnv => &["github", "gpuflow", "secrets", "inputs", "vars"],
            JobIf => &["github", "gpuflow", "needs", "vars", "inputs"],
            JobStrategy => &["github", "gpuflow", "needs", "vars", "inputs"],
            JobName | JobSetting => &[
                "github", "gpuflow", "needs", "strategy", "matrix", "vars", "inputs",
            ],
            JobEnv => &[
                "github", "gpuflow", "needs", "strategy", "matrix", "vars", "secrets", "inputs",
            ],
            JobOutputs | StepIf | Step => &[
                "github", "gpuflow", "needs", "strategy", "matrix", "job", "runner", "env", "vars",
                "secrets", "steps", "inputs",
            ],
            ActionStep | ActionStepIf | ActionOutput => &[
                "github", "gpuflow", "needs", "strategy", "matrix", "job", "runner", "env", "vars",
                "steps", "inputs",
            ],
        }
    }

    /// Status functions (`success()`, `failure()`, `always()`, `cancelled()`) only mean
    /// something in a condition.
    pub fn allows_status_functions(self) -> bool {
        matches!(self, Place::JobIf | Place::StepIf | Place::ActionStepIf)
    }

    /// `hashFiles` reads the work tree, which exists only once a job runs its steps.
    pub fn allows_hash_files(self) -> bool {
        matches!(
            self,
            Place::StepIf | Place::Step | Place::ActionStep | Place::ActionStepIf
        )
    }

    /// How the place is named in messages: "a job's `if`".
    pub fn describe(self) -> &'static str {
        use Place::*;
        match self {
            RunName => "`run-name`",
            WorkflowEnv => "the workflow's `env`",
            WorkflowConcurrency => "the workflow's `concurrency`",
            JobIf => "a job's `if`",
            JobName => "a job's `name`",
            JobSetting => "a job setting",
            JobEnv => "a job's `env`",
            JobStrategy => "a job's `strategy`",
            JobOutputs => "a job's `outputs`",
            StepIf => "a step's `if`",
            Step => "a step",
            ActionStep => "an action's step",
            ActionStepIf => "an action step's `if`",
            ActionOutput => "an action's `outputs`",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_is_not_available_in_a_job_condition() {
        // GitHub evaluates a job's `if` before expanding its matrix.
        assert!(!Place::JobIf.contexts().contains(&"matrix"));
        assert!(Place::JobName.contexts().contains(&"matrix"));
    }

    #[test]
    fn steps_and_secrets_where_github_allows_them() {
        assert!(Place::Step.contexts().contains(&"steps"));
        assert!(!Place::JobEnv.contexts().contains(&"steps"));
        assert!(Place::WorkflowEnv.contexts().contains(&"secrets"));
        assert!(!Place::ActionStep.contexts().contains(&"secrets"));
    }
}
