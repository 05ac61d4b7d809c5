//! Zero-copy reads: committed rows of a column become Arrow arrays over the mapped files.
//!
//! Each array's buffers cover only its rows: a buffer over rows `[lo, hi)` of a mapped file is
//! an allocation of its own (that keeps the mapping alive), so its capacity is the bytes of
//! those rows. Memory accounting that counts a buffer's capacity (DataFusion's sort does) thus
//! charges a batch for its rows, not for the whole file it was cut from; the mapped pages are
//! the page cache's, not the query's.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date64Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    TimestampNanosecondType,
};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, DictionaryArray, LargeBinaryArray,
    LargeStringArray, PrimitiveArray, UInt32Array, new_null_array,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};

use crate::error::ensure_invariant;
use crate::error::{Result, StorageError};
use crate::files::{PARQUET_FILE, PartitionDir, data_file, offsets_file, validate_offsets};
use crate::symbol_index::PublishedSymbols;
use crate::txn::ColumnMeta;
use crate::types::{ColumnType, Layout, SymbolValues};

/// Reads rows `[lo, hi)` of `column` from a partition version whose column starts at `top`.
pub(crate) fn read_array(
    dir: &PartitionDir,
    column: &ColumnMeta,
    top: u64,
    lo: u64,
    hi: u64,
    symbols: Option<&PublishedSymbols>,
) -> Result<ArrayRef> {
    let data_type = column.column_type.arrow_type();
    if hi <= top {
        return Ok(new_null_array(&data_type, (hi - lo) as usize));
    }
    if lo < top {
        let nulls = new_null_array(&data_type, (top - lo) as usize);
        let rest = read_array(dir, column, top, top, hi, symbols)?;
        return arrow_select::concat::concat(&[nulls.as_ref(), rest.as_ref()])
            .map_err(|e| StorageError::Internal(e.to_string()));
    }
    if let Some(file) = dir.parquet()? {
        // A Parquet file holds every row of each column it has (top 0); a column added since
        // has its top at the part's end and is never read here.
        ensure_invariant!(
            top == 0,
            "column {} of a Parquet part has top {top}",
            column.id
        );
        let array = file.read(dir.cache(), dir.id(), column, lo..hi, symbols)?;
        if column.column_type != ColumnType::Symbol {
            return Ok(array);
        }
        let codes = array
            .as_primitive_opt::<Int32Type>()
            .cloned()
            .ok_or_else(|| {
                StorageError::Internal("SYMBOL codes of a Parquet part are not Int32".into())
            })?;
        return symbol_array(codes, column, symbols.map(|s| s.values()), &file_path(dir));
    }
    let start = (lo - top) as usize;
    let len = (hi - lo) as usize;
    let id = column.id;
    let path = || dir.path.join(data_file(id));
    let missing = || StorageError::corrupt(path(), "missing column file");
    let corrupt = |e: arrow_schema::ArrowError| StorageError::corrupt(path(), e.to_string());
    let nulls = validity(dir, id, start, len)?;
    let array: ArrayRef = match column.column_type.layout() {
        Layout::Fixed { width } => {
            let buf = dir
                .map(&data_file(id), (start + len) * width)?
                .ok_or_else(missing)?;
            match column.column_type {
                ColumnType::Byte => primitive::<Int8Type>(buf, start, len, nulls),
                ColumnType::Short => primitive::<Int16Type>(buf, start, len, nulls),
                ColumnType::Int => primitive::<Int32Type>(buf, start, len, nulls),
                ColumnType::Long => primitive::<Int64Type>(buf, start, len, nulls),
                ColumnType::Float => primitive::<Float32Type>(buf, start, len, nulls),
                ColumnType::Double => primitive::<Float64Type>(buf, start, len, nulls),
                ColumnType::Timestamp => {
                    primitive::<TimestampNanosecondType>(buf, start, len, nulls)
                }
                ColumnType::Date => primitive::<Date64Type>(buf, start, len, nulls),
                ColumnType::Symbol => {
                    let keys = PrimitiveArray::<Int32Type>::new(rows_of(&buf, start, len), nulls);
                    let rows = start as u64..(start + len) as u64;
                    match symbols.map(|s| s.values()) {
                        // Rows checked by an earlier read name symbols of any dictionary
                        // since: dictionaries only grow.
                        Some(values) if dir.symbols_checked(id, rows.end, values.len()) => {
                            // SAFETY: every code of these rows was checked to be below a
                            // dictionary size of at most `values.len()` (`symbol_array`,
                            // recorded below); the rows are committed and never rewritten
                            // in this directory.
                            Arc::new(unsafe {
                                DictionaryArray::new_unchecked(keys, values.clone())
                            })
                        }
                        values => {
                            let symbols = values.map_or(0, |v| v.len());
                            let (array, checked) =
                                symbol_array_checked(keys, column, values, &path())?;
                            if checked {
                                dir.note_symbols_checked(id, rows, symbols);
                            }
                            array
                        }
                    }
                }
                ColumnType::Uuid => {
                    uuid_strings(&buf.as_slice()[start * 16..(start + len) * 16], nulls)
                }
                other => {
                    return Err(StorageError::Internal(format!(
                        "{other:?} is not fixed-width"
                    )));
                }
            }
        }
        Layout::Bits => {
            let buf = dir
                .map(&data_file(id), (start + len).div_ceil(8))?
                .ok_or_else(missing)?;
            Arc::new(BooleanArray::new(bits_of(&buf, start, len), nulls))
        }
        Layout::Var => {
            let o = dir
                .map(&offsets_file(id), (start + len + 1) * 8)?
                .ok_or_else(missing)?;
            let offsets: ScalarBuffer<i64> = rows_of(&o, start, len + 1);
            check_offsets(&offsets, &dir.path.join(offsets_file(id)))?;
            let (first, end) = (offsets[0], offsets[len]);
            let data = dir.map(&data_file(id), end as usize)?.ok_or_else(missing)?;
            let data = own_range(&data, first as usize, (end - first) as usize);
            // The file's offsets count from its start, the array's from its first value.
            let offsets = if first == 0 {
                offsets
            } else {
                offsets.iter().map(|o| o - first).collect()
            };
            // SAFETY: check_offsets verified the offsets are non-negative and monotonic, so
            // they still are less the first.
            let offsets = unsafe { OffsetBuffer::new_unchecked(offsets) };
            if column.column_type == ColumnType::Binary {
                Arc::new(LargeBinaryArray::try_new(offsets, data, nulls).map_err(corrupt)?)
            } else {
                Arc::new(LargeStringArray::try_new(offsets, data, nulls).map_err(corrupt)?)
            }
        }
    };
    Ok(array)
}

