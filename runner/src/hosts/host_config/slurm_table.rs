//! `[hosts.NAME.slurm]`: a Slurm cluster's submission settings, checked at their places.

use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::DeValue;

use super::reader::Reader;
use crate::diag::{Diagnostic, Span};
use crate::hosts::SlurmSettings;

const SLURM_KEYS: [&str; 8] = [
    "partition",
    "account",
    "qos",
    "time-limit",
    "sbatch-options",
    "shared-dir",
    "gpuflow",
    "gpu-types",
];

impl Reader {
    /// The settings, or `None` after saying what is wrong with them.
    pub(super) fn slurm(
        &mut self,
        host: &str,
        value: &Spanned<DeValue<'_>>,
    ) -> Option<SlurmSettings> {
        let span = Span::from(value.span());
        let DeValue::Table(table) = value.get_ref() else {
            self.push(
                Diagnostic::error(&self.file, span, "`slurm` must be a table")
                    .hint(format!(
                        "write `[hosts.{host}.slurm]` with `shared-dir = \"/shared/gpuflow\"` (docs/slurm.md)"
                    )),
            );
            return None;
        };
        let mut settings = SlurmSettings::default();
        let mut shared_dir = None;
        let errors_before = self.diagnostics.len();
        for (key, value) in table {
            let name = key.get_ref().as_ref();
            match name {
                "partition" => settings.partition = self.string(value, name, "gpu"),
                "account" => settings.account = self.string(value, name, "ml-team"),
                "qos" => settings.qos = self.string(value, name, "normal"),
                "time-limit" => settings.time_limit = self.time_limit(value),
                "sbatch-options" => settings.sbatch_options = self.sbatch_options(value),
                "shared-dir" => shared_dir = self.absolute_path(value, name, "/shared/gpuflow"),
                "gpuflow" => {
                    settings.gpuflow = self.absolute_path(value, name, "/shared/bin/gpuflow")
                }
                "gpu-types" => settings.gpu_types = self.names(value, name, "h100"),
                _ => self.unknown_key(key, &SLURM_KEYS, "a key of `slurm`"),
            }
        }
        let Some(shared_dir) = shared_dir else {
            if !table.contains_key("shared-dir") {
                self.push(
                    Diagnostic::error(&self.file, span, format!("`[hosts.{host}.slurm]` has no `shared-dir`"))
                        .label("a `shared-dir` key is needed here")
                        .hint("add `shared-dir = \"/shared/gpuflow\"`: a folder the nodes and this machine see at the same path, through which each run's jobs, logs and outputs travel"),
                );
            }
            return None;
        };
        settings.shared_dir = shared_dir;
        (self.diagnostics.len() == errors_before).then_some(settings)
    }

    fn absolute_path(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        key: &str,
        example: &str,
    ) -> Option<PathBuf> {
        let text = self.string(value, key, example)?;
        if Path::new(&text).is_absolute() {
            return Some(PathBuf::from(text));
        }
        self.push(
            Diagnostic::error(&self.file, Span::from(value.span()), format!("`{key}` must be an absolute path"))
                .label("relative")
                .hint(format!("the nodes read it too, from their own working folder: write e.g. `{key} = \"{example}\"`")),
        );
        None
    }

    /// `[D-]HH:MM:SS`, `HH:MM:SS`, `MM:SS` or whole minutes, as `sbatch --time` takes them.
    fn time_limit(&mut self, value: &Spanned<DeValue<'_>>) -> Option<String> {
        let text = match value.get_ref() {
            DeValue::Integer(n) => n.as_str().to_string(),
            _ => self.string(value, "time-limit", "2:00:00")?,
        };
        if slurm_time_is_valid(&text) {
            return Some(text);
        }
        self.push(
            Diagnostic::error(&self.file, Span::from(value.span()), format!("`time-limit` `{text}` is not a Slurm time"))
                .label("expected minutes, `HH:MM:SS` or `D-HH:MM:SS`")
                .hint("write e.g. `time-limit = \"2:00:00\"` (the `--time` of a job without `timeout-minutes`)"),
        );
        None
    }

    fn sbatch_options(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<String> {
        let strings = self.string_list(value, "sbatch-options", "--exclusive");
        let mut options = Vec::new();
        for (text, span) in strings {
            if text.starts_with("--") && !text.contains('\n') {
                options.push(text);
            } else {
                self.push(
                    Diagnostic::error(&self.file, span, format!("`{text}` is not a long `sbatch` option"))
                        .label("expected `--name` or `--name=value`")
                        .hint("write each option as one argument, e.g. `sbatch-options = [\"--constraint=h100\", \"--exclusive\"]`"),
                );
            }
        }
        options
    }

    fn names(&mut self, value: &Spanned<DeValue<'_>>, key: &str, example: &str) -> Vec<String> {
        let strings = self.string_list(value, key, example);
        let mut names = Vec::new();
        for (text, span) in strings {
            if !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                names.push(text);
            } else {
                self.push(
                    Diagnostic::error(&self.file, span, format!("invalid GPU type `{text}`"))
                        .hint("use the GRES type names of the cluster's gres.conf: letters, digits, `-`, `_`, `.`"),
                );
            }
        }
        names
    }

    fn string_list(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        key: &str,
        example: &str,
    ) -> Vec<(String, Span)> {
        let DeValue::Array(items) = value.get_ref() else {
            self.push(
                Diagnostic::error(
                    &self.file,
                    Span::from(value.span()),
                    format!("`{key}` must be a list of strings"),
                )
                .hint(format!("write e.g. `{key} = [\"{example}\"]`")),
            );
            return Vec::new();
        };
        let mut strings = Vec::new();
        for item in items {
            let span = Span::from(item.span());
            match item.get_ref() {
                DeValue::String(s) => strings.push((s.to_string(), span)),
                _ => self.push(
                    Diagnostic::error(
                        &self.file,
                        span,
                        format!("each of `{key}` must be a string"),
                    )
                    .hint(format!("quote it: `\"{example}\"`")),
                ),
            }
        }
        strings
    }
}

/// Whether `text` is a time `sbatch --time` takes: minutes, `MM:SS`, `HH:MM:SS`, `D-HH`,
/// `D-HH:MM`, `D-HH:MM:SS`.
fn slurm_time_is_valid(text: &str) -> bool {
    let numbers = |part: &str, most: usize| {
        let fields: Vec<&str> = part.split(':').collect();
        fields.len() <= most
            && fields
                .iter()
                .all(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit()))
    };
    match text.split_once('-') {
        Some((days, rest)) => numbers(days, 1) && numbers(rest, 3),
        None => numbers(text, 3),
    }
}

#[cfg(test)]
mod tests {
    use super::slurm_time_is_valid;
    use test_case::test_case;

    #[test_case("90", true ; "minutes")]
    #[test_case("2:00:00", true ; "hours")]
    #[test_case("1-12", true ; "days and hours")]
    #[test_case("1-12:30:00", true ; "days and time")]
    #[test_case("2h", false ; "a unit")]
    #[test_case("1:2:3:4", false ; "too many fields")]
    #[test_case("", false ; "empty")]
    #[test_case("-5", false ; "no days")]
    fn times(text: &str, valid: bool) {
        assert_eq!(slurm_time_is_valid(text), valid);
    }
}
