//! CancelRequests: each session registers a process id and secret key, and a CancelRequest
//! naming both raises that session's [`CancelSignal`].
//!
//! Invariants:
//! - a cancel with an unknown process id or the wrong secret does nothing;
//! - a cancel reaches only the statement the session is running or about to run for messages
//!   it has already received: one that finds the session waiting for the client does nothing,
//!   as in PostgreSQL;
//! - a session is registered from its creation until it ends, so a process id names one live
//!   session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::sync::futures::{Notified, OwnedNotified};

/// A session's cancel. A CancelRequest wakes whatever waits on the signal (a running
/// statement, a COPY); if the session is busy with messages it received, the cancel also stays
/// raised until a statement takes it, so one that arrives while a statement is still being
/// planned stops it once it runs. A cancel that finds the session waiting for the client's
/// next message does nothing, as in PostgreSQL.
#[derive(Default)]
pub(crate) struct CancelSignal {
    busy: AtomicBool,
    raised: AtomicBool,
    notify: Arc<Notify>,
}

impl CancelSignal {
    fn raise(&self) {
        if self.busy.load(Ordering::SeqCst) {
            self.raised.store(true, Ordering::SeqCst);
        }
        self.notify.notify_waiters();
    }

    /// The session has messages to handle.
    pub fn busy(&self) {
        self.busy.store(true, Ordering::SeqCst);
    }

    /// The session waits for the client: a raised cancel has nothing left to stop.
    pub fn idle(&self) {
        self.busy.store(false, Ordering::SeqCst);
        self.raised.store(false, Ordering::SeqCst);
    }

    /// Whether a cancel was raised; it is taken (lowered) if so.
    pub fn take(&self) -> bool {
        self.raised.swap(false, Ordering::SeqCst)
    }

    /// Resolves at the next CancelRequest. Create it before calling [`take`](Self::take), so
    /// that a cancel in between is not missed.
    pub fn requested(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// [`requested`](Self::requested), owning its signal.
    pub fn requested_owned(&self) -> OwnedNotified {
        self.notify.clone().notified_owned()
    }
}

/// Running sessions by backend process id, for CancelRequest.
#[derive(Default)]
pub(crate) struct Cancels {
    next_pid: AtomicI32,
    sessions: Mutex<HashMap<i32, (i32, Arc<CancelSignal>)>>,
}

impl Cancels {
    /// Registers a session: its process id, secret key and the signal a cancel raises.
    pub fn register(&self) -> (i32, i32, Arc<CancelSignal>) {
        let pid = self.next_pid.fetch_add(1, Ordering::Relaxed) + 1;
        let secret: i32 = rand::random();
        let signal = Arc::new(CancelSignal::default());
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(pid, (secret, signal.clone()));
        }
        (pid, secret, signal)
    }

    pub fn unregister(&self, pid: i32) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(&pid);
        }
    }

    /// Interrupts the statement session `pid` is running or about to run, if the secret
    /// matches (see [`CancelSignal`]).
    pub fn cancel(&self, pid: i32, secret: i32) {
        let target = self.sessions.lock().ok().and_then(|s| {
            s.get(&pid)
                .filter(|(k, _)| *k == secret)
                .map(|(_, n)| n.clone())
        });
        if let Some(signal) = target {
            signal.raise();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_waits_for_the_statement_only_while_the_session_is_busy() {
        let signal = CancelSignal::default();
        signal.raise();
        assert!(!signal.take(), "an idle session ignores a cancel");
        signal.busy();
        signal.raise();
        assert!(signal.take(), "a busy session keeps it for its statement");
        assert!(!signal.take(), "taken once");
        signal.raise();
        signal.idle();
        assert!(!signal.take(), "going idle drops what no statement took");
    }

    #[test]
    fn a_cancel_needs_the_session_secret() {
        let cancels = Cancels::default();
        let (pid, secret, signal) = cancels.register();
        signal.busy();
        cancels.cancel(pid, secret.wrapping_add(1));
        cancels.cancel(pid + 1, secret);
        assert!(!signal.take(), "a wrong key or process id raises nothing");
        cancels.cancel(pid, secret);
        assert!(signal.take(), "the right key raises the signal");
        cancels.unregister(pid);
        cancels.cancel(pid, secret);
        assert!(!signal.take(), "an ended session is no longer reachable");
    }
}
