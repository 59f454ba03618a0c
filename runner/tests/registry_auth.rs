//! Registry credentials against the test kit's registry with basic auth
//! (`Registry::with_auth`, Debian's `docker-registry` with an htpasswd file): a step's
//! `credentials:` from a secret and `gpuflow.toml`'s `[registries."HOST"]` pull and start the
//! container, through each of the pulls a run makes (preflight's, `pull: always`'s, the one a
//! container's creation makes for a composite action); a wrong password and no login fail
//! before anything starts, with what the registry answered; and the password, its base64 and
//! the base64 of `user:password` (what basic auth carries) are in no output, no `--json`
//! event, no file under `.gpuflow/` (the run's folder, the results store) and nothing git
//! holds. Runs `gpuflow run` against a registry: nextest's `registry` group, one at a time.

use crate::secret_leaks::{base64, files_under, stored_text};
use crate::support::images::{BASE, docker_with};
use crate::support::registry::Registry;
use crate::support::{Output, Workspace};

const USER: &str = "gpuflow";
/// `/`, `+`, `?` and `=` make its encoded forms differ from it; long enough that its base64
/// forms are told apart from chance.
const PASSWORD: &str = "pa55/w+rd?=Zq9x";
const WRONG: &str = "not-it/pa55+Zq9";

/// Every form of `password` that must not be found: itself, its base64 at each of the three
/// places it can start in a longer base64 text (the `X-Registry-Auth` header is base64 of
/// JSON holding it), and the base64 of `user:password`, as basic auth sends it.
fn forms(password: &str) -> Vec<(String, String)> {
    let mut forms = vec![("the password".to_string(), password.to_string())];
    for shift in 0..3 {
        let mut bytes = vec![b'-'; shift];
        bytes.extend_from_slice(password.as_bytes());
        let encoded = base64(&bytes);
        // The characters made of the password's bits alone.
        let first = (8 * shift).div_ceil(6);
        let last = 8 * bytes.len() / 6;
        forms.push((
            format!("its base64 at offset {shift}"),
            encoded[first..last].to_string(),
        ));
    }
    let basic = base64(format!("{USER}:{password}").as_bytes());
    forms.push((
        "the base64 of user:password".to_string(),
        basic.trim_end_matches('=').to_string(),
    ));
    forms
}

/// Where any form of `password` is found: the run's stdout and stderr (its `--json` events),
/// every file of the workspace but git's own (`.gpuflow/`: the run's folder, its logs
/// decompressed, the results store), and every commit of every ref.
fn leaks(dir: &Workspace, out: &Output, password: &str) -> Vec<String> {
    let forms = forms(password);
    let mut found = Vec::new();
    let mut search = |name: &str, bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        for (what, form) in &forms {
            if text.contains(form.as_str()) || name.contains(form.as_str()) {
                found.push(format!("{what} in {name}"));
            }
        }
    };
    search("stdout", out.stdout.as_bytes());
    search("stderr", out.stderr.as_bytes());
    let git = dir.path().join(".git");
    let files: Vec<_> = files_under(dir.path())
        .into_iter()
        .filter(|p| p.is_file() && !p.starts_with(&git))
        .collect();
    assert!(
        files.iter().any(|p| p.ends_with("events.jsonl")),
        "the run's folder is searched: {files:?}"
    );
    for path in &files {
        search(&path.display().to_string(), &stored_text(path));
    }
    let log = dir.git(&["log", "--all", "-p", "--format=%B"]);
    search("git", log.as_bytes());
    found
}

/// A registry asking for `USER`/`PASSWORD` that holds an image only it has: the image's
/// reference and the text of its `/nonce`.
fn private_registry() -> (Registry, String, String) {
    let registry = Registry::with_auth(USER, PASSWORD);
    let pushed = registry.push_unique("private:1", &[]);
    let image = registry.image("private:1");
    (registry, image, pushed.nonce)
}

