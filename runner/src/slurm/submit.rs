//! Each planned job as one `sbatch` submission: its GPUs as GRES, its `needs` as
//! `--dependency`, `timeout-minutes` as `--time`, `max-parallel` as lanes of `singleton` jobs,
//! and the host's partition, account, QoS and options. Every value is one argument of its own:
//! nothing a workflow or a push says becomes shell text or another option.

use std::ffi::OsString;

use crate::backend::GpuRequest as Devices;
use crate::diag::SourceFile;
use crate::expr::{MapContext, Value};
use crate::hosts::SlurmSettings;
use crate::plan::PlannedJob;
use crate::workflow::model::Job;

/// What one planned job asks Slurm for, before its dependencies are known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// GPUs per job; 0 for none.
    pub gpus: u32,
    /// The GRES type `runs-on` named, if any (`h100`).
    pub gpu_type: Option<String>,
    /// `--time` in minutes.
    pub minutes: Option<u64>,
    /// The lane among its job's cells when `max-parallel` limits them: cells of one lane run
    /// one after another (`--dependency=singleton` on a shared name).
    pub lane: Option<u32>,
    /// Its `if:` may let it run after a job it needs failed (`afterany`), rather than only after
    /// they all succeeded (`afterok`).
    pub runs_after_failure: bool,
}

/// What `planned` asks for, with its `gpus:` and `timeout-minutes` evaluated with its matrix
/// and the run's inputs and vars: a cluster allocates before the job starts, so a value only
/// the job's `needs` would give cannot be used.
pub fn ask(
    planned: &PlannedJob,
    job: &Job,
    base: &MapContext,
    file: &SourceFile,
    settings: &SlurmSettings,
) -> Result<Ask, String> {
    let mut ctx = base.clone();
    ctx.insert("matrix", crate::engine::evaluate::matrix_value(planned));
    let gpus = match &planned.gpus {
        None => 0,
        Some(request) => match crate::engine::job_gpus::evaluate(request, &ctx, file)?.devices {
            Devices::None => 0,
            Devices::Count(n) => n,
            Devices::All => {
                return Err(format!(
                    "`gpus: all` cannot be asked of a Slurm cluster (its nodes differ, and Slurm allocates counts): ask for a number, e.g. `gpus: 8` (job `{}`)",
                    planned.display_name
                ));
            }
            Devices::Devices(ids) => {
                return Err(format!(
                    "`gpus: [{}]` names devices, which a Slurm cluster chooses itself: ask for a count, e.g. `gpus: {}` (job `{}`)",
                    ids.join(", "),
                    ids.len(),
                    planned.display_name
                ));
            }
        },
    };
    if planned
        .gpus
        .as_ref()
        .is_some_and(|g| g.constraint.is_some())
    {
        return Err(format!(
            "`gpus.constraint` is not passed to Slurm: its nodes' topology is Slurm's to use; remove it, or ask for a node type with `sbatch-options` (job `{}`)",
            planned.display_name
        ));
    }
    let runs_on: Vec<String> = job
        .runs_on
        .iter()
        .map(|r| {
            crate::expr::parse_template(&r.value)
                .and_then(|t| t.evaluate(&ctx))
                .map_or_else(|_| r.value.clone(), |v| v.to_expr_string())
        })
        .collect();
    let minutes = match &job.timeout_minutes {
        Some(n) => Some(crate::engine::evaluate::number(n, &ctx, file)?),
        None => None,
    };
    Ok(Ask {
        gpus,
        gpu_type: runs_on
            .iter()
            .find(|r| settings.gpu_types.contains(r))
            .cloned(),
        // A minute past the job's own timeout: gpuflow on the node ends the job at its
        // timeout and cleans up; Slurm's limit is the backstop.
        minutes: minutes.map(|m| m.ceil() as u64 + 1),
        lane: planned
            .max_parallel
            .filter(|m| (*m as usize) < planned.cells)
            .map(|m| planned.cell as u32 % m),
        runs_after_failure: job.condition.is_some(),
    })
}

