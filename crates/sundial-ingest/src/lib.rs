//! # sundial-ingest
//!
//! Turns InfluxDB line protocol into committed rows. Every receiver (a TCP connection, the UDP
//! thread, an HTTP `/write` request) owns an [`Ingestor`]: it parses each line, finds or creates
//! the table and its columns, and appends the values to the table's Arrow builders. Buffered rows
//! go to the table's sink, where every receiver's rows for that table meet, and the sink commits
//! them through the table's writer.
//!
//! ```text
//!  bytes ─▶ sundial_ilp::LineSplitter ─▶ Ingestor::ingest_line
//!                                          │ series remembered (SeriesCache)? parse only the
//!                                          │   fields, reuse its table and symbol codes
//!                                          │ otherwise LineParser: the whole line, then
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
//!        │   watermark (on a commit thread); as a receiver pauses (commit_paused), its
//!        │   rows (likewise); at flush_due up to the low watermark (everything after
//!        │   2 x the interval); at flush (a receiver closes) or for a waiting writer,
//!        │   everything
//!        ▼
//!   rows in time order ─▶ TableWriter::append_all + commit (one commit per table at a time)
//! ```
//!
//! A table dropped while receivers hold it (DROP TABLE) is let go of by each receiver at its
//! next line for the table or its next timer call ([`Ingestor::flush_due`], which receivers
//! make idle or not), and by the sinks, so its directory goes then; rows buffered for it are
//! discarded, and later lines for the name create a new table.
//!
//! Every writer of a table's rows goes through its sink, so the table's writer is only held
//! during a commit: a bulk load ([`Sinks::bulk`]) commits chunk by chunk, and ILP rows and
//! INSERTs commit between (or with) its chunks instead of waiting for the load to end.
//!
//! Modules depend one way: `lib` (the [`Ingestor`]) ─▶ `series` ─▶ `batch` ─▶ `sink` ─▶
//! `error`, and `bulk` ─▶ `sink`. The Arrow type each column travels as is storage's
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
mod series;
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

use crate::batch::{BATCH_TEXT_BYTES_MAX, TableBatch, TagCodes, Texts, ValueRef};
use crate::series::SeriesCache;

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

/// What the whole path learnt of a line besides its texts and values.
struct ParsedLine {
    /// The designated timestamp, in nanoseconds.
    timestamp: i64,
    /// How many of the values are tags (they come first).
    tags: usize,
    /// See `sundial_ilp::Line::series_len`.
    series_len: Option<usize>,
}

/// Counters of one ingestor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestStats {
    pub lines_accepted: u64,
    pub lines_rejected: u64,
    pub rows_committed: u64,
    /// Accepted lines of a series the receiver remembered, which skipped parsing and
    /// resolving their measurement and tags.
    pub lines_of_known_series: u64,
}

/// Lines accepted (handed to the table) and rejected for one table since the counts were last
/// taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableCounts {
    pub lines_accepted: u64,
    pub lines_rejected: u64,
}

/// Refuses a line whose designated timestamp is too far ahead of the receiver's clock
/// (`StorageOptions::timestamp_future_ms_max`), as storage would refuse its row.
fn check_future(
    db: &Database,
    table: &str,
    timestamp: i64,
    now_ns: i64,
) -> Result<(), IngestError> {
    Ok(db.options().check_future(table, timestamp, now_ns)?)
}

/// Buffers ILP lines per table and commits them. Not shared between threads: each receiver
/// task has its own; they meet only at the table writers.
pub struct Ingestor {
    db: Arc<Database>,
    sinks: Arc<Sinks>,
    options: IngestOptions,
    parser: LineParser,
    /// One batch per table this receiver has written to, found by name through `table_slots`
    /// and by slot through `series`.
    tables: Vec<TableBatch>,
    table_slots: foldhash::HashMap<String, usize>,
    series: SeriesCache,
    /// Names this receiver in the sinks' watermarks.
    id: u64,
    /// The database refuses rows too far ahead of its clock: lines are checked as they come.
    future_bounded: bool,
    stats: IngestStats,
    table_counts: HashMap<String, TableCounts>,
    // Per-line scratch space, reused so that steady-state ingestion does not allocate.
    texts: Texts,
    values: Vec<(usize, ColumnType, ValueRef)>,
    known_fields: Vec<(usize, ValueRef)>,
    tag_codes: TagCodes,
    unescape_buf: String,
}

