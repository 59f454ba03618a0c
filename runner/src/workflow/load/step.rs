//! Reading one step: `run` xor `uses`, the `uses:` forms, and `with:` checked against what the
//! step takes: a built-in's declared inputs, or a local action's `inputs`.

use std::sync::Arc;

use indexmap::IndexMap;

use super::inputs::check_input_value;
use super::reader::{Reader, is_expression, is_valid_id, to_value};
use crate::diag::{SourceFile, Span, Spanned, did_you_mean, join_quoted};
use crate::steps;
use crate::workflow::model::{Action, Step, Uses, Value};
use crate::workflow::yaml::{MapEntry, Node};

/// The GitHub organisation of GitHub's own actions (`actions/checkout`, `actions/setup-python`):
/// JavaScript actions (`using: node20`) gpuflow cannot run, so they are never fetched.
const GITHUB_JS_OWNER: &str = "actions";

const STEP_KEYS: &[&str] = &[
    "id",
    "name",
    "if",
    "run",
    "shell",
    "working-directory",
    "container",
    "uses",
    "with",
    "env",
    "timeout-minutes",
    "continue-on-error",
];

/// The shells a `run:` step can name; anything else must be a command with `{0}`.
/// `python3` is what the engine runs for `python` where there is no `python`.
const SHELLS: &[&str] = &["bash", "sh", "python", "python3"];

impl Reader {
    /// `shell:` of a step or of `defaults.run`: one of [`SHELLS`], a command line with `{0}`
    /// for the script's path, or an expression. Refused here rather than when the step runs,
    /// where `shell: foo` would otherwise be run as `foo <script>`, whatever `foo` is.
    pub fn shell(&mut self, key: &str, node: &Node) -> Option<Spanned<String>> {
        let shell = self.optional_string(key, node)?;
        let text = shell.value.trim();
        if SHELLS.contains(&text) || text.contains("{0}") || is_expression(text) {
            return Some(shell);
        }
        let first = text.split_whitespace().next().unwrap_or(text);
        let d = self
            .err(shell.span, format!("unknown shell `{}`", shell.value))
            .label("not a shell gpuflow runs")
            .note("`shell` is `bash`, `sh`, `python`, or a command with `{0}` for the script's path (`perl {0}`)")
            .hint(did_you_mean(first, SHELLS).unwrap_or_else(|| {
                format!("to run the script with `{first}`, write `shell: {text} {{0}}`")
            }));
        self.report(d);
        None
    }

    pub fn step(&mut self, node: &Node, ctx: &mut super::LoadContext<'_>) -> Option<Step> {
        let entries = self.map("steps", node, "a step (a mapping with `run` or `uses`)")?;
        if node.is_null() {
            let d = self
                .err(node.span, "empty step")
                .label("this step has nothing to run")
                .hint("give it `run: <script>` or `uses: <step>`");
            self.report(d);
            return None;
        }
        self.check_keys(entries, STEP_KEYS, &[], "a step");
        let (mut step, with_entry) = self.step_keys(node.span, entries);
        self.check_run_or_uses(entries, node.span);
        let with = with_entry
            .and_then(|w| self.map("with", &w.value, "a mapping of input names to values"));
        match with {
            Some(entries) => self.read_with(&mut step, entries, ctx),
            None if with_entry.is_none() => {
                if let Some(uses) = step.uses.clone() {
                    self.check_with(&uses, &IndexMap::new(), &IndexMap::new(), ctx);
                }
            }
            // A `with:` that is no mapping is reported by `map`.
            None => {}
        }
        Some(step)
    }