/// Rows `picks` (ascending row numbers of the partition) of `column`, gathered from the
/// mapped files. Only the picked SYMBOL codes are checked against the dictionary, so a few rows
/// spread over a large range cost what they are, not what the range is.
pub(crate) fn read_picked(
    dir: &PartitionDir,
    column: &ColumnMeta,
    top: u64,
    picks: &[u32],
    symbols: Option<&PublishedSymbols>,
) -> Result<ArrayRef> {
    let (Some(&first), Some(&last)) = (picks.first(), picks.last()) else {
        return Ok(arrow_array::new_empty_array(
            &column.column_type.arrow_type(),
        ));
    };
    let (lo, hi) = (u64::from(first), u64::from(last) + 1);
    let indices = UInt32Array::from_iter_values(picks.iter().map(|r| r - first));
    let take = |array: &dyn Array| {
        arrow_select::take::take(array, &indices, None)
            .map_err(|e| StorageError::Internal(e.to_string()))
    };
    if column.column_type != ColumnType::Symbol || lo < top || dir.is_parquet() {
        return take(read_array(dir, column, top, lo, hi, symbols)?.as_ref());
    }
    let (start, len) = ((lo - top) as usize, (hi - lo) as usize);
    let path = dir.path.join(data_file(column.id));
    let buf = dir
        .map(&data_file(column.id), (start + len) * 4)?
        .ok_or_else(|| StorageError::corrupt(&path, "missing column file"))?;
    let nulls = validity(dir, column.id, start, len)?;
    let codes = PrimitiveArray::<Int32Type>::new(ScalarBuffer::new(buf, start, len), nulls);
    let codes = take(&codes)?.as_primitive::<Int32Type>().clone();
    symbol_array(codes, column, symbols.map(|s| s.values()), &path)
}

/// A Parquet part's file, for messages.
fn file_path(dir: &PartitionDir) -> std::path::PathBuf {
    dir.path.join(PARQUET_FILE)
}

