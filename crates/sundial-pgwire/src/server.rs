//! The listener: admits connections within two budgets, hands each to a [`Session`], and routes
//! CancelRequests to the session they name.
//!
//! ```text
//!  accept ─▶ Admission::arrive ─▶ pending (≤ unauthenticated_connections_max, oldest evicted)
//!                                    │ startup, SSL/GSS refusals, cancel, password exchange,
//!                                    │ all within auth_timeout_ms
//!                                    ▼
//!                                 Ticket::admit ─▶ session slot (≤ connections_max) or 53300
//! ```
//!
//! Admission, so that sockets that send nothing cannot lock clients out:
//! - a connection is *pending* from accept until its login succeeds. Pending connections have
//!   their own budget, `unauthenticated_connections_max`; when it is full, a new connection
//!   evicts the oldest pending one (closed with SQLSTATE 53300) rather than being refused, so
//!   a flood of silent sockets always leaves room for a client that logs in promptly;
//! - the whole login (startup packet, SSL/GSSENC requests, the password exchange) must finish
//!   within `auth_timeout_ms`, or the connection is closed; a connection carrying a
//!   CancelRequest ends as soon as it is read. At most two encryption requests are answered
//!   per connection;
//! - only an authenticated connection takes a session slot (`connections_max`); pending ones
//!   never hold one, so sessions never wait on unauthenticated sockets. When no slot is free,
//!   the client is refused with SQLSTATE 53300 as soon as its startup packet arrives, or after
//!   the password exchange if the last slot was taken meanwhile.
//!
//! Open sockets are thus bounded by `connections_max + unauthenticated_connections_max` (plus
//! connections being closed), and each pending one for at most `auth_timeout_ms`.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sundial_query::Engine;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::futures::{Notified, OwnedNotified};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use crate::auth::Users;
use crate::error::PgError;
use crate::session::Session;

/// Bounds and defaults for the PostgreSQL listener.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Authenticated sessions at once; more are refused with SQLSTATE 53300.
    pub connections_max: usize,
    /// Connections that have not finished logging in, at once; past it, the oldest of them is
    /// closed (SQLSTATE 53300) to make room for the newcomer. At least 1.
    pub unauthenticated_connections_max: usize,
    /// How long a connection may take from accept to the end of its login before it is
    /// closed. At least 1.
    pub auth_timeout_ms: u64,
    /// The largest frontend message accepted (a query text, a Bind, a COPY chunk).
    pub message_bytes_max: usize,
    /// Output is flushed to the socket once this much is buffered, even mid-result.
    pub flush_bytes: usize,
    /// Default `statement_timeout`; 0 means none.
    pub statement_timeout_ms: u64,
    /// How long a session that has answered polls its socket for the client's next message
    /// before sleeping (0: sleep at once). A request/response client answers within tens of
    /// microseconds; catching that saves the wake-up of a sleeping thread, which on a virtual
    /// machine costs about as much again as the round trip itself.
    pub read_spin_us: u64,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            connections_max: 256,
            unauthenticated_connections_max: 64,
            auth_timeout_ms: 10_000,
            message_bytes_max: 16 << 20,
            flush_bytes: 64 << 10,
            statement_timeout_ms: 0,
            read_spin_us: 50,
        }
    }
}

/// Everything sessions share.
pub(crate) struct Shared {
    pub engine: Arc<Engine>,
    pub users: Users,
    pub options: PgOptions,
    pub cancels: Cancels,
    pub spinners: Spinners,
    pub admission: Arc<Admission>,
    /// Connection tasks that panicked (a bug; the panic ends only its own connection).
    pub panics: AtomicU64,
}

impl Shared {
    fn note_ended(&self, ended: Result<(), tokio::task::JoinError>) {
        if let Err(e) = ended
            && e.is_panic()
        {
            self.panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!("a PG connection task panicked: {e}");
        }
    }
}

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
    fn new(sessions_max: usize, pending_max: usize) -> Admission {
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

pub(crate) fn too_many_clients() -> PgError {
    PgError::TooManyConnections("sorry, too many clients already".into())
}

/// Bounds the sessions polling their sockets at once to the serving runtime's threads less
/// one, so one thread is always free to run other sessions' work.
#[derive(Default)]
pub(crate) struct Spinners {
    polling: AtomicUsize,
    polling_max: AtomicUsize,
}

impl Spinners {
    fn set_threads(&self, threads: usize) {
        self.polling_max
            .store(threads.saturating_sub(1), Ordering::Relaxed);
    }

    /// A slot to poll in, if one is free; it is given back when dropped.
    pub fn try_enter(&self) -> Option<SpinSlot<'_>> {
        let max = self.polling_max.load(Ordering::Relaxed);
        self.polling
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| SpinSlot(&self.polling))
    }
}

pub(crate) struct SpinSlot<'a>(&'a AtomicUsize);

impl Drop for SpinSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

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

/// A PostgreSQL protocol server over an [`Engine`].
pub struct PgServer {
    pub(crate) shared: Arc<Shared>,
}

impl PgServer {
    /// Sessions run their statements themselves, so the runtime that polls
    /// [`serve`](Self::serve) is the one queries (and COPY loaders) run on.
    pub fn new(engine: Arc<Engine>, users: Users, options: PgOptions) -> PgServer {
        PgServer {
            shared: Arc::new(Shared {
                engine,
                users,
                cancels: Cancels::default(),
                spinners: Spinners::default(),
                admission: Arc::new(Admission::new(
                    options.connections_max,
                    options.unauthenticated_connections_max,
                )),
                panics: AtomicU64::new(0),
                options,
            }),
        }
    }

    /// Accepts connections until `stop` turns true, then waits for open sessions to end their
    /// current round trip.
    pub async fn serve(&self, listener: TcpListener, stop: watch::Receiver<bool>) {
        let threads = tokio::runtime::Handle::current().metrics().num_workers();
        self.shared.spinners.set_threads(threads);
        let mut sessions = JoinSet::new();
        let stopping = crate::session::stopped(stop.clone());
        tokio::pin!(stopping);
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let ticket = self.shared.admission.arrive();
                        let shared = self.shared.clone();
                        let stop = stop.clone();
                        sessions.spawn(connection(shared, stream, peer, ticket, stop));
                    }
                    Err(e) => {
                        tracing::warn!("PG accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                },
                Some(ended) = sessions.join_next(), if !sessions.is_empty() => {
                    self.shared.note_ended(ended);
                }
                _ = &mut stopping => break,
            }
        }
        while let Some(ended) = sessions.join_next().await {
            self.shared.note_ended(ended);
        }
    }
}

async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let session = Session::new(shared, stream, stop);
    if let Err(e) = session.run(ticket).await {
        tracing::debug!("PG session from {peer} ended: {e}");
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
    fn one_thread_is_always_left_to_sessions_that_do_not_poll() {
        let spinners = Spinners::default();
        spinners.set_threads(1);
        assert!(spinners.try_enter().is_none());
        spinners.set_threads(3);
        let first = spinners.try_enter();
        let second = spinners.try_enter();
        assert!(first.is_some() && second.is_some());
        assert!(spinners.try_enter().is_none());
        drop(first);
        assert!(
            spinners.try_enter().is_some(),
            "a slot is given back when dropped"
        );
    }
}
