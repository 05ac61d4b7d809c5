//! ILP over TCP: one task per connection, each with its own [`Ingestor`].
//!
//! ```text
//!  listener ─accept─▶ task per connection:
//!    arriving (≤ --ilp-tcp-unauthenticated-connections-max, the oldest evicted past it):
//!              TLS or plain (--tls-handshake-timeout-ms), then the signature exchange
//!              (10 s) or a first byte (--ilp-tcp-first-byte-timeout-ms)
//!    served (a slot of --ilp-tcp-connections-max, or closed):
//!      read ─▶ LineSplitter ─▶ Ingestor ─▶ table sinks
//!      pause (pause_commit_ms without a byte): commit what it sent
//!      tick (commit_interval_ms / 2): commit what is due, close when idle
//! ```
//!
//! Invariants: a connection is *arriving* from accept until it has sent its first byte (with
//! credentials required: until its signature is verified); only then does it take one of the
//! slots of connections served, so sockets that send nothing never hold a slot. Arriving
//! connections have their own budget: when it is full, a new connection evicts the oldest
//! arriving one (closed) rather than being refused, and each arrives within its timeouts or
//! is closed. A connection that finds every slot taken is closed, with a WARN line.
//!
//! With a certificate (`--tls-cert`), each connection's first byte tells TLS (`tcps::` senders:
//! 0x16, a handshake record) from plain ILP (a line never starts with it); a plain connection
//! the TLS policy refuses for its peer is closed with a WARN line. The connection code reads
//! any [`IlpStream`] (plain TCP or TLS).
//!
//! A line is ingested once its newline arrived; a sender that closes its side has finished its
//! last line, newline or not. At stop, a connection takes what the kernel already received,
//! drops an unterminated tail of a sender still connected (it is a line cut short), and
//! commits.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use sundial_ilp::LineSplitter;
use sundial_ingest::{IngestError, Ingestor};
use sundial_tls::MaybeTls;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use sundial_auth::{Caller, Role};

use crate::access::Access;
use crate::admission::{Arrival, Arrivals};
use crate::ilp::{Shared, Transport, feed_lines};
use crate::ilp_auth;
use crate::tls::ListenerTls;

/// A connection's byte stream: plain TCP or TLS, and the plain socket under it when there is
/// no TLS layer (at shutdown, bytes are then taken straight from the kernel).
pub(crate) trait IlpStream: AsyncRead + AsyncWrite + Unpin + Send {
    fn plain_socket(&self) -> Option<&TcpStream>;
}

impl IlpStream for TcpStream {
    fn plain_socket(&self) -> Option<&TcpStream> {
        Some(self)
    }
}

impl IlpStream for MaybeTls {
    fn plain_socket(&self) -> Option<&TcpStream> {
        self.as_plain()
    }
}

/// The ILP/TCP listener's two budgets (see the module docs): connections still arriving, and
/// slots of connections served.
pub(crate) struct TcpAdmission {
    arrivals: Arc<Arrivals>,
    slots: Arc<Semaphore>,
    slots_max: usize,
    /// Time from accept to the first byte, without credentials (the signature exchange has a
    /// time of its own: `ilp_auth`).
    first_byte_timeout: Duration,
    /// Connections refused for want of a slot, so far.
    refused: AtomicU64,
}

impl TcpAdmission {
    /// `arriving_max` connections may be arriving at once (`--ilp-tcp-unauthenticated-
    /// connections-max`); one without credentials has `first_byte_timeout` for its first byte;
    /// `slots_max` are served at once.
    pub(crate) fn new(arriving_max: usize, first_byte_timeout: Duration, slots_max: usize) -> Self {
        TcpAdmission {
            arrivals: Arrivals::new(
                arriving_max,
                "ILP/TCP",
                "--ilp-tcp-unauthenticated-connections-max",
            ),
            slots: Arc::new(Semaphore::new(slots_max)),
            slots_max,
            first_byte_timeout,
            refused: AtomicU64::new(0),
        }
    }
}

