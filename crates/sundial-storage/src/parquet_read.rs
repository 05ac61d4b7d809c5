//! Reading a Parquet part: rows of one column as the Arrow arrays a native part gives.
//!
//! ```text
//!   data.parquet ──mmap──▶ footer (once per part) ──▶ row group g, column c
//!        ──decode whole chunk──▶ table's Arrow type ──▶ FileCache (LRU, bytes) ──slice──▶ reads
//! ```
//!
//! * The unit of decoding is one column chunk (one column of one row group): a read of any
//!   rows of it decodes it whole once and keeps it in the database's bounded cache of decoded
//!   chunks, so the pieces a scan reads one after another, and the NULL counts and zone reads
//!   before them, decode it once. Reads within one chunk are zero-copy slices of it.
//! * Columns are found by their Parquet field id, which is the table's column id: renaming a
//!   column keeps its data, and columns dropped since the file was written are never read.
//! * Values come back in the table's Arrow types: timestamps lose the file's `UTC` zone, and
//!   SYMBOL strings become the table's dictionary codes (every symbol in a file is in the
//!   dictionary: it was when the file was written, and dictionaries only grow).
//! * A file that is shorter or longer than committed, or that does not decode, is reported as
//!   corrupt with its path (which names the table and partition); other parts stay readable.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampNanosecondType;
use arrow_array::{Array, ArrayRef, Int32Array};
use arrow_schema::DataType;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::{PARQUET_FIELD_ID_META_KEY, ProjectionMask};

use crate::cache::FileCache;
use crate::error::{IoContext, Result, StorageError};
use crate::symbol_index::PublishedSymbols;
use crate::txn::ColumnMeta;
use crate::types::ColumnType;

/// The file of a Parquet part, in its version directory.
pub(crate) const PARQUET_FILE: &str = "data.parquet";

/// A Parquet part's file once opened, shared by its directory and (for a local copy of a
/// remote part) the cold store's cache, which closes it on eviction.
pub(crate) type OpenedParquet = std::sync::Mutex<Option<Arc<ParquetPart>>>;

/// An opened Parquet part: its mapped bytes and decoded footer.
pub(crate) struct ParquetPart {
    path: PathBuf,
    data: Bytes,
    metadata: ArrowReaderMetadata,
    /// First row of each row group, then the file's row count.
    group_starts: Vec<u64>,
    /// `(column id, root column index)`, by column id.
    roots: Vec<(u32, usize)>,
}

impl std::fmt::Debug for ParquetPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetPart")
            .field("path", &self.path)
            .field("rows", &self.rows())
            .finish()
    }
}

impl ParquetPart {
    /// Maps the file and reads its footer; the file must hold exactly `file_bytes` bytes.
    pub fn open(path: &Path, file_bytes: u64) -> Result<ParquetPart> {
        let file = std::fs::File::open(path).at(path)?;
        let len = file.metadata().at(path)?.len();
        if len != file_bytes {
            return Err(StorageError::corrupt(
                path,
                format!(
                    "the Parquet file has {len} bytes, the commit recorded {file_bytes}: it was \
                     truncated or replaced"
                ),
            ));
        }
        // SAFETY: a Parquet part's file is written whole before the commit that names it and
        // never modified afterwards; it is deleted only once no reader holds its directory.
        let map = unsafe { memmap2::Mmap::map(&file) }.at(path)?;
        let data = Bytes::from_owner(map);
        let corrupt = |e: &dyn std::fmt::Display| {
            StorageError::corrupt(path, format!("the Parquet file does not decode: {e}"))
        };
        let metadata = guarded(path, || {
            ArrowReaderMetadata::load(&data, ArrowReaderOptions::new()).map_err(|e| corrupt(&e))
        })?;
        let mut group_starts = Vec::with_capacity(metadata.metadata().num_row_groups() + 1);
        let mut rows = 0u64;
        for group in metadata.metadata().row_groups() {
            group_starts.push(rows);
            rows += u64::try_from(group.num_rows()).map_err(|e| corrupt(&e))?;
        }
        group_starts.push(rows);
        let mut roots = Vec::new();
        for (i, field) in metadata.schema().fields().iter().enumerate() {
            let id = field
                .metadata()
                .get(PARQUET_FIELD_ID_META_KEY)
                .and_then(|id| id.parse::<u32>().ok());
            if let Some(id) = id {
                roots.push((id, i));
            }
        }
        roots.sort_unstable();
        Ok(ParquetPart {
            path: path.to_path_buf(),
            data,
            metadata,
            group_starts,
            roots,
        })
    }

    /// Rows in the file.
    pub fn rows(&self) -> u64 {
        self.group_starts.last().copied().unwrap_or(0)
    }

