//! Operations endpoints on the HTTP port: `GET /metrics` (Prometheus text format, see
//! sundial-metrics and docs/operations.md), `GET /status` and its alias `GET /health` (for load
//! balancers and the web console), and the HTTP listener: HTTPS and HTTP on one port, each
//! connection counted while open.
//!
//! ```text
//!  TCP accept ─▶ handshake task (≤ --http-handshakes-max at once, the oldest evicted past
//!                 it; each within --tls-handshake-timeout-ms):
//!                  first byte 0x16 ─▶ TLS handshake ─┐
//!                  anything else   ─▶ plain ─────────┼─▶ bounded queue ─▶ http_conn (hyper)
//!                  plain, refused by --tls-require ─▶ 403, closed
//!  GET /metrics ─▶ blocking task: one scrape at a time
//!                    tables: rows, partitions, bytes on disk (cached per table snapshot and
//!                            per part, so only parts that changed are listed again)
//!                    pending rows (sinks), query memory (pools) ─▶ gauges ─▶ render()
//!  GET /status  ─▶ {"status":"ok","version","uptime_ms","tables","rows_ingested"} (no I/O)
//! ```
//!
//! Invariants: `/status` reads only in-memory state (the catalog and counters), so it answers
//! while queries run and disks are slow. A scrape lists the directory of a part only when the
//! part is new or changed since the last scrape (its version and row count), so a steady
//! database costs a few map look-ups per table; the cache holds only the parts of the current
//! snapshots.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use sundial_http::json::write_json_string;
use sundial_metrics::{Connection, ConnectionGuard, metrics};
use sundial_storage::Database;
use sundial_tls::MaybeTls;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::admission::{Arrival, Arrivals};
use crate::ilp::Shared;
use crate::tls::ListenerTls;

/// `GET /metrics`.
pub(crate) async fn metrics_text(State(shared): State<Arc<Shared>>) -> Response {
    match tokio::task::spawn_blocking(move || scrape(&shared)).await {
        Ok(text) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, sundial_metrics::CONTENT_TYPE),
                (header::CACHE_CONTROL, "no-store"),
            ],
            text,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// `GET /status` and `GET /health`.
pub(crate) async fn status(State(shared): State<Arc<Shared>>) -> Response {
    let m = metrics();
    let tables = shared.sinks.db().tables().len();
    let mut body = Vec::with_capacity(128);
    body.extend_from_slice(b"{\"status\":\"ok\",\"version\":");
    write_json_string(&mut body, env!("CARGO_PKG_VERSION"));
    body.extend_from_slice(
        format!(
            ",\"uptime_ms\":{},\"tables\":{tables},\"rows_ingested\":{}}}",
            m.uptime().as_millis(),
            m.rows_ingested_total()
        )
        .as_bytes(),
    );
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// Bytes on disk of the parts seen at the last scrape, per table.
#[derive(Default)]
struct DiskCache {
    tables: HashMap<String, TableDisk>,
}

#[derive(Default)]
struct TableDisk {
    /// The snapshot the total was computed for.
    seq: Option<u64>,
    bytes: u64,
    /// Per part: (partition key, version, rows) ─▶ bytes.
    parts: HashMap<(i64, u64, u64), u64>,
}

static SCRAPE: Mutex<Option<DiskCache>> = Mutex::new(None);

/// Sets the gauges computed from the database, then renders every metric. One scrape at a
/// time (the per-table gauges are reset and set again).
fn scrape(shared: &Shared) -> String {
    let mut guard = SCRAPE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(DiskCache::default);
    let m = metrics();
    let db: &Database = shared.sinks.db();
    let tables = db.tables();
    let mut seen = HashMap::with_capacity(tables.len());
    for table in &tables {
        let snapshot = table.snapshot();
        let name = snapshot.meta().name.clone();
        let parts = snapshot.partitions();
        let partitions = parts.chunk_by(|a, b| a.key == b.key).count();
        let disk = cache.tables.remove(&name).unwrap_or_default();
        let disk = if disk.seq == Some(snapshot.seq()) {
            disk
        } else {
            let mut fresh = TableDisk {
                seq: Some(snapshot.seq()),
                ..TableDisk::default()
            };
            for (i, part) in parts.iter().enumerate() {
                let key = (part.key, part.version, part.row_count);
                let bytes = match disk.parts.get(&key) {
                    Some(bytes) => *bytes,
                    None => snapshot.part_disk_bytes(i).unwrap_or(0),
                };
                fresh.bytes += bytes;
                fresh.parts.insert(key, bytes);
            }
            fresh
        };
        let label = [name.as_str()];
        m.table_rows
            .with_label_values(&label)
            .set(i64::try_from(snapshot.row_count()).unwrap_or(i64::MAX));
        m.table_partitions
            .with_label_values(&label)
            .set(i64::try_from(partitions).unwrap_or(i64::MAX));
        m.table_disk_bytes
            .with_label_values(&label)
            .set(i64::try_from(disk.bytes).unwrap_or(i64::MAX));
        seen.insert(name, disk);
    }
    // Dropped tables: their cache entries and series go.
    cache.tables = seen;
    let names = &cache.tables;
    m.retain_tables(&|t| names.contains_key(t));
    m.tables
        .set(i64::try_from(tables.len()).unwrap_or(i64::MAX));
    m.pending_rows
        .set(i64::try_from(shared.sinks.pending_rows()).unwrap_or(i64::MAX));
    m.query_memory
        .set(i64::try_from(sundial_query::query_memory_in_use()).unwrap_or(i64::MAX));
    m.queries_running
        .set(i64::try_from(sundial_query::queries_running()).unwrap_or(i64::MAX));
    m.queries_waiting
        .set(i64::try_from(sundial_query::queries_waiting()).unwrap_or(i64::MAX));
    m.render()
}

/// The HTTP listener: HTTPS and plain HTTP on one port, told apart by each connection's first
/// byte (`sundial_tls::accept`). A background task accepts TCP connections and runs their
/// handshakes apart, so a slow client never holds up the accepts of others: each within the
/// handshake timeout, and at most `--http-handshakes-max` at once, past which the oldest
/// still under way is closed to make room (see `admission`), so silent sockets cannot lock
/// clients out. [`next`](CountedListener::next) takes the finished ones from a bounded queue.
/// Each connection is counted in `sundial_connections_active` until it closes, and gets
/// TCP_NODELAY: answers are small and written once, so Nagle must not hold them for the
/// peer's ACK. A plain connection that the TLS policy refuses for its peer gets a plain-text
/// 403 and is closed.
pub(crate) struct CountedListener {
    ready: mpsc::Receiver<(Counted, SocketAddr)>,
    /// The accepting task, stopped when the listener is dropped (with every handshake).
    acceptor: tokio::task::JoinHandle<()>,
}

/// Connections ready to serve that have not been taken yet.
const READY_MAX: usize = 64;
/// The most of a refused plain request read before the 403 (the rest is not waited for).
const REFUSED_REQUEST_BYTES_MAX: usize = 16 << 10;

impl CountedListener {
    /// `handshakes_max`: first bytes and TLS handshakes awaited at once.
    pub(crate) fn new(listener: TcpListener, tls: ListenerTls, handshakes_max: usize) -> Self {
        let (send, ready) = mpsc::channel(READY_MAX);
        let arrivals = Arrivals::new(handshakes_max, "HTTP", "--http-handshakes-max");
        let acceptor = tokio::spawn(accept_connections(listener, tls, arrivals, send));
        CountedListener { ready, acceptor }
    }

    /// The next connection, TLS or plain; pending forever once the acceptor is gone.
    pub(crate) async fn next(&mut self) -> (Counted, SocketAddr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The acceptor ended (it does not, short of a panic): nothing more to serve.
            None => std::future::pending().await,
        }
    }
}

