//! Where requests' prompts come from: synthetic text of an exact length, a JSONL file of
//! prompts, or a ShareGPT-format conversation file. Files are read and checked once, before
//! any request is sent, so a bad line fails the benchmark at once with its line number.
//!
//! Synthetic prompts are whitespace-separated words: servers that count words as tokens (the
//! simulator) see exactly `input-tokens`; real tokenizers see about that many. Each request
//! gets different words (seeded), so a prefix cache cannot make later requests cheaper.
//! Knows nothing about HTTP or metrics.

use std::path::{Path, PathBuf};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// Where prompts come from.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptSource {
    /// `input_tokens` words per prompt.
    Synthetic { input_tokens: u32 },
    /// One JSON object per line with a `prompt` (or `text`) string, optionally
    /// `output_tokens` (or `max_tokens`) for that request.
    Jsonl(PathBuf),
    /// A JSON list of `{"conversations": [{"from": "human", "value": …}, …]}`: the first
    /// human turn is the prompt.
    ShareGpt(PathBuf),
}

/// One request's prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    pub text: String,
    /// Words in the prompt: the simulator's token count; for other servers, `usage` decides.
    pub words: usize,
    /// This prompt's own completion length, when its file gives one.
    pub output_tokens: Option<u32>,
}

/// Prompts ready to hand out by request number.
#[derive(Debug)]
pub enum Prompts {
    Synthetic { input_tokens: u32, seed: u64 },
    Loaded(Vec<Prompt>),
}

/// A prompt file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PromptError {
    pub message: String,
    pub hint: Option<String>,
}

const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there",
    "been", "if", "more", "when", "will", "would", "who", "so", "no", "river", "model", "token",
    "graph", "kernel", "memory", "cache", "tensor", "layer", "signal", "window", "stream",
    "garden", "copper", "lantern", "harbor",
];

impl Prompts {
    pub fn load(source: &PromptSource, seed: u64) -> Result<Self, PromptError> {
        match source {
            PromptSource::Synthetic { input_tokens } => Ok(Self::Synthetic {
                input_tokens: *input_tokens,
                seed,
            }),
            PromptSource::Jsonl(path) => Ok(Self::Loaded(load_jsonl(path)?)),
            PromptSource::ShareGpt(path) => Ok(Self::Loaded(load_sharegpt(path)?)),
        }
    }

    /// The prompt of request `index` (files are cycled when there are more requests than
    /// prompts).
    pub fn get(&self, index: u64) -> Prompt {
        match self {
            Self::Synthetic { input_tokens, seed } => {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(
                    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index,
                );
                let n = *input_tokens as usize;
                let mut text = String::with_capacity(n * 7);
                for i in 0..n {
                    if i > 0 {
                        text.push(' ');
                    }
                    text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
                }
                Prompt {
                    text,
                    words: n,
                    output_tokens: None,
                }
            }
            Self::Loaded(prompts) => {
                // `load` refuses empty files, and the modulo keeps the index in range.
                #[allow(clippy::cast_possible_truncation)]
                let i = (index % prompts.len() as u64) as usize;
                prompts[i].clone()
            }
        }
    }
}

fn read(path: &Path) -> Result<String, PromptError> {
    std::fs::read_to_string(path).map_err(|e| PromptError {
        message: format!("cannot read prompt file `{}`: {e}", path.display()),
        hint: Some(
            "check `prompt-file`; a relative path is read from the working directory".into(),
        ),
    })
}

fn prompt(text: String, output_tokens: Option<u32>) -> Prompt {
    Prompt {
        words: text.split_whitespace().count(),
        text,
        output_tokens,
    }
}

fn load_jsonl(path: &Path) -> Result<Vec<Prompt>, PromptError> {
    let content = read(path)?;
    let mut prompts = Vec::new();
    for (n, line) in content.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("`{}` line {}", path.display(), n + 1);
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| PromptError {
            message: format!("{at} is not JSON: {e}"),
            hint: Some("each line is one object: `{\"prompt\": \"…\"}`".into()),
        })?;
        let text = value
            .get("prompt")
            .or_else(|| value.get("text"))
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| PromptError {
                message: format!("{at} has no `prompt` string"),
                hint: Some(
                    "write `{\"prompt\": \"…\"}` (optionally with `\"output_tokens\": N`)".into(),
                ),
            })?;
        let output = value
            .get("output_tokens")
            .or_else(|| value.get("max_tokens"))
            .map(|v| {
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| PromptError {
                        message: format!("{at}: `output_tokens` is `{v}`, not a whole number"),
                        hint: None,
                    })
            })
            .transpose()?;
        prompts.push(prompt(text.to_owned(), output));
    }
    if prompts.is_empty() {
        return Err(PromptError {
            message: format!("prompt file `{}` holds no prompts", path.display()),
            hint: Some("write one `{\"prompt\": \"…\"}` object per line".into()),
        });
    }
    Ok(prompts)
}

