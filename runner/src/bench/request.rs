//! One streamed generation request, measured: the OpenAI request body, then the response read
//! frame by frame, each SSE event stamped with the monotonic clock when its bytes arrived.
//!
//! What is kept per request is what the metrics need and nothing more (no generated text):
//! the arrival time of every token-carrying chunk, the server's `usage`, and the error if it
//! failed. Times are offsets from the moment the request was handed to the connection.
//! Knows nothing about schedules, runs or statistics.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Method;
use serde::{Deserialize, Serialize};

use hyper::Response;
use hyper::body::Incoming;

use super::client::{Client, ClientError, Lease};
use super::inputs::Endpoint;
use super::sse::SseParser;

/// What the request asks for.
#[derive(Clone, Debug)]
pub struct RequestSpec<'a> {
    pub endpoint: Endpoint,
    pub model: &'a str,
    pub prompt: &'a str,
    pub max_tokens: u32,
    pub ignore_eos: bool,
}

impl RequestSpec<'_> {
    /// The JSON body, streamed with `stream_options.include_usage` so token counts come from
    /// the server. `ignore_eos` is sent only when true: OpenAI itself rejects unknown fields.
    pub fn body(&self) -> Bytes {
        let mut body = match self.endpoint {
            Endpoint::Completions => serde_json::json!({
                "model": self.model,
                "prompt": self.prompt,
                "max_tokens": self.max_tokens,
            }),
            // vLLM's benchmark sends `max_completion_tokens` to chat; it wins over
            // `max_tokens` in OpenAI's API.
            Endpoint::Chat => serde_json::json!({
                "model": self.model,
                "messages": [{"role": "user", "content": self.prompt}],
                "max_completion_tokens": self.max_tokens,
            }),
        };
        let map = body.as_object_mut().expect("built as an object");
        map.insert("stream".into(), true.into());
        map.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
        map.insert("temperature".into(), 0.into());
        if self.ignore_eos {
            map.insert("ignore_eos".into(), true.into());
        }
        Bytes::from(serde_json::to_vec(&body).expect("JSON values serialise"))
    }
}

/// How a request failed; counted by kind in the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// The connection could not be opened.
    Connect,
    /// A status other than 200.
    Http(u16),
    /// Longer than `request-timeout` in total.
    Timeout,
    /// No bytes for longer than `idle-timeout`.
    IdleTimeout,
    /// The stream ended (or the connection broke) before `data: [DONE]`.
    Truncated,
    /// An event that is not the JSON an OpenAI stream sends, or an `error` event.
    InvalidResponse,
}

impl ErrorKind {
    /// The key it is counted under: `http_404`, `timeout`, `truncated`, ….
    pub fn key(self) -> String {
        match self {
            Self::Connect => "connect".into(),
            Self::Http(status) => format!("http_{status}"),
            Self::Timeout => "timeout".into(),
            Self::IdleTimeout => "idle_timeout".into(),
            Self::Truncated => "truncated".into(),
            Self::InvalidResponse => "invalid_response".into(),
        }
    }
}

/// Written as its counting key (`"http_404"`), so the JSONL and the counts agree.
impl Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.key())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestError {
    pub kind: ErrorKind,
    pub message: String,
}