impl Drop for CountedListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

/// Accepts TCP connections (axum's accept loop: errors such as too many open files are
/// waited out) and hands each to a handshake task holding an [`Arrival`] place. Without a
/// certificate there is nothing to tell apart: connections are handed on at once.
async fn accept_connections(
    mut listener: TcpListener,
    tls: ListenerTls,
    arrivals: Arc<Arrivals>,
    ready: mpsc::Sender<(Counted, SocketAddr)>,
) {
    // Finished and evicted handshakes end at once, so this holds at most the budget of live
    // tasks (plus ones ending).
    let mut handshakes = JoinSet::new();
    loop {
        while handshakes.try_join_next().is_some() {}
        let (stream, peer) = tokio::select! {
            accepted = axum::serve::Listener::accept(&mut listener) => accepted,
            _ = ready.closed() => return,
        };
        let _ = stream.set_nodelay(true);
        if tls.tls.is_none() {
            if ready
                .send((Counted::new(MaybeTls::Plain(stream)), peer))
                .await
                .is_err()
            {
                return;
            }
            continue;
        }
        let arrival = arrivals.arrive();
        handshakes.spawn(handshake(stream, peer, tls.clone(), arrival, ready.clone()));
    }
}

/// Tells HTTPS from HTTP on one connection and hands it on, or refuses it by the TLS policy;
/// closes it if newer connections evict it first.
async fn handshake(
    stream: TcpStream,
    peer: SocketAddr,
    tls: ListenerTls,
    arrival: Arrival,
    ready: mpsc::Sender<(Counted, SocketAddr)>,
) {
    let accepted = tokio::select! {
        accepted = sundial_tls::accept(stream, tls.tls.as_deref(), tls.handshake_timeout) => {
            accepted
        }
        _ = arrival.evicted() => {
            tracing::debug!("HTTP {peer}: closed before its first request, for newer connections");
            return;
        }
    };
    let stream = match accepted {
        Ok(stream) => stream,
        Err(e) => {
            // Browsers abandon handshakes with certificates they do not trust, scanners probe:
            // not worth more than a debug line each.
            tracing::debug!("HTTP: {e}");
            return;
        }
    };
    if !stream.is_tls() && !tls.allows_plain(&peer) {
        tokio::select! {
            _ = refuse_plain(stream, peer, tls.handshake_timeout) => {}
            _ = arrival.evicted() => {}
        }
        return;
    }
    drop(arrival);
    let _ = ready.send((Counted::new(stream), peer)).await;
}

/// Answers a plain HTTP connection the policy refuses with a 403 that says why, after reading
/// its request head (so closing does not reset the connection before the client reads it).
async fn refuse_plain(mut stream: MaybeTls, peer: SocketAddr, patience: std::time::Duration) {
    let mut head = Vec::with_capacity(1024);
    let _ = tokio::time::timeout(patience, async {
        let mut chunk = [0u8; 1024];
        while head.len() < REFUSED_REQUEST_BYTES_MAX && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    let body =
        format!("HTTPS is required for connections from {peer}: use https:// (--tls-require)\n");
    let answer = format!(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(patience, async {
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
    tracing::debug!("HTTP {peer}: plain HTTP refused (--tls-require)");
}

/// An accepted HTTP connection, counted while it lives.
pub(crate) struct Counted {
    stream: MaybeTls,
    _open: ConnectionGuard,
}

impl Counted {
    fn new(stream: MaybeTls) -> Counted {
        Counted {
            stream,
            _open: metrics().connection(Connection::Http),
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
