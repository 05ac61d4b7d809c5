//! The two connection budgets, so that sockets that send nothing cannot lock clients out, and
//! a burst of clients logging in at once is not mistaken for them.
//!
//! ```text
//!  accept ─▶ Admission::arrive ─▶ pending: ≤ unauthenticated_connections_max quietly; past it
//!                                    │ only peers silent for the grace are evicted; at
//!                                    │ BURST_FACTOR times it, the longest silent one is
//!                                    │ startup, SSL/GSS refusals, cancel, password exchange,
//!                                    │ all within auth_timeout_ms
//!                                    ▼
//!                                 Ticket::admit ─▶ session slot (≤ connections_max) or 53300
//! ```
//!
//! Invariants:
//! - a connection is *pending* from accept until its login succeeds, and holds a [`Ticket`]
//!   for that long; the session marks it *heard* each time bytes arrive during its login.
//!   Pending connections have their own budget, `unauthenticated_connections_max`. When it is
//!   full, a newcomer evicts (SQLSTATE 53300) the pending connection silent longest, if that
//!   one has been silent for the grace (a quarter of `auth_timeout_ms`); otherwise the newcomer
//!   is let in over the budget, so a burst of clients that all talk promptly all log in. At
//!   [`BURST_FACTOR`] times the budget, the connection silent longest is evicted whatever its
//!   silence: a flood of silent sockets always leaves room for a client that logs in promptly;
//! - the whole login (startup packet, SSL/GSSENC requests, the password exchange) must finish
//!   within `auth_timeout_ms`, or the connection is closed; a connection carrying a
//!   CancelRequest ends as soon as it is read. At most two encryption requests are answered
//!   per connection (the session enforces both);
//! - only an authenticated connection takes a session slot (`connections_max`); pending ones
//!   never hold one, so sessions never wait on unauthenticated sockets. When no slot is free,
//!   the client is refused with SQLSTATE 53300 as soon as its startup packet arrives, or after
//!   the password exchange if the last slot was taken meanwhile.
//!
//! Open sockets are thus bounded by `connections_max + BURST_FACTOR *
//! unauthenticated_connections_max` (plus connections being closed), and each pending one for
//! at most `auth_timeout_ms`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::error::PgError;

/// Pending connections at most, as a multiple of `unauthenticated_connections_max`.
pub(crate) const BURST_FACTOR: usize = 4;

/// The two connection budgets (see the module docs).
pub(crate) struct Admission {
    sessions: Arc<Semaphore>,
    pending: Mutex<Pending>,
    pending_max: usize,
    /// How long a pending connection must have been silent to be evicted below the hard bound.
    grace: Duration,
    /// What the pending connections' `heard` times count from.
    epoch: Instant,
}

/// Connections not yet authenticated, by arrival order.
#[derive(Default)]
struct Pending {
    next_id: u64,
    waiting: BTreeMap<u64, Place>,
}

/// A pending connection: the signal that evicts it and when bytes last arrived from it.
struct Place {
    evicted: Arc<Notify>,
    heard: Arc<AtomicU64>,
}

impl Admission {
    pub fn new(sessions_max: usize, pending_max: usize, auth_timeout_ms: u64) -> Admission {
        Admission {
            sessions: Arc::new(Semaphore::new(sessions_max)),
            pending: Mutex::new(Pending::default()),
            pending_max: pending_max.max(1),
            grace: Duration::from_millis(auth_timeout_ms / 4),
            epoch: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Registers a new connection as pending, evicting a silent one if the budget is full (see
    /// the module docs).
    pub fn arrive(self: &Arc<Self>) -> Ticket {
        let now_ms = self.now_ms();
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.waiting.len() >= self.pending_max {
            let grace_ms = self.grace.as_millis() as u64;
            pending.evict_silent(|heard_ms| now_ms.saturating_sub(heard_ms) >= grace_ms);
        }
        while pending.waiting.len() >= self.pending_max * BURST_FACTOR {
            if !pending.evict_silent(|_| true) {
                break;
            }
        }
        let evicted = Arc::new(Notify::new());
        let heard = Arc::new(AtomicU64::new(now_ms));
        let id = pending.next_id;
        pending.next_id += 1;
        pending.waiting.insert(
            id,
            Place {
                evicted: evicted.clone(),
                heard: heard.clone(),
            },
        );
        Ticket {
            admission: self.clone(),
            id,
            evicted,
            heard: Heard {
                admission: self.clone(),
                at_ms: heard,
            },
        }
    }

    fn leave(&self, id: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.waiting.remove(&id);
    }

    #[cfg(test)]
    pub fn pending_count(&self) -> usize {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.waiting.len()
    }
}

impl Pending {
    /// Evicts the connection silent longest if `evictable(its last heard time)`; whether one
    /// was.
    fn evict_silent(&mut self, evictable: impl Fn(u64) -> bool) -> bool {
        let silent = self
            .waiting
            .iter()
            .min_by_key(|(id, place)| (place.heard.load(Ordering::Relaxed), **id))
            .map(|(id, place)| (*id, place.heard.load(Ordering::Relaxed)));
        match silent {
            Some((id, heard_ms)) if evictable(heard_ms) => {
                if let Some(place) = self.waiting.remove(&id) {
                    // notify_one keeps the wake-up if the connection is not waiting on it yet.
                    place.evicted.notify_one();
                }
                true
            }
            _ => false,
        }
    }
}

/// Marks a pending connection heard from; the session holds it while it logs in.
#[derive(Clone)]
pub(crate) struct Heard {
    admission: Arc<Admission>,
    at_ms: Arc<AtomicU64>,
}

impl Heard {
    /// Bytes arrived from the client now.
    pub fn now(&self) {
        self.at_ms.store(self.admission.now_ms(), Ordering::Relaxed);
    }
}

/// A pending connection's place; dropping it gives the place back.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    evicted: Arc<Notify>,
    heard: Heard,
}

impl Ticket {
    /// What marks this connection heard from.
    pub fn heard(&self) -> Heard {
        self.heard.clone()
    }

    /// Resolves once a newer connection has evicted this one.
    pub async fn evicted(&self) {
        self.evicted.notified().await;
    }

    /// Whether a session slot is free now (it may be taken before [`admit`](Self::admit)).
    pub fn has_room(&self) -> bool {
        self.admission.sessions.available_permits() > 0
    }

    /// Ends the pending state of an authenticated connection, taking a session slot; the slot
    /// is given back when the permit drops.
    pub fn admit(self) -> Result<OwnedSemaphorePermit, PgError> {
        self.admission
            .sessions
            .clone()
            .try_acquire_owned()
            .map_err(|_| too_many_clients())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.leave(self.id);
    }
}

/// The refusal of a client when every session slot is taken (SQLSTATE 53300).
pub(crate) fn too_many_clients() -> PgError {
    PgError::TooManyConnections("sorry, too many clients already".into())
}
