//! The streaming reader: header, sample, detection, then batch building.

use std::collections::{HashSet, VecDeque};
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
use crate::error::{CsvError, from_csv, quote_value};
use crate::infer::detect_kind;
use crate::options::{Atomicity, ColumnKind, CsvOptions};
use crate::parse::{parse_bool, parse_f64, parse_i64, parse_timestamp_wide, parse_uuid};
use crate::pattern::TimestampFormat;
use sundial_storage::timestamp_in_range;

/// The UTF-8 byte order mark, dropped when it opens the input.
const UTF8_BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
/// Buffer size of the underlying CSV parser.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Cap on the rows preallocated per builder, whatever `batch_rows` says.
const MAX_PREALLOCATED_ROWS: usize = 1 << 20;

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
}

/// The byte stream handed to the CSV parser: the input with a leading BOM
/// removed (the first bytes, read ahead to look for it, are replayed).
type Input<R> = io::Chain<io::Cursor<Vec<u8>>, R>;

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
    sample: VecDeque<ByteRecord>,
    record: ByteRecord,
    batch: BatchBuilder,
    stats: CsvStats,
    header: bool,
}

impl<R: Read> CsvReader<R> {
    /// Reads the header and the sample from `reader` and detects the schema.
    ///
    /// Fails on I/O errors, on an empty input, on bad header names
    /// (duplicates, compared case-insensitively), on overrides or a
    /// timestamp column naming unknown columns, when a sample value of the
    /// timestamp column is not a timestamp, and (under [`Atomicity::Abort`])
    /// on a sample record with the wrong number of fields.
    pub fn new(reader: R, options: CsvOptions) -> Result<Self, CsvError> {
        let (input, bom_bytes) = strip_bom(reader)?;
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
            sample: VecDeque::new(),
            record: ByteRecord::new(),
            batch: BatchBuilder::empty(),
            stats: CsvStats::default(),
            header: false,
        };

        let mut first = ByteRecord::new();
        if !this.read_raw(&mut first)? {
            return Err(CsvError::Schema("input is empty".to_string()));
        }
        let width = first.len();
        let mut record = ByteRecord::new();
        while this.sample.len() < options.infer_rows.max(1)
            && this.read_data_record(&mut record, width)?
        {
            this.sample.push_back(std::mem::take(&mut record));
        }

        let header = if options.detect_header {
            this.looks_like_header(&first, &options)
        } else {
            options.has_header
        };
        let (names, (kinds, formats)) = if header {
            let names = column_names(&first)?;
            let resolved = this.resolve_kinds(&names, &options)?;
            (names, resolved)
        } else {
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
            let resolved = this.resolve_kinds(&names, &options)?;
            (names, resolved)
        };
        this.header = header;
        this.stats.column_errors = vec![0; names.len()];

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