/// One measured request. Times are milliseconds from the send.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RequestRecord {
    /// The request's number within its run, from 0 (warm-up requests are not recorded).
    pub index: u64,
    /// Sent as `x-request-id`: `gpuflow-<level>-<run>-<index>`; the simulator's record keeps it.
    pub id: String,
    /// When it was sent, seconds from the run's start.
    pub start_s: f64,
    /// When it was sent, on the wall clock (to line up with a server's log or record).
    pub start_unix_ns: u64,
    /// Open loop: how late the send was against the schedule.
    pub dispatch_lag_ms: Option<f64>,
    /// Words in the prompt (what the simulator counts as tokens).
    pub prompt_words: usize,
    pub max_tokens: u32,
    /// From the server's `usage`; `None` when it sent none.
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Arrival of each token-carrying chunk, ms from the send; the first is the TTFT.
    pub chunks_ms: Vec<f64>,
    /// Tokens in each chunk, when the server reported cumulative `usage` on every chunk
    /// (vLLM's `continuous_usage_stats`); `None` otherwise.
    pub chunk_tokens: Option<Vec<u64>>,
    /// When the stream ended (`[DONE]` or the error), ms from the send.
    pub end_ms: f64,
    pub error: Option<RequestError>,
    /// Times the request was resent on a new connection because the reused one closed before
    /// any response (0 or 1).
    #[serde(skip_serializing_if = "is_zero")]
    pub reconnects: u32,
    /// The last `finish_reason` the server gave (`length`, `stop`, …).
    pub finish_reason: Option<String>,
    /// Prompt tokens the server served from its prefix cache, when its `usage` says
    /// (`prompt_tokens_details.cached_tokens`).
    pub cached_prompt_tokens: Option<u64>,
    /// The server's own account of the request, when it gives one (llama.cpp's `timings`):
    /// to set gpuflow's figures beside the server's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
    /// Not written: a response head arrived, or the request waited long enough that the
    /// server may only be busy (a timeout). False: the server could not be reached at all.
    #[serde(skip)]
    pub reached_server: bool,
    /// Not written: the monotonic send time, for the run's own bookkeeping.
    #[serde(skip)]
    pub sent_at: Option<Instant>,
    /// Not written: when the stream ended.
    #[serde(skip)]
    pub ended_at: Option<Instant>,
}

/// llama.cpp's `timings` object: prompt processing and generation as the server timed them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTimings {
    pub prompt_n: Option<u64>,
    pub prompt_ms: Option<f64>,
    pub predicted_n: Option<u64>,
    pub predicted_ms: Option<f64>,
    pub predicted_per_second: Option<f64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RequestRecord {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// Time to first token: the first token-carrying chunk.
    pub fn ttft_ms(&self) -> Option<f64> {
        self.chunks_ms.first().copied()
    }

    /// vLLM's latency: from the send to the last token-carrying chunk.
    pub fn e2el_ms(&self) -> Option<f64> {
        self.chunks_ms.last().copied()
    }

    /// Gaps between consecutive token-carrying chunks.
    pub fn itls_ms(&self) -> impl Iterator<Item = f64> + '_ {
        self.chunks_ms.windows(2).map(|w| w[1] - w[0])
    }

    /// vLLM's TPOT: (latency − TTFT) / (output tokens − 1); needs the server's token count.
    pub fn tpot_ms(&self) -> Option<f64> {
        let tokens = self.completion_tokens?;
        if tokens < 2 {
            return None;
        }
        Some((self.e2el_ms()? - self.ttft_ms()?) / (tokens - 1) as f64)
    }

    /// Tokens in the first chunk: counted when the server reported them per chunk, else the
    /// mean per chunk (an estimate the result labels as such).
    pub fn first_chunk_tokens(&self) -> Option<f64> {
        if let Some(first) = self.chunk_tokens.as_ref().and_then(|c| c.first()) {
            return Some(*first as f64);
        }
        Some(self.completion_tokens? as f64 / self.chunks_ms.len().max(1) as f64)
    }

    /// Single-stream decode speed: tokens after the first chunk over the time from the first
    /// to the last token-carrying chunk.
    pub fn decode_tok_s(&self) -> Option<f64> {
        let span_ms = self.e2el_ms()? - self.ttft_ms()?;
        if span_ms <= 0.0 {
            return None;
        }
        let tokens = self.completion_tokens? as f64 - self.first_chunk_tokens()?;
        Some(tokens / (span_ms / 1000.0))
    }

    /// Tokens over the whole request, TTFT included.
    pub fn e2e_tok_s(&self) -> Option<f64> {
        let e2el = self.e2el_ms()?;
        (e2el > 0.0).then(|| self.completion_tokens.unwrap_or(0) as f64 / (e2el / 1000.0))
    }

    /// Mean tokens per token-carrying chunk: the speculative acceptance the client sees.
    pub fn tokens_per_chunk(&self) -> Option<f64> {
        (!self.chunks_ms.is_empty())
            .then(|| Some(self.completion_tokens? as f64 / self.chunks_ms.len() as f64))
            .flatten()
    }
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(default)]
    timings: Option<ServerTimings>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

