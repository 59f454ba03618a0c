//! A run's events as they happen, for any number of followers: one reader per followed run
//! (a thread polling its `events.jsonl`) keeps the latest events in a ring of fixed size and
//! wakes the followers; each follower only keeps where it is. A follower that falls behind the
//! ring is told so (its page reloads) rather than holding memory for it; a closed tab drops its
//! stream, and the reader ends when its last follower has gone.
//!
//! Each event goes out as one SSE message: `{"n": event number, "job": job run number or null,
//! "event": the event}`, numbered as the page's own reading numbers them (`run_view.rs`).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::response::sse::Event as SseEvent;
use futures_util::Stream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::run_view::RunView;
use crate::events::Masker;
use crate::run_logs::files::run_in_progress;
use crate::run_logs::replay::Replay;

/// The events a reader keeps for followers that are behind.
pub const RING: usize = 4096;
/// How often a reader looks for new events.
const POLL: Duration = Duration::from_millis(200);
/// The most messages a follower takes from the ring at once.
const BATCH: usize = 256;

/// The readers of the runs being followed.
pub struct Live {
    readers: Mutex<HashMap<PathBuf, Weak<Reader>>>,
    masker: Arc<Masker>,
    stopping: CancellationToken,
}

struct Reader {
    ring: Mutex<Ring>,
    /// The number of events read so far; changes wake the followers.
    read: watch::Sender<u64>,
}

#[derive(Default)]
struct Ring {
    /// The number of the first event in `items`.
    start: u64,
    items: VecDeque<Arc<str>>,
    /// The run is over and every event was read.
    done: bool,
}

impl Live {
    pub fn new(masker: Arc<Masker>, stopping: CancellationToken) -> Self {
        Self {
            readers: Mutex::new(HashMap::new()),
            masker,
            stopping,
        }
    }

    /// The stream of run `dir`'s events from number `after` on.
    pub fn follow(
        &self,
        dir: &Path,
        after: u64,
    ) -> impl Stream<Item = Result<SseEvent, std::convert::Infallible>> + use<> {
        let reader = self.reader(dir);
        let rx = reader.read.subscribe();
        let stopping = self.stopping.clone();
        let state = Follower {
            reader,
            next: after,
            rx,
            ended: false,
        };
        futures_util::stream::unfold(state, move |mut f| {
            let stopping = stopping.clone();
            async move {
                let batch = tokio::select! {
                    batch = f.next_batch() => batch?,
                    () = stopping.cancelled() => return None,
                };
                Some((Ok(batch), f))
            }
        })
    }

    /// The reader of `dir`, started when nobody follows it yet.
    fn reader(&self, dir: &Path) -> Arc<Reader> {
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        readers.retain(|_, r| r.strong_count() > 0);
        if let Some(r) = readers.get(dir).and_then(Weak::upgrade) {
            return r;
        }
        let reader = Arc::new(Reader {
            ring: Mutex::new(Ring::default()),
            read: watch::channel(0).0,
        });
        readers.insert(dir.to_path_buf(), Arc::downgrade(&reader));
        let weak = Arc::downgrade(&reader);
        let dir = dir.to_path_buf();
        let masker = self.masker.clone();
        std::thread::Builder::new()
            .name("serve-follow".into())
            .spawn(move || read_run(&dir, &weak, &masker))
            .ok();
        reader
    }
}

/// Reads `dir`'s events into the reader's ring until the run is over or nobody follows.
fn read_run(dir: &Path, reader: &Weak<Reader>, masker: &Masker) {
    let mut view = RunView::default();
    let mut replay = None;
    loop {
        let Some(r) = reader.upgrade() else { return };
        // Whether it was over before this read: then everything it wrote is there.
        let over = !run_in_progress(dir);
        if replay.is_none() {
            replay = Replay::open(dir).ok();
        }
        let mut fresh = Vec::new();
        if let Some(replay) = replay.as_mut() {
            let _ = replay.poll(over, &mut |e| {
                let job = view.apply(&e);
                let mut message =
                    serde_json::json!({ "n": view.events - 1, "job": job, "event": e });
                masker.mask_json(&mut message);
                fresh.push(Arc::<str>::from(message.to_string()));
            });
        }
        {
            let mut ring = r.ring.lock().unwrap_or_else(|e| e.into_inner());
            for item in fresh {
                if ring.items.len() == RING {
                    ring.items.pop_front();
                    ring.start += 1;
                }
                ring.items.push_back(item);
            }
            ring.done = over;
        }
        r.read.send_replace(view.events);
        if over {
            return;
        }
        drop(r);
        std::thread::sleep(POLL);
    }
}

