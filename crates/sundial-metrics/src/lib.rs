//! # sundial-metrics
//!
//! Every operational metric of a Sundial server, defined once with its help text, in one
//! Prometheus registry that `GET /metrics` renders; and the statement log (failed and slow
//! statements) that the SQL front ends share.
//!
//! ```text
//!  sundial-storage (commits) ─┐
//!  sundial-ingest (rows)      ├─▶ metrics() : Metrics (one registry, process-wide) ─▶ render()
//!  sundial-pgwire, -http      │     counters and histograms: updated where things happen
//!  sundial-server (ILP, ops) ─┘     gauges of state (tables, disk, pending rows, memory):
//!                                   set by the scraper just before render()
//! ```
//!
//! This crate is a leaf: it depends on the `prometheus` crate and `tracing` only, so every other
//! crate may use it without changing which way dependencies point.
//!
//! Invariants:
//! - metric names start with `sundial_` and end with their unit (`_seconds`, `_bytes`,
//!   `_total` for counters); process metrics are the `prometheus` crate's standard `process_*`;
//! - label values come from closed sets (the enums here) except `table`, which the callers keep
//!   to tables of the catalog (`""` for a line that named no existing table), so the number of
//!   series is bounded by the number of tables;
//! - hot paths touch pre-resolved handles (an atomic add, or one histogram observation), once
//!   per batch or commit, never per row, and never allocate.

mod statement;

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

pub use crate::statement::{
    LOGGED_STATEMENT_BYTES_MAX, QueryOutcome, SLOW_QUERY_MS_DEFAULT, query_finished,
    set_slow_query_ms, slow_query_ms, statement_for_log,
};

/// How ILP lines arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
    Http,
}

impl Transport {
    pub const ALL: [Transport; 3] = [Transport::Tcp, Transport::Udp, Transport::Http];

    /// The `transport` label.
    pub fn label(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
            Transport::Http => "http",
        }
    }

    fn source(self) -> RowSource {
        match self {
            Transport::Tcp => RowSource::IlpTcp,
            Transport::Udp => RowSource::IlpUdp,
            Transport::Http => RowSource::IlpHttp,
        }
    }
}

/// Where ingested rows came from (`sundial_rows_ingested_total`'s `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowSource {
    IlpTcp,
    IlpUdp,
    IlpHttp,
    /// SQL `INSERT` (over any protocol).
    Insert,
    /// `COPY ... FROM STDIN` over PostgreSQL's protocol.
    Copy,
    /// CSV upload over HTTP (`/imp`).
    Imp,
}

impl RowSource {
    pub const ALL: [RowSource; 6] = [
        RowSource::IlpTcp,
        RowSource::IlpUdp,
        RowSource::IlpHttp,
        RowSource::Insert,
        RowSource::Copy,
        RowSource::Imp,
    ];

    pub fn label(self) -> &'static str {
        match self {
            RowSource::IlpTcp => "ilp_tcp",
            RowSource::IlpUdp => "ilp_udp",
            RowSource::IlpHttp => "ilp_http",
            RowSource::Insert => "insert",
            RowSource::Copy => "copy",
            RowSource::Imp => "imp",
        }
    }
}

/// The SQL front end a statement came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Pg,
    Http,
}

impl Protocol {
    pub const ALL: [Protocol; 2] = [Protocol::Pg, Protocol::Http];

    pub fn label(self) -> &'static str {
        match self {
            Protocol::Pg => "pg",
            Protocol::Http => "http",
        }
    }
}

/// How a statement ended (`outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Error,
    /// Cancelled by the client, by a statement timeout, or because the client went away.
    Cancelled,
}

impl Outcome {
    pub const ALL: [Outcome; 3] = [Outcome::Ok, Outcome::Error, Outcome::Cancelled];

    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// Connections counted in `sundial_connections_active`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    Pg,
    Http,
    IlpTcp,
}

