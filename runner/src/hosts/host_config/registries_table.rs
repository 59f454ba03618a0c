//! `[registries."NAME"]`: credentials for pulls from a registry, for workflows that should not
//! carry them. The password is never in the file: `password-secret` names the secret whose
//! value the run is given (`--secret`, `--secrets-file`). A password written in the file is
//! refused at its place, and the diagnostic's source line shows it as `*`s.

use serde::{Deserialize, Serialize};
use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Key, Reader};
use crate::backend::normalize_registry;
use crate::diag::{Diagnostic, SourceFile, Span, did_you_mean, join_quoted};

const REGISTRY_KEYS: [&str; 2] = ["username", "password-secret"];

/// One registry's credentials as `gpuflow.toml` gives them: the password by its secret's name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryConfig {
    /// The registry's host (`nvcr.io`, `127.0.0.1:5000`, `docker.io`), as the engine names it.
    pub registry: String,
    pub username: String,
    /// The secret holding the password (`secrets.NAME`).
    pub password_secret: String,
    /// `gpuflow.toml:3:1`: where the table is, for messages.
    pub at: String,
}

impl Reader {
    /// `[registries]`: one table per registry.
    pub(super) fn registries(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<RegistryConfig> {
        let DeValue::Table(table) = value.get_ref() else {
            self.push(
                Diagnostic::error(
                    &self.file,
                    Span::from(value.span()),
                    "`registries` must be a table",
                )
                .hint(TABLE_HINT),
            );
            return Vec::new();
        };
        let mut out: Vec<(RegistryConfig, Span)> = Vec::new();
        for (name, entry) in table {
            let Some(config) = self.registry(name, entry) else {
                continue;
            };
            let span = Span::from(name.span());
            if let Some((first, first_span)) =
                out.iter().find(|(c, _)| c.registry == config.registry)
            {
                let d = Diagnostic::error(
                    &self.file,
                    span,
                    format!("the registry `{}` is given twice", first.registry),
                )
                .label("the same registry as an earlier table")
                .hint("keep one table per registry")
                .related(&self.file, *first_span, "given here first");
                self.push(d);
                continue;
            }
            out.push((config, span));
        }
        out.into_iter().map(|(c, _)| c).collect()
    }

    fn registry(&mut self, name: &Key<'_>, entry: &Spanned<DeValue<'_>>) -> Option<RegistryConfig> {
        let written = name.get_ref().to_string();
        let name_span = Span::from(name.span());
        if let Some(problem) = invalid_registry(&written) {
            self.push(
                Diagnostic::error(
                    &self.file,
                    name_span,
                    format!("invalid registry `{written}`"),
                )
                .label(problem)
                .hint("name the registry's host as an image reference begins with it: `[registries.\"nvcr.io\"]`, `[registries.\"127.0.0.1:5000\"]`"),
            );
            return None;
        }
        let DeValue::Table(table) = entry.get_ref() else {
            self.push(
                Diagnostic::error(
                    &self.file,
                    Span::from(entry.span()),
                    format!("`registries.\"{written}\"` must be a table"),
                )
                .hint(TABLE_HINT),
            );
            return None;
        };
        let (mut username, mut secret) = (None, None);
        // Keys written, also with a bad value (which has its own diagnostic).
        let mut written_keys = Vec::new();
        for (key, value) in table {
            written_keys.push(key.get_ref().to_string());
            match key.get_ref().as_ref() {
                "username" => username = self.text(key, value, "a username"),
                "password-secret" => secret = self.secret_name(value),
                "password" => self.literal_password(key, value),
                other => {
                    let d = Diagnostic::error(
                        &self.file,
                        Span::from(key.span()),
                        format!("unknown key `{other}`"),
                    )
                    .label("not a key of a registry")
                    .maybe_hint(did_you_mean(other, &REGISTRY_KEYS))
                    .note(format!("expected {}", join_quoted(REGISTRY_KEYS, "or")));
                    self.push(d);
                }
            }
        }
        let has = |key: &str| written_keys.iter().any(|k| k == key);
        // A password written in the file is said already, with where it belongs.
        let said = |key: &str| has(key) || (key == "password-secret" && has("password"));
        for key in REGISTRY_KEYS {
            if !said(key) {
                self.push(
                    Diagnostic::error(
                        &self.file,
                        name_span,
                        format!("the registry `{written}` has no `{key}`"),
                    )
                    .label(format!("`{key}` is missing"))
                    .hint(TABLE_HINT),
                );
            }
        }
        Some(RegistryConfig {
            registry: normalize_registry(&written),
            username: username?,
            password_secret: secret?,
            at: self.file.location(name_span),
        })
    }

    /// A non-empty string, or a diagnostic saying `what` it must be.
    fn text(&mut self, key: &Key<'_>, value: &Spanned<DeValue<'_>>, what: &str) -> Option<String> {
        match value.get_ref() {
            DeValue::String(s) if !s.is_empty() => Some(s.to_string()),
            _ => {
                let name = key.get_ref().as_ref();
                self.push(
                    Diagnostic::error(
                        &self.file,
                        Span::from(value.span()),
                        format!("`{name}` must be {what}, as a non-empty string"),
                    )
                    .hint(TABLE_HINT),
                );
                None
            }
        }
    }

    /// `password-secret`: a secret's name. Anything else may be the password itself, put
    /// where its name belongs: neither said nor shown.
    fn secret_name(&mut self, value: &Spanned<DeValue<'_>>) -> Option<String> {
        let span = Span::from(value.span());
        if let DeValue::String(s) = value.get_ref()
            && is_secret_name(s)
        {
            return Some(s.to_string());
        }
        let shown = hidden(&self.file, span);
        self.push(
            Diagnostic::error(
                &shown,
                span,
                "`password-secret` must be the name of a secret, not its value",
            )
            .label("not a secret's name (letters, digits and `_`, not starting with a digit)")
            .hint(format!(
                "{PASSWORD_HINT}; if that was the password, change it: it is in the file"
            )),
        );
        None
    }

    /// `password = "…"`: refused, the value hidden in the source line shown.
    fn literal_password(&mut self, key: &Key<'_>, value: &Spanned<DeValue<'_>>) {
        let span = Span::new(Span::from(key.span()).start, Span::from(value.span()).end);
        let shown = hidden(&self.file, Span::from(value.span()));
        self.push(
            Diagnostic::error(&shown, span, "a password is never written in gpuflow.toml")
                .label("a password in the file")
                .hint(PASSWORD_HINT)
                .note("the file is read by anyone who can read the workspace, and often committed"),
        );
    }
}

const TABLE_HINT: &str = "write one table per registry: `[registries.\"nvcr.io\"]` with \
     `username = \"$oauthtoken\"` and `password-secret = \"NGC_KEY\"`";

const PASSWORD_HINT: &str = "keep the password in a secret and name it: `password-secret = \"NGC_KEY\"`, \
     then run with `--secret NGC_KEY` (read from the environment variable `NGC_KEY`) or \
     `--secrets-file`";

/// `file` with the bytes of `span` shown as `*` (a password's), for a diagnostic whose source
/// line must not show it. Byte for byte, so every span still points at the same place.
fn hidden(file: &SourceFile, span: Span) -> std::sync::Arc<SourceFile> {
    let mut bytes = file.text.as_bytes().to_vec();
    let end = span.end.min(bytes.len());
    for b in &mut bytes[span.start.min(end)..end] {
        if !matches!(*b, b'"' | b'\'' | b'\n') {
            *b = b'*';
        }
    }
    SourceFile::new(
        file.name.clone(),
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// GitHub's rule for a secret's name: letters, digits and `_`, not starting with a digit.
fn is_secret_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why `name` cannot be a registry's host, if it cannot.
fn invalid_registry(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("it is empty")
    } else if name.contains("://") {
        Some("a host, not a URL")
    } else if name.contains('/') {
        Some("a host, without a path")
    } else if name.chars().any(char::is_whitespace) {
        Some("a host has no spaces")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::diag::{Diagnostics, RenderOptions, SourceFile, render_all};
    use crate::hosts::{HostConfig, RegistryConfig};

    fn parse(text: &str) -> Result<HostConfig, Diagnostics> {
        HostConfig::parse(&SourceFile::new("gpuflow.toml", text))
    }

    fn rendered(text: &str) -> String {
        render_all(&parse(text).unwrap_err(), RenderOptions::default())
    }

    #[test]
    fn a_registry_gets_a_username_and_the_secret_of_its_password() {
        let config = parse(
            "[registries.\"NVCR.io\"]\nusername = \"$oauthtoken\"\npassword-secret = \"NGC_KEY\"\n\n\
             [registries.\"127.0.0.1:5000\"]\nusername = \"me\"\npassword-secret = \"LOCAL\"\n",
        )
        .unwrap();
        assert_eq!(
            config.registries(),
            [
                RegistryConfig {
                    registry: "nvcr.io".into(),
                    username: "$oauthtoken".into(),
                    password_secret: "NGC_KEY".into(),
                    at: "gpuflow.toml:1:13".into(),
                },
                RegistryConfig {
                    registry: "127.0.0.1:5000".into(),
                    username: "me".into(),
                    password_secret: "LOCAL".into(),
                    at: "gpuflow.toml:5:13".into(),
                },
            ]
        );
    }

    #[test]
    fn a_password_in_the_file_is_refused_at_its_place_and_not_shown() {
        let text = "[registries.\"nvcr.io\"]\nusername = \"u\"\npassword = \"hunter2-pw\"\n";
        let out = rendered(text);
        assert!(
            out.contains("a password is never written in gpuflow.toml"),
            "{out}"
        );
        assert!(out.contains("--> gpuflow.toml:3:1"), "{out}");
        assert!(out.contains("password-secret = \"NGC_KEY\""), "{out}");
        assert!(
            out.contains("**********"),
            "the value shown as stars: {out}"
        );
        assert!(!out.contains("hunter2"), "{out}");
    }

    #[test]
    fn a_password_where_its_secrets_name_belongs_is_not_shown() {
        let out = rendered(
            "[registries.\"nvcr.io\"]\nusername = \"u\"\npassword-secret = \"hunter2 pw!\"\n",
        );
        assert!(
            out.contains("must be the name of a secret, not its value"),
            "{out}"
        );
        assert!(out.contains("--> gpuflow.toml:3:19"), "{out}");
        assert!(!out.contains("hunter2"), "{out}");
    }

    #[test]
    fn every_problem_of_a_registry_table_is_said_with_its_place() {
        let out = rendered(
            "[registries.\"https://ghcr.io\"]\nusername = \"u\"\npassword-secret = \"S\"\n\n\
             [registries.\"ghcr.io\"]\nuser = \"u\"\n\n\
             [registries.\"docker.io\"]\nusername = \"u\"\npassword-secret = \"S\"\n\n\
             [registries.\"index.docker.io\"]\nusername = \"v\"\npassword-secret = \"T\"\n\n\
             [registry]\n",
        );
        for said in [
            "error: invalid registry `https://ghcr.io`\n --> gpuflow.toml:1:13",
            "error: unknown key `user`\n --> gpuflow.toml:6:1",
            "help: did you mean `username`?",
            "error: the registry `ghcr.io` has no `username`\n --> gpuflow.toml:5:13",
            "error: the registry `ghcr.io` has no `password-secret`",
            "error: the registry `docker.io` is given twice\n  --> gpuflow.toml:12:13",
            "error: unknown key `registry`",
        ] {
            assert!(out.contains(said), "no `{said}` in:\n{out}");
        }
    }
}
