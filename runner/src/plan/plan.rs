//! The plan of a workflow: every job run (one per matrix cell) in the order it could start,
//! with what it waits on and the steps it would take. This is what `gpuflow plan` shows and
//! what the engine will later run.
//!
//! The input is plain data the caller extracts from the workflow model ([`WorkflowInput`]);
//! nothing here evaluates expressions, so values such as `runs-on: ${{ matrix.os }}` stay as
//! written. The JSON form is `serde::Serialize` on [`Plan`]; its field names are stable and
//! documented on each field.

use std::sync::Arc;

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;

use super::graph::{GraphError, JobDeps, JobGraph, NeedsRef};
use super::matrix::{self, MatrixCell, MatrixError, MatrixInput};
use crate::workflow::model::GpuRequest;

/// `gpus` in the plan's JSON: as written (`"8"`), or `null`.
fn as_written<S: serde::Serializer>(
    gpus: &Option<GpuRequest>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match gpus {
        Some(g) => serializer.collect_str(g),
        None => serializer.serialize_none(),
    }
}

/// What the planner needs to know about a workflow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkflowInput {
    /// The workflow's `name`, or whatever the caller shows instead (e.g. the file name).
    pub name: String,
    /// Jobs in file order.
    pub jobs: Vec<JobInput>,
}

/// What the planner needs to know about a job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobInput {
    pub id: String,
    /// The job's `name`; its id is shown when absent.
    pub name: Option<String>,
    pub needs: Vec<NeedsRef>,
    /// `strategy.matrix`; `None` for a job that runs once.
    pub matrix: Option<MatrixInput>,
    /// `runs-on` as written, for display.
    pub runs_on: Option<String>,
    /// `gpus`, as the engine leases them (shown as written: `8`, `all`, `0,1`).
    pub gpus: Option<GpuRequest>,
    pub steps: Vec<StepInput>,
    /// `strategy.max-parallel`.
    pub max_parallel: Option<u32>,
    /// `strategy.fail-fast` (GitHub's default is `true`).
    pub fail_fast: bool,
}

impl JobInput {
    /// A job with only an id: no needs, no matrix, no steps, fail-fast on (GitHub's default).
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: None,
            needs: Vec::new(),
            matrix: None,
            runs_on: None,
            gpus: None,
            steps: Vec::new(),
            max_parallel: None,
            fail_fast: true,
        }
    }
}

/// What the planner needs to know about a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepInput {
    pub id: Option<String>,
    pub name: Option<String>,
    pub kind: StepKind,
}

/// Whether a step runs a script or uses a built-in step or action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// `run:` with its script.
    Run(String),
    /// `uses:` with its target (`wait-for-health`, `./actions/sglang-server`).
    Uses(String),
}

/// Why a workflow cannot be planned. Each variant wraps the error of one stage, with the job
/// it concerns so the caller can find the span.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A problem in a job's `strategy.matrix`.
    #[error("{error}")]
    Matrix {
        job: String,
        /// Index of the job in [`WorkflowInput::jobs`].
        job_index: usize,
        error: MatrixError,
    },
    /// A problem in the `needs` graph.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

impl PlanError {
    /// A line saying how to fix it, for the diagnostic's `help:`.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Matrix { error, .. } => error.hint(),
            Self::Graph(e) => e.hint(),
        }
    }
}

/// The expanded workflow. Serialized as `{"workflow", "levels", "jobs", "skipped"}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// `workflow`: the workflow's name.
    pub workflow: String,
    /// `levels`: how many levels the job graph has (0 for a workflow without jobs).
    pub levels: usize,
    /// `jobs`: one entry per job run, i.e. per matrix cell, in an order where every run comes
    /// after the runs it waits on; the cells of one job are adjacent, in matrix order.
    pub jobs: Vec<PlannedJob>,
    /// `skipped`: jobs that will not run at all because their matrix has no cell left after
    /// `exclude` (GitHub skips such a job).
    pub skipped: Vec<SkippedJob>,
}

impl Plan {
    /// The runs of one job, in matrix order (empty for an unknown or skipped job).
    pub fn runs_of<'a>(&'a self, job_id: &'a str) -> impl Iterator<Item = &'a PlannedJob> + 'a {
        self.jobs.iter().filter(move |j| j.job_id == job_id)
    }
}

