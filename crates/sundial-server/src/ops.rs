//! Operations endpoints on the HTTP port: `GET /metrics` (Prometheus text format, see
//! sundial-metrics and docs/operations.md), `GET /status` and its alias `GET /health` (for load
//! balancers and the web console), and the counting of open HTTP connections.
//!
//! ```text
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
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::ilp::Shared;

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
    m.render()
}

/// The HTTP listener, counting each accepted connection in `sundial_connections_active` until
/// it closes. Connections get TCP_NODELAY: answers are small and written once, so Nagle must
/// not hold them for the peer's ACK.
pub(crate) struct CountedListener(pub(crate) TcpListener);

impl axum::serve::Listener for CountedListener {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Counted, SocketAddr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.0).await;
        let _ = stream.set_nodelay(true);
        let counted = Counted {
            stream,
            _open: metrics().connection(Connection::Http),
        };
        (counted, addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// An accepted HTTP connection, counted while it lives.
pub(crate) struct Counted {
    stream: TcpStream,
    _open: ConnectionGuard,
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
