//! What every connection of one server shares: settings, readiness, generation slots, the
//! record, request counters and the one-way switch that stops the server.
//!
//! Routes and streams read and bump this; only the server loop acts on a stop.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError, watch};

use super::config::SimConfig;
use super::lifecycle;
use super::metrics::ServerMetrics;
use super::record::Recorder;

/// Why a server stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Asked to stop (a signal, or [`super::SimServer::shutdown`]).
    Shutdown,
    /// A crash mode fired: `message` is the traceback for stderr, `code` the exit status.
    Crashed { code: u8, message: String },
}

/// Generation slots were all taken and the server refuses rather than queues.
#[derive(Debug)]
pub struct Busy;

pub struct State {
    pub config: SimConfig,
    pub recorder: Recorder,
    /// What `/metrics` reports.
    pub metrics: ServerMetrics,
    ready: AtomicBool,
    slots: Option<Arc<Semaphore>>,
    next_request: AtomicU64,
    answered: AtomicU64,
    stop: watch::Sender<Option<Exit>>,
    /// Under --prefix-cache: every prefix of every prompt seen (see [`PrefixCache`]).
    prefix_cache: Option<Mutex<PrefixCache>>,
}

/// The prompts seen so far, as the hashes of all their prefixes (one per token position).
///
/// A real server keeps the KV cache of earlier prompts (a radix tree in SGLang and vLLM, a
/// slot's last prompt in llama-server) and evicts under memory pressure. Here a set of prefix
/// hashes stands for it: a new prompt's cached tokens are its leading positions whose prefix
/// hash is in the set. The set forgets everything once it holds [`PrefixCache::CAPACITY`]
/// positions, a crude eviction that bounds the memory.
#[derive(Debug, Default)]
pub struct PrefixCache {
    seen: HashSet<u64>,
}

impl PrefixCache {
    /// About 32 MB of hashes.
    pub const CAPACITY: usize = 1_000_000;

    /// How many leading tokens of a prompt with these prefix hashes are cached; then
    /// remembers the prompt. At most all tokens but the last: a server must still run the last
    /// prompt token to get the logits of the first generated one (vLLM and llama-server both
    /// recompute it when the whole prompt is cached).
    pub fn lookup_and_insert(&mut self, prefix_hashes: &[u64]) -> u32 {
        let hits = prefix_hashes
            .iter()
            .take_while(|hash| self.seen.contains(hash))
            .count();
        let cached = hits.min(prefix_hashes.len().saturating_sub(1));
        if self.seen.len() + prefix_hashes.len() > Self::CAPACITY {
            self.seen.clear();
        }
        self.seen.extend(prefix_hashes.iter().copied());
        u32::try_from(cached).unwrap_or(u32::MAX)
    }
}
impl State {
    pub fn new(config: SimConfig, recorder: Recorder) -> Self {
        let prefix_cache = config
            .prefix_cache
            .then(|| Mutex::new(PrefixCache::default()));
        let slots = config
            .max_concurrency
            .map(|n| Arc::new(Semaphore::new(n as usize)));
        Self {
            config,
            recorder,
            metrics: ServerMetrics::default(),
            ready: AtomicBool::new(false),
            slots,
            next_request: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            stop: watch::Sender::new(None),
            prefix_cache,
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// A number for the next request, from 0: names it and picks its jitter.
    pub fn next_request_number(&self) -> u64 {
        self.next_request.fetch_add(1, Ordering::Relaxed)
    }

    /// Under --prefix-cache: how many leading tokens of this prompt are cached (then the
    /// prompt is remembered). `None` without the cache.
    pub fn cached_prefix(&self, prefix_hashes: &[u64]) -> Option<u32> {
        let cache = self.prefix_cache.as_ref()?;
        // A panic while holding the lock cannot leave the set half-updated in a harmful way.
        let mut cache = cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(cache.lookup_and_insert(prefix_hashes))
    }

    /// Waits for a generation slot (or refuses with [`Busy`] under --reject-when-busy).
    pub async fn slot(&self) -> Result<Option<OwnedSemaphorePermit>, Busy> {
        let Some(slots) = &self.slots else {
            return Ok(None);
        };
        if self.config.reject_when_busy {
            return match Arc::clone(slots).try_acquire_owned() {
                Ok(permit) => Ok(Some(permit)),
                Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => Err(Busy),
            };
        }
        // The semaphore is never closed, so acquiring fails only if it were.
        Arc::clone(slots)
            .acquire_owned()
            .await
            .map(Some)
            .map_err(|_| Busy)
    }

    /// Counts a fully answered request and fires --crash-after-requests when it is reached.
    pub fn answered(self: &Arc<Self>) {
        let answered = self.answered.fetch_add(1, Ordering::AcqRel) + 1;
        if self.config.crash_after_requests == Some(answered) {
            let state = Arc::clone(self);
            tokio::spawn(async move {
                // Let the last response's final bytes reach the client first: the crash
                // comes after N answers, not during the N-th.
                tokio::time::sleep(Duration::from_millis(50)).await;
                state.stop(Exit::Crashed {
                    code: 1,
                    message: lifecycle::crash_traceback(answered),
                });
            });
        }
    }

    /// Stops the server; the first reason given wins.
    pub fn stop(&self, exit: Exit) {
        self.stop.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(exit);
            true
        });
    }