/// One run of a job: the job itself, or one cell of its matrix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlannedJob {
    /// `job_id`: the key under `jobs:`.
    pub job_id: String,
    /// `name`: the job's `name`, or its id; without matrix values.
    pub name: String,
    /// `display_name`: GitHub's display form, `bench (nccl, 128)`.
    pub display_name: String,
    /// `cell`: index of this run among the job's cells, from 0.
    pub cell: usize,
    /// `cells`: how many runs the job has (1 without a matrix).
    pub cells: usize,
    /// `matrix`: the `matrix` context of this run (`{}` without a matrix).
    pub matrix: IndexMap<String, Value>,
    /// `needs`: ids of the jobs this run waits on, as written; it waits on every run of each.
    pub needs: Vec<String>,
    /// `level`: 1 for a job without `needs`, otherwise one more than the highest level needed.
    pub level: usize,
    /// `runs_on`: `runs-on` as written, or `null`.
    pub runs_on: Option<String>,
    /// `gpus`: `gpus` as written, or `null`. The engine leases and evaluates the typed
    /// request (an expression such as `${{ matrix.gpus }}` when the job starts).
    #[serde(serialize_with = "as_written")]
    pub gpus: Option<GpuRequest>,
    /// `max_parallel`: `strategy.max-parallel`, or `null` for no limit.
    pub max_parallel: Option<u32>,
    /// `fail_fast`: `strategy.fail-fast`.
    pub fail_fast: bool,
    /// `steps`: the job's steps, in order. Shared by the job's cells: a large matrix does
    /// not copy its steps once per cell.
    pub steps: Arc<[PlannedStep]>,
}

/// One step as shown in a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlannedStep {
    /// `number`: position in the job, from 1.
    pub number: usize,
    /// `id`: the step's `id`, or `null`.
    pub id: Option<String>,
    /// `label`: the step's `name`, else its `id`, else its `uses` target, else `Run ` and the
    /// first line of its script (GitHub's default label).
    pub label: String,
    /// `kind`: `"run"` or `"uses"`.
    pub kind: &'static str,
    /// `uses`: the `uses` target, or `null` for a `run` step.
    pub uses: Option<String>,
}

/// A job that will not run because its matrix has no cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedJob {
    /// `job_id`: the key under `jobs:`.
    pub job_id: String,
    /// `name`: the job's `name`, or its id.
    pub name: String,
    /// `level`: as for [`PlannedJob::level`].
    pub level: usize,
    /// `reason`: why, in words.
    pub reason: String,
}

/// Turns a job's `name` that holds `${{ }}` into the name of one run, given its `matrix`.
/// Planning knows no expressions, so the caller supplies this.
pub type NameEvaluator<'a> = dyn Fn(&str, &IndexMap<String, Value>) -> String + 'a;

/// Plans a workflow, leaving job names that hold `${{ }}` as written.
pub fn build(input: &WorkflowInput) -> Result<Plan, Vec<PlanError>> {
    build_with_names(input, &|template, _| template.to_owned())
}

/// Plans a workflow: checks the `needs` graph, expands every matrix, and lists the runs in
/// start order. All problems of all jobs are returned together.
///
/// Display names follow GitHub: a plain job name gets the cell's values appended
/// (`bench (nccl, 128)`); a name holding `${{ }}` is evaluated per cell by `evaluate_name` and
/// gets nothing appended, since it says itself how cells differ.
pub fn build_with_names(
    input: &WorkflowInput,
    evaluate_name: &NameEvaluator<'_>,
) -> Result<Plan, Vec<PlanError>> {
    let (graph, cells) = expand_all(input)?;
    plan_runs(input, &graph, &cells, evaluate_name)
}

/// Every problem [`build`] would report, without building the runs: what validation needs.
pub fn problems(input: &WorkflowInput) -> Vec<PlanError> {
    expand_all(input).err().unwrap_or_default()
}

/// The `needs` graph and every job's matrix cells, or all problems of all jobs together.
fn expand_all(input: &WorkflowInput) -> Result<(JobGraph, Vec<Vec<MatrixCell>>), Vec<PlanError>> {
    let mut errors: Vec<PlanError> = Vec::new();
    let deps: Vec<JobDeps> = input
        .jobs
        .iter()
        .map(|j| JobDeps {
            id: j.id.clone(),
            needs: j.needs.clone(),
        })
        .collect();
    let graph =
        JobGraph::build(&deps).map_err(|es| errors.extend(es.into_iter().map(PlanError::from)));

    let mut cells: Vec<Vec<MatrixCell>> = Vec::with_capacity(input.jobs.len());
    for (job_index, job) in input.jobs.iter().enumerate() {
        match &job.matrix {
            None => cells.push(vec![MatrixCell::no_matrix()]),
            Some(m) => match matrix::expand(m) {
                Ok(c) => cells.push(c),
                Err(es) => {
                    cells.push(Vec::new());
                    errors.extend(es.into_iter().map(|error| PlanError::Matrix {
                        job: job.id.clone(),
                        job_index,
                        error,
                    }));
                }
            },
        }
    }
    match graph {
        Ok(g) if errors.is_empty() => Ok((g, cells)),
        _ => Err(errors),
    }
}

