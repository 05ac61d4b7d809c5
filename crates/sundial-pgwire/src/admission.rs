//! The two connection budgets, so that sockets that send nothing cannot lock clients out.
//!
//! ```text
//!  accept ─▶ Admission::arrive ─▶ pending (≤ unauthenticated_connections_max, oldest evicted)
//!                                    │ startup, SSL/GSS refusals, cancel, password exchange,
//!                                    │ all within auth_timeout_ms
//!                                    ▼
//!                                 Ticket::admit ─▶ session slot (≤ connections_max) or 53300
//! ```
//!
//! Invariants:
//! - a connection is *pending* from accept until its login succeeds, and holds a [`Ticket`]
//!   for that long. Pending connections have their own budget, `unauthenticated_connections_max`;
//!   when it is full, a new connection evicts the oldest pending one (closed with SQLSTATE
//!   53300) rather than being refused, so a flood of silent sockets always leaves room for a
//!   client that logs in promptly;
//! - the whole login (startup packet, SSL/GSSENC requests, the password exchange) must finish
//!   within `auth_timeout_ms`, or the connection is closed; a connection carrying a
//!   CancelRequest ends as soon as it is read. At most two encryption requests are answered
//!   per connection (the session enforces both);
//! - only an authenticated connection takes a session slot (`connections_max`); pending ones
//!   never hold one, so sessions never wait on unauthenticated sockets. When no slot is free,
//!   the client is refused with SQLSTATE 53300 as soon as its startup packet arrives, or after
//!   the password exchange if the last slot was taken meanwhile.
//!
//! Open sockets are thus bounded by `connections_max + unauthenticated_connections_max` (plus
//! connections being closed), and each pending one for at most `auth_timeout_ms`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::error::PgError;

/// The two connection budgets (see the module docs).
pub(crate) struct Admission {
    sessions: Arc<Semaphore>,
    pending: Mutex<Pending>,
    pending_max: usize,
}

/// Connections not yet authenticated, by arrival order; each with the signal that evicts it.
#[derive(Default)]
struct Pending {
    next_id: u64,
    waiting: BTreeMap<u64, Arc<Notify>>,
}

impl Admission {
    pub fn new(sessions_max: usize, pending_max: usize) -> Admission {
        Admission {
            sessions: Arc::new(Semaphore::new(sessions_max)),
            pending: Mutex::new(Pending::default()),
            pending_max: pending_max.max(1),
        }
    }

    /// Registers a new connection as pending, evicting the oldest pending one if the budget is
    /// full.
    pub fn arrive(self: &Arc<Self>) -> Ticket {
        let evicted = Arc::new(Notify::new());
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        while pending.waiting.len() >= self.pending_max {
            let Some((_, oldest)) = pending.waiting.pop_first() else {
                break;
            };
            // notify_one keeps the wake-up if the connection is not waiting on it yet.
            oldest.notify_one();
        }
        let id = pending.next_id;
        pending.next_id += 1;
        pending.waiting.insert(id, evicted.clone());
        Ticket {
            admission: self.clone(),
            id,
            evicted,
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

/// A pending connection's place; dropping it gives the place back.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    evicted: Arc<Notify>,
}

impl Ticket {
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
