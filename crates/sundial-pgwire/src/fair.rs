//! Sharing the CPU with the rest of the machine: a query thread that has run for
//! `yield_interval_us` since it last gave up its CPU yields it after the reply it is sending,
//! so other runnable threads (the clients on the same machine, Sundial's own commit and
//! ingestion threads, other processes) wait at most about that long, not a scheduler slice.
//!
//! A saturated query thread never sleeps: its sessions always have the next request queued.
//! The kernel then lets it run whole slices (milliseconds) before a thread that woke behind
//! it gets the CPU, and every session of a client thread waiting there stalls for that long:
//! with pgbench's 2 threads and 16 clients on 2 cores, the 99th percentile round trip was
//! 1.4-1.7 ms at 65,000-77,000 lookups/s, in bursts of exactly one pgbench thread's 8
//! clients. Yielding every 250 µs made it 0.48-0.55 ms at 70,000-78,000 lookups/s (100 µs
//! cost a fifth of the throughput). `sched_yield` returns at once when nothing else is
//! runnable, so a server on its own machine loses nothing.

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    /// When this thread last yielded (or first served a reply).
    static LAST_YIELD: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Yields this thread's CPU if it has not done so for `interval` (never if it is zero).
pub(crate) fn yield_if_due(interval: Duration) {
    if interval.is_zero() {
        return;
    }
    let now = Instant::now();
    LAST_YIELD.with(|last| match last.get() {
        Some(at) if now.duration_since(at) < interval => {}
        Some(_) => {
            std::thread::yield_now();
            last.set(Some(Instant::now()));
        }
        None => last.set(Some(now)),
    });
}

/// Notes that this thread just gave up its CPU some other way (it yielded or slept), so the
/// interval starts again.
pub(crate) fn yielded() {
    LAST_YIELD.with(|last| last.set(Some(Instant::now())));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yields_once_per_interval() {
        let interval = Duration::from_millis(20);
        yield_if_due(interval);
        let first = LAST_YIELD.with(Cell::get).expect("started");
        yield_if_due(interval);
        assert_eq!(
            LAST_YIELD.with(Cell::get),
            Some(first),
            "yielded within the interval"
        );
        std::thread::sleep(interval);
        yield_if_due(interval);
        assert!(LAST_YIELD.with(Cell::get).expect("set") > first);
        yield_if_due(Duration::ZERO);
    }
}
