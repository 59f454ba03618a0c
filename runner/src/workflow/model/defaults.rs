//! `defaults:`, which a workflow and each of its jobs may have.

use schemars::JsonSchema;
use serde::Serialize;

use crate::diag::Spanned;

/// `defaults:` of a workflow or job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Defaults {
    /// Defaults for `run:` steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunDefaults>,
}

impl Defaults {
    pub fn is_empty(&self) -> bool {
        self.run.is_none()
    }
}

/// `defaults.run`: how `run:` steps run unless they say otherwise.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RunDefaults {
    /// The shell of `run:` steps (`bash`, `sh`, `python`, or a command with `{0}` for the
    /// script file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<Spanned<String>>,
    /// The folder `run:` steps start in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_directory: Option<Spanned<String>>,
}
