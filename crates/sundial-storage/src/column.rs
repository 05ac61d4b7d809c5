//! In-memory columns of rows on their way to disk ([`ColumnBuf`]) and their conversion from Arrow.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType};
use arrow_schema::{DataType, TimeUnit};

use crate::bits;
use crate::error::{Result, StorageError};
use crate::types::{ColumnType, Layout};

/// Values of one column for a run of rows, in the same byte layout as the column files.
#[derive(Debug, Clone)]
pub(crate) enum Values {
    Fixed {
        width: usize,
        bytes: Vec<u8>,
    },
    Bits(Vec<u8>),
    /// `offsets` has `rows + 1` entries and starts at 0.
    Var {
        offsets: Vec<u64>,
        data: Vec<u8>,
    },
}

/// One column's pending rows: values plus an optional validity bitmap (`None`: no NULLs).
#[derive(Debug, Clone)]
pub(crate) struct ColumnBuf {
    pub values: Values,
    pub validity: Option<Vec<u8>>,
    pub rows: usize,
}

impl ColumnBuf {
    pub fn empty(column_type: ColumnType) -> ColumnBuf {
        let values = match column_type.layout() {
            Layout::Fixed { width } => Values::Fixed {
                width,
                bytes: Vec::new(),
            },
            Layout::Bits => Values::Bits(Vec::new()),
            Layout::Var => Values::Var {
                offsets: vec![0],
                data: Vec::new(),
            },
        };
        ColumnBuf {
            values,
            validity: None,
            rows: 0,
        }
    }

    /// `rows` NULLs.
    pub fn nulls(column_type: ColumnType, rows: usize) -> ColumnBuf {
        let mut buf = ColumnBuf::empty(column_type);
        match &mut buf.values {
            Values::Fixed { width, bytes } => bytes.resize(*width * rows, 0),
            Values::Bits(b) => b.resize(bits::bytes_for(rows), 0),
            Values::Var { offsets, .. } => offsets.resize(rows + 1, 0),
        }
        buf.validity = Some(vec![0; bits::bytes_for(rows)]);
        buf.rows = rows;
        buf
    }

    pub fn is_valid(&self, row: usize) -> bool {
        self.validity.as_ref().is_none_or(|v| bits::get(v, row))
    }

    pub fn has_nulls(&self) -> bool {
        self.validity
            .as_ref()
            .is_some_and(|v| bits::count_ones(v, self.rows) != self.rows)
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        let values = match &self.values {
            Values::Fixed { bytes, .. } => bytes.len(),
            Values::Bits(b) => b.len(),
            Values::Var { offsets, data } => offsets.len() * 8 + data.len(),
        };
        values + self.validity.as_ref().map_or(0, Vec::len)
    }

    /// Fixed-width value bytes of `row`.
    #[cfg(test)]
    pub fn fixed(&self, row: usize) -> &[u8] {
        match &self.values {
            Values::Fixed { width, bytes } => &bytes[row * width..(row + 1) * width],
            _ => &[],
        }
    }

    /// Appends rows `range` of `other` (same type).
    pub fn extend_from(&mut self, other: &ColumnBuf, range: std::ops::Range<usize>) {
        let n = range.len();
        match (&mut self.values, &other.values) {
            (Values::Fixed { width, bytes }, Values::Fixed { bytes: src, .. }) => {
                bytes.extend_from_slice(&src[range.start * *width..range.end * *width]);
            }
            (Values::Bits(dst), Values::Bits(src)) => {
                bits::append(dst, self.rows, src, range.start, n);
            }
            (
                Values::Var { offsets, data },
                Values::Var {
                    offsets: so,
                    data: sd,
                },
            ) => {
                let base = *offsets.last().unwrap_or(&0);
                let start = so[range.start];
                data.extend_from_slice(&sd[start as usize..so[range.end] as usize]);
                offsets.extend(
                    so[range.start + 1..=range.end]
                        .iter()
                        .map(|o| base + o - start),
                );
            }
            _ => {}
        }
        self.extend_validity(other.validity.as_deref(), range.start, n);
        self.rows += n;
    }

    fn extend_validity(&mut self, src: Option<&[u8]>, src_offset: usize, n: usize) {
        match (&mut self.validity, src) {
            (None, None) => {}
            (Some(v), None) => bits::append_constant(v, self.rows, true, n),
            (Some(v), Some(s)) => bits::append(v, self.rows, s, src_offset, n),
            (None, Some(s)) => {
                let mut v = Vec::new();
                bits::append_constant(&mut v, 0, true, self.rows);
                bits::append(&mut v, self.rows, s, src_offset, n);
                self.validity = Some(v);
            }
        }
    }