/// The arguments of `sbatch` for one job: options, then the batch script and its arguments.
pub struct Submission<'a> {
    pub settings: &'a SlurmSettings,
    pub run_id: &'a str,
    pub planned: &'a PlannedJob,
    pub ask: &'a Ask,
    /// The Slurm jobs of every cell of every job it needs.
    pub after: Vec<u64>,
    pub bundle: &'a super::bundle::Bundle,
    pub index: usize,
    pub workspace: &'a std::path::Path,
}

impl Submission<'_> {
    pub fn args(&self) -> Vec<OsString> {
        let s = self.settings;
        let mut args: Vec<OsString> = Vec::new();
        let mut opt = |text: String| args.push(text.into());
        opt(format!("--job-name={}", self.job_name()));
        opt(format!("--chdir={}", self.workspace.display()));
        opt(format!(
            "--output={}",
            self.bundle.job_dir(self.index).join("slurm.out").display()
        ));
        opt(format!(
            "--comment=gpuflow run {} job {}",
            self.run_id, self.index
        ));
        if let Some(p) = &s.partition {
            opt(format!("--partition={p}"));
        }
        if let Some(a) = &s.account {
            opt(format!("--account={a}"));
        }
        if let Some(q) = &s.qos {
            opt(format!("--qos={q}"));
        }
        match (self.ask.minutes, &s.time_limit) {
            (Some(m), _) => opt(format!("--time={m}")),
            (None, Some(t)) => opt(format!("--time={t}")),
            (None, None) => {}
        }
        if self.ask.gpus > 0 {
            opt(match &self.ask.gpu_type {
                Some(t) => format!("--gres=gpu:{t}:{}", self.ask.gpus),
                None => format!("--gres=gpu:{}", self.ask.gpus),
            });
        }
        let mut dependency: Vec<String> = Vec::new();
        if !self.after.is_empty() {
            let kind = if self.ask.runs_after_failure {
                "afterany"
            } else {
                "afterok"
            };
            let ids: Vec<String> = self.after.iter().map(u64::to_string).collect();
            dependency.push(format!("{kind}:{}", ids.join(":")));
        }
        if self.ask.lane.is_some() {
            dependency.push("singleton".into());
        }
        if !dependency.is_empty() {
            opt(format!("--dependency={}", dependency.join(",")));
            // A dependency that can never be met (a needed job failed) cancels the job rather
            // than leaving it pending for ever.
            opt("--kill-on-invalid-dep=yes".into());
        }
        for extra in &s.sbatch_options {
            opt(extra.clone());
        }
        args.push(self.bundle.batch_script().into());
        args.push(s.gpuflow_program().into());
        args.push(self.bundle.dir().into());
        args.push(self.index.to_string().into());
        args
    }

    /// `gpuflow/<run>/<job>/<cell>`, with the lane for a limited matrix (singleton jobs share
    /// a name).
    fn job_name(&self) -> String {
        let p = self.planned;
        match self.ask.lane {
            Some(lane) => format!("gpuflow/{}/{}/lane{lane}", self.run_id, p.job_id),
            None => format!("gpuflow/{}/{}/{}", self.run_id, p.job_id, p.cell),
        }
    }
}

/// The variables `sbatch` gets besides its own environment, which the job inherits: the
/// secrets' values (a file on the shared folder would keep them).
pub fn environment(secrets: &indexmap::IndexMap<String, String>) -> Vec<(String, String)> {
    secrets
        .iter()
        .map(|(name, value)| (super::bundle::secret_variable(name), value.clone()))
        .collect()
}

