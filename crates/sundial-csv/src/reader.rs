//! The streaming reader: header, sample, detection, then batch building.
//!
//! Invariants: memory is the sample (at most `infer_rows` records and [`SAMPLE_BYTES_MAX`]
//! bytes) plus one batch plus one record, and a record is at most
//! [`CsvOptions::max_record_bytes`] (a [`Guarded`] input stops the parser past that); every
//! refused row or value is counted, reported to the sink if any, and kept (bounded) in
//! [`CsvStats::errors`].

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, FixedSizeBinaryBuilder, Float64Builder, Int64Builder, LargeStringBuilder,
    StringDictionaryBuilder, TimestampNanosecondBuilder,
};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema, SchemaRef};
use csv::ByteRecord;

use crate::error::ValueProblem;
use crate::error::{CsvError, from_csv, quote_record, quote_value};
use crate::infer::{detect_column, detect_kind};
use crate::options::{Atomicity, ColumnKind, CsvOptions};
use crate::parse::{parse_bool, parse_f64, parse_i64, parse_timestamp_wide, parse_uuid};
use crate::pattern::TimestampFormat;
use crate::reject::{ColumnFallback, RejectAction, RejectSink, Rejection, encode_record};
use sundial_storage::timestamp_in_range;

/// The UTF-8 byte order mark, dropped when it opens the input.
const UTF8_BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
/// Buffer size of the underlying CSV parser.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Cap on the rows preallocated per builder, whatever `batch_rows` says.
const MAX_PREALLOCATED_ROWS: usize = 1 << 20;
/// Sampling stops once the buffered records hold this many bytes, whatever `infer_rows` says.
pub const SAMPLE_BYTES_MAX: usize = 32 << 20;

/// Counters describing what a [`CsvReader`] has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsvStats {
    /// Data records read from the input (header excluded), including the
    /// buffered sample and rejected records.
    pub rows_read: u64,
    /// Rows emitted in batches returned by [`CsvReader::next_batch`].
    pub rows_imported: u64,
    /// Records dropped: wrong number of fields, or (under
    /// [`Atomicity::SkipRow`]) a value that does not parse.
    pub rows_rejected: u64,
    /// Per column, the number of values that did not parse as the column's
    /// type (or were timestamps out of range).
    pub column_errors: Vec<u64>,
    /// The first such value, as a message naming its line, column and value.
    pub first_error: Option<String>,
    /// Rows skipped and values NULLed so far (one per row under `SkipRow`, one per value
    /// under `SkipColumn`, one per record with the wrong number of fields).
    pub errors_total: u64,
    /// The first [`CsvOptions::max_reported_errors`] of them, records shortened.
    pub errors: Vec<Rejection>,
}

/// The byte stream handed to the CSV parser: the input with a leading BOM
/// removed (the first bytes, read ahead to look for it, are replayed).
type Input<R> = Guarded<Unbommed<R>>;

/// The input with a leading BOM removed.
type Unbommed<R> = io::Chain<io::Cursor<Vec<u8>>, R>;

/// The input as the CSV parser reads it, watching the record being parsed: it refuses to
/// deliver more than `limit` bytes past the start of the current record (set by the reader
/// after each record), so a huge record or an unterminated quote cannot make the parser
/// buffer without bound. It also remembers whether the input ended and its last byte that is
/// not a line break, to tell an unterminated quote at the end of the input, and keeps the
/// bytes from the current record's start on (no more than the parser itself holds) to count
/// lines: the `csv` crate's line numbers are off by one after CRLF line breaks.
struct Guarded<R> {
    inner: R,
    delivered: u64,
    record_start: u64,
    limit: u64,
    ended: bool,
    last_byte: Option<u8>,
    /// Delivered bytes from (at most) the chunk holding `record_start` on: each chunk's start
    /// offset and its bytes.
    chunks: VecDeque<(u64, Vec<u8>)>,
    /// Line breaks (`\n`) before offset `counted_to`.
    counted_newlines: u64,
    counted_to: u64,
}

impl<R> Guarded<R> {
    /// Counts the line breaks up to `offset` (at or after the last offset counted to, at most
    /// what was delivered), from the kept chunks.
    fn advance(&mut self, offset: u64) {
        let offset = offset.min(self.delivered);
        if offset <= self.counted_to {
            return;
        }
        for (start, bytes) in &self.chunks {
            let end = start + bytes.len() as u64;
            if end <= self.counted_to {
                continue;
            }
            if *start >= offset {
                break;
            }
            let from = usize::try_from(self.counted_to.saturating_sub(*start)).unwrap_or(0);
            let to = usize::try_from(offset.min(end) - start).unwrap_or(bytes.len());
            self.counted_newlines += count_newlines(&bytes[from..to]) as u64;
        }
        self.counted_to = offset;
    }

