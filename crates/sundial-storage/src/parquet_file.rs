//! A partition written as one Parquet file: the format cold partitions are to be kept in, and
//! readable as it is by other engines (DuckDB, pyarrow, Spark, Trino).
//!
//! ```text
//!   partition (parts in time order) ─read in row groups─▶ ArrowWriter ─▶ file.parquet
//!     designated TIMESTAMP ─▶ INT64 TIMESTAMP(NANOS, UTC)  DELTA_BINARY_PACKED
//!     LONG, INT, SHORT, BYTE, DATE, TIMESTAMP ─▶ INT32/INT64  dictionary, else DELTA_BINARY_PACKED
//!     DOUBLE, FLOAT ─▶ dictionary, else plain
//!     SYMBOL ─▶ BYTE_ARRAY (UTF8) dictionary: strings, not the table's codes
//!     VARCHAR, BINARY, UUID, BOOLEAN ─▶ dictionary, else plain
//!   every page compressed (ZSTD by default), statistics per page, the page index written
//! ```
//!
//! Each field's Parquet field id is the table's column id. Rows keep the partition's order (by designated timestamp), so row groups and pages cover
//! consecutive stretches of time and their statistics prune by time. The choices and the bytes
//! per point they gave on TSBS data are in `docs/design.md` ("Cold partitions").

use std::io::Write;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampNanosecondType;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::error::{Result, StorageError};
use crate::table::Snapshot;
use crate::types::ColumnType;

/// How partitions are written as Parquet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParquetOptions {
    /// Rows per row group (and per read of the partition while writing). Default: a zone's
    /// (65,536), the unit reads decode, so a row group is what zone maps prune.
    pub row_group_rows: usize,
    pub compression: PageCompression,
    pub encodings: Encodings,
}

/// How values are encoded before compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encodings {
    /// The designated timestamp delta-encoded; every other column dictionary-encoded while
    /// its dictionary stays small, then delta (integers) or plain (the rest).
    TimeSeries,
    /// Delta and byte-stream-split without dictionaries.
    NoDictionary,
    /// The `parquet` crate's defaults (dictionary, then plain), for comparison.
    Defaults,
}

/// How each page is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageCompression {
    None,
    Lz4,
    Zstd(i32),
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            row_group_rows: crate::ZONE_ROWS as usize,
            compression: PageCompression::Zstd(3),
            encodings: Encodings::TimeSeries,
        }
    }
}

/// What writing one partition gave.
#[derive(Debug, Clone)]
pub struct ParquetWritten {
    pub rows: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// Per table column (in the table's order): compressed bytes of its column chunks.
    pub column_bytes: Vec<u64>,
}

fn error(e: impl std::fmt::Display) -> StorageError {
    StorageError::Internal(format!("writing Parquet: {e}"))
}

/// A failure of the Parquet writer: an I/O error of the output stays one (a full disk is
/// [`StorageError::DiskFull`]); anything else is the writer's.
fn write_error(e: ParquetError) -> StorageError {
    match e {
        ParquetError::External(inner) => match inner.downcast::<std::io::Error>() {
            Ok(io) => StorageError::io(crate::error::PARQUET_OUTPUT, *io),
            Err(inner) => error(inner),
        },
        other => error(other),
    }
}

/// The Arrow type a column is written as: timestamps carry UTC, SYMBOLs are strings.
fn file_type(column_type: ColumnType) -> DataType {
    match column_type {
        ColumnType::Timestamp => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        other => other.arrow_type(),
    }
}

