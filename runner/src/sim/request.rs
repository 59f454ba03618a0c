//! OpenAI request bodies in, one [`GenerationRequest`] out, or an [`ApiError`] shaped like
//! OpenAI's (`{"error": {"message", "type", "param", "code"}}`) naming the field at fault.
//!
//! Prompt tokens are counted as whitespace-separated words (a list of token ids counts its
//! length), so the same prompt always costs the same and a test can predict `usage`. Fields a
//! simulator has no use for (temperature, top_p, stop, …) are accepted and ignored. This file
//! knows nothing of timing or connections.

use std::hash::Hasher;

use serde_json::{Map, Value};

/// Which OpenAI endpoint a request came to; it decides the response shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    ChatCompletions,
}

impl Endpoint {
    pub fn path(self) -> &'static str {
        match self {
            Self::Completions => "/v1/completions",
            Self::ChatCompletions => "/v1/chat/completions",
        }
    }
}

/// What the simulator needs to know about one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerationRequest {
    pub endpoint: Endpoint,
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    pub stream: bool,
    pub include_usage: bool,
    pub ignore_eos: bool,
    /// With [`Limits::prefix_hashes`]: entry k identifies the prompt's first k + 1 tokens, so
    /// two prompts share their first k + 1 tokens exactly when their entries k are equal (up to
    /// 64-bit hash collisions). Empty otherwise.
    pub prefix_hashes: Vec<u64>,
}

/// Limits a request is checked against, and what to read from it.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub default_max_tokens: u32,
    pub max_model_len: u32,
    pub context: ContextPolicy,
    /// Compute [`GenerationRequest::prefix_hashes`] (for --prefix-cache).
    pub prefix_hashes: bool,
}

/// What a request beyond --max-model-len gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextPolicy {
    /// vLLM: prompt plus max_tokens beyond the context length is a 400.
    Refuse,
    /// llama-server (--stop-at-context-limit): only a prompt that leaves no room for one token
    /// is a 400 (`exceed_context_size_error`); otherwise generation stops when the context is
    /// full.
    StopAtLimit,
}

/// An error answered to the client, as OpenAI-compatible servers shape it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
    pub param: Option<&'static str>,
    /// llama-server's `exceed_context_size_error` carries the two counts instead of `param`.
    pub context: Option<ContextExceeded>,
}

/// The counts of llama-server's `exceed_context_size_error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextExceeded {
    pub n_prompt_tokens: u32,
    pub n_ctx: u32,
}

impl ApiError {
    pub fn invalid(param: Option<&'static str>, message: impl Into<String>) -> Self {
        Self {
            status: 400,
            kind: "invalid_request_error",
            message: message.into(),
            param,
            context: None,
        }
    }

    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
            param: None,
            context: None,
        }
    }

    /// llama-server's refusal of a prompt that leaves no room in the context, word for word.
    pub fn exceed_context(n_prompt_tokens: u32, n_ctx: u32) -> Self {
        Self {
            status: 400,
            kind: "exceed_context_size_error",
            message: format!(
                "request ({n_prompt_tokens} tokens) exceeds the available context size ({n_ctx} \
                 tokens), try increasing it"
            ),
            param: None,
            context: Some(ContextExceeded {
                n_prompt_tokens,
                n_ctx,
            }),
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Vec<u8> {
        if let Some(ContextExceeded {
            n_prompt_tokens,
            n_ctx,
        }) = self.context
        {
            // llama-server's shape and key order: no `param`, the counts instead.
            let body = serde_json::json!({
                "error": {
                    "code": self.status,
                    "message": self.message,
                    "type": self.kind,
                    "n_prompt_tokens": n_prompt_tokens,
                    "n_ctx": n_ctx,
                }
            });
            return serde_json::to_vec(&body).unwrap_or_default();
        }
        let body = serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.status,
            }
        });
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

/// Counts prompt tokens the documented way: whitespace-separated words.
pub fn count_words(text: &str) -> u32 {
    u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX)
}

