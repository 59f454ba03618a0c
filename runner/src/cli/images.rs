//! `gpuflow images`: the images `gpuflow.lock` pins (`list`, the default); `images lock
//! [PATHS…]`, which pins every image the workflows' `start-container` steps start (in
//! composite actions too, each matrix cell's) to the digest its registry gives now; and
//! `images update [IMAGE…]`, which moves pins to what their tags name now (docs/running.md,
//! "Pinned images"). Digests are asked of the registries through the Docker engine, so its own
//! way to them (mirrors, proxies) is used and nothing is pulled.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;

use crate::actions::image_pins::{is_digest_reference, normalise};
use crate::actions::{ActionResolver, ImagePin, LOCK_FILE, LockFile};
use crate::backend::DockerBackend;
use crate::check::load_and_check_with;
use crate::diag::{
    Diagnostic, Diagnostics, ExitCode, RenderOptions, did_you_mean, join_quoted, render_all,
};
use crate::workflow::Loaded;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List the pinned images: image, digest, when the digest was read.
    List,
    /// Pin each image the workflows start (`start-container` steps, in actions too) to the
    /// digest its registry gives now; pinned images are left as they are.
    Lock(LockArgs),
    /// Ask the registry of each pinned image again and move its pin to what its tag names now.
    Update(UpdateArgs),
}

#[derive(Debug, clap::Args)]
pub struct LockArgs {
    /// Workflow files, or folders to search for `*.yml` and `*.yaml`. Default: `workflows/` and
    /// `actions/` of the current folder.
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    /// Pinned images, as `gpuflow images` lists them; every pin when none is given.
    pub images: Vec<String>,
}

pub fn run(args: &Args, render: RenderOptions) -> anyhow::Result<ExitCode> {
    match &args.action {
        None | Some(Action::List) => list(render),
        Some(Action::Lock(given)) => lock_images(given, render),
        Some(Action::Update(given)) => update(given, render),
    }
}

/// The workspace of the current folder: its repository's root.
fn here() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    crate::hosts::workspace_root(&cwd)
}

fn fail(d: &Diagnostic, render: RenderOptions) -> ExitCode {
    eprint!("{}", render_all(&Diagnostics::from(d.clone()), render));
    ExitCode::Failure
}

fn list(render: RenderOptions) -> anyhow::Result<ExitCode> {
    let path = here().join(LOCK_FILE);
    let lock = match LockFile::read(&path) {
        Ok(l) => l,
        Err(d) => return Ok(fail(&d, render)),
    };
    if lock.images.is_empty() {
        eprintln!(
            "no images are pinned (`{}`); `gpuflow images lock` pins those the workflows start",
            path.display()
        );
    }
    for p in &lock.images {
        println!(
            "{}  {}  {}",
            p.image,
            p.digest,
            p.resolved.as_deref().unwrap_or("-")
        );
    }
    Ok(ExitCode::Success)
}

/// The images to pin, per workspace: each image with the first step that starts it.
type Wanted = BTreeMap<PathBuf, IndexMap<String, String>>;

