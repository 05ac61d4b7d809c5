//! # sundial-ingest
//!
//! Turns InfluxDB line protocol into committed rows. Every receiver (a TCP connection, the UDP
//! thread, an HTTP `/write` request) owns an [`Ingestor`]: it parses each line, finds or creates
//! the table and its columns, and appends the values to the table's Arrow builders. Buffered rows
//! go to the table's sink, where every receiver's rows for that table meet, and the sink commits
//! them through the table's writer.
//!
//! ```text
//!  bytes ─▶ sundial_ilp::LineSplitter ─▶ Ingestor::ingest_line ─▶ LineParser
//!                                          │ table missing?  create (tags SYMBOL, fields
//!                                          │                 LONG/DOUBLE/VARCHAR/BOOLEAN)
//!                                          │ column missing? hand the rows so far to the
//!                                          │                 sink, ADD COLUMN
//!                                          ▼
//!   TableBatch (per table, per Ingestor: Arrow builders)
//!        │ hand off: at commit_rows / 8 rows, at flush, at flush_due once the oldest waited
//!        ▼
//!   TableSink (per table, shared through Sinks) ◀── Sinks::write (SQL INSERT, waits)
//!        │ commit: at commit_rows pending, the ◀── BulkLoad (COPY, /imp, import: one
//!        │   rows up to the receivers' low         chunk of chunk_bytes per commit, waits)
//!        │   watermark; at flush_due likewise (everything after 2 x the interval);
//!        │   at flush (a receiver pauses or closes) or for a waiting writer, everything
//!        ▼
//!   sort by timestamp ─▶ TableWriter::append + commit (one commit per table at a time)
//! ```
//!
//! Every writer of a table's rows goes through its sink, so the table's writer is only held
//! during a commit: a bulk load ([`Sinks::bulk`]) commits chunk by chunk, and ILP rows and
//! INSERTs commit between (or with) its chunks instead of waiting for the load to end.
//!
//! Modules depend one way: `lib` (the [`Ingestor`]) ─▶ `batch` ─▶ `sink` ─▶ `error`, and
//! `bulk` ─▶ `sink`. The Arrow type each column travels as is storage's
//! `ColumnType::write_type`, and storage's `to_write_type` casts to it.
//!
//! A line is all or nothing: it is checked completely (names, types, ranges) before any of its
//! values is appended, so a rejected line leaves the buffers as they were. Timestamps, the
//! designated one (converted from its precision without wrapping) and `...t` / `...n` field
//! values alike, must be inside the range tables hold
//! ([`sundial_storage::TIMESTAMP_RANGE_TEXT`]); a line without a timestamp takes the receiver's
//! clock. Should storage still refuse a commit, the sink commits its batches one by one and
//! halves a refused batch, so only the rows storage refuses are lost (see [`Sinks`]).

mod batch;
mod bulk;
mod error;
mod sink;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use sundial_ilp::{FieldValue, LineParser, Precision};
use sundial_storage::{
    ColumnType, Database, PartitionBy, StorageError, TIMESTAMP_RANGE_TEXT, TableDef,
    timestamp_in_range,
};

use crate::batch::{TableBatch, Texts, ValueRef};

/// Source of `Ingestor::id`.
static NEXT_RECEIVER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
pub use crate::bulk::BulkLoad;
pub use crate::error::IngestError;
pub use crate::sink::Sinks;

/// Settings of an [`Ingestor`].
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Name of the designated timestamp column of tables created by ILP.
    pub timestamp_column: String,
    /// Partitioning of tables created by ILP.
    pub partition_by: PartitionBy,
    /// Longest accepted line, in bytes.
    pub line_bytes_max: usize,
    /// A table's buffered rows are committed once there are this many...
    pub commit_rows: usize,
    /// ...or once the oldest has waited this long.
    pub commit_interval_ms: u64,
    /// A receiver whose sender has sent nothing for this long commits what it buffered (TCP:
    /// the connection; UDP: every sender), so rows are queryable soon after a sender pauses
    /// or closes rather than at the next `commit_interval_ms` tick.
    pub pause_commit_ms: u64,
    /// Tables created by ILP get `DEDUP UPSERT KEYS` on the designated timestamp and the tags
    /// of the line that creates them, so a sender that resends lines stores them once.
    pub dedup_tags: bool,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            timestamp_column: "timestamp".into(),
            partition_by: PartitionBy::Day,
            line_bytes_max: 1 << 20,
            commit_rows: 100_000,
            commit_interval_ms: 1_000,
            pause_commit_ms: 50,
            dedup_tags: false,
        }
    }
}

