//! Which answer each request gets: the OpenAI endpoints, health, model list and the record.
//!
//! Errors are answered in OpenAI's shape with the status real servers use (400 for a bad body,
//! 404 for an unknown path, 405 for a wrong method, 503 while loading or when busy). This file
//! turns requests into responses; the timing of a generation lives in [`super::stream`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONNECTION, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::connection::StreamEnd;
use super::record::{ChunkStamp, Outcome, RequestRecord, Stamp};
use super::request::{self, ApiError, ContextPolicy, Endpoint, GenerationRequest, Limits};
use super::response::{Envelope, Usage, token_text};
use super::schedule::TokenSchedule;
use super::state::State;
use super::stream::{RequestGuard, SseStream, StreamPlan};
use super::timer;

/// The body of every response.
pub type SimBody = Either<Full<Bytes>, SseStream>;

/// Request bodies beyond this are refused: a prompt of 16 MiB is not a realistic request.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// Answers one request.
pub async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let response = match (method, path.as_str()) {
        (Method::GET, "/health") => health(&state),
        (Method::GET, "/health_generate") => health_generate(&state).await,
        (Method::GET, "/v1/models") => models(&state),
        (Method::GET, "/get_model_info") => json(
            StatusCode::OK,
            serde_json::to_vec(&serde_json::json!({
                "model_path": state.config.model_name,
                "is_generation": true,
            }))
            .unwrap_or_default(),
        ),
        (Method::GET, "/metrics") => respond(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            Bytes::from(state.metrics.exposition(&state.config)),
        ),
        (Method::GET, "/sim/record") => json(StatusCode::OK, state.recorder.snapshot_json()),
        (Method::POST, "/v1/completions") => generate(state, Endpoint::Completions, req).await,
        (Method::POST, "/v1/chat/completions") => {
            generate(state, Endpoint::ChatCompletions, req).await
        }
        (method, path) => not_routed(&method, path),
    };
    Ok(response)
}

const ROUTES: [(&str, &str); 8] = [
    ("GET", "/health"),
    ("GET", "/health_generate"),
    ("GET", "/v1/models"),
    ("GET", "/get_model_info"),
    ("GET", "/metrics"),
    ("GET", "/sim/record"),
    ("POST", "/v1/completions"),
    ("POST", "/v1/chat/completions"),
];

fn not_routed(method: &Method, path: &str) -> Response<SimBody> {
    if let Some((allowed, _)) = ROUTES.iter().find(|(_, p)| *p == path) {
        return error(&ApiError::new(
            405,
            "invalid_request_error",
            format!("`{path}` takes {allowed}, not {method}"),
        ));
    }
    let hint = crate::diag::did_you_mean(path, ROUTES.iter().map(|(_, p)| p))
        .map(|hint| format!("; {hint}"))
        .unwrap_or_default();
    error(&ApiError::new(
        404,
        "not_found_error",
        format!("no route `{method} {path}`{hint}"),
    ))
}

fn health(state: &State) -> Response<SimBody> {
    if state.is_ready() {
        respond(StatusCode::OK, "text/plain", Bytes::new())
    } else {
        loading()
    }
}

/// SGLang's deeper check: generates one token before answering.
async fn health_generate(state: &State) -> Response<SimBody> {
    if !state.is_ready() {
        return loading();
    }
    timer::sleep_until(std::time::Instant::now() + state.config.ttft).await;
    respond(StatusCode::OK, "text/plain", Bytes::new())
}

fn loading() -> Response<SimBody> {
    error(&ApiError::new(
        503,
        "service_unavailable",
        "the model is still loading",
    ))
}