impl Connection {
    pub const ALL: [Connection; 3] = [Connection::Pg, Connection::Http, Connection::IlpTcp];

    pub fn label(self) -> &'static str {
        match self {
            Connection::Pg => "pg",
            Connection::Http => "http",
            Connection::IlpTcp => "ilp_tcp",
        }
    }
}

/// Upper bounds of the commit latency histogram, in seconds.
const COMMIT_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Upper bounds of the statement latency histogram, in seconds.
const QUERY_BUCKETS: [f64; 17] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
];

/// Every metric of the process. See docs/operations.md for the table of them.
pub struct Metrics {
    registry: Registry,
    started: Instant,

    /// `sundial_ilp_lines_total{transport, outcome}`: per transport, accepted and rejected.
    ilp_lines: [[IntCounter; 2]; 3],
    /// `sundial_ilp_rows_total{transport, table, outcome}`.
    pub ilp_rows: IntCounterVec,
    rows_ingested: [IntCounter; 6],
    commits: IntCounter,
    commit_errors: IntCounter,
    committed_rows: IntCounter,
    commit_seconds: Histogram,
    /// `sundial_matview_refreshes_total{outcome}`: succeeded, failed.
    matview_refreshes: [IntCounter; 2],
    matview_refresh_seconds: Histogram,
    /// `sundial_last_value_cache_lookups_total{outcome}`: answered from a cache, or not
    /// (the cache was over its budget or behind a change it cannot follow in place).
    last_value_lookups: [IntCounter; 2],
    /// `sundial_last_value_cache_bytes`: memory the last-value caches hold.
    pub last_value_bytes: IntGauge,
    /// `sundial_last_value_cache_keys`: keys the last-value caches hold.
    pub last_value_keys: IntGauge,
    /// `sundial_ingest_pending_rows`, set at scrape time.
    pub pending_rows: IntGauge,
    queries: [[IntCounter; 3]; 2],
    query_seconds: [Histogram; 2],
    connections: [IntGauge; 3],
    /// `sundial_auth_failures_total{protocol}`: failed logins, by listener.
    auth_failures: [IntCounter; 3],
    /// `sundial_query_memory_bytes`, set at scrape time.
    pub query_memory: IntGauge,
    /// `sundial_memory_bytes_max`, set at start (0: no bound).
    pub memory_bytes_max: IntGauge,
    /// `sundial_queries_running`, set at scrape time.
    pub queries_running: IntGauge,
    /// `sundial_queries_waiting`, set at scrape time.
    pub queries_waiting: IntGauge,
    /// `sundial_queries_running_max`, set at start (0: no bound).
    pub queries_running_max: IntGauge,
    /// `sundial_tables`, set at scrape time.
    pub tables: IntGauge,
    /// `sundial_table_disk_bytes{table}`, set at scrape time.
    pub table_disk_bytes: IntGaugeVec,
    /// `sundial_table_partitions{table}`, set at scrape time.
    pub table_partitions: IntGaugeVec,
    /// `sundial_table_rows{table}`, set at scrape time.
    pub table_rows: IntGaugeVec,
    uptime: prometheus::Gauge,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics, created on first use.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Registers `collector` in `registry`; the names here are fixed and distinct, so a failure is
/// a programming error caught by this crate's tests (it would leave the metric out).
fn register<C: prometheus::core::Collector + Clone + 'static>(registry: &Registry, c: &C) {
    if let Err(e) = registry.register(Box::new(c.clone())) {
        tracing::error!("metric not registered: {e}");
    }
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric definition");
    register(registry, &c);
    c
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric definition");
    register(registry, &c);
    c
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid metric definition");
    register(registry, &g);
    g
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric definition");
    register(registry, &g);
    g
}