/// The designated timestamp of a line, `value` in `precision`, in nanoseconds: refused when
/// the conversion overflows or the result is outside the range tables hold.
fn designated_timestamp(value: i64, precision: Precision) -> Result<i64, IngestError> {
    match precision.to_nanos(value) {
        Some(ns) if timestamp_in_range(ns) => Ok(ns),
        _ => Err(IngestError::Rejected(format!(
            "timestamp {value} (precision {}) is out of range: timestamps must be from {}",
            precision.unit(),
            TIMESTAMP_RANGE_TEXT
        ))),
    }
}

/// The error for a timestamp field value (`suffix` `t`: microseconds, `n`: nanoseconds) outside
/// the range tables hold.
fn field_timestamp_out_of_range(field: &str, value: i64, suffix: char) -> IngestError {
    IngestError::Rejected(format!(
        "field '{field}': timestamp {value}{suffix} is out of range: timestamps must be from {}",
        TIMESTAMP_RANGE_TEXT
    ))
}

/// Counters of one ingestor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestStats {
    pub lines_accepted: u64,
    pub lines_rejected: u64,
    pub rows_committed: u64,
}

/// Lines accepted (handed to the table) and rejected for one table since the counts were last
/// taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableCounts {
    pub lines_accepted: u64,
    pub lines_rejected: u64,
}

/// Buffers ILP lines per table and commits them. Not shared between threads: each receiver
/// task has its own; they meet only at the table writers.
pub struct Ingestor {
    db: Arc<Database>,
    sinks: Arc<Sinks>,
    options: IngestOptions,
    parser: LineParser,
    tables: foldhash::HashMap<String, TableBatch>,
    /// Names this receiver in the sinks' watermarks.
    id: u64,
    stats: IngestStats,
    table_counts: HashMap<String, TableCounts>,
    // Per-line scratch space, reused so that steady-state ingestion does not allocate.
    texts: Texts,
    values: Vec<(usize, ColumnType, ValueRef)>,
    unescape_buf: String,
}

impl Ingestor {
    /// An ingestor of its own; receivers of one server share their [`Sinks`] instead
    /// ([`Ingestor::with_sinks`]) so that their rows for a table are committed together.
    pub fn new(db: Arc<Database>, options: IngestOptions) -> Ingestor {
        Ingestor::with_sinks(Sinks::new(db), options)
    }

    pub fn with_sinks(sinks: Arc<Sinks>, options: IngestOptions) -> Ingestor {
        let parser = LineParser::new(options.line_bytes_max);
        Ingestor {
            id: NEXT_RECEIVER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            db: sinks.db().clone(),
            sinks,
            options,
            parser,
            tables: foldhash::HashMap::default(),
            stats: IngestStats::default(),
            table_counts: HashMap::new(),
            texts: Texts::default(),
            values: Vec::new(),
            unescape_buf: String::new(),
        }
    }

    pub fn options(&self) -> &IngestOptions {
        &self.options
    }

    pub fn stats(&self) -> IngestStats {
        self.stats
    }

    /// Per-table counts since the last call, by table name; the counts start again from zero.
    pub fn take_table_counts(&mut self) -> HashMap<String, TableCounts> {
        std::mem::take(&mut self.table_counts)
    }

    fn count_hand_off(&mut self, table: &str, rows: u64) {
        if rows == 0 {
            return;
        }
        match self.table_counts.get_mut(table) {
            Some(c) => c.lines_accepted += rows,
            None => {
                let counts = TableCounts {
                    lines_accepted: rows,
                    lines_rejected: 0,
                };
                self.table_counts.insert(table.to_string(), counts);
            }
        }
    }

    /// Rows buffered and not yet committed.
    pub fn pending_rows(&self) -> usize {
        self.tables.values().map(TableBatch::rows).sum()
    }

