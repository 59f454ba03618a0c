//! OpenAI response shapes out: streamed chunks (`data: {…}\n\n` … `data: [DONE]\n\n`) and whole
//! responses, for `/v1/completions` and `/v1/chat/completions`, and the generated text.
//!
//! The text is whitespace-separated words, one per token, so a client counting words sees the
//! same number as `usage.completion_tokens`. The chat role travels in the first content chunk
//! rather than in an empty chunk before it, so every event a client receives carries tokens
//! (except the closing `usage` event). This file knows nothing of timing or connections.

use bytes::Bytes;
use serde::Serialize;

use super::request::Endpoint;

const WORDS: [&str; 16] = [
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "GPUs", "hum",
    "and", "tokens", "flow", "on",
];

/// The text of tokens `first..first + count` of a completion: one word per token.
pub fn token_text(first: u32, count: u32) -> String {
    let mut text = String::with_capacity(count as usize * 6);
    for i in first..first.saturating_add(count) {
        text.push(' ');
        text.push_str(WORDS[i as usize % WORDS.len()]);
    }
    text
}

/// Token counts as reported to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    /// Only with --prefix-cache, as servers report it when they cache prefixes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

/// OpenAI's breakdown of the prompt tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PromptTokensDetails {
    /// Leading prompt tokens found in the prefix cache.
    pub cached_tokens: u32,
}

impl Usage {
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
            prompt_tokens_details: None,
        }
    }

    /// Adds `prompt_tokens_details.cached_tokens`.
    pub fn with_cached(self, cached_tokens: u32) -> Self {
        Self {
            prompt_tokens_details: Some(PromptTokensDetails { cached_tokens }),
            ..self
        }
    }
}

/// What every response of one request shares.
#[derive(Clone, Copy, Debug)]
pub struct Envelope<'a> {
    pub endpoint: Endpoint,
    pub id: &'a str,
    pub created: u64,
    pub model: &'a str,
}

#[derive(Serialize)]
struct Message<'a, C> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: C,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct TextChoice<'a> {
    index: u32,
    text: &'a str,
    logprobs: (),
    finish_reason: Option<&'a str>,
}

#[derive(Serialize)]
struct DeltaChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: (),
    finish_reason: Option<&'a str>,
}

#[derive(Serialize)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    content: &'a str,
}

#[derive(Serialize)]
struct MessageChoice<'a> {
    index: u32,
    message: ChatMessage<'a>,
    logprobs: (),
    finish_reason: &'a str,
}

#[derive(Serialize)]
struct ChatMessage<'a> {
    role: &'static str,
    content: &'a str,
}

/// The closing event of every stream.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

impl Envelope<'_> {
    fn message<C: Serialize>(
        &self,
        object: &'static str,
        choices: C,
        usage: Option<Usage>,
    ) -> Vec<u8> {
        let message = Message {
            id: self.id,
            object,
            created: self.created,
            model: self.model,
            choices,
            usage,
        };
        serde_json::to_vec(&message).unwrap_or_default()
    }

    /// One streamed event with `text`; `finish_reason` on the last one, and `usage` there too
    /// under `--usage-chunk final`.
    pub fn chunk(
        &self,
        text: &str,
        first: bool,
        finish_reason: Option<&str>,
        usage: Option<Usage>,
    ) -> Bytes {
        let json = match self.endpoint {
            Endpoint::Completions => self.message(
                "text_completion",
                [TextChoice {
                    index: 0,
                    text,
                    logprobs: (),
                    finish_reason,
                }],
                usage,
            ),
            Endpoint::ChatCompletions => self.message(
                "chat.completion.chunk",
                [DeltaChoice {
                    index: 0,
                    delta: Delta {
                        role: first.then_some("assistant"),
                        content: text,
                    },
                    logprobs: (),
                    finish_reason,
                }],
                usage,
            ),
        };
        sse(&json, &[])
    }

    /// The events after the last token: `usage` (OpenAI's empty-`choices` event, when asked
    /// for) and `[DONE]`, in one write.
    pub fn closing(&self, usage: Option<Usage>) -> Bytes {
        match usage {
            Some(usage) => {
                let object = match self.endpoint {
                    Endpoint::Completions => "text_completion",
                    Endpoint::ChatCompletions => "chat.completion.chunk",
                };
                let json = self.message(object, [(); 0], Some(usage));
                sse(&json, DONE)
            }
            None => Bytes::from_static(DONE),
        }
    }

    /// A whole (non-streamed) response.
    pub fn full(&self, text: &str, finish_reason: &str, usage: Option<Usage>) -> Vec<u8> {
        match self.endpoint {
            Endpoint::Completions => self.message(
                "text_completion",
                [TextChoice {
                    index: 0,
                    text,
                    logprobs: (),
                    finish_reason: Some(finish_reason),
                }],
                usage,
            ),
            Endpoint::ChatCompletions => self.message(
                "chat.completion",
                [MessageChoice {
                    index: 0,
                    message: ChatMessage {
                        role: "assistant",
                        content: text,
                    },
                    logprobs: (),
                    finish_reason,
                }],
                usage,
            ),
        }
    }
}

