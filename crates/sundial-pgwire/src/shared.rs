//! What the listener and its sessions share: the options, the engine, the users, the cancel
//! registry, the connection budgets and the bound on sessions polling their sockets.
//!
//! Invariants:
//! - at most the serving runtime's threads less one sessions poll their sockets at once
//!   ([`Spinners`]), so one thread is always free to run other sessions' work;
//! - a connection task's panic ends only that connection, and is counted in
//!   [`Shared::panics`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use sundial_query::Engine;
use tokio::sync::watch;

use crate::admission::Admission;
use crate::auth::Users;
use crate::cancel::Cancels;

/// Bounds and defaults for the PostgreSQL listener.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Authenticated sessions at once; more are refused with SQLSTATE 53300.
    pub connections_max: usize,
    /// Connections that have not finished logging in, at once, before silent ones are closed
    /// (SQLSTATE 53300) to make room for newcomers; a burst of clients that talk promptly may
    /// exceed it up to `admission::BURST_FACTOR` times (see `admission`). At least 1.
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
    /// A query thread that has run this long without giving up its CPU yields it after the
    /// reply it sends (zero: never), so that threads waiting for the CPU behind a saturated
    /// server wait at most about this long (see `fair`).
    pub yield_interval: Duration,
    /// The server's certificate: with it, an SSLRequest is answered 'S' and the session
    /// continues over TLS, and a connection opening with a TLS handshake (PostgreSQL 17's
    /// direct TLS) is served too. Without it, SSLRequests are answered 'N'.
    pub tls: Option<Arc<sundial_tls::Tls>>,
    /// Which peers may log in over plain TCP (refused with SQLSTATE 28000).
    pub tls_require: sundial_tls::TlsRequire,
    /// The serving runtime's parked worker threads, counted by its park hooks (see
    /// [`ParkedWorkers`]); sessions poll their sockets only while another worker is parked.
    /// Without it, only the number of polling sessions is bounded.
    pub parked_workers: Option<Arc<ParkedWorkers>>,
}

/// The worker threads of a runtime that are parked (out of tasks), counted by the hooks the
/// runtime is built with (`on_thread_park` calls [`ParkedWorkers::parked`],
/// `on_thread_unpark` [`ParkedWorkers::unparked`]).
///
/// A parked worker means the runtime has nothing queued (a task scheduled while a worker is
/// parked wakes it to run or steal it), so a session may spend its own thread polling its
/// socket without keeping another session waiting. With every worker busy, a polling session
/// would hold its thread while others' work queues behind it: on two cores and 16 clients,
/// the median round trip was 50 µs and the 99th percentile 3-5 ms.
#[derive(Debug, Default)]
pub struct ParkedWorkers(AtomicUsize);

impl ParkedWorkers {
    pub fn parked(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn unparked(&self) {
        // Each worker parks before it unparks; never below zero, even if a hook were missed.
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    pub fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
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
            yield_interval: Duration::from_micros(250),
            tls: None,
            tls_require: sundial_tls::TlsRequire::Off,
            parked_workers: None,
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
    pub fn new(engine: Arc<Engine>, users: Users, options: PgOptions) -> Shared {
        Shared {
            engine,
            users,
            cancels: Cancels::default(),
            spinners: Spinners::default(),
            admission: Arc::new(Admission::new(
                options.connections_max,
                options.unauthenticated_connections_max,
                options.auth_timeout_ms,
            )),
            panics: AtomicU64::new(0),
            options,
        }
    }

    /// Counts a connection task that ended in a panic.
    pub fn note_ended(&self, ended: Result<(), tokio::task::JoinError>) {
        if let Err(e) = ended
            && e.is_panic()
        {
            self.panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!("a PG connection task panicked: {e}");
        }
    }
}

/// Bounds the sessions polling their sockets at once to the serving runtime's threads less
/// one, so one thread is always free to run other sessions' work.
#[derive(Default)]
pub(crate) struct Spinners {
    polling: AtomicUsize,
    polling_max: AtomicUsize,
}

impl Spinners {
    pub fn set_threads(&self, threads: usize) {
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

/// Resolves once the server's stop signal turns true (or its sender is gone).
pub(crate) async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The hooks of a real runtime count its parked workers: all of them once idle, fewer
    /// while tasks run.
    #[test]
    fn parked_workers_are_counted_by_the_runtime_hooks() {
        let parked = Arc::new(ParkedWorkers::default());
        let (on_park, on_unpark) = (parked.clone(), parked.clone());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .on_thread_park(move || on_park.parked())
            .on_thread_unpark(move || on_unpark.unparked())
            .build()
            .expect("runtime");
        let idle = |n: usize| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while parked.count() != n {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{} parked",
                    parked.count()
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        idle(2);
        // A task that keeps a worker busy leaves at most the other parked.
        let (started_tx, started) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        runtime.spawn(async move {
            started_tx.send(()).expect("send");
            release_rx.recv().expect("recv");
        });
        started.recv().expect("started");
        assert!(parked.count() <= 1, "{} parked", parked.count());
        release.send(()).expect("release");
        idle(2);
        // Never below zero, whatever the order of the calls.
        let lone = ParkedWorkers::default();
        lone.unparked();
        assert_eq!(lone.count(), 0);
    }
}