    /// [`CsvOptions::detect_header`]'s rule, with the sample read (`first` not in it).
    fn looks_like_header(&self, first: &ByteRecord, options: &CsvOptions) -> bool {
        let Ok(names) = column_names(first) else {
            return false;
        };
        if self.sample.is_empty() {
            return first
                .iter()
                .all(|v| !v.is_empty() && detect_kind([v]).is_string());
        }
        let Ok((kinds, formats)) = self.resolve_kinds(&names, options) else {
            return false;
        };
        if kinds.iter().all(ColumnKind::is_string) {
            return first.iter().enumerate().all(|(i, v)| {
                !v.trim_ascii().is_empty() && self.sample.iter().all(|r| r.get(i) != Some(v))
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
                self.batch.push(&record, self.atomicity, &mut self.stats)?;
                continue;
            }
            let mut record = std::mem::take(&mut self.record);
            let result = match self.read_data_record(&mut record, columns) {
                Ok(true) => self
                    .batch
                    .push(&record, self.atomicity, &mut self.stats)
                    .map(|()| true),
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

    /// Bytes of input consumed so far (including a BOM), for progress
    /// reporting. Equals the input size once `next_batch` returned `None`.
    pub fn bytes_read(&self) -> u64 {
        self.bom_bytes + self.csv.position().byte()
    }

    /// Counters so far.
    pub fn stats(&self) -> &CsvStats {
        &self.stats
    }

    /// Reads the next record as is. `false` at the end of the input.
    fn read_raw(&mut self, record: &mut ByteRecord) -> Result<bool, CsvError> {
        if self.input_done {
            return Ok(false);
        }
        let more = self
            .csv
            .read_byte_record(record)
            .map_err(|err| from_csv(err, self.csv.position().line()))?;
        self.input_done = !more;
        Ok(more)
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
            if record.len() == columns {
                return Ok(true);
            }
            if self.atomicity == Atomicity::Abort {
                return Err(CsvError::Malformed {
                    line: line_of(record),
                    message: format!("expected {columns} fields, found {}", record.len()),
                });
            }
            self.stats.rows_rejected += 1;
        }
        Ok(false)
    }

    /// Detected kinds, then overrides and timestamp patterns, then the forced timestamp column.
    fn resolve_kinds(
        &self,
        names: &[String],
        options: &CsvOptions,
    ) -> Result<(Vec<ColumnKind>, Vec<Option<TimestampFormat>>), CsvError> {
        let mut kinds: Vec<ColumnKind> = (0..names.len())
            .map(|i| detect_kind(self.sample.iter().map(|r| r.get(i).unwrap_or_default())))
            .collect();
        let mut formats: Vec<Option<TimestampFormat>> = vec![None; names.len()];
        let mut overridden = vec![false; names.len()];
        let lenient = options.lenient_overrides;
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
        if let Some(name) = &options.timestamp_column {
            let index = find_column(names, name)
                .ok_or_else(|| CsvError::Schema(format!("timestamp column '{name}' not found")))?;
            if overridden[index] && kinds[index] != ColumnKind::Timestamp {
                return Err(CsvError::Schema(format!(
                    "timestamp column '{name}' is overridden as {}",
                    kinds[index]
                )));
            }
            kinds[index] = ColumnKind::Timestamp;
            for record in &self.sample {
                let raw = record.get(index).unwrap_or_default();
                let value = raw.trim_ascii();
                if value.is_empty() {
                    continue;
                }
                if let Err(problem) =
                    parse_cell(ColumnKind::Timestamp, formats[index].as_ref(), raw)
                {
                    return Err(CsvError::BadValue {
                        line: line_of(record),
                        column: names[index].clone(),
                        value: quote_value(raw),
                        expected: ColumnKind::Timestamp.name(),
                        problem,
                    });
                }
            }
        }
        Ok((kinds, formats))
    }
}

/// Reads up to three bytes to drop a leading UTF-8 BOM; returns the stream
/// to parse and the number of BOM bytes dropped.
fn strip_bom<R: Read>(mut reader: R) -> io::Result<(Input<R>, u64)> {
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

/// Column names from the header: trimmed, empty ones replaced by `f<i>`,
/// duplicates (case-insensitive) rejected.
fn column_names(header: &ByteRecord) -> Result<Vec<String>, CsvError> {
    let mut names = Vec::with_capacity(header.len());
    let mut seen = HashSet::with_capacity(header.len());
    for (i, raw) in header.iter().enumerate() {
        let trimmed = String::from_utf8_lossy(raw).trim().to_string();
        let name = if trimmed.is_empty() {
            format!("f{i}")
        } else {
            trimmed
        };
        if !seen.insert(name.to_lowercase()) {
            return Err(CsvError::Schema(format!(
                "duplicate column name '{name}' in header"
            )));
        }
        names.push(name);
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
            schema,
            kinds,
            formats,
            rows: 0,
            timestamp_index: None,
        }
    }

    /// Parses and appends one record that has the right number of fields,
    /// applying `atomicity` to values that do not parse.
    fn push(
        &mut self,
        record: &ByteRecord,
        atomicity: Atomicity,
        stats: &mut CsvStats,
    ) -> Result<(), CsvError> {
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
            stats.rows_rejected += 1;
            return Ok(());
        }
        for (index, (column, &cell)) in self.columns.iter_mut().zip(&self.cells).enumerate() {
            column.append(cell, record.get(index).unwrap_or_default())?;
        }
        self.rows += 1;
        Ok(())
    }

    /// Builds a batch from the accumulated rows and resets the builders.
    fn finish(&mut self) -> Result<RecordBatch, CsvError> {
        let arrays = self.columns.iter_mut().map(ColumnBuilder::finish).collect();
        self.rows = 0;
        Ok(RecordBatch::try_new(self.schema.clone(), arrays)?)
    }
}
