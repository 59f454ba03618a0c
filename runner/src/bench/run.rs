//! Running a benchmark: for each load level (a concurrency sweep has several), `runs`
//! repetitions, each preceded by its warm-up requests, which are sent and then forgotten.
//!
//! Closed loop: N workers each send a request as soon as their previous one ended. Open loop:
//! a dispatcher sends on the seeded schedule, whatever the server does, optionally capped in
//! flight; each send's lateness against the schedule is its dispatch lag. Workers send their
//! records over a channel; only this driver calls the progress callback, so requests never wait
//! on it. Knows nothing about the engine, files or terminals.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{Semaphore, mpsc};

use super::client::Client;
use super::config::{BenchConfig, Mode, Stop};
use super::cpu::process_cpu_time;
use super::metrics::{Honesty, RunMetrics};
use super::prompts::{PromptError, Prompts};
use super::reachability::{Gone, Reachability};
use super::request::{RequestRecord, RequestSpec, Timeouts, measure};
use super::result::{BenchResult, Level, LevelResult, RunResult, WarmUp};
use super::schedule::Schedule;
use super::server_metrics::Scraper;
use super::stats::Summary;

/// Where a benchmark is, for a live progress line.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// The load level (`concurrency 8`, `10 req/s`, `single-stream`) and its place in a sweep.
    pub level: String,
    pub level_index: usize,
    pub levels: usize,
    /// The run, from 1.
    pub run: u32,
    pub runs: u32,
    /// Warm-up requests are being sent (nothing is measured yet).
    pub warmup: bool,
    /// Requests finished in this run (or warm-up).
    pub done: u64,
    /// Requests this run will send, when known in advance.
    pub total: Option<u64>,
    pub errors: u64,
    pub elapsed: Duration,
    /// Output tokens per second in this run so far (from `usage`; 0 when unknown).
    pub output_tok_s: f64,
}

/// Why a benchmark gave no usable result.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Prompts(#[from] PromptError),
    #[error("cannot ask `{url}` for its model: {message}")]
    Model { url: String, message: String },
    /// Nothing reached the server for a while during a run: it stopped or crashed. The
    /// result holds what was measured until then.
    #[error("{message}")]
    ServerGone {
        message: String,
        result: Box<BenchResult>,
    },
    /// Every request failed, or more than `max-error-rate` did. The result is complete: it
    /// says which errors happened and is still worth writing.
    #[error("{message}")]
    TooManyErrors {
        message: String,
        result: Box<BenchResult>,
    },
}

impl BenchError {
    /// How to fix it, when something can be said.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Prompts(e) => e.hint.clone(),
            Self::Model { .. } => {
                Some("is the server up? give `model` to skip the question (`/v1/models`)".into())
            }
            Self::TooManyErrors { .. } => Some(
                "see `errors` in the result; raise `max-error-rate` to accept some failures".into(),
            ),
            Self::ServerGone { .. } => {
                Some("the server stopped or crashed during the benchmark: look at its log".into())
            }
        }
    }
}

/// What every request of the benchmark shares; cheap to clone into tasks.
#[derive(Clone)]
struct Shared {
    client: Arc<Client>,
    prompts: Arc<Prompts>,
    model: Arc<str>,
    config: Arc<BenchConfig>,
    /// Numbers prompts across warm-up and runs, so no two requests share a synthetic prompt.
    prompt_counter: Arc<AtomicU64>,
    /// Whether the server can still be reached; ends the benchmark when it cannot.
    reach: Arc<Reachability>,
    in_flight: Arc<AtomicU64>,
    max_in_flight: Arc<AtomicU64>,
    /// The server's `/metrics`, read around each measured run.
    server: Option<Arc<Scraper>>,
}

