//! How a [`Plan`] is shown: a readable text graph for a terminal, and JSON for machines.
//!
//! The text groups jobs by level (everything in a level can start once the levels above are
//! done). A job is shown once with its cells and steps, rather than once per cell, because the
//! cells of a job differ only in their `matrix` values. Details sit in one aligned column on
//! the right. No colour: this output is stable enough to snapshot and to paste into an issue.

use std::fmt::Write as _;

use serde_json::Value;

use super::plan::{Plan, PlannedJob};

/// Labels longer than this are cut with `…` so the right-hand column stays in view.
const MAX_LABEL_CHARS: usize = 36;

/// The plan as pretty-printed JSON (the field names are documented on [`Plan`]).
pub fn render_json(plan: &Plan) -> String {
    // A Plan holds only strings, numbers and JSON values with string keys: it always serializes.
    serde_json::to_string_pretty(plan).unwrap_or_default()
}

/// The plan as text for a terminal, e.g.
///
/// ```text
/// eagle3 — 2 jobs (5 runs) in 2 levels
///
/// level 1
///   bench                  runs-on: blackwell  gpus: 8
///     matrix: 4 cells, max-parallel 2, fail-fast
///       bench (nccl, 128)  allreduce=nccl cuda-graph-max-bs=128
///       …
///     steps:
///       1. server          uses ./actions/sglang-server
///
/// level 2
///   report                 needs: bench (4 cells)
///     steps:
///       1. report          uses report
/// ```
pub fn render_text(plan: &Plan) -> String {
    let mut rows: Vec<Row> = Vec::new();
    for level in 1..=plan.levels {
        rows.push(Row::blank());
        rows.push(Row::new(0, format!("level {level}"), ""));
        let mut runs = plan.jobs.iter().filter(|j| j.level == level).peekable();
        while let Some(first) = runs.next() {
            let mut cells = vec![first];
            while let Some(next) = runs.next_if(|j| j.job_id == first.job_id) {
                cells.push(next);
            }
            job_rows(plan, &cells, &mut rows);
        }
        for skipped in plan.skipped.iter().filter(|s| s.level == level) {
            rows.push(Row::new(
                2,
                job_title(&skipped.name, &skipped.job_id),
                &format!("skipped: {}", skipped.reason),
            ));
        }
    }

    let runs = plan.jobs.len();
    let mut out = if runs == 0 && plan.skipped.is_empty() {
        format!("{} — no jobs\n", plan.workflow)
    } else {
        let mut ids: Vec<&str> = plan.jobs.iter().map(|j| j.job_id.as_str()).collect();
        ids.dedup();
        let jobs = ids.len() + plan.skipped.len();
        if runs == jobs {
            format!(
                "{} — {} in {}\n",
                plan.workflow,
                count(jobs, "job"),
                count(plan.levels, "level")
            )
        } else {
            // A matrix turns one job into several runs: say both, so "7" is not mistaken for
            // the number of jobs written in the file.
            format!(
                "{} — {} ({}) in {}\n",
                plan.workflow,
                count(jobs, "job"),
                count(runs, "run"),
                count(plan.levels, "level")
            )
        }
    };
    let width = rows
        .iter()
        .filter(|r| !r.right.is_empty())
        .map(Row::left_width)
        .max()
        .unwrap_or(0);
    for row in rows {
        let left = format!("{:indent$}{}", "", row.left, indent = row.indent);
        if row.right.is_empty() {
            out.push_str(left.trim_end());
        } else {
            let pad = width - row.left_width() + 2;
            let _ = write!(out, "{left}{:pad$}{}", "", row.right);
        }
        out.push('\n');
    }
    out
}

/// One job: its title line, its matrix cells, then its steps.
fn job_rows(plan: &Plan, cells: &[&PlannedJob], rows: &mut Vec<Row>) {
    let job = cells[0];
    let mut details = Vec::new();
    if !job.needs.is_empty() {
        let needs: Vec<String> = job
            .needs
            .iter()
            .map(|id| match plan.runs_of(id).count() {
                0 => format!("{id} (skipped)"),
                1 => id.clone(),
                n => format!("{id} ({n} cells)"),
            })
            .collect();
        details.push(format!("needs: {}", needs.join(", ")));
    }
    if let Some(r) = &job.runs_on {
        details.push(format!("runs-on: {r}"));
    }
    if let Some(g) = &job.gpus {
        details.push(format!("gpus: {g}"));
    }
    let is_matrix = !job.matrix.is_empty();
    // A plain job is titled by its display name; a matrix job by its name, cells listed below.
    let title = if is_matrix {
        job_title(&job.name, &job.job_id)
    } else {
        job_title(&job.display_name, &job.job_id)
    };
    rows.push(Row::new(2, title, &details.join("  ")));

    if is_matrix {
        let mut strategy = vec![count(job.cells, "cell")];
        if let Some(n) = job.max_parallel {
            strategy.push(format!("max-parallel {n}"));
        }
        strategy.push(
            if job.fail_fast {
                "fail-fast"
            } else {
                "fail-fast off"
            }
            .into(),
        );
        rows.push(Row::new(4, format!("matrix: {}", strategy.join(", ")), ""));
        for cell in cells {
            let values: Vec<String> = cell
                .matrix
                .iter()
                .map(|(k, v)| format!("{k}={}", show_value(v)))
                .collect();
            rows.push(Row::new(6, cut(&cell.display_name), &values.join(" ")));
        }
    }
    if job.steps.is_empty() {
        rows.push(Row::new(4, "steps: none".into(), ""));
    } else {
        rows.push(Row::new(4, "steps:".into(), ""));
        for step in job.steps.iter() {
            let what = match &step.uses {
                Some(target) => format!("uses {target}"),
                None => step.kind.to_owned(),
            };
            rows.push(Row::new(
                6,
                format!("{}. {}", step.number, cut(&step.label)),
                &what,
            ));
        }
    }
}