/// Accepts connections until `stop`, then waits for every connection to commit.
pub(crate) async fn accept_tcp(
    listener: TcpListener,
    shared: Arc<Shared>,
    access: Arc<Access>,
    tls: ListenerTls,
    admission: TcpAdmission,
    mut stop: watch::Receiver<bool>,
) {
    let admission = Arc::new(admission);
    // Arriving connections are evicted past their budget and served ones hold a slot, so this
    // holds at most both budgets of live tasks (plus ones ending).
    let mut connections = JoinSet::new();
    let connection_stop = stop.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    while connections.try_join_next().is_some() {}
                    // In accept order: the oldest arrival is the one evicted.
                    let arrival = admission.arrivals.arrive();
                    connections.spawn(tcp_connection(
                        Accepted { stream, peer, arrival },
                        shared.clone(),
                        access.clone(),
                        tls.clone(),
                        admission.clone(),
                        connection_stop.clone(),
                    ));
                }
                Err(e) => tracing::warn!("ILP/TCP accept failed: {e}"),
            },
            _ = stop.wait_for(|s| *s) => break,
        }
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
}

/// A connection just accepted, with its place among the arriving ones.
struct Accepted {
    stream: TcpStream,
    peer: SocketAddr,
    arrival: Arrival,
}

/// What a connection that proved itself brings: its stream, who it is (with credentials
/// required), and the first bytes of lines it sent.
type Arrived = (MaybeTls, Option<Caller>, Vec<u8>);

/// Bytes read from a socket per read call.
const READ_BYTES: usize = 64 << 10;
/// Bytes taken by the first read of a connection without credentials.
const FIRST_READ_BYTES: usize = 8 << 10;

/// One TCP connection's state: its ingestor, and the bytes after the last complete line.
struct TcpConnection {
    ingestor: Ingestor,
    splitter: LineSplitter,
    buf: Vec<u8>,
    peer: SocketAddr,
    shared: Arc<Shared>,
}

impl TcpConnection {
    /// Room for the next read at the end of `buf`; returns where it starts.
    fn reserve(&mut self) -> usize {
        let start = self.buf.len();
        self.buf.resize(start + READ_BYTES, 0);
        start
    }

    /// Takes the `n` bytes read into the room at `start`: ingests every complete line and keeps
    /// the incomplete last one.
    fn received(&mut self, start: usize, n: usize) {
        self.buf.truncate(start + n);
        if n == 0 {
            return;
        }
        let before = self.ingestor.stats();
        let consumed = ingest_lines(
            &mut self.ingestor,
            &mut self.splitter,
            &self.buf,
            false,
            self.peer,
        );
        self.shared.count(Transport::Tcp, &self.ingestor, before);
        self.buf.drain(..consumed);
    }