impl Shared {
    async fn send(&self, id: String) -> RequestRecord {
        let prompt = self
            .prompts
            .get(self.prompt_counter.fetch_add(1, Ordering::Relaxed));
        let max_tokens = prompt.output_tokens.unwrap_or(self.config.output_tokens);
        let body = RequestSpec {
            endpoint: self.config.endpoint,
            model: &self.model,
            prompt: &prompt.text,
            max_tokens,
            ignore_eos: self.config.ignore_eos,
        }
        .body();
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Ordering::Relaxed);
        let timeouts = Timeouts {
            total: self.config.request_timeout,
            idle: self.config.idle_timeout,
        };
        let mut record = measure(
            &self.client,
            self.config.endpoint.path(),
            body,
            id,
            timeouts,
        )
        .await;
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        match &record.error {
            Some(error) if !record.reached_server => {
                // Back off before this worker's next request: a dead server refuses at once.
                let wait = self.reach.unreachable(&error.message, Instant::now());
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = self.reach.went_away() => {}
                }
            }
            _ => self.reach.reached(),
        }
        record.prompt_words = prompt.words;
        record.max_tokens = max_tokens;
        record
    }
}

/// Runs the benchmark `config` describes. `progress` is called from this task only, a few
/// times a second and at the end of each run. It is `Sync` so that this future is `Send` and
/// the engine can spawn it; any closure over shareable state (`&|p| …`) fits.
pub async fn run(
    config: &BenchConfig,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<BenchResult, BenchError> {
    // Without a seed, synthetic prompts are salted afresh each invocation: the same prompts
    // again would be served from the server's prefix cache and make later runs look faster.
    let prompt_seed = config.seed.unwrap_or_else(fresh_salt);
    let prompts = Prompts::load(&config.prompts, prompt_seed)?;
    let client = Arc::new(Client::new(&config.target));
    let model = match &config.model {
        Some(model) => model.clone(),
        None => discover_model(&client, &config.target, model_timeout(config)).await?,
    };
    let shared = Shared {
        client,
        prompts: Arc::new(prompts),
        model: model.as_str().into(),
        config: Arc::new(config.clone()),
        prompt_counter: Arc::new(AtomicU64::new(0)),
        reach: Arc::new(Reachability::new(widest(&config.mode))),
        in_flight: Arc::new(AtomicU64::new(0)),
        max_in_flight: Arc::new(AtomicU64::new(0)),
        server: config
            .server_metrics
            .clone()
            .map(|c| Arc::new(Scraper::new(c))),
    };
    let levels = Level::all(&config.mode);
    let mut results = Vec::new();
    for (level_index, level) in levels.iter().enumerate() {
        let mut runs = Vec::new();
        for run in 0..config.runs {
            let tag = Tag {
                level: level.clone(),
                level_index,
                levels: levels.len(),
                run: run + 1,
                runs: config.runs,
            };
            let warmup = warm_up(&shared, &tag, progress).await;
            // After the warm-up, so its requests are not counted.
            let watch = match &shared.server {
                Some(scraper) => Some(scraper.watch().await),
                None => None,
            };
            let mut measured = measure_run(&shared, &tag, progress).await;
            if let Some(watch) = watch {
                measured.server = watch.finish().await;
            }
            measured.warmup = warmup;
            runs.push(measured);
            if shared.reach.is_gone() {
                break;
            }
        }
        results.push(LevelResult::new(level.clone(), runs, &config.slo));
        if shared.reach.is_gone() {
            break;
        }
    }
    let mut result = BenchResult::new(config, model, prompt_seed, results);
    if let Some(note) = shared.server.as_ref().and_then(|s| s.note()) {
        result.warnings.push(note);
    }
    if let Some(gone) = shared.reach.gone() {
        return Err(BenchError::ServerGone {
            message: gone_message(&gone, &result),
            result: Box::new(result),
        });
    }
    let pooled: (u64, u64) = result.levels.iter().fold((0, 0), |(c, f), l| {
        (c + l.pooled.completed, f + l.pooled.failed)
    });
    let (completed, failed) = pooled;
    let total = completed + failed;
    if completed == 0 {
        return Err(BenchError::TooManyErrors {
            message: format!("all {total} requests failed ({})", result.error_summary()),
            result: Box::new(result),
        });
    }
    let rate = failed as f64 / total as f64;
    if rate > config.max_error_rate {
        return Err(BenchError::TooManyErrors {
            message: format!(
                "{failed} of {total} requests failed ({:.1}%, more than the {}% allowed by `max-error-rate`): {}",
                rate * 100.0,
                config.max_error_rate * 100.0,
                result.error_summary()
            ),
            result: Box::new(result),
        });
    }
    Ok(result)
}

/// Which level and run a phase belongs to.
struct Tag {
    level: Level,
    level_index: usize,
    levels: usize,
    run: u32,
    runs: u32,
}

impl Tag {
    fn progress(&self, warmup: bool, done: u64, total: Option<u64>) -> Progress {
        Progress {
            level: self.level.to_string(),
            level_index: self.level_index,
            levels: self.levels,
            run: self.run,
            runs: self.runs,
            warmup,
            done,
            total,
            errors: 0,
            elapsed: Duration::ZERO,
            output_tok_s: 0.0,
        }
    }

    /// Request ids are this prefix and the request's number; the simulator's record keeps
    /// them (`client_request_id`), so a request can be found on both sides.
    fn id_prefix(&self, what: &str) -> String {
        format!("gpuflow-{}-{}-{what}", self.level_index, self.run)
    }
}

/// How long asking `/v1/models` may take: the request timeout, at most 30 s. A server that
/// accepts the connection and never answers would otherwise hold the step until the job's
/// timeout, and a listing of models is quick when it comes at all.
fn model_timeout(config: &BenchConfig) -> Duration {
    config.request_timeout.min(Duration::from_secs(30))
}

async fn discover_model(client: &Client, url: &str, limit: Duration) -> Result<String, BenchError> {
    let fail = |message: String| BenchError::Model {
        url: format!("{url}/v1/models"),
        message,
    };
    let (status, body) = tokio::time::timeout(limit, client.get("/v1/models"))
        .await
        .map_err(|_| {
            fail(format!(
                "no answer within {}",
                humantime::format_duration(limit)
            ))
        })?
        .map_err(|e| fail(e.to_string()))?;
    if status != 200 {
        return Err(fail(format!("it answered HTTP {status}")));
    }
    let value: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| fail(format!("the answer is not JSON: {e}")))?;
    value
        .pointer("/data/0/id")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| fail("it lists no model".into()))
}