/// A chat chunk's delta. Reasoning models stream their thinking before the answer, in a
/// field of its own: SGLang's `reasoning_content` (srt/entrypoints/openai/protocol.py
/// `DeltaMessage`), vLLM's `reasoning`. Those are generated tokens as much as `content` is.
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
}

impl Delta<'_> {
    /// Whether the chunk carries generated text: answer or reasoning.
    fn carries_tokens(&self) -> bool {
        [&self.content, &self.reasoning_content, &self.reasoning]
            .into_iter()
            .any(|t| t.as_deref().is_some_and(|t| !t.is_empty()))
    }
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// Limits on one request.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub total: Duration,
    pub idle: Duration,
}

fn ms_since(start: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(start).as_secs_f64() * 1000.0
}

/// Sends one request and measures it. Never fails: a failure is a record with an error.
pub async fn measure(
    client: &Client,
    path: &str,
    body: Bytes,
    id: String,
    timeouts: Timeouts,
) -> RequestRecord {
    let start = Instant::now();
    let mut record = RequestRecord {
        id,
        sent_at: Some(start),
        ..RequestRecord::default()
    };
    let clock = RequestClock {
        start,
        deadline: tokio::time::Instant::from_std(start + timeouts.total),
        timeouts,
    };
    if let Err((kind, message)) = send_and_read(&mut record, client, path, &body, clock).await {
        let now = Instant::now();
        record.end_ms = ms_since(start, now);
        record.ended_at = Some(now);
        record.error = Some(RequestError { kind, message });
    }
    record
}

/// Why a request failed, as its record says it; the failure's moment is its end.
type Failure = (ErrorKind, String);

/// When a request started and how long it may take.
#[derive(Clone, Copy)]
struct RequestClock {
    start: Instant,
    deadline: tokio::time::Instant,
    timeouts: Timeouts,
}

/// The request from the send to `data: [DONE]`, recorded as it goes; on success the record
/// ends at `[DONE]` and the connection goes back for reuse.
async fn send_and_read(
    record: &mut RequestRecord,
    client: &Client,
    path: &str,
    body: &Bytes,
    clock: RequestClock,
) -> Result<(), Failure> {
    let (lease, response) = send(record, client, path, body, clock).await?;
    record.reached_server = true;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    if status != 200 {
        // The server's own words, briefly: OpenAI-style errors say what was wrong.
        let text = tokio::time::timeout_at(clock.deadline, body.collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Err((ErrorKind::Http(status), error_message(status, &text)));
    }
    let stream = read_events(record, &mut body, clock).await?;
    if !stream.done {
        let message = if stream.cut_mid_event {
            "the stream ended in the middle of an event"
        } else {
            "the stream ended without `data: [DONE]`"
        };
        return Err((ErrorKind::Truncated, message.into()));
    }
    let end = Instant::now();
    record.end_ms = ms_since(clock.start, end);
    record.ended_at = Some(end);
    // Drain what follows `[DONE]` (normally nothing) so the connection can be reused.
    if tokio::time::timeout_at(clock.deadline, body.collect())
        .await
        .is_ok_and(|r| r.is_ok())
    {
        lease.release();
    }
    record.chunk_tokens = stream
        .cumulative_tokens
        .filter(|c| !c.is_empty() && c.len() == record.chunks_ms.len())
        .map(per_chunk);
    Ok(())
}

/// The response head, with the connection it came on; how often the request was resent goes
/// into the record either way.
async fn send<'c>(
    record: &mut RequestRecord,
    client: &'c Client,
    path: &str,
    body: &Bytes,
    clock: RequestClock,
) -> Result<(Lease<'c>, Response<Incoming>), Failure> {
    match connect_and_send(client, path, body, &record.id, clock.deadline).await {
        Ok((lease, response, reconnects)) => {
            record.reconnects = reconnects;
            Ok((lease, response))
        }
        Err((kind, message, reconnects)) => {
            record.reconnects = reconnects;
            if kind == ErrorKind::Timeout {
                record.reached_server = true; // it may be busy, not gone
            }
            let message = match kind {
                ErrorKind::Timeout => message.unwrap_or_else(|| {
                    format!(
                        "no response within {}",
                        humantime::format_duration(clock.timeouts.total)
                    )
                }),
                _ => message.unwrap_or_default(),
            };
            Err((kind, message))
        }
    }
}