fn load_sharegpt(path: &Path) -> Result<Vec<Prompt>, PromptError> {
    let content = read(path)?;
    let value: serde_json::Value = serde_json::from_str(&content).map_err(|e| PromptError {
        message: format!("ShareGPT file `{}` is not JSON: {e}", path.display()),
        hint: Some("a ShareGPT file is one JSON list of `{\"conversations\": […]}`; for one prompt per line use `prompts: jsonl`".into()),
    })?;
    let entries = value.as_array().ok_or_else(|| PromptError {
        message: format!("ShareGPT file `{}` is not a JSON list", path.display()),
        hint: Some("a ShareGPT file is `[{\"conversations\": [{\"from\": \"human\", \"value\": \"…\"}, …]}, …]`".into()),
    })?;
    // As vLLM: only conversations with a reply, and the first turn as the prompt.
    let prompts: Vec<Prompt> = entries
        .iter()
        .filter_map(|entry| {
            let turns = entry.get("conversations")?.as_array()?;
            if turns.len() < 2 {
                return None;
            }
            let first = turns.iter().find(|t| {
                matches!(
                    t.get("from").and_then(serde_json::Value::as_str),
                    Some("human" | "user")
                )
            })?;
            Some(prompt(first.get("value")?.as_str()?.to_owned(), None))
        })
        .collect();
    if prompts.is_empty() {
        return Err(PromptError {
            message: format!(
                "ShareGPT file `{}` has no conversation with a human turn and a reply",
                path.display()
            ),
            hint: Some(
                "each entry needs `conversations` with at least two turns, the first from `human`"
                    .into(),
            ),
        });
    }
    Ok(prompts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_prompts_have_exact_length_and_differ() {
        let p = Prompts::load(&PromptSource::Synthetic { input_tokens: 37 }, 1).unwrap();
        let (a, b) = (p.get(0), p.get(1));
        assert_eq!(a.text.split_whitespace().count(), 37);
        assert_eq!(a.words, 37);
        assert_ne!(a.text, b.text);
        assert_eq!(a, p.get(0), "seeded: the same request gets the same prompt");
    }

    #[test]
    fn jsonl_prompts_with_their_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jsonl");
        std::fs::write(
            &path,
            "{\"prompt\": \"a b c\"}\n\n{\"text\": \"d e\", \"output_tokens\": 9}\n",
        )
        .unwrap();
        let p = Prompts::load(&PromptSource::Jsonl(path), 0).unwrap();
        assert_eq!(p.get(0).words, 3);
        assert_eq!(p.get(1).output_tokens, Some(9));
        assert_eq!(p.get(2).text, "a b c", "cycled");
    }

    #[test]
    fn jsonl_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.jsonl");
        std::fs::write(&path, "{\"prompt\": \"a\"}\n{\"promt\": \"b\"}\n").unwrap();
        let err = Prompts::load(&PromptSource::Jsonl(path), 0).unwrap_err();
        assert!(err.message.contains("line 2 has no `prompt`"), "{err}");
        let missing = Prompts::load(&PromptSource::Jsonl(dir.path().join("nope")), 0);
        assert!(
            missing
                .unwrap_err()
                .message
                .starts_with("cannot read prompt file")
        );
    }

    #[test]
    fn sharegpt_takes_the_first_human_turn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        std::fs::write(
            &path,
            r#"[{"conversations": [{"from": "human", "value": "hi there"}, {"from": "gpt", "value": "hello"}]},
                {"conversations": [{"from": "human", "value": "alone"}]}]"#,
        )
        .unwrap();
        let p = Prompts::load(&PromptSource::ShareGpt(path), 0).unwrap();
        assert_eq!(p.get(0).text, "hi there");
        assert_eq!(p.get(1).text, "hi there", "the one-turn entry is skipped");
    }
}