fn properties(snapshot: &Snapshot, options: &ParquetOptions) -> Result<WriterProperties> {
    let compression = match options.compression {
        PageCompression::None => Compression::UNCOMPRESSED,
        PageCompression::Lz4 => Compression::LZ4_RAW,
        PageCompression::Zstd(level) => {
            Compression::ZSTD(ZstdLevel::try_new(level).map_err(error)?)
        }
    };
    let mut builder = WriterProperties::builder()
        .set_max_row_group_row_count(Some(options.row_group_rows.max(1)))
        .set_compression(compression)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_created_by(format!("sundial {}", env!("CARGO_PKG_VERSION")));
    if options.encodings == Encodings::Defaults {
        return Ok(builder.build());
    }
    let meta = snapshot.meta();
    for (i, c) in meta.columns.iter().enumerate() {
        let path = ColumnPath::from(c.name.as_str());
        let encoding = match c.column_type {
            ColumnType::Timestamp
            | ColumnType::Long
            | ColumnType::Int
            | ColumnType::Short
            | ColumnType::Byte
            | ColumnType::Date => Encoding::DELTA_BINARY_PACKED,
            // Measured on TSBS iot: past the dictionary, plain pages compress better than
            // byte-stream-split ones (see docs/design.md).
            ColumnType::Double | ColumnType::Float
                if options.encodings == Encodings::TimeSeries =>
            {
                continue;
            }
            ColumnType::Double | ColumnType::Float => Encoding::BYTE_STREAM_SPLIT,
            _ => continue,
        };
        // With a dictionary, `encoding` is what a column chunk falls back to once the
        // dictionary grows past its page size. The designated timestamp rises steadily: delta
        // encoding takes a few bits per row, a dictionary more.
        let dictionary =
            options.encodings == Encodings::TimeSeries && Some(i) != meta.timestamp_index;
        builder = builder
            .set_column_dictionary_enabled(path.clone(), dictionary)
            .set_column_encoding(path, encoding);
    }
    Ok(builder.build())
}

/// Writes the rows of the partition with key `key` (every part of it, in time order) to `out`
/// as one Parquet file, reading `row_group_rows` rows at a time.
pub fn write_partition<W: Write + Send>(
    snapshot: &Snapshot,
    key: i64,
    out: W,
    options: &ParquetOptions,
) -> Result<ParquetWritten> {
    let meta = snapshot.meta();
    // The field id is the column's id: reads find columns by it (see `parquet_read.rs`).
    let fields: Vec<Field> = meta
        .columns
        .iter()
        .map(|c| {
            let id = [(PARQUET_FIELD_ID_META_KEY.to_string(), c.id.to_string())];
            Field::new(&c.name, file_type(c.column_type), true)
                .with_metadata(id.into_iter().collect())
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let out = Counting {
        inner: out,
        bytes: 0,
    };
    let mut writer =
        ArrowWriter::try_new(out, schema.clone(), Some(properties(snapshot, options)?))
            .map_err(write_error)?;
    let step = options.row_group_rows.max(1) as u64;
    let mut rows = 0;
    for (p, part) in snapshot.partitions().iter().enumerate() {
        if part.key != key {
            continue;
        }
        let mut from = 0;
        while from < part.row_count {
            let to = (from + step).min(part.row_count);
            let mut columns: Vec<ArrayRef> = Vec::with_capacity(meta.columns.len());
            for (c, field) in schema.fields().iter().enumerate() {
                let array = snapshot.read_column(p, c, from..to)?;
                let array: ArrayRef = match array.as_primitive_opt::<TimestampNanosecondType>() {
                    // Only the time zone differs: no cast (which would parse it).
                    Some(ts) => Arc::new(ts.clone().with_timezone("UTC")),
                    None if array.data_type() == field.data_type() => array,
                    None => arrow_cast::cast(&array, field.data_type()).map_err(error)?,
                };
                columns.push(array);
            }
            let batch = RecordBatch::try_new(schema.clone(), columns).map_err(error)?;
            writer.write(&batch).map_err(write_error)?;
            rows += to - from;
            from = to;
        }
    }
    let metadata: ParquetMetaData = writer.finish().map_err(write_error)?;
    writer
        .inner_mut()
        .flush()
        .map_err(|e| StorageError::io(crate::error::PARQUET_OUTPUT, e))?;
    let bytes = writer.inner().bytes;
    let mut column_bytes = vec![0u64; meta.columns.len()];
    for group in metadata.row_groups() {
        for (c, chunk) in group.columns().iter().enumerate() {
            if let Some(total) = column_bytes.get_mut(c) {
                *total += chunk.compressed_size().max(0) as u64;
            }
        }
    }
    Ok(ParquetWritten {
        rows,
        bytes,
        column_bytes,
    })
}

/// A writer that counts the bytes it passes on.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