struct Follower {
    reader: Arc<Reader>,
    next: u64,
    rx: watch::Receiver<u64>,
    ended: bool,
}

impl Follower {
    /// The next messages as one SSE event each, joined; `None` once the run is over and all
    /// was sent.
    async fn next_batch(&mut self) -> Option<SseEvent> {
        if self.ended {
            return None;
        }
        loop {
            {
                let ring = self.reader.ring.lock().unwrap_or_else(|e| e.into_inner());
                if self.next < ring.start {
                    // Fell behind what is kept: the page reads the run afresh.
                    self.next = ring.start;
                    return Some(SseEvent::default().event("behind").data("reload"));
                }
                let from = usize::try_from(self.next - ring.start).unwrap_or(usize::MAX);
                let items: Vec<&Arc<str>> = ring.items.iter().skip(from).take(BATCH).collect();
                if !items.is_empty() {
                    self.next += items.len() as u64;
                    let data = items
                        .iter()
                        .map(|s| &***s)
                        .collect::<Vec<&str>>()
                        .join("\n");
                    return Some(SseEvent::default().event("events").data(data));
                }
                if ring.done {
                    self.ended = true;
                    return Some(SseEvent::default().event("end").data("over"));
                }
            }
            if self.rx.changed().await.is_err() {
                // The reader is gone without saying the run ended (it cannot be read).
                self.ended = true;
                return Some(SseEvent::default().event("end").data("unreadable"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::StreamExt;

    use super::*;
    use crate::events::{Event, EventKind, EventSink, JobRef};
    use crate::run_logs::LogStore;

    fn job() -> JobRef {
        JobRef {
            job: "a".into(),
            cell: 0,
            display: "a".into(),
        }
    }

    /// A run in progress (its store holds the run's lock) that printed `lines` lines.
    fn running_run(dir: &Path, lines: usize) -> LogStore {
        let store = LogStore::create(dir).unwrap();
        let at = |kind| Event {
            elapsed: Duration::ZERO,
            kind,
        };
        store.emit(at(EventKind::RunStarted {
            run_id: "r".into(),
            workflow: "w".into(),
            log_dir: dir.display().to_string(),
            jobs: 1,
        }));
        store.emit(at(EventKind::JobQueued {
            job: job(),
            matrix: Default::default(),
            needs: Vec::new(),
        }));
        store.emit(at(EventKind::StepStarted {
            job: job(),
            step: "1".into(),
            name: "talk".into(),
        }));
        for i in 0..lines {
            store.emit(at(EventKind::LogLine {
                job: job(),
                step: Some("1".into()),
                container: None,
                stream: crate::events::Stream::Stdout,
                text: format!("line {i}"),
            }));
        }
        store.flush().unwrap();
        store
    }

    fn live() -> Live {
        Live::new(
            Arc::new(Masker::new(Vec::<String>::new())),
            CancellationToken::new(),
        )
    }

    fn followed(live: &Live) -> usize {
        let readers = live.readers.lock().unwrap();
        readers.values().filter(|r| r.strong_count() > 0).count()
    }

    #[tokio::test]
    async fn a_closed_stream_frees_its_reader_and_followers_share_one() {
        let dir = tempfile::tempdir().unwrap();
        let _store = running_run(dir.path(), 3);
        let live = live();
        let mut a = Box::pin(live.follow(dir.path(), 0));
        let mut b = Box::pin(live.follow(dir.path(), 0));
        assert!(a.next().await.is_some() && b.next().await.is_some());
        assert_eq!(followed(&live), 1, "two followers, one reader");
        drop(a);
        assert_eq!(followed(&live), 1);
        drop(b);
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while followed(&live) > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the reader outlived its followers"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_follower_behind_what_is_kept_is_told_to_read_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let _store = running_run(dir.path(), RING + 100);
        let live = live();
        // One follower keeps the reader reading; the second asks from the start, long gone.
        let _first = live.follow(dir.path(), (RING + 100) as u64);
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let ring = live.reader(dir.path()).ring.lock().unwrap().start;
                if ring > 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the reader read past its ring");
        let mut behind = Box::pin(live.follow(dir.path(), 0));
        let said = format!("{:?}", behind.next().await.unwrap().unwrap());
        assert!(said.contains("behind"), "{said}");
        let kept = live.reader(dir.path()).ring.lock().unwrap().items.len();
        assert_eq!(kept, RING, "memory stays bounded");
    }
}
