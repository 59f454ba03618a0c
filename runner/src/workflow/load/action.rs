//! Reading an action file (`action.yml`): metadata, `inputs`, `outputs`, and
//! `runs: {using: composite, steps}`.

use indexmap::IndexMap;

use super::reader::Reader;
use crate::diag::{Span, Spanned};
use crate::workflow::model::{
    Action, ActionInput, ActionOutput, ActionRuns, GITHUB_ONLY_ACTION_KEYS,
};
use crate::workflow::yaml::{Node, NodeKind};

const ACTION_KEYS: &[&str] = &["name", "description", "author", "inputs", "outputs", "runs"];

impl Reader {
    pub fn action(&mut self, root: &Node, ctx: &mut super::LoadContext<'_>) -> Option<Action> {
        let NodeKind::Map(entries) = &root.kind else {
            let d = self
                .err(
                    root.span,
                    format!("an action must be a mapping, found {}", root.kind_name()),
                )
                .label("expected `name:`, `inputs:`, `runs:`…");
            self.report(d);
            return None;
        };
        self.check_keys(entries, ACTION_KEYS, GITHUB_ONLY_ACTION_KEYS, "an action");
        let mut name = None;
        let mut description = None;
        let mut author = None;
        let mut inputs = IndexMap::new();
        let mut outputs = IndexMap::new();
        let mut runs = None;
        // Only a composite action's outputs need `value` (a JavaScript or Docker action sets
        // them as it runs): an action of another kind gets its one "not supported" error, not
        // one more per output. No `runs.using` (its own error) counts as composite.
        let composite = entries
            .iter()
            .find(|e| e.key.value == "runs")
            .and_then(|e| match &e.value.kind {
                NodeKind::Map(runs) => runs.iter().find(|r| r.key.value == "using"),
                _ => None,
            })
            .and_then(|u| u.value.as_str())
            .is_none_or(|using| using == "composite");
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "name" => name = self.string("name", v),
                "description" => description = self.optional_string("description", v),
                "author" => author = self.optional_string("author", v),
                "inputs" => {
                    for i in self
                        .map("inputs", v, "a mapping of input names to settings")
                        .unwrap_or_default()
                    {
                        if let Some(input) = self.action_input(&i.key, &i.value) {
                            inputs.insert(i.key.value.clone(), input);
                        }
                    }
                }
                "outputs" => {
                    for o in self
                        .map("outputs", v, "a mapping of output names to settings")
                        .unwrap_or_default()
                    {
                        if let Some(output) = self.action_output(&o.key, &o.value, composite) {
                            outputs.insert(o.key.value.clone(), output);
                        }
                    }
                }
                "runs" => runs = self.action_runs(&e.key, v, ctx),
                _ => {}
            }
        }
        for (key, hint) in [
            ("name", "add `name: <action name>`"),
            ("runs", "add `runs: { using: composite, steps: [...] }`"),
        ] {
            if !entries.iter().any(|e| e.key.value == key) {
                let d = self
                    .err(Span::new(0, 0), format!("an action needs `{key}`"))
                    .label(format!("no `{key}:` in this file"))
                    .hint(hint);
                self.report(d);
            }
        }
        Some(Action {
            file: self.file.clone(),
            name: name?,
            description,
            author,
            inputs,
            outputs,
            runs: runs?,
        })
    }

    fn action_input(&mut self, name: &Spanned<String>, node: &Node) -> Option<ActionInput> {
        let entries = self.map(
            &name.value,
            node,
            "a mapping (`description`, `required`, `default`)",
        )?;
        self.check_keys(
            entries,
            &["description", "required", "default", "deprecationMessage"],
            &[],
            "an action input",
        );
        let mut input = ActionInput {
            name: name.clone(),
            description: None,
            required: false,
            default: None,
            deprecation_message: None,
        };
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "description" => input.description = self.optional_string("description", v),
                "required" => match v.kind {
                    NodeKind::Bool(b) => input.required = b,
                    _ => self.wrong_type("required", v, "`true` or `false`"),
                },
                "default" => {
                    input.default = v.scalar_string().or_else(|| {
                        if !v.is_null() {
                            self.wrong_type("default", v, "a string");
                        }
                        None
                    })
                }
                "deprecationMessage" => {
                    input.deprecation_message = self.optional_string("deprecationMessage", v)
                }
                _ => {}
            }
        }
        Some(input)
    }

    fn action_output(
        &mut self,
        name: &Spanned<String>,
        node: &Node,
        composite: bool,
    ) -> Option<ActionOutput> {
        let entries = self.map(&name.value, node, "a mapping (`description`, `value`)")?;
        self.check_keys(entries, &["description", "value"], &[], "an action output");
        let mut description = None;
        let mut value = None;
        for e in entries {
            match e.key.value.as_str() {
                "description" => description = self.optional_string("description", &e.value),
                "value" => value = self.string("value", &e.value),
                _ => {}
            }
        }
        if composite && value.is_none() && !entries.iter().any(|e| e.key.value == "value") {
            let d = self
                .err(name.span, format!("output `{}` has no `value`", name.value))
                .label("a composite action's output needs a value")
                .hint("add `value: ${{ steps.<id>.outputs.<name> }}`");
            self.report(d);
        }
        Some(ActionOutput {
            description,
            value: value?,
        })
    }

    fn action_runs(
        &mut self,
        key: &Spanned<String>,
        node: &Node,
        ctx: &mut super::LoadContext<'_>,
    ) -> Option<ActionRuns> {
        let entries = self.map("runs", node, "a mapping with `using` and `steps`")?;
        let using_entry = entries.iter().find(|e| e.key.value == "using");
        let using = match using_entry {
            None => {
                let d = self
                    .err(key.span, "`runs` needs `using`")
                    .label("no `using:` here")
                    .hint("add `using: composite`");
                self.report(d);
                return None;
            }
            Some(e) => self.string("using", &e.value)?,
        };
        if using.value != "composite" {
            let d = self
                .err(
                    using.span,
                    format!("`{}` actions are not supported yet", using.value),
                )
                .label("gpuflow runs composite actions only")
                .hint("write the action as `using: composite` with `steps:`");
            self.report(d);
            return None;
        }
        self.check_keys(entries, &["using", "steps"], &[], "`runs`");
        let steps = match entries.iter().find(|e| e.key.value == "steps") {
            Some(e) => self.steps(&e.key, &e.value, ctx),
            None => {
                let d = self
                    .err(key.span, "a composite action needs `steps`")
                    .label("no `steps:` here")
                    .hint("add `steps:` with at least one step");
                self.report(d);
                Vec::new()
            }
        };
        Some(ActionRuns { using, steps })
    }
}