    /// Resolves with the reason once the server is told to stop.
    pub async fn stopped(&self) -> Exit {
        let mut rx = self.stop.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(exit) => exit.clone().unwrap_or(Exit::Shutdown),
            // The sender lives in `self`, so it cannot be gone while this runs.
            Err(_) => Exit::Shutdown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::record::{Clock, RecordedSettings};

    fn state(config: SimConfig) -> Arc<State> {
        let settings = RecordedSettings {
            model: String::new(),
            ttft_ns: 0,
            chunk_gap_ns: 0,
            tokens_per_second: 1.0,
            tokens_per_chunk: 1,
            jitter: 0.0,
            seed: 0,
            max_concurrency: config.max_concurrency,
        };
        let recorder = Recorder::new(Clock::new(), settings, None, 10).unwrap();
        Arc::new(State::new(config, recorder))
    }

    #[tokio::test]
    async fn the_first_stop_reason_wins() {
        let state = state(SimConfig::local());
        state.stop(Exit::Crashed {
            code: 1,
            message: "boom".to_owned(),
        });
        state.stop(Exit::Shutdown);
        assert!(matches!(
            state.stopped().await,
            Exit::Crashed { code: 1, .. }
        ));
    }

    #[tokio::test]
    async fn slots_refuse_when_busy_and_free_with_the_permit() {
        let state = state(SimConfig {
            max_concurrency: Some(1),
            reject_when_busy: true,
            ..SimConfig::local()
        });
        let held = state.slot().await.unwrap();
        assert!(held.is_some());
        assert!(state.slot().await.is_err());
        drop(held);
        assert!(state.slot().await.unwrap().is_some());
    }

    #[test]
    fn the_prefix_cache_finds_shared_leading_tokens_but_never_the_last_one() {
        let mut cache = PrefixCache::default();
        assert_eq!(cache.lookup_and_insert(&[1, 2, 3, 4]), 0);
        assert_eq!(cache.lookup_and_insert(&[1, 2, 9]), 2);
        assert_eq!(
            cache.lookup_and_insert(&[1, 2, 3, 4]),
            3,
            "the last token is recomputed"
        );
        assert_eq!(cache.lookup_and_insert(&[1, 2, 3, 4, 5, 6]), 4);
        assert_eq!(
            cache.lookup_and_insert(&[7, 2, 3]),
            0,
            "a prefix starts at the start"
        );
        assert_eq!(cache.lookup_and_insert(&[]), 0);
    }

    #[test]
    fn the_prefix_cache_forgets_everything_when_full() {
        let mut cache = PrefixCache::default();
        let big: Vec<u64> = (0..PrefixCache::CAPACITY as u64).collect();
        assert_eq!(cache.lookup_and_insert(&big), 0);
        // Found, then the set is full: it forgets all but this prompt.
        assert_eq!(cache.lookup_and_insert(&[0, 1, 2]), 2);
        assert_eq!(cache.lookup_and_insert(&[5, 6]), 0);
        assert_eq!(cache.lookup_and_insert(&[0, 1, 2]), 2);
    }

    #[tokio::test]
    async fn without_a_limit_there_is_no_slot_to_wait_for() {
        let state = state(SimConfig::local());
        assert!(state.slot().await.unwrap().is_none());
    }
}
