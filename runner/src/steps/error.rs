//! Why a built-in step failed, as a type: what [`super::Builtin::run`] answers. The engine
//! turns it into the line the user reads ([`StepError::render`]), pointing an input's problem
//! at that input under `with:` in the workflow, so a step never formats places itself.

/// A built-in step's failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// The step ran and did not succeed: a server that died, a file that is missing, a
    /// regression found, a stop asked for.
    #[error("{message}")]
    Failed {
        message: String,
        /// A line saying how to fix it.
        hint: Option<String>,
    },
    /// One of its inputs cannot be used as given: said at that input's place in the workflow
    /// (the declared default's problem has no place, and is said without one).
    #[error("{message}")]
    Input {
        /// The input's name as written under `with:`.
        input: String,
        message: String,
        hint: Option<String>,
    },
    /// It starts, stops or looks into containers, and the job's host has no Docker engine.
    #[error("`{step}` needs a Docker engine, and this job's host has none")]
    NoEngine { step: &'static str },
}

impl StepError {
    /// A failure with a line saying how to fix it.
    pub fn failed(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::Failed {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    /// The input `input` cannot be used: `message` says why (naming it), `hint` how to fix it.
    pub fn input(input: &str, message: impl Into<String>, hint: Option<String>) -> Self {
        Self::Input {
            input: input.to_owned(),
            message: message.into(),
            hint,
        }
    }

    /// The line saying how to fix it, if there is one.
    pub fn hint(&self) -> Option<&str> {
        match self {
            Self::Failed { hint, .. } | Self::Input { hint, .. } => hint.as_deref(),
            Self::NoEngine { .. } => Some("run the job on a host with Docker (`runs-on:`)"),
        }
    }

    /// The input it concerns, if it is an input's problem.
    pub fn input_name(&self) -> Option<&str> {
        match self {
            Self::Input { input, .. } => Some(input),
            _ => None,
        }
    }

    /// The text the user reads: the message, prefixed with `place` (the input's
    /// `file:line:col`, when the caller found one), with its hint in `(help: …)`.
    pub fn render(&self, place: Option<&str>) -> String {
        let mut text = match place {
            Some(place) => format!("{place}: {self}"),
            None => self.to_string(),
        };
        if let Some(hint) = self.hint() {
            text.push_str(&format!(" (help: {hint})"));
        }
        text
    }
}

/// A failure said in words only (most of a step's runtime failures).
impl From<String> for StepError {
    fn from(message: String) -> Self {
        Self::Failed {
            message,
            hint: None,
        }
    }
}

impl From<&str> for StepError {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

impl From<crate::bench::ConfigError> for StepError {
    fn from(e: crate::bench::ConfigError) -> Self {
        Self::Input {
            input: e.input,
            message: e.message,
            hint: e.hint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inputs_problem_is_said_at_its_place_with_its_hint() {
        let e = StepError::input(
            "tail-lines",
            "`tail-lines` is `lots`, not a whole number",
            Some("e.g. `tail-lines: 50`".into()),
        );
        assert_eq!(e.input_name(), Some("tail-lines"));
        assert_eq!(
            e.render(Some("w.yml:9:21")),
            "w.yml:9:21: `tail-lines` is `lots`, not a whole number (help: e.g. `tail-lines: 50`)"
        );
        assert_eq!(
            e.render(None),
            "`tail-lines` is `lots`, not a whole number (help: e.g. `tail-lines: 50`)"
        );
    }

    #[test]
    fn a_failure_in_words_is_said_as_it_is() {
        let e = StepError::from("the server exited with status 1");
        assert_eq!(e.input_name(), None);
        assert_eq!(e.render(None), "the server exited with status 1");
        let no_engine = StepError::NoEngine {
            step: "start-container",
        };
        assert_eq!(
            no_engine.render(None),
            "`start-container` needs a Docker engine, and this job's host has none \
             (help: run the job on a host with Docker (`runs-on:`))"
        );
    }
}
