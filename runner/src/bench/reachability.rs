//! Noticing that the server went away, so a dead server is not a tight loop.
//!
//! When the server dies, every request fails at once (connection refused), and a closed loop
//! would send the next one immediately: hundreds of thousands of failed requests, a core of
//! client CPU, a result of megabytes, and a `--duration` run that ends only when its time is
//! up. Instead, a request that could not reach the server backs off before the next (10 ms,
//! doubling to 200 ms), and when nothing has reached the server for [`GONE_AFTER`] while every
//! worker's latest attempt failed, the run ends at once: "the server went away at T".
//!
//! "Could not reach" is a refused or failed connection, or a new connection closed before any
//! response (what a port proxy such as Docker's does once the server behind it is gone). A
//! timeout is not: a server that is slow may only be busy. Knows nothing about HTTP.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// How long nothing may reach the server before the run is ended.
pub const GONE_AFTER: Duration = Duration::from_millis(300);
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(200);

/// When and why the server was found gone.
#[derive(Clone, Debug, PartialEq)]
pub struct Gone {
    /// When the first of the unbroken run of failures happened.
    pub since: Instant,
    /// The latest failure's message (`cannot connect to `127.0.0.1:8080`: Connection refused`).
    pub message: String,
    /// Requests that failed to reach it since.
    pub failures: u64,
}

/// Shared by every request of a benchmark.
#[derive(Debug)]
pub struct Reachability {
    /// Requests sent at once at most (the workers of a closed loop): that many consecutive
    /// failures means each of them failed.
    width: u64,
    state: Mutex<State>,
    gone: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    /// Consecutive requests that could not reach the server, and since when.
    failures: u64,
    since: Option<Instant>,
    message: String,
    gone: Option<Gone>,
}

impl Reachability {
    pub fn new(width: u64) -> Self {
        Self {
            width: width.max(1),
            state: Mutex::new(State::default()),
            gone: CancellationToken::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A request reached the server (whatever it answered).
    pub fn reached(&self) {
        let mut state = self.state();
        if state.gone.is_none() {
            state.failures = 0;
            state.since = None;
        }
    }

    /// A request could not reach the server. Returns how long its worker should wait before
    /// the next request; ends the benchmark (see [`Self::gone`]) when the server is gone.
    pub fn unreachable(&self, message: &str, now: Instant) -> Duration {
        let mut state = self.state();
        state.failures += 1;
        let since = *state.since.get_or_insert(now);
        state.message = message.to_owned();
        if state.gone.is_none()
            && state.failures >= self.width
            && now.saturating_duration_since(since) >= GONE_AFTER
        {
            state.gone = Some(Gone {
                since,
                message: state.message.clone(),
                failures: state.failures,
            });
            self.gone.cancel();
            tracing::info!(failures = state.failures, "benchmark: the server is gone");
        }
        let doublings = u32::try_from(state.failures.saturating_sub(1) / self.width)
            .unwrap_or(u32::MAX)
            .min(5);
        let backoff = (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF);
        // The failure count and wait only: the message names the target, whose URL may carry
        // a key in its query.
        tracing::debug!(
            failures = state.failures,
            backoff_ms = backoff.as_millis() as u64,
            "benchmark: the server could not be reached; backing off"
        );
        backoff
    }

    /// Set once the server is judged gone; the benchmark then stops sending.
    pub fn gone(&self) -> Option<Gone> {
        self.state().gone.clone()
    }

    /// Resolves when the server is judged gone.
    pub async fn went_away(&self) {
        self.gone.cancelled().await;
    }

    /// Whether the server is judged gone.
    pub fn is_gone(&self) -> bool {
        self.gone.is_cancelled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_only_when_every_worker_failed_for_the_whole_window() {
        let r = Reachability::new(2);
        let t0 = Instant::now();
        r.unreachable("refused", t0);
        r.unreachable("refused", t0 + GONE_AFTER / 2);
        assert!(!r.is_gone(), "not yet for the whole window");
        r.reached();
        r.unreachable("refused", t0 + GONE_AFTER);
        assert!(!r.is_gone(), "a success restarts the window");
        r.unreachable("refused", t0 + GONE_AFTER * 2);
        let gone = r.gone().expect("two failures spanning the window");
        assert_eq!(gone.since, t0 + GONE_AFTER);
        assert_eq!(gone.failures, 2);
        assert_eq!(gone.message, "refused");
    }

    #[test]
    fn one_failing_worker_of_many_is_not_a_dead_server() {
        let r = Reachability::new(4);
        let t0 = Instant::now();
        r.unreachable("refused", t0);
        r.unreachable("refused", t0 + GONE_AFTER * 3);
        assert!(!r.is_gone());
    }

    #[test]
    fn backoff_doubles_per_round_of_workers_up_to_a_ceiling() {
        let r = Reachability::new(2);
        let t0 = Instant::now();
        let waits: Vec<u128> = (0..14)
            .map(|_| r.unreachable("refused", t0).as_millis())
            .collect();
        assert_eq!(
            waits,
            [10, 10, 20, 20, 40, 40, 80, 80, 160, 160, 200, 200, 200, 200]
        );
    }
}
