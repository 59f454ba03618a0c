//! Checks every `${{ }}` expression and `if:` condition of a loaded workflow or action against
//! what is knowable before running: syntax (with the column inside the expression), contexts
//! available at that place, `steps.<id>` naming an earlier step of the same job, `matrix.<key>`
//! naming a key of the job's matrix, `needs.<job>` naming a job in `needs`, `inputs.<name>`
//! naming a declared input, and outputs that a built-in step or action declares.
//!
//! Spans: the loader gives each string the span of its text in the file; an expression's
//! offset inside the string is mapped back by [`locate`], which copes with quoted and block
//! scalars whose text is not byte-for-byte the file's.

use std::sync::Arc;

use indexmap::IndexMap;

use super::availability::Place;
use crate::diag::{Diagnostic, Diagnostics, SourceFile, Span, Spanned, did_you_mean, join_quoted};
use crate::expr::{
    ContextAccess, Expr, ExprError, eq_ignore_case, parse_condition, parse_template,
};
use crate::steps;
use crate::workflow::model::{Action, Step, Uses, Value};

/// What is known about one step, for checking `steps.<id>.outputs.<name>`.
#[derive(Clone, Debug)]
pub(super) struct StepFacts {
    pub id: String,
    /// Declared outputs, when the step is a built-in or an action that declares them;
    /// `None` for `run:` steps, whose outputs are whatever they write.
    pub outputs: Option<Vec<String>>,
}

impl StepFacts {
    pub(super) fn of_steps(steps: &[Step], actions: &IndexMap<String, Action>) -> Vec<Self> {
        steps
            .iter()
            .filter_map(|s| {
                let id = s.id.as_ref()?.value.clone();
                let outputs = s.uses.as_ref().and_then(|u| match &u.value {
                    Uses::Builtin(name) => steps::builtin(name).and_then(|b| {
                        let mut names: Vec<String> =
                            b.outputs.iter().map(|o| o.name.to_owned()).collect();
                        // A scripted benchmark's outputs are its metrics: known when
                        // `metrics:` is written out, anything when it is an expression.
                        if name == "benchmark" && s.with.contains_key("command") {
                            match s.with.get("metrics").map(|m| &m.value) {
                                Some(Value::Map(m)) => {
                                    names.extend(m.keys().cloned());
                                }
                                _ => return None,
                            }
                        }
                        // Several metrics compared: each has its own outputs too.
                        if name == "compare-to-baseline"
                            && let Some(Value::List(metrics)) =
                                s.with.get("metrics").map(|m| &m.value)
                        {
                            for m in metrics.iter().filter_map(|m| m.value.as_str()) {
                                for o in [
                                    "verdict",
                                    "ratio",
                                    "change-pct",
                                    "p-value",
                                    "threshold",
                                    "baseline",
                                ] {
                                    names.push(format!("{m}-{o}"));
                                }
                            }
                        }
                        Some(names)
                    }),
                    Uses::Local(_) | Uses::Remote { .. } => actions
                        .get(&u.value.action_key()?)
                        .map(|a| a.outputs.keys().cloned().collect()),
                    _ => None,
                });
                Some(Self { id, outputs })
            })
            .collect()
    }
}

/// What an expression at a given place may refer to.
#[derive(Clone, Debug, Default)]
pub(super) struct Scope {
    /// Steps of the job (or action), in order, and how many of them run before this one:
    /// `steps.X` may only name those.
    pub steps: Vec<StepFacts>,
    pub steps_before: usize,
    /// Keys of the job's matrix; `None` when the matrix is computed at run time, so any key
    /// may exist.
    pub matrix_keys: Option<Vec<String>>,
    /// Jobs in this job's `needs`, with the outputs each declares.
    pub needs: Vec<(String, Vec<String>)>,
    /// Declared inputs (`workflow_dispatch` or the action's); `None` when unknown.
    pub inputs: Option<Vec<String>>,
    /// What `inputs` are called in messages: "workflow_dispatch inputs" or "the action's inputs".
    pub inputs_owner: &'static str,
    /// The workflow is also `on: workflow_call` (ignored by gpuflow): an undeclared input is
    /// then most likely one of its inputs, which is worth saying rather than "not declared".
    pub workflow_call: bool,
}

pub(super) struct ExprChecker<'a> {
    pub file: &'a Arc<SourceFile>,
    pub diags: Diagnostics,
}