    /// The 1-based line of the first byte at or after `offset` that is not a line break (the
    /// `csv` crate's record positions can point at the `\n` of a CRLF, or at blank lines).
    /// `offset` must not be before an offset asked for earlier.
    fn line_at(&mut self, offset: u64) -> u64 {
        self.advance(offset);
        let mut line = self.counted_newlines + 1;
        for (start, bytes) in &self.chunks {
            let end = start + bytes.len() as u64;
            if end <= offset {
                continue;
            }
            let at = usize::try_from(offset.saturating_sub(*start)).unwrap_or(0);
            for &b in &bytes[at..] {
                match b {
                    b'\n' => line += 1,
                    b'\r' => {}
                    _ => return line,
                }
            }
        }
        line
    }

    /// The next record starts at `offset`: bytes before it are no longer needed.
    fn start_record(&mut self, offset: u64) {
        self.advance(offset);
        self.record_start = offset;
        while let Some((start, bytes)) = self.chunks.front() {
            if start + bytes.len() as u64 <= offset {
                self.chunks.pop_front();
            } else {
                break;
            }
        }
    }
}

fn count_newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// The error a [`Guarded`] input returns past its limit.
#[derive(Debug)]
struct RecordTooLong;

impl fmt::Display for RecordTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("record too long")
    }
}

impl std::error::Error for RecordTooLong {}

impl<R: Read> Read for Guarded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.delivered.saturating_sub(self.record_start) > self.limit {
            return Err(io::Error::other(RecordTooLong));
        }
        let n = self.inner.read(buf)?;
        if n == 0 {
            self.ended = true;
            return Ok(0);
        }
        self.chunks.push_back((self.delivered, buf[..n].to_vec()));
        self.delivered += n as u64;
        if let Some(&b) = buf[..n].iter().rev().find(|b| !matches!(b, b'\n' | b'\r')) {
            self.last_byte = Some(b);
        }
        Ok(n)
    }
}

/// Streaming CSV to Arrow reader.
///
/// [`CsvReader::new`] reads the header and buffers up to
/// [`CsvOptions::infer_rows`] records to detect column types; after that
/// [`CsvReader::next_batch`] emits the buffered records followed by the rest
/// of the input, at most [`CsvOptions::batch_rows`] rows per batch. Memory
/// use is bounded by the sample plus one batch, whatever the input size.
///
/// After an error from `next_batch` the reader stays usable (the failed
/// record is skipped), but callers normally give up.
pub struct CsvReader<R: Read> {
    csv: csv::Reader<Input<R>>,
    bom_bytes: u64,
    input_done: bool,
    atomicity: Atomicity,
    batch_rows: usize,
    delimiter: u8,
    max_record_bytes: usize,
    max_reported_errors: usize,
    sink: Option<RejectSink>,
    sample: VecDeque<ByteRecord>,
    /// Fields of the first line: sample records of another width are not sampled.
    width: usize,
    record: ByteRecord,
    batch: BatchBuilder,
    stats: CsvStats,
    header: bool,
    fallbacks: Vec<ColumnFallback>,
}

impl<R: Read> CsvReader<R> {
    /// Reads the header and the sample from `reader` and detects the schema.
    ///
    /// Fails on I/O errors, on an empty input, on bad header names
    /// (duplicates, compared case-insensitively; names a table cannot have; with
    /// [`CsvOptions::require_header`] empty names or a first line that looks like data), on
    /// overrides or a timestamp column naming unknown columns (when header detection took the
    /// first line for data: [`CsvError::HeaderNotDetected`]), on a record longer than
    /// [`CsvOptions::max_record_bytes`] or an unterminated quote, and (under
    /// [`Atomicity::Abort`]) on a sample record with the wrong number of fields.
    pub fn new(reader: R, options: CsvOptions) -> Result<Self, CsvError> {
        Self::with_reject_sink(reader, options, None)
    }