fn plan_runs(
    input: &WorkflowInput,
    graph: &JobGraph,
    cells: &[Vec<MatrixCell>],
    evaluate_name: &NameEvaluator<'_>,
) -> Result<Plan, Vec<PlanError>> {
    // The graph refuses duplicate ids, so ids map one-to-one onto input jobs.
    let position: IndexMap<&str, usize> = input
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.id.as_str(), i))
        .collect();
    let mut plan = Plan {
        workflow: input.name.clone(),
        levels: graph.depth(),
        jobs: Vec::new(),
        skipped: Vec::new(),
    };
    for id in graph.order() {
        let index = position[id];
        let job = &input.jobs[index];
        let name = job.name.clone().unwrap_or_else(|| job.id.clone());
        let level = graph.level(id).unwrap_or(1);
        let job_cells = &cells[index];
        if job_cells.is_empty() {
            plan.skipped.push(SkippedJob {
                job_id: job.id.clone(),
                name,
                level,
                reason: "its matrix has no combination left after `exclude`".into(),
            });
            continue;
        }
        let needs: Vec<String> = graph
            .dependencies(id)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let steps: Arc<[PlannedStep]> = planned_steps(&job.steps).into();
        for (cell_index, cell) in job_cells.iter().enumerate() {
            let display_name = if name.contains("${{") {
                evaluate_name(&name, &cell.values)
            } else {
                cell.display_name(&name)
            };
            plan.jobs.push(PlannedJob {
                job_id: job.id.clone(),
                name: name.clone(),
                display_name,
                cell: cell_index,
                cells: job_cells.len(),
                matrix: cell.values.clone(),
                needs: needs.clone(),
                level,
                runs_on: job.runs_on.clone(),
                gpus: job.gpus.clone(),
                max_parallel: job.max_parallel,
                fail_fast: job.fail_fast,
                steps: Arc::clone(&steps),
            });
        }
    }
    Ok(plan)
}

