//! A `run:` step: its shell (never chosen by an outsider), its text with expressions rendered
//! safely, its environment (the job's, `GITHUB_*`, the leased GPUs), where it runs (a named
//! container, the job's container, or the host), its lines told as they come, masked, and what
//! it wrote back (`$GITHUB_OUTPUT`, `$GITHUB_ENV`, `$GITHUB_STEP_SUMMARY`).

use std::sync::Arc;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use super::job_run::{JobRun, Scope, StepResult};
use crate::diag::{SourceFile, Spanned};
use crate::engine::container_runner::ContainerRunner;
use crate::engine::evaluate::eval_string;
use crate::engine::output_file;
use crate::engine::script::{self, RenderedScript};
use crate::engine::script_runner::{LineFn, ScriptExit, ScriptRun, ScriptRunner, Shell};
use crate::events::{EventKind, StepOutcome};
use crate::expr::{MapContext, parse_template};
use crate::workflow::model::{RunDefaults, Step};

impl JobRun {
    pub(super) async fn run_script(
        &mut self,
        step: &Step,
        source: &Spanned<String>,
        key: &str,
        scope: &Scope,
        env: IndexMap<String, String>,
        cancel: CancellationToken,
    ) -> Result<StepResult, String> {
        let file = scope.file.clone();
        let ctx = self.ctx(scope, Some(&env));
        let shell = Shell::parse(&self.shell_text(step, &ctx, &file)?);
        let rendered = render(source, &shell, &ctx, &file)?;
        let working_directory = match step
            .working_directory
            .clone()
            .or_else(|| self.run_default(|d| &d.working_directory))
        {
            Some(w) => Some(eval_string(&w, &ctx, &file)?),
            None => None,
        };
        let on_host = step.container.is_none() && self.job_container.is_none();
        let run = ScriptRun {
            key: key.into(),
            env: self.script_env(on_host, env, rendered.env),
            script: rendered.text,
            shell,
            working_directory,
        };
        let named = self.named_container(step, &ctx, &file)?;
        let runner: &dyn ScriptRunner = if let Some(named) = &named {
            named
        } else if let Some(jc) = &self.job_container {
            jc
        } else {
            &self.host
        };
        let exit = runner
            .run(&run, self.line_sink(key), cancel)
            .await
            .map_err(|e| format!("on {}: {e}", runner.describe()))?;
        self.script_result(exit, key)
    }

    /// The job's `defaults.run` value `pick` chooses, else the workflow's.
    fn run_default(
        &self,
        pick: fn(&RunDefaults) -> &Option<Spanned<String>>,
    ) -> Option<Spanned<String>> {
        let job = &self.shared.wf.jobs[&self.job_id];
        job.defaults
            .run
            .as_ref()
            .and_then(|d| pick(d).clone())
            .or_else(|| {
                self.shared
                    .wf
                    .defaults
                    .run
                    .as_ref()
                    .and_then(|d| pick(d).clone())
            })
    }

    /// The step's `shell` (else the defaults'), evaluated; empty for the default shell.
    fn shell_text(
        &self,
        step: &Step,
        ctx: &MapContext,
        file: &SourceFile,
    ) -> Result<String, String> {
        let Some(s) = step
            .shell
            .clone()
            .or_else(|| self.run_default(|d| &d.shell))
        else {
            return Ok(String::new());
        };
        // The shell is a command line: a value an outsider chooses must not pick it.
        if let Ok(t) = parse_template(&s.value)
            && let Some(context) = t
                .expressions()
                .find_map(|(e, _)| script::untrusted_context(e))
        {
            return Err(format!(
                "{}: `shell` reads `{context}`, which anyone who can push a branch or commit chooses (help: name the shell in the workflow)",
                file.location(s.span)
            ));
        }
        eval_string(&s, ctx, file)
    }

