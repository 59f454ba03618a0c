//! `gpuflow trigger`: a push (given by flags, or by a git hook's arguments and stdin) →
//! the runs of the workflows whose `on: push` matches, queued; then makes sure a worker
//! runs (starting one, detached, when none does) and returns, unless `--wait`.
//! Exit codes: 0 (queued, or nothing matched), 1 (`--wait`: a run did not succeed),
//! 2 (bad arguments, not a repository, unknown commit), 4 (the queue cannot be written).

use std::path::PathBuf;
use std::time::Duration;

use git2::Repository;

use crate::diag::{Diagnostic, ExitCode, RenderOptions, render, render_all};
use crate::trigger::hook_input::{self, HOOKS, RefUpdate};
use crate::trigger::{GpuflowHome, Outcome, OutcomeKind, PushEvent, Queue, RunState, enqueue_push};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The event: `push` (the only one a trigger sends; `workflow_dispatch` is `gpuflow run`).
    #[arg(long, value_name = "EVENT", required_unless_present = "hook", value_parser = ["push"])]
    pub event: Option<String>,

    /// The full ref pushed: `refs/heads/main`, `refs/tags/v1.0`.
    #[arg(long = "ref", value_name = "REF", required_unless_present = "hook")]
    pub git_ref: Option<String>,

    /// The commit the ref pointed at before (40 zeros for a new ref).
    #[arg(long, value_name = "SHA", required_unless_present = "hook")]
    pub before: Option<String>,

    /// The commit it points at now (40 zeros for a deleted ref).
    #[arg(long, value_name = "SHA", required_unless_present = "hook")]
    pub after: Option<String>,

    /// Read the pushes from a git hook's arguments and stdin (what `gpuflow hooks install`
    /// writes): post-commit, pre-push, post-merge or post-receive.
    #[arg(long, value_name = "HOOK", conflicts_with_all = ["event", "git_ref", "before", "after"], value_parser = HOOKS.to_vec())]
    pub hook: Option<String>,

    /// The repository (default: the one git runs the hook for, else the current folder's).
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,

    /// Wait for the queued runs to end; exit 1 when one does not succeed (pre-push gating).
    #[arg(long)]
    pub wait: bool,

    /// Queue only; do not start a worker.
    #[arg(long)]
    pub no_worker: bool,

    /// A worker this starts leaves after being idle this long.
    #[arg(long, value_name = "DURATION", env = "GPUFLOW_WORKER_IDLE_EXIT", default_value = "10m", value_parser = humantime::parse_duration)]
    pub worker_idle_exit: Duration,

    /// Print one JSON object per workflow on stdout (JSON Lines): what it decided.
    #[arg(long)]
    pub json: bool,

    /// The hook's own arguments (after `--`).
    #[arg(last = true, hide = true)]
    pub hook_args: Vec<String>,
}

/// What stops the command: the problem and the exit code it means (boxed: a diagnostic is
/// large, and every step of the command returns this as its error).
struct Refused(Box<Diagnostic>, ExitCode);

fn refused(d: Diagnostic, code: ExitCode) -> Refused {
    Refused(Box::new(d), code)
}

pub fn run(args: &Args, render_opts: RenderOptions) -> anyhow::Result<ExitCode> {
    let fail = |Refused(d, code)| {
        eprintln!("{}", render(&d, render_opts));
        Ok(code)
    };
    let repo = match open_repository(args) {
        Ok(r) => r,
        Err(refused) => return fail(refused),
    };
    let stdin = hook_stdin(args)?;
    let updates = match ref_updates(args, &stdin, &repo) {
        Ok(u) => u,
        Err(refused) => return fail(refused),
    };
    let home = GpuflowHome::from_env();
    let mut queue = match Queue::open(&home.queue()) {
        Ok(q) => q,
        Err(e) => return fail(infrastructure(e.to_string())),
    };
    let queued = match enqueue_all(args, render_opts, &repo, &updates, &mut queue) {
        Ok(q) => q,
        Err(refused) => return fail(refused),
    };
    if !queued.is_empty() && !args.no_worker {
        let gpuflow = std::env::current_exe()?;
        if let Err(refused) = start_worker(args, &home, &gpuflow) {
            return fail(refused);
        }
    }
    if args.wait && !queued.is_empty() {
        return wait_for(&queue, &home, &queued, args);
    }
    Ok(ExitCode::Success)
}