/// `name`, or `name [id]` when the job's name differs from its id.
fn job_title(name: &str, id: &str) -> String {
    if name == id || name.starts_with(&format!("{id} (")) {
        cut(name)
    } else {
        cut(&format!("{name} [{id}]"))
    }
}

/// Strings as they are, everything else as compact JSON.
fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn cut(s: &str) -> String {
    if s.chars().count() > MAX_LABEL_CHARS {
        let mut out: String = s.chars().take(MAX_LABEL_CHARS - 1).collect();
        out.push('…');
        out
    } else {
        s.to_owned()
    }
}

/// "1 job", "5 jobs".
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A line of output: indented text on the left, details in an aligned column on the right.
struct Row {
    indent: usize,
    left: String,
    right: String,
}

impl Row {
    fn new(indent: usize, left: String, right: &str) -> Self {
        Self {
            indent,
            left,
            right: right.to_owned(),
        }
    }

    fn blank() -> Self {
        Self::new(0, String::new(), "")
    }

    fn left_width(&self) -> usize {
        self.indent + self.left.chars().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::graph::NeedsRef;
    use crate::plan::matrix::MatrixInput;
    use crate::plan::plan::{JobInput, StepInput, StepKind, WorkflowInput, build};
    use serde_json::json;

    fn uses(target: &str) -> StepInput {
        StepInput {
            id: None,
            name: None,
            kind: StepKind::Uses(target.into()),
        }
    }

    fn need(job: &str) -> NeedsRef {
        NeedsRef {
            job: job.into(),
            tag: 0,
        }
    }

    fn eagle3() -> WorkflowInput {
        let mut bench = JobInput::new("bench");
        bench.matrix = Some(MatrixInput {
            dimensions: [
                ("allreduce".to_owned(), vec![json!("nccl"), json!("custom")]),
                ("cuda-graph-max-bs".to_owned(), vec![json!(128), json!(512)]),
            ]
            .into_iter()
            .collect(),
            include: vec![
                [
                    ("allreduce".to_owned(), json!("custom")),
                    ("kernel".to_owned(), json!("v2")),
                ]
                .into_iter()
                .collect(),
            ],
            exclude: vec![],
        });
        bench.runs_on = Some("blackwell".into());
        bench.gpus = Some(crate::workflow::model::GpuRequest::count(8));
        bench.max_parallel = Some(2);
        bench.steps = vec![
            StepInput {
                id: Some("server".into()),
                name: None,
                kind: StepKind::Uses("./actions/sglang-server".into()),
            },
            uses("assert-file"),
            StepInput {
                id: None,
                name: None,
                kind: StepKind::Run(
                    "python3 /tmp/benchmark_eagle3.py --server-url http://localhost:30000 --num-runs 5"
                        .into(),
                ),
            },
            StepInput {
                id: Some("bench".into()),
                name: Some("Benchmark single stream".into()),
                kind: StepKind::Uses("benchmark".into()),
            },
            uses("compare-to-baseline"),
        ];
        let mut check = JobInput::new("check");
        check.name = Some("Preflight checks".into());
        check.steps = vec![uses("assert-file")];
        bench.needs = vec![need("check")];
        let mut report = JobInput::new("report");
        report.needs = vec![need("bench"), need("check")];
        report.runs_on = Some("local".into());
        report.steps = vec![uses("report")];
        let lint = JobInput::new("lint");
        WorkflowInput {
            name: "eagle3".into(),
            jobs: vec![check, bench, report, lint],
        }
    }

    #[test]
    fn text_snapshot() {
        insta::assert_snapshot!(render_text(&build(&eagle3()).unwrap()));
    }

    #[test]
    fn skipped_jobs_show_in_their_level() {
        let mut w = eagle3();
        let m = w.jobs[1].matrix.as_mut().unwrap();
        m.include.clear();
        m.exclude = vec![
            [("allreduce".to_owned(), json!("nccl"))]
                .into_iter()
                .collect(),
            [("allreduce".to_owned(), json!("custom"))]
                .into_iter()
                .collect(),
        ];
        insta::assert_snapshot!(render_text(&build(&w).unwrap()));
    }

    #[test]
    fn empty_workflow() {
        let w = WorkflowInput {
            name: "nothing".into(),
            jobs: vec![],
        };
        assert_eq!(render_text(&build(&w).unwrap()), "nothing — no jobs\n");
    }

    #[test]
    fn json_round_trips_through_serde_json() {
        let plan = build(&eagle3()).unwrap();
        let v: Value = serde_json::from_str(&render_json(&plan)).unwrap();
        assert_eq!(v["jobs"].as_array().unwrap().len(), plan.jobs.len());
        assert_eq!(v["jobs"][1]["display_name"], "bench (nccl, 128)");
        assert_eq!(
            v["jobs"][3]["matrix"],
            json!({"allreduce": "custom", "cuda-graph-max-bs": 128, "kernel": "v2"})
        );
    }
}