/// The validity of rows `[start, start + len)` of column `id`, if any is NULL.
fn validity(dir: &PartitionDir, id: u32, start: usize, len: usize) -> Result<Option<NullBuffer>> {
    Ok(match dir.map_validity(id, start + len)? {
        Some(b) => {
            let bits = bits_of(&b, start, len);
            let nulls = len - sundial_kernels::count_set_bits(&bits);
            // SAFETY: `nulls` is the number of unset bits of `bits`, just counted.
            (nulls > 0).then(|| unsafe { NullBuffer::new_unchecked(bits, nulls) })
        }
        None => None,
    })
}

/// SYMBOL codes as a dictionary array over the column's symbols; every code must name one.
fn symbol_array(
    codes: PrimitiveArray<Int32Type>,
    column: &ColumnMeta,
    symbols: Option<&SymbolValues>,
    path: &std::path::Path,
) -> Result<ArrayRef> {
    symbol_array_checked(codes, column, symbols, path).map(|(array, _)| array)
}

/// [`symbol_array`], and whether every code (NULL rows' included) was found to name a symbol
/// in one pass, so the rows may skip the check when read again.
fn symbol_array_checked(
    codes: PrimitiveArray<Int32Type>,
    column: &ColumnMeta,
    symbols: Option<&SymbolValues>,
    path: &std::path::Path,
) -> Result<(ArrayRef, bool)> {
    let values = symbols
        .ok_or_else(|| StorageError::Internal(format!("no dictionary for column {}", column.id)))?;
    let values: ArrayRef = values.clone();
    // Every code must name a symbol: one vectorized pass over the raw codes checks them all.
    // A NULL row's code is 0 (docs/design.md), a symbol whenever the dictionary has one; only
    // when it has none, or a code is outside, are the rows checked one by one, NULL rows
    // excepted.
    let symbols = u32::try_from(values.len()).unwrap_or(u32::MAX);
    let outside = codes_outside(codes.values(), symbols);
    if outside && codes.null_count() > 0 {
        let array = DictionaryArray::try_new(codes, values)
            .map_err(|e| StorageError::corrupt(path, e.to_string()))?;
        return Ok((Arc::new(array), false));
    }
    if outside {
        let (min, max) = codes
            .values()
            .iter()
            .fold((0i32, -1i32), |(lo, hi), &c| (lo.min(c), hi.max(c)));
        return Err(StorageError::corrupt(
            path,
            format!(
                "symbol codes {min}..={max} outside the {} symbols",
                values.len()
            ),
        ));
    }
    // SAFETY: every code, a NULL row's included, was just checked to be in 0..values.len().
    let array = unsafe { DictionaryArray::new_unchecked(codes, values) };
    Ok((Arc::new(array), true))
}

/// Whether any of `codes` is outside `0..symbols` (a negative code, as unsigned, is above).
/// Compiled for AVX2 too, and that version taken when the processor has it: the check reads
/// the codes at memory speed.
fn codes_outside(codes: &[i32], symbols: u32) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor supports AVX2, checked just above.
        return unsafe { codes_outside_avx2(codes, symbols) };
    }
    codes_outside_any(codes, symbols)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn codes_outside_avx2(codes: &[i32], symbols: u32) -> bool {
    codes_outside_any(codes, symbols)
}

#[inline(always)]
fn codes_outside_any(codes: &[i32], symbols: u32) -> bool {
    codes.chunks(4_096).any(|chunk| {
        chunk
            .iter()
            .fold(false, |bad, &c| bad | (c as u32 >= symbols))
    })
}

/// UUIDs as canonical text: the one type whose reads format (copy) instead of mapping.
fn uuid_strings(bytes: &[u8], nulls: Option<NullBuffer>) -> ArrayRef {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let rows = bytes.len() / 16;
    let mut data = Vec::with_capacity(rows * 36);
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0i32);
    for (row, uuid) in bytes.chunks_exact(16).enumerate() {
        if nulls.as_ref().is_none_or(|n| n.is_valid(row)) {
            for (i, b) in uuid.iter().enumerate() {
                if matches!(i, 4 | 6 | 8 | 10) {
                    data.push(b'-');
                }
                data.push(HEX[usize::from(b >> 4)]);
                data.push(HEX[usize::from(b & 0xf)]);
            }
        }
        offsets.push(data.len() as i32);
    }
    // SAFETY: offsets start at 0 and never decrease; the data is ASCII.
    let array = unsafe {
        arrow_array::StringArray::new_unchecked(
            OffsetBuffer::new_unchecked(ScalarBuffer::from(offsets)),
            Buffer::from_vec(data),
            nulls,
        )
    };
    Arc::new(array)
}

