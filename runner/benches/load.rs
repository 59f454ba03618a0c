//! `make bench`: loading + validating + planning a large workflow, against a plain
//! `yaml_serde` parse of the same text into a generic value, measured in the same run so the
//! ratio holds on a noisy machine. Goal (issue: the workflow language): ≤ 3×.

#[path = "support.rs"]
mod support;

use std::path::Path;

use gpuflow::diag::SourceFile;
use gpuflow::{check, plan, workflow};

const JOBS: usize = 200;
const STEPS: usize = 20;
const RUNS: usize = 15;

fn main() {
    let text = support::large_workflow(JOBS, STEPS);
    let file = SourceFile::new("large.yml", text.clone());

    // Sanity: the benchmark measures a workflow that is valid and plans to the expected size.
    let (wf, diags) = workflow::load_workflow_in(&file, Path::new("."));
    let wf = wf.expect("the generated workflow loads");
    let checks = check::check_workflow(&wf, &file);
    assert!(
        !diags.has_errors() && !checks.has_errors(),
        "generated workflow is invalid: {diags:?} {checks:?}"
    );
    let planned = plan::build(&plan::from_workflow(&wf, "large").input).expect("plans");
    assert_eq!(planned.jobs.len(), JOBS * 64, "200 jobs × a 4×4×4 matrix");

    let baseline = support::median_time(RUNS, || {
        yaml_serde::from_str::<yaml_serde::Value>(&text).expect("parses")
    });
    let gpuflow = support::median_time(RUNS, || {
        let (wf, diags) = workflow::load_workflow_in(&file, Path::new("."));
        let wf = wf.expect("loads");
        let checks = check::check_workflow(&wf, &file);
        let planned = plan::build(&plan::from_workflow(&wf, "large").input);
        (diags.len(), checks.len(), planned.is_ok())
    });

    // Where the time goes, to steer work on the ratio.
    let load = support::median_time(RUNS, || workflow::load_workflow_in(&file, Path::new(".")));
    let checking = support::median_time(RUNS, || check::check_workflow(&wf, &file));
    let planning = support::median_time(RUNS, || {
        plan::build(&plan::from_workflow(&wf, "large").input)
    });

    let ratio = gpuflow.as_secs_f64() / baseline.as_secs_f64();
    println!(
        "workflow loading: {JOBS} jobs × {STEPS} steps, 4×4×4 matrix ({} KiB, {} planned runs), median of {RUNS}",
        text.len() / 1024,
        planned.jobs.len()
    );
    println!(
        "  yaml_serde parse to a generic value   {:>9.2} ms  (baseline)",
        ms(baseline)
    );
    println!(
        "  gpuflow load + validate + plan        {:>9.2} ms",
        ms(gpuflow)
    );
    println!(
        "    of which: load {:.2} ms, checks {:.2} ms, plan {:.2} ms",
        ms(load),
        ms(checking),
        ms(planning)
    );
    println!(
        "  ratio {ratio:.2}×  (goal ≤ 3×: {})",
        if ratio <= 3.0 { "met" } else { "NOT met" }
    );
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