    /// The step's keys, each read as its type; `with:` is returned as written, to be read
    /// once the step's kind is known.
    fn step_keys<'e>(
        &mut self,
        span: Span,
        entries: &'e [MapEntry],
    ) -> (Step, Option<&'e MapEntry>) {
        let mut step = Step {
            span,
            id: None,
            name: None,
            condition: None,
            run: None,
            shell: None,
            working_directory: None,
            container: None,
            uses: None,
            with: IndexMap::new(),
            env: IndexMap::new(),
            timeout_minutes: None,
            continue_on_error: None,
        };
        let mut with_entry: Option<&MapEntry> = None;
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "id" => step.id = self.step_id(v),
                "name" => step.name = self.optional_string("name", v),
                "if" => step.condition = self.optional_string("if", v),
                "run" => step.run = self.string("run", v),
                "shell" => step.shell = self.shell("shell", v),
                "working-directory" => {
                    step.working_directory = self.optional_string("working-directory", v)
                }
                "container" => step.container = self.optional_string("container", v),
                "uses" => {
                    if let Some(s) = self.string("uses", v) {
                        step.uses = self.parse_uses(&s);
                    }
                }
                "with" => with_entry = Some(e),
                "env" => step.env = self.env("env", v),
                "timeout-minutes" => {
                    step.timeout_minutes =
                        self.positive_or_expr("timeout-minutes", v, "minutes", false)
                }
                "continue-on-error" => {
                    step.continue_on_error = self.bool_or_expr("continue-on-error", v)
                }
                _ => {}
            }
        }
        (step, with_entry)
    }

    /// `id:`, which must be a valid identifier (it is reported, and kept, when it is not).
    fn step_id(&mut self, v: &Node) -> Option<Spanned<String>> {
        let id = self.optional_string("id", v);
        if let Some(id) = &id
            && !is_valid_id(&id.value)
        {
            let d = self
                .err(v.span, format!("invalid step id `{}`", id.value))
                .label("not a valid step id")
                .hint("a step id starts with a letter or `_` and holds only letters, digits, `-` and `_`");
            self.report(d);
        }
        id
    }

    /// A step has `run` or `uses`, not both and not neither, and no key of the other kind.
    fn check_run_or_uses(&mut self, entries: &[MapEntry], span: Span) {
        let key = |name: &str| entries.iter().find(|e| e.key.value == name);
        match (key("run"), key("uses")) {
            (Some(run), Some(uses)) => {
                let d = self
                    .err(uses.key.span, "a step has either `run` or `uses`, not both")
                    .label("`uses` here")
                    .related(&self.file.clone(), run.key.span, "`run` here")
                    .hint("split it into two steps");
                self.report(d);
            }
            (None, None) => {
                let d = self
                    .err(
                        first_key_span(entries, span),
                        "a step needs `run` or `uses`",
                    )
                    .label("this step has nothing to run")
                    .hint("add `run: <script>`, or `uses: <built-in or ./action>`");
                self.report(d);
            }
            (Some(_), None) => {
                if let Some(e) = key("with") {
                    let d = self
                        .err(e.key.span, "`with` only applies to `uses` steps")
                        .label("this is a `run` step")
                        .hint("pass values to a script through `env:`, or remove `with:`");
                    self.report(d);
                }
            }
            (None, Some(_)) => {
                for name in ["shell", "working-directory", "container"] {
                    if let Some(e) = key(name) {
                        let d = self
                            .err(e.key.span, format!("`{name}` only applies to `run` steps"))
                            .label("this is a `uses` step")
                            .hint(format!(
                                "remove `{name}:`, or pass it to the step through `with:`"
                            ));
                        self.report(d);
                    }
                }
            }
        }
    }

    /// `with:`'s values (a null one as empty text), checked against what the step takes.
    fn read_with(
        &mut self,
        step: &mut Step,
        entries: &[MapEntry],
        ctx: &mut super::LoadContext<'_>,
    ) {
        step.with = entries
            .iter()
            .map(|e| {
                let mut v = to_value(&e.value, true);
                if e.value.is_null() {
                    v.value = Value::String(String::new());
                }
                (e.key.value.clone(), v)
            })
            .collect();
        let keys: IndexMap<String, Span> = entries
            .iter()
            .map(|e| (e.key.value.clone(), e.key.span))
            .collect();
        if let Some(uses) = step.uses.clone() {
            self.check_with(&uses, &step.with, &keys, ctx);
        }
    }

    /// `wait-for-health`, `./path`, `owner/repo[/path]@ref` or `docker://image`.
    fn parse_uses(&mut self, s: &Spanned<String>) -> Option<Spanned<Uses>> {
        let text = s.value.trim();
        let uses = if let Some(image) = text.strip_prefix("docker://") {
            (!image.is_empty()).then(|| Uses::Docker(image.to_owned()))
        } else if text.starts_with("./") || text.starts_with("../") {
            Some(Uses::Local(text.to_owned()))
        } else if !text.contains('/') && !text.contains('@') {
            if is_expression(text) {
                let d = self
                    .err(s.span, "`uses` cannot be an expression")
                    .label("decided when the file is read, not when it runs")
                    .hint("write the step's name; use `if:` to choose between steps");
                self.report(d);
                return None;
            }
            let Some(_) = steps::builtin(text) else {
                let names: Vec<&str> = steps::builtins().map(|b| b.name).collect();
                let d = self
                    .err(s.span, format!("unknown built-in step `{text}`"))
                    .label("not a built-in step")
                    .maybe_hint(did_you_mean(text, &names))
                    .note(format!("the built-in steps are {}", join_quoted(&names, "and")))
                    .note("a local action is written `./path/to/action`, a remote one `owner/repo@ref`");
                self.report(d);
                return None;
            };
            Some(Uses::Builtin(text.to_owned()))
        } else {
            parse_remote(text)
        };
        if let Some(problem) = uses.as_ref().and_then(path_problem) {
            let d = self
                .err(s.span, format!("the action path in `{text}` has {problem}"))
                .label("this path could lead out of the repository")
                .hint("name the action's folder from the repository root, without `.`, `..` or `//`: `./actions/name`, or `owner/repo/path/to/action@ref`");
            self.report(d);
            return None;
        }
        match uses {
            Some(u) => Some(Spanned::new(u, s.span)),
            None => {
                let d = self
                    .err(s.span, format!("`{text}` is not a step gpuflow can use"))
                    .label("unknown `uses:` form")
                    .hint("write a built-in name (`wait-for-health`), a local action (`./actions/name`), `owner/repo[/path]@ref`, or `docker://image`");
                self.report(d);
                None
            }
        }
    }

    fn check_with(
        &mut self,
        uses: &Spanned<Uses>,
        with: &IndexMap<String, Spanned<Value>>,
        keys: &IndexMap<String, Span>,
        ctx: &mut super::LoadContext<'_>,
    ) {
        match &uses.value {
            Uses::Builtin(name) => self.check_builtin_inputs(name, uses.span, with, keys),
            Uses::Local(path) => {
                if let Some((file, action)) = self.local_action(path, uses.span, ctx) {
                    self.check_action_inputs(path, uses.span, &file, &action, keys);
                }
            }
            Uses::Remote {
                owner,
                repo,
                path,
                git_ref,
            } if owner == GITHUB_JS_OWNER => {
                // An error, not a warning: `gpuflow run` refuses the step, and a file that
                // validates must run.
                let d = self
                    .err(
                        uses.span,
                        format!("`{}` is one of GitHub's JavaScript actions, which gpuflow does not run", uses.value),
                    )
                    .label("not fetched; `gpuflow run` refuses this step")
                    .hint("a run already happens in the repository's checkout: drop `actions/checkout`; for the others, a `run:` step or a container does the same");
                self.report(d);
            }
            Uses::Remote {
                owner,
                repo,
                path,
                git_ref,
            } => {
                let remote = super::RemoteAction {
                    owner,
                    repo,
                    path: path.as_deref(),
                    git_ref,
                };
                let key = uses.value.to_string();
                if let Some((file, action)) = self.remote_action(&key, &remote, uses.span, ctx) {
                    self.check_action_inputs(&key, uses.span, &file, &action, keys);
                }
            }
            Uses::Docker(_) => {}
        }
    }

    fn check_builtin_inputs(
        &mut self,
        name: &str,
        uses_span: Span,
        with: &IndexMap<String, Spanned<Value>>,
        keys: &IndexMap<String, Span>,
    ) {
        let Some(spec) = steps::builtin(name) else {
            return;
        };
        let names: Vec<&str> = spec.input_names().collect();
        for (input, value) in with {
            let key_span = keys.get(input).copied().unwrap_or(value.span);
            let Some(input_spec) = spec.input(input) else {
                let d = self
                    .err(key_span, format!("unknown input `{input}` of `{name}`"))
                    .label(format!("`{name}` has no such input"))
                    .maybe_hint(did_you_mean(input, &names))
                    .note(format!("`{name}` takes {}", join_quoted(&names, "and")));
                self.report(d);
                continue;
            };
            if let Some(mut d) = check_input_value(&self.file, input, input_spec.ty, value) {
                d = d.note(format!("`{input}`: {}", input_spec.doc));
                self.report(d);
            }
            // A literal target the load generator cannot send a request to (a blank in its
            // path) is refused here, not found by the first request of the run.
            if name == "benchmark"
                && input == "target"
                && let Value::String(text) = &value.value
                && !text.contains("${{")
                && let Err(e) = crate::bench::check_target(text)
            {
                let d = self
                    .err(value.span, e.message)
                    .label("no request can be sent to this URL")
                    .maybe_hint(e.hint);
                self.report(d);
            }
        }
        for input in spec.inputs.iter().filter(|i| i.required) {
            if !with.contains_key(input.name) {
                let d = self
                    .err(uses_span, format!("`{name}` needs input `{}`", input.name))
                    .label(format!("missing `with: {{ {}: … }}`", input.name))
                    .hint(format!(
                        "add `{}:` under `with:` ({})",
                        input.name,
                        input.ty.describe()
                    ))
                    .note(format!("`{}`: {}", input.name, input.doc));
                self.report(d);
            }
        }
    }

    fn check_action_inputs(
        &mut self,
        path: &str,
        uses_span: Span,
        action_file: &Arc<SourceFile>,
        action: &Action,
        keys: &IndexMap<String, Span>,
    ) {
        let names: Vec<&str> = action.inputs.keys().map(String::as_str).collect();
        for (input, key_span) in keys {
            match action.inputs.get(input) {
                None => {
                    let mut d = self
                        .err(
                            *key_span,
                            format!("unknown input `{input}` of action `{path}`"),
                        )
                        .label("the action declares no such input")
                        .maybe_hint(did_you_mean(input, &names));
                    d = if names.is_empty() {
                        d.note("the action declares no inputs")
                    } else {
                        d.note(format!("the action takes {}", join_quoted(&names, "and")))
                    };
                    self.report(d);
                }
                Some(declared) => {
                    if let Some(msg) = &declared.deprecation_message {
                        let d = self
                            .warn(
                                *key_span,
                                format!("input `{input}` of action `{path}` is deprecated"),
                            )
                            .label(msg.value.clone())
                            .related(action_file, declared.name.span, "declared here");
                        self.report(d);
                    }
                }
            }
        }
        for (name, input) in &action.inputs {
            if input.required && input.default.is_none() && !keys.contains_key(name) {
                let d = self
                    .err(uses_span, format!("action `{path}` needs input `{name}`"))
                    .label(format!("missing `with: {{ {name}: … }}`"))
                    .related(
                        action_file,
                        input.name.span,
                        "required here, with no default",
                    )
                    .hint(format!("add `{name}:` under `with:`"));
                self.report(d);
            }
        }
    }

    /// Loads (once per load) the action a `./path` names, reporting its own problems in its
    /// file with the using step as related.
    fn local_action(
        &mut self,
        path: &str,
        uses_span: Span,
        ctx: &mut super::LoadContext<'_>,
    ) -> Option<(Arc<SourceFile>, Action)> {
        let rel = path.trim_start_matches("./").trim_end_matches('/');
        let dir = ctx.workspace.join(rel);
        self.action_in(
            path,
            dir,
            uses_span,
            ctx,
            "local actions are folders with an `action.yml`, relative to the repository root",
        )
    }

    /// Fetches (through the load's [`super::RemoteActionSource`]) and loads a remote action;
    /// where fetching fails, says why at the `uses:`.
    fn remote_action(
        &mut self,
        key: &str,
        remote: &super::RemoteAction<'_>,
        uses_span: Span,
        ctx: &mut super::LoadContext<'_>,
    ) -> Option<(Arc<SourceFile>, Action)> {
        let Some(source) = ctx.remote.as_deref_mut() else {
            let d = self
                .warn(uses_span, format!("remote action `{key}` is not resolved here"))
                .label("no action sources in this load")
                .hint("run `gpuflow validate` on the file, which fetches it from the sources of `gpuflow.toml`");
            self.report(d);
            return None;
        };
        let fetched = match source.fetch(remote) {
            Ok(f) => f,
            Err(d) => {
                self.report(self.placed(*d, uses_span));
                return None;
            }
        };
        for w in fetched.warnings {
            let d = self.placed(w, uses_span);
            self.report(d);
        }
        let hint = match remote.path {
            Some(p) => format!("the repository has no `{p}/action.yml` at that ref: check the path after the repository name"),
            None => "the repository has no `action.yml` at its root at that ref: name the action's folder, `owner/repo/path@ref`".to_owned(),
        };
        self.action_in(key, fetched.dir, uses_span, ctx, &hint)
    }

    /// A diagnostic from a [`super::RemoteActionSource`] put at `span`; one that has a place
    /// already (a bad `gpuflow.toml`) keeps it and names the step.
    fn placed(&self, mut d: crate::diag::Diagnostic, span: Span) -> crate::diag::Diagnostic {
        if d.file.is_some() {
            return d.related(&self.file.clone(), span, "needed by this step");
        }
        d.file = Some(self.file.clone());
        d.span = span;
        d
    }

    /// Loads (once per load) the action in `dir`, kept as `key` (its `uses:` text).
    fn action_in(
        &mut self,
        key: &str,
        dir: std::path::PathBuf,
        uses_span: Span,
        ctx: &mut super::LoadContext<'_>,
        not_found_hint: &str,
    ) -> Option<(Arc<SourceFile>, Action)> {
        let path = key;
        if let Some(cached) = ctx.cache.get(&dir) {
            let cached = cached.clone();
            if let Some((_, action)) = &cached {
                ctx.used_actions
                    .entry(path.to_owned())
                    .or_insert_with(|| action.clone());
            }
            return cached;
        }
        if ctx.stack.contains(&dir) {
            let d = self
                .err(uses_span, format!("action `{path}` uses itself"))
                .label("this step makes the action run itself forever")
                .hint("remove the step, or use a different action");
            self.report(d);
            return None;
        }
        let candidates = [dir.join("action.yml"), dir.join("action.yaml")];
        let Some(found) = candidates.iter().find(|p| p.is_file()) else {
            let d = self
                .err(uses_span, format!("action `{path}` not found"))
                .label("no action file there")
                .note(format!(
                    "looked for `{}` and `{}`",
                    ctx.display(&candidates[0]),
                    ctx.display(&candidates[1])
                ))
                .hint(not_found_hint);
            self.report(d);
            ctx.cache.insert(dir, None);
            return None;
        };
        let text = match std::fs::read_to_string(found) {
            Ok(t) => t,
            Err(err) => {
                let d = self
                    .err(uses_span, format!("cannot read action `{path}`: {err}"))
                    .label("this action")
                    .note(format!("reading `{}`", ctx.display(found)));
                self.report(d);
                ctx.cache.insert(dir, None);
                return None;
            }
        };
        let file = SourceFile::new(ctx.display(found), text);
        ctx.stack.push(dir.clone());
        let (action, diags) = super::load_action_with(&file, ctx);
        ctx.stack.pop();
        for d in diags {
            self.report(d.related(&self.file.clone(), uses_span, "used by this step"));
        }
        let result = action.map(|a| (file, a));
        if let Some((_, action)) = &result {
            ctx.used_actions.insert(path.to_owned(), action.clone());
        }
        ctx.cache.insert(dir, result.clone());
        result
    }
}