/// How an event stream that did not break ended.
struct StreamEnd {
    /// `data: [DONE]` came.
    done: bool,
    /// The body ended with part of an event unread.
    cut_mid_event: bool,
    /// The server's running completion-token count at each token-carrying chunk, when every
    /// such chunk carried one.
    cumulative_tokens: Option<Vec<u64>>,
}

/// Reads the SSE events of a 200 response into `record`, each token-carrying chunk stamped
/// with the moment its bytes arrived, until `data: [DONE]` or the end of the body.
async fn read_events(
    record: &mut RequestRecord,
    body: &mut Incoming,
    clock: RequestClock,
) -> Result<StreamEnd, Failure> {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    let mut cumulative_tokens = Some(Vec::new());
    loop {
        let Some(frame) = next_frame(body, clock).await? else {
            return Ok(StreamEnd {
                done: false,
                cut_mid_event: parser.pending(),
                cumulative_tokens,
            });
        };
        // Stamped before parsing: the moment the bytes arrived.
        let at_ms = ms_since(clock.start, Instant::now());
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        parser
            .push(&data, &mut events)
            .map_err(|too_large| (ErrorKind::InvalidResponse, too_large.to_string()))?;
        let mut done = false;
        for event in events.drain(..) {
            if done {
                continue;
            }
            if event.as_slice() == b"[DONE]" {
                done = true;
                continue;
            }
            record_event(record, &event, at_ms, &mut cumulative_tokens)?;
        }
        if done {
            return Ok(StreamEnd {
                done,
                cut_mid_event: false,
                cumulative_tokens,
            });
        }
    }
}

/// The body's next frame, `None` at its end; the whole request's deadline or the idle limit,
/// whichever comes first, bounds the wait.
async fn next_frame(
    body: &mut Incoming,
    clock: RequestClock,
) -> Result<Option<hyper::body::Frame<Bytes>>, Failure> {
    let idle_deadline = tokio::time::Instant::now() + clock.timeouts.idle;
    let (limit, kind) = if idle_deadline < clock.deadline {
        (idle_deadline, ErrorKind::IdleTimeout)
    } else {
        (clock.deadline, ErrorKind::Timeout)
    };
    match tokio::time::timeout_at(limit, body.frame()).await {
        Ok(Some(Ok(frame))) => Ok(Some(frame)),
        Ok(None) => Ok(None),
        Ok(Some(Err(err))) => Err((ErrorKind::Truncated, format!("the stream broke: {err}"))),
        Err(_) => {
            let message = if kind == ErrorKind::Timeout {
                format!(
                    "not finished within {}",
                    humantime::format_duration(clock.timeouts.total)
                )
            } else {
                format!(
                    "no data for {}",
                    humantime::format_duration(clock.timeouts.idle)
                )
            };
            Err((kind, message))
        }
    }
}

/// One SSE event of the stream (not `[DONE]`) into the record: a token-carrying chunk's
/// arrival, the finish reason, the server's timings and usage; an error event fails the
/// request.
fn record_event(
    record: &mut RequestRecord,
    event: &[u8],
    at_ms: f64,
    cumulative_tokens: &mut Option<Vec<u64>>,
) -> Result<(), Failure> {
    let parsed: Event<'_> = serde_json::from_slice(event).map_err(|err| {
        (
            ErrorKind::InvalidResponse,
            format!("an event is not OpenAI stream JSON: {err}"),
        )
    })?;
    if let Some(error) = parsed.error {
        let message = error
            .get("message")
            .and_then(serde_json::Value::as_str)
            .map_or_else(|| error.to_string(), str::to_owned);
        return Err((
            ErrorKind::InvalidResponse,
            format!("the server sent an error event: {message}"),
        ));
    }
    // The time to the first token is to the first thinking token of a reasoning model, and
    // its thinking chunks are inter-token gaps like the answer's.
    let carries_tokens = parsed.choices.first().is_some_and(|c| {
        c.text.as_deref().is_some_and(|t| !t.is_empty())
            || c.delta.as_ref().is_some_and(Delta::carries_tokens)
    });
    if carries_tokens {
        record.chunks_ms.push(at_ms);
        // Per-chunk usage only counts when every token chunk carries it.
        match (
            &mut *cumulative_tokens,
            parsed.usage.as_ref().and_then(|u| u.completion_tokens),
        ) {
            (Some(list), Some(n)) => list.push(n),
            (c, _) => *c = None,
        }
    }
    if let Some(reason) = parsed
        .choices
        .first()
        .and_then(|c| c.finish_reason.as_deref())
    {
        record.finish_reason = Some(reason.to_owned());
    }
    if parsed.timings.is_some() {
        record.server_timings = parsed.timings;
    }
    if let Some(usage) = parsed.usage {
        if let Some(cached) = usage.prompt_tokens_details.and_then(|d| d.cached_tokens) {
            record.cached_prompt_tokens = Some(cached);
        }
        record.prompt_tokens = usage.prompt_tokens.or(record.prompt_tokens);
        record.completion_tokens = usage.completion_tokens.or(record.completion_tokens);
    }
    Ok(())
}