/// A random salt for the prompts, from the OS-seeded hasher keys std already draws.
fn fresh_salt() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// The widest a level sends at once: the closed loop's workers (the open loop's cap, or 1).
fn widest(mode: &Mode) -> u64 {
    Level::all(mode)
        .iter()
        .map(|l| u64::from(l.concurrency.unwrap_or(1)))
        .max()
        .unwrap_or(1)
}

/// `the server went away at 6.02 s into run 1 at concurrency 4: cannot connect to …`.
fn gone_message(gone: &Gone, result: &BenchResult) -> String {
    let (level, run, at) = result
        .levels
        .iter()
        .flat_map(|l| l.runs.iter().map(move |r| (l, r)))
        .next_back()
        .map_or((String::new(), 0, 0.0), |(l, r)| {
            let at = r.started_at.map_or(0.0, |t| {
                gone.since.saturating_duration_since(t).as_secs_f64()
            });
            (l.level.to_string(), r.run, at)
        });
    let failed: u64 = result.levels.iter().map(|l| l.pooled.failed).sum();
    let completed: u64 = result.levels.iter().map(|l| l.pooled.completed).sum();
    format!(
        "the server went away at {at:.2} s into run {run} at {level}: {} ({} requests could not reach it since; {completed} completed and {failed} failed in all)",
        gone.message, gone.failures
    )
}

/// Sends the warm-up requests (at the level's concurrency, at most one each) and drops them,
/// keeping only their failures: a warm-up that fails says something about the server.
async fn warm_up(shared: &Shared, tag: &Tag, progress: &(dyn Fn(Progress) + Sync)) -> WarmUp {
    let count = u64::from(shared.config.warmup);
    if count == 0 {
        return WarmUp::default();
    }
    progress(tag.progress(true, 0, Some(count)));
    let width = u64::from(tag.level.concurrency.unwrap_or(1)).clamp(1, count);
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..width {
        let (shared, next) = (shared.clone(), next.clone());
        let prefix = tag.id_prefix("w");
        tasks.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count || shared.reach.is_gone() {
                    break;
                }
                if let Some(error) = shared.send(format!("{prefix}{i}")).await.error {
                    failures.push(error);
                }
            }
            failures
        }));
    }
    let mut warmup = WarmUp {
        sent: count,
        failures: Vec::new(),
    };
    for task in tasks {
        warmup.failures.extend(task.await.unwrap_or_default());
    }
    progress(tag.progress(true, count, Some(count)));
    warmup
}

