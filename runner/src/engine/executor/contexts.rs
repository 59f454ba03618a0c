//! A job run's contexts: those known at its start (`matrix`, `strategy`, `needs`, `runner`,
//! `job`, the run's `github`), its `env`, the evaluation context a step sees, the variables
//! every script gets, and the job's `outputs` at its end.

use indexmap::IndexMap;

use super::job_run::{JobRun, Scope};
use crate::engine::evaluate::{eval_string, number, object};
use crate::events::EventKind;
use crate::expr::{JobStatus, MapContext, Value};
use crate::plan::PlannedJob;
use crate::workflow::model::Job;

/// GitHub's default job timeout.
const DEFAULT_JOB_MINUTES: f64 = 360.0;

impl JobRun {
    /// Fills the contexts known at job start; returns the job's timeout in minutes.
    pub(super) fn setup(
        &mut self,
        planned: &PlannedJob,
        job: &Job,
        needs: Value,
    ) -> Result<f64, String> {
        self.fill_start_contexts(planned, needs);
        let shared = self.shared.clone();
        let file = shared.wf.file.clone();
        for (name, value) in &shared.wf.env {
            let ctx = self.ctx_with_env(None);
            let v = eval_string(value, &ctx, &file)?;
            self.env.insert(name.clone(), v);
        }
        for (name, value) in &job.env {
            let ctx = self.ctx_with_env(None);
            let v = eval_string(value, &ctx, &file)?;
            self.env.insert(name.clone(), v);
        }
        let minutes = match &job.timeout_minutes {
            None => DEFAULT_JOB_MINUTES,
            Some(n) => number(n, &self.ctx_with_env(None), &file)?,
        };
        Ok(minutes)
    }

    /// The run's contexts, then `matrix`, `strategy`, `needs`, `runner` and `job` of this run.
    fn fill_start_contexts(&mut self, planned: &PlannedJob, needs: Value) {
        for (k, v) in &self.shared.base {
            self.contexts.insert(k.clone(), v.clone());
        }
        let matrix: IndexMap<String, Value> = planned
            .matrix
            .iter()
            .map(|(k, v)| (k.clone(), Value::from_json(v.clone())))
            .collect();
        self.contexts.insert("matrix".into(), Value::Object(matrix));
        self.contexts.insert(
            "strategy".into(),
            object([
                ("fail-fast", Value::Bool(planned.fail_fast)),
                ("job-index", Value::Number(planned.cell as f64)),
                ("job-total", Value::Number(planned.cells as f64)),
                (
                    "max-parallel",
                    Value::Number(f64::from(
                        planned.max_parallel.unwrap_or(planned.cells as u32),
                    )),
                ),
            ]),
        );
        self.contexts.insert("needs".into(), needs);
        self.contexts.insert(
            "runner".into(),
            object([
                ("name", Value::String("gpuflow".into())),
                ("os", Value::String(runner_os().into())),
                ("arch", Value::String(runner_arch().into())),
                (
                    "temp",
                    Value::String(self.temp.join("host").display().to_string()),
                ),
                ("gpus", crate::engine::job_gpus::context(self.gpus.as_ref())),
            ]),
        );
        self.contexts.insert(
            "job".into(),
            object([("status", Value::String("success".into()))]),
        );
        // The run's `github` context, with this job's id.
        for name in ["github", "gpuflow"] {
            if let Some(Value::Object(g)) = self.contexts.get_mut(name) {
                g.insert("job".into(), Value::String(self.job_id.clone()));
            }
        }
    }

    /// An evaluation context of the job's contexts with `env` (the job's when `None`).
    pub(super) fn ctx_with_env(&self, env: Option<&IndexMap<String, String>>) -> MapContext {
        let mut c = MapContext::new().with_status(self.status);
        for (k, v) in &self.contexts {
            c.insert(k.clone(), v.clone());
        }
        let env = env.unwrap_or(&self.env);
        c.insert(
            "env",
            Value::Object(
                env.iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            ),
        );
        c.with_workspace(&self.shared.opts.workspace)
    }

    pub(super) fn ctx(&self, scope: &Scope, env: Option<&IndexMap<String, String>>) -> MapContext {
        let mut c = self.ctx_with_env(env);
        c.insert("steps", Value::Object(scope.steps.clone()));
        if let Some(inputs) = &scope.inputs {
            c.insert("inputs", inputs.clone());
        }
        let status = match self.status {
            JobStatus::Success => "success",
            JobStatus::Failure => "failure",
            JobStatus::Cancelled => "cancelled",
        };
        if let Some(Value::Object(job)) = self.contexts.get("job") {
            let mut job = job.clone();
            job.insert("status".into(), Value::String(status.into()));
            c.insert("job", Value::Object(job));
        }
        c
    }

    /// The matrix cell's values as text, for results (`tokens-per-chunk: 4`).
    pub(super) fn matrix_text(&self) -> std::collections::BTreeMap<String, String> {
        match self.contexts.get("matrix") {
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| (k.clone(), v.to_expr_string()))
                .collect(),
            _ => std::collections::BTreeMap::new(),
        }
    }

    /// The variables every script sees, as on GitHub's runners.
    pub(super) fn github_env(&self) -> IndexMap<String, String> {
        let g = self.contexts.get("github");
        let field = |name: &str| {
            g.and_then(|g| g.get_property(name))
                .map(Value::to_expr_string)
                .unwrap_or_default()
        };
        let mut env = IndexMap::new();
        env.insert("CI".into(), "true".into());
        env.insert("GPUFLOW".into(), "true".into());
        for (var, name) in [
            ("GITHUB_WORKSPACE", "workspace"),
            ("GITHUB_RUN_ID", "run_id"),
            ("GITHUB_SHA", "sha"),
            ("GITHUB_REF", "ref"),
            ("GITHUB_REF_NAME", "ref_name"),
            ("GITHUB_WORKFLOW", "workflow"),
            ("GITHUB_EVENT_NAME", "event_name"),
        ] {
            env.insert(var.into(), field(name));
        }
        env.insert("GITHUB_JOB".into(), self.job_id.clone());
        env.insert("GPUFLOW_RUN_ID".into(), self.shared.opts.run_id.clone());
        env.insert("RUNNER_OS".into(), runner_os().into());
        env.insert("RUNNER_ARCH".into(), runner_arch().into());
        env.insert(
            "RUNNER_TEMP".into(),
            self.temp.join("host").display().to_string(),
        );
        env
    }

    pub(super) fn job_outputs(&self, job: &Job, scope: &Scope) -> IndexMap<String, String> {
        let ctx = self.ctx(scope, None);
        let mut out = IndexMap::new();
        for (name, value) in &job.outputs {
            match eval_string(value, &ctx, &scope.file) {
                Ok(v) if self.shared.masker.mask(&v) != v => {
                    self.shared.emit(EventKind::Warning {
                        job: Some(self.jref.clone()),
                        message: format!(
                            "the job output `{name}` holds a secret and is not passed on"
                        ),
                    });
                }
                Ok(v) => {
                    out.insert(name.clone(), v);
                }
                Err(message) => self.say(None, &format!("output `{name}`: {message}")),
            }
        }
        out
    }
}

fn runner_os() -> &'static str {
    match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "macOS",
        "windows" => "Windows",
        other => other,
    }
}

fn runner_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "X64",
        "aarch64" => "ARM64",
        "x86" => "X86",
        "arm" => "ARM",
        other => other,
    }
}
