//! What the ILP transports share: the table sinks their rows meet in, the ingestion settings,
//! the counters, and feeding received bytes to an [`Ingestor`].
//!
//! ```text
//!  serve (wiring) ──▶ ilp_tcp, ilp_udp, ilp_http (transports) ──▶ ilp (this module)
//! ```
//!
//! This module imports none of the others: the transports depend on it, and the wiring on
//! them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sundial_ilp::{LineSpan, LineSplitter, Precision};
use sundial_ingest::{IngestOptions, IngestStats, Ingestor, Sinks, TableCounts};
use tokio::sync::watch;

/// The way lines arrive; counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Tcp,
    Udp,
    Http,
}

impl Transport {
    const ALL: [Transport; 3] = [Transport::Tcp, Transport::Udp, Transport::Http];

    fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "TCP",
            Transport::Udp => "UDP",
            Transport::Http => "HTTP",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn metric(self) -> sundial_metrics::Transport {
        match self {
            Transport::Tcp => sundial_metrics::Transport::Tcp,
            Transport::Udp => sundial_metrics::Transport::Udp,
            Transport::Http => sundial_metrics::Transport::Http,
        }
    }
}

/// Lines per transport and per table, for the logs.
#[derive(Default)]
struct Counters {
    accepted: [AtomicU64; 3],
    rejected: [AtomicU64; 3],
    /// Lines accepted and rejected per table, by transport.
    tables: Mutex<BTreeMap<String, [TableCounts; 3]>>,
}

/// How often the counters are logged while they change.
const COUNTERS_LOG_INTERVAL_S: u64 = 60;

/// The state every ILP receiver of one server shares.
pub(crate) struct Shared {
    /// Where every receiver's rows for a table meet before a commit.
    pub(crate) sinks: Arc<Sinks>,
    pub(crate) ingest: IngestOptions,
    /// A TCP connection that sent nothing for this long is closed.
    pub(crate) tcp_idle_timeout_ms: u64,
    /// TCP connections served at once; more are closed once they have spoken.
    pub(crate) tcp_connections_max: usize,
    /// Largest accepted HTTP `/write` body, after gzip decoding.
    pub(crate) http_body_bytes_max: usize,
    counters: Counters,
}

impl Shared {
    pub(crate) fn new(
        sinks: Arc<Sinks>,
        ingest: IngestOptions,
        tcp_idle_timeout_ms: u64,
        tcp_connections_max: usize,
        http_body_bytes_max: usize,
    ) -> Shared {
        Shared {
            sinks,
            ingest,
            tcp_idle_timeout_ms,
            tcp_connections_max,
            http_body_bytes_max,
            counters: Counters::default(),
        }
    }

    /// Counts the lines `ingestor` accepted and rejected since its stats were `before`.
    pub(crate) fn count(&self, transport: Transport, ingestor: &Ingestor, before: IngestStats) {
        let now = ingestor.stats();
        let i = transport.index();
        let accepted = now.lines_accepted - before.lines_accepted;
        let rejected = now.lines_rejected - before.lines_rejected;
        self.counters.accepted[i].fetch_add(accepted, Ordering::Relaxed);
        self.counters.rejected[i].fetch_add(rejected, Ordering::Relaxed);
        sundial_metrics::metrics().ilp_lines(transport.metric(), accepted, rejected);
    }

    /// Counts `lines` rejected before they reached an ingestor (no table known).
    pub(crate) fn count_rejected(&self, transport: Transport, lines: u64) {
        self.counters.rejected[transport.index()].fetch_add(lines, Ordering::Relaxed);
        let metrics = sundial_metrics::metrics();
        metrics.ilp_lines(transport.metric(), 0, lines);
        metrics.ilp_table_rows(transport.metric(), "", 0, lines);
    }