/// A field's value as a column type and value; strings are unescaped into `texts`.
fn field_value(
    value: FieldValue<'_>,
    texts: &mut Texts,
    unescape: &mut String,
) -> Result<(ColumnType, ValueRef), FieldError> {
    Ok(match value {
        FieldValue::Float(f) => (ColumnType::Double, ValueRef::Float(f)),
        FieldValue::Integer(i) => (ColumnType::Long, ValueRef::Int(i)),
        FieldValue::UInteger(u) => match i64::try_from(u) {
            Ok(i) => (ColumnType::Long, ValueRef::Int(i)),
            Err(_) => return Err(FieldError::Unsigned(u)),
        },
        FieldValue::Str(s) => (
            ColumnType::Varchar,
            ValueRef::Text(texts.push(s.unescape(unescape))),
        ),
        FieldValue::Bool(b) => (ColumnType::Boolean, ValueRef::Bool(b)),
        FieldValue::TimestampNanos(ns) => {
            if !timestamp_in_range(ns) {
                return Err(FieldError::Timestamp(ns, 'n'));
            }
            (ColumnType::Timestamp, ValueRef::Time(ns))
        }
        FieldValue::TimestampMicros(us) => match us.checked_mul(1_000) {
            Some(ns) if timestamp_in_range(ns) => (ColumnType::Timestamp, ValueRef::Time(ns)),
            _ => return Err(FieldError::Timestamp(us, 't')),
        },
    })
}

/// A field value no column can hold.
enum FieldError {
    Unsigned(u64),
    /// The value and its suffix (`t`: microseconds, `n`: nanoseconds).
    Timestamp(i64, char),
}

impl FieldError {
    fn of_field(self, field: &str) -> IngestError {
        match self {
            FieldError::Unsigned(u) => IngestError::Rejected(format!(
                "field '{field}': unsigned value {u} is out of range for LONG"
            )),
            FieldError::Timestamp(value, suffix) => {
                field_timestamp_out_of_range(field, value, suffix)
            }
        }
    }
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
            future_bounded: sinks.db().options().timestamp_future_ms_max.is_some(),
            db: sinks.db().clone(),
            sinks,
            options,
            parser,
            tables: Vec::new(),
            table_slots: foldhash::HashMap::default(),
            series: SeriesCache::default(),
            stats: IngestStats::default(),
            table_counts: HashMap::new(),
            texts: Texts::default(),
            values: Vec::new(),
            known_fields: Vec::new(),
            tag_codes: TagCodes::new(),
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

    /// Adds to `table`'s counts.
    fn count(counts: &mut HashMap<String, TableCounts>, table: &str, add: TableCounts) {
        match counts.get_mut(table) {
            Some(c) => {
                c.lines_accepted += add.lines_accepted;
                c.lines_rejected += add.lines_rejected;
            }
            None => {
                counts.insert(table.to_string(), add);
            }
        }
    }

    fn count_hand_off(&mut self, table: &str, rows: u64) {
        if rows > 0 {
            let add = TableCounts {
                lines_accepted: rows,
                lines_rejected: 0,
            };
            Self::count(&mut self.table_counts, table, add);
        }
    }

    fn count_rejected(&mut self, table: &str) {
        let add = TableCounts {
            lines_accepted: 0,
            lines_rejected: 1,
        };
        Self::count(&mut self.table_counts, table, add);
    }

    /// Rows buffered and not yet committed.
    pub fn pending_rows(&self) -> usize {
        self.tables.iter().map(TableBatch::rows).sum()
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
        let series_len = sundial_ilp::series_len(line);
        if let Some(len) = series_len
            && let Some(result) = self.ingest_known(line, len, precision, now_ns)
        {
            return result;
        }
        let mut texts = std::mem::take(&mut self.texts);
        let mut values = std::mem::take(&mut self.values);
        let result = self
            .parse_into(line, precision, now_ns, &mut texts, &mut values)
            .and_then(|parsed| {
                // A series is remembered by the bytes `series_len` delimits, and only when the
                // parser agrees that they are the series.
                let key_len = series_len.filter(|len| parsed.series_len == Some(*len));
                let key = key_len.and_then(|len| line.get(..len));
                self.buffer_row(&texts, &values, parsed.tags, parsed.timestamp, key)
            });
        if result.is_err() && !texts.is_empty() {
            self.count_rejected(texts.get(0));
        }
        self.texts = texts;
        self.values = values;
        result
    }