/// Reads a request body sent to `endpoint`.
pub fn parse(
    endpoint: Endpoint,
    body: &[u8],
    limits: Limits,
) -> Result<GenerationRequest, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|err| {
        ApiError::invalid(None, format!("the request body is not valid JSON: {err}"))
    })?;
    let Value::Object(fields) = value else {
        return Err(ApiError::invalid(
            None,
            format!(
                "the request body must be a JSON object, found {}",
                kind_of(&value)
            ),
        ));
    };

    if let Some(model) = fields.get("model")
        && !model.is_string()
    {
        return Err(wrong_type("model", "a string", model));
    }
    let mut tokens = PromptTokens::new(limits);
    match endpoint {
        Endpoint::Completions => prompt_tokens(&fields, &mut tokens)?,
        Endpoint::ChatCompletions => message_tokens(&fields, &mut tokens)?,
    }
    let PromptTokens {
        count: prompt_tokens,
        hashes: prefix_hashes,
        ..
    } = tokens;
    match fields.get("n") {
        None | Some(Value::Null) => {}
        Some(n) if n.as_u64() == Some(1) => {}
        Some(n) => {
            return Err(ApiError::invalid(
                Some("n"),
                format!("`n` must be 1 here (the simulator generates one choice), found `{n}`"),
            ));
        }
    }

    // Chat's newer name wins over the old one, as in OpenAI's API.
    let max_tokens = match (
        optional_count(&fields, "max_completion_tokens")?,
        optional_count(&fields, "max_tokens")?,
    ) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => limits.default_max_tokens,
    };
    let stream = optional_bool(&fields, "stream")?.unwrap_or(false);
    let include_usage = match fields.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(options)) => optional_bool(options, "include_usage")?.unwrap_or(false),
        Some(other) => return Err(wrong_type("stream_options", "an object", other)),
    };
    let ignore_eos = optional_bool(&fields, "ignore_eos")?.unwrap_or(false);

    let total = u64::from(prompt_tokens) + u64::from(max_tokens);
    if limits.context == ContextPolicy::StopAtLimit {
        // llama-server refuses a prompt that fills the context: it needs room for one token.
        if prompt_tokens >= limits.max_model_len {
            return Err(ApiError::exceed_context(
                prompt_tokens,
                limits.max_model_len,
            ));
        }
    } else if total > u64::from(limits.max_model_len) {
        return Err(ApiError::invalid(
            Some("max_tokens"),
            format!(
                "this model's maximum context length is {} tokens, but {total} were requested \
                 ({prompt_tokens} in the prompt, {max_tokens} in the completion); lower \
                 `max_tokens` or shorten the prompt",
                limits.max_model_len
            ),
        ));
    }

    Ok(GenerationRequest {
        endpoint,
        prompt_tokens,
        max_tokens,
        stream,
        include_usage,
        ignore_eos,
        prefix_hashes,
    })
}

/// Counts a prompt's tokens and, when asked, hashes each of its prefixes as it goes.
struct PromptTokens {
    count: u32,
    hashes: Vec<u64>,
    /// How many prefix hashes to keep: none without --prefix-cache, and never more than the
    /// context holds (a longer prompt is refused or cannot be cached past it anyway), so a
    /// 16 MiB prompt cannot make the cache grow by millions of entries.
    hash_limit: usize,
    state: u64,
}

impl PromptTokens {
    fn new(limits: Limits) -> Self {
        let hash_limit = if limits.prefix_hashes {
            limits.max_model_len as usize
        } else {
            0
        };
        Self {
            count: 0,
            hashes: Vec::new(),
            hash_limit,
            state: 0,
        }
    }

    fn words(&mut self, text: &str) {
        if self.hash_limit == 0 {
            self.count = self.count.saturating_add(count_words(text));
            return;
        }
        for word in text.split_whitespace() {
            self.push(b'w', word.as_bytes());
        }
    }

    /// A list of token ids, already checked to hold only whole numbers.
    fn ids(&mut self, ids: &[Value]) {
        for id in ids {
            self.push(b'i', &id.as_u64().unwrap_or_default().to_le_bytes());
        }
    }

