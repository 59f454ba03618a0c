//! The server's life: bind, simulate the model load (port open, `/health` 503, progress lines),
//! become ready or fail like a real server, accept connections, and stop on request or crash.
//!
//! [`serve`] runs in-process (tests start a server per test on port 0); [`run`] is the
//! `gpuflow-sim` binary's whole life, adding signals, stderr and the exit status.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::config::SimConfig;
use super::connection::{CloseAfterStream, StreamEnd};
use super::lifecycle::{self, READY_LINE};
use super::memory::{self, MemoryPlan};
use super::record::{Clock, RecordedSettings, Recorder, Stamp};
use super::routes;
use super::state::{Exit, State};
use super::timer;

/// A running simulated server.
pub struct SimServer {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<Exit>,
}

/// Binds and starts a server with `config`. It is loading when this returns, or already ready
/// when there is no start-up delay. Needs a tokio runtime.
pub async fn serve(config: SimConfig) -> io::Result<SimServer> {
    config.check().map_err(|problems| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid simulator settings:\n{problems}"),
        )
    })?;
    let listener = TcpListener::bind((config.host, config.port))
        .await
        .map_err(|err| {
            let (host, port) = (config.host, config.port);
            io::Error::new(
                err.kind(),
                format!("cannot listen on `{host}:{port}`: {err}"),
            )
        })?;
    let addr = listener.local_addr()?;
    // An unreadable model config stops the server before it listens, as a bad flag does.
    let memory = memory::plan(&config)
        .map_err(|problem| io::Error::new(io::ErrorKind::InvalidInput, problem))?
        .map(Arc::new);
    let clock = Clock::new();
    let settings = RecordedSettings {
        model: config.model_name.clone(),
        ttft_ns: duration_ns(config.ttft),
        chunk_gap_ns: duration_ns(config.chunk_gap()),
        tokens_per_second: config.tokens_per_second,
        tokens_per_chunk: config.tokens_per_chunk,
        jitter: config.jitter,
        seed: config.seed,
        max_concurrency: config.max_concurrency,
    };
    let recorder = Recorder::new(
        clock,
        settings,
        config.record.as_deref(),
        config.record_memory,
    )
    .map_err(|err| with_path(err, "open the record file", config.record.as_deref()))?;
    let state = Arc::new(State::new(config, recorder));
    lifecycle::log(&format!("gpuflow-sim listening on http://{addr}"));

    if state.config.load_time().is_zero() {
        // Nothing to wait for: ready (or failed) before the caller sends its first request.
        load(Arc::clone(&state), addr, memory).await;
    } else {
        spawn_load(Arc::clone(&state), addr, memory);
    }
    let task = tokio::spawn(accept(listener, Arc::clone(&state)));
    Ok(SimServer { addr, state, task })
}

fn spawn_load(state: Arc<State>, addr: SocketAddr, memory: Option<Arc<MemoryPlan>>) {
    let loading = state;
    tokio::spawn(async move {
        // A server stopped while still loading must not turn ready (or crash) afterwards.
        tokio::select! {
            () = load(Arc::clone(&loading), addr, memory) => {}
            _ = loading.stopped() => {}
        }
    });
}

impl SimServer {
    /// The bound address (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// When the server became ready, once it has.
    pub fn ready(&self) -> Option<Stamp> {
        self.state.recorder.ready()
    }

    /// The record as served at `GET /sim/record`.
    pub fn record_json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.state.recorder.snapshot_json()).unwrap_or_default()
    }

    /// Waits until the server stops by itself (a crash mode) or is stopped.
    pub async fn stopped(&mut self) -> Exit {
        match (&mut self.task).await {
            Ok(exit) => exit,
            Err(err) => panic_exit(&err),
        }
    }

    /// Stops accepting, lets running requests finish within --shutdown-grace, then cuts them.
    pub async fn shutdown(mut self) -> Exit {
        self.state.stop(Exit::Shutdown);
        self.stopped().await
    }
}

fn panic_exit(err: &tokio::task::JoinError) -> Exit {
    Exit::Crashed {
        code: 101,
        message: format!("gpuflow-sim: internal error: {err}\n"),
    }
}