    /// [`CsvReader::new`], handing every [`Rejection`] to `sink` as it happens (the sample's
    /// too); e.g. to write them all to a file while [`CsvStats::errors`] keeps only the first.
    pub fn with_reject_sink(
        reader: R,
        options: CsvOptions,
        sink: Option<RejectSink>,
    ) -> Result<Self, CsvError> {
        let (input, bom_bytes) = strip_bom(reader)?;
        let input = Guarded {
            inner: input,
            delivered: 0,
            record_start: 0,
            limit: options.max_record_bytes.max(1) as u64,
            ended: false,
            last_byte: None,
            chunks: VecDeque::new(),
            counted_newlines: 0,
            counted_to: 0,
        };
        let csv = csv::ReaderBuilder::new()
            .delimiter(options.delimiter)
            .has_headers(false)
            .flexible(true)
            .buffer_capacity(READ_BUFFER_BYTES)
            .from_reader(input);
        let mut this = Self {
            csv,
            bom_bytes,
            input_done: false,
            atomicity: options.atomicity,
            batch_rows: options.batch_rows.max(1),
            delimiter: options.delimiter,
            max_record_bytes: options.max_record_bytes.max(1),
            max_reported_errors: options.max_reported_errors,
            sink,
            sample: VecDeque::new(),
            width: 0,
            record: ByteRecord::new(),
            batch: BatchBuilder::empty(),
            stats: CsvStats::default(),
            header: false,
            fallbacks: Vec::new(),
        };

        let mut first = ByteRecord::new();
        if !this.read_raw(&mut first)? {
            return Err(CsvError::Schema(
                "the input is empty: no header row and no data".to_string(),
            ));
        }
        let width = first.len();
        let mut record = ByteRecord::new();
        let mut sample_bytes = 0usize;
        // Records of another width stay in the sample (ignored by detection) and are refused
        // in their turn, so that refusals come in line order.
        this.width = width;
        while this.sample.len() < options.infer_rows.max(1)
            && sample_bytes < SAMPLE_BYTES_MAX
            && this.read_raw(&mut record)?
        {
            this.stats.rows_read += 1;
            sample_bytes += record.as_slice().len() + record.len() * 8;
            this.sample.push_back(std::mem::take(&mut record));
        }

        let header = if options.detect_header {
            this.looks_like_header(&first, &options)
        } else {
            options.has_header
        };
        let (names, (kinds, formats)) = if header {
            let strict = options.require_header && !options.detect_header;
            if strict && this.first_line_is_data(&first, &header_names(&first), &options) {
                return Err(CsvError::Header(format!(
                    "the first line looks like data, not a header row: '{}'; the file needs a \
                     header row naming the columns",
                    quote_record(&first, options.delimiter)
                )));
            }
            let names = column_names(&first, strict)?;
            let resolved = this.resolve_kinds(&names, &options, true)?;
            (names, resolved)
        } else {
            if options.detect_header
                && let Some(column) = &options.timestamp_column
            {
                let named = (0..width).any(|i| {
                    options
                        .default_names
                        .get(i)
                        .is_some_and(|n| n.trim().eq_ignore_ascii_case(column.trim()))
                });
                if !named {
                    return Err(CsvError::HeaderNotDetected {
                        first_line: quote_record(&first, options.delimiter),
                        column: column.clone(),
                    });
                }
            }
            this.stats.rows_read += 1;
            this.sample.push_front(first);
            let names: Vec<String> = (0..width)
                .map(|i| {
                    options
                        .default_names
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| format!("f{i}"))
                })
                .collect();
            let resolved = this.resolve_kinds(&names, &options, true)?;
            (names, resolved)
        };
        this.header = header;
        this.stats.column_errors = vec![0; names.len()];
        this.fallbacks = this.fallbacks_of(&names, &kinds, &options);