    /// The script's whole environment: `GITHUB_*` and the like, the leased GPUs, the step's
    /// `env`, then the variables the rendered text reads its expressions from.
    fn script_env(
        &self,
        on_host: bool,
        env: IndexMap<String, String>,
        rendered: IndexMap<String, String>,
    ) -> IndexMap<String, String> {
        let mut run_env = self.github_env();
        if let Some(leased) = &self.gpus {
            run_env.insert("GPUFLOW_GPUS".into(), leased.indexes_text());
            // On the host nothing else hides the other GPUs; in a container the runtime
            // exposes only the leased ones already.
            if on_host {
                run_env.insert("CUDA_VISIBLE_DEVICES".into(), leased.uuids().join(","));
            }
        }
        run_env.extend(env);
        run_env.extend(rendered);
        run_env
    }

    /// The started container the step's `container:` names, if it names one.
    fn named_container(
        &self,
        step: &Step,
        ctx: &MapContext,
        file: &SourceFile,
    ) -> Result<Option<ContainerRunner>, String> {
        let Some(c) = &step.container else {
            return Ok(None);
        };
        let name = eval_string(c, ctx, file)?;
        let grace = self.shared.opts.grace;
        let Some((docker, started)) = self
            .containers
            .as_ref()
            .and_then(|cs| Some((cs.docker.clone(), cs.started.get(&name)?)))
        else {
            return Err(format!(
                "{}: no container `{name}` is running in this job",
                file.location(c.span)
            ));
        };
        Ok(Some(ContainerRunner::new(
            docker,
            started.id.clone(),
            name.clone(),
            grace,
            started.shell.clone(),
        )))
    }

    /// Where the script's lines go: masked, as `log_line` events of the step.
    fn line_sink(&self, key: &str) -> LineFn {
        let (shared, jref, key) = (self.shared.clone(), self.jref.clone(), key.to_string());
        // Per stream, the end of a cut line's piece held back until the next piece shows
        // whether a secret straddles the cut (`Masker::mask_piece`). The one masking of
        // events outside the sink, which sees one piece at a time and so never a secret cut
        // in two.
        let held: std::sync::Mutex<[String; 3]> = std::sync::Mutex::default();
        Arc::new(move |stream, text: String, continues| {
            shared.masker.observe(&text);
            let masked = match held.lock() {
                Ok(mut held) => {
                    shared
                        .masker
                        .mask_piece(&mut held[stream as usize], &text, continues)
                }
                // Masked by the sink, piece by piece.
                Err(_) => Some(text),
            };
            let Some(text) = masked else { return };
            shared.emit(EventKind::LogLine {
                job: jref.clone(),
                step: Some(key.clone()),
                container: None,
                stream,
                text,
            });
        })
    }

    /// How the script ended, its summary told, its outputs read and its `$GITHUB_ENV` kept
    /// for the later steps.
    fn script_result(&mut self, exit: ScriptExit, key: &str) -> Result<StepResult, String> {
        let outcome = match exit.code {
            Some(0) => StepOutcome::Success,
            Some(code) => {
                self.fail_with(key, &format!("the script exited with code {code}"));
                StepOutcome::Failure
            }
            None => StepOutcome::Cancelled,
        };
        if !exit.summary_file.trim().is_empty() {
            self.shared.emit(EventKind::StepSummary {
                job: self.jref.clone(),
                step: key.into(),
                markdown: exit.summary_file,
            });
        }
        let outputs =
            output_file::parse(&exit.output_file, "$GITHUB_OUTPUT").map_err(|e| e.to_string())?;
        let added = output_file::parse(&exit.env_file, "$GITHUB_ENV").map_err(|e| e.to_string())?;
        self.env.extend(added);
        Ok(StepResult { outcome, outputs })
    }
}

/// The script's text with its expressions rendered (values a shell must not read as code go
/// through variables), or where rendering failed and why.
fn render(
    source: &Spanned<String>,
    shell: &Shell,
    ctx: &MapContext,
    file: &SourceFile,
) -> Result<RenderedScript, String> {
    script::render(&source.value, shell.is_posix(), ctx).map_err(|e| {
        let span = match &e {
            script::ScriptError::Expr(x) => source.span.inner(x.span.clone()),
            script::ScriptError::Untrusted { .. } => source.span,
        };
        let mut m = format!("{}: {e}", file.location(span));
        if let Some(h) = e.hint() {
            m.push_str(&format!(" (help: {h})"));
        }
        m
    })
}
