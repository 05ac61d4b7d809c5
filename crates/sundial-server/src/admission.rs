//! The budget of connections still arriving on the HTTP and ILP/TCP listeners, so that sockets
//! that send nothing cannot lock clients out.
//!
//! ```text
//!  accept ─▶ Arrivals::arrive ─▶ Arrival (≤ max at once; past it the oldest is evicted)
//!              HTTP with a certificate: first byte, TLS handshake
//!              ILP/TCP: first byte, TLS handshake, signature exchange
//!            ─▶ dropped once the connection has proved itself (or given up)
//! ```
//!
//! Invariants: at most `max` arrivals are held at once; when a connection arrives with the
//! budget full, the oldest arrival is signalled to close rather than the newcomer refused, so a
//! flood of silent sockets always leaves room for a client that speaks promptly (it is the
//! newest, and is evicted only after `max` newer ones). Each arrival is also bounded in time by
//! its listener's timeout; neither bound involves the connections already served.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Connections still arriving on one listener, by arrival order (see the module docs).
pub(crate) struct Arrivals {
    state: Mutex<State>,
    max: usize,
    /// What the log calls the listener.
    what: &'static str,
    /// The flag that sets `max`.
    flag: &'static str,
}

/// The arrivals in order, each with the signal that evicts it.
#[derive(Default)]
struct State {
    next_id: u64,
    waiting: BTreeMap<u64, Arc<Notify>>,
    evicted_total: u64,
}

impl Arrivals {
    pub fn new(max: usize, what: &'static str, flag: &'static str) -> Arc<Arrivals> {
        Arc::new(Arrivals {
            state: Mutex::new(State::default()),
            max: max.max(1),
            what,
            flag,
        })
    }

    /// Registers a newly accepted connection, evicting the oldest arrival if the budget is full.
    pub fn arrive(self: &Arc<Self>) -> Arrival {
        let evicted = Arc::new(Notify::new());
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while state.waiting.len() >= self.max {
            let Some((_, oldest)) = state.waiting.pop_first() else {
                break;
            };
            // notify_one keeps the wake-up if the connection is not waiting on it yet.
            oldest.notify_one();
            state.evicted_total += 1;
            // One line per eviction would let a flood of sockets flood the log.
            if state.evicted_total.is_power_of_two() {
                tracing::warn!(
                    "{}: {} connections were still silent or logging in ({}): the oldest was \
                     closed to make room; {} closed so far",
                    self.what,
                    self.max,
                    self.flag,
                    state.evicted_total
                );
            }
        }
        let id = state.next_id;
        state.next_id += 1;
        state.waiting.insert(id, evicted.clone());
        Arrival {
            arrivals: self.clone(),
            id,
            evicted,
        }
    }

    fn leave(&self, id: u64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.waiting.remove(&id);
    }

    #[cfg(test)]
    fn count(&self) -> usize {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.waiting.len()
    }
}

/// An arriving connection's place; dropping it gives the place back.
pub(crate) struct Arrival {
    arrivals: Arc<Arrivals>,
    id: u64,
    evicted: Arc<Notify>,
}

impl Arrival {
    /// Resolves once a newer connection has evicted this one.
    pub async fn evicted(&self) {
        self.evicted.notified().await;
    }
}

impl Drop for Arrival {
    fn drop(&mut self) {
        self.arrivals.leave(self.id);
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[test]
    fn a_full_budget_evicts_the_oldest_arrival() {
        let arrivals = Arrivals::new(2, "test", "--test-max");
        let first = arrivals.arrive();
        let second = arrivals.arrive();
        assert!(first.evicted().now_or_never().is_none());
        let third = arrivals.arrive();
        assert_eq!(arrivals.count(), 2);
        assert!(first.evicted().now_or_never().is_some(), "the oldest goes");
        assert!(second.evicted().now_or_never().is_none());
        assert!(third.evicted().now_or_never().is_none());
        drop(second);
        assert_eq!(arrivals.count(), 1);
        // Room again: nobody is evicted.
        let fourth = arrivals.arrive();
        assert!(third.evicted().now_or_never().is_none());
        drop((first, third, fourth));
        assert_eq!(arrivals.count(), 0);
    }
}
