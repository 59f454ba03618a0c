//! The client's own CPU time: user plus system time of the whole process, every thread, with
//! nanosecond resolution (`CLOCK_PROCESS_CPUTIME_ID`, the clock `getrusage` sums up, read
//! through rustix's safe wrapper since the workspace forbids `unsafe`). A benchmark reports it
//! so a reader can tell when the client, not the server, was the limit.

use std::time::Duration;

use rustix::time::{ClockId, clock_gettime};

/// CPU time this process has used so far.
pub fn process_cpu_time() -> Duration {
    let t = clock_gettime(ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let before = process_cpu_time();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        assert!(process_cpu_time() > before);
    }
}