fn first_key_span(entries: &[MapEntry], fallback: Span) -> Span {
    entries.first().map_or(fallback, |e| e.key.span)
}

/// What is wrong with a local or remote action's path, if it could lead out of the repository
/// (or out of the fetched repository's folder in the action cache): an empty, `.` or `..`
/// component. Joining it onto a folder would follow `..`, and a path starting with `/` (from
/// `owner/repo//etc/x@v1`) would replace the folder altogether.
fn path_problem(uses: &Uses) -> Option<&'static str> {
    let path = match uses {
        Uses::Local(p) => p.strip_prefix("./").unwrap_or(p).trim_end_matches('/'),
        Uses::Remote { path: Some(p), .. } => p.as_str(),
        _ => return None,
    };
    if path.is_empty() {
        // `./`: the action at the repository's root.
        return None;
    }
    path.split('/').find_map(|c| match c {
        "" => Some("an empty component (`//`)"),
        "." => Some("a `.` component"),
        ".." => Some("a `..` component"),
        _ => None,
    })
}

/// `owner/repo[/path]@ref`.
fn parse_remote(text: &str) -> Option<Uses> {
    let (target, git_ref) = text.split_once('@')?;
    if git_ref.is_empty() || git_ref.contains('@') {
        return None;
    }
    let mut parts = target.splitn(3, '/');
    let owner = parts.next().filter(|s| !s.is_empty())?;
    let repo = parts.next().filter(|s| !s.is_empty())?;
    let path = parts.next().map(|p| p.trim_end_matches('/').to_owned());
    if path.as_deref() == Some("") {
        return None;
    }
    Some(Uses::Remote {
        owner: owner.to_owned(),
        repo: repo.to_owned(),
        path,
        git_ref: git_ref.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("actions/checkout@v4", Some(("actions", "checkout", None, "v4")))]
    #[test_case("org/repo/sub/dir@main", Some(("org", "repo", Some("sub/dir"), "main")))]
    #[test_case("org/repo@", None)]
    #[test_case("org@v1", None)]
    #[test_case("org/repo", None)]
    #[test_case("/repo@v1", None)]
    fn remote_uses(text: &str, expected: Option<(&str, &str, Option<&str>, &str)>) {
        let got = parse_remote(text).map(|u| match u {
            Uses::Remote {
                owner,
                repo,
                path,
                git_ref,
            } => (owner, repo, path, git_ref),
            _ => unreachable!(),
        });
        let expected = expected.map(|(o, r, p, g)| {
            (
                o.to_owned(),
                r.to_owned(),
                p.map(str::to_owned),
                g.to_owned(),
            )
        });
        assert_eq!(got, expected);
    }
}