/// One measured run at one level: requests are sent as the mode says, their records
/// collected as they end (with a progress line), then the run's metrics are computed.
async fn measure_run(
    shared: &Shared,
    tag: &Tag,
    progress: &(dyn Fn(Progress) + Sync),
) -> RunResult {
    let config = &shared.config;
    let (tx, rx) = mpsc::unbounded_channel::<RequestRecord>();
    shared.max_in_flight.store(0, Ordering::Relaxed);
    let opened_before = shared.client.connections_opened();
    let cpu_before = process_cpu_time();
    let start = Instant::now();
    let unix_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    match &config.mode {
        Mode::RequestRate {
            rate,
            arrival,
            max_concurrency,
        } => {
            let schedule = Schedule::new(*arrival, *rate, config.seed.unwrap_or(0));
            send_open_loop(shared, tag, start, schedule, *max_concurrency, tx);
        }
        Mode::SingleStream | Mode::Concurrency(_) => send_closed_loop(shared, tag, start, tx),
    }
    let mut records = collect(rx, tag, start, expected_total(config), progress).await;

    let end = records
        .iter()
        .filter_map(|r| r.ended_at)
        .max()
        .unwrap_or_else(Instant::now);
    let duration = end.saturating_duration_since(start).as_secs_f64();
    let cpu_ms = process_cpu_time().saturating_sub(cpu_before).as_secs_f64() * 1000.0;
    records.sort_by_key(|r| r.index);
    stamp_start_times(&mut records, start, unix_start);
    let honesty = honesty(shared, tag, &records, cpu_ms, duration, opened_before);
    let metrics = RunMetrics::compute(&records, duration, &config.slo, honesty);
    RunResult {
        run: tag.run,
        metrics,
        records,
        warmup: WarmUp::default(),
        started_at: Some(start),
        server: Vec::new(),
    }
}

/// How many requests the run will send, when that is known before it starts.
fn expected_total(config: &BenchConfig) -> Option<u64> {
    match (&config.mode, config.stop) {
        (_, Stop::Requests(n)) => Some(n),
        (Mode::RequestRate { rate, arrival, .. }, Stop::Duration(d)) => Some(
            Schedule::new(*arrival, *rate, config.seed.unwrap_or(0))
                .until(d)
                .len() as u64,
        ),
        (_, Stop::Duration(_)) => None,
    }
}

/// The open loop: each request is sent at its time on the schedule, whatever the server
/// does, with at most `max_concurrency` in flight when that is given.
fn send_open_loop(
    shared: &Shared,
    tag: &Tag,
    start: Instant,
    schedule: Schedule,
    max_concurrency: Option<u32>,
    tx: mpsc::UnboundedSender<RequestRecord>,
) {
    let offsets = match shared.config.stop {
        Stop::Requests(n) => schedule.take_n(usize::try_from(n).unwrap_or(usize::MAX)),
        Stop::Duration(d) => schedule.until(d),
    };
    let cap = max_concurrency.map(|n| Arc::new(Semaphore::new(n as usize)));
    let shared = shared.clone();
    let prefix = tag.id_prefix("");
    tokio::spawn(async move {
        for (i, offset) in offsets.into_iter().enumerate() {
            let due = start + offset;
            tokio::select! {
                () = tokio::time::sleep_until(due.into()) => {}
                () = shared.reach.went_away() => break,
            }
            let permit = match &cap {
                Some(cap) => cap.clone().acquire_owned().await.ok(),
                None => None,
            };
            let (shared, tx) = (shared.clone(), tx.clone());
            let id = format!("{prefix}{i}");
            tokio::spawn(async move {
                let lag = Instant::now().saturating_duration_since(due);
                let mut record = shared.send(id).await;
                drop(permit);
                record.index = i as u64;
                record.dispatch_lag_ms = Some(lag.as_secs_f64() * 1000.0);
                tx.send(record).ok();
            });
        }
    });
}