    /// Buffers a line of a series this receiver remembers (`line[..series_len]`), parsing only
    /// its fields. `None` when the line needs the whole path: the series is not remembered or
    /// no longer valid, a field is new, escaped or does not fit its column, or the line is
    /// malformed (the whole path then says what is wrong).
    fn ingest_known(
        &mut self,
        line: &[u8],
        series_len: usize,
        precision: Precision,
        now_ns: i64,
    ) -> Option<Result<(), IngestError>> {
        let series = self.series.get(line.get(..series_len)?)?;
        let batch = self.tables.get_mut(series.table)?;
        // A dropped table: the whole path lets it go and makes the table anew.
        if batch.epoch() != series.epoch || batch.is_dropped() {
            return None;
        }
        let parsed = self.parser.parse_fields(line, series_len).ok()?;
        let timestamp = match parsed.timestamp() {
            Some(t) => designated_timestamp(t, precision).ok()?,
            None => now_ns,
        };
        if self.future_bounded
            && check_future(&self.db, batch.table_name(), timestamp, now_ns).is_err()
        {
            return None;
        }
        self.texts.clear();
        self.known_fields.clear();
        for (position, (key, value)) in parsed.fields().enumerate() {
            let column = batch.field_column(position, key.as_str()?)?;
            let (_, value) = field_value(value, &mut self.texts, &mut self.unescape_buf).ok()?;
            if !batch.field_fits(column, value, &self.texts) {
                return None;
            }
            self.known_fields.push((column, value));
        }
        batch.add_known_row(&series.tags, &self.known_fields, &self.texts, timestamp);
        let slot = series.table;
        let result = self.hand_off_if_full(slot);
        match (&result, self.tables.get(slot)) {
            (Ok(()), _) => self.stats.lines_of_known_series += 1,
            (Err(_), Some(batch)) => {
                let table = batch.table_name().to_string();
                self.count_rejected(&table);
            }
            (Err(_), None) => {}
        }
        Some(result)
    }

    /// Parses a line into unescaped texts (measurement first, then tag keys and values, then
    /// field keys) and typed values (tags first).
    fn parse_into(
        &mut self,
        line: &[u8],
        precision: Precision,
        now_ns: i64,
        texts: &mut Texts,
        values: &mut Vec<(usize, ColumnType, ValueRef)>,
    ) -> Result<ParsedLine, IngestError> {
        texts.clear();
        values.clear();
        let unescape = &mut self.unescape_buf;
        let parsed = self.parser.parse_line(line)?;
        let timestamp = match parsed.timestamp() {
            Some(t) => designated_timestamp(t, precision)?,
            None => now_ns,
        };
        texts.push(parsed.measurement().unescape(unescape));
        if self.future_bounded {
            check_future(&self.db, texts.get(0), timestamp, now_ns)?;
        }
        for (k, v) in parsed.tags() {
            let key = texts.push(k.unescape(unescape));
            let value = texts.push(v.unescape(unescape));
            values.push((key, ColumnType::Symbol, ValueRef::Text(value)));
        }
        for (k, v) in parsed.fields() {
            let key = texts.push(k.unescape(unescape));
            let (column_type, value) =
                field_value(v, texts, unescape).map_err(|e| e.of_field(texts.get(key)))?;
            values.push((key, column_type, value));
        }
        Ok(ParsedLine {
            timestamp,
            tags: parsed.tag_count(),
            series_len: parsed.series_len(),
        })
    }

