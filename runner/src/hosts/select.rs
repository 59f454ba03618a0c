//! Choosing the host a job runs on, from `runs-on` and `--host`.
//!
//! `--host NAME` wins and must name a host. Otherwise each `runs-on` value must be the host's
//! name or one of its labels (all of them, as with GitHub's label sets); nothing, or `local`,
//! means the local engine. When several hosts match, the first in `gpuflow.toml` is taken, so
//! the choice is the same on every run.

use super::host::{Host, LOCAL};
use super::host_config::HostConfig;
use std::sync::Arc;

use crate::diag::{Diagnostic, SourceFile, Span, did_you_mean, join_quoted};

/// Why no host could be chosen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// `--host` names no host.
    #[error("no host named `{name}`")]
    UnknownHost {
        name: String,
        known: Vec<String>,
        config: Option<String>,
    },
    /// No host has every name/label `runs-on` asks for.
    #[error("no host matches `runs-on: {}`", runs_on(.wanted))]
    NoMatch {
        wanted: Vec<String>,
        /// Each host with its name and labels, for the note.
        hosts: Vec<(String, Vec<String>)>,
        config: Option<String>,
    },
}

fn runs_on(wanted: &[String]) -> String {
    match wanted {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

impl SelectError {
    /// How to fix it.
    pub fn hint(&self) -> String {
        match self {
            Self::UnknownHost {
                name,
                known,
                config,
            } => did_you_mean(name, known).unwrap_or_else(|| match config {
                Some(file) => format!(
                    "the hosts are {} (defined in `{file}`)",
                    join_quoted(known, "and")
                ),
                None => format!(
                    "without a `gpuflow.toml` the only host is `{LOCAL}`: add `[hosts.{name}]` \
                         with an `endpoint` to `gpuflow.toml` in the workspace root \
                         (docs/hosts.md)"
                ),
            }),
            Self::NoMatch { wanted, config, .. } => {
                let file = config.as_deref().unwrap_or("gpuflow.toml");
                format!(
                    "give a host these labels in `{file}` (`labels = [{}]`), or choose one with \
                     `--host NAME`",
                    wanted
                        .iter()
                        .map(|w| format!("\"{w}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        }
    }

    /// What there is to choose from.
    pub fn note(&self) -> String {
        match self {
            Self::UnknownHost { known, .. } => format!("hosts: {}", join_quoted(known, "and")),
            Self::NoMatch { hosts, .. } => {
                let each: Vec<String> = hosts
                    .iter()
                    .map(|(name, labels)| {
                        if labels.is_empty() {
                            format!("`{name}` (no labels)")
                        } else {
                            format!("`{name}` ({})", labels.join(", "))
                        }
                    })
                    .collect();
                format!("hosts: {}", each.join("; "))
            }
        }
    }

    /// The error as a diagnostic with no place (`--host`, or no workflow at hand).
    pub fn to_diagnostic(&self) -> Diagnostic {
        Diagnostic::unlocated(self.to_string())
            .note(self.note())
            .hint(self.hint())
    }

    /// The error pointing at the job's `runs-on` in its workflow file.
    pub fn located(&self, file: &Arc<SourceFile>, runs_on: Span) -> Diagnostic {
        Diagnostic::error(file, runs_on, self.to_string())
            .label("no host has all of these")
            .note(self.note())
            .hint(self.hint())
    }
}

impl HostConfig {
    /// The host for a job with `runs-on: runs_on`, unless `host_override` (`--host`) names one.
    pub fn select(
        &self,
        runs_on: &[String],
        host_override: Option<&str>,
    ) -> Result<&Host, SelectError> {
        let config = self.file().map(|f| f.name.clone());
        if let Some(name) = host_override {
            return self.get(name).ok_or_else(|| SelectError::UnknownHost {
                name: name.to_string(),
                known: self.names().map(str::to_string).collect(),
                config,
            });
        }
        if runs_on.is_empty() {
            return Ok(self
                .get(LOCAL)
                .expect("the local host is always configured"));
        }
        self.hosts()
            .iter()
            .find(|host| host.matches(runs_on))
            .ok_or_else(|| SelectError::NoMatch {
                wanted: runs_on.to_vec(),
                hosts: self
                    .hosts()
                    .iter()
                    .map(|h| (h.name.clone(), h.labels.clone()))
                    .collect(),
                config,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::SourceFile;
    use test_case::test_case;

    const CONFIG: &str = r#"
[hosts.laptop-gpu]
endpoint = "unix:///var/run/docker.sock"
labels = ["small"]

[hosts.node-a]
endpoint = "ssh://me@node-a"
labels = ["blackwell", "8gpu"]

[hosts.node-b]
endpoint = "ssh://me@node-b"
labels = ["blackwell", "4gpu"]
"#;

    fn config() -> HostConfig {
        HostConfig::parse(&SourceFile::new("gpuflow.toml", CONFIG)).unwrap()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    #[test_case(&[], None, "local" ; "nothing means local")]
    #[test_case(&["local"], None, "local" ; "local by name")]
    #[test_case(&["node-b"], None, "node-b" ; "by name")]
    #[test_case(&["blackwell"], None, "node-a" ; "first match in file order")]
    #[test_case(&["blackwell", "4gpu"], None, "node-b" ; "all labels must match")]
    #[test_case(&["blackwell"], Some("laptop-gpu"), "laptop-gpu" ; "override wins")]
    #[test_case(&["nothing-has-this"], Some("local"), "local" ; "override of an unmatched runs-on")]
    fn selects(runs_on: &[&str], host: Option<&str>, expected: &str) {
        let config = config();
        assert_eq!(
            config.select(&strings(runs_on), host).unwrap().name,
            expected
        );
    }

    #[test]
    fn no_match_lists_every_host_and_its_labels() {
        let config = config();
        let e = config
            .select(&strings(&["blackwell", "2gpu"]), None)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "no host matches `runs-on: [blackwell, 2gpu]`"
        );
        assert_eq!(
            e.note(),
            "hosts: `local` (no labels); `laptop-gpu` (small); `node-a` (blackwell, 8gpu); \
             `node-b` (blackwell, 4gpu)"
        );
        assert!(
            e.hint().contains(r#"`labels = ["blackwell", "2gpu"]`"#),
            "{}",
            e.hint()
        );
        assert!(e.hint().contains("--host"), "{}", e.hint());
    }

    #[test]
    fn an_unknown_override_suggests_the_closest_host() {
        let config = config();
        let e = config.select(&[], Some("node-c")).unwrap_err();
        assert_eq!(e.to_string(), "no host named `node-c`");
        assert_eq!(e.hint(), "did you mean `node-a`?");
        let e = config.select(&[], Some("zzz")).unwrap_err();
        assert!(
            e.hint()
                .contains("`local`, `laptop-gpu`, `node-a`, and `node-b`"),
            "{}",
            e.hint()
        );
    }

    #[test]
    fn the_error_can_point_at_runs_on_in_the_workflow() {
        let workflow = SourceFile::new("w.yml", "jobs:\n  a:\n    runs-on: hopper\n");
        let e = config().select(&strings(&["hopper"]), None).unwrap_err();
        let d = e.located(&workflow, Span::new(24, 30));
        assert_eq!(d.location(), "w.yml:3:14");
        assert_eq!(d.message, "no host matches `runs-on: hopper`");
    }

    #[test]
    fn without_a_file_only_local_exists_and_the_hint_says_how_to_add_a_host() {
        let config = HostConfig::implicit();
        let e = config.select(&strings(&["blackwell"]), None).unwrap_err();
        assert!(e.hint().contains("gpuflow.toml"), "{}", e.hint());
        let e = config.select(&[], Some("blackwell")).unwrap_err();
        assert!(e.hint().contains("[hosts.blackwell]"), "{}", e.hint());
        assert_eq!(config.select(&[], None).unwrap().name, "local");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Whatever is asked, the chosen host has everything asked for.
        #[test]
        fn the_chosen_host_has_every_label_asked_for(
            wanted in proptest::collection::vec("(local|node-a|node-b|laptop-gpu|blackwell|8gpu|4gpu|small|other)", 0..4)
        ) {
            let config = config();
            if let Ok(host) = config.select(&wanted, None) {
                proptest::prop_assert!(host.matches(&wanted));
            } else {
                proptest::prop_assert!(config.hosts().iter().all(|h| !h.matches(&wanted)));
            }
        }
    }
}