fn primitive<T: ArrowPrimitiveType>(
    buf: Buffer,
    start: usize,
    len: usize,
    nulls: Option<NullBuffer>,
) -> ArrayRef {
    Arc::new(PrimitiveArray::<T>::new(
        rows_of::<T::Native>(&buf, start, len),
        nulls,
    ))
}

/// Elements `[start, start + len)` of `buf` (a mapped file's values) as a buffer of their own.
fn rows_of<T: arrow_buffer::ArrowNativeType>(
    buf: &Buffer,
    start: usize,
    len: usize,
) -> ScalarBuffer<T> {
    let width = std::mem::size_of::<T>();
    ScalarBuffer::new(own_range(buf, start * width, len * width), 0, len)
}

/// Bits `[start, start + len)` of `buf` as a buffer of their own (whole bytes, the bit offset
/// kept).
fn bits_of(buf: &Buffer, start: usize, len: usize) -> BooleanBuffer {
    let first = start / 8;
    let bytes = (start + len).div_ceil(8) - first;
    BooleanBuffer::new(own_range(buf, first, bytes), start % 8, len)
}

/// Bytes `[from, from + len)` of `buf`, zero-copy, as an allocation of their own: the new
/// buffer's capacity is `len`, and it holds `buf` (so the mapping) for as long as it lives.
fn own_range(buf: &Buffer, from: usize, len: usize) -> Buffer {
    let range = buf.slice_with_length(from, len);
    if range.capacity() == len {
        return range;
    }
    let Some(ptr) = std::ptr::NonNull::new(range.as_ptr().cast_mut()) else {
        return range;
    };
    // SAFETY: `ptr` points to `len` readable bytes of `range`'s allocation, which the new
    // buffer owns (an `Arc` of it) and which is never written to while shared.
    unsafe { Buffer::from_custom_allocation(ptr, len, Arc::new(range)) }
}

fn check_offsets(offsets: &ScalarBuffer<i64>, path: &std::path::Path) -> Result<()> {
    if offsets.first().is_some_and(|o| *o < 0) || offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err(StorageError::corrupt(path, "offsets are not monotonic"));
    }
    Ok(())
}

/// Reads the committed symbols of a SYMBOL column's dictionary files.
pub(crate) fn read_symbols(
    dir: &std::path::Path,
    column_id: u32,
    count: u32,
) -> Result<Vec<String>> {
    let count = count as usize;
    if count == 0 {
        return Ok(Vec::new());
    }
    let offsets_path = dir.join(offsets_file(column_id));
    let data_path = dir.join(data_file(column_id));
    let raw = std::fs::read(&offsets_path).map_err(|e| StorageError::io(&offsets_path, e))?;
    if raw.len() < (count + 1) * 8 {
        return Err(StorageError::corrupt(
            &offsets_path,
            "symbol offsets truncated",
        ));
    }
    let offsets: Vec<u64> = raw[..(count + 1) * 8]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    validate_offsets(&offsets, &offsets_path)?;
    let data = std::fs::read(&data_path).map_err(|e| StorageError::io(&data_path, e))?;
    if (data.len() as u64) < offsets[count] {
        return Err(StorageError::corrupt(&data_path, "symbol data truncated"));
    }
    offsets
        .windows(2)
        .map(|w| {
            std::str::from_utf8(&data[w[0] as usize..w[1] as usize])
                .map(str::to_owned)
                .map_err(|_| StorageError::corrupt(&data_path, "symbol is not UTF-8"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Codes naming no symbol are corruption, with and without NULLs among them.
    #[test]
    fn symbol_codes_must_name_a_symbol() {
        let column = ColumnMeta {
            id: 7,
            name: "s".into(),
            column_type: ColumnType::Symbol,
            indexed: false,
            dedup_key: false,
        };
        let symbols: SymbolValues = Arc::new(arrow_array::StringArray::from(vec!["a", "b"]));
        let path = std::path::Path::new("s.d");
        let read = |codes: Vec<Option<i32>>| {
            symbol_array(PrimitiveArray::from(codes), &column, Some(&symbols), path)
        };
        assert_eq!(read(vec![Some(0), Some(1), Some(1)]).unwrap().len(), 3);
        assert_eq!(read(vec![Some(1), None]).unwrap().null_count(), 1);
        assert_eq!(read(vec![]).unwrap().len(), 0);
        for bad in [
            vec![Some(0), Some(2)],
            vec![Some(-1), Some(0)],
            vec![None, Some(5)],
        ] {
            assert!(read(bad.clone()).is_err(), "{bad:?}");
        }
    }
}