impl<'a> ExprChecker<'a> {
    pub(super) fn new(file: &'a Arc<SourceFile>) -> Self {
        Self {
            file,
            diags: Diagnostics::new(),
        }
    }

    /// A string value that may embed `${{ }}`.
    pub(super) fn template(&mut self, s: &Spanned<String>, place: Place, scope: &Scope) {
        if !s.value.contains("${{") {
            return;
        }
        match parse_template(&s.value) {
            Ok(t) => {
                for (expr, range) in t.expressions() {
                    self.expression(s, expr, range, place, scope);
                }
            }
            Err(e) => self.syntax_error(s, &e),
        }
    }

    /// An `if:` condition (bare or wrapped in `${{ }}`).
    pub(super) fn condition(&mut self, s: &Spanned<String>, place: Place, scope: &Scope) {
        match parse_condition(&s.value) {
            Ok(c) => {
                let range = 0..s.value.len();
                self.expression(s, c.expr(), range, place, scope);
            }
            Err(e) => self.syntax_error(s, &e),
        }
    }

    /// Every string inside a `with:` value.
    pub(super) fn value(&mut self, v: &Spanned<Value>, place: Place, scope: &Scope) {
        match &v.value {
            Value::String(text) => {
                self.template(&Spanned::new(text.clone(), v.span), place, scope);
            }
            Value::List(items) => items.iter().for_each(|i| self.value(i, place, scope)),
            Value::Map(entries) => entries.values().for_each(|i| self.value(i, place, scope)),
            _ => {}
        }
    }

    fn syntax_error(&mut self, s: &Spanned<String>, e: &ExprError) {
        let span = locate(self.file, s, e.span.clone());
        let d = Diagnostic::error(
            self.file,
            span,
            format!("invalid expression: {}", e.message),
        )
        .label(e.message.clone())
        .maybe_hint(e.hint.clone());
        self.diags.push(d);
    }

    fn expression(
        &mut self,
        s: &Spanned<String>,
        expr: &Expr,
        range: std::ops::Range<usize>,
        place: Place,
        scope: &Scope,
    ) {
        if expr.calls_status_function() && !place.allows_status_functions() {
            let d = Diagnostic::error(
                self.file,
                locate(self.file, s, range.clone()),
                format!(
                    "status functions (`success()`, `failure()`, `always()`, `cancelled()`) cannot be used in {}",
                    place.describe()
                ),
            )
            .label("only meaningful in `if:`")
            .hint("move the condition to the step's or job's `if:`");
            self.diags.push(d);
        }
        if !place.allows_hash_files() && mentions_hash_files(&s.value[range.clone()]) {
            let d = Diagnostic::error(
                self.file,
                locate(self.file, s, range),
                format!("`hashFiles` cannot be used in {}", place.describe()),
            )
            .label("files are only there once the job's steps run")
            .hint("use `hashFiles` in a step's `run`, `with`, `env` or `if`");
            self.diags.push(d);
        }
        for access in expr.context_accesses() {
            self.access(s, &access, place, scope);
        }
    }

    fn access(&mut self, s: &Spanned<String>, a: &ContextAccess, place: Place, scope: &Scope) {
        let Some(context) = a.path.first() else {
            return;
        };
        let context = context.to_ascii_lowercase();
        let span = locate(self.file, s, a.span.clone());
        let allowed = place.contexts();
        if !allowed.contains(&context.as_str()) {
            let known = ALL_CONTEXTS.contains(&context.as_str());
            let message = if known {
                format!(
                    "the `{context}` context is not available in {}",
                    place.describe()
                )
            } else {
                format!("unknown context `{context}`")
            };
            let d = Diagnostic::error(self.file, span, message)
                .label(if known {
                    "not available here"
                } else {
                    "no such context"
                })
                .note(format!("available here: {}", join_quoted(allowed, "and")))
                .maybe_hint(if known {
                    None
                } else {
                    did_you_mean(&context, allowed)
                });
            self.diags.push(d);
            return;
        }
        let rest: Vec<&str> = a.path[1..].iter().map(String::as_str).collect();
        match context.as_str() {
            "steps" => self.steps_access(span, &rest, scope),
            "matrix" => self.matrix_access(span, &rest, scope),
            "needs" => self.needs_access(span, &rest, scope),
            "inputs" => self.inputs_access(span, &rest, scope),
            _ => {}
        }
    }