        let fields: Vec<Field> = names
            .iter()
            .zip(&kinds)
            .map(|(name, kind)| Field::new(name, kind.arrow_type(), true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        this.batch = BatchBuilder::new(schema, kinds, formats, this.batch_rows);
        this.batch.timestamp_index = options
            .timestamp_column
            .as_ref()
            .and_then(|name| find_column(&names, name));
        Ok(this)
    }

    /// Whether the first record was taken as the header.
    pub fn has_header(&self) -> bool {
        self.header
    }

    /// [`CsvOptions::detect_header`]'s rule, with the sample read (`first` not in it). A first
    /// line naming the timestamp column is a header.
    fn looks_like_header(&self, first: &ByteRecord, options: &CsvOptions) -> bool {
        let names = header_names(first);
        if let Some(ts) = &options.timestamp_column
            && find_column(&names, ts).is_some()
        {
            return true;
        }
        if self.sample.is_empty() {
            return first
                .iter()
                .all(|v| !v.is_empty() && detect_kind([v]).is_string());
        }
        let Ok((kinds, formats)) = self.resolve_kinds(&names, options, false) else {
            return false;
        };
        if kinds.iter().all(ColumnKind::is_string) {
            return first.iter().enumerate().all(|(i, v)| {
                !v.trim_ascii().is_empty() && self.values(i).all(|sampled| sampled != v)
            });
        }
        kinds
            .iter()
            .zip(&formats)
            .enumerate()
            .any(|(i, (kind, format))| {
                let value = first.get(i).unwrap_or_default();
                !kind.is_string()
                    && !value.trim_ascii().is_empty()
                    && parse_cell(*kind, format.as_ref(), value).is_err()
            })
    }

    /// For [`CsvOptions::require_header`]: whether the first line (taken as the header) looks
    /// like data: some column is of a non-string type and every such column's first value
    /// parses as it.
    fn first_line_is_data(
        &self,
        first: &ByteRecord,
        names: &[String],
        options: &CsvOptions,
    ) -> bool {
        if self.sample.is_empty() {
            return false;
        }
        let Ok((kinds, formats)) = self.resolve_kinds(names, options, false) else {
            return false;
        };
        kinds.iter().any(|k| !k.is_string())
            && kinds
                .iter()
                .zip(&formats)
                .enumerate()
                .all(|(i, (kind, format))| {
                    kind.is_string()
                        || parse_cell(*kind, format.as_ref(), first.get(i).unwrap_or_default())
                            .is_ok()
                })
    }

    /// Columns detection left as text although most of their sample values are typed.
    fn fallbacks_of(
        &self,
        names: &[String],
        kinds: &[ColumnKind],
        options: &CsvOptions,
    ) -> Vec<ColumnFallback> {
        let mut out = Vec::new();
        for (i, (name, kind)) in names.iter().zip(kinds).enumerate() {
            let overridden = options
                .type_overrides
                .iter()
                .map(|(n, _)| n)
                .chain(options.timestamp_formats.iter().map(|(n, _)| n))
                .any(|n| find_column(std::slice::from_ref(name), n).is_some());
            if !kind.is_string() || overridden {
                continue;
            }
            let detection = detect_column(self.values(i));
            // Only where the kind is the detected one (not an override).
            if detection.kind != *kind {
                continue;
            }
            if let Some(mixed) = detection.mixed
                && let Some(record) = self.sample.get(mixed.first_bad)
            {
                out.push(ColumnFallback {
                    column: name.clone(),
                    kind: *kind,
                    wanted: mixed.wanted,
                    parsed: mixed.parsed,
                    non_null: mixed.non_null,
                    line: line_of(record),
                    value: quote_value(record.get(i).unwrap_or_default()),
                });
            }
        }
        out
    }

    /// Columns detection left as SYMBOL or VARCHAR although most of their sample values are of
    /// one other type, with the first value that is not: for the import's report.
    pub fn fallbacks(&self) -> &[ColumnFallback] {
        &self.fallbacks
    }

    /// The detected schema; field names are the trimmed header names.
    pub fn schema(&self) -> SchemaRef {
        self.batch.schema.clone()
    }

    /// The kind of each column, in schema order.
    pub fn column_kinds(&self) -> &[ColumnKind] {
        &self.batch.kinds
    }

    /// Returns the next batch of at most `batch_rows` rows, or `None` at the
    /// end of the input. The sample rows come first, in input order.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, CsvError> {
        let columns = self.batch.kinds.len();
        while self.batch.rows < self.batch_rows {
            if let Some(record) = self.sample.pop_front() {
                if self.sample.is_empty() {
                    // Release the sample's buffer for good.
                    self.sample = VecDeque::new();
                }
                if self.check_width(&record, columns)? {
                    self.push(&record)?;
                }
                continue;
            }
            let mut record = std::mem::take(&mut self.record);
            let result = match self.read_data_record(&mut record, columns) {
                Ok(true) => self.push(&record).map(|()| true),
                other => other,
            };
            self.record = record;
            if !result? {
                break;
            }
        }
        if self.batch.rows == 0 {
            return Ok(None);
        }
        let batch = self.batch.finish()?;
        self.stats.rows_imported += batch.num_rows() as u64;
        Ok(Some(batch))
    }

    /// Appends one record of the right width to the batch, reporting what it refused.
    fn push(&mut self, record: &ByteRecord) -> Result<(), CsvError> {
        let rejected = self.batch.push(record, self.atomicity, &mut self.stats)?;
        if self.batch.problems.is_empty() {
            return Ok(());
        }
        let problems = std::mem::take(&mut self.batch.problems);
        let result = if rejected {
            self.stats.rows_rejected += 1;
            // One report per row: the problem that dropped it (the designated timestamp under
            // SkipColumn), else the first.
            let (index, problem) = problems
                .iter()
                .copied()
                .find(|(i, _)| Some(*i) == self.batch.timestamp_index)
                .unwrap_or(problems[0]);
            let reason = self.value_reason(record, index, problem);
            self.reject(record, Some(index), reason, RejectAction::RowSkipped)
        } else {
            problems.iter().try_for_each(|&(index, problem)| {
                let reason = self.value_reason(record, index, problem);
                self.reject(record, Some(index), reason, RejectAction::ValueNulled)
            })
        };
        self.batch.problems = problems;
        self.batch.problems.clear();
        result
    }