fn planned_steps(steps: &[StepInput]) -> Vec<PlannedStep> {
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (kind, uses) = match &s.kind {
                StepKind::Run(_) => ("run", None),
                StepKind::Uses(target) => ("uses", Some(target.clone())),
            };
            let label = s
                .name
                .clone()
                .or_else(|| s.id.clone())
                .unwrap_or_else(|| match &s.kind {
                    StepKind::Uses(target) => target.clone(),
                    StepKind::Run(script) => {
                        format!(
                            "Run {}",
                            script
                                .lines()
                                .find(|l| !l.trim().is_empty())
                                .unwrap_or("")
                                .trim()
                        )
                    }
                });
            PlannedStep {
                number: i + 1,
                id: s.id.clone(),
                label,
                kind,
                uses,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn needs(ids: &[&str]) -> Vec<NeedsRef> {
        ids.iter()
            .enumerate()
            .map(|(tag, id)| NeedsRef {
                job: (*id).to_owned(),
                tag,
            })
            .collect()
    }

    fn matrix(dims: &[(&str, Value)]) -> MatrixInput {
        MatrixInput {
            dimensions: dims
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_array().unwrap().clone()))
                .collect(),
            ..MatrixInput::default()
        }
    }

    /// A small eagle3-like workflow: a 2×2 benchmark matrix and a report that needs it.
    fn eagle3() -> WorkflowInput {
        let mut bench = JobInput::new("bench");
        bench.matrix = Some(matrix(&[
            ("allreduce", json!(["nccl", "custom"])),
            ("cuda-graph-max-bs", json!([128, 512])),
        ]));
        bench.runs_on = Some("blackwell".into());
        bench.gpus = Some(GpuRequest::count(8));
        bench.max_parallel = Some(2);
        bench.steps = vec![
            StepInput {
                id: Some("server".into()),
                name: None,
                kind: StepKind::Uses("./actions/sglang-server".into()),
            },
            StepInput {
                id: None,
                name: None,
                kind: StepKind::Uses("assert-file".into()),
            },
            StepInput {
                id: None,
                name: None,
                kind: StepKind::Run(
                    "\n  python3 /tmp/benchmark_eagle3.py --num-runs 5\n  echo done\n".into(),
                ),
            },
            StepInput {
                id: Some("bench".into()),
                name: Some("Benchmark".into()),
                kind: StepKind::Uses("benchmark".into()),
            },
        ];
        let mut report = JobInput::new("report");
        report.needs = needs(&["bench"]);
        report.steps = vec![StepInput {
            id: None,
            name: None,
            kind: StepKind::Uses("report".into()),
        }];
        WorkflowInput {
            name: "eagle3".into(),
            jobs: vec![report, bench],
        }
    }

    #[test]
    fn every_cell_is_a_run_and_runs_come_after_their_needs() {
        let plan = build(&eagle3()).unwrap();
        let names: Vec<&str> = plan.jobs.iter().map(|j| j.display_name.as_str()).collect();
        assert_eq!(
            names,
            [
                "bench (nccl, 128)",
                "bench (nccl, 512)",
                "bench (custom, 128)",
                "bench (custom, 512)",
                "report"
            ]
        );
        assert_eq!(plan.levels, 2);
        let report = plan.runs_of("report").next().unwrap();
        assert_eq!(report.needs, ["bench"]);
        assert_eq!((report.level, report.cells, report.cell), (2, 1, 0));
        assert!(report.matrix.is_empty());
        let b = &plan.jobs[1];
        assert_eq!(b.matrix.get("cuda-graph-max-bs"), Some(&json!(512)));
        assert_eq!((b.cell, b.cells, b.level), (1, 4, 1));
    }

    #[test]
    fn step_labels_follow_github_defaults() {
        let plan = build(&eagle3()).unwrap();
        let labels: Vec<&str> = plan.jobs[0]
            .steps
            .iter()
            .map(|s| s.label.as_str())
            .collect();
        assert_eq!(
            labels,
            [
                "server",
                "assert-file",
                "Run python3 /tmp/benchmark_eagle3.py --num-runs 5",
                "Benchmark"
            ]
        );
        assert_eq!(plan.jobs[0].steps[2].kind, "run");
        assert_eq!(
            plan.jobs[0].steps[0].uses.as_deref(),
            Some("./actions/sglang-server")
        );
    }

    #[test]
    fn names_with_expressions_are_evaluated_by_the_caller_and_get_no_suffix() {
        let mut w = eagle3();
        w.jobs[1].name = Some("bench ${{ matrix.allreduce }}".into());
        let plan = build_with_names(&w, &|_, m| {
            format!("bench {}", m["allreduce"].as_str().unwrap())
        })
        .unwrap();
        assert_eq!(plan.jobs[0].display_name, "bench nccl");
        assert_eq!(plan.jobs[0].name, "bench ${{ matrix.allreduce }}");
    }

    #[test]
    fn a_job_whose_matrix_is_all_excluded_is_skipped() {
        let mut w = eagle3();
        let m = w.jobs[1].matrix.as_mut().unwrap();
        m.exclude.push(
            [("allreduce".to_owned(), json!("nccl"))]
                .into_iter()
                .collect(),
        );
        m.exclude.push(
            [("allreduce".to_owned(), json!("custom"))]
                .into_iter()
                .collect(),
        );
        let plan = build(&w).unwrap();
        assert_eq!(plan.jobs.len(), 1);
        assert_eq!(plan.skipped.len(), 1);
        assert_eq!(plan.skipped[0].job_id, "bench");
    }

    #[test]
    fn graph_and_matrix_errors_are_reported_together() {
        let mut w = eagle3();
        w.jobs[0].needs = needs(&["bnech"]);
        w.jobs[1]
            .matrix
            .as_mut()
            .unwrap()
            .dimensions
            .insert("empty".into(), vec![]);
        let errs = build(&w).unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(matches!(
            &errs[0],
            PlanError::Graph(GraphError::UnknownNeed { .. })
        ));
        assert!(matches!(&errs[1], PlanError::Matrix { job, job_index: 1, .. } if job == "bench"));
        assert_eq!(errs[0].hint().as_deref(), Some("did you mean `bench`?"));
        assert_eq!(
            errs[1].to_string(),
            "matrix dimension `empty` has no values"
        );
    }

    #[test]
    fn json_field_names_are_stable() {
        let plan = build(&eagle3()).unwrap();
        let v = serde_json::to_value(&plan).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["workflow", "levels", "jobs", "skipped"]);
        assert_eq!(
            v["jobs"][4],
            json!({
                "job_id": "report", "name": "report", "display_name": "report",
                "cell": 0, "cells": 1, "matrix": {}, "needs": ["bench"], "level": 2,
                "runs_on": null, "gpus": null, "max_parallel": null, "fail_fast": true,
                "steps": [{"number": 1, "id": null, "label": "report", "kind": "uses", "uses": "report"}]
            })
        );
    }
}
