//! Slowing down password guessing: failed logins per client address and user name, and a
//! bound on the logins in progress from one address.
//!
//! ```text
//!  login ─▶ Throttle::attempt(ip) ─▶ a turn (≤ ATTEMPTS_IN_PROGRESS_MAX per address; others
//!           │                         wait, ≤ ATTEMPTS_WAITING_MAX, then refused at once)
//!           ├─ delay(ip, user) ─▶ sleep ─▶ check the credentials
//!           └─ failed(ip, user) | succeeded(ip, user) ─▶ the turn ends
//! ```
//!
//! Invariants:
//! - failures count per (address, user name) and per address. A success clears only its own
//!   pair: another user's login from the same address never shortens the delay of a name being
//!   guessed. The address's own count (for guessing across many names) is cleared by time only;
//! - the delay is the larger of the pair's and the address's, and never exceeds [`DELAY_MAX`];
//!   failures older than [`FORGET_AFTER`] no longer count;
//! - at most `entries_max` pairs and addresses are remembered (the least recently failing one
//!   is forgotten first), so a flood of addresses or names costs bounded memory;
//! - from an address with failures not yet forgotten, at most [`ATTEMPTS_IN_PROGRESS_MAX`]
//!   logins are between their turn and their answer at once (the delay is served inside the
//!   turn), so parallel guesses queue behind each other's delays instead of all waiting the
//!   same one; the queue per address is bounded by [`ATTEMPTS_WAITING_MAX`], and an address's
//!   gate is forgotten when its last attempt ends. Logins from an address that never failed
//!   take no turn.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{AuthError, Result};

/// Failures of one (address, user) pair that cost no extra delay.
const FREE_FAILURES: u32 = 3;
/// Failures from one address, over all names, that cost no extra delay.
const ADDRESS_FREE_FAILURES: u32 = 30;
/// The delay after the first failure past the free ones; it doubles with each further one.
const DELAY_STEP: Duration = Duration::from_millis(250);
/// The longest delay.
const DELAY_MAX: Duration = Duration::from_secs(10);
/// Every failed login waits this long before it is answered.
pub const FAILURE_DELAY: Duration = Duration::from_millis(200);
/// Failures this old are forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Logins from one address between their turn and their answer at once.
pub const ATTEMPTS_IN_PROGRESS_MAX: usize = 8;
/// Logins from one address waiting for a turn at once; more are refused at once.
pub const ATTEMPTS_WAITING_MAX: usize = 1024;
/// The longest user name kept in a key (longer names cannot exist: see `store`).
const KEY_NAME_BYTES_MAX: usize = 64;

/// What failures are counted by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// One user name from one address.
    Pair(IpAddr, Box<str>),
    /// Every name from one address.
    Address(IpAddr),
}

struct Failures {
    count: u32,
    last: Instant,
}

/// The turns of one address's logins.
struct Gate {
    turns: Arc<Semaphore>,
    /// Attempts holding or waiting for a turn.
    entrants: usize,
}

/// Failed logins by address and user, and the logins in progress by address.
pub struct Throttle {
    entries_max: usize,
    failures: Mutex<HashMap<Key, Failures>>,
    gates: Mutex<HashMap<IpAddr, Gate>>,
}

/// A login's turn from its address (none is needed from an address without failures);
/// dropping it ends the turn.
pub struct Attempt<'a> {
    throttle: &'a Throttle,
    turn: Option<(IpAddr, OwnedSemaphorePermit)>,
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if let Some((ip, _)) = self.turn.take() {
            self.throttle.leave(ip);
        }
    }
}

/// Leaves the gate when an attempt stops waiting for its turn (its future was dropped).
struct Entered<'a> {
    throttle: &'a Throttle,
    ip: IpAddr,
    armed: bool,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.throttle.leave(self.ip);
        }
    }
}