    /// Rows `rows` of `column` in the table's Arrow type, except SYMBOLs: their codes in the
    /// table's dictionary (`symbols`, needed to decode them), as `Int32`.
    pub fn read(
        &self,
        cache: &FileCache,
        dir_id: u64,
        column: &ColumnMeta,
        rows: Range<u64>,
        symbols: Option<&PublishedSymbols>,
    ) -> Result<ArrayRef> {
        let mut pieces = self.pieces(cache, dir_id, column, rows, symbols)?;
        if pieces.len() == 1 {
            return Ok(pieces.swap_remove(0));
        }
        let pieces: Vec<&dyn Array> = pieces.iter().map(|a| a.as_ref()).collect();
        arrow_select::concat::concat(&pieces).map_err(|e| StorageError::Internal(e.to_string()))
    }

    /// Like [`ParquetPart::read`], as one zero-copy slice per row group the rows cover, in
    /// order (at least one).
    pub fn pieces(
        &self,
        cache: &FileCache,
        dir_id: u64,
        column: &ColumnMeta,
        rows: Range<u64>,
        symbols: Option<&PublishedSymbols>,
    ) -> Result<Vec<ArrayRef>> {
        if rows.end > self.rows() {
            return Err(StorageError::corrupt(
                &self.path,
                format!(
                    "the Parquet file holds {} rows, the commit {}",
                    self.rows(),
                    rows.end
                ),
            ));
        }
        let root = self.root(column)?;
        if rows.start >= rows.end {
            // No row group to slice (the range may start at the file's end).
            let data_type = match column.column_type {
                ColumnType::Symbol => DataType::Int32,
                other => other.arrow_type(),
            };
            return Ok(vec![arrow_array::new_empty_array(&data_type)]);
        }
        let first = self.group_starts.partition_point(|s| *s <= rows.start) - 1;
        let mut pieces = Vec::new();
        let mut group = first;
        while pieces.is_empty() || self.group_starts[group] < rows.end {
            let (start, end) = (self.group_starts[group], self.group_starts[group + 1]);
            let key = (dir_id, column.id, group as u32);
            let chunk = match cache.chunk(key) {
                Some(chunk) => chunk,
                None => {
                    let chunk = self.decode(column, root, group, symbols)?;
                    cache.keep_chunk(key, chunk.clone());
                    chunk
                }
            };
            let from = rows.start.max(start) - start;
            let to = rows.end.min(end) - start;
            pieces.push(chunk.slice(from as usize, (to - from) as usize));
            group += 1;
            if group + 1 >= self.group_starts.len() {
                break;
            }
        }
        Ok(pieces)
    }

    /// How many of rows `rows` of `column` are NULL: from the row groups' statistics where the
    /// rows cover a whole group that has them, by reading the rest.
    pub fn null_count(
        &self,
        cache: &FileCache,
        dir_id: u64,
        column: &ColumnMeta,
        rows: Range<u64>,
        symbols: Option<&PublishedSymbols>,
    ) -> Result<u64> {
        let root = self.root(column)?;
        let mut nulls = 0;
        let mut group = self.group_starts.partition_point(|s| *s <= rows.start) - 1;
        while group + 1 < self.group_starts.len() && self.group_starts[group] < rows.end {
            let (start, end) = (self.group_starts[group], self.group_starts[group + 1]);
            let whole = rows.start <= start && end <= rows.end;
            let counted = whole
                .then(|| self.metadata.metadata().row_group(group).column(root))
                .and_then(|chunk| chunk.statistics()?.null_count_opt());
            nulls += match counted {
                Some(n) => n,
                None => {
                    let part = rows.start.max(start)..rows.end.min(end);
                    let pieces = self.pieces(cache, dir_id, column, part, symbols)?;
                    pieces.iter().map(|a| a.null_count() as u64).sum()
                }
            };
            group += 1;
        }
        Ok(nulls)
    }

    /// The root column of `column` in the file.
    fn root(&self, column: &ColumnMeta) -> Result<usize> {
        self.roots
            .binary_search_by_key(&column.id, |(id, _)| *id)
            .map(|i| self.roots[i].1)
            .map_err(|_| {
                StorageError::corrupt(
                    &self.path,
                    format!("column '{}' is missing from the Parquet file", column.name),
                )
            })
    }