/// A job that starts a container of `image` (its `start-container` inputs `with`), then reads
/// the nonce the pull brought inside it.
fn workflow(image: &str, with: &str) -> String {
    format!(
        r#"on: workflow_dispatch
jobs:
  pull:
    steps:
      - uses: start-container
        with:
          name: c
          image: {image}
          command: sleep 60
{with}      - container: c
        run: echo "nonce $(cat /nonce)"
"#
    )
}

const STEP_CREDENTIALS: &str = "          credentials:
            username: gpuflow
            password: ${{ secrets.REGISTRY_PASSWORD }}
";

/// `gpuflow run --json w.yml --secret REGISTRY_PASSWORD`, the secret's value `password`.
fn run_with(dir: &Workspace, password: &str) -> Output {
    dir.gpuflow()
        .env("REGISTRY_PASSWORD", password)
        .args(["run", "--json", "w.yml", "--secret", "REGISTRY_PASSWORD"])
        .output()
}

/// The run's `--json` events hold no `step_started`: nothing started.
fn nothing_started(out: &Output) -> bool {
    !out.json_lines()
        .iter()
        .any(|e| e["type"] == "step_started" || e["type"] == "job_started")
}

#[tokio::test]
async fn the_steps_credentials_from_a_secret_pull_and_start_the_container() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let (registry, image, nonce) = private_registry();
    let dir = Workspace::repository()
        .file("w.yml", &workflow(&image, STEP_CREDENTIALS))
        .committed("pull");

    let out = run_with(&dir, PASSWORD);
    let all = out.all();
    assert_eq!(out.code(), Some(0), "{all}");
    assert!(all.contains(&format!("nonce {nonce}")), "{all}");
    // Preflight pulled it, with the step's credentials.
    assert!(
        out.json_lines().iter().any(|e| e["type"] == "image_pull"
            && e["finished"] == true
            && e["image"] == image.as_str()),
        "{all}"
    );
    let found = leaks(&dir, &out, PASSWORD);
    assert!(found.is_empty(), "leaked: {found:#?}");
    registry.delete_local(&image);
}

#[tokio::test]
async fn a_wrong_password_fails_before_anything_starts_with_the_registrys_401() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let (registry, image, nonce) = private_registry();
    let dir = Workspace::repository()
        .file("w.yml", &workflow(&image, STEP_CREDENTIALS))
        .committed("pull");

    let out = run_with(&dir, WRONG);
    let all = out.all();
    assert_eq!(out.code(), Some(1), "{all}");
    let said = format!(
        "the registry `{}` refused the credentials for `{image}`: unauthorized: authentication required (HTTP 401)",
        registry.host()
    );
    assert!(all.contains(&said), "{said}\n{all}");
    assert!(
        all.contains("check the username and the password the step's `credentials:` gives"),
        "the fix: {all}"
    );
    // Said once: a refused login is not tried again.
    assert!(!all.contains("try 2") && !all.contains("tried"), "{all}");
    assert!(nothing_started(&out), "{all}");
    assert!(!all.contains(&nonce), "{all}");
    let found = leaks(&dir, &out, WRONG);
    assert!(found.is_empty(), "leaked: {found:#?}");
}

#[tokio::test]
async fn without_a_login_the_registry_asking_for_one_is_said_with_where_to_give_it() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let (registry, image, _) = private_registry();
    let dir = Workspace::repository()
        .file("w.yml", &workflow(&image, ""))
        .committed("pull");

    let out = dir.gpuflow().args(["run", "--json", "w.yml"]).output();
    let all = out.all();
    assert_eq!(out.code(), Some(1), "{all}");
    let said = format!(
        "the registry `{}` asks for a login to pull `{image}`: no basic auth credentials (HTTP 401)",
        registry.host()
    );
    assert!(all.contains(&said), "{said}\n{all}");
    assert!(
        all.contains("credentials: { username: …")
            && all.contains(&format!("[registries.\\\"{}\\\"]", registry.host())),
        "the fix names `credentials:` and gpuflow.toml: {all}"
    );
    assert!(nothing_started(&out), "{all}");
}