    /// At shutdown: ingests what the kernel already received, without waiting for more.
    /// Returns whether the sender had closed its side.
    fn drain_received<S: IlpStream>(&mut self, stream: &mut S) -> bool {
        use std::io::Read;
        if stream.plain_socket().is_none() {
            return self.drain_buffered(stream);
        }
        let Some(stream) = stream.plain_socket() else {
            return false;
        };
        // Straight from the (non-blocking) socket: `try_read` trusts tokio's readiness, which
        // may not have seen the last bytes yet while the runtime's threads are busy ingesting,
        // and would leave them unread.
        let socket = socket2::SockRef::from(stream);
        loop {
            let start = self.reserve();
            match (&*socket).read(&mut self.buf[start..]) {
                Ok(0) => {
                    self.received(start, 0);
                    return true;
                }
                Ok(n) => self.received(start, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => self.received(start, 0),
                Err(_) => {
                    self.received(start, 0);
                    return false;
                }
            }
        }
    }

    /// At shutdown, under TLS: ingests what reads without waiting (the records the runtime
    /// has seen arrive; bytes still in the kernel that it has not are not waited for).
    fn drain_buffered<S: IlpStream>(&mut self, stream: &mut S) -> bool {
        loop {
            let start = self.reserve();
            match stream.read(&mut self.buf[start..]).now_or_never() {
                Some(Ok(0)) => {
                    self.received(start, 0);
                    return true;
                }
                Some(Ok(n)) => self.received(start, n),
                Some(Err(_)) | None => {
                    self.received(start, 0);
                    return false;
                }
            }
        }
    }

    /// Only a sender that closed its side has finished its last line, newline or not;
    /// otherwise an unterminated tail is a line cut short, and is dropped. Then commits.
    fn finish(mut self, closed_by_peer: bool) {
        let peer = self.peer;
        if closed_by_peer {
            let before = self.ingestor.stats();
            ingest_lines(
                &mut self.ingestor,
                &mut self.splitter,
                &self.buf,
                true,
                peer,
            );
            self.shared.count(Transport::Tcp, &self.ingestor, before);
        } else if !self.buf.is_empty() {
            tracing::warn!(
                "ILP/TCP {peer}: dropped an incomplete last line of {} bytes",
                self.buf.len()
            );
            self.shared.count_rejected(Transport::Tcp, 1);
        }
        commit(
            &self.shared,
            Transport::Tcp,
            &mut self.ingestor,
            Ingestor::flush,
        );
    }
}

async fn tcp_connection(
    accepted: Accepted,
    shared: Arc<Shared>,
    access: Arc<Access>,
    tls: ListenerTls,
    admission: Arc<TcpAdmission>,
    mut stop: watch::Receiver<bool>,
) {
    let _open = sundial_metrics::metrics().connection(sundial_metrics::Connection::IlpTcp);
    let Accepted {
        stream,
        peer,
        arrival,
    } = accepted;
    let arriving = arrive(stream, peer, &access, &tls, admission.first_byte_timeout);
    let arrived = tokio::select! {
        arrived = arriving => arrived,
        _ = arrival.evicted() => {
            tracing::info!(
                "ILP/TCP {peer}: closed before it sent a line, to make room for newer \
                 connections (--ilp-tcp-unauthenticated-connections-max)"
            );
            return;
        }
        _ = stop.wait_for(|s| *s) => return,
    };
    drop(arrival);
    let Some((mut stream, caller, first_bytes)) = arrived else {
        return;
    };
    // Only a connection that has spoken (and logged in) takes a slot.
    let Ok(_slot) = admission.slots.clone().try_acquire_owned() else {
        let refused = admission.refused.fetch_add(1, Ordering::Relaxed) + 1;
        // One line per refusal would let a flood of connections flood the log.
        if refused.is_power_of_two() {
            tracing::warn!(
                "ILP/TCP {peer}: connection refused: {} connections are open \
                 (--ilp-tcp-connections-max); {refused} refused so far",
                admission.slots_max
            );
        }
        return;
    };
    let idle = Duration::from_millis(shared.tcp_idle_timeout_ms);
    let mut tick = tokio::time::interval(Duration::from_millis(
        (shared.ingest.commit_interval_ms / 2).max(10),
    ));
    let mut conn = TcpConnection {
        ingestor: Ingestor::with_sinks(shared.sinks.clone(), shared.ingest.clone()),
        splitter: LineSplitter::new(shared.ingest.line_bytes_max),
        buf: Vec::with_capacity(READ_BYTES * 2),
        peer,
        shared,
    };
    if !first_bytes.is_empty() {
        let n = first_bytes.len();
        conn.buf.extend_from_slice(&first_bytes);
        conn.received(0, n);
    }
    let pause = Duration::from_millis(conn.shared.ingest.pause_commit_ms);
    let mut last_read = Instant::now();
    // Rows were ingested since this connection last committed.
    let mut uncommitted = false;
    let closed_by_peer = loop {
        let start = conn.reserve();
        let paused = tokio::time::sleep_until((last_read + pause).into());
        // In this order: a connection polled late (its thread was busy with others) finds its
        // pause timer expired though bytes wait to be read; they are read, not taken for a
        // pause, which would commit its rows ahead of older rows other senders still send.
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => {
                conn.received(start, 0);
                break conn.drain_received(&mut stream);
            }
            read = stream.read(&mut conn.buf[start..]) => match read {
                Ok(0) => {
                    conn.received(start, 0);
                    break true;
                }
                Ok(n) => {
                    if let Some(caller) = &caller
                        && let Err(e) = access.users.authorize(caller, Role::Write)
                    {
                        conn.received(start, 0);
                        tracing::warn!("ILP/TCP {peer}: closing: {e}");
                        break false;
                    }
                    conn.received(start, n);
                    last_read = Instant::now();
                    uncommitted = true;
                }
                Err(e) => {
                    conn.received(start, 0);
                    tracing::info!("ILP/TCP {peer}: connection failed: {e}");
                    break false;
                }
            },
            _ = paused, if uncommitted => {
                conn.received(start, 0);
                uncommitted = false;
                commit(&conn.shared, Transport::Tcp, &mut conn.ingestor, Ingestor::commit_paused);
            }
            _ = tick.tick() => {
                conn.received(start, 0);
                if last_read.elapsed() > idle {
                    tracing::info!("ILP/TCP {peer}: idle for {} ms, closing", idle.as_millis());
                    break false;
                }
                commit(&conn.shared, Transport::Tcp, &mut conn.ingestor, |i| i.flush_due(Instant::now()));
            }
        }
    };
    conn.finish(closed_by_peer);
}