fn models(state: &State) -> Response<SimBody> {
    let created = unix_seconds();
    let body = serde_json::json!({
        "object": "list",
        "data": [{
            "id": state.config.model_name,
            "object": "model",
            "created": created,
            "owned_by": "gpuflow-sim",
            "root": state.config.model_name,
            "max_model_len": state.config.max_model_len,
        }],
    });
    json(
        StatusCode::OK,
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

async fn generate(
    state: Arc<State>,
    endpoint: Endpoint,
    req: Request<Incoming>,
) -> Response<SimBody> {
    if !state.is_ready() {
        return loading();
    }
    // Present only under --close-after-stream (the server loop puts it there).
    let stream_end = req.extensions().get::<StreamEnd>().cloned();
    let admitted = match admit(&state, endpoint, req).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let waiting = state.metrics.waiting();
    let slot = state.slot().await;
    drop(waiting);
    let Ok(slot) = slot else {
        return error(&ApiError::new(
            503,
            "service_unavailable",
            format!(
                "the server is busy: all {} generation slots are taken (--max-concurrency \
                 with --reject-when-busy)",
                state.config.max_concurrency.unwrap_or_default()
            ),
        ));
    };
    let (plan, schedule, guard) = begin(&state, endpoint, admitted);
    if plan.stream {
        let mut stream = SseStream::new(plan, schedule, guard, slot);
        if let Some(end) = &stream_end {
            stream = stream.close_connection_after(end.clone());
        }
        let mut response = Response::new(Either::Right(stream));
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        if stream_end.is_some() {
            // What llama-server (cpp-httplib) promises, right before it closes anyway.
            headers.insert(CONNECTION, HeaderValue::from_static("keep-alive"));
            headers.insert(
                HeaderName::from_static("keep-alive"),
                HeaderValue::from_static("timeout=5, max=100"),
            );
        }
        return response;
    }
    let response = whole(&state, plan, schedule, guard).await;
    drop(slot);
    response
}

/// A request accepted for generation, before it has a slot.
struct Admitted {
    request: GenerationRequest,
    client_request_id: Option<String>,
    received: Stamp,
}

/// Reads and checks the body; the refusal is the response to send.
async fn admit(
    state: &State,
    endpoint: Endpoint,
    req: Request<Incoming>,
) -> Result<Admitted, Response<SimBody>> {
    let client_request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => {
            return Err(error(&ApiError::new(
                413,
                "invalid_request_error",
                format!("the request body is larger than {MAX_BODY} bytes"),
            )));
        }
        // The client went away while sending; the answer is for the record only.
        Err(_) => {
            return Err(error(&ApiError::invalid(
                None,
                "the request body could not be read",
            )));
        }
    };
    let (_, received) = state.recorder.clock().now();
    let limits = Limits {
        default_max_tokens: state.config.default_max_tokens,
        max_model_len: state.config.max_model_len,
        context: if state.config.stop_at_context_limit {
            ContextPolicy::StopAtLimit
        } else {
            ContextPolicy::Refuse
        },
        prefix_hashes: state.config.prefix_cache,
    };
    let request = request::parse(endpoint, &body, limits).map_err(|err| error(&err))?;
    Ok(Admitted {
        request,
        client_request_id,
        received,
    })
}

/// Starts the generation of a request that now holds its slot: names it, plans its chunks and
/// opens its record.
fn begin(
    state: &Arc<State>,
    endpoint: Endpoint,
    admitted: Admitted,
) -> (StreamPlan, TokenSchedule, RequestGuard) {
    let Admitted {
        request,
        client_request_id,
        received,
    } = admitted;
    let (start, started) = state.recorder.clock().now();
    let number = state.next_request_number();
    let (completion_tokens, finish_reason) = completion_length(state, &request);
    // Looked up once the request holds its slot: a prompt queued behind an identical one
    // finds it cached, as it would on a real server.
    let cached_tokens = state.cached_prefix(&request.prefix_hashes);
    let ttft = cached_tokens.map_or(state.config.ttft, |cached| {
        prefill_time(state.config.ttft, request.prompt_tokens, cached)
    });
    let id = match endpoint {
        Endpoint::Completions => format!("cmpl-{number}"),
        Endpoint::ChatCompletions => format!("chatcmpl-{number}"),
    };
    let guard = RequestGuard::new(
        Arc::clone(state),
        RequestRecord {
            id: id.clone(),
            client_request_id,
            endpoint: endpoint.path(),
            stream: request.stream,
            prompt_tokens: request.prompt_tokens,
            cached_tokens,
            max_tokens: request.max_tokens,
            completion_tokens,
            finish_reason,
            outcome: Outcome::Cancelled,
            received,
            started,
            finished: started,
            chunks: Vec::new(),
        },
    );
    let schedule = TokenSchedule::new(
        completion_tokens,
        state.config.tokens_per_chunk,
        ttft,
        state.config.chunk_gap(),
        state.config.jitter,
        state.config.seed,
        number,
    );
    // A streamed response carries usage only when asked for; a whole one always does.
    let wants_usage = request.include_usage || !request.stream;
    let plan = StreamPlan {
        endpoint,
        id,
        created: unix_seconds(),
        stream: request.stream,
        completion_tokens,
        finish_reason,
        usage: (wants_usage && !state.config.no_usage).then(|| {
            let usage = Usage::new(request.prompt_tokens, completion_tokens);
            match cached_tokens {
                Some(cached) => usage.with_cached(cached),
                None => usage,
            }
        }),
        usage_chunk: state.config.usage_chunk,
        start,
    };
    (plan, schedule, guard)
}

/// A non-streamed answer: sent in one piece when its last chunk would have been.
async fn whole(
    state: &State,
    plan: StreamPlan,
    schedule: TokenSchedule,
    mut guard: RequestGuard,
) -> Response<SimBody> {
    let end = schedule
        .last()
        .map_or(plan.start, |chunk| plan.start + chunk.due);
    timer::sleep_until(end).await;
    let envelope = Envelope {
        endpoint: plan.endpoint,
        id: &plan.id,
        created: plan.created,
        model: &state.config.model_name,
    };
    let text = token_text(0, plan.completion_tokens);
    let body = envelope.full(&text, plan.finish_reason, plan.usage);
    let (_, at) = state.recorder.clock().now();
    guard.push_chunk(ChunkStamp {
        index: 0,
        tokens: plan.completion_tokens,
        mono_ns: at.mono_ns,
        unix_ns: at.unix_ns,
    });
    guard.complete();
    json(StatusCode::OK, body)
}

/// How many tokens to generate and why it stops: `length` at max_tokens (or, under
/// --stop-at-context-limit, where the context is full), or `stop` where --eos-after ends it
/// first (unless the request ignores end-of-sequence).
fn completion_length(state: &State, request: &GenerationRequest) -> (u32, &'static str) {
    let limit = if state.config.stop_at_context_limit {
        // The request was refused unless the prompt leaves room for at least one token.
        let room = state
            .config
            .max_model_len
            .saturating_sub(request.prompt_tokens);
        request.max_tokens.min(room)
    } else {
        request.max_tokens
    };
    match state.config.eos_after {
        Some(eos) if !request.ignore_eos && eos < limit => (eos, "stop"),
        _ => (limit, "length"),
    }
}

/// Under --prefix-cache, the time to first token is charged only for the uncached part of the
/// prompt: `ttft × uncached / prompt_tokens`, but at least [`PREFILL_FLOOR`] of it (the
/// first token's own decode step, and the scheduling every request pays).
fn prefill_time(ttft: Duration, prompt_tokens: u32, cached: u32) -> Duration {
    if prompt_tokens == 0 {
        return ttft;
    }
    let uncached = f64::from(prompt_tokens.saturating_sub(cached)) / f64::from(prompt_tokens);
    ttft.mul_f64(uncached.max(PREFILL_FLOOR))
}

/// The smallest share of --ttft a request pays, however much of its prompt is cached.
const PREFILL_FLOOR: f64 = 0.05;

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn json(status: StatusCode, body: Vec<u8>) -> Response<SimBody> {
    respond(status, "application/json", Bytes::from(body))
}

fn error(err: &ApiError) -> Response<SimBody> {
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json(status, err.body())
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<SimBody> {
    let mut response = Response::new(Either::Left(Full::new(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