#[tokio::test]
async fn gpuflow_toml_gives_a_registry_its_login_from_a_secret_for_pull_always() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let (registry, image, nonce) = private_registry();
    let config = format!(
        "[registries.\"{}\"]\nusername = \"{USER}\"\npassword-secret = \"REGISTRY_PASSWORD\"\n",
        registry.host()
    );
    // `pull: always`: pulled once for the run, at preflight, though the engine may have it.
    let dir = Workspace::repository()
        .file("w.yml", &workflow(&image, "          pull: always\n"))
        .file("gpuflow.toml", &config)
        .committed("pull");

    // The secret it names not given: said when the pull needs it, with where it is named.
    let out = dir.gpuflow().args(["run", "--json", "w.yml"]).output();
    let all = out.all();
    assert_eq!(out.code(), Some(1), "{all}");
    assert!(
        all.contains("its password is the secret `REGISTRY_PASSWORD`")
            && all.contains("gpuflow.toml:1:13"),
        "{all}"
    );
    assert!(all.contains("--secret NAME"), "the fix: {all}");

    let out = run_with(&dir, PASSWORD);
    let all = out.all();
    assert_eq!(out.code(), Some(0), "{all}");
    assert!(all.contains(&format!("nonce {nonce}")), "{all}");
    let pulled_at_preflight = out
        .json_lines()
        .iter()
        .any(|e| e["type"] == "image_pull" && e["finished"] == true && e["step"].is_null());
    assert!(pulled_at_preflight, "{all}");
    let found = leaks(&dir, &out, PASSWORD);
    assert!(found.is_empty(), "leaked: {found:#?}");
    registry.delete_local(&image);

    // A wrong one is named by the table that gave it.
    let out = run_with(&dir, WRONG);
    let all = out.all();
    assert_eq!(out.code(), Some(1), "{all}");
    assert!(
        all.contains("refused the credentials") && all.contains("gpuflow.toml:1:13 gives"),
        "{all}"
    );
}

#[tokio::test]
async fn a_composite_action_passes_its_registry_inputs_to_the_pull_of_its_container() {
    if docker_with(&[BASE]).await.is_none() {
        return;
    }
    let (registry, image, nonce) = private_registry();
    // Preflight pulls no image of an action's steps: the pull is the one the container's
    // creation makes.
    let action = r#"name: private
description: starts a container of a private image
inputs:
  image: { description: the image, required: true }
  registry-username: { description: the login, default: "" }
  registry-password: { description: its password, default: "" }
runs:
  using: composite
  steps:
    - uses: start-container
      with:
        name: c
        image: ${{ inputs.image }}
        command: sleep 60
        credentials:
          username: ${{ inputs.registry-username }}
          password: ${{ inputs.registry-password }}
"#;
    let wf = format!(
        r#"on: workflow_dispatch
jobs:
  pull:
    steps:
      - uses: ./private
        with:
          image: {image}
          registry-username: {USER}
          registry-password: ${{{{ secrets.REGISTRY_PASSWORD }}}}
      - container: c
        run: echo "nonce $(cat /nonce)"
"#
    );
    let dir = Workspace::repository()
        .file("w.yml", &wf)
        .file("private/action.yml", action)
        .committed("pull");

    let out = run_with(&dir, PASSWORD);
    let all = out.all();
    assert_eq!(out.code(), Some(0), "{all}");
    assert!(all.contains(&format!("nonce {nonce}")), "{all}");
    let found = leaks(&dir, &out, PASSWORD);
    assert!(found.is_empty(), "leaked: {found:#?}");
    registry.delete_local(&image);

    let out = run_with(&dir, WRONG);
    let all = out.all();
    assert_eq!(out.code(), Some(1), "{all}");
    assert!(
        all.contains("unauthorized: authentication required (HTTP 401)"),
        "{all}"
    );
    assert!(!all.contains(&nonce), "{all}");
}