impl Metrics {
    fn new() -> Metrics {
        let r = Registry::new();
        let ilp_lines = counter_vec(
            &r,
            "sundial_ilp_lines_total",
            "ILP lines received, by transport and outcome (accepted: parsed and buffered; \
             rejected: malformed, too long, or refused by the table).",
            &["transport", "outcome"],
        );
        // Every series of closed label sets exists from the start, at 0, so that rates work
        // from the first scrape.
        let ilp_lines = Transport::ALL.map(|t| {
            [Outcome::ACCEPTED, Outcome::REJECTED]
                .map(|o| ilp_lines.with_label_values(&[t.label(), o]))
        });
        let ilp_rows = counter_vec(
            &r,
            "sundial_ilp_rows_total",
            "ILP rows by transport, table and outcome (accepted: handed to the table for commit; \
             rejected: lines refused for the table). table=\"\" counts lines that named no \
             existing table.",
            &["transport", "table", "outcome"],
        );
        let rows_source = counter_vec(
            &r,
            "sundial_rows_ingested_total",
            "Rows accepted for storage since start, by ingestion path (ILP per transport, SQL \
             INSERT, COPY FROM STDIN, HTTP /imp).",
            &["source"],
        );
        let rows_ingested = RowSource::ALL.map(|s| rows_source.with_label_values(&[s.label()]));
        let commits = counter(
            &r,
            "sundial_commits_total",
            "Table commits that made rows visible (one per transaction).",
        );
        let commit_errors = counter(
            &r,
            "sundial_commit_errors_total",
            "Table commits that failed (their rows rolled back).",
        );
        let committed_rows = counter(
            &r,
            "sundial_committed_rows_total",
            "Rows made visible by table commits (including rows that replaced others by DEDUP).",
        );
        let commit_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "sundial_commit_duration_seconds",
                "Time a table commit takes: sorting and writing the rows, and the sync the \
                 durability mode asks for.",
            )
            .buckets(COMMIT_BUCKETS.to_vec()),
        )
        .expect("valid metric definition");
        register(&r, &commit_seconds);
        let refreshes = counter_vec(
            &r,
            "sundial_matview_refreshes_total",
            "Refreshes of materialized views (background and REFRESH statements), by outcome.",
            &["outcome"],
        );
        let matview_refreshes =
            ["ok", "failed"].map(|outcome| refreshes.with_label_values(&[outcome]));
        let matview_refresh_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "sundial_matview_refresh_duration_seconds",
                "Time a materialized view's refresh takes: its query over the base rows changed \
                 and the commit of the buckets it recomputed.",
            )
            .buckets(COMMIT_BUCKETS.to_vec()),
        )
        .expect("valid metric definition");
        register(&r, &matview_refresh_seconds);
        let lookups = counter_vec(
            &r,
            "sundial_last_value_cache_lookups_total",
            "Queries (LATEST ON, SELECT DISTINCT key, last_cache()) a last-value cache covered, by \
             outcome: served from the cache, or read from the table instead.",
            &["outcome"],
        );
        let last_value_lookups =
            ["hit", "miss"].map(|outcome| lookups.with_label_values(&[outcome]));
        let last_value_bytes = gauge(
            &r,
            "sundial_last_value_cache_bytes",
            "Memory the last-value caches hold, in bytes (bounded by the engine's budget).",
        );
        let last_value_keys = gauge(
            &r,
            "sundial_last_value_cache_keys",
            "Keys (rows) the last-value caches hold.",
        );
        let pending_rows = gauge(
            &r,
            "sundial_ingest_pending_rows",
            "Rows received (ILP, INSERT, COPY, /imp) and handed to the tables' sinks but not yet \
             committed.",
        );
        let queries_vec = counter_vec(
            &r,
            "sundial_queries_total",
            "SQL statements run, by protocol (pg, http) and outcome (ok, error, cancelled: by \
             the client, a statement timeout, or a client that went away).",
            &["protocol", "outcome"],
        );
        let queries = Protocol::ALL
            .map(|p| Outcome::ALL.map(|o| queries_vec.with_label_values(&[p.label(), o.label()])));
        let query_seconds_vec = HistogramVec::new(
            HistogramOpts::new(
                "sundial_query_duration_seconds",
                "Time from a statement's arrival to the end of its answer, by protocol.",
            )
            .buckets(QUERY_BUCKETS.to_vec()),
            &["protocol"],
        )
        .expect("valid metric definition");
        register(&r, &query_seconds_vec);
        let query_seconds =
            Protocol::ALL.map(|p| query_seconds_vec.with_label_values(&[p.label()]));
        let connections_vec = gauge_vec(
            &r,
            "sundial_connections_active",
            "Open client connections, by protocol (pg, http, ilp_tcp).",
            &["protocol"],
        );
        let connections = Connection::ALL.map(|c| connections_vec.with_label_values(&[c.label()]));
        let auth_failures = counter_vec(
            &r,
            "sundial_auth_failures_total",
            "Failed logins (a wrong or unknown user, password, token, session or ILP key), by \
             listener.",
            &["protocol"],
        );
        let auth_failures = Connection::ALL.map(|c| auth_failures.with_label_values(&[c.label()]));
        let query_memory = gauge(
            &r,
            "sundial_query_memory_bytes",
            "Memory that running queries' operators (sorts, joins, aggregations) hold from their \
             memory pools.",
        );
        let memory_bytes_max = gauge(
            &r,
            "sundial_memory_bytes_max",
            "Memory all running queries' operators may hold together (--memory-bytes-max; 0: \
             no bound).",
        );
        let queries_running = gauge(
            &r,
            "sundial_queries_running",
            "Heavy queries executing now (those that read more than a few rows; see \
             --queries-running-max).",
        );
        let queries_waiting = gauge(
            &r,
            "sundial_queries_waiting",
            "Heavy queries waiting for their turn to execute (--queries-running-max).",
        );
        let queries_running_max = gauge(
            &r,
            "sundial_queries_running_max",
            "Heavy queries that may execute at once (--queries-running-max; 0: no bound).",
        );
        let tables = gauge(&r, "sundial_tables", "Tables in the catalog.");
        let table_disk_bytes = gauge_vec(
            &r,
            "sundial_table_disk_bytes",
            "Bytes of a table's partition files on local disk (Parquet parts in a remote cold \
             store count their local cache).",
            &["table"],
        );
        let table_partitions = gauge_vec(
            &r,
            "sundial_table_partitions",
            "Partitions of a table.",
            &["table"],
        );
        let table_rows = gauge_vec(
            &r,
            "sundial_table_rows",
            "Committed rows of a table.",
            &["table"],
        );
        let uptime = prometheus::Gauge::new(
            "sundial_uptime_seconds",
            "Seconds since the server started.",
        )
        .expect("valid metric definition");
        register(&r, &uptime);
        let build = gauge_vec(
            &r,
            "sundial_build_info",
            "Always 1; the version label names the running build.",
            &["version"],
        );
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        #[cfg(target_os = "linux")]
        if let Err(e) = r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        )) {
            tracing::error!("process metrics not registered: {e}");
        }
        Metrics {
            registry: r,
            started: Instant::now(),
            ilp_lines,
            ilp_rows,
            rows_ingested,
            commits,
            commit_errors,
            committed_rows,
            commit_seconds,
            matview_refreshes,
            matview_refresh_seconds,
            last_value_lookups,
            last_value_bytes,
            last_value_keys,
            pending_rows,
            queries,
            query_seconds,
            connections,
            auth_failures,
            query_memory,
            memory_bytes_max,
            queries_running,
            queries_waiting,
            queries_running_max,
            tables,
            table_disk_bytes,
            table_partitions,
            table_rows,
            uptime,
        }
    }

    /// Counts `rows` accepted for storage through `source`.
    pub fn rows_ingested(&self, source: RowSource, rows: u64) {
        if rows > 0 {
            self.rows_ingested[source as usize].inc_by(rows);
        }
    }

    /// Counts ILP lines of one transport, accepted and rejected (also rows ingested).
    pub fn ilp_lines(&self, transport: Transport, accepted: u64, rejected: u64) {
        let [accepted_lines, rejected_lines] = &self.ilp_lines[transport as usize];
        if accepted > 0 {
            accepted_lines.inc_by(accepted);
            self.rows_ingested(transport.source(), accepted);
        }
        if rejected > 0 {
            rejected_lines.inc_by(rejected);
        }
    }

    /// Counts ILP rows of one table (`""`: none of the catalog), accepted and rejected.
    pub fn ilp_table_rows(&self, transport: Transport, table: &str, accepted: u64, rejected: u64) {
        if accepted > 0 {
            self.ilp_rows
                .with_label_values(&[transport.label(), table, Outcome::ACCEPTED])
                .inc_by(accepted);
        }
        if rejected > 0 {
            self.ilp_rows
                .with_label_values(&[transport.label(), table, Outcome::REJECTED])
                .inc_by(rejected);
        }
    }

    /// Rows accepted by every ingestion path since start (`/status`'s `rows_ingested`).
    pub fn rows_ingested_total(&self) -> u64 {
        self.rows_ingested.iter().map(IntCounter::get).sum()
    }

    /// Counts a successful commit of `rows` rows that took `elapsed`.
    pub fn commit(&self, rows: u64, elapsed: Duration) {
        self.commits.inc();
        self.committed_rows.inc_by(rows);
        self.commit_seconds.observe(elapsed.as_secs_f64());
    }

    /// Counts a refresh of a materialized view that took `elapsed`.
    /// A query a last-value cache covered: `hit` if the cache answered it.
    pub fn last_value_lookup(&self, hit: bool) {
        self.last_value_lookups[usize::from(!hit)].inc();
    }

    pub fn matview_refresh(&self, ok: bool, elapsed: Duration) {
        self.matview_refreshes[usize::from(!ok)].inc();
        self.matview_refresh_seconds.observe(elapsed.as_secs_f64());
    }

    /// Counts a failed commit.
    pub fn commit_failed(&self) {
        self.commit_errors.inc();
    }

    /// Counts a finished statement (see [`query_finished`], which also logs).
    pub fn query(&self, protocol: Protocol, outcome: Outcome, elapsed: Duration) {
        self.queries[protocol as usize][outcome as usize].inc();
        self.query_seconds[protocol as usize].observe(elapsed.as_secs_f64());
    }

    /// Counts a failed login on the `kind` listener.
    pub fn auth_failed(&self, kind: Connection) {
        self.auth_failures[kind as usize].inc();
    }

    /// Counts an open connection until the guard is dropped.
    pub fn connection(&self, kind: Connection) -> ConnectionGuard {
        let gauge = self.connections[kind as usize].clone();
        gauge.inc();
        ConnectionGuard(gauge)
    }

    /// Time since the metrics were first used (at server start).
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Drops every series whose `table` label names a table `keep` refuses (a dropped table);
    /// `table=""` stays.
    pub fn retain_tables(&self, keep: &dyn Fn(&str) -> bool) {
        let vecs: [&dyn TableLabelled; 4] = [
            &self.ilp_rows,
            &self.table_disk_bytes,
            &self.table_partitions,
            &self.table_rows,
        ];
        for vec in vecs {
            vec.retain_tables(keep);
        }
    }

    /// Every metric in Prometheus's text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        self.uptime.set(self.uptime().as_secs_f64());
        let families = self.registry.gather();
        let mut out = Vec::with_capacity(16 << 10);
        if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
            tracing::error!("metrics not encoded: {e}");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl Outcome {
    const ACCEPTED: &'static str = "accepted";
    const REJECTED: &'static str = "rejected";
}