    /// A new buffer holding `self`'s rows in the order of `indices`.
    pub fn gather(&self, indices: &[u32]) -> ColumnBuf {
        let values = match &self.values {
            Values::Fixed { width, bytes } => {
                let w = *width;
                let mut out = Vec::with_capacity(indices.len() * w);
                for &i in indices {
                    let i = i as usize;
                    out.extend_from_slice(&bytes[i * w..(i + 1) * w]);
                }
                Values::Fixed {
                    width: w,
                    bytes: out,
                }
            }
            Values::Bits(src) => {
                let mut out = vec![0u8; bits::bytes_for(indices.len())];
                for (j, &i) in indices.iter().enumerate() {
                    bits::set(&mut out, j, bits::get(src, i as usize));
                }
                Values::Bits(out)
            }
            Values::Var { offsets, data } => {
                let mut out_offsets = Vec::with_capacity(indices.len() + 1);
                out_offsets.push(0u64);
                let mut out = Vec::new();
                for &i in indices {
                    let i = i as usize;
                    out.extend_from_slice(&data[offsets[i] as usize..offsets[i + 1] as usize]);
                    out_offsets.push(out.len() as u64);
                }
                Values::Var {
                    offsets: out_offsets,
                    data: out,
                }
            }
        };
        let validity = self.validity.as_ref().map(|v| {
            let mut out = vec![0u8; bits::bytes_for(indices.len())];
            for (j, &i) in indices.iter().enumerate() {
                bits::set(&mut out, j, bits::get(v, i as usize));
            }
            out
        });
        ColumnBuf {
            values,
            validity,
            rows: indices.len(),
        }
    }

    /// The bytes of row `row`'s value (its bit, for BOOLEAN), or `None` when it is NULL.
    fn value_bytes(&self, row: usize) -> Option<ValueBytes<'_>> {
        if !self.is_valid(row) {
            return None;
        }
        Some(match &self.values {
            Values::Fixed { width, bytes } => ValueBytes::Slice(&bytes[row * width..][..*width]),
            Values::Bits(b) => ValueBytes::Bit(bits::get(b, row)),
            Values::Var { offsets, data } => {
                ValueBytes::Slice(&data[offsets[row] as usize..offsets[row + 1] as usize])
            }
        })
    }

    /// Whether rows `a` and `b` hold the same value (NULL equal to NULL).
    pub fn rows_equal(&self, a: usize, b: usize) -> bool {
        self.value_bytes(a) == self.value_bytes(b)
    }

    /// Feeds row `row`'s value to `hasher`: rows equal by [`ColumnBuf::rows_equal`] feed the
    /// same bytes.
    pub fn hash_row(&self, row: usize, hasher: &mut impl std::hash::Hasher) {
        match self.value_bytes(row) {
            None => hasher.write_u8(0),
            Some(ValueBytes::Bit(b)) => hasher.write_u8(1 + u8::from(b)),
            Some(ValueBytes::Slice(bytes)) => {
                hasher.write_u8(3);
                hasher.write_usize(bytes.len());
                hasher.write(bytes);
            }
        }
    }
}

/// A non-NULL value as bytes.
#[derive(PartialEq, Eq)]
enum ValueBytes<'a> {
    Slice(&'a [u8]),
    Bit(bool),
}

/// Resolves SYMBOL strings to dictionary keys, adding new symbols as needed.
pub(crate) trait SymbolResolver {
    fn resolve(&mut self, value: &str) -> Result<i32>;
}