fn infrastructure(message: String) -> Refused {
    refused(Diagnostic::unlocated(message), ExitCode::Infrastructure)
}

fn open_repository(args: &Args) -> Result<Repository, Refused> {
    let repo = match &args.repo {
        Some(path) => Repository::open(path),
        None => Repository::open_from_env(),
    };
    repo.map_err(|e| {
        refused(
            Diagnostic::unlocated(format!("not in a git repository: {}", e.message()))
                .hint("run it inside the repository, or pass `--repo PATH`"),
            ExitCode::Usage,
        )
    })
}

/// What git hands the hook on standard input (only `pre-push` and `post-receive` get any).
fn hook_stdin(args: &Args) -> std::io::Result<String> {
    let mut stdin = String::new();
    if matches!(args.hook.as_deref(), Some("pre-push" | "post-receive")) {
        use std::io::Read;
        std::io::stdin().read_to_string(&mut stdin)?;
    }
    Ok(stdin)
}

/// The refs pushed: from the hook's input, or the one `--ref --before --after` name.
fn ref_updates(args: &Args, stdin: &str, repo: &Repository) -> Result<Vec<RefUpdate>, Refused> {
    match &args.hook {
        Some(hook) => hook_input::updates(hook, stdin, repo)
            .map_err(|message| refused(Diagnostic::unlocated(message), ExitCode::Usage)),
        None => Ok(vec![RefUpdate {
            git_ref: args.git_ref.clone().unwrap_or_default(),
            before: args.before.clone().unwrap_or_default(),
            after: args.after.clone().unwrap_or_default(),
            local_ref: None,
        }]),
    }
}

/// Queues the runs each pushed ref asks for, saying what became of each workflow; returns
/// the ids of the runs queued.
fn enqueue_all(
    args: &Args,
    render_opts: RenderOptions,
    repo: &Repository,
    updates: &[RefUpdate],
    queue: &mut Queue,
) -> Result<Vec<String>, Refused> {
    let actor = std::env::var("USER").unwrap_or_else(|_| "gpuflow".into());
    let mut queued = Vec::new();
    for update in updates {
        let push = PushEvent::read(repo, update).map_err(|e| {
            refused(
                Diagnostic::unlocated(e.to_string()).hint(
                    "give `--ref refs/heads/NAME --before SHA --after SHA` of this repository",
                ),
                ExitCode::Usage,
            )
        })?;
        if push.is_deletion() {
            say(args, &format!("{}: deleted; nothing to run", push.git_ref));
            continue;
        }
        let outcomes = enqueue_push(repo, &push, queue, &actor).map_err(|e| match e {
            crate::trigger::enqueue::EnqueueError::Queue(e) => infrastructure(e.to_string()),
            e => refused(Diagnostic::unlocated(e.to_string()), ExitCode::Usage),
        })?;
        say(
            args,
            &format!(
                "{} {}..{}: {} changed file(s)",
                push.git_ref,
                short(&push.before),
                short(&push.after),
                push.changed.len()
            ),
        );
        for o in &outcomes {
            if let OutcomeKind::Queued { run_id, .. } = &o.result {
                queued.push(run_id.clone());
            }
            tell_outcome(args, render_opts, &push, o);
        }
    }
    Ok(queued)
}

