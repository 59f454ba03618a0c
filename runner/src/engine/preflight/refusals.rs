//! Refusals before anything starts: steps gpuflow cannot run are errors at their `uses:`,
//! never silent skips found halfway through a run. `gpuflow validate` reports the same
//! problems (through [`check_steps`]), so a file that validates is not refused here.

use indexmap::IndexMap;

use crate::diag::{Diagnostic, Diagnostics};
use crate::workflow::model::{Action, Step, Uses, Workflow};

/// Every step of the workflow (and of the local actions it uses) the engine cannot run.
pub fn check(wf: &Workflow) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for job in wf.jobs.values() {
        check_steps(&job.steps, &wf.file, Some(&wf.actions), &mut diags);
    }
    for action in wf.actions.values() {
        check_steps(
            &action.runs.steps,
            &action.file,
            Some(&wf.actions),
            &mut diags,
        );
    }
    diags.sorted()
}

/// The steps of `steps` (in `file`) the engine cannot run. `actions`: the actions loaded with
/// the workflow; `None` for an action checked on its own, whose remote actions are not
/// loaded, so they are not judged.
pub fn check_steps(
    steps: &[Step],
    file: &std::sync::Arc<crate::diag::SourceFile>,
    actions: Option<&IndexMap<String, Action>>,
    diags: &mut Diagnostics,
) {
    for step in steps {
        let Some(uses) = &step.uses else { continue };
        let d = match &uses.value {
            // Loaded remote actions run; the others (GitHub's JavaScript actions) cannot.
            remote @ Uses::Remote { .. }
                if actions.is_some_and(|a| !a.contains_key(&remote.to_string())) =>
            {
                Diagnostic::error(
                    file,
                    uses.span,
                    format!("the remote action `{remote}` cannot run"),
                )
                .label("not a composite action gpuflow has loaded")
                .hint("use a composite action (docs/actions.md), or a `run:` step doing the same")
            }
            Uses::Docker(image) => Diagnostic::error(
                file,
                uses.span,
                format!("`docker://{image}` steps are not supported yet"),
            )
            .label("not runnable yet")
            .hint("start the image with `uses: start-container` and run commands in it with `container:`"),
            _ => continue,
        };
        diags.push(d);
    }
}