/// Converts an Arrow array into a [`ColumnBuf`] for a column of `column_type`.
///
/// Accepts the column type's own Arrow type plus lossless variants (other timestamp units,
/// every string encoding, canonical UUID text); anything else is `InvalidInput`.
pub(crate) fn from_arrow(
    array: &ArrayRef,
    column_type: ColumnType,
    column_name: &str,
    symbols: Option<&mut dyn SymbolResolver>,
) -> Result<ColumnBuf> {
    let rows = array.len();
    let mismatch = || {
        StorageError::InvalidInput(format!(
            "column '{column_name}' is {} but the value has type {}",
            column_type.name(),
            array.data_type()
        ))
    };
    let mut buf = ColumnBuf::empty(column_type);
    buf.rows = rows;
    if array.null_count() > 0 {
        let mut v = Vec::new();
        match array.logical_nulls() {
            Some(nulls) => {
                let b = nulls.inner();
                bits::append(&mut v, 0, b.values(), b.offset(), rows);
            }
            None => bits::append_constant(&mut v, 0, true, rows),
        }
        buf.validity = Some(v);
    }
    match (column_type, array.data_type()) {
        (ColumnType::Boolean, DataType::Boolean) => {
            let values = array.as_boolean().values();
            let mut out = Vec::new();
            bits::append(&mut out, 0, values.values(), values.offset(), rows);
            buf.values = Values::Bits(out);
        }
        (ColumnType::Byte, DataType::Int8) => copy_native::<Int8Type>(array, &mut buf),
        (ColumnType::Short, DataType::Int16) => copy_native::<Int16Type>(array, &mut buf),
        (ColumnType::Short, DataType::UInt8) => {
            map_native::<UInt8Type, i16>(array, &mut buf, |v| v as i16)
        }
        (ColumnType::Int, DataType::Int32) => copy_native::<Int32Type>(array, &mut buf),
        (ColumnType::Int, DataType::UInt16) => {
            map_native::<UInt16Type, i32>(array, &mut buf, |v| v as i32)
        }
        (ColumnType::Long, DataType::Int64) => copy_native::<Int64Type>(array, &mut buf),
        (ColumnType::Long, DataType::UInt32) => {
            map_native::<UInt32Type, i64>(array, &mut buf, |v| v as i64)
        }
        (ColumnType::Long, DataType::UInt64) => {
            let a = array.as_primitive::<UInt64Type>();
            if a.iter().flatten().any(|v| v > i64::MAX as u64) {
                return Err(StorageError::InvalidInput(format!(
                    "value out of range for LONG column '{column_name}'"
                )));
            }
            map_native::<UInt64Type, i64>(array, &mut buf, |v| v as i64)
        }
        (ColumnType::Float, DataType::Float32) => copy_native::<Float32Type>(array, &mut buf),
        (ColumnType::Double, DataType::Float64) => copy_native::<Float64Type>(array, &mut buf),
        (ColumnType::Timestamp, DataType::Timestamp(unit, _)) => {
            timestamps_to_nanos(array, *unit, column_name, &mut buf)?
        }
        (ColumnType::Date, DataType::Date64) => copy_native::<Date64Type>(array, &mut buf),
        (ColumnType::Date, DataType::Date32) => {
            map_native::<Date32Type, i64>(array, &mut buf, |d| i64::from(d) * 86_400_000)
        }
        (ColumnType::Uuid, DataType::FixedSizeBinary(16)) => {
            let a = array.as_fixed_size_binary();
            let start = a.offset() * 16;
            buf.values = Values::Fixed {
                width: 16,
                bytes: a.value_data()[start..start + rows * 16].to_vec(),
            };
        }
        (ColumnType::Uuid, _) if is_string(array.data_type()) => {
            let mut bytes = Vec::with_capacity(rows * 16);
            for_each_str(array, |s| {
                match s {
                    Some(s) => bytes.extend_from_slice(&parse_uuid(s).ok_or_else(|| {
                        StorageError::InvalidInput(format!(
                            "invalid UUID '{s}' for column '{column_name}'"
                        ))
                    })?),
                    None => bytes.extend_from_slice(&[0; 16]),
                }
                Ok(())
            })?;
            buf.values = Values::Fixed { width: 16, bytes };
        }
        (ColumnType::Symbol, _) if is_string(array.data_type()) => {
            let resolver = symbols.ok_or_else(|| {
                StorageError::Internal(format!("no symbol table for column '{column_name}'"))
            })?;
            symbols_to_keys(array, resolver, &mut buf)?;
        }
        (ColumnType::Varchar, _) if is_string(array.data_type()) => {
            let (offsets, data) =
                var_values(array, |a, f| for_each_str(a, |s| f(s.map(str::as_bytes))))?;
            buf.values = Values::Var { offsets, data };
        }
        (ColumnType::Binary, DataType::Binary | DataType::LargeBinary | DataType::BinaryView) => {
            let (offsets, data) = var_values(array, for_each_bytes)?;
            buf.values = Values::Var { offsets, data };
        }
        (ColumnType::Binary, _) if is_string(array.data_type()) => {
            let (offsets, data) =
                var_values(array, |a, f| for_each_str(a, |s| f(s.map(str::as_bytes))))?;
            buf.values = Values::Var { offsets, data };
        }
        (_, DataType::Null) => return Ok(ColumnBuf::nulls(column_type, rows)),
        _ => return Err(mismatch()),
    }
    Ok(buf)
}