fn lock_images(args: &LockArgs, render: RenderOptions) -> anyhow::Result<ExitCode> {
    let mut problems = Diagnostics::new();
    let files = super::validate::collect_files(&args.paths, &mut problems);
    let mut wanted = Wanted::new();
    let mut resolvers = HashMap::new();
    for file in &files {
        images_of(file, &mut resolvers, &mut wanted, &mut problems);
    }
    if !problems.is_empty() {
        eprint!("{}", render_all(&problems, render));
    }
    if wanted.is_empty() {
        eprintln!("no `start-container` step names an image to pin");
        return Ok(if problems.is_empty() {
            ExitCode::Success
        } else {
            ExitCode::Failure
        });
    }
    let runtime = super::hosts::runtime()?;
    let docker = match runtime.block_on(DockerBackend::connect_local()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::Infrastructure);
        }
    };
    let mut all_pinned = problems.is_empty();
    for (workspace, images) in &wanted {
        match lock_workspace(&runtime, &docker, workspace, images) {
            Ok(done) => all_pinned &= done,
            Err(d) => return Ok(fail(&d, render)),
        }
    }
    Ok(if all_pinned {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}

/// Adds the images `file`'s `start-container` steps start to `wanted`, evaluated for every job
/// run with the workflow inputs' defaults. An action file is skipped: its images come from
/// its callers' inputs, and are found through them.
fn images_of(
    file: &Path,
    resolvers: &mut HashMap<PathBuf, ActionResolver>,
    wanted: &mut Wanted,
    problems: &mut Diagnostics,
) {
    let workspace = crate::workflow::workspace_of(file);
    let resolver = resolvers
        .entry(workspace.clone())
        .or_insert_with(|| ActionResolver::new(&workspace));
    let (loaded, diags) = match load_and_check_with(file, resolver) {
        Ok(found) => found,
        Err(d) => return problems.push(*d),
    };
    if diags.has_errors() {
        return problems.extend(diags);
    }
    let Loaded::Workflow(Some(wf)) = loaded else {
        return;
    };
    let plan = match super::run::plan_jobs(&wf, file) {
        Ok(plan) => plan,
        Err(e) => return problems.push(Diagnostic::unlocated(e.to_string())),
    };
    let inputs = match crate::engine::inputs::resolve(&wf, &IndexMap::new()) {
        Ok(inputs) => inputs,
        Err(e) => {
            return problems.push(
                Diagnostic::unlocated(format!(
                    "the images of `{}` are not pinned: {e}",
                    file.display()
                ))
                .hint("give the workflow's required inputs defaults, so the images they name are known before a run"),
            );
        }
    };
    let opts = crate::engine::RunOptions::new("images-lock", &workspace);
    let found = crate::engine::preflight::start_images(&wf, &plan, &opts, inputs);
    for step in found.not_evaluated {
        eprintln!(
            "note: the image of {step} needs what only the run knows (`steps.*`, `needs.*`): not pinned"
        );
    }
    let images = wanted.entry(workspace).or_default();
    for s in found.images {
        images.entry(s.image).or_insert(s.at);
    }
}

/// What the engine says an image reference names.
enum Resolved {
    /// Its registry's digest now.
    Digest(String),
    /// An image built on this engine and never pushed: no registry to ask.
    Local,
    Failed(String),
}

async fn resolve(docker: &DockerBackend, image: &str) -> Resolved {
    if let Ok(facts) = docker.image_facts(image).await
        && facts.repo_digests.is_empty()
    {
        return Resolved::Local;
    }
    match docker.registry_digest(image).await {
        Ok(digest) => Resolved::Digest(digest),
        Err(e) => Resolved::Failed(e.to_string()),
    }
}

/// Pins the images of one workspace that its lock does not pin yet, saying what happened to
/// each: `Ok(false)` when one could not be resolved (the others are pinned all the same).
fn lock_workspace(
    runtime: &tokio::runtime::Runtime,
    docker: &DockerBackend,
    workspace: &Path,
    images: &IndexMap<String, String>,
) -> Result<bool, Box<Diagnostic>> {
    let path = workspace.join(LOCK_FILE);
    let lock = LockFile::read(&path)?;
    let resolved_at = crate::report::rfc3339(crate::store::now_ms());
    let mut pins = Vec::new();
    let mut all = true;
    for (image, at) in images {
        if is_digest_reference(image) {
            eprintln!("`{image}` is a digest reference: pinned as written ({at})");
        } else if let Some(pin) = lock.image_pin(image) {
            eprintln!(
                "`{image}` is already pinned to {} (`gpuflow images update {image}` moves it)",
                pin.digest
            );
        } else {
            match runtime.block_on(resolve(docker, image)) {
                Resolved::Digest(digest) => pins.push(ImagePin {
                    image: image.clone(),
                    digest,
                    resolved: Some(resolved_at.clone()),
                }),
                Resolved::Local => {
                    eprintln!(
                        "`{image}` was built on this engine and is in no registry: not pinned ({at})"
                    );
                }
                Resolved::Failed(why) => {
                    eprintln!("error: `{image}` is not pinned: {why} ({at})");
                    all = false;
                }
            }
        }
    }
    if pins.is_empty() {
        return Ok(all);
    }
    let lock_dir = ActionResolver::new(workspace).lock_dir()?;
    // A pin another process wrote meanwhile wins: both then run the same image.
    let (_, added) = LockFile::update(&path, &lock_dir, |l| {
        let mut added = Vec::new();
        for pin in pins {
            if l.image_pin(&pin.image).is_none() {
                l.images.push(pin.clone());
                added.push(pin);
            }
        }
        added
    })?;
    for pin in added {
        println!("{}  {}", pin.image, pin.digest);
    }
    Ok(all)
}

fn update(args: &UpdateArgs, render: RenderOptions) -> anyhow::Result<ExitCode> {
    let workspace = here();
    let path = workspace.join(LOCK_FILE);
    let lock = match LockFile::read(&path) {
        Ok(l) => l,
        Err(d) => return Ok(fail(&d, render)),
    };
    if let Some(d) = unknown_names(&lock, &args.images) {
        return Ok(fail(&d, render));
    }
    let chosen: Vec<&ImagePin> = lock
        .images
        .iter()
        .filter(|p| {
            args.images.is_empty()
                || args
                    .images
                    .iter()
                    .any(|n| normalise(n) == normalise(&p.image))
        })
        .collect();
    if chosen.is_empty() {
        eprintln!("no images are pinned in `{}`", path.display());
        return Ok(ExitCode::Success);
    }
    let runtime = super::hosts::runtime()?;
    let docker = match runtime.block_on(DockerBackend::connect_local()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::Infrastructure);
        }
    };
    let mut latest = HashMap::new();
    for pin in chosen {
        match runtime.block_on(docker.registry_digest(&pin.image)) {
            Ok(digest) => latest.insert(pin.image.clone(), digest),
            Err(e) => {
                let d = Diagnostic::unlocated(format!("cannot update `{}`: {e}", pin.image))
                    .hint(format!("`{LOCK_FILE}` was left as it was"));
                return Ok(fail(&d, render));
            }
        };
    }
    let lock_dir = match ActionResolver::new(&workspace).lock_dir() {
        Ok(dir) => dir,
        Err(d) => return Ok(fail(&d, render)),
    };
    let resolved_at = crate::report::rfc3339(crate::store::now_ms());
    let moved = LockFile::update(&path, &lock_dir, |l| {
        let mut moved = Vec::new();
        for p in &mut l.images {
            if let Some(digest) = latest.get(&p.image)
                && *digest != p.digest
            {
                moved.push((p.image.clone(), p.digest.clone(), digest.clone()));
                p.digest.clone_from(digest);
                p.resolved = Some(resolved_at.clone());
            }
        }
        moved
    });
    let moved = match moved {
        Ok((_, moved)) => moved,
        Err(d) => return Ok(fail(&d, render)),
    };
    if moved.is_empty() {
        eprintln!("`{LOCK_FILE}` is up to date: every tag names its pinned digest");
    }
    for (image, from, to) in moved {
        println!("{image}: {from} -> {to}");
    }
    Ok(ExitCode::Success)
}

/// An image named for `update` that the lock does not pin, with the nearest pinned one.
fn unknown_names(lock: &LockFile, names: &[String]) -> Option<Diagnostic> {
    let pinned: Vec<&str> = lock.images.iter().map(|p| p.image.as_str()).collect();
    let name = names.iter().find(|n| lock.image_pin(n).is_none())?;
    let d = Diagnostic::unlocated(format!("`{name}` is not pinned in `{LOCK_FILE}`"))
        .maybe_hint(did_you_mean(name, &pinned));
    Some(if pinned.is_empty() {
        d.note("nothing is pinned: `gpuflow images lock` pins the images the workflows start")
    } else {
        d.note(format!("pinned: {}", join_quoted(&pinned, "and")))
    })
}
