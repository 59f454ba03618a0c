//! `timeout-minutes`, of a job or a step: a timer that, when it runs out, says so and cancels
//! the token of what it limits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A running timeout; it stops when [`Timeout::stop`] is called or it is dropped.
pub(super) struct Timeout {
    minutes: f64,
    fired: Arc<AtomicBool>,
    timer: JoinHandle<()>,
}

impl Timeout {
    /// Starts the timer: after `minutes` it cancels `token`.
    pub(super) fn start(minutes: f64, token: CancellationToken) -> Self {
        let fired = Arc::new(AtomicBool::new(false));
        let flag = fired.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(minutes_duration(minutes)).await;
            flag.store(true, Ordering::SeqCst);
            token.cancel();
        });
        Self {
            minutes,
            fired,
            timer,
        }
    }

    /// Whether it ran out.
    pub(super) fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Stops the timer; whether it had run out.
    pub(super) fn stop(self) -> bool {
        self.timer.abort();
        self.fired()
    }

    /// What a job or step that ran out says: `the step timed out after 90 minutes
    /// (timeout-minutes)`.
    pub(super) fn message(&self, what: &str) -> String {
        format!(
            "the {what} timed out after {} (timeout-minutes)",
            minutes_text(self.minutes)
        )
    }
}

impl Drop for Timeout {
    fn drop(&mut self) {
        self.timer.abort();
    }
}

/// A timeout in minutes as a duration; absurdly large ones mean "never" rather than a panic.
fn minutes_duration(minutes: f64) -> Duration {
    Duration::try_from_secs_f64(minutes * 60.0).unwrap_or(Duration::MAX)
}

fn minutes_text(minutes: f64) -> String {
    let secs = minutes * 60.0;
    if secs < 60.0 {
        format!("{}s", (secs * 10.0).round() / 10.0)
    } else {
        format!("{} minutes", crate::expr::format_number(minutes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_of_any_size_become_durations() {
        assert_eq!(minutes_duration(0.5), Duration::from_secs(30));
        assert_eq!(minutes_duration(1e300), Duration::MAX);
        assert_eq!(minutes_text(0.02), "1.2s");
        assert_eq!(minutes_text(90.0), "90 minutes");
    }
}
