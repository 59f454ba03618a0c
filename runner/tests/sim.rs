//! gpuflow-sim over real HTTP on 127.0.0.1: in-process servers on port 0 for the protocol and
//! timing, the built binary for what only a process shows (exit status, stderr, signals).
//! Timing is asserted against the server's own record, never against sleeps in the test.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use gpuflow::sim::{self, Exit, SimConfig, SimServer, UsageChunk};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::Signal;
use crate::support::process::signal;
use crate::support::sim::{SIM_BIN, SimProcess, serve};

// ---------------------------------------------------------------------------------------------
// A small HTTP/1.1 client over hyper's connection API: one connection per request, no mocks.

async fn send(addr: SocketAddr, method: Method, path: &str, body: Option<&Value>) -> (u16, Bytes) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let body = body
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, bytes)
}

async fn get(addr: SocketAddr, path: &str) -> (u16, Bytes) {
    send(addr, Method::GET, path, None).await
}

async fn post(addr: SocketAddr, path: &str, body: Value) -> (u16, Value) {
    let (status, bytes) = send(addr, Method::POST, path, Some(&body)).await;
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// Posts a raw body (not necessarily JSON).
async fn post_raw(addr: SocketAddr, path: &str, body: &'static str) -> (u16, Value) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let request = Request::post(path)
        .header("host", addr.to_string())
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// A streamed response's events: JSON payloads, then `Value::Null` for `[DONE]`.
async fn stream(addr: SocketAddr, path: &str, body: Value) -> Vec<Value> {
    let (status, bytes) = send(addr, Method::POST, path, Some(&body)).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    text.split_terminator("\n\n")
        .map(|event| {
            let data = event
                .strip_prefix("data: ")
                .expect("every event is a `data:` line");
            if data == "[DONE]" {
                Value::Null
            } else {
                serde_json::from_str(data).unwrap()
            }
        })
        .collect()
}

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// The record of one request, by response id.
fn recorded(server: &SimServer, id: &str) -> Value {
    server.record_json()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("`{id}` is not in the record"))
        .clone()
}

fn ns(value: &Value) -> i64 {
    value.as_i64().unwrap()
}

// ---------------------------------------------------------------------------------------------
// In-process servers.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_503_while_loading_then_200() {
    let delay = Duration::from_millis(300);
    let server = serve(SimConfig {
        startup_delay: delay,
        ..SimConfig::local()
    })
    .await;
    let addr = server.addr();
    let (status, body) = get(addr, "/health").await;
    assert_eq!(status, 503);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["message"], "the model is still loading");
    let (status, _) = post(addr, "/v1/completions", json!({"prompt": "x"})).await;
    assert_eq!(status, 503, "generation waits for the load too");

    let deadline = Instant::now() + Duration::from_secs(10);
    while get(addr, "/health").await.0 != 200 {
        assert!(Instant::now() < deadline, "never became healthy");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ready = server.ready().expect("ready is recorded");
    assert!(ready.mono_ns >= delay.as_nanos() as u64, "{ready:?}");
    assert_eq!(server.record_json()["ready"]["mono_ns"], ready.mono_ns);
    assert_eq!(get(addr, "/health_generate").await.0, 200);
    assert_eq!(server.shutdown().await, Exit::Shutdown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_sends_max_tokens_in_chunks_then_usage_and_done() {
    let server = serve(SimConfig {
        tokens_per_chunk: 4,
        tokens_per_second: 400.0,
        ttft: Duration::from_millis(5),
        ..SimConfig::local()
    })
    .await;
    let events = stream(
        server.addr(),
        "/v1/completions",
        json!({"model": "gpuflow-sim", "prompt": "count these three", "max_tokens": 10,
               "stream": true, "stream_options": {"include_usage": true}, "temperature": 0}),
    )
    .await;
    assert_eq!(
        events.len(),
        5,
        "3 token events, usage, [DONE]: {events:#?}"
    );
    let tokens: Vec<usize> = events[..3]
        .iter()
        .map(|e| words(e["choices"][0]["text"].as_str().unwrap()))
        .collect();
    assert_eq!(tokens, [4, 4, 2]);
    let finish: Vec<&Value> = events[..3]
        .iter()
        .map(|e| &e["choices"][0]["finish_reason"])
        .collect();
    assert_eq!(finish, [&Value::Null, &Value::Null, &json!("length")]);
    assert_eq!(events[3]["choices"], json!([]));
    assert_eq!(
        events[3]["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 10, "total_tokens": 13})
    );
    assert_eq!(events[4], Value::Null);

    let id = events[0]["id"].as_str().unwrap();
    assert!(
        events
            .iter()
            .take(4)
            .all(|e| e["id"] == id && e["object"] == "text_completion")
    );
    let record = recorded(&server, id);
    assert_eq!(record["outcome"], "complete");
    assert_eq!(record["completion_tokens"], 10);
    let per_chunk: Vec<&Value> = record["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["tokens"])
        .collect();
    assert_eq!(per_chunk, [&json!(4), &json!(4), &json!(2)]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_leave_at_the_configured_ttft_and_gaps_without_drift() {
    let ttft = Duration::from_millis(30);
    let server = serve(SimConfig {
        ttft,
        tokens_per_second: 250.0, // a 4 ms gap
        ..SimConfig::local()
    })
    .await;
    let events = stream(
        server.addr(),
        "/v1/completions",
        json!({"prompt": "x", "max_tokens": 25, "stream": true}),
    )
    .await;
    let record = recorded(&server, events[0]["id"].as_str().unwrap());
    let started = ns(&record["started"]["mono_ns"]);
    let sent: Vec<i64> = record["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| ns(&c["mono_ns"]))
        .collect();
    assert_eq!(sent.len(), 25);
    let gap = 4_000_000i64;
    // Lateness against the absolute schedule (start + ttft + k·gap): never early, and late by
    // at most one wake-up, whatever the chunk's position, so nothing accumulates.
    let late: Vec<i64> = sent
        .iter()
        .enumerate()
        .map(|(k, at)| at - (started + ttft.as_nanos() as i64 + k as i64 * gap))
        .collect();
    assert!(late.iter().all(|l| *l >= 0), "a chunk left early: {late:?}");
    let mut sorted = late.clone();
    sorted.sort_unstable();
    assert!(
        sorted[sorted.len() / 2] < 3_000_000,
        "median lateness: {late:?}"
    );
    assert!(
        *sorted.last().unwrap() < 50_000_000,
        "worst lateness: {late:?}"
    );
    // Over 24 gaps, even the worst lateness above moves the mean gap by under 2.1 ms.
    let mean_gap = (sent[24] - sent[0]) as f64 / 24.0;
    assert!(
        (mean_gap - gap as f64).abs() < 2_100_000.0,
        "mean gap {mean_gap} ns"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_streams_four_tokens_per_event_like_speculative_decoding() {
    let server = serve(SimConfig {
        tokens_per_chunk: 4,
        tokens_per_second: 800.0,
        ttft: Duration::from_millis(2),
        model_name: "Qwen3-235B".to_owned(),
        ..SimConfig::local()
    })
    .await;
    let events = stream(
        server.addr(),
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "two words"}], "max_completion_tokens": 12,
               "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(events.len(), 5);
    for event in &events[..3] {
        assert_eq!(event["object"], "chat.completion.chunk");
        assert_eq!(event["model"], "Qwen3-235B");
        assert_eq!(
            words(event["choices"][0]["delta"]["content"].as_str().unwrap()),
            4
        );
    }
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(events[1]["choices"][0]["delta"].get("role").is_none());
    assert_eq!(events[3]["usage"]["prompt_tokens"], 2);
    assert_eq!(events[3]["usage"]["completion_tokens"], 12);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_responses_come_when_the_last_token_would_have() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(20),
        tokens_per_second: 500.0, // 2 ms a token
        ..SimConfig::local()
    })
    .await;
    let (status, body) = post(
        server.addr(),
        "/v1/completions",
        json!({"prompt": "a b c d", "max_tokens": 6}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["object"], "text_completion");
    assert_eq!(words(body["choices"][0]["text"].as_str().unwrap()), 6);
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10})
    );
    let record = recorded(&server, body["id"].as_str().unwrap());
    let took = ns(&record["finished"]["mono_ns"]) - ns(&record["started"]["mono_ns"]);
    assert!(
        took >= 20_000_000 + 5 * 2_000_000,
        "answered after {took} ns"
    );

    let (status, body) = post(
        server.addr(),
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(
        words(body["choices"][0]["message"]["content"].as_str().unwrap()),
        3
    );
    assert_eq!(body["usage"]["total_tokens"], 4);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_lists_the_model_name() {
    let server = serve(SimConfig {
        model_name: "my-model".to_owned(),
        ..SimConfig::local()
    })
    .await;
    let (status, body) = get(server.addr(), "/v1/models").await;
    assert_eq!(status, 200);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["object"], "list");
    assert_eq!(body["data"][0]["id"], "my-model");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_openai_style_errors() {
    let server = serve(SimConfig::local()).await;
    let addr = server.addr();
    let (status, body) = post_raw(addr, "/v1/completions", r#"{"prompt": "x", "#).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{body}"
    );

    let (status, body) = post(addr, "/v1/chat/completions", json!({"messages": "hi"})).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "messages");

    let (status, body) = post(addr, "/v1/completion", json!({})).await;
    assert_eq!(status, 404);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `/v1/completions`?")
    );

    let (status, _) = get(addr, "/v1/completions").await;
    assert_eq!(status, 405);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_max_concurrency_wait_their_turn() {
    let server = serve(SimConfig {
        max_concurrency: Some(1),
        ttft: Duration::from_millis(30),
        tokens_per_second: 200.0,
        ..SimConfig::local()
    })
    .await;
    let addr = server.addr();
    let body = json!({"prompt": "x", "max_tokens": 4, "stream": true});
    let (first, second) = tokio::join!(
        stream(addr, "/v1/completions", body.clone()),
        stream(addr, "/v1/completions", body.clone())
    );
    let (a, b) = (
        recorded(&server, first[0]["id"].as_str().unwrap()),
        recorded(&server, second[0]["id"].as_str().unwrap()),
    );
    let (earlier, later) = if ns(&a["started"]["mono_ns"]) < ns(&b["started"]["mono_ns"]) {
        (a, b)
    } else {
        (b, a)
    };
    assert!(
        ns(&later["received"]["mono_ns"]) < ns(&earlier["finished"]["mono_ns"]),
        "both arrived while the first ran"
    );
    assert!(
        ns(&later["started"]["mono_ns"]) >= ns(&earlier["finished"]["mono_ns"]),
        "the second starts only when the first ends: {earlier} {later}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_when_busy_answers_503_instead_of_queueing() {
    let server = serve(SimConfig {
        max_concurrency: Some(1),
        reject_when_busy: true,
        ttft: Duration::from_millis(200),
        ..SimConfig::local()
    })
    .await;
    let addr = server.addr();
    // A streamed response's head is sent once it holds its slot, so after the head arrives
    // the slot is certainly taken.
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let body = r#"{"prompt": "x", "max_tokens": 2, "stream": true}"#;
    let holder = sender
        .send_request(
            Request::post("/v1/completions")
                .header("host", addr.to_string())
                .body(Full::new(Bytes::from_static(body.as_bytes())))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(holder.status(), 200);

    let (status, busy) = post(addr, "/v1/completions", json!({"prompt": "x"})).await;
    assert_eq!(status, 503);
    assert!(
        busy["error"]["message"].as_str().unwrap().contains("busy"),
        "{busy}"
    );

    let text = holder.into_body().collect().await.unwrap().to_bytes();
    assert!(text.ends_with(b"data: [DONE]\n\n"));
    let (status, _) = post(
        addr,
        "/v1/completions",
        json!({"prompt": "x", "max_tokens": 1}),
    )
    .await;
    assert_eq!(
        status, 200,
        "the slot is free again once the first response ends"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eos_ends_early_unless_ignored_and_usage_can_be_withheld() {
    let server = serve(SimConfig {
        eos_after: Some(3),
        no_usage: true,
        ttft: Duration::from_millis(1),
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    let addr = server.addr();
    let request = |ignore_eos: bool| {
        json!({"prompt": "x", "max_tokens": 10, "stream": true, "ignore_eos": ignore_eos,
               "stream_options": {"include_usage": true}})
    };
    let events = stream(addr, "/v1/completions", request(false)).await;
    assert_eq!(
        events.len(),
        4,
        "3 tokens and [DONE], no usage: {events:#?}"
    );
    assert_eq!(events[2]["choices"][0]["finish_reason"], "stop");
    let events = stream(addr, "/v1/completions", request(true)).await;
    assert_eq!(events.len(), 11);
    assert_eq!(events[9]["choices"][0]["finish_reason"], "length");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_is_recorded_as_cancelled() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(1),
        tokens_per_second: 100.0,
        ..SimConfig::local()
    })
    .await;
    let mut socket = TcpStream::connect(server.addr()).await.unwrap();
    let body = r#"{"prompt": "x", "max_tokens": 1000, "stream": true}"#;
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: sim\r\nx-request-id: leaver\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut buffer = vec![0u8; 4096];
    let mut seen = String::new();
    while !seen.contains("data: ") {
        let n = socket.read(&mut buffer).await.unwrap();
        assert!(n > 0);
        seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    drop(socket);
    let deadline = Instant::now() + Duration::from_secs(10);
    let record = loop {
        let requests = server.record_json()["requests"].clone();
        if let Some(r) = requests
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["client_request_id"] == "leaver")
        {
            break r.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the cancelled request never reached the record"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(record["outcome"], "cancelled");
    assert!(record["chunks"].as_array().unwrap().len() < 1000);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_file_and_ready_file_hold_what_the_server_did() {
    let dir = std::env::temp_dir().join(format!("gpuflow-sim-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (record_path, ready_path) = (dir.join("record.jsonl"), dir.join("ready.json"));
    let _ = std::fs::remove_file(&record_path);
    let server = serve(SimConfig {
        record: Some(record_path.clone()),
        ready_file: Some(ready_path.clone()),
        ttft: Duration::from_millis(1),
        tokens_per_chunk: 2,
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.ready().is_none() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stream(
        server.addr(),
        "/v1/completions",
        json!({"prompt": "x", "max_tokens": 5, "stream": true}),
    )
    .await;
    let ready = server.ready().unwrap();
    server.shutdown().await;

    let lines: Vec<Value> = std::fs::read_to_string(&record_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["start", "ready", "request"]);
    assert_eq!(lines[0]["settings"]["tokens_per_chunk"], 2);
    assert_eq!(lines[0]["settings"]["chunk_gap_ns"], 2_000_000);
    assert_eq!(lines[1]["unix_ns"], ready.unix_ns);
    assert_eq!(lines[2]["chunks"].as_array().unwrap().len(), 3);
    let ready_file: Value =
        serde_json::from_str(&std::fs::read_to_string(&ready_path).unwrap()).unwrap();
    assert_eq!(
        ready_file,
        json!({"mono_ns": ready.mono_ns, "unix_ns": ready.unix_ns})
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_requests_stops_an_in_process_server() {
    let mut server = serve(SimConfig {
        crash_after_requests: Some(2),
        ttft: Duration::from_millis(1),
        ..SimConfig::local()
    })
    .await;
    for _ in 0..2 {
        let (status, _) = post(
            server.addr(),
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": 1}),
        )
        .await;
        assert_eq!(status, 200, "the first two are answered in full");
    }
    let exit = tokio::time::timeout(Duration::from_secs(10), server.stopped())
        .await
        .unwrap();
    let Exit::Crashed { code, message } = exit else {
        panic!("expected a crash, got {exit:?}");
    };
    assert_eq!(code, 1);
    assert!(message.contains("CUDA error: an illegal memory access was encountered"));
    assert!(
        TcpStream::connect(server.addr()).await.is_err(),
        "nothing listens after a crash"
    );
}

// ---------------------------------------------------------------------------------------------
// llama-server's manners, each behind its flag.

/// The raw bytes of a streamed completion on `socket`, up to the end of its chunked body.
async fn read_one_stream(socket: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buffer = vec![0u8; 8192];
    // The last chunk of the body (`data: [DONE]`) and the terminating zero-length chunk.
    while !seen.ends_with(b"data: [DONE]\n\n\r\n0\r\n\r\n") {
        let n = socket.read(&mut buffer).await.unwrap();
        assert!(
            n > 0,
            "closed before the stream ended: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8(seen).unwrap()
}

const STREAM_REQUEST: &str = r#"{"prompt": "x", "max_tokens": 3, "stream": true}"#;

fn raw_post(body: &str) -> String {
    format!(
        "POST /v1/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// What a client that reuses the connection at once gets: a stream, then (written the moment
/// the stream's last byte is read, as a connection pool does) a second request. Returns the
/// first response and every byte read after the second request was sent, until EOF, a reset
/// or a whole second response.
async fn stream_then_reuse_at_once(addr: SocketAddr) -> (String, Result<Vec<u8>, String>) {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket.set_nodelay(true).unwrap();
    socket
        .write_all(raw_post(STREAM_REQUEST).as_bytes())
        .await
        .unwrap();
    let first = read_one_stream(&mut socket).await;
    let second = r#"{"prompt": "x", "max_tokens": 1}"#;
    let written = socket.write_all(raw_post(second).as_bytes()).await;
    let mut after = Vec::new();
    let read = async {
        let mut buffer = vec![0u8; 8192];
        loop {
            match socket.read(&mut buffer).await {
                Ok(0) => return Ok(()),
                Ok(n) => after.extend_from_slice(&buffer[..n]),
                Err(err) => return Err(err.to_string()),
            }
            // A whole non-streamed answer: its JSON body ends with `}`.
            if after.starts_with(b"HTTP/1.1 200") && after.ends_with(b"}") {
                return Ok(());
            }
        }
    };
    let outcome = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("neither an answer nor a close within 10 s");
    let outcome = written.map_err(|err| err.to_string()).and(outcome);
    (first, outcome.map(|()| after))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_after_stream_closes_a_keep_alive_connection_under_the_next_request() {
    let server = serve(SimConfig {
        close_after_stream: true,
        ttft: Duration::from_millis(1),
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    let addr = server.addr();
    for attempt in 0..5 {
        let (first, second) = stream_then_reuse_at_once(addr).await;
        let head = first.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{first}");
        assert!(head.contains("\r\nconnection: keep-alive\r\n"), "{head}");
        assert!(
            head.contains("\r\nkeep-alive: timeout=5, max=100\r\n"),
            "{head}"
        );
        // Ended normally, then closed: EOF, or a reset because the request was never read;
        // never an answer.
        match second {
            Ok(bytes) => assert!(
                bytes.is_empty(),
                "attempt {attempt}: the second request was answered: {}",
                String::from_utf8_lossy(&bytes)
            ),
            Err(err) => assert!(err.contains("reset"), "attempt {attempt}: {err}"),
        }
    }

    // The server closes by itself, not only when the client speaks again.
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket
        .write_all(raw_post(STREAM_REQUEST).as_bytes())
        .await
        .unwrap();
    read_one_stream(&mut socket).await;
    let mut buffer = [0u8; 64];
    let eof = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buffer))
        .await
        .expect("the connection stayed open");
    assert_eq!(eof.unwrap(), 0, "EOF after the stream");

    // The streams themselves were complete, and so is a non-streamed answer.
    let requests = server.record_json()["requests"].clone();
    let requests = requests.as_array().unwrap();
    assert_eq!(requests.len(), 6, "the second requests were never read");
    assert!(requests.iter().all(|r| r["outcome"] == "complete"));
    let (status, _) = post(
        addr,
        "/v1/completions",
        json!({"prompt": "x", "max_tokens": 1}),
    )
    .await;
    assert_eq!(status, 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_close_after_stream_the_connection_is_reused() {
    let server = serve(SimConfig {
        ttft: Duration::from_millis(1),
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    let (first, second) = stream_then_reuse_at_once(server.addr()).await;
    assert!(
        !first.to_ascii_lowercase().contains("keep-alive: timeout"),
        "{first}"
    );
    let second = String::from_utf8(second.unwrap()).unwrap();
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(second.contains(r#""finish_reason":"length""#), "{second}");
    server.shutdown().await;
}

/// The time to first token of a request, from the record: first chunk minus start.
fn recorded_ttft(server: &SimServer, id: &str) -> Duration {
    let record = recorded(server, id);
    let ns = ns(&record["chunks"][0]["mono_ns"]) - ns(&record["started"]["mono_ns"]);
    Duration::from_nanos(ns as u64)
}

/// One streamed completion with usage: (response id, usage).
async fn completion_usage(addr: SocketAddr, prompt: &str) -> (String, Value) {
    let events = stream(
        addr,
        "/v1/completions",
        json!({"prompt": prompt, "max_tokens": 2, "stream": true,
               "stream_options": {"include_usage": true}}),
    )
    .await;
    let id = events[0]["id"].as_str().unwrap().to_owned();
    let usage = events[events.len() - 2]["usage"].clone();
    (id, usage)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_cache_charges_the_ttft_only_for_the_uncached_prompt() {
    let ttft = Duration::from_millis(400);
    let server = serve(SimConfig {
        prefix_cache: true,
        ttft,
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    let addr = server.addr();
    let twenty: Vec<String> = (0..20).map(|i| format!("w{i}")).collect();
    let prompt = twenty.join(" ");

    let (first, usage) = completion_usage(addr, &prompt).await;
    assert_eq!(usage["prompt_tokens_details"], json!({"cached_tokens": 0}));
    assert!(recorded_ttft(&server, &first) >= ttft);

    // All but the last token cached: ttft × 1/20 = 20 ms (the floor is 5%, also 20 ms).
    let (again, usage) = completion_usage(addr, &prompt).await;
    assert_eq!(usage["prompt_tokens"], 20);
    assert_eq!(usage["prompt_tokens_details"], json!({"cached_tokens": 19}));
    assert_eq!(recorded(&server, &again)["cached_tokens"], 19);
    let cached_ttft = recorded_ttft(&server, &again);
    assert!(
        cached_ttft >= ttft / 20 && cached_ttft < ttft / 4,
        "{cached_ttft:?}"
    );

    // Half the prompt shared: half the TTFT.
    let tail: Vec<String> = (0..10).map(|i| format!("x{i}")).collect();
    let half = format!("{} {}", twenty[..10].join(" "), tail.join(" "));
    let (partial, usage) = completion_usage(addr, &half).await;
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 10);
    let partial_ttft = recorded_ttft(&server, &partial);
    assert!(
        partial_ttft >= ttft / 2 && partial_ttft < ttft * 9 / 10,
        "{partial_ttft:?}"
    );

    // A prompt that differs from the first word on: nothing cached, the whole TTFT.
    let other: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    let (fresh, usage) = completion_usage(addr, &other.join(" ")).await;
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    assert!(recorded_ttft(&server, &fresh) >= ttft);

    // Chat prompts are cached too: the words of the messages, in order.
    let chat = json!({"messages": [{"role": "user", "content": prompt}], "max_tokens": 1});
    let (status, body) = post(addr, "/v1/chat/completions", chat).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 19);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_prefix_cache_a_repeated_prompt_costs_the_full_ttft() {
    let ttft = Duration::from_millis(50);
    let server = serve(SimConfig {
        ttft,
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    for _ in 0..2 {
        let (id, usage) = completion_usage(server.addr(), "the same prompt").await;
        assert!(usage.get("prompt_tokens_details").is_none(), "{usage}");
        assert!(recorded(&server, &id).get("cached_tokens").is_none());
        assert!(recorded_ttft(&server, &id) >= ttft);
    }
    server.shutdown().await;
}

/// A POST's status, content type and body.
async fn post_typed(addr: SocketAddr, path: &str, body: Value) -> (u16, String, String) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let request = Request::post(path)
        .header("host", addr.to_string())
        .body(Full::new(Bytes::from(serde_json::to_vec(&body).unwrap())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(bytes.to_vec()).unwrap(),
    )
}

fn words_prompt(n: usize) -> String {
    vec!["w"; n].join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_model_len_refuses_a_stream_with_a_json_400_by_default() {
    let server = serve(SimConfig {
        max_model_len: 10,
        ..SimConfig::local()
    })
    .await;
    let (status, content_type, body) = post_typed(
        server.addr(),
        "/v1/completions",
        json!({"prompt": words_prompt(4), "max_tokens": 7, "stream": true}),
    )
    .await;
    assert_eq!((status, content_type.as_str()), (400, "application/json"));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["param"], "max_tokens");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum context length is 10 tokens, but 11 were requested"),
        "{body}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_at_context_limit_refuses_long_prompts_and_cuts_long_completions() {
    let server = serve(SimConfig {
        max_model_len: 10,
        stop_at_context_limit: true,
        ttft: Duration::from_millis(1),
        tokens_per_second: 1000.0,
        ..SimConfig::local()
    })
    .await;
    let addr = server.addr();
    for (prompt, stream) in [(12, true), (12, false), (10, true)] {
        let (status, content_type, body) = post_typed(
            addr,
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": words_prompt(prompt)}],
                   "max_tokens": 1, "stream": stream}),
        )
        .await;
        assert_eq!((status, content_type.as_str()), (400, "application/json"));
        assert_eq!(
            body,
            format!(
                r#"{{"error":{{"code":400,"message":"request ({prompt} tokens) exceeds the available context size (10 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":{prompt},"n_ctx":10}}}}"#
            )
        );
    }

    // 4 prompt tokens leave room for 6 of the 20 asked for.
    let events = stream(
        addr,
        "/v1/completions",
        json!({"prompt": words_prompt(4), "max_tokens": 20, "stream": true,
               "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(events.len(), 8, "6 tokens, usage, [DONE]: {events:#?}");
    assert_eq!(events[5]["choices"][0]["finish_reason"], "length");
    assert_eq!(
        events[6]["usage"],
        json!({"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10})
    );
    let record = recorded(&server, events[0]["id"].as_str().unwrap());
    assert_eq!(
        (
            record["max_tokens"].clone(),
            record["completion_tokens"].clone()
        ),
        (json!(20), json!(6))
    );
    let (status, body) = post(
        addr,
        "/v1/completions",
        json!({"prompt": words_prompt(9), "max_tokens": 20}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(words(body["choices"][0]["text"].as_str().unwrap()), 1);
    assert_eq!(body["usage"]["completion_tokens"], 1);
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_chunk_puts_usage_in_its_own_event_or_on_the_finish_reason_chunk() {
    for usage_chunk in [UsageChunk::Separate, UsageChunk::Final] {
        let server = serve(SimConfig {
            usage_chunk,
            ttft: Duration::from_millis(1),
            tokens_per_second: 1000.0,
            ..SimConfig::local()
        })
        .await;
        let chat = json!({"messages": [{"role": "user", "content": "a b"}], "max_tokens": 3,
                          "stream": true, "stream_options": {"include_usage": true}});
        let completion = json!({"prompt": "a b", "max_tokens": 3, "stream": true,
                                "stream_options": {"include_usage": true}});
        let usage = json!({"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5});
        for (path, body) in [
            ("/v1/chat/completions", chat),
            ("/v1/completions", completion),
        ] {
            let events = stream(server.addr(), path, body).await;
            let finish = &events[2];
            assert_eq!(finish["choices"][0]["finish_reason"], "length", "{path}");
            assert!(events[..2].iter().all(|e| e.get("usage").is_none()));
            match usage_chunk {
                UsageChunk::Separate => {
                    assert_eq!(events.len(), 5, "{path}: {events:#?}");
                    assert!(finish.get("usage").is_none(), "{path}: {finish}");
                    assert_eq!(events[3]["choices"], json!([]), "{path}");
                    assert_eq!(events[3]["usage"], usage, "{path}");
                    assert_eq!(events[3]["id"], events[0]["id"]);
                }
                UsageChunk::Final => {
                    assert_eq!(events.len(), 4, "{path}: {events:#?}");
                    assert_eq!(finish["usage"], usage, "{path}");
                }
            }
            assert_eq!(events[events.len() - 1], Value::Null);
        }
        server.shutdown().await;
    }
}

// ---------------------------------------------------------------------------------------------
// The binary.

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test_case::test_case("sglang", "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88." ; "sglang")]
#[test_case::test_case("torch", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" ; "torch")]
fn oom_at_start_exits_non_zero_with_the_servers_message(style: &str, message: &str) {
    let sim = SimProcess::spawn(&[
        "--oom-at-start",
        "--startup-delay",
        "200ms",
        "--oom-style",
        style,
    ]);
    let addr = sim.addr();
    // While loading, the port answers and /health says 503, as with a real server.
    assert_eq!(runtime().block_on(get(addr, "/health")).0, 503);
    sim.line_with("Load weight begin");
    let (code, stderr) = sim.exit();
    assert_eq!(code, Some(1));
    assert!(stderr.contains(message), "{stderr}");
}

#[test]
fn oom_crash_delay_cuts_a_long_load_short() {
    let started = Instant::now();
    let sim = SimProcess::spawn(&[
        "--oom-at-start",
        "--startup-delay",
        "600s",
        "--crash-after-delay",
        "100ms",
    ]);
    let (code, stderr) = sim.exit();
    assert_eq!(code, Some(1));
    assert!(stderr.contains("Loaded weights leave no GPU memory for the KV cache"));
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn crash_after_requests_exits_after_the_nth_answer() {
    let sim = SimProcess::spawn(&["--crash-after-requests", "2", "--ttft", "1ms"]);
    let addr = sim.addr();
    sim.line_with(sim::READY_LINE);
    let rt = runtime();
    for _ in 0..2 {
        let (status, body) = rt.block_on(post(
            addr,
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": 2}),
        ));
        assert_eq!(status, 200, "{body}");
    }
    let (code, stderr) = sim.exit();
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("Traceback (most recent call last):"),
        "{stderr}"
    );
    assert!(stderr.contains("after 2 answered requests"), "{stderr}");
}

#[test]
fn prints_the_ready_line_and_stops_cleanly_on_sigterm() {
    let sim = SimProcess::spawn(&["--startup-delay", "100ms", "--model-name", "m"]);
    sim.addr();
    let ready = sim.line_with(sim::READY_LINE);
    assert!(
        ready.ends_with("] The server is fired up and ready to roll!"),
        "{ready}"
    );
    assert!(signal(sim.child.id() as i32, Signal::TERM).is_ok());
    std::thread::sleep(Duration::from_millis(50));
    let rest = sim.remaining_stdout();
    let (code, stderr) = sim.exit();
    assert_eq!(code, Some(0), "{stderr} {rest:?}");
}

#[test]
fn a_taken_port_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = Command::new(SIM_BIN)
        .args(["--host", "127.0.0.1", "--port", &port])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on `127.0.0.1:{port}`")),
        "{stderr}"
    );
    assert!(stderr.contains("`--port 0` picks a free one"), "{stderr}");
}

#[test]
fn flags_have_environment_twins() {
    let out = Command::new(SIM_BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for env in [
        "GPUFLOW_SIM_PORT",
        "GPUFLOW_SIM_TTFT",
        "GPUFLOW_SIM_TOKENS_PER_CHUNK",
        "GPUFLOW_SIM_OOM_AT_START",
        "GPUFLOW_SIM_CLOSE_AFTER_STREAM",
        "GPUFLOW_SIM_PREFIX_CACHE",
        "GPUFLOW_SIM_STOP_AT_CONTEXT_LIMIT",
        "GPUFLOW_SIM_USAGE_CHUNK",
    ] {
        assert!(help.contains(env), "`{env}` missing from --help");
    }
    let out = Command::new(SIM_BIN)
        .env("GPUFLOW_SIM_TTFT", "5")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("e.g. `500ms`"));
    let out = Command::new(SIM_BIN)
        .env("GPUFLOW_SIM_USAGE_CHUNK", "inline")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[possible values: separate, final]"),
        "{stderr}"
    );
}

#[test]
fn an_unwritable_record_file_is_a_clear_error() {
    let out = Command::new(SIM_BIN)
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--record",
            "/nonexistent-dir/record.jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot open the record file `/nonexistent-dir/record.jsonl`"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("--port 0"),
        "no port hint for a file problem: {stderr}"
    );
}

/// A process on the host is not a server for the whole network unless asked: the default
/// address is loopback (the image asks for `0.0.0.0` itself).
#[test]
fn the_binary_listens_on_loopback_by_default() {
    let mut child = Command::new(SIM_BIN)
        .args(["--port", "0"])
        .env_remove("GPUFLOW_SIM_HOST")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("listening on http://127.0.0.1:"), "{line}");
    assert!(SimConfig::default().host.is_loopback());
}

/// The record says how many prompt tokens a request had, never what they said.
#[tokio::test]
async fn the_record_keeps_no_prompt_text() {
    let server = serve(SimConfig::local()).await;
    let (status, _) = post(
        server.addr(),
        "/v1/completions",
        json!({"prompt": "secret-word-1 secret-word-2", "max_tokens": 2}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = post(
        server.addr(),
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "secret-word-3"}], "max_tokens": 2}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (_, record) = get(server.addr(), "/sim/record").await;
    let record = String::from_utf8_lossy(&record);
    assert!(record.contains("\"prompt_tokens\":2"), "{record}");
    assert!(!record.contains("secret-word"), "{record}");
}