/// Whether [`from_arrow`] takes an array of `data_type` for a column of `column_type` as it
/// is (every arm of its match, and nothing else).
pub(crate) fn accepts(column_type: ColumnType, data_type: &DataType) -> bool {
    use ColumnType as C;
    use DataType as D;
    match (column_type, data_type) {
        (_, D::Null) => true,
        (C::Uuid | C::Symbol | C::Varchar | C::Binary, d) if is_string(d) => true,
        (C::Binary, D::Binary | D::LargeBinary | D::BinaryView) => true,
        (C::Uuid, D::FixedSizeBinary(16)) => true,
        (C::Timestamp, D::Timestamp(_, _)) => true,
        (C::Date, D::Date32 | D::Date64) => true,
        (C::Short, D::UInt8) | (C::Int, D::UInt16) | (C::Long, D::UInt32 | D::UInt64) => true,
        (C::Boolean | C::Byte | C::Short | C::Int | C::Long | C::Float | C::Double, d) => {
            *d == column_type.arrow_type()
        }
        _ => false,
    }
}

fn is_string(data_type: &DataType) -> bool {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_string(v),
        _ => false,
    }
}

fn copy_native<T: ArrowPrimitiveType>(array: &ArrayRef, buf: &mut ColumnBuf) {
    let a = array.as_primitive::<T>();
    let width = std::mem::size_of::<T::Native>();
    let values = a.values();
    // SAFETY: primitive native types are plain old data; viewing them as bytes is sound.
    let bytes =
        unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), values.len() * width) };
    buf.values = Values::Fixed {
        width,
        bytes: bytes.to_vec(),
    };
}

trait LeBytes: Copy {
    fn put(self, out: &mut Vec<u8>);
}
impl LeBytes for i16 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}
impl LeBytes for i32 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}
impl LeBytes for i64 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

fn map_native<T: ArrowPrimitiveType, O: LeBytes>(
    array: &ArrayRef,
    buf: &mut ColumnBuf,
    f: impl Fn(T::Native) -> O,
) {
    let a = array.as_primitive::<T>();
    let width = std::mem::size_of::<O>();
    let mut bytes = Vec::with_capacity(a.len() * width);
    for v in a.values().iter() {
        f(*v).put(&mut bytes);
    }
    buf.values = Values::Fixed { width, bytes };
}

fn timestamps_to_nanos(
    array: &ArrayRef,
    unit: TimeUnit,
    column_name: &str,
    buf: &mut ColumnBuf,
) -> Result<()> {
    let factor: i64 = match unit {
        TimeUnit::Nanosecond => {
            copy_native::<TimestampNanosecondType>(array, buf);
            return Ok(());
        }
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Second => 1_000_000_000,
    };
    let raw: Vec<i64> = match unit {
        TimeUnit::Microsecond => array
            .as_primitive::<TimestampMicrosecondType>()
            .values()
            .to_vec(),
        TimeUnit::Millisecond => array
            .as_primitive::<TimestampMillisecondType>()
            .values()
            .to_vec(),
        _ => array
            .as_primitive::<TimestampSecondType>()
            .values()
            .to_vec(),
    };
    let mut bytes = Vec::with_capacity(raw.len() * 8);
    for (i, v) in raw.iter().enumerate() {
        let ns = if array.is_null(i) {
            0
        } else {
            v.checked_mul(factor).ok_or_else(|| {
                StorageError::InvalidInput(format!(
                    "timestamp {v} ({unit:?}) in column '{column_name}' is outside the \
                     supported range {}",
                    crate::TIMESTAMP_RANGE_TEXT
                ))
            })?
        };
        bytes.extend_from_slice(&ns.to_le_bytes());
    }
    buf.values = Values::Fixed { width: 8, bytes };
    Ok(())
}

/// Calls `f` with each value of a string-family array (`None` for NULL).
pub(crate) fn for_each_str(
    array: &dyn Array,
    mut f: impl FnMut(Option<&str>) -> Result<()>,
) -> Result<()> {
    for_each_str_dyn(array, &mut f)
}

