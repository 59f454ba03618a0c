//! A sleep that wakes within tens of microseconds of its deadline.
//!
//! tokio's timer rounds every deadline up to the next whole millisecond, so a chunk due every
//! 11.1 ms would leave at 12 ms steps and the simulator's gaps would differ from what it was
//! told by up to a millisecond: too coarse for a reference that benchmark accuracy is checked
//! against. One background thread keeps the pending deadlines in a heap and sleeps on a
//! condition variable until the earliest (a futex with a nanosecond timeout, so the kernel's
//! high-resolution timers), then wakes the tasks whose time has come. This file knows nothing
//! of HTTP or of what is waiting.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// A future that completes at `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        entry: None,
    }
}

/// See [`sleep_until`].
#[derive(Debug)]
pub struct Sleep {
    deadline: Instant,
    entry: Option<Arc<Entry>>,
}

#[derive(Debug, Default)]
struct Entry {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

struct Pending {
    deadline: Instant,
    entry: Arc<Entry>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    /// Reversed, so the max-heap's top is the earliest deadline.
    fn cmp(&self, other: &Self) -> Ordering {
        other.deadline.cmp(&self.deadline)
    }
}

#[derive(Default)]
struct Wheel {
    queue: Mutex<BinaryHeap<Pending>>,
    changed: Condvar,
}

fn wheel() -> &'static Wheel {
    static WHEEL: OnceLock<&'static Wheel> = OnceLock::new();
    WHEEL.get_or_init(|| {
        let wheel: &'static Wheel = Box::leak(Box::default());
        std::thread::Builder::new()
            .name("gpuflow-sim-timer".to_owned())
            .spawn(move || wheel.run())
            .expect("the timer thread starts");
        wheel
    })
}

impl Wheel {
    fn run(&self) {
        let mut due = Vec::new();
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            while queue.peek().is_some_and(|top| top.deadline <= now) {
                if let Some(top) = queue.pop() {
                    due.push(top.entry);
                }
            }
            if !due.is_empty() {
                // Wake outside the lock: a woken task may register its next deadline at once.
                drop(queue);
                for entry in due.drain(..) {
                    entry.fired.store(true, AtomicOrdering::Release);
                    let waker = entry.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                }
                queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                continue;
            }
            queue = match queue.peek().map(|top| top.deadline) {
                None => self.changed.wait(queue).unwrap_or_else(|e| e.into_inner()),
                Some(deadline) => {
                    let wait = deadline.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(queue, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    fn add(&self, deadline: Instant, entry: Arc<Entry>) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let earliest = queue.peek().is_none_or(|top| deadline < top.deadline);
        queue.push(Pending { deadline, entry });
        drop(queue);
        if earliest {
            self.changed.notify_one();
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        match &self.entry {
            Some(entry) => {
                let mut waker = entry.waker.lock().unwrap_or_else(|e| e.into_inner());
                // Checked under the waker's lock: the timer sets `fired` before taking the
                // waker, so either it sees the waker stored here or this sees `fired`.
                if entry.fired.load(AtomicOrdering::Acquire) {
                    return Poll::Ready(());
                }
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            None => {
                let entry = Arc::new(Entry {
                    fired: AtomicBool::new(false),
                    waker: Mutex::new(Some(cx.waker().clone())),
                });
                wheel().add(self.deadline, Arc::clone(&entry));
                self.entry = Some(entry);
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wakes_in_deadline_order_and_not_early() {
        let start = Instant::now();
        let offsets = [30u64, 5, 20, 10, 1, 0];
        let mut tasks = Vec::new();
        for ms in offsets {
            let deadline = start + Duration::from_millis(ms);
            tasks.push(tokio::spawn(async move {
                sleep_until(deadline).await;
                (deadline, Instant::now())
            }));
        }
        for task in tasks {
            let (deadline, woke) = task.await.unwrap();
            assert!(woke >= deadline);
            // Generous: the machine running tests may be busy; precision is benchmarked apart.
            assert!(
                woke - deadline < Duration::from_millis(50),
                "{:?}",
                woke - deadline
            );
        }
    }

    #[tokio::test]
    async fn a_past_deadline_is_ready_at_once() {
        let past = Instant::now();
        sleep_until(past).await;
    }
}