/// A connection's arrival: TLS or plain by its first byte (it stays unread on a plain
/// connection), the TLS policy, then, with credentials required, the signature exchange (see
/// `ilp_auth`, within its own time), else its first bytes within `first_byte_timeout`. `None`:
/// it closed without a byte, or was refused or timed out (logged).
async fn arrive(
    stream: TcpStream,
    peer: SocketAddr,
    access: &Access,
    tls: &ListenerTls,
    first_byte_timeout: Duration,
) -> Option<Arrived> {
    let mut stream =
        match sundial_tls::accept(stream, tls.tls.as_deref(), tls.handshake_timeout).await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::info!("ILP/TCP {peer}: {e}");
                return None;
            }
        };
    if !stream.is_tls() && !tls.allows_plain(&peer) {
        tracing::warn!(
            "ILP/TCP {peer}: connection refused: TLS is required for connections from {peer} \
             (--tls-require {}); senders connect with tcps::",
            tls.require
        );
        return None;
    }
    // With credentials required, a sender signs a challenge before its first line, and its
    // role is checked again at each read: a user dropped or revoked while connected is cut
    // off.
    if access.required {
        return match ilp_auth::authenticate(&mut stream, peer, &access.users, &access.throttle)
            .await
        {
            Ok(None) => None,
            Ok(Some((user, rest))) => {
                tracing::debug!("ILP/TCP {peer}: authenticated as '{user}'");
                Some((stream, Some(Caller::user(user)), rest))
            }
            Err(why) => {
                tracing::warn!("ILP/TCP {peer}: refused: {why}");
                None
            }
        };
    }
    let mut first = vec![0u8; FIRST_READ_BYTES];
    match tokio::time::timeout(first_byte_timeout, stream.read(&mut first)).await {
        Ok(Ok(0)) => None,
        Ok(Ok(n)) => {
            first.truncate(n);
            Some((stream, None, first))
        }
        Ok(Err(e)) => {
            tracing::info!("ILP/TCP {peer}: connection failed: {e}");
            None
        }
        Err(_elapsed) => {
            tracing::info!(
                "ILP/TCP {peer}: closed: sent no line within {} ms \
                 (--ilp-tcp-first-byte-timeout-ms)",
                first_byte_timeout.as_millis()
            );
            None
        }
    }
}

/// [`feed_lines`] from a connection task, on the runtime thread itself. Ingesting may commit
/// (blocking file I/O), which is fine here: this runtime serves only ILP (queries, PostgreSQL
/// and HTTP have their own), so a busy thread only delays other ILP connections, whose senders
/// then wait on TCP, as they should. Staying on the runtime's few threads matters: moving each
/// buffer to whichever thread is free (`block_in_place`) spread the rows over dozens of
/// threads, each keeping its own allocator heap, which tripled peak memory and spent a fifth of
/// the CPU faulting in fresh pages.
fn ingest_lines(
    ingestor: &mut Ingestor,
    splitter: &mut LineSplitter,
    buf: &[u8],
    last: bool,
    peer: SocketAddr,
) -> usize {
    feed_lines(ingestor, splitter, buf, last, peer)
}

/// Commits through `f` (on the runtime thread, as [`ingest_lines`]), then moves the per-table
/// counts.
fn commit(
    shared: &Shared,
    transport: Transport,
    ingestor: &mut Ingestor,
    f: impl FnOnce(&mut Ingestor) -> Result<u64, IngestError>,
) {
    if let Err(e) = f(ingestor) {
        tracing::error!("ILP commit failed: {e}");
    }
    shared.count_tables(transport, ingestor);
}
