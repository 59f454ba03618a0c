//! `start-container`'s `required-paths`: the paths a server needs before it starts (its model),
//! looked for in a throw-away container of the same image with the same volumes. Preflight
//! runs it before any job starts; the step runs it again before it creates the container.
//!
//! A missing path is explained through the mounts: the volume it would come from and where
//! that is on the host, what the mounted folder holds instead, or that nothing is mounted above
//! it. A bind mount whose host folder is missing stops earlier: Docker refuses to create the
//! container (the volumes are `Mounts`), and [`start_error`] names the input that gave the path.

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use crate::backend::{BackendError, ContainerSpec, VolumeMount};
use crate::engine::containers::{ContainerError, JobContainers};
use crate::events::JobRef;
use crate::expr::Value;
use crate::steps::StepHost;
use crate::steps::{FileInContainer as InContainer, FilePlace as Place};

/// The paths of the `required-paths` input: one per item or line, blanks left out (a
/// composite action's input that is empty gives none).
pub fn paths(inputs: &IndexMap<String, Value>) -> Vec<String> {
    let items = match inputs.get("required-paths") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(Value::to_expr_string).collect(),
        Some(one) => vec![one.to_expr_string()],
    };
    items
        .iter()
        .flat_map(|i| {
            i.lines()
                .map(str::trim)
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .filter(|p| !p.is_empty())
        .collect()
}

/// Checks `paths` in the running throw-away container `place` of `spec` (whose volumes are
/// the server's as written, before preflight made them read-only). Every missing path is
/// reported, each with its mount and a fix.
pub async fn check(
    place: &InContainer,
    image: &str,
    volumes: &[VolumeMount],
    paths: &[String],
) -> Result<(), String> {
    let mut problems = Vec::new();
    for path in paths {
        if !path.starts_with('/') {
            problems.push(format!(
                "`{path}` is not an absolute path (help: required paths are looked up from `/` in the container)"
            ));
            continue;
        }
        if place.facts(path).await?.is_none() {
            problems.push(missing(place, image, volumes, path).await?);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The volume whose target holds `path` (the deepest one), and the rest of the path under it.
fn mount_of<'a>(volumes: &'a [VolumeMount], path: &str) -> Option<(&'a VolumeMount, String)> {
    volumes
        .iter()
        .filter_map(|v| {
            let target = v.target.trim_end_matches('/');
            let rest = if target.is_empty() {
                Some(path.trim_start_matches('/'))
            } else {
                path.strip_prefix(target)
                    .filter(|r| r.is_empty() || r.starts_with('/'))
                    .map(|r| r.trim_start_matches('/'))
            }?;
            Some((v, target.len(), rest.to_string()))
        })
        .max_by_key(|(_, len, _)| *len)
        .map(|(v, _, rest)| (v, rest))
}

/// Says which input gave a host path (`the action's input `models` gives it`), when known.
pub type Origin<'a> = &'a (dyn Fn(&str) -> Option<String> + Sync);

/// The input among `inputs` (a composite action's, as text) that gives the host path `path`:
/// its whole value (`models: /data/models`), or one of its lines as a mount
/// (`volumes: /data/x:/x`).
pub fn input_giving<'a>(inputs: &'a IndexMap<String, String>, path: &str) -> Option<&'a str> {
    let same = |a: &str| std::path::Path::new(a.trim()) == std::path::Path::new(path);
    inputs
        .iter()
        .find(|(_, v)| same(v))
        .or_else(|| {
            inputs.iter().find(|(_, v)| {
                v.lines()
                    .any(|l| l.trim().split_once(':').is_some_and(|(src, _)| same(src)))
            })
        })
        .map(|(name, _)| name.as_str())
}

/// Why a container of `spec` could not start, with the fix. A bind mount whose host path is
/// missing also says where the path came from: `origin`'s answer, else the volume as the
/// step's `volumes` wrote it.
pub fn start_error(e: &ContainerError, spec: &ContainerSpec, origin: Origin<'_>) -> String {
    let mut m = e.to_string();
    if let ContainerError::Backend(BackendError::BindSourceMissing { path, .. }) = e {
        let given = origin(path).or_else(|| {
            spec.volumes
                .iter()
                .find(|v| {
                    v.is_bind() && std::path::Path::new(&v.source) == std::path::Path::new(path)
                })
                .map(|v| format!("the step's `volumes` gives it as `{}`", v.written()))
        });
        if let Some(given) = given {
            m.push_str(&format!("; {given}"));
        }
    }
    if let Some(h) = e.hint() {
        m.push_str(&format!(" (help: {h})"));
    }
    m
}

/// The deepest existing folder on the way to `path` and what it holds.
async fn nearest(place: &InContainer, path: &str) -> Result<(String, Vec<String>), String> {
    let mut folder = path.trim_end_matches('/').to_string();
    loop {
        folder = match folder.rfind('/') {
            Some(0) | None => "/".to_string(),
            Some(i) => folder[..i].to_string(),
        };
        if let Some(mut names) = place.list(&folder).await? {
            names.sort();
            return Ok((folder, names));
        }
        if folder == "/" {
            return Ok((folder, Vec::new()));
        }
    }
}

fn listing(names: &[String]) -> String {
    const SHOWN: usize = 12;
    let mut shown: Vec<String> = names.iter().take(SHOWN).map(|n| format!("`{n}`")).collect();
    if names.len() > SHOWN {
        shown.push(format!("and {} more", names.len() - SHOWN));
    }
    shown.join(", ")
}

async fn missing(
    place: &InContainer,
    image: &str,
    volumes: &[VolumeMount],
    path: &str,
) -> Result<String, String> {
    let mut m = format!(
        "`{path}` does not exist in container `{}` (image `{image}`, with the step's volumes mounted)",
        place.name
    );
    let (folder, names) = nearest(place, path).await?;
    let under = path[folder.len()..].trim_start_matches('/');
    let first = under.split('/').next().unwrap_or_default();
    let guess = crate::diag::did_you_mean(first, &names);
    match mount_of(volumes, path) {
        Some((v, rest)) => {
            let named = !v.source.starts_with('/');
            let host = if rest.is_empty() {
                v.source.clone()
            } else {
                format!("{}/{rest}", v.source.trim_end_matches('/'))
            };
            if named {
                m.push_str(&format!(
                    "\n  expected from the volume `{}`: the named Docker volume `{}`, as `{rest}` in it",
                    v.written(),
                    v.source
                ));
            } else {
                m.push_str(&format!(
                    "\n  expected from the volume `{}`: `{host}` on the host (of the Docker engine), which is not there",
                    v.written()
                ));
            }
            let in_mount = folder.len() >= v.target.trim_end_matches('/').len();
            if in_mount && names.is_empty() && folder == v.target.trim_end_matches('/') {
                // A missing host folder never gets here (Docker refuses the mount), but a named
                // volume that does not exist is created, empty.
                if named {
                    m.push_str(&format!(
                        "\n  `{folder}` (the mount) is empty: Docker creates a named volume that does not exist as an empty one, so `{}` may not be the volume that holds the model",
                        v.source
                    ));
                } else {
                    m.push_str(&format!(
                        "\n  `{folder}` (the mount) is empty: `{}` on the host holds nothing, so it may not be the folder that holds the model",
                        v.source
                    ));
                }
            } else if !names.is_empty() {
                m.push_str(&format!("\n  `{folder}` holds {}", listing(&names)));
                if let Some(g) = &guess {
                    m.push_str(&format!(" ({g})"));
                }
            }
            m.push_str(&format!(
                "\n  help: put it at `{host}` on the host, or mount the folder that holds it at `{}` (the shipped server actions: their input `models`, mounted read-only at `/models`)",
                v.target
            ));
        }
        None => {
            let top = path
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or_default();
            let mounts = if volumes.is_empty() {
                "the step mounts nothing".to_string()
            } else {
                format!(
                    "the step mounts {}",
                    volumes
                        .iter()
                        .map(|v| format!("`{}`", v.written()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            m.push_str(&format!(
                "\n  expected from a volume mounted at `/{top}` or above it, and there is none: {mounts}, and the image has no such path"
            ));
            if !names.is_empty() {
                m.push_str(&format!("\n  `{folder}` holds {}", listing(&names)));
                if let Some(g) = &guess {
                    m.push_str(&format!(" ({g})"));
                }
            }
            m.push_str(&format!(
                "\n  help: mount the host folder that holds it: `volumes: ['/HOST/FOLDER:/{top}:ro']`; with the shipped server actions (`./actions/sglang-server`, `vllm-server`, `llamacpp-server`) give `models: /HOST/FOLDER`, mounted read-only at `/models`"
            ));
        }
    }
    Ok(m)
}

/// At the step's place: `spec`'s required paths checked in a throw-away container (started as
/// `NAME-paths`, removed right after), before the container itself is created. `origin` says
/// which input gave a missing host folder.
#[allow(clippy::too_many_arguments)]
pub async fn check_at_start(
    containers: &mut JobContainers,
    host: &Arc<dyn StepHost>,
    job: &JobRef,
    name: &str,
    spec: &ContainerSpec,
    paths: &[String],
    origin: Origin<'_>,
) -> Result<(), String> {
    let temp = format!("{name}-paths");
    let id = containers
        .start(host, job, &temp, spec.clone().harmless())
        .await
        .map_err(|e| {
            format!(
                "could not start a throw-away container of `{}` to look for {}: {}",
                spec.image,
                paths
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                start_error(&e, spec, origin)
            )
        })?
        .id
        .clone();
    let place = InContainer {
        docker: containers.docker.clone(),
        id,
        name: name.to_string(),
    };
    let result = check(&place, &spec.image, &spec.volumes, paths).await;
    let removed = containers
        .stop(host, job, &temp, Duration::from_secs(0), true)
        .await;
    result?;
    removed
        .map(|_| ())
        .map_err(|e| format!("could not remove the throw-away container `{temp}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vol(s: &str) -> VolumeMount {
        crate::engine::container_inputs::volume(s).unwrap()
    }

    #[test]
    fn the_deepest_mount_holding_the_path_is_its_source() {
        let vs = [
            vol("/srv:/models:ro"),
            vol("/big/qwen:/models/qwen"),
            vol("/x:/modelsx"),
        ];
        let (v, rest) = mount_of(&vs, "/models/qwen/config.json").unwrap();
        assert_eq!(
            (v.source.as_str(), rest.as_str()),
            ("/big/qwen", "config.json")
        );
        let (v, rest) = mount_of(&vs, "/models/llama").unwrap();
        assert_eq!((v.source.as_str(), rest.as_str()), ("/srv", "llama"));
        let (v, rest) = mount_of(&vs, "/models").unwrap();
        assert_eq!((v.source.as_str(), rest.as_str()), ("/srv", ""));
        // `/modelsx` is not under `/models`, nor `/modelsy` under `/modelsx`.
        assert!(mount_of(&vs, "/modelsy/a").is_none());
    }

    #[test]
    fn a_missing_host_folder_names_the_input_that_gave_it() {
        let inputs = IndexMap::from([
            ("model".to_string(), "/models/m".to_string()),
            ("models".to_string(), " /data/modles/ ".to_string()),
            ("volumes".to_string(), "/x:/x\n/data/y:/y:ro".to_string()),
        ]);
        assert_eq!(input_giving(&inputs, "/data/modles"), Some("models"));
        assert_eq!(input_giving(&inputs, "/data/y"), Some("volumes"));
        assert_eq!(input_giving(&inputs, "/data"), None);

        let mut spec = ContainerSpec::new("img");
        spec.volumes = vec![vol("/data/y:/y:ro")];
        let e = ContainerError::Backend(BackendError::BindSourceMissing {
            path: "/data/y".into(),
            target: Some("/y".into()),
            endpoint: "unix:///var/run/docker.sock".into(),
        });
        // Without an origin, the step's own `volumes` item, as written.
        assert_eq!(
            start_error(&e, &spec, &|_| None),
            "the host path `/data/y` to mount at `/y` does not exist on the Docker engine's host (`unix:///var/run/docker.sock`); the step's `volumes` gives it as `/data/y:/y:ro` (help: create it on that host (`mkdir -p /data/y`), or give the path of the folder that holds the files; gpuflow does not let Docker create it, empty and owned by root)"
        );
        let m = start_error(&e, &spec, &|p| {
            Some(format!("the action's input `volumes` gives `{p}`"))
        });
        assert!(
            m.contains("; the action's input `volumes` gives `/data/y` (help: "),
            "{m}"
        );
    }

    #[test]
    fn blank_items_and_lines_give_no_paths() {
        let inputs = IndexMap::from([(
            "required-paths".to_string(),
            Value::Array(vec![
                Value::String(String::new()),
                Value::String("/models/a\n\n /models/b ".into()),
            ]),
        )]);
        assert_eq!(paths(&inputs), ["/models/a", "/models/b"]);
        assert!(paths(&IndexMap::new()).is_empty());
    }
}