    /// Decodes column `column` (root `root`) of row group `group` whole.
    fn decode(
        &self,
        column: &ColumnMeta,
        root: usize,
        group: usize,
        symbols: Option<&PublishedSymbols>,
    ) -> Result<ArrayRef> {
        let rows = (self.group_starts[group + 1] - self.group_starts[group]) as usize;
        let corrupt = |e: &dyn std::fmt::Display| {
            StorageError::corrupt(
                &self.path,
                format!(
                    "column '{}' of row group {group} does not decode: {e}",
                    column.name
                ),
            )
        };
        let arrays = guarded(&self.path, || {
            let mask = ProjectionMask::roots(self.metadata.parquet_schema(), [root]);
            let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(
                self.data.clone(),
                self.metadata.clone(),
            )
            .with_projection(mask)
            .with_row_groups(vec![group])
            .with_batch_size(rows.max(1))
            .build()
            .map_err(|e| corrupt(&e))?;
            reader
                .map(|batch| Ok(batch.map_err(|e| corrupt(&e))?.column(0).clone()))
                .collect::<Result<Vec<ArrayRef>>>()
        })?;
        let arrays = arrays
            .into_iter()
            .map(|a| self.table_form(column, a, symbols))
            .collect::<Result<Vec<_>>>()?;
        let array = match arrays.len() {
            1 => arrays.into_iter().next().unwrap_or_else(|| unreachable!()),
            _ => {
                let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
                arrow_select::concat::concat(&refs).map_err(|e| corrupt(&e))?
            }
        };
        if array.len() != rows {
            return Err(corrupt(&format!(
                "{} rows decoded, the row group has {rows}",
                array.len()
            )));
        }
        Ok(array)
    }

    /// A decoded array in the form reads return (see [`ParquetPart::read`]).
    fn table_form(
        &self,
        column: &ColumnMeta,
        array: ArrayRef,
        symbols: Option<&PublishedSymbols>,
    ) -> Result<ArrayRef> {
        let wrong_type = || {
            StorageError::corrupt(
                &self.path,
                format!(
                    "column '{}' is {} in the Parquet file, not {}",
                    column.name,
                    array.data_type(),
                    column.column_type.name()
                ),
            )
        };
        match column.column_type {
            ColumnType::Timestamp => {
                let ts = array
                    .as_primitive_opt::<TimestampNanosecondType>()
                    .ok_or_else(wrong_type)?;
                Ok(Arc::new(ts.clone().with_timezone_opt(None::<Arc<str>>)))
            }
            ColumnType::Symbol => {
                let symbols = symbols.ok_or_else(|| {
                    StorageError::Internal(format!("no dictionary for column {}", column.id))
                })?;
                symbol_codes(&array, symbols)
                    .ok_or_else(wrong_type)?
                    .map_err(|value| {
                        StorageError::corrupt(
                            &self.path,
                            format!(
                                "symbol '{value}' of column '{}' is not in the table's dictionary",
                                column.name
                            ),
                        )
                    })
            }
            other if array.data_type() == &other.arrow_type() => Ok(array),
            _ => Err(wrong_type()),
        }
    }
}

/// The table's codes of a column of symbol strings (dictionary-encoded, as written, or plain):
/// `None` if the array holds no strings, `Err(value)` for a value the dictionary lacks.
fn symbol_codes(
    array: &ArrayRef,
    symbols: &PublishedSymbols,
) -> Option<std::result::Result<ArrayRef, String>> {
    // Each distinct string is looked up once; rows then take their value's code.
    let lookup = |values: &dyn Array| -> Option<std::result::Result<Int32Array, String>> {
        let strings: Vec<Option<&str>> = match values.data_type() {
            DataType::Utf8 => values.as_string::<i32>().iter().collect(),
            DataType::LargeUtf8 => values.as_string::<i64>().iter().collect(),
            DataType::Utf8View => values.as_string_view().iter().collect(),
            _ => return None,
        };
        let mut codes = Vec::with_capacity(strings.len());
        for s in strings {
            match s {
                Some(s) => match symbols.code(s) {
                    Some(code) => codes.push(Some(code)),
                    None => return Some(Err(s.to_string())),
                },
                None => codes.push(None),
            }
        }
        Some(Ok(Int32Array::from(codes)))
    };
    let DataType::Dictionary(_, _) = array.data_type() else {
        return Some(lookup(array.as_ref())?.map(|c| Arc::new(c) as ArrayRef));
    };
    let dict = array.as_any_dictionary();
    let codes = match lookup(dict.values().as_ref())? {
        Ok(codes) => codes,
        Err(value) => return Some(Err(value)),
    };
    let taken = arrow_select::take::take(&codes, dict.keys(), None).ok()?;
    Some(Ok(taken))
}

/// Runs a decode step, turning a panic in the decoder (a damaged file it does not check) into
/// a corruption error.
fn guarded<T>(path: &Path, work: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
        Err(StorageError::corrupt(
            path,
            "the Parquet file does not decode (its decoder failed)",
        ))
    })
}
