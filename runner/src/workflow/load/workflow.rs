//! Reading the top of a workflow file: `name`, `on`, `env`, `defaults`, `concurrency`, and
//! the `jobs` mapping (each job is read by `job.rs`), then checks across jobs (`needs`).

use indexmap::IndexMap;

use super::reader::{Reader, is_valid_id};
use crate::diag::{Span, Spanned, did_you_mean, join_quoted};
use crate::workflow::model::{
    Concurrency, Defaults, DispatchInput, DispatchInputType, GITHUB_ONLY_EVENTS, PushTrigger,
    RunDefaults, SUPPORTED_EVENTS, Triggers, Workflow, WorkflowDispatch,
};
use crate::workflow::yaml::{Node, NodeKind};

const WORKFLOW_KEYS: &[&str] = &[
    "name",
    "run-name",
    "on",
    "env",
    "defaults",
    "concurrency",
    "permissions",
    "jobs",
];

impl Reader {
    /// The workflow in `root`, or `None` when its shape is too broken to make one.
    pub fn workflow(&mut self, root: &Node, ctx: &mut super::LoadContext<'_>) -> Option<Workflow> {
        let Some(entries) = (match &root.kind {
            NodeKind::Map(entries) => Some(entries),
            _ => None,
        }) else {
            let d = self
                .err(root.span, format!("a workflow must be a mapping, found {}", root.kind_name()))
                .label("expected `name:`, `on:`, `jobs:`…")
                .hint("start from `jobs:` with one job, e.g. `jobs: { hello: { steps: [ { run: echo hi } ] } }`");
            self.report(d);
            return None;
        };
        self.check_keys(entries, WORKFLOW_KEYS, &[], "a workflow");
        let mut wf = Workflow {
            file: self.file.clone(),
            ..Workflow::default()
        };
        let mut jobs_node = None;
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "name" => wf.name = self.optional_string("name", v),
                "run-name" => wf.run_name = self.optional_string("run-name", v),
                "on" => wf.on = self.triggers(v),
                "env" => wf.env = self.env("env", v),
                "defaults" => wf.defaults = self.defaults("defaults", v),
                "concurrency" => wf.concurrency = self.concurrency(v),
                "permissions" => {
                    let d = self
                        .warn(e.key.span, "`permissions` is ignored by gpuflow")
                        .label("gpuflow has no GitHub token to restrict");
                    self.report(d);
                }
                "jobs" => jobs_node = Some(e),
                _ => {}
            }
        }
        let Some(jobs) = jobs_node else {
            // `job:` or `Jobs:` already got "did you mean `jobs`?"; one message is enough.
            let misspelt = entries.iter().any(|e| {
                !WORKFLOW_KEYS.contains(&e.key.value.as_str())
                    && did_you_mean(&e.key.value, &["jobs"]).is_some()
            });
            if misspelt {
                return None;
            }
            let d = self
                .err(Span::new(0, 0), "a workflow needs `jobs`")
                .label("no `jobs:` in this file")
                .hint("add `jobs:` with at least one job");
            self.report(d);
            return None;
        };
        let job_entries = self.map("jobs", &jobs.value, "a mapping of job ids to jobs")?;
        if job_entries.is_empty() {
            let d = self
                .err(jobs.key.span, "`jobs` is empty")
                .label("no jobs here")
                .hint("add at least one job: `jobs: { hello: { steps: [ { run: echo hi } ] } }`");
            self.report(d);
        }
        for e in job_entries {
            if !is_valid_id(&e.key.value) {
                let d = self
                    .err(e.key.span, format!("invalid job id `{}`", e.key.value))
                    .label("not a valid job id")
                    .hint("a job id starts with a letter or `_` and holds only letters, digits, `-` and `_`");
                self.report(d);
            }
            if let Some(job) = self.job(&e.key, &e.value, ctx) {
                wf.jobs.insert(e.key.value.clone(), job);
            }
        }
        self.check_needs(
            &wf,
            job_entries.iter().map(|e| e.key.value.as_str()).collect(),
        );
        wf.actions = std::mem::take(&mut ctx.used_actions);
        Some(wf)
    }

    /// Every job named in `needs` exists (cycles are found by `plan`).
    fn check_needs(&mut self, wf: &Workflow, ids: Vec<&str>) {
        for job in wf.jobs.values() {
            let mut seen: Vec<&str> = Vec::new();
            for need in &job.needs {
                if seen.contains(&need.value.as_str()) {
                    let d = self
                        .warn(
                            need.span,
                            format!("job `{}` is listed twice in `needs`", need.value),
                        )
                        .label("listed again here");
                    self.report(d);
                }
                seen.push(&need.value);
                if !ids.contains(&need.value.as_str()) {
                    let others: Vec<&str> =
                        ids.iter().copied().filter(|i| *i != job.id.value).collect();
                    let mut d = self
                        .err(
                            need.span,
                            format!("job `{}` needs unknown job `{}`", job.id.value, need.value),
                        )
                        .label("no job with this id")
                        .maybe_hint(did_you_mean(&need.value, &others));
                    if !others.is_empty() {
                        d = d.note(format!("the jobs are {}", join_quoted(&others, "and")));
                    }
                    self.report(d);
                }
            }
        }
    }

    pub fn defaults(&mut self, key: &str, node: &Node) -> Defaults {
        let mut defaults = Defaults::default();
        let Some(entries) = self.map(key, node, "a mapping with `run`") else {
            return defaults;
        };
        self.check_keys(entries, &["run"], &[], "`defaults`");
        if let Some(run) = entries.iter().find(|e| e.key.value == "run") {
            let Some(run_entries) = self.map(
                "defaults.run",
                &run.value,
                "a mapping with `shell` and `working-directory`",
            ) else {
                return defaults;
            };
            self.check_keys(
                run_entries,
                &["shell", "working-directory"],
                &[],
                "`defaults.run`",
            );
            let mut rd = RunDefaults::default();
            for e in run_entries {
                match e.key.value.as_str() {
                    "shell" => rd.shell = self.shell("defaults.run.shell", &e.value),
                    "working-directory" => {
                        rd.working_directory = self.optional_string("working-directory", &e.value)
                    }
                    _ => {}
                }
            }
            defaults.run = Some(rd);
        }
        defaults
    }

    fn concurrency(&mut self, node: &Node) -> Option<Concurrency> {
        if node.is_null() {
            return None;
        }
        if let Some(group) = node.scalar_string() {
            return Some(Concurrency {
                group,
                cancel_in_progress: None,
            });
        }
        let entries = self.map(
            "concurrency",
            node,
            "a group name or `{group, cancel-in-progress}`",
        )?;
        self.check_keys(
            entries,
            &["group", "cancel-in-progress"],
            &[],
            "`concurrency`",
        );
        let mut group = None;
        let mut cancel = None;
        for e in entries {
            match e.key.value.as_str() {
                "group" => group = self.string("group", &e.value),
                "cancel-in-progress" => cancel = self.bool_or_expr("cancel-in-progress", &e.value),
                _ => {}
            }
        }
        if group.is_none() && !entries.iter().any(|e| e.key.value == "group") {
            let d = self
                .err(node.span, "`concurrency` needs a `group`")
                .label("no `group:` here")
                .hint("add `group: <name>`; runs with the same group never overlap");
            self.report(d);
        }
        Some(Concurrency {
            group: group?,
            cancel_in_progress: cancel,
        })
    }

    fn triggers(&mut self, node: &Node) -> Triggers {
        let mut t = Triggers::default();
        match &node.kind {
            NodeKind::String(_) => {
                let name = Spanned::new(node.text.clone(), node.content);
                self.event(&name, None, &mut t);
            }
            NodeKind::Seq(items) => {
                for item in items {
                    match item.as_str() {
                        Some(s) => {
                            self.event(&Spanned::new(s.to_owned(), item.content), None, &mut t)
                        }
                        None => self.wrong_type("on", item, "an event name"),
                    }
                }
            }
            NodeKind::Map(entries) => {
                for e in entries {
                    self.event(&e.key, Some(&e.value), &mut t);
                }
            }
            _ => self.wrong_type(
                "on",
                node,
                "an event name, a list of them, or a mapping of events to settings",
            ),
        }
        t
    }

    fn event(&mut self, name: &Spanned<String>, settings: Option<&Node>, t: &mut Triggers) {
        match name.value.as_str() {
            "push" => t.push = Some(settings.map(|n| self.push_trigger(n)).unwrap_or_default()),
            "workflow_dispatch" => {
                t.workflow_dispatch = Some(settings.map(|n| self.dispatch(n)).unwrap_or_default());
            }
            other if GITHUB_ONLY_EVENTS.contains(&other) => {
                if other == "workflow_call" {
                    t.workflow_call = Some(name.span);
                }
                let d = self
                    .warn(
                        name.span,
                        format!("gpuflow does not trigger on `{other}`; ignored"),
                    )
                    .label("a GitHub event gpuflow does not see")
                    .note(format!(
                        "gpuflow triggers on {}",
                        join_quoted(SUPPORTED_EVENTS, "and")
                    ));
                self.report(d);
            }
            other => {
                let d = self
                    .err(name.span, format!("unknown event `{other}`"))
                    .label("not an event gpuflow triggers on")
                    .maybe_hint(did_you_mean(other, SUPPORTED_EVENTS))
                    .note(format!(
                        "gpuflow triggers on {}",
                        join_quoted(SUPPORTED_EVENTS, "and")
                    ));
                self.report(d);
            }
        }
    }

    fn push_trigger(&mut self, node: &Node) -> PushTrigger {
        let mut p = PushTrigger::default();
        let keys = [
            "branches",
            "branches-ignore",
            "tags",
            "tags-ignore",
            "paths",
            "paths-ignore",
        ];
        let Some(entries) = self.map("push", node, "a mapping of filters (`branches`, `paths`…)")
        else {
            return p;
        };
        self.check_keys(entries, &keys, &[], "`on.push`");
        for e in entries {
            let key = e.key.value.as_str();
            let target = match key {
                "branches" => &mut p.branches,
                "branches-ignore" => &mut p.branches_ignore,
                "tags" => &mut p.tags,
                "tags-ignore" => &mut p.tags_ignore,
                "paths" => &mut p.paths,
                "paths-ignore" => &mut p.paths_ignore,
                _ => continue,
            };
            *target = self.string_list(key, &e.value, "a glob or a list of globs");
        }
        for (a, b) in [
            ("branches", "branches-ignore"),
            ("tags", "tags-ignore"),
            ("paths", "paths-ignore"),
        ] {
            let (Some(first), Some(second)) = (
                entries.iter().find(|e| e.key.value == a),
                entries.iter().find(|e| e.key.value == b),
            ) else {
                continue;
            };
            let d = self
                .err(
                    second.key.span,
                    format!("`{a}` and `{b}` cannot both be used"),
                )
                .label(format!("`{b}` here"))
                .related(&self.file.clone(), first.key.span, format!("`{a}` here"))
                .hint(format!(
                    "keep `{a}` and write exclusions in it with a leading `!` (`!release/**`)"
                ));
            self.report(d);
        }
        p
    }

    fn dispatch(&mut self, node: &Node) -> WorkflowDispatch {
        let mut w = WorkflowDispatch::default();
        let Some(entries) = self.map("workflow_dispatch", node, "a mapping with `inputs`") else {
            return w;
        };
        self.check_keys(entries, &["inputs"], &[], "`on.workflow_dispatch`");
        let Some(inputs) = entries.iter().find(|e| e.key.value == "inputs") else {
            return w;
        };
        let Some(inputs) = self.map(
            "inputs",
            &inputs.value,
            "a mapping of input names to settings",
        ) else {
            return w;
        };
        let mut out = IndexMap::new();
        for e in inputs {
            if let Some(input) = self.dispatch_input(&e.key, &e.value) {
                out.insert(e.key.value.clone(), input);
            }
        }
        w.inputs = out;
        w
    }

    fn dispatch_input(&mut self, name: &Spanned<String>, node: &Node) -> Option<DispatchInput> {
        let entries = self.map(
            &name.value,
            node,
            "a mapping (`description`, `required`, `default`, `type`, `options`)",
        )?;
        self.check_keys(
            entries,
            &["description", "required", "default", "type", "options"],
            &[],
            "a `workflow_dispatch` input",
        );
        let mut input = DispatchInput {
            name: name.clone(),
            description: None,
            required: false,
            default: None,
            ty: DispatchInputType::String,
            options: Vec::new(),
        };
        let mut ty_span = None;
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "description" => input.description = self.optional_string("description", v),
                "required" => match v.kind {
                    NodeKind::Bool(b) => input.required = b,
                    _ => self.wrong_type("required", v, "`true` or `false`"),
                },
                "default" => input.default = v.scalar_string(),
                "type" => {
                    ty_span = Some(v.span);
                    match v.as_str().and_then(DispatchInputType::from_name) {
                        Some(ty) => input.ty = ty,
                        None => {
                            let d = self
                                .err(v.span, format!("unknown input type `{}`", v.text))
                                .label("not an input type")
                                .maybe_hint(did_you_mean(&v.text, DispatchInputType::NAMES))
                                .note(format!(
                                    "input types are {}",
                                    join_quoted(DispatchInputType::NAMES, "and")
                                ));
                            self.report(d);
                        }
                    }
                }
                "options" => input.options = self.string_list("options", v, "a list of choices"),
                _ => {}
            }
        }
        if input.ty == DispatchInputType::Choice && input.options.is_empty() {
            let d = self
                .err(
                    ty_span.unwrap_or(name.span),
                    format!("choice input `{}` has no `options`", name.value),
                )
                .label("`type: choice` needs options")
                .hint("add `options: [a, b]` listing the allowed values");
            self.report(d);
        }
        if let Some(default) = &input.default {
            let bad = match input.ty {
                DispatchInputType::Boolean => !matches!(default.value.as_str(), "true" | "false"),
                DispatchInputType::Number => default.value.parse::<f64>().is_err(),
                DispatchInputType::Choice => {
                    !input.options.is_empty()
                        && !input.options.iter().any(|o| o.value == default.value)
                }
                DispatchInputType::String | DispatchInputType::Environment => false,
            };
            if bad {
                let expected = match input.ty {
                    DispatchInputType::Boolean => "`true` or `false`".to_owned(),
                    DispatchInputType::Number => "a number".to_owned(),
                    _ => format!(
                        "one of {}",
                        join_quoted(input.options.iter().map(|o| o.value.as_str()), "or")
                    ),
                };
                let d = self
                    .err(
                        default.span,
                        format!(
                            "default `{}` of input `{}` is not {expected}",
                            default.value, name.value
                        ),
                    )
                    .label(format!("expected {expected}"));
                self.report(d);
            }
        }
        Some(input)
    }
}