/// A metric family with a `table` label whose series of dropped tables can be removed.
trait TableLabelled {
    fn retain_tables(&self, keep: &dyn Fn(&str) -> bool);
}

impl<T: prometheus::core::MetricVecBuilder> TableLabelled for prometheus::core::MetricVec<T> {
    fn retain_tables(&self, keep: &dyn Fn(&str) -> bool) {
        use prometheus::core::Collector;
        for family in self.collect() {
            for metric in family.get_metric() {
                let labels: Vec<(&str, &str)> = metric
                    .get_label()
                    .iter()
                    .map(|l| (l.name(), l.value()))
                    .collect();
                let dropped = labels
                    .iter()
                    .any(|(name, value)| *name == "table" && !value.is_empty() && !keep(value));
                if dropped {
                    let map: std::collections::HashMap<&str, &str> = labels.into_iter().collect();
                    let _ = self.remove(&map);
                }
            }
        }
    }
}

/// Keeps one connection counted in `sundial_connections_active` while it lives.
pub struct ConnectionGuard(IntGauge);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn every_metric_is_registered_and_rendered() {
        let m = metrics();
        m.ilp_lines(Transport::Tcp, 3, 1);
        m.ilp_table_rows(Transport::Tcp, "cpu", 3, 0);
        m.commit(3, Duration::from_millis(2));
        m.query(Protocol::Http, Outcome::Error, Duration::from_millis(5));
        let guard = m.connection(Connection::Pg);
        m.table_disk_bytes.with_label_values(&["cpu"]).set(10);
        m.table_partitions.with_label_values(&["cpu"]).set(1);
        m.table_rows.with_label_values(&["cpu"]).set(3);
        let text = m.render();
        for name in [
            "sundial_ilp_lines_total",
            "sundial_ilp_rows_total",
            "sundial_rows_ingested_total",
            "sundial_commits_total",
            "sundial_commit_errors_total",
            "sundial_committed_rows_total",
            "sundial_commit_duration_seconds",
            "sundial_ingest_pending_rows",
            "sundial_last_value_cache_lookups_total",
            "sundial_last_value_cache_bytes",
            "sundial_last_value_cache_keys",
            "sundial_queries_total",
            "sundial_query_duration_seconds",
            "sundial_connections_active",
            "sundial_auth_failures_total",
            "sundial_query_memory_bytes",
            "sundial_memory_bytes_max",
            "sundial_queries_running",
            "sundial_queries_waiting",
            "sundial_queries_running_max",
            "sundial_tables",
            "sundial_table_disk_bytes",
            "sundial_table_partitions",
            "sundial_table_rows",
            "sundial_uptime_seconds",
            "sundial_build_info",
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} missing:\n{text}"
            );
        }
        #[cfg(target_os = "linux")]
        assert!(text.contains("process_resident_memory_bytes"), "{text}");
        assert!(line(&text, "sundial_connections_active{protocol=\"pg\"} 1").is_some());
        drop(guard);
        let text = m.render();
        assert!(line(&text, "sundial_connections_active{protocol=\"pg\"} 0").is_some());
        assert!(m.rows_ingested_total() >= 3);
    }

    #[test]
    fn dropped_tables_lose_their_series() {
        let m = metrics();
        m.table_partitions.with_label_values(&["gone_table"]).set(2);
        m.ilp_table_rows(Transport::Udp, "gone_table", 1, 1);
        m.ilp_table_rows(Transport::Udp, "", 0, 1);
        assert!(m.render().contains("gone_table"));
        m.retain_tables(&|t| t != "gone_table");
        let text = m.render();
        assert!(!text.contains("gone_table"), "{text}");
        // The catch-all label stays.
        assert!(text.contains("table=\"\""), "{text}");
    }

    #[test]
    fn hostile_table_names_are_escaped() {
        let m = metrics();
        let name = "we\"ird\\na\nme}";
        m.table_rows.with_label_values(&[name]).set(1);
        let text = m.render();
        let escaped = "sundial_table_rows{table=\"we\\\"ird\\\\na\\nme}\"} 1";
        assert!(text.contains(escaped), "{text}");
        m.retain_tables(&|t| t != name);
    }
}