/// The simulated model load, then readiness or the crash of --oom-at-start or of the memory
/// plan (at the point of the load where it fails).
async fn load(state: Arc<State>, addr: SocketAddr, memory: Option<Arc<MemoryPlan>>) {
    let start = state.recorder.clock().start();
    let load = state.config.load_time();
    let failure = match (&memory, state.config.oom_at_start) {
        (_, true) => Some((1.0, lifecycle::oom_traceback(state.config.oom_style))),
        (Some(plan), false) => plan.failure.clone(),
        (None, false) => None,
    };
    let lines = lifecycle::loading_lines(&state.config, addr, memory.as_deref());
    for (fraction, line) in lines {
        if failure.as_ref().is_some_and(|(at, _)| fraction >= *at) {
            break;
        }
        timer::sleep_until(start + lifecycle::line_offset(load, fraction)).await;
        lifecycle::log(&line);
    }
    if let Some((at, message)) = failure {
        timer::sleep_until(start + lifecycle::line_offset(load, at)).await;
        state.stop(Exit::Crashed { code: 1, message });
        return;
    }
    timer::sleep_until(start + load).await;
    state.set_ready();
    let at = state.recorder.mark_ready();
    lifecycle::log(READY_LINE);
    if let Some(path) = &state.config.ready_file
        && let Err(err) = write_ready_file(path, at)
    {
        let err = with_path(err, "write the ready file", Some(path));
        lifecycle::log(&format!("gpuflow-sim: warning: {err}"));
    }
}

/// Written beside and renamed into place, so a reader polling for it never sees half of it.
fn write_ready_file(path: &Path, at: Stamp) -> io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let body = serde_json::to_vec(&at).map_err(io::Error::other)?;
    std::fs::write(&partial, body)?;
    std::fs::rename(&partial, path)
}

async fn accept(listener: TcpListener, state: Arc<State>) -> Exit {
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let stop = state.stopped();
    tokio::pin!(stop);
    let exit = loop {
        tokio::select! {
            exit = &mut stop => break exit,
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                // Small SSE writes must leave at once, not wait for the previous ACK (Nagle).
                let _ = stream.set_nodelay(true);
                // Under --close-after-stream, a stream answered on this connection ends it.
                let end = state.config.close_after_stream.then(StreamEnd::default);
                let for_requests = end.clone();
                let state = Arc::clone(&state);
                let service = service_fn(move |mut req| {
                    if let Some(end) = &for_requests {
                        req.extensions_mut().insert(end.clone());
                    }
                    routes::handle(Arc::clone(&state), req)
                });
                let io = CloseAfterStream::new(TokioIo::new(stream), end.clone());
                let connection = http1::Builder::new().serve_connection(io, service);
                let connection = graceful.watch(connection);
                connections.spawn(async move {
                    let closing = async {
                        match &end {
                            Some(end) => end.closing().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = connection => {}
                        // Dropping the connection closes the socket, with no goodbye: a
                        // request already sent on it gets a reset or EOF, never an answer.
                        () = closing => {}
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    };
    drop(listener);
    if exit == Exit::Shutdown {
        let grace = state.config.shutdown_grace;
        let _ = tokio::time::timeout(grace, graceful.shutdown()).await;
    }
    // A crash cuts every response at once, as a dying server does; so does an expired grace.
    connections.shutdown().await;
    exit
}

/// The `gpuflow-sim` binary: serve until a signal or a crash mode; returns the exit status.
pub fn run(config: SimConfig) -> u8 {
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if config.worker_threads > 0 {
        runtime.worker_threads(config.worker_threads);
    }
    let runtime = match runtime.build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("gpuflow-sim: error: cannot start the async runtime: {err}");
            return 1;
        }
    };
    let exit = runtime.block_on(async move {
        let mut server = match serve(config).await {
            Ok(server) => server,
            Err(err) => {
                let hint = match err.kind() {
                    io::ErrorKind::AddrInUse => {
                        "(is another server on that port? `--port 0` picks a free one)\n"
                    }
                    _ => "",
                };
                return Exit::Crashed {
                    code: 1,
                    message: format!("gpuflow-sim: error: {err}\n{hint}"),
                };
            }
        };
        tokio::select! {
            exit = server.stopped() => exit,
            signal = shutdown_signal() => {
                lifecycle::log(&format!("gpuflow-sim: {signal} received, shutting down"));
                server.shutdown().await
            }
        }
    });
    match exit {
        Exit::Shutdown => 0,
        Exit::Crashed { code, message } => {
            let mut err = io::stderr().lock();
            let _ = err.write_all(message.as_bytes()).and_then(|()| err.flush());
            code
        }
    }
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without handlers the default action (exit) still applies; never resolve here.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn with_path(err: io::Error, action: &str, path: Option<&Path>) -> io::Error {
    let path = path.map(|p| p.display().to_string()).unwrap_or_default();
    io::Error::new(err.kind(), format!("cannot {action} `{path}`: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_file_appears_whole() {
        let dir = std::env::temp_dir().join(format!("gpuflow-sim-ready-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ready.json");
        let at = Stamp {
            mono_ns: 5,
            unix_ns: 6,
        };
        write_ready_file(&path, at).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            r#"{"mono_ns":5,"unix_ns":6}"#
        );
        assert!(!dir.join("ready.json.partial").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn settings_built_in_code_are_checked_before_binding() {
        let err = serve(SimConfig {
            tokens_per_second: 0.0,
            ..SimConfig::local()
        })
        .await
        .err()
        .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("`tokens_per_second`"), "{err}");
    }
}