    /// Buffers a parsed line's row; when `series` is given (the bytes of its measurement and
    /// tags), remembers the series so that its next lines take [`Ingestor::ingest_known`].
    fn buffer_row(
        &mut self,
        texts: &Texts,
        values: &[(usize, ColumnType, ValueRef)],
        tags: usize,
        timestamp: i64,
        series: Option<&[u8]>,
    ) -> Result<(), IngestError> {
        let table_name = texts.get(0);
        let slot = match self.table_slots.get(table_name).copied() {
            Some(slot) if !self.tables.get(slot).is_some_and(TableBatch::is_dropped) => slot,
            Some(_) => {
                // DROP TABLE since: later rows for the name go to a new table.
                self.release_dropped();
                self.open_table(table_name, texts, values)?
            }
            None => self.open_table(table_name, texts, values)?,
        };
        let batch = self
            .tables
            .get_mut(slot)
            .ok_or_else(|| StorageError::Internal("table batch vanished".into()))?;
        let all_symbols = batch.add_row(texts, values, tags, timestamp, &mut self.tag_codes)?;
        if all_symbols && let Some(key) = series {
            self.series
                .insert(key, slot, batch.epoch(), &self.tag_codes);
        }
        self.hand_off_if_full(slot)
    }

    /// A slot for the batch of table `table_name`, created (as the line in `texts` and `values`
    /// describes it) if it does not exist.
    fn open_table(
        &mut self,
        table_name: &str,
        texts: &Texts,
        values: &[(usize, ColumnType, ValueRef)],
    ) -> Result<usize, IngestError> {
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
                    ttl: None,
                    cold_after: None,
                };
                self.db.create_table(def, true)?
            }
        };
        let sink = self.sinks.sink(&table);
        let slot = self.tables.len();
        self.tables.push(TableBatch::new(table, sink, self.id));
        self.table_slots.insert(table_name.to_string(), slot);
        Ok(slot)
    }

    /// Lets go of the tables DROP TABLE dropped, with the rows buffered for them, so that their
    /// files go now (with the last handle) rather than when this receiver ends; the sinks let
    /// go of them too. Later lines for such a name create the table anew.
    fn release_dropped(&mut self) {
        if !self.tables.iter().any(TableBatch::is_dropped) {
            return;
        }
        let mut moved_to = Vec::with_capacity(self.tables.len());
        for batch in std::mem::take(&mut self.tables) {
            if batch.is_dropped() {
                if batch.rows() > 0 {
                    tracing::info!(
                        "{} buffered row(s) for dropped table '{}' discarded",
                        batch.rows(),
                        batch.table_name()
                    );
                }
                batch.sink().leave(self.id);
                moved_to.push(None);
            } else {
                moved_to.push(Some(self.tables.len()));
                self.tables.push(batch);
            }
        }
        self.table_slots
            .retain(|_, slot| match moved_to.get(*slot).copied().flatten() {
                Some(to) => {
                    *slot = to;
                    true
                }
                None => false,
            });
        // Series name table slots, which moved.
        self.series.clear();
        self.sinks.forget_dropped();
    }

    /// Hands the batch in `slot` to its sink once it holds enough rows or text.
    fn hand_off_if_full(&mut self, slot: usize) -> Result<(), IngestError> {
        let hand_off_rows = self.hand_off_rows();
        let Some(batch) = self.tables.get_mut(slot) else {
            return Ok(());
        };
        if batch.rows() >= hand_off_rows || batch.text_bytes() >= BATCH_TEXT_BYTES_MAX {
            let rows = batch.hand_off(self.options.commit_rows)?;
            let table = batch.table_name().to_string();
            self.count_hand_off(&table, rows);
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
        self.release_dropped();
        self.hand_off_where(|_| true)?;
        for batch in &self.tables {
            batch.sink().leave(batch.receiver());
        }
        self.commit_sinks(|sink| sink.commit_all())
    }

    /// Hands every table's buffered rows to its sink and asks for them to be committed, without
    /// waiting (on a commit thread): what a receiver does as its sender pauses. Only rows up to
    /// this receiver's newest are committed: rows of other receivers after them wait for their
    /// own receivers, which may still send older rows.
    pub fn commit_paused(&mut self) -> Result<u64, IngestError> {
        self.release_dropped();
        self.hand_off_where(|_| true)?;
        let receiver = self.id;
        self.commit_sinks(|sink| sink.commit_paused(receiver))
    }

    /// Commits the tables whose oldest buffered or pending row has waited `commit_interval_ms`.
    /// Receivers call it on a timer, idle or not: it is also where they let go of dropped
    /// tables.
    pub fn flush_due(&mut self, now: Instant) -> Result<u64, IngestError> {
        self.release_dropped();
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
        for batch in tables.iter_mut().filter(|b| due(b)) {
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
        for batch in &self.tables {
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