    fn push(&mut self, kind: u8, token: &[u8]) {
        self.count = self.count.saturating_add(1);
        if self.hashes.len() >= self.hash_limit {
            return;
        }
        // Chained: each prefix's hash covers the previous one, so equal hashes mean equal
        // prefixes. `DefaultHasher::new` uses fixed keys, so hashes agree across requests.
        let mut hasher = std::hash::DefaultHasher::new();
        hasher.write_u64(self.state);
        hasher.write_u8(kind);
        hasher.write(token);
        self.state = hasher.finish();
        self.hashes.push(self.state);
    }
}

fn prompt_tokens(fields: &Map<String, Value>, tokens: &mut PromptTokens) -> Result<(), ApiError> {
    let prompt = fields
        .get("prompt")
        .ok_or_else(|| ApiError::invalid(Some("prompt"), "`prompt` is required"))?;
    match prompt {
        Value::String(text) => {
            tokens.words(text);
            Ok(())
        }
        Value::Array(items) => match items.as_slice() {
            [Value::String(text)] => {
                tokens.words(text);
                Ok(())
            }
            [Value::Array(ids)] if ids.iter().all(Value::is_u64) => {
                tokens.ids(ids);
                Ok(())
            }
            ids if !ids.is_empty() && ids.iter().all(Value::is_u64) => {
                tokens.ids(ids);
                Ok(())
            }
            _ => Err(ApiError::invalid(
                Some("prompt"),
                "`prompt` must be a string, a list of token ids, or a list holding one of those \
                 (the simulator answers one prompt per request)",
            )),
        },
        other => Err(wrong_type(
            "prompt",
            "a string or a list of token ids",
            other,
        )),
    }
}

fn message_tokens(fields: &Map<String, Value>, tokens: &mut PromptTokens) -> Result<(), ApiError> {
    let messages = match fields.get("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                Some("messages"),
                "`messages` must not be empty",
            ));
        }
        Some(other) => return Err(wrong_type("messages", "a list of messages", other)),
        None => {
            return Err(ApiError::invalid(
                Some("messages"),
                "`messages` is required",
            ));
        }
    };
    for (i, message) in messages.iter().enumerate() {
        let Value::Object(message) = message else {
            return Err(ApiError::invalid(
                Some("messages"),
                format!(
                    "`messages[{i}]` must be an object with `role` and `content`, found {}",
                    kind_of(message)
                ),
            ));
        };
        if !message.get("role").is_some_and(Value::is_string) {
            return Err(ApiError::invalid(
                Some("messages"),
                format!("`messages[{i}].role` must be a string such as `user`"),
            ));
        }
        match message.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => tokens.words(text),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .for_each(|text| tokens.words(text)),
            Some(other) => {
                return Err(ApiError::invalid(
                    Some("messages"),
                    format!(
                        "`messages[{i}].content` must be a string or a list of parts, found {}",
                        kind_of(other)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn optional_count(
    fields: &Map<String, Value>,
    name: &'static str,
) -> Result<Option<u32>, ApiError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64() {
            Some(n) if n >= 1 => Ok(Some(u32::try_from(n).unwrap_or(u32::MAX))),
            _ => Err(ApiError::invalid(
                Some(name),
                format!("`{name}` must be a whole number of at least 1, found `{value}`"),
            )),
        },
    }
}

fn optional_bool(
    fields: &Map<String, Value>,
    name: &'static str,
) -> Result<Option<bool>, ApiError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong_type(name, "`true` or `false`", other)),
    }
}

fn wrong_type(name: &'static str, expected: &str, found: &Value) -> ApiError {
    ApiError::invalid(
        Some(name),
        format!("`{name}` must be {expected}, found {}", kind_of(found)),
    )
}

fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "`null`".to_owned(),
        Value::Bool(b) => format!("`{b}`"),
        Value::Number(n) => format!("the number `{n}`"),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use test_case::test_case;

    const LIMITS: Limits = Limits {
        default_max_tokens: 16,
        max_model_len: 1000,
        context: ContextPolicy::Refuse,
        prefix_hashes: false,
    };

    fn completions(body: &str) -> Result<GenerationRequest, ApiError> {
        parse(Endpoint::Completions, body.as_bytes(), LIMITS)
    }

    fn chat(body: &str) -> Result<GenerationRequest, ApiError> {
        parse(Endpoint::ChatCompletions, body.as_bytes(), LIMITS)
    }

    #[test_case(r#"{"prompt": "a b  c\nd"}"#, 4 ; "words split on any whitespace")]
    #[test_case(r#"{"prompt": ""}"#, 0 ; "empty prompt")]
    #[test_case(r#"{"prompt": ["one two"]}"#, 2 ; "a list with one string")]
    #[test_case(r#"{"prompt": [1, 2, 3]}"#, 3 ; "token ids")]
    #[test_case(r#"{"prompt": [[1, 2]]}"#, 2 ; "a list with one list of token ids")]
    fn prompt_tokens_are_counted(body: &str, expected: u32) {
        assert_eq!(completions(body).unwrap().prompt_tokens, expected);
    }

    #[test]
    fn chat_counts_the_words_of_every_message() {
        let request = chat(
            r#"{"model": "m", "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hello there you"}]},
                {"role": "assistant", "content": null}
            ], "max_completion_tokens": 7, "max_tokens": 99, "stream": true,
            "stream_options": {"include_usage": true}, "ignore_eos": true, "temperature": 0.7}"#,
        )
        .unwrap();
        assert_eq!(
            request,
            GenerationRequest {
                endpoint: Endpoint::ChatCompletions,
                prompt_tokens: 5,
                max_tokens: 7,
                stream: true,
                include_usage: true,
                ignore_eos: true,
                prefix_hashes: Vec::new(),
            }
        );
    }

    fn hashes(body: &str) -> Vec<u64> {
        let limits = Limits {
            prefix_hashes: true,
            ..LIMITS
        };
        let request = parse(Endpoint::Completions, body.as_bytes(), limits).unwrap();
        assert_eq!(request.prefix_hashes.len() as u32, request.prompt_tokens);
        request.prefix_hashes
    }

    #[test]
    fn prefix_hashes_agree_exactly_as_far_as_the_prompts_do() {
        let a = hashes(r#"{"prompt": "one two  three four", "max_tokens": 1}"#);
        let b = hashes(r#"{"prompt": ["one two\nthree five"], "max_tokens": 1}"#);
        assert_eq!(a[..3], b[..3], "whitespace does not matter, words do");
        assert_ne!(a[3], b[3]);
        let shifted = hashes(r#"{"prompt": "two three four", "max_tokens": 1}"#);
        assert!(
            shifted.iter().all(|h| !a.contains(h)),
            "a prefix starts at the start"
        );
        let ids = hashes(r#"{"prompt": [1, 2, 3], "max_tokens": 1}"#);
        assert_ne!(ids, hashes(r#"{"prompt": "1 2 3", "max_tokens": 1}"#));
        // Kept only up to the context length (such a prompt is refused anyway); the count is
        // still the whole prompt's.
        let mut long = PromptTokens::new(Limits {
            prefix_hashes: true,
            max_model_len: 5,
            ..LIMITS
        });
        long.words("a b c d e f g");
        assert_eq!((long.count, long.hashes.len()), (7, 5));
    }

    #[test]
    fn stop_at_context_limit_refuses_only_a_prompt_that_fills_the_context() {
        let limits = Limits {
            context: ContextPolicy::StopAtLimit,
            max_model_len: 4,
            ..LIMITS
        };
        let parse = |body: &str| parse(Endpoint::Completions, body.as_bytes(), limits);
        let fits = parse(r#"{"prompt": "a b c", "max_tokens": 100}"#).unwrap();
        assert_eq!((fits.prompt_tokens, fits.max_tokens), (3, 100));
        let err = parse(r#"{"prompt": "a b c d", "max_tokens": 1}"#).unwrap_err();
        let body: Value = serde_json::from_slice(&err.body()).unwrap();
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"error":{"code":400,"message":"request (4 tokens) exceeds the available context size (4 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4,"n_ctx":4}}"#
        );
    }

    #[test]
    fn max_tokens_defaults_and_streaming_is_off_by_default() {
        let request = completions(r#"{"prompt": "x"}"#).unwrap();
        assert_eq!(request.max_tokens, 16);
        assert!(!request.stream && !request.include_usage && !request.ignore_eos);
    }

    #[test_case(r#"{"prompt": "x""#, None, "not valid JSON" ; "malformed JSON")]
    #[test_case(r#"[1]"#, None, "must be a JSON object, found a list" ; "not an object")]
    #[test_case(r#"{}"#, Some("prompt"), "`prompt` is required" ; "missing prompt")]
    #[test_case(r#"{"prompt": 3}"#, Some("prompt"), "found the number `3`" ; "prompt number")]
    #[test_case(r#"{"prompt": ["a", "b"]}"#, Some("prompt"), "one prompt per request" ; "batch")]
    #[test_case(r#"{"prompt": "x", "max_tokens": 0}"#, Some("max_tokens"), "at least 1, found `0`" ; "zero max tokens")]
    #[test_case(r#"{"prompt": "x", "max_tokens": "9"}"#, Some("max_tokens"), r#"found `"9"`"# ; "max tokens string")]
    #[test_case(r#"{"prompt": "x", "stream": "yes"}"#, Some("stream"), "`true` or `false`" ; "stream string")]
    #[test_case(r#"{"prompt": "x", "n": 2}"#, Some("n"), "must be 1" ; "several choices")]
    #[test_case(r#"{"prompt": "x", "model": 1}"#, Some("model"), "must be a string" ; "model number")]
    #[test_case(r#"{"prompt": "x", "max_tokens": 1000}"#, Some("max_tokens"), "maximum context length is 1000 tokens, but 1001" ; "too long")]
    fn completions_errors_name_the_field(body: &str, param: Option<&str>, message: &str) {
        let err = completions(body).unwrap_err();
        assert_eq!(err.status, 400);
        assert_eq!(err.param, param);
        assert!(err.message.contains(message), "{}", err.message);
    }

    #[test_case(r#"{}"#, "`messages` is required" ; "missing")]
    #[test_case(r#"{"messages": []}"#, "must not be empty" ; "empty")]
    #[test_case(r#"{"messages": ["hi"]}"#, "`messages[0]` must be an object" ; "a string message")]
    #[test_case(r#"{"messages": [{"content": "hi"}]}"#, "`messages[0].role`" ; "no role")]
    #[test_case(r#"{"messages": [{"role": "user", "content": 1}]}"#, "`messages[0].content`" ; "number content")]
    fn chat_errors_name_the_message(body: &str, message: &str) {
        let err = chat(body).unwrap_err();
        assert_eq!(err.param, Some("messages"));
        assert!(err.message.contains(message), "{}", err.message);
    }

    #[test]
    fn error_bodies_are_shaped_like_openai() {
        let body: Value = serde_json::from_slice(&completions("{").unwrap_err().body()).unwrap();
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["code"], 400);
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("the request body")
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn any_body_is_answered_without_panicking(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(Endpoint::Completions, &body, LIMITS);
            let _ = parse(Endpoint::ChatCompletions, &body, LIMITS);
        }

        #[test]
        fn any_json_object_is_answered_without_panicking(
            prompt in proptest::option::of(".{0,20}"),
            max_tokens in proptest::option::of(any::<i64>()),
            stream in proptest::option::of(any::<bool>()),
        ) {
            let mut body = serde_json::Map::new();
            if let Some(p) = prompt { body.insert("prompt".into(), p.into()); }
            if let Some(m) = max_tokens { body.insert("max_tokens".into(), m.into()); }
            if let Some(s) = stream { body.insert("stream".into(), s.into()); }
            let text = serde_json::to_vec(&body).unwrap();
            let _ = parse(Endpoint::Completions, &text, LIMITS);
        }
    }
}