    /// `column 'v': cannot parse 'x' as LONG`.
    fn value_reason(&self, record: &ByteRecord, index: usize, problem: ValueProblem) -> String {
        let value = quote_value(record.get(index).unwrap_or_default());
        let kind = self.batch.kinds[index];
        format!(
            "column '{}': {}",
            self.batch.schema.field(index).name(),
            problem.describe(&value, kind.name())
        )
    }

    /// Counts a refused row or value, keeps it when there is room, hands it to the sink.
    fn reject(
        &mut self,
        record: &ByteRecord,
        column: Option<usize>,
        reason: String,
        action: RejectAction,
    ) -> Result<(), CsvError> {
        self.stats.errors_total += 1;
        let keep = self.stats.errors.len() < self.max_reported_errors;
        if !keep && self.sink.is_none() {
            return Ok(());
        }
        let rejection = Rejection {
            line: line_of(record),
            column: column
                .and_then(|i| self.batch.schema.fields().get(i).map(|f| f.name().clone())),
            reason,
            action,
            record: encode_record(record, self.delimiter),
            record_truncated: false,
        };
        if keep {
            self.stats.errors.push(rejection.shortened());
        }
        if let Some(sink) = &mut self.sink {
            sink(&rejection)?;
        }
        Ok(())
    }

    /// Bytes of input consumed so far (including a BOM), for progress
    /// reporting. Equals the input size once `next_batch` returned `None`.
    pub fn bytes_read(&self) -> u64 {
        self.bom_bytes + self.csv.position().byte()
    }

    /// Counters so far.
    pub fn stats(&self) -> &CsvStats {
        &self.stats
    }

    /// Reads the next record as is. `false` at the end of the input. Fails on a record longer
    /// than `max_record_bytes` and on a quoted field still open at the end of the input.
    fn read_raw(&mut self, record: &mut ByteRecord) -> Result<bool, CsvError> {
        if self.input_done {
            return Ok(false);
        }
        let line = {
            let input = self.csv.get_mut();
            let start = input.record_start;
            input.line_at(start)
        };
        let more = self.csv.read_byte_record(record).map_err(|err| {
            let too_long = matches!(err.kind(), csv::ErrorKind::Io(io)
                if io.get_ref().is_some_and(|inner| inner.is::<RecordTooLong>()));
            if too_long {
                CsvError::RecordTooLong {
                    line,
                    limit: self.max_record_bytes,
                }
            } else {
                from_csv(err, line)
            }
        })?;
        self.input_done = !more;
        if !more {
            return Ok(false);
        }
        let end = self.csv.position().byte();
        let input = self.csv.get_mut();
        if let Some(position) = record.position() {
            let mut position = position.clone();
            position.set_line(input.line_at(position.byte()));
            record.set_position(Some(position));
        }
        input.start_record(end);
        if record.as_slice().len() > self.max_record_bytes {
            return Err(CsvError::RecordTooLong {
                line: line_of(record),
                limit: self.max_record_bytes,
            });
        }
        // A quote opened and never closed swallows the rest of the input into the last field
        // of the last record; a properly quoted last field would end with the quote.
        if input.ended
            && end == input.delivered
            && input.last_byte != Some(b'"')
            && record
                .get(record.len().wrapping_sub(1))
                .is_some_and(|f| f.contains(&b'\n') || f.contains(&b'\r'))
        {
            return Err(CsvError::Malformed {
                line: line_of(record),
                message: "a quoted field is not closed: its opening '\"' runs to the end of \
                          the input"
                    .to_string(),
            });
        }
        Ok(true)
    }