    /// Moves the ingestor's per-table counts into the server's.
    pub(crate) fn count_tables(&self, transport: Transport, ingestor: &mut Ingestor) {
        let counts = ingestor.take_table_counts();
        if counts.is_empty() {
            return;
        }
        let Ok(mut tables) = self.counters.tables.lock() else {
            return;
        };
        for (table, c) in counts {
            // Lines for tables that do not exist (rejected: a bad name, or creating it failed)
            // share one name, so that neither the counters nor the metrics grow with junk.
            let table = self
                .sinks
                .db()
                .table(&table)
                .map_or(String::new(), |t| t.name());
            let (transport_label, metrics) = (transport.metric(), sundial_metrics::metrics());
            metrics.ilp_table_rows(transport_label, &table, c.lines_accepted, c.lines_rejected);
            let entry = tables.entry(table).or_default();
            entry[transport.index()].lines_accepted += c.lines_accepted;
            entry[transport.index()].lines_rejected += c.lines_rejected;
        }
    }

    /// Changes whenever a line is counted.
    fn fingerprint(&self) -> u64 {
        Transport::ALL.iter().fold(0u64, |f, t| {
            let (c, i) = (&self.counters, t.index());
            f.wrapping_mul(31).wrapping_add(
                c.accepted[i].load(Ordering::Relaxed) + c.rejected[i].load(Ordering::Relaxed),
            )
        })
    }

    /// Logs lines per transport and per table.
    pub(crate) fn log_counters(&self) {
        let c = &self.counters;
        for t in Transport::ALL {
            let (accepted, rejected) = (
                c.accepted[t.index()].load(Ordering::Relaxed),
                c.rejected[t.index()].load(Ordering::Relaxed),
            );
            if accepted + rejected > 0 {
                tracing::info!(
                    "ILP/{}: {accepted} lines accepted, {rejected} rejected",
                    t.name()
                );
            }
        }
        if let Ok(tables) = c.tables.lock() {
            for (table, counts) in tables.iter() {
                log_table_counts(table, counts);
            }
        }
    }

    /// Logs the counters every [`COUNTERS_LOG_INTERVAL_S`] while they change, until `stop`.
    pub(crate) async fn report_counters(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(Duration::from_secs(COUNTERS_LOG_INTERVAL_S));
        tick.tick().await;
        let mut last = 0;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.wait_for(|s| *s) => break,
            }
            let fingerprint = self.fingerprint();
            if fingerprint != last {
                self.log_counters();
                last = fingerprint;
            }
        }
    }
}

fn log_table_counts(table: &str, counts: &[TableCounts; 3]) {
    // Lines that named no existing table are counted under "".
    let table = if table.is_empty() {
        "(no such table)"
    } else {
        table
    };
    for t in Transport::ALL {
        let TableCounts {
            lines_accepted,
            lines_rejected,
        } = counts[t.index()];
        if lines_accepted + lines_rejected > 0 {
            tracing::info!(
                "ILP/{} table '{table}': {lines_accepted} lines accepted, {lines_rejected} \
                 rejected",
                t.name()
            );
        }
    }
}

/// The receiver's clock, for lines without a timestamp: nanoseconds since the Unix epoch.
pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Feeds every complete line of `buf` to the ingestor; returns the bytes consumed. With
/// `last`, an unterminated last line counts as complete. Blocks (ingesting may commit): async
/// callers run it on a thread that may block (see `ilp_tcp::ingest_lines`).
pub(crate) fn feed_lines(
    ingestor: &mut Ingestor,
    splitter: &mut LineSplitter,
    buf: &[u8],
    last: bool,
    peer: SocketAddr,
) -> usize {
    let now = now_ns();
    let line_bytes_max = ingestor.options().line_bytes_max;
    let mut on_line = |span: LineSpan| match span {
        LineSpan::Line(range) => {
            if let Err(e) = ingestor.ingest_line(&buf[range], Precision::Nanos, now) {
                tracing::warn!("ILP from {peer}: line rejected: {e}");
            }
        }
        LineSpan::TooLong(_) => {
            tracing::warn!("ILP from {peer}: line longer than {line_bytes_max} bytes rejected")
        }
    };
    if last {
        splitter.split_final(buf, &mut on_line);
        buf.len()
    } else {
        splitter.split(buf, &mut on_line)
    }
}