fn sse(json: &[u8], after: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 8 + after.len());
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    out.extend_from_slice(after);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn envelope(endpoint: Endpoint) -> Envelope<'static> {
        Envelope {
            endpoint,
            id: "cmpl-1",
            created: 7,
            model: "m",
        }
    }

    fn event(bytes: &[u8]) -> Value {
        let text = std::str::from_utf8(bytes).unwrap();
        let json = text
            .strip_prefix("data: ")
            .unwrap()
            .strip_suffix("\n\n")
            .unwrap();
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn one_word_per_token() {
        assert_eq!(token_text(0, 3), " the quick brown");
        assert_eq!(token_text(15, 2), " on the");
        assert_eq!(token_text(5, 40).split_whitespace().count(), 40);
    }

    #[test]
    fn completion_chunks_carry_text_and_the_last_a_finish_reason() {
        let chunk =
            event(&envelope(Endpoint::Completions).chunk(" a b", true, Some("length"), None));
        assert_eq!(
            chunk,
            json!({"id": "cmpl-1", "object": "text_completion", "created": 7, "model": "m",
                   "choices": [{"index": 0, "text": " a b", "logprobs": null, "finish_reason": "length"}]})
        );
    }

    #[test]
    fn chat_chunks_name_the_role_once() {
        let env = envelope(Endpoint::ChatCompletions);
        let first = event(&env.chunk(" a", true, None, None));
        let later = event(&env.chunk(" b", false, None, None));
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(
            first["choices"][0]["delta"],
            json!({"role": "assistant", "content": " a"})
        );
        assert_eq!(later["choices"][0]["delta"], json!({"content": " b"}));
    }

    #[test]
    fn usage_can_ride_on_the_finish_reason_chunk_with_cached_tokens() {
        let usage = Usage::new(3, 4).with_cached(2);
        let chunk = event(&envelope(Endpoint::ChatCompletions).chunk(
            " a",
            false,
            Some("length"),
            Some(usage),
        ));
        assert_eq!(chunk["choices"][0]["finish_reason"], "length");
        assert_eq!(
            chunk["usage"],
            json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
                   "prompt_tokens_details": {"cached_tokens": 2}})
        );
    }

    #[test]
    fn closing_sends_usage_then_done() {
        let closing = envelope(Endpoint::Completions).closing(Some(Usage::new(3, 4)));
        let text = std::str::from_utf8(&closing).unwrap();
        let (usage, done) = text.split_once("\n\n").unwrap();
        let usage: Value = serde_json::from_str(usage.strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(
            usage["usage"],
            json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
        );
        assert_eq!(done, "data: [DONE]\n\n");
        assert_eq!(&envelope(Endpoint::Completions).closing(None)[..], DONE);
    }

    #[test]
    fn whole_chat_response_has_a_message_and_usage() {
        let body: Value = serde_json::from_slice(&envelope(Endpoint::ChatCompletions).full(
            " x",
            "stop",
            Some(Usage::new(1, 1)),
        ))
        .unwrap();
        assert_eq!(body["object"], "chat.completion");
        assert_eq!(
            body["choices"][0]["message"],
            json!({"role": "assistant", "content": " x"})
        );
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        assert_eq!(body["usage"]["total_tokens"], 2);
    }
}