/// Running token counts → tokens per chunk.
fn per_chunk(cumulative: Vec<u64>) -> Vec<u64> {
    let mut previous = 0;
    cumulative
        .into_iter()
        .map(|n| {
            let d = n.saturating_sub(previous);
            previous = n;
            d
        })
        .collect()
}

/// Why no response head came: the kind, the message (`None` for a timeout, worded by the
/// caller) and how many times the request was resent.
type SendFailure = (ErrorKind, Option<String>, u32);

/// Takes a connection and sends the request; the response head is returned with the lease.
///
/// A request that fails on a reused connection before any byte of a response arrived is
/// resent once on a new connection: the server closed that kept-alive connection as the
/// request went out (llama-server closes ~0.6 ms after a stream ends, still saying
/// `Keep-Alive`), so it never saw the request. The resend is counted, never hidden; a failure
/// on a new connection is the server's answer and is not retried.
async fn connect_and_send<'c>(
    client: &'c Client,
    path: &str,
    body: &Bytes,
    id: &str,
    deadline: tokio::time::Instant,
) -> Result<(Lease<'c>, Response<Incoming>, u32), SendFailure> {
    let mut reconnects = 0;
    let mut leased = tokio::time::timeout_at(deadline, client.lease()).await;
    loop {
        let mut lease = match leased {
            Ok(Ok(lease)) => lease,
            Ok(Err(err)) => {
                let kind = match err {
                    ClientError::Connect { .. } | ClientError::Request { .. } => ErrorKind::Connect,
                    ClientError::Http(_) | ClientError::Closed => ErrorKind::Truncated,
                };
                return Err((kind, Some(err.to_string()), reconnects));
            }
            Err(_) => {
                return Err((
                    ErrorKind::Timeout,
                    Some("timed out connecting".into()),
                    reconnects,
                ));
            }
        };
        let sent = tokio::time::timeout_at(
            deadline,
            lease.send(Method::POST, path, body.clone(), Some(id)),
        )
        .await;
        match sent {
            Ok(Ok(response)) => return Ok((lease, response, reconnects)),
            Ok(Err(_)) if lease.reused() && reconnects == 0 => {
                tracing::debug!(
                    "benchmark: a kept-alive connection closed; resending on a new one"
                );
                reconnects += 1;
                drop(lease);
                leased = tokio::time::timeout_at(deadline, client.open()).await;
            }
            Ok(Err(err)) => {
                let message = if reconnects > 0 {
                    format!("{err} (also on a new connection)")
                } else {
                    err.to_string()
                };
                return Err((ErrorKind::Truncated, Some(message), reconnects));
            }
            Err(_) => return Err((ErrorKind::Timeout, None, reconnects)),
        }
    }
}