    /// Parses one line (without its newline) and buffers its row. `now_ns` is used when the
    /// line has no timestamp. On error nothing of the line is kept.
    pub fn ingest_line(
        &mut self,
        line: &[u8],
        precision: Precision,
        now_ns: i64,
    ) -> Result<(), IngestError> {
        let result = self.ingest(line, precision, now_ns);
        match &result {
            Ok(()) => self.stats.lines_accepted += 1,
            Err(_) => self.stats.lines_rejected += 1,
        }
        result
    }

    fn ingest(
        &mut self,
        line: &[u8],
        precision: Precision,
        now_ns: i64,
    ) -> Result<(), IngestError> {
        let mut texts = std::mem::take(&mut self.texts);
        let mut values = std::mem::take(&mut self.values);
        let result = self.parse_into(line, precision, now_ns, &mut texts, &mut values);
        let result = result.and_then(|timestamp| self.buffer_row(&texts, &values, timestamp));
        if result.is_err() && !texts.is_empty() {
            let table = texts.get(0);
            if !self.table_counts.contains_key(table) {
                self.table_counts
                    .insert(table.to_string(), TableCounts::default());
            }
            if let Some(c) = self.table_counts.get_mut(table) {
                c.lines_rejected += 1;
            }
        }
        self.texts = texts;
        self.values = values;
        result
    }

    /// Parses a line into unescaped texts (measurement first) and typed values; returns the
    /// row's timestamp in nanoseconds.
    fn parse_into(
        &mut self,
        line: &[u8],
        precision: Precision,
        now_ns: i64,
        texts: &mut Texts,
        values: &mut Vec<(usize, ColumnType, ValueRef)>,
    ) -> Result<i64, IngestError> {
        texts.clear();
        values.clear();
        let unescape = &mut self.unescape_buf;
        let parsed = self.parser.parse_line(line)?;
        let timestamp = match parsed.timestamp() {
            Some(t) => designated_timestamp(t, precision)?,
            None => now_ns,
        };
        texts.push(parsed.measurement().unescape(unescape));
        for (k, v) in parsed.tags() {
            let key = texts.push(k.unescape(unescape));
            let value = texts.push(v.unescape(unescape));
            values.push((key, ColumnType::Symbol, ValueRef::Text(value)));
        }
        for (k, v) in parsed.fields() {
            let key = texts.push(k.unescape(unescape));
            let (column_type, value) = match v {
                FieldValue::Float(f) => (ColumnType::Double, ValueRef::Float(f)),
                FieldValue::Integer(i) => (ColumnType::Long, ValueRef::Int(i)),
                FieldValue::UInteger(u) => match i64::try_from(u) {
                    Ok(i) => (ColumnType::Long, ValueRef::Int(i)),
                    Err(_) => {
                        return Err(IngestError::Rejected(format!(
                            "unsigned value {u} is out of range for LONG"
                        )));
                    }
                },
                FieldValue::Str(s) => (
                    ColumnType::Varchar,
                    ValueRef::Text(texts.push(s.unescape(unescape))),
                ),
                FieldValue::Bool(b) => (ColumnType::Boolean, ValueRef::Bool(b)),
                FieldValue::TimestampNanos(ns) => {
                    if !timestamp_in_range(ns) {
                        return Err(field_timestamp_out_of_range(texts.get(key), ns, 'n'));
                    }
                    (ColumnType::Timestamp, ValueRef::Time(ns))
                }
                FieldValue::TimestampMicros(us) => match us.checked_mul(1_000) {
                    Some(ns) if timestamp_in_range(ns) => {
                        (ColumnType::Timestamp, ValueRef::Time(ns))
                    }
                    _ => return Err(field_timestamp_out_of_range(texts.get(key), us, 't')),
                },
            };
            values.push((key, column_type, value));
        }
        Ok(timestamp)
    }

