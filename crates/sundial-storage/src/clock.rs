//! The wall clock that bounds what rows can do to a table: the reference time of TTL and
//! `COLD AFTER` (the newest row, capped at the clock) and the bound on future timestamps.
//!
//! ```text
//!   StorageOptions::clock ── System ─▶ SystemTime::now()            (servers)
//!                         └─ Manual ─▶ a value the owner sets      (tests: time moves on demand)
//! ```
//!
//! The clock is a value in the options, never a global: each database reads its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Where a database reads the current time, in nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Default)]
pub struct WallClock {
    /// `None`: the system clock.
    manual: Option<Arc<AtomicI64>>,
}

impl WallClock {
    /// The system clock.
    pub fn system() -> WallClock {
        WallClock { manual: None }
    }

    /// A clock that shows `now_ns` until [`WallClock::set_ns`] moves it; clones share it.
    pub fn manual(now_ns: i64) -> WallClock {
        WallClock {
            manual: Some(Arc::new(AtomicI64::new(now_ns))),
        }
    }

    /// Moves a manual clock (and its clones) to `now_ns`; the system clock ignores it.
    pub fn set_ns(&self, now_ns: i64) {
        if let Some(manual) = &self.manual {
            manual.store(now_ns, Ordering::Release);
        }
    }

    /// Now, in nanoseconds since the Unix epoch (saturating far outside any table's range).
    pub fn now_ns(&self) -> i64 {
        match &self.manual {
            Some(manual) => manual.load(Ordering::Acquire),
            None => {
                let now = std::time::SystemTime::now();
                match now.duration_since(std::time::UNIX_EPOCH) {
                    Ok(since) => i64::try_from(since.as_nanos()).unwrap_or(i64::MAX),
                    Err(before) => {
                        i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |ns| -ns)
                    }
                }
            }
        }
    }
}

/// `ns` as an RFC 3339 UTC time, for messages.
pub(crate) fn rfc3339(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns).to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_set_and_clones_share_it() {
        let clock = WallClock::manual(5);
        let clone = clock.clone();
        assert_eq!(clone.now_ns(), 5);
        clock.set_ns(7);
        assert_eq!(clone.now_ns(), 7);
        // 2020-01-01: the system clock is past it.
        assert!(WallClock::system().now_ns() > 1_577_836_800_000_000_000);
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }
}