/// What became of one workflow: a line, and with `--json` its object.
fn tell_outcome(args: &Args, render_opts: RenderOptions, push: &PushEvent, o: &Outcome) {
    let (result, detail) = match &o.result {
        OutcomeKind::Queued {
            run_id,
            name,
            superseded,
        } => {
            let mut line = format!("  queued   run {run_id}: `{name}` ({})", o.workflow);
            if !superseded.is_empty() {
                line.push_str(&format!("; superseding {}", superseded.join(", ")));
            }
            say(args, &line);
            (
                "queued",
                serde_json::json!({ "run_id": run_id, "name": name, "superseded": superseded }),
            )
        }
        OutcomeKind::Skipped(why) => {
            say(args, &format!("  skipped  {}: {why}", o.workflow));
            ("skipped", serde_json::json!({ "reason": why }))
        }
        OutcomeKind::NotOnPush => ("not-on-push", serde_json::json!({})),
        OutcomeKind::Invalid(diags) => {
            eprint!("{}", render_all(diags, render_opts));
            say(
                args,
                &format!("  invalid  {}: not run (see above)", o.workflow),
            );
            ("invalid", serde_json::json!({}))
        }
    };
    let mut entry = serde_json::json!({
        "ref": push.git_ref, "after": push.after, "workflow": o.workflow, "result": result,
    });
    if let (Some(e), serde_json::Value::Object(d)) = (entry.as_object_mut(), detail) {
        e.extend(d);
    }
    // JSON Lines, one object per workflow as it is decided (docs/triggers.md): a script reads
    // them with `while read` or `jq -c`, and a push of several refs is not one array per ref.
    if args.json {
        println!("{entry}");
    }
}

/// A worker to run what was queued, unless one is running already.
fn start_worker(args: &Args, home: &GpuflowHome, gpuflow: &std::path::Path) -> Result<(), Refused> {
    match crate::worker::start_detached(home, gpuflow, Some(args.worker_idle_exit)) {
        Ok(Some(pid)) => say(
            args,
            &format!("worker started (pid {pid}); `gpuflow runs` lists the runs"),
        ),
        Ok(None) => {}
        Err(e) => {
            return Err(refused(
                Diagnostic::unlocated(format!(
                    "the runs are queued, but no worker could be started: {e}"
                ))
                .hint("start one with `gpuflow worker`"),
                ExitCode::Infrastructure,
            ));
        }
    }
    Ok(())
}

/// Waits for every run in `ids` to end; exit 1 unless all succeeded.
fn wait_for(
    queue: &Queue,
    home: &GpuflowHome,
    ids: &[String],
    args: &Args,
) -> anyhow::Result<ExitCode> {
    say(args, &format!("waiting for {} run(s)...", ids.len()));
    let gpuflow = std::env::current_exe()?;
    let mut failed = false;
    let mut told_no_worker = false;
    for id in ids {
        let mut polls = 0u32;
        let run = loop {
            match queue.get(id)? {
                Some(run) if run.state.is_final() => break run,
                Some(run) => {
                    polls += 1;
                    // Its worker died without recording the end (or could not record it, and
                    // gave up): nobody else would, and `--wait` would never return.
                    if polls.is_multiple_of(5)
                        && let Some(message) =
                            crate::worker::recover::fail_if_worker_gone(queue, &run)?
                    {
                        say(args, &format!("run {id}: {message}"));
                        continue;
                    }
                    // A worker that died (SIGKILL, OOM) would leave git waiting for ever: a
                    // new one marks its run failed (`recover`) and goes on with the queue.
                    if polls.is_multiple_of(5) && !crate::worker::worker_running(home) {
                        if args.no_worker {
                            if !told_no_worker {
                                say(
                                    args,
                                    "no worker is running: start one with `gpuflow worker`",
                                );
                                told_no_worker = true;
                            }
                        } else {
                            crate::worker::start_detached(
                                home,
                                &gpuflow,
                                Some(args.worker_idle_exit),
                            )?;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                None => anyhow::bail!("run {id} vanished from the queue"),
            }
        };
        failed |= run.state != RunState::Success;
        say(
            args,
            &format!(
                "run {id} (`{}`): {}{}",
                run.name,
                run.state.as_str(),
                run.message.map(|m| format!(": {m}")).unwrap_or_default()
            ),
        );
    }
    Ok(if failed {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}

/// Progress goes to stderr (git shows a hook's stderr to the user, as `remote:` lines for a
/// push), so `--json` on stdout stays clean.
fn say(_args: &Args, line: &str) {
    eprintln!("gpuflow: {line}");
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}
