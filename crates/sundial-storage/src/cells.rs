//! Single rows read straight from a native part's mapped files, one value at a time.
//!
//! A point lookup serves a handful of rows. Building Arrow arrays for them (an allocation per
//! buffer, a validation pass per array, a record batch) costs more than the rows themselves, so
//! [`Snapshot::part_rows`] maps the projected columns of one part once and [`PartRows::cell`]
//! reads one value of one row as a [`Cell`] borrowed from the mapping.
//!
//! The reads check what the Arrow path checks, per value instead of per array: a row inside
//! the committed rows, variable-width offsets that ascend within the data file, UTF-8 text,
//! SYMBOL codes inside the dictionary. A file that fails one is reported as corrupt, naming it.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::Array;
use arrow_buffer::Buffer;

use crate::error::{Result, StorageError};
use crate::files::{PartitionDir, data_file, offsets_file};
use crate::txn::{ColumnMeta, PartitionMeta};
use crate::types::{ColumnType, Layout, SymbolValues};

/// One value of one row, borrowed from the mapped files (or the symbol dictionary).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Null,
    Bool(bool),
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    /// Nanoseconds since the Unix epoch, UTC.
    Timestamp(i64),
    /// Milliseconds since the Unix epoch, UTC.
    Date(i64),
    /// A VARCHAR value, or a SYMBOL's string.
    Str(&'a str),
    Binary(&'a [u8]),
    Uuid(&'a [u8; 16]),
}

/// The projected columns of one native part of a snapshot, mapped for single-row reads.
pub struct PartRows {
    /// Committed rows of the part.
    rows: u64,
    columns: Vec<ColumnRows>,
    dir: Arc<PartitionDir>,
}

struct ColumnRows {
    id: u32,
    column_type: ColumnType,
    /// Rows below `top` predate the column: NULL.
    top: u64,
    /// Bit `row - top` set when the value is present; `None` when the column has no NULLs.
    validity: Option<Buffer>,
    values: Values,
}

enum Values {
    /// Every row is below the column's top.
    None,
    /// `width` little-endian bytes per row.
    Fixed(Buffer),
    /// One bit per row.
    Bits(Buffer),
    /// `i64` offsets (one more than the rows) into the data.
    Var { offsets: Buffer, data: Buffer },
    /// `i32` codes into the dictionary.
    Symbol {
        codes: Buffer,
        symbols: SymbolValues,
    },
}

impl PartRows {
    /// Maps `columns` of a native part with `part`'s committed rows.
    pub(crate) fn map(
        dir: &Arc<PartitionDir>,
        part: &PartitionMeta,
        columns: &[&ColumnMeta],
        symbols: impl Fn(u32) -> Option<SymbolValues>,
    ) -> Result<PartRows> {
        let rows = part.row_count;
        let columns = columns
            .iter()
            .map(|col| {
                let top = part.column_top(col.id);
                let n = (rows - top) as usize;
                let missing = || {
                    StorageError::corrupt(dir.path.join(data_file(col.id)), "missing column file")
                };
                let values = if n == 0 {
                    Values::None
                } else {
                    match col.column_type.layout() {
                        Layout::Fixed { width } => {
                            let data = dir
                                .map(&data_file(col.id), n * width)?
                                .ok_or_else(missing)?;
                            match col.column_type {
                                ColumnType::Symbol => Values::Symbol {
                                    codes: data,
                                    symbols: symbols(col.id).unwrap_or_else(|| {
                                        Arc::new(arrow_array::StringArray::from(Vec::<&str>::new()))
                                    }),
                                },
                                _ => Values::Fixed(data),
                            }
                        }
                        Layout::Bits => Values::Bits(
                            dir.map(&data_file(col.id), n.div_ceil(8))?
                                .ok_or_else(missing)?,
                        ),
                        Layout::Var => {
                            let offsets = dir
                                .map(&offsets_file(col.id), (n + 1) * 8)?
                                .ok_or_else(missing)?;
                            let end = i64::from_le_bytes(word(&offsets, n * 8));
                            let end = usize::try_from(end).map_err(|_| {
                                StorageError::corrupt(
                                    dir.path.join(offsets_file(col.id)),
                                    format!("negative end offset {end}"),
                                )
                            })?;
                            let data = dir.map(&data_file(col.id), end)?.ok_or_else(missing)?;
                            Values::Var { offsets, data }
                        }
                    }
                };
                let validity = match n {
                    0 => None,
                    _ => dir.map_validity(col.id, n)?,
                };
                Ok(ColumnRows {
                    id: col.id,
                    column_type: col.column_type,
                    top,
                    validity,
                    values,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PartRows {
            rows,
            columns,
            dir: dir.clone(),
        })
    }

    /// Committed rows of the part.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The value of the `column`th mapped column (in the order given to `Snapshot::part_rows`)
    /// at `row` of the part.
    pub fn cell(&self, column: usize, row: u64) -> Result<Cell<'_>> {
        let Some(c) = self.columns.get(column) else {
            return Err(StorageError::InvalidInput(format!(
                "column {column} of {} mapped",
                self.columns.len()
            )));
        };
        if row >= self.rows {
            return Err(StorageError::InvalidInput(format!(
                "row {row} of a part of {} rows",
                self.rows
            )));
        }
        if row < c.top {
            return Ok(Cell::Null);
        }
        let r = (row - c.top) as usize;
        if let Some(valid) = &c.validity
            && valid.as_slice()[r / 8] & (1 << (r % 8)) == 0
        {
            return Ok(Cell::Null);
        }
        Ok(match &c.values {
            Values::None => Cell::Null,
            Values::Bits(bits) => Cell::Bool(bits.as_slice()[r / 8] & (1 << (r % 8)) != 0),
            Values::Fixed(data) => fixed(c.column_type, data.as_slice(), r).ok_or_else(|| {
                StorageError::Internal(format!(
                    "{} column {} mapped as fixed-width",
                    c.column_type.name(),
                    c.id
                ))
            })?,
            Values::Symbol { codes, symbols } => {
                let code = i32::from_le_bytes(word(codes, r * 4));
                match usize::try_from(code) {
                    Ok(code) if code < symbols.len() => Cell::Str(symbols.value(code)),
                    _ => {
                        return Err(self.corrupt(
                            data_file(c.id),
                            format!(
                                "row {row} holds SYMBOL code {code} of a dictionary of {}",
                                symbols.len()
                            ),
                        ));
                    }
                }
            }
            Values::Var { offsets, data } => {
                let from = i64::from_le_bytes(word(offsets, r * 8));
                let to = i64::from_le_bytes(word(offsets, r * 8 + 8));
                let bytes = match (usize::try_from(from), usize::try_from(to)) {
                    (Ok(from), Ok(to)) if from <= to && to <= data.len() => {
                        &data.as_slice()[from..to]
                    }
                    _ => {
                        return Err(self.corrupt(
                            offsets_file(c.id),
                            format!(
                                "row {row} spans offsets {from}..{to} of {} data bytes",
                                data.len()
                            ),
                        ));
                    }
                };
                match c.column_type {
                    ColumnType::Binary => Cell::Binary(bytes),
                    _ => Cell::Str(std::str::from_utf8(bytes).map_err(|e| {
                        self.corrupt(data_file(c.id), format!("row {row} is not UTF-8: {e}"))
                    })?),
                }
            }
        })
    }

    fn corrupt(&self, file: String, message: String) -> StorageError {
        StorageError::corrupt(self.path(file), message)
    }

    fn path(&self, file: String) -> PathBuf {
        self.dir.path.join(file)
    }
}

/// The value at row `r` of a fixed-width column's data; `None` for a type not laid out so.
fn fixed(column_type: ColumnType, data: &[u8], r: usize) -> Option<Cell<'_>> {
    let at = |width: usize| &data[r * width..(r + 1) * width];
    Some(match column_type {
        ColumnType::Byte => Cell::Byte(i8::from_le_bytes([data[r]])),
        ColumnType::Short => Cell::Short(i16::from_le_bytes(array(at(2)))),
        ColumnType::Int => Cell::Int(i32::from_le_bytes(array(at(4)))),
        ColumnType::Float => Cell::Float(f32::from_le_bytes(array(at(4)))),
        ColumnType::Long => Cell::Long(i64::from_le_bytes(array(at(8)))),
        ColumnType::Double => Cell::Double(f64::from_le_bytes(array(at(8)))),
        ColumnType::Timestamp => Cell::Timestamp(i64::from_le_bytes(array(at(8)))),
        ColumnType::Date => Cell::Date(i64::from_le_bytes(array(at(8)))),
        ColumnType::Uuid => Cell::Uuid(at(16).try_into().ok()?),
        // Laid out as bits, variable width or codes: read by `PartRows::cell`.
        ColumnType::Boolean | ColumnType::Symbol | ColumnType::Varchar | ColumnType::Binary => {
            return None;
        }
    })
}

fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(bytes);
    out
}

/// The 8 (or 4) bytes at `at` of a mapped buffer.
fn word<const N: usize>(buf: &Buffer, at: usize) -> [u8; N] {
    array(&buf.as_slice()[at..at + N])
}