    fn steps_access(&mut self, span: Span, rest: &[&str], scope: &Scope) {
        let Some(id) = rest.first() else { return };
        // Property names are case-insensitive in the expression language (as on GitHub): the
        // checks compare them the same way, so they refuse nothing that evaluation accepts.
        let Some(position) = scope.steps.iter().position(|f| eq_ignore_case(&f.id, id)) else {
            let ids: Vec<&str> = scope.steps.iter().map(|f| f.id.as_str()).collect();
            let mut d = Diagnostic::error(self.file, span, format!("no step has the id `{id}`"))
                .label("unknown step id")
                .maybe_hint(did_you_mean(id, &ids));
            d = if ids.is_empty() {
                d.note("give the step an `id:` to read its outputs")
            } else {
                d.note(format!(
                    "step ids in this job: {}",
                    join_quoted(&ids, "and")
                ))
            };
            self.diags.push(d);
            return;
        };
        if position >= scope.steps_before {
            let d = Diagnostic::error(
                self.file,
                span,
                format!("step `{id}` has not run yet at this point"),
            )
            .label("refers to this step or a later one")
            .hint("a step can only read `steps.<id>` of the steps before it");
            self.diags.push(d);
            return;
        }
        let Some(field) = rest.get(1) else { return };
        const FIELDS: [&str; 3] = ["outputs", "outcome", "conclusion"];
        let Some(field) = FIELDS.iter().copied().find(|f| eq_ignore_case(f, field)) else {
            let d = Diagnostic::error(
                self.file,
                span,
                format!("`steps.{id}` has no property `{field}`"),
            )
            .label("not a property of a step")
            .note("a step has `outputs`, `outcome` and `conclusion`")
            .maybe_hint(did_you_mean(field, &FIELDS));
            self.diags.push(d);
            return;
        };
        if let ("outputs", Some(name), Some(declared)) =
            (field, rest.get(2), &scope.steps[position].outputs)
            && !declared.iter().any(|o| eq_ignore_case(o, name))
        {
            let d = Diagnostic::error(
                self.file,
                span,
                format!("step `{id}` has no output `{name}`"),
            )
            .label("not an output of this step")
            .note(if declared.is_empty() {
                "it declares no outputs".to_owned()
            } else {
                format!("its outputs: {}", join_quoted(declared, "and"))
            })
            .maybe_hint(did_you_mean(name, declared));
            self.diags.push(d);
        }
    }

    fn matrix_access(&mut self, span: Span, rest: &[&str], scope: &Scope) {
        let (Some(key), Some(keys)) = (rest.first(), &scope.matrix_keys) else {
            return;
        };
        if keys.iter().any(|k| eq_ignore_case(k, key)) {
            return;
        }
        let d = if keys.is_empty() {
            Diagnostic::error(
                self.file,
                span,
                format!("`matrix.{key}` is used, but this job has no matrix"),
            )
            .label("no `strategy.matrix` in this job")
            .hint(format!(
                "add `strategy: {{ matrix: {{ {key}: [...] }} }}` to the job"
            ))
        } else {
            Diagnostic::error(self.file, span, format!("the matrix has no key `{key}`"))
                .label("not a matrix key")
                .note(format!("matrix keys: {}", join_quoted(keys, "and")))
                .maybe_hint(did_you_mean(key, keys))
        };
        self.diags.push(d);
    }

    fn needs_access(&mut self, span: Span, rest: &[&str], scope: &Scope) {
        let Some(job) = rest.first() else { return };
        let Some((_, outputs)) = scope.needs.iter().find(|(id, _)| eq_ignore_case(id, job)) else {
            let ids: Vec<&str> = scope.needs.iter().map(|(id, _)| id.as_str()).collect();
            let d = Diagnostic::error(
                self.file,
                span,
                format!("`needs.{job}` is used, but `{job}` is not in this job's `needs`"),
            )
            .label("not a job this one needs")
            .maybe_hint(did_you_mean(job, &ids).or_else(|| {
                Some(format!(
                    "add `{job}` to `needs:` so its results exist when this job runs"
                ))
            }));
            self.diags.push(d);
            return;
        };
        match (rest.get(1), rest.get(2)) {
            (Some(field), Some(name))
                if eq_ignore_case(field, "outputs")
                    && !outputs.iter().any(|o| eq_ignore_case(o, name)) =>
            {
                let d = Diagnostic::error(
                    self.file,
                    span,
                    format!("job `{job}` has no output `{name}`"),
                )
                .label("not declared in the job's `outputs`")
                .maybe_hint(did_you_mean(name, outputs))
                .note(if outputs.is_empty() {
                    format!("job `{job}` declares no `outputs`")
                } else {
                    format!("its outputs: {}", join_quoted(outputs, "and"))
                });
                self.diags.push(d);
            }
            (Some(field), _)
                if !["outputs", "result"]
                    .iter()
                    .any(|f| eq_ignore_case(f, field)) =>
            {
                let d = Diagnostic::error(
                    self.file,
                    span,
                    format!("`needs.{job}` has no property `{field}`"),
                )
                .label("not a property of a needed job")
                .note("a needed job has `outputs` and `result`")
                .maybe_hint(did_you_mean(field, &["outputs", "result"]));
                self.diags.push(d);
            }
            _ => {}
        }
    }