fn for_each_str_dyn(
    array: &dyn Array,
    f: &mut dyn FnMut(Option<&str>) -> Result<()>,
) -> Result<()> {
    match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().iter().try_for_each(f),
        DataType::LargeUtf8 => array.as_string::<i64>().iter().try_for_each(f),
        DataType::Utf8View => array.as_string_view().iter().try_for_each(f),
        DataType::Dictionary(_, _) => {
            let dict = array.as_any_dictionary();
            let keys = dictionary_keys(dict);
            let values = dict.values();
            let mut strings: Vec<Option<String>> = Vec::with_capacity(values.len());
            for_each_str_dyn(values.as_ref(), &mut |s| {
                strings.push(s.map(str::to_owned));
                Ok(())
            })?;
            for (i, k) in keys.iter().enumerate() {
                if array.is_null(i) {
                    f(None)?;
                } else {
                    f(strings.get(*k).and_then(|s| s.as_deref()))?;
                }
            }
            Ok(())
        }
        other => Err(StorageError::Internal(format!(
            "not a string array: {other}"
        ))),
    }
}

/// A dictionary array's keys as indices into its values. Arrow's `normalized_keys` panics on a
/// dictionary without values, which an array of only NULLs may have: its keys are all 0 then.
fn dictionary_keys(dict: &dyn arrow_array::AnyDictionaryArray) -> Vec<usize> {
    if dict.values().is_empty() {
        return vec![0; dict.keys().len()];
    }
    dict.normalized_keys()
}

fn for_each_bytes(array: &dyn Array, f: &mut dyn FnMut(Option<&[u8]>) -> Result<()>) -> Result<()> {
    match array.data_type() {
        DataType::Binary => array.as_binary::<i32>().iter().try_for_each(f),
        DataType::LargeBinary => array.as_binary::<i64>().iter().try_for_each(f),
        DataType::BinaryView => array.as_binary_view().iter().try_for_each(f),
        other => Err(StorageError::Internal(format!(
            "not a binary array: {other}"
        ))),
    }
}

fn var_values(
    array: &ArrayRef,
    visit: impl Fn(&dyn Array, &mut dyn FnMut(Option<&[u8]>) -> Result<()>) -> Result<()>,
) -> Result<(Vec<u64>, Vec<u8>)> {
    let mut offsets = Vec::with_capacity(array.len() + 1);
    offsets.push(0u64);
    let mut data = Vec::new();
    visit(array.as_ref(), &mut |v| {
        if let Some(v) = v {
            data.extend_from_slice(v);
        }
        offsets.push(data.len() as u64);
        Ok(())
    })?;
    Ok((offsets, data))
}

/// The string at `index` of a string array; `None` when it is NULL, out of bounds, or the
/// array holds no strings.
fn str_at(array: &dyn Array, index: usize) -> Option<&str> {
    if index >= array.len() || array.is_null(index) {
        return None;
    }
    match array.data_type() {
        DataType::Utf8 => Some(array.as_string::<i32>().value(index)),
        DataType::LargeUtf8 => Some(array.as_string::<i64>().value(index)),
        DataType::Utf8View => Some(array.as_string_view().value(index)),
        _ => None,
    }
}

fn symbols_to_keys(
    array: &ArrayRef,
    resolver: &mut dyn SymbolResolver,
    buf: &mut ColumnBuf,
) -> Result<()> {
    let mut bytes = Vec::with_capacity(array.len() * 4);
    if let DataType::Dictionary(_, _) = array.data_type() {
        // Resolve each dictionary value a row uses, once. Values no row uses are never
        // resolved, so they do not become symbols: an ILP receiver's dictionary outlives its
        // batches and holds values of earlier ones.
        let dict = array.as_any_dictionary();
        let values = dict.values();
        if !matches!(
            values.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            return Err(StorageError::Internal(format!(
                "not a string array: {}",
                array.data_type()
            )));
        }
        let mut resolved: Vec<Option<i32>> = vec![None; values.len()];
        for (i, &k) in dictionary_keys(dict).iter().enumerate() {
            let key = match resolved.get(k).copied().flatten() {
                _ if array.is_null(i) => 0,
                Some(code) => code,
                None => {
                    let code = match str_at(values.as_ref(), k) {
                        Some(s) => resolver.resolve(s)?,
                        None => 0,
                    };
                    if let Some(slot) = resolved.get_mut(k) {
                        *slot = Some(code);
                    }
                    code
                }
            };
            bytes.extend_from_slice(&key.to_le_bytes());
        }
    } else {
        for_each_str(array.as_ref(), |s| {
            let key = match s {
                Some(s) => resolver.resolve(s)?,
                None => 0,
            };
            bytes.extend_from_slice(&key.to_le_bytes());
            Ok(())
        })?;
    }
    buf.values = Values::Fixed { width: 4, bytes };
    Ok(())
}

