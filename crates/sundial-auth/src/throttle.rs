//! Slowing down password guessing: failed logins per client address.
//!
//! Invariants: at most `addresses_max` addresses are remembered (the least recently failing
//! one is forgotten first), so a flood of addresses costs bounded memory; failures older than
//! [`FORGET_AFTER`] no longer count; the delay never exceeds [`DELAY_MAX`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures from one address that cost no extra delay.
const FREE_FAILURES: u32 = 3;
/// The delay after the first failure past the free ones; it doubles with each further one.
const DELAY_STEP: Duration = Duration::from_millis(250);
/// The longest delay.
pub const DELAY_MAX: Duration = Duration::from_secs(10);
/// Every failed login waits this long before it is answered.
pub const FAILURE_DELAY: Duration = Duration::from_millis(200);
/// Failures this old are forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);

struct Failures {
    count: u32,
    last: Instant,
}

/// Failed logins by address.
pub struct Throttle {
    addresses_max: usize,
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

impl Throttle {
    pub fn new(addresses_max: usize) -> Throttle {
        Throttle {
            addresses_max: addresses_max.max(1),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// How long a login attempt from `ip` waits before its credentials are checked.
    pub fn delay(&self, ip: IpAddr) -> Duration {
        let failures = self.lock();
        let Some(f) = failures.get(&ip) else {
            return Duration::ZERO;
        };
        if f.last.elapsed() > FORGET_AFTER || f.count <= FREE_FAILURES {
            return Duration::ZERO;
        }
        let doublings = (f.count - FREE_FAILURES - 1).min(16);
        DELAY_STEP.saturating_mul(1 << doublings).min(DELAY_MAX)
    }

    /// Records a failed login from `ip`.
    pub fn failed(&self, ip: IpAddr) {
        let mut failures = self.lock();
        let now = Instant::now();
        if !failures.contains_key(&ip) && failures.len() >= self.addresses_max {
            // Forget what is stale, else the address that failed longest ago.
            failures.retain(|_, f| f.last.elapsed() <= FORGET_AFTER);
            if failures.len() >= self.addresses_max
                && let Some(oldest) = failures
                    .iter()
                    .min_by_key(|(_, f)| f.last)
                    .map(|(ip, _)| *ip)
            {
                failures.remove(&oldest);
            }
        }
        let entry = failures.entry(ip).or_insert(Failures {
            count: 0,
            last: now,
        });
        if entry.last.elapsed() > FORGET_AFTER {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
    }

    /// A successful login from `ip` clears its failures.
    pub fn succeeded(&self, ip: IpAddr) {
        self.lock().remove(&ip);
    }

    /// Addresses remembered (for tests and metrics).
    pub fn addresses(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Failures>> {
        // A panic while holding this lock leaves a consistent map: keep using it.
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_failures_slow_one_address_only() {
        let t = Throttle::new(100);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..FREE_FAILURES {
            t.failed(a);
        }
        assert_eq!(t.delay(a), Duration::ZERO);
        t.failed(a);
        assert_eq!(t.delay(a), DELAY_STEP);
        t.failed(a);
        assert_eq!(t.delay(a), DELAY_STEP * 2);
        for _ in 0..100 {
            t.failed(a);
        }
        assert_eq!(t.delay(a), DELAY_MAX);
        assert_eq!(t.delay(b), Duration::ZERO);
        t.succeeded(a);
        assert_eq!(t.delay(a), Duration::ZERO);
    }

    #[test]
    fn memory_is_bounded() {
        let t = Throttle::new(16);
        for i in 0..1000u32 {
            t.failed(IpAddr::from(i.to_be_bytes()));
        }
        assert_eq!(t.addresses(), 16);
    }
}