    fn inputs_access(&mut self, span: Span, rest: &[&str], scope: &Scope) {
        let (Some(name), Some(declared)) = (rest.first(), &scope.inputs) else {
            return;
        };
        if declared.iter().any(|i| eq_ignore_case(i, name)) {
            return;
        }
        if scope.workflow_call {
            let d = Diagnostic::error(
                self.file,
                span,
                format!("`inputs.{name}` reads a `workflow_call` input, which gpuflow does not support"),
            )
            .label("gpuflow ignores `on.workflow_call` and its inputs")
            .note(if declared.is_empty() {
                "no `workflow_dispatch` inputs are declared".to_owned()
            } else {
                format!("`workflow_dispatch` inputs: {}", join_quoted(declared, "and"))
            })
            .hint(format!(
                "declare `{name}` under `on.workflow_dispatch.inputs` and give it with `gpuflow run --input {name}=...`"
            ));
            self.diags.push(d);
            return;
        }
        let mut d = Diagnostic::error(self.file, span, format!("input `{name}` is not declared"))
            .label(format!("not one of {}", scope.inputs_owner))
            .maybe_hint(did_you_mean(name, declared));
        d = if declared.is_empty() {
            d.note("no inputs are declared")
        } else {
            d.note(format!("declared: {}", join_quoted(declared, "and")))
        };
        self.diags.push(d);
    }
}

/// Every context name GitHub (and gpuflow) knows, to tell "not available here" from "unknown".
const ALL_CONTEXTS: &[&str] = &[
    "github", "gpuflow", "env", "vars", "job", "jobs", "steps", "runner", "secrets", "strategy",
    "matrix", "needs", "inputs",
];

fn mentions_hash_files(text: &str) -> bool {
    text.to_ascii_lowercase().contains("hashfiles(")
}