/// Parses canonical UUID text (`8-4-4-4-12` hex digits, either case) into big-endian bytes.
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let s = s.trim();
    let bytes = s.as_bytes();
    if bytes.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut n = 0;
    let mut i = 0;
    while i < 36 {
        if matches!(i, 8 | 13 | 18 | 23) {
            if bytes[i] != b'-' {
                return None;
            }
            i += 1;
            continue;
        }
        let hi = (bytes[i] as char).to_digit(16)?;
        let lo = (bytes[i + 1] as char).to_digit(16)?;
        out[n] = (hi * 16 + lo) as u8;
        n += 1;
        i += 2;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use std::sync::Arc;

    struct Seq(Vec<String>);
    impl SymbolResolver for Seq {
        fn resolve(&mut self, value: &str) -> Result<i32> {
            if let Some(i) = self.0.iter().position(|s| s == value) {
                return Ok(i as i32);
            }
            self.0.push(value.to_string());
            Ok(self.0.len() as i32 - 1)
        }
    }

    #[test]
    fn converts_symbols_and_longs_with_nulls() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![
            Some("a"),
            None,
            Some("b"),
            Some("a"),
        ]));
        let mut r = Seq(vec![]);
        let b = from_arrow(&a, ColumnType::Symbol, "s", Some(&mut r)).unwrap();
        assert_eq!(r.0, vec!["a", "b"]);
        assert!(!b.is_valid(1) && b.is_valid(0));
        assert_eq!(b.fixed(3), &0i32.to_le_bytes());
        let l: ArrayRef = Arc::new(Int64Array::from(vec![Some(5), None]));
        let b = from_arrow(&l, ColumnType::Long, "l", None).unwrap();
        assert_eq!(b.fixed(0), &5i64.to_le_bytes());
        assert!(from_arrow(&l, ColumnType::Double, "l", None).is_err());
    }

    #[test]
    fn dictionary_values_no_row_uses_do_not_become_symbols() {
        let keys = arrow_array::Int32Array::from(vec![Some(2), None, Some(0), Some(2)]);
        let values = StringArray::from(vec![Some("x"), Some("unused"), Some("y"), None]);
        let a: ArrayRef =
            Arc::new(arrow_array::DictionaryArray::try_new(keys, Arc::new(values)).unwrap());
        let mut r = Seq(vec!["first".into()]);
        let b = from_arrow(&a, ColumnType::Symbol, "s", Some(&mut r)).unwrap();
        assert_eq!(r.0, vec!["first", "y", "x"]);
        assert!(b.is_valid(0) && !b.is_valid(1) && b.is_valid(2));
        assert_eq!(b.fixed(0), &1i32.to_le_bytes());
        assert_eq!(b.fixed(2), &2i32.to_le_bytes());
        assert_eq!(b.fixed(3), &1i32.to_le_bytes());
        let ints: ArrayRef = Arc::new(
            arrow_array::DictionaryArray::try_new(
                arrow_array::Int32Array::from(vec![0]),
                Arc::new(Int64Array::from(vec![1])),
            )
            .unwrap(),
        );
        assert!(from_arrow(&ints, ColumnType::Symbol, "s", Some(&mut r)).is_err());
    }

    #[test]
    fn gather_and_extend_var() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![Some("xx"), None, Some("yyy")]));
        let b = from_arrow(&a, ColumnType::Varchar, "v", None).unwrap();
        let g = b.gather(&[2, 0, 1]);
        let mut e = ColumnBuf::empty(ColumnType::Varchar);
        e.extend_from(&g, 1..3);
        e.extend_from(&g, 0..1);
        match &e.values {
            Values::Var { offsets, data } => {
                assert_eq!(offsets, &vec![0, 2, 2, 5]);
                assert_eq!(data, b"xxyyy");
            }
            _ => panic!(),
        }
        assert!(!e.is_valid(1) && e.is_valid(0) && e.is_valid(2));
    }

    #[test]
    fn uuid_text() {
        let u = parse_uuid("123e4567-e89b-12d3-a456-426614174000").unwrap();
        assert_eq!(u[0], 0x12);
        assert_eq!(u[15], 0x00);
        assert!(parse_uuid("123e4567e89b12d3a456426614174000").is_none());
    }
}