/// `inputs` and `vars` as the context `gpus:` and `timeout-minutes` are evaluated in.
pub fn base_context(inputs: &Value, vars: &indexmap::IndexMap<String, String>) -> MapContext {
    let mut ctx = MapContext::new();
    ctx.insert("inputs", inputs.clone());
    ctx.insert(
        "vars",
        Value::Object(
            vars.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        ),
    );
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::SourceFile;

    fn planned(yaml: &str, cell: usize) -> (crate::workflow::model::Workflow, PlannedJob) {
        let file = SourceFile::new("w.yml", yaml);
        let (wf, diags) =
            crate::workflow::load_workflow_in(&file, std::path::Path::new("/nonexistent"));
        let wf = wf.unwrap_or_else(|| panic!("{diags:?}"));
        let model = crate::plan::from_workflow(&wf, "w");
        let plan = crate::plan::build(&model.input).unwrap();
        let p = plan.jobs[cell].clone();
        (wf, p)
    }

    fn settings() -> SlurmSettings {
        SlurmSettings {
            partition: Some("gpu".into()),
            account: Some("ml".into()),
            time_limit: Some("30".into()),
            sbatch_options: vec!["--exclusive".into()],
            shared_dir: "/shared".into(),
            gpu_types: vec!["h100".into()],
            ..SlurmSettings::default()
        }
    }

    #[test]
    fn a_cell_asks_for_its_gres_type_time_lane_and_dependencies() {
        let yaml = "on: push\njobs:\n  bench:\n    runs-on: [cluster, h100]\n    timeout-minutes: 10\n    strategy:\n      max-parallel: 2\n      matrix:\n        tp: [2, 4, 8]\n    gpus: ${{ matrix.tp }}\n    steps:\n      - run: 'true'\n";
        let (wf, p) = planned(yaml, 2);
        let s = settings();
        let a = ask(&p, &wf.jobs["bench"], &MapContext::new(), &wf.file, &s).unwrap();
        assert_eq!(
            a,
            Ask {
                gpus: 8,
                gpu_type: Some("h100".into()),
                minutes: Some(11),
                lane: Some(0),
                runs_after_failure: false,
            }
        );
        let bundle = super::super::bundle::Bundle::open(std::path::Path::new("/shared/uid-1/r1"));
        let submission = Submission {
            settings: &s,
            run_id: "r1",
            planned: &p,
            ask: &a,
            after: vec![7, 9],
            bundle: &bundle,
            index: 4,
            workspace: std::path::Path::new("/shared/ws"),
        };
        let args: Vec<String> = submission
            .args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--job-name=gpuflow/r1/bench/lane0",
                "--chdir=/shared/ws",
                "--output=/shared/uid-1/r1/jobs/4/slurm.out",
                "--comment=gpuflow run r1 job 4",
                "--partition=gpu",
                "--account=ml",
                "--time=11",
                "--gres=gpu:h100:8",
                "--dependency=afterok:7:9,singleton",
                "--kill-on-invalid-dep=yes",
                "--exclusive",
                "/shared/uid-1/r1/job.sh",
                "gpuflow",
                "/shared/uid-1/r1",
                "4",
            ]
        );
    }

    #[test]
    fn what_slurm_chooses_itself_is_refused_with_a_hint() {
        let all = "on: push\njobs:\n  j:\n    gpus: all\n    steps:\n      - run: 'true'\n";
        let (wf, p) = planned(all, 0);
        let e = ask(&p, &wf.jobs["j"], &MapContext::new(), &wf.file, &settings()).unwrap_err();
        assert!(e.contains("ask for a number"), "{e}");
        let ids = "on: push\njobs:\n  j:\n    gpus: [0, 1]\n    steps:\n      - run: 'true'\n";
        let (wf, p) = planned(ids, 0);
        let e = ask(&p, &wf.jobs["j"], &MapContext::new(), &wf.file, &settings()).unwrap_err();
        assert!(e.contains("ask for a count, e.g. `gpus: 2`"), "{e}");
    }

    #[test]
    fn a_job_with_an_if_runs_after_any_end_of_its_needs() {
        let yaml = "on: push\njobs:\n  a:\n    steps:\n      - run: 'true'\n  b:\n    needs: a\n    if: always()\n    steps:\n      - run: 'true'\n";
        let (wf, p) = planned(yaml, 1);
        let a = ask(&p, &wf.jobs["b"], &MapContext::new(), &wf.file, &settings()).unwrap();
        assert!(a.runs_after_failure);
        assert_eq!(a.minutes, None);
    }
}
