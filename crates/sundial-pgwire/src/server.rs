//! The listener: accepts connections up to a bound, hands each to a [`Session`], and routes
//! CancelRequests to the session they name.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sundial_query::Engine;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::futures::{Notified, OwnedNotified};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;

use crate::auth::Users;
use crate::session::Session;

/// Bounds and defaults for the PostgreSQL listener.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Connections served at once; more are refused with SQLSTATE 53300.
    pub connections_max: usize,
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
    shared: Arc<Shared>,
}

impl PgServer {
    /// Sessions run their statements themselves, so the runtime that polls
    /// [`serve`](Self::serve) is the one queries (and COPY loaders) run on.
    pub fn new(engine: Arc<Engine>, users: Users, options: PgOptions) -> PgServer {
        PgServer {
            shared: Arc::new(Shared {
                engine,
                users,
                options,
                cancels: Cancels::default(),
                spinners: Spinners::default(),
            }),
        }
    }

    /// Accepts connections until `stop` turns true, then waits for open sessions to end their
    /// current round trip.
    pub async fn serve(&self, listener: TcpListener, stop: watch::Receiver<bool>) {
        let threads = tokio::runtime::Handle::current().metrics().num_workers();
        self.shared.spinners.set_threads(threads);
        let permits = Arc::new(Semaphore::new(self.shared.options.connections_max));
        let mut sessions = JoinSet::new();
        let stopping = crate::session::stopped(stop.clone());
        tokio::pin!(stopping);
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let permit = permits.clone().try_acquire_owned().ok();
                        let shared = self.shared.clone();
                        let stop = stop.clone();
                        sessions.spawn(async move {
                            connection(shared, stream, peer, permit.is_some(), stop).await;
                            drop(permit);
                        });
                    }
                    Err(e) => {
                        tracing::warn!("PG accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                },
                Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
                _ = &mut stopping => break,
            }
        }
        while sessions.join_next().await.is_some() {}
    }
}

async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    admitted: bool,
    stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let session = Session::new(shared, stream, stop);
    if let Err(e) = session.run(admitted).await {
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