    fn buffer_row(
        &mut self,
        texts: &Texts,
        values: &[(usize, ColumnType, ValueRef)],
        timestamp: i64,
    ) -> Result<(), IngestError> {
        let table_name = texts.get(0);
        if !self.tables.contains_key(table_name) {
            let table = match self.db.table(table_name) {
                Some(t) => t,
                None => {
                    let mut columns =
                        vec![(self.options.timestamp_column.clone(), ColumnType::Timestamp)];
                    for (key, column_type, _) in values {
                        let name = texts.get(*key);
                        if !columns.iter().any(|(c, _)| c.eq_ignore_ascii_case(name)) {
                            columns.push((name.to_string(), *column_type));
                        }
                    }
                    // Tags are the line's SYMBOL values.
                    let dedup_keys = if self.options.dedup_tags {
                        columns
                            .iter()
                            .enumerate()
                            .filter(|(i, (_, t))| *i == 0 || *t == ColumnType::Symbol)
                            .map(|(_, (name, _))| name.clone())
                            .collect()
                    } else {
                        Vec::new()
                    };
                    let def = TableDef {
                        name: table_name.to_string(),
                        columns,
                        timestamp: Some(self.options.timestamp_column.clone()),
                        partition_by: self.options.partition_by,
                        indexed: Vec::new(),
                        dedup_keys,
                    };
                    self.db.create_table(def, true)?
                }
            };
            let sink = self.sinks.sink(&table);
            self.tables.insert(
                table_name.to_string(),
                TableBatch::new(table, sink, self.id),
            );
        }
        let hand_off_rows = self.hand_off_rows();
        let batch = self
            .tables
            .get_mut(table_name)
            .ok_or_else(|| StorageError::Internal("table batch vanished".into()))?;
        batch.add_row(texts, values, timestamp)?;
        if batch.rows() >= hand_off_rows {
            let rows = batch.hand_off(self.options.commit_rows)?;
            self.count_hand_off(table_name, rows);
        }
        Ok(())
    }

    /// Rows a table buffers before they go to its sink: a fraction of `commit_rows`, so that
    /// the rows of parallel receivers meet in the sink before a commit.
    fn hand_off_rows(&self) -> usize {
        (self.options.commit_rows / 8).max(1)
    }

    /// Commits every table's buffered rows (and whatever other receivers left pending for the
    /// same tables); returns the rows committed.
    pub fn flush(&mut self) -> Result<u64, IngestError> {
        self.hand_off_where(|_| true)?;
        for batch in self.tables.values() {
            batch.sink().leave(batch.receiver());
        }
        self.commit_sinks(|sink| sink.commit_all())
    }

    /// Commits the tables whose oldest buffered or pending row has waited `commit_interval_ms`.
    pub fn flush_due(&mut self, now: Instant) -> Result<u64, IngestError> {
        let interval = Duration::from_millis(self.options.commit_interval_ms);
        self.hand_off_where(|batch| {
            batch
                .oldest()
                .is_some_and(|t| now.duration_since(t) >= interval)
        })?;
        self.commit_sinks(|sink| sink.commit_due(now, interval))
    }

    /// Hands the tables `due` picks to their sinks; every one is tried even when one fails.
    fn hand_off_where(&mut self, due: impl Fn(&TableBatch) -> bool) -> Result<(), IngestError> {
        let mut first_error = None;
        let commit_rows = self.options.commit_rows;
        let mut tables = std::mem::take(&mut self.tables);
        for batch in tables.values_mut().filter(|b| due(b)) {
            match batch.hand_off(commit_rows) {
                Ok(n) => self.count_hand_off(batch.table_name(), n),
                Err(e) => {
                    tracing::error!("commit to '{}' failed: {e}", batch.table_name());
                    first_error.get_or_insert(e);
                }
            }
        }
        self.tables = tables;
        first_error.map_or(Ok(()), Err)
    }

    fn commit_sinks(
        &mut self,
        commit: impl Fn(&sink::TableSink) -> Result<u64, IngestError>,
    ) -> Result<u64, IngestError> {
        let mut rows = 0;
        let mut first_error = None;
        for batch in self.tables.values() {
            match commit(batch.sink()) {
                Ok(n) => rows += n,
                Err(e) => {
                    tracing::error!("commit to '{}' failed: {e}", batch.table_name());
                    first_error.get_or_insert(e);
                }
            }
        }
        self.stats.rows_committed += rows;
        first_error.map_or(Ok(rows), Err)
    }
}