/// Maps a byte range of a string's value to a span in the file.
///
/// For a plain or simple quoted scalar the value's bytes are the file's, so an offset maps
/// directly. Escapes, folded lines and block-scalar indentation break that, so the range's
/// own text is searched for in the file from the scalar's start (the occurrence with the same
/// index as in the value); if it is not found verbatim, the whole scalar is pointed at.
pub(super) fn locate(
    file: &SourceFile,
    s: &Spanned<String>,
    range: std::ops::Range<usize>,
) -> Span {
    let Some(needle) = s.value.get(range.clone()) else {
        return s.span;
    };
    let direct = s.span.start + range.start..s.span.start + range.end;
    if file.text.get(direct.clone()) == Some(needle) {
        return Span::from(direct);
    }
    if needle.is_empty() {
        return s.span;
    }
    let nth = s.value[..range.start].matches(needle).count();
    let region_end = (s.span.end.max(s.span.start) + s.value.len() * 2).min(file.text.len());
    let Some(region) = file.text.get(s.span.start..region_end) else {
        return s.span;
    };
    region
        .match_indices(needle)
        .nth(nth)
        .map_or(s.span, |(at, _)| {
            Span::new(s.span.start + at, s.span.start + at + needle.len())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_maps_plain_and_block_scalars() {
        let text = "run: echo ${{ a }}\nblock: |\n  x\n  y ${{ b }}\n";
        let file = SourceFile::new("w.yml", text);
        let plain = Spanned::new("echo ${{ a }}".to_owned(), Span::new(5, 18));
        assert_eq!(locate(&file, &plain, 9..10), Span::new(14, 15));
        // A block scalar loses its indentation: offsets drift, the text is found anyway.
        let start = text.find("  x").unwrap() + 2;
        let block = Spanned::new("x\ny ${{ b }}\n".to_owned(), Span::new(start, text.len()));
        let b = block.value.find('b').unwrap();
        let span = locate(&file, &block, b..b + 1);
        assert_eq!(&text[span.range()], "b");
        assert_eq!(span.start, text.rfind('b').unwrap());
    }

    #[test]
    fn an_undeclared_input_without_any_inputs_says_so() {
        let file = SourceFile::new("w.yml", "jobs: {a: {steps: [{run: '${{ inputs.x }}'}]}}\n");
        let (wf, _) =
            crate::workflow::load_workflow_in(&file, std::path::Path::new("/nonexistent"));
        let diags = super::super::check_workflow(&wf.unwrap(), &file);
        let d = diags.iter().next().unwrap();
        assert_eq!(d.message, "input `x` is not declared");
        assert_eq!(d.notes, ["no inputs are declared"]);
    }

    #[test]
    fn a_workflow_call_input_is_said_to_be_unsupported() {
        let text = "on:\n  workflow_call:\n    inputs:\n      model: {type: string}\njobs:\n  a:\n    steps:\n      - run: echo ${{ inputs.model }}\n";
        let file = SourceFile::new("w.yml", text);
        let (wf, _) =
            crate::workflow::load_workflow_in(&file, std::path::Path::new("/nonexistent"));
        let diags = super::super::check_workflow(&wf.unwrap(), &file);
        let d = diags.iter().find(|d| d.is_error()).unwrap();
        assert_eq!(
            d.message,
            "`inputs.model` reads a `workflow_call` input, which gpuflow does not support"
        );
        assert_eq!(d.location(), "w.yml:8:23");
        assert!(d.hints[0].contains("on.workflow_dispatch.inputs"), "{d:?}");
    }

    #[test]
    fn property_names_are_compared_case_insensitively() {
        // What `gpuflow eval` accepts (property names are case-insensitive) validates too.
        let text = r#"on:
  workflow_dispatch:
    inputs:
      Model: {default: m}
jobs:
  Prep:
    outputs:
      Path: ${{ steps.Find.outputs.Dir }}
    steps:
      - id: Find
        run: echo dir=x >> "$GITHUB_OUTPUT"
  b:
    needs: Prep
    strategy:
      matrix:
        RUSTFLAGS: [a, b]
    steps:
      - id: Build
        uses: benchmark
        with:
          command: ./bench.sh
          metrics: {Speed: {regex: 'x(?P<value>1)'}}
      - run: echo ${{ matrix.rustflags }} ${{ inputs.MODEL }} ${{ needs.prep.Outputs.path }} ${{ NEEDS.PREP.RESULT }} ${{ steps.build.OUTPUTS.speed }} ${{ steps.BUILD.Outcome }}
      - run: echo ${{ matrix.nope }} ${{ steps.build.outputs.nope }}
"#;
        let file = SourceFile::new("w.yml", text);
        let (wf, _) =
            crate::workflow::load_workflow_in(&file, std::path::Path::new("/nonexistent"));
        let diags = super::super::check_workflow(&wf.unwrap(), &file);
        let messages: Vec<&str> = diags
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.message.as_str())
            .collect();
        assert_eq!(
            messages,
            [
                "the matrix has no key `nope`",
                "step `build` has no output `nope`"
            ]
        );
    }

    #[test]
    fn scripted_benchmark_metrics_and_compared_metrics_are_outputs() {
        let text = r#"on: workflow_dispatch
jobs:
  a:
    steps:
      - id: b
        uses: benchmark
        with:
          command: ./bench.sh
          metrics: {speed: {regex: 'x(?P<value>1)'}}
      - id: c
        uses: compare-to-baseline
        with:
          metrics: [speed, other]
      - run: echo ${{ steps.b.outputs.speed }} ${{ steps.c.outputs.other-verdict }} ${{ steps.b.outputs.nope }}
"#;
        let file = SourceFile::new("w.yml", text);
        let (wf, _) =
            crate::workflow::load_workflow_in(&file, std::path::Path::new("/nonexistent"));
        let diags = super::super::check_workflow(&wf.unwrap(), &file);
        let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(messages, ["step `b` has no output `nope`"]);
    }
}