    /// Reads the next data record with exactly `columns` fields, rejecting
    /// (or, under [`Atomicity::Abort`], failing on) records of another
    /// width. `false` at the end of the input.
    fn read_data_record(
        &mut self,
        record: &mut ByteRecord,
        columns: usize,
    ) -> Result<bool, CsvError> {
        while self.read_raw(record)? {
            self.stats.rows_read += 1;
            if self.check_width(record, columns)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether `record` has `columns` fields; if not, it is refused (or, under
    /// [`Atomicity::Abort`], an error).
    fn check_width(&mut self, record: &ByteRecord, columns: usize) -> Result<bool, CsvError> {
        if record.len() == columns {
            return Ok(true);
        }
        let message = format!("expected {columns} fields, found {}", record.len());
        if self.atomicity == Atomicity::Abort {
            return Err(CsvError::Malformed {
                line: line_of(record),
                message,
            });
        }
        self.stats.rows_rejected += 1;
        self.reject(record, None, message, RejectAction::RowSkipped)?;
        Ok(false)
    }

    /// Column `i`'s sample values; empty for records of another width than the first line's.
    fn values(&self, i: usize) -> impl Iterator<Item = &[u8]> {
        let width = self.width;
        self.sample.iter().map(move |r| {
            if r.len() == width {
                r.get(i).unwrap_or_default()
            } else {
                b""
            }
        })
    }

    /// Detected kinds, then overrides and timestamp patterns, then (with `timestamp`) the
    /// forced timestamp column (its bad values are refused row by row like any other).
    fn resolve_kinds(
        &self,
        names: &[String],
        options: &CsvOptions,
        timestamp: bool,
    ) -> Result<(Vec<ColumnKind>, Vec<Option<TimestampFormat>>), CsvError> {
        let mut kinds: Vec<ColumnKind> = (0..names.len())
            .map(|i| detect_kind(self.values(i)))
            .collect();
        let mut formats: Vec<Option<TimestampFormat>> = vec![None; names.len()];
        let mut overridden = vec![false; names.len()];
        let lenient = options.lenient_overrides || !timestamp;
        for (name, kind) in &options.type_overrides {
            let Some(index) = find_column(names, name) else {
                if lenient {
                    continue;
                }
                return Err(CsvError::Schema(format!(
                    "type override for unknown column '{name}'"
                )));
            };
            kinds[index] = *kind;
            overridden[index] = true;
        }
        for (name, format) in &options.timestamp_formats {
            let Some(index) = find_column(names, name) else {
                if lenient {
                    continue;
                }
                return Err(CsvError::Schema(format!(
                    "timestamp pattern for unknown column '{name}'"
                )));
            };
            kinds[index] = ColumnKind::Timestamp;
            formats[index] = Some(format.clone());
            overridden[index] = true;
        }
        if let Some(name) = options.timestamp_column.as_ref().filter(|_| timestamp) {
            let index = find_column(names, name).ok_or_else(|| {
                CsvError::Schema(format!(
                    "timestamp column '{name}' not found; the columns are {}",
                    quoted_list(names)
                ))
            })?;
            if overridden[index] && kinds[index] != ColumnKind::Timestamp {
                return Err(CsvError::Schema(format!(
                    "timestamp column '{name}' is overridden as {}",
                    kinds[index]
                )));
            }
            kinds[index] = ColumnKind::Timestamp;
        }
        Ok((kinds, formats))
    }
}

/// `'a', 'b', 'c'` (at most 20 names).
fn quoted_list(names: &[String]) -> String {
    let mut out: Vec<String> = names.iter().take(20).map(|n| format!("'{n}'")).collect();
    if names.len() > 20 {
        out.push(format!("... ({} in all)", names.len()));
    }
    out.join(", ")
}

/// Reads up to three bytes to drop a leading UTF-8 BOM; returns the stream
/// to parse and the number of BOM bytes dropped.
fn strip_bom<R: Read>(mut reader: R) -> io::Result<(Unbommed<R>, u64)> {
    let mut head = [0u8; 3];
    let mut len = 0;
    while len < head.len() {
        match reader.read(&mut head[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    if head[..len] == UTF8_BOM {
        Ok((
            io::Cursor::new(Vec::new()).chain(reader),
            UTF8_BOM.len() as u64,
        ))
    } else {
        Ok((io::Cursor::new(head[..len].to_vec()).chain(reader), 0))
    }
}

/// Column names from the header: trimmed, empty ones `f<i>`.
fn header_names(header: &ByteRecord) -> Vec<String> {
    header
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let trimmed = String::from_utf8_lossy(raw).trim().to_string();
            if trimmed.is_empty() {
                format!("f{i}")
            } else {
                trimmed
            }
        })
        .collect()
}

/// [`header_names`], rejecting duplicates (case-insensitive) and names a table cannot have;
/// `strict` rejects empty names too.
fn column_names(header: &ByteRecord, strict: bool) -> Result<Vec<String>, CsvError> {
    let names = header_names(header);
    let mut seen = std::collections::HashMap::with_capacity(names.len());
    for (i, (raw, name)) in header.iter().zip(&names).enumerate() {
        if strict && raw.trim_ascii().is_empty() {
            return Err(CsvError::Header(format!(
                "the header row has no name for column {} (of {}); every column needs one",
                i + 1,
                names.len()
            )));
        }
        if let Err(e) = sundial_storage::validate_name(name, "column") {
            return Err(CsvError::Header(format!(
                "the header row's column {} is not a valid name: {e}",
                i + 1
            )));
        }
        if let Some(before) = seen.insert(name.to_lowercase(), i) {
            return Err(CsvError::Header(format!(
                "the header row names two columns '{}' (columns {} and {}; names are compared \
                 case-insensitively)",
                names[before],
                before + 1,
                i + 1
            )));
        }
    }
    Ok(names)
}

/// Index of the column called `name` (trimmed; exact match preferred, then
/// case-insensitive).
fn find_column(names: &[String], name: &str) -> Option<usize> {
    let name = name.trim();
    names.iter().position(|n| n == name).or_else(|| {
        let lower = name.to_lowercase();
        names.iter().position(|n| n.to_lowercase() == lower)
    })
}

/// 1-based line on which `record` starts (0 if unknown).
fn line_of(record: &ByteRecord) -> u64 {
    record.position().map_or(0, |p| p.line())
}

/// One parsed field, kept until the whole row is known to be acceptable.
#[derive(Debug, Clone, Copy)]
enum Cell {
    Null,
    Bool(bool),
    Long(i64),
    Double(f64),
    Timestamp(i64),
    Uuid([u8; 16]),
    /// Valid UTF-8 text; the bytes are taken from the record again.
    Text,
}

/// Parses one raw field as `kind` (timestamps with `format` when given). A timestamp must be
/// in the range tables hold; it is never clamped or wrapped into it.
fn parse_cell(
    kind: ColumnKind,
    format: Option<&TimestampFormat>,
    raw: &[u8],
) -> Result<Cell, ValueProblem> {
    if kind.is_string() {
        if raw.is_empty() {
            return Ok(Cell::Null);
        }
        return std::str::from_utf8(raw)
            .map(|_| Cell::Text)
            .map_err(|_| ValueProblem::Unparseable);
    }
    let value = raw.trim_ascii();
    if value.is_empty() {
        return Ok(Cell::Null);
    }
    let cell = match kind {
        ColumnKind::Boolean => parse_bool(value).map(Cell::Bool),
        ColumnKind::Long => parse_i64(value).map(Cell::Long),
        ColumnKind::Double => parse_f64(value).map(Cell::Double),
        ColumnKind::Timestamp => {
            let nanos = match format {
                Some(format) => format.parse_wide(value),
                None => parse_timestamp_wide(value),
            }
            .ok_or(ValueProblem::Unparseable)?;
            return i64::try_from(nanos)
                .ok()
                .filter(|n| timestamp_in_range(*n))
                .map(Cell::Timestamp)
                .ok_or(ValueProblem::OutOfRange);
        }
        ColumnKind::Uuid => parse_uuid(value).map(Cell::Uuid),
        ColumnKind::Symbol | ColumnKind::Varchar => None,
    };
    cell.ok_or(ValueProblem::Unparseable)
}

/// An Arrow builder for one column.
enum ColumnBuilder {
    Boolean(BooleanBuilder),
    Long(Int64Builder),
    Double(Float64Builder),
    Timestamp(TimestampNanosecondBuilder),
    Uuid(FixedSizeBinaryBuilder),
    Symbol(StringDictionaryBuilder<Int32Type>),
    Varchar(LargeStringBuilder),
}

impl ColumnBuilder {
    fn new(kind: ColumnKind, rows: usize) -> Self {
        match kind {
            ColumnKind::Boolean => Self::Boolean(BooleanBuilder::with_capacity(rows)),
            ColumnKind::Long => Self::Long(Int64Builder::with_capacity(rows)),
            ColumnKind::Double => Self::Double(Float64Builder::with_capacity(rows)),
            ColumnKind::Timestamp => {
                Self::Timestamp(TimestampNanosecondBuilder::with_capacity(rows))
            }
            ColumnKind::Uuid => Self::Uuid(FixedSizeBinaryBuilder::with_capacity(rows, 16)),
            ColumnKind::Symbol => {
                Self::Symbol(StringDictionaryBuilder::with_capacity(rows, 256, 4096))
            }
            ColumnKind::Varchar => {
                Self::Varchar(LargeStringBuilder::with_capacity(rows, rows * 16))
            }
        }
    }

    /// Appends `cell`; `raw` is the field's bytes (used for text).
    fn append(&mut self, cell: Cell, raw: &[u8]) -> Result<(), CsvError> {
        match (self, cell) {
            (Self::Boolean(b), Cell::Bool(v)) => b.append_value(v),
            (Self::Long(b), Cell::Long(v)) => b.append_value(v),
            (Self::Double(b), Cell::Double(v)) => b.append_value(v),
            (Self::Timestamp(b), Cell::Timestamp(v)) => b.append_value(v),
            (Self::Uuid(b), Cell::Uuid(v)) => b.append_value(v)?,
            (Self::Symbol(b), Cell::Text) => match std::str::from_utf8(raw) {
                Ok(text) => {
                    b.append(text)?;
                }
                Err(_) => b.append_null(),
            },
            (Self::Varchar(b), Cell::Text) => match std::str::from_utf8(raw) {
                Ok(text) => b.append_value(text),
                Err(_) => b.append_null(),
            },
            (builder, _) => builder.append_null(),
        }
        Ok(())
    }

    fn append_null(&mut self) {
        match self {
            Self::Boolean(b) => b.append_null(),
            Self::Long(b) => b.append_null(),
            Self::Double(b) => b.append_null(),
            Self::Timestamp(b) => b.append_null(),
            Self::Uuid(b) => b.append_null(),
            Self::Symbol(b) => b.append_null(),
            Self::Varchar(b) => b.append_null(),
        }
    }

    /// Takes the built array, leaving the builder empty.
    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Boolean(b) => Arc::new(b.finish()),
            Self::Long(b) => Arc::new(b.finish()),
            Self::Double(b) => Arc::new(b.finish()),
            Self::Timestamp(b) => Arc::new(b.finish()),
            Self::Uuid(b) => Arc::new(b.finish()),
            Self::Symbol(b) => Arc::new(b.finish()),
            Self::Varchar(b) => Arc::new(b.finish()),
        }
    }
}

/// Accumulates rows into per-column builders until a batch is full.
struct BatchBuilder {
    schema: SchemaRef,
    kinds: Vec<ColumnKind>,
    /// Per column, the timestamp pattern its values are parsed with, if not ISO 8601.
    formats: Vec<Option<TimestampFormat>>,
    columns: Vec<ColumnBuilder>,
    /// Per-row scratch, reused so the streaming path does not allocate.
    cells: Vec<Cell>,
    /// The last pushed row's refused values: column index and problem.
    problems: Vec<(usize, ValueProblem)>,
    rows: usize,
    /// The designated timestamp column ([`CsvOptions::timestamp_column`]), if any.
    timestamp_index: Option<usize>,
}

impl BatchBuilder {
    fn empty() -> Self {
        Self {
            schema: Arc::new(Schema::empty()),
            kinds: Vec::new(),
            formats: Vec::new(),
            columns: Vec::new(),
            cells: Vec::new(),
            problems: Vec::new(),
            rows: 0,
            timestamp_index: None,
        }
    }

    fn new(
        schema: SchemaRef,
        kinds: Vec<ColumnKind>,
        formats: Vec<Option<TimestampFormat>>,
        batch_rows: usize,
    ) -> Self {
        let capacity = batch_rows.min(MAX_PREALLOCATED_ROWS);
        Self {
            columns: kinds
                .iter()
                .map(|&kind| ColumnBuilder::new(kind, capacity))
                .collect(),
            cells: vec![Cell::Null; kinds.len()],
            problems: Vec::new(),
            schema,
            kinds,
            formats,
            rows: 0,
            timestamp_index: None,
        }
    }

    /// Parses and appends one record that has the right number of fields,
    /// applying `atomicity` to values that do not parse; those are left in `problems`.
    /// Returns whether the row was dropped.
    fn push(
        &mut self,
        record: &ByteRecord,
        atomicity: Atomicity,
        stats: &mut CsvStats,
    ) -> Result<bool, CsvError> {
        self.problems.clear();
        let mut reject = false;
        for (index, (&kind, cell)) in self.kinds.iter().zip(&mut self.cells).enumerate() {
            let raw = record.get(index).unwrap_or_default();
            let format = self.formats.get(index).and_then(Option::as_ref);
            *cell = match parse_cell(kind, format, raw) {
                Ok(parsed) => parsed,
                Err(problem) => {
                    if let Some(count) = stats.column_errors.get_mut(index) {
                        *count += 1;
                    }
                    let error = || CsvError::BadValue {
                        line: line_of(record),
                        column: self.schema.field(index).name().clone(),
                        value: quote_value(raw),
                        expected: kind.name(),
                        problem,
                    };
                    if stats.first_error.is_none() {
                        stats.first_error = Some(error().to_string());
                    }
                    self.problems.push((index, problem));
                    match atomicity {
                        // The designated timestamp cannot be NULL: its row goes instead.
                        Atomicity::SkipColumn if Some(index) != self.timestamp_index => Cell::Null,
                        Atomicity::SkipColumn | Atomicity::SkipRow => {
                            reject = true;
                            Cell::Null
                        }
                        Atomicity::Abort => return Err(error()),
                    }
                }
            };
        }
        if reject {
            return Ok(true);
        }
        for (index, (column, &cell)) in self.columns.iter_mut().zip(&self.cells).enumerate() {
            column.append(cell, record.get(index).unwrap_or_default())?;
        }
        self.rows += 1;
        Ok(false)
    }

    /// Builds a batch from the accumulated rows and resets the builders.
    fn finish(&mut self) -> Result<RecordBatch, CsvError> {
        let arrays = self.columns.iter_mut().map(ColumnBuilder::finish).collect();
        self.rows = 0;
        Ok(RecordBatch::try_new(self.schema.clone(), arrays)?)
    }
}