impl Throttle {
    /// A throttle remembering at most `entries_max` pairs and addresses that failed.
    pub fn new(entries_max: usize) -> Throttle {
        Throttle {
            entries_max: entries_max.max(1),
            failures: Mutex::new(HashMap::new()),
            gates: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for a login's turn from `ip`: at most [`ATTEMPTS_IN_PROGRESS_MAX`] at once from an
    /// address with failures not yet forgotten (logins from any other address need no turn, so
    /// a burst of clients logging in at once is not held up). A login arriving while
    /// [`ATTEMPTS_WAITING_MAX`] already wait is refused at once. The caller bounds the wait
    /// (its login timeout).
    pub async fn attempt(&self, ip: IpAddr) -> Result<Attempt<'_>> {
        let gated = lock(&self.gates).contains_key(&ip) || self.has_failed(ip);
        if !gated {
            return Ok(Attempt {
                throttle: self,
                turn: None,
            });
        }
        let turns = {
            let mut gates = lock(&self.gates);
            let gate = gates.entry(ip).or_insert_with(|| Gate {
                turns: Arc::new(Semaphore::new(ATTEMPTS_IN_PROGRESS_MAX)),
                entrants: 0,
            });
            if gate.entrants >= ATTEMPTS_IN_PROGRESS_MAX + ATTEMPTS_WAITING_MAX {
                return Err(AuthError::TooManyAttempts(ip.to_string()));
            }
            gate.entrants += 1;
            gate.turns.clone()
        };
        let mut entered = Entered {
            throttle: self,
            ip,
            armed: true,
        };
        let turn = turns
            .acquire_owned()
            .await
            .map_err(|_| AuthError::TooManyAttempts(ip.to_string()))?;
        entered.armed = false;
        Ok(Attempt {
            throttle: self,
            turn: Some((ip, turn)),
        })
    }

    /// Whether failures from `ip` are remembered and not yet forgotten.
    fn has_failed(&self, ip: IpAddr) -> bool {
        lock(&self.failures)
            .get(&Key::Address(ip))
            .is_some_and(|f| f.last.elapsed() <= FORGET_AFTER)
    }

    fn leave(&self, ip: IpAddr) {
        let mut gates = lock(&self.gates);
        if let Some(gate) = gates.get_mut(&ip) {
            gate.entrants = gate.entrants.saturating_sub(1);
            if gate.entrants == 0 {
                gates.remove(&ip);
            }
        }
    }

    /// How long a login as `user` from `ip` waits before its credentials are checked.
    pub fn delay(&self, ip: IpAddr, user: &str) -> Duration {
        let failures = lock(&self.failures);
        let pair = failures
            .get(&pair(ip, user))
            .map_or(Duration::ZERO, |f| delay_of(f, FREE_FAILURES));
        let address = failures
            .get(&Key::Address(ip))
            .map_or(Duration::ZERO, |f| delay_of(f, ADDRESS_FREE_FAILURES));
        pair.max(address)
    }

    /// Records a failed login as `user` from `ip`.
    pub fn failed(&self, ip: IpAddr, user: &str) {
        let mut failures = lock(&self.failures);
        for key in [pair(ip, user), Key::Address(ip)] {
            self.count_failure(&mut failures, key);
        }
    }

    fn count_failure(&self, failures: &mut HashMap<Key, Failures>, key: Key) {
        let now = Instant::now();
        if !failures.contains_key(&key) && failures.len() >= self.entries_max {
            // Forget what is stale, else what failed longest ago.
            failures.retain(|_, f| f.last.elapsed() <= FORGET_AFTER);
            if failures.len() >= self.entries_max
                && let Some(oldest) = failures
                    .iter()
                    .min_by_key(|(_, f)| f.last)
                    .map(|(k, _)| k.clone())
            {
                failures.remove(&oldest);
            }
        }
        let entry = failures.entry(key).or_insert(Failures {
            count: 0,
            last: now,
        });
        if entry.last.elapsed() > FORGET_AFTER {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
    }

    /// A successful login as `user` from `ip` clears that pair's failures, and no other's.
    pub fn succeeded(&self, ip: IpAddr, user: &str) {
        lock(&self.failures).remove(&pair(ip, user));
    }

    /// Pairs and addresses remembered (for tests and metrics).
    pub fn entries(&self) -> usize {
        lock(&self.failures).len()
    }
}

fn pair(ip: IpAddr, user: &str) -> Key {
    let mut end = user.len().min(KEY_NAME_BYTES_MAX);
    while !user.is_char_boundary(end) {
        end -= 1;
    }
    Key::Pair(ip, user[..end].into())
}

fn delay_of(f: &Failures, free: u32) -> Duration {
    if f.last.elapsed() > FORGET_AFTER || f.count <= free {
        return Duration::ZERO;
    }
    let doublings = (f.count - free - 1).min(16);
    DELAY_STEP.saturating_mul(1 << doublings).min(DELAY_MAX)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these locks leaves consistent maps: keep using them.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn repeated_failures_slow_one_pair_only() {
        let t = Throttle::new(100);
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        for _ in 0..FREE_FAILURES {
            t.failed(a, "admin");
        }
        assert_eq!(t.delay(a, "admin"), Duration::ZERO);
        t.failed(a, "admin");
        assert_eq!(t.delay(a, "admin"), DELAY_STEP);
        t.failed(a, "admin");
        assert_eq!(t.delay(a, "admin"), DELAY_STEP * 2);
        assert_eq!(t.delay(a, "reader"), Duration::ZERO);
        assert_eq!(t.delay(b, "admin"), Duration::ZERO);
        for _ in 0..100 {
            t.failed(a, "admin");
        }
        assert_eq!(t.delay(a, "admin"), DELAY_MAX);
        // The pair is cleared; what is left is the address's own count, as for any name.
        t.succeeded(a, "admin");
        assert_eq!(t.delay(a, "admin"), t.delay(a, "nobody"));
    }

    #[test]
    fn another_users_success_does_not_clear_a_guessed_name() {
        let t = Throttle::new(100);
        let a = ip("10.0.0.1");
        let mut last = Duration::ZERO;
        for i in 0..12 {
            t.failed(a, "admin");
            // A read user logs in between the guesses.
            t.succeeded(a, "reader");
            let now = t.delay(a, "admin");
            if i >= FREE_FAILURES as usize {
                assert!(
                    now > last || now == DELAY_MAX,
                    "guess {i}: {now:?} after {last:?}"
                );
            }
            last = now;
        }
        assert_eq!(last, DELAY_MAX);
        assert_eq!(t.delay(a, "reader"), Duration::ZERO);
    }

    #[test]
    fn guessing_many_names_slows_the_address() {
        let t = Throttle::new(1000);
        let a = ip("10.0.0.1");
        for i in 0..ADDRESS_FREE_FAILURES {
            t.failed(a, &format!("user{i}"));
        }
        assert_eq!(t.delay(a, "fresh"), Duration::ZERO);
        t.failed(a, "another");
        assert_eq!(t.delay(a, "fresh"), DELAY_STEP);
        // A success clears its own pair, not the address's count.
        t.succeeded(a, "fresh");
        assert_eq!(t.delay(a, "fresh"), DELAY_STEP);
    }

    #[test]
    fn memory_is_bounded() {
        let t = Throttle::new(16);
        for i in 0..1000u32 {
            t.failed(IpAddr::from(i.to_be_bytes()), "u");
        }
        assert_eq!(t.entries(), 16);
        let long = "x".repeat(10_000);
        t.failed(ip("10.9.9.9"), &long);
        assert_eq!(t.delay(ip("10.9.9.9"), &long), Duration::ZERO);
    }

    /// Polls `f` once.
    fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn logins_from_one_address_take_turns() {
        let t = Throttle::new(16);
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        // An address without failures needs no turn.
        let free: Vec<_> = (0..3 * ATTEMPTS_IN_PROGRESS_MAX)
            .map(|_| match poll_once(pin!(t.attempt(a))) {
                Poll::Ready(Ok(attempt)) => attempt,
                _ => panic!("no turn is needed"),
            })
            .collect();
        drop(free);
        t.failed(a, "admin");
        let mut turns = Vec::new();
        for _ in 0..ATTEMPTS_IN_PROGRESS_MAX {
            match poll_once(pin!(t.attempt(a))) {
                Poll::Ready(Ok(turn)) => turns.push(turn),
                _ => panic!("a turn is free"),
            }
        }
        // The next one from that address waits; another address does not.
        let mut waiting = pin!(t.attempt(a));
        assert!(poll_once(waiting.as_mut()).is_pending());
        t.failed(b, "admin");
        assert!(matches!(poll_once(pin!(t.attempt(b))), Poll::Ready(Ok(_))));
        turns.pop();
        let Poll::Ready(Ok(turn)) = poll_once(waiting.as_mut()) else {
            panic!("an ended turn lets the waiting login in");
        };
        drop(turn);
        drop(turns);
        assert!(lock(&t.gates).is_empty(), "gates are forgotten when unused");
    }

    #[test]
    fn the_queue_of_one_address_is_bounded() {
        let t = Throttle::new(16);
        let a = ip("10.0.0.1");
        lock(&t.gates).insert(
            a,
            Gate {
                turns: Arc::new(Semaphore::new(0)),
                entrants: ATTEMPTS_IN_PROGRESS_MAX + ATTEMPTS_WAITING_MAX,
            },
        );
        assert!(matches!(
            poll_once(pin!(t.attempt(a))),
            Poll::Ready(Err(AuthError::TooManyAttempts(_)))
        ));
    }
}