/// The closed loop: the level's workers each send their next request as soon as their last
/// one ends, until the run's requests are sent or its time is up.
fn send_closed_loop(
    shared: &Shared,
    tag: &Tag,
    start: Instant,
    tx: mpsc::UnboundedSender<RequestRecord>,
) {
    let workers = tag.level.concurrency.unwrap_or(1);
    let next = Arc::new(AtomicU64::new(0));
    for _ in 0..workers {
        let (shared, tx, next) = (shared.clone(), tx.clone(), next.clone());
        let stop = shared.config.stop;
        let prefix = tag.id_prefix("");
        tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let more = !shared.reach.is_gone()
                    && match stop {
                        Stop::Requests(n) => i < n,
                        Stop::Duration(d) => start.elapsed() < d,
                    };
                if !more {
                    break;
                }
                let mut record = shared.send(format!("{prefix}{i}")).await;
                record.index = i;
                if tx.send(record).is_err() {
                    break;
                }
            }
        });
    }
}

/// Every record the senders give, until they are all done, saying the progress every
/// 200 ms and once at the end.
async fn collect(
    mut rx: mpsc::UnboundedReceiver<RequestRecord>,
    tag: &Tag,
    start: Instant,
    total: Option<u64>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Vec<RequestRecord> {
    let mut records: Vec<RequestRecord> = Vec::new();
    let (mut errors, mut tokens) = (0u64, 0u64);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let report = |records: &[RequestRecord], errors: u64, tokens: u64| {
        let elapsed = start.elapsed();
        progress(Progress {
            errors,
            elapsed,
            output_tok_s: tokens as f64 / elapsed.as_secs_f64().max(1e-9),
            ..tag.progress(false, records.len() as u64, total)
        });
    };
    loop {
        tokio::select! {
            record = rx.recv() => match record {
                Some(record) => {
                    errors += u64::from(!record.ok());
                    tokens += record.completion_tokens.unwrap_or(0);
                    records.push(record);
                }
                None => break,
            },
            _ = tick.tick() => report(&records, errors, tokens),
        }
    }
    report(&records, errors, tokens);
    records
}

/// Each record's send time from the run's start and on the wall clock.
fn stamp_start_times(records: &mut [RequestRecord], start: Instant, unix_start: Duration) {
    for r in records {
        if let Some(sent) = r.sent_at {
            let offset = sent.saturating_duration_since(start);
            r.start_s = offset.as_secs_f64();
            r.start_unix_ns = u64::try_from((unix_start + offset).as_nanos()).unwrap_or(u64::MAX);
        }
    }
}

/// What the client cost and did during the run.
fn honesty(
    shared: &Shared,
    tag: &Tag,
    records: &[RequestRecord],
    cpu_ms: f64,
    duration: f64,
    connections_before: u64,
) -> Honesty {
    let lags: Vec<f64> = records.iter().filter_map(|r| r.dispatch_lag_ms).collect();
    Honesty {
        client_cpu_ms: cpu_ms,
        client_cpu_ms_per_request: 0.0,
        client_cpu_cores: if duration > 0.0 {
            cpu_ms / 1000.0 / duration
        } else {
            0.0
        },
        asked_concurrency: tag.level.concurrency,
        asked_request_rate: tag.level.request_rate,
        max_concurrent_requests: shared.max_in_flight.load(Ordering::Relaxed),
        dispatch_lag_ms: (!lags.is_empty()).then(|| Summary::of(&lags)),
        connections_opened: shared.client.connections_opened() - connections_before,
        reconnects: records.iter().map(|r| u64::from(r.reconnects)).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    #[tokio::test]
    async fn asking_for_the_model_gives_up_after_its_timeout() {
        // A server that accepts the connection and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let held = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(socket);
        });
        let client = Client::new(&url);
        let started = std::time::Instant::now();
        let err = discover_model(&client, &url, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            err.to_string(),
            format!("cannot ask `{url}/v1/models` for its model: no answer within 300ms")
        );
        assert!(err.hint().unwrap().contains("give `model`"));
        held.abort();
        let inputs = crate::bench::BenchInputs {
            target: Some(url),
            request_timeout: Duration::from_secs(600),
            ..Default::default()
        };
        let config = BenchConfig::from_inputs(&inputs).unwrap();
        assert_eq!(model_timeout(&config), Duration::from_secs(30));
    }

    #[test]
    fn the_benchmark_future_can_be_spawned() {
        let inputs = crate::bench::BenchInputs {
            target: Some("http://127.0.0.1:1".to_owned()),
            ..Default::default()
        };
        let config = BenchConfig::from_inputs(&inputs).unwrap();
        let progress = |_: Progress| {};
        assert_send(&run(&config, &progress));
    }
}