/// `HTTP 404: unknown path …` from an OpenAI-style error body, or the body's start.
fn error_message(status: u16, body: &[u8]) -> String {
    let from_json = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("detail"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        });
    let text = from_json.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body);
        text.chars().take(200).collect()
    });
    if text.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(chunks: &[f64], tokens: Option<u64>) -> RequestRecord {
        RequestRecord {
            chunks_ms: chunks.to_vec(),
            completion_tokens: tokens,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn per_request_metrics_follow_vllm() {
        // 12 tokens in 3 chunks of 4: first at 50 ms, then every 40 ms.
        let r = record(&[50.0, 90.0, 130.0], Some(12));
        assert_eq!(r.ttft_ms(), Some(50.0));
        assert_eq!(r.e2el_ms(), Some(130.0));
        assert_eq!(r.itls_ms().collect::<Vec<_>>(), [40.0, 40.0]);
        assert!((r.tpot_ms().unwrap() - 80.0 / 11.0).abs() < 1e-12);
        assert_eq!(r.tokens_per_chunk(), Some(4.0));
        // (12 − 4) tokens over 80 ms.
        assert!((r.decode_tok_s().unwrap() - 100.0).abs() < 1e-9);
        assert!((r.e2e_tok_s().unwrap() - 12.0 / 0.13).abs() < 1e-9);
    }

    #[test]
    fn per_chunk_usage_gives_the_first_chunks_own_count() {
        let mut r = record(&[50.0, 90.0, 130.0], Some(10));
        r.chunk_tokens = Some(vec![2, 4, 4]);
        assert_eq!(r.first_chunk_tokens(), Some(2.0));
        assert!((r.decode_tok_s().unwrap() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn without_usage_token_metrics_are_unknown() {
        let r = record(&[50.0, 90.0], None);
        assert_eq!(r.tpot_ms(), None);
        assert_eq!(r.decode_tok_s(), None);
        assert_eq!(r.tokens_per_chunk(), None);
        assert_eq!(r.ttft_ms(), Some(50.0));
    }

    #[test]
    fn bodies_ask_for_usage_and_stream() {
        let spec = RequestSpec {
            endpoint: Endpoint::Chat,
            model: "m",
            prompt: "a b",
            max_tokens: 7,
            ignore_eos: true,
        };
        let v: serde_json::Value = serde_json::from_slice(&spec.body()).unwrap();
        assert_eq!(v["messages"][0]["content"], "a b");
        assert_eq!(v["max_completion_tokens"], 7);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["ignore_eos"], true);
        let spec = RequestSpec {
            endpoint: Endpoint::Completions,
            ignore_eos: false,
            ..spec
        };
        let v: serde_json::Value = serde_json::from_slice(&spec.body()).unwrap();
        assert_eq!(v["prompt"], "a b");
        assert_eq!(v["max_tokens"], 7);
        assert!(v.get("ignore_eos").is_none());
    }

    /// Chat streams of reasoning models, shaped as SGLang 0.5.23 and vLLM 0.34.0 send them:
    /// the role chunk, thinking chunks (`reasoning_content` / `reasoning`, `content` null or
    /// absent), answer chunks, the finish chunk, the usage chunk. Every thinking and answer
    /// chunk is a token chunk; the role, finish and usage chunks are not.
    #[test]
    fn reasoning_deltas_carry_tokens_like_content() {
        let sglang = [
            r#"{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#,
            r#"{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":"Let me","tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#,
            r#"{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":" think","tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#,
            r#"{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":"4","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#,
            r#"{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}"#,
            r#"{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}}"#,
        ];
        let vllm = [
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning":"Let me"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning":" think"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"4"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}}"#,
        ];
        for (server, events) in [("sglang", &sglang[..]), ("vllm", &vllm[..])] {
            let mut r = RequestRecord::default();
            let mut cumulative = Some(Vec::new());
            for (i, event) in events.iter().enumerate() {
                record_event(&mut r, event.as_bytes(), 10.0 * i as f64, &mut cumulative).unwrap();
            }
            // Chunks 1 and 2 think, chunk 3 answers: the first token came at 10 ms, not 30.
            assert_eq!(r.chunks_ms, [10.0, 20.0, 30.0], "{server}");
            assert_eq!(r.ttft_ms(), Some(10.0), "{server}");
            assert_eq!(r.itls_ms().collect::<Vec<_>>(), [10.0, 10.0], "{server}");
            assert_eq!(r.completion_tokens, Some(3), "{server}");
            assert_eq!(r.finish_reason.as_deref(), Some("length"), "{server}");
        }
    }

    #[test]
    fn error_messages_prefer_the_servers_words() {
        let m = error_message(404, br#"{"error": {"message": "unknown path `/v1/x`"}}"#);
        assert_eq!(m, "HTTP 404: unknown path `/v1/x`");
        assert_eq!(error_message(502, b""), "HTTP 502");
    }
}
