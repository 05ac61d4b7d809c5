//! JSON text for QuestDB's answers, written straight into byte buffers (no intermediate values).
//!
//! Values follow QuestDB's `/exec`: numbers and booleans bare, NULL (and non-finite floats) as
//! `null`, timestamps as ISO 8601 UTC text with microseconds (`"2016-01-01T00:00:00.000000Z"`,
//! nine digits when there are nanoseconds), dates with milliseconds, everything else a string.

use std::io::Write;

use arrow::array::{
    Array, AsArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampNanosecondArray,
};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, Schema, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use sundial_query::text::{Fraction, push_timestamp};
use sundial_storage::{ColumnType, SUNDIAL_TYPE_KEY};

/// The Content-Type of JSON answers.
pub const CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// Appends `s` as a JSON string literal.
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The Sundial (QuestDB) type name of a result column: the declared type of a table column,
/// else the one its Arrow type maps to. A declared type whose Arrow type the column no
/// longer has (the metadata of a column cast to another type) is not the column's.
pub fn type_name(field: &arrow::datatypes::Field) -> String {
    let declared = field
        .metadata()
        .get(SUNDIAL_TYPE_KEY)
        .and_then(|t| ColumnType::parse(t))
        .filter(|t| t.arrow_type() == *field.data_type() || t.write_type() == *field.data_type());
    // A dictionary of non-text values is typed as its values.
    let data_type = match field.data_type() {
        DataType::Dictionary(_, value) if !is_text(value) => value.as_ref(),
        other => other,
    };
    declared
        .or_else(|| ColumnType::from_arrow(data_type))
        .map_or_else(
            || field.data_type().to_string().to_uppercase(),
            |t| t.name().to_string(),
        )
}

/// `{"name":..,"type":..},..` for every column.
pub fn write_columns(out: &mut Vec<u8>, schema: &Schema) {
    for (i, field) in schema.fields().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"name\":");
        write_json_string(out, field.name());
        out.extend_from_slice(b",\"type\":");
        write_json_string(out, &type_name(field));
        out.push(b'}');
    }
}

/// A finite float the shortest way that reads back exactly (`1.0`, `0.1`, `1e20`).
pub(crate) fn push_f64(out: &mut Vec<u8>, v: f64) {
    if sundial_query::text::push_float_decimal(out, v, b".0") {
        return;
    }
    out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes());
}

pub(crate) fn push_f32(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes());
}

pub(crate) fn push_int(out: &mut Vec<u8>, v: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Nanoseconds since the epoch of a timestamp value of any unit.
pub(crate) fn timestamp_nanos(array: &dyn Array, unit: TimeUnit, row: usize) -> i64 {
    match unit {
        TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().value(row),
        TimeUnit::Microsecond => array
            .as_primitive::<TimestampMicrosecondType>()
            .value(row)
            .saturating_mul(1_000),
        TimeUnit::Millisecond => array
            .as_primitive::<TimestampMillisecondType>()
            .value(row)
            .saturating_mul(1_000_000),
        TimeUnit::Second => array
            .as_primitive::<TimestampSecondType>()
            .value(row)
            .saturating_mul(1_000_000_000),
    }
}

/// ISO 8601 UTC text of a timestamp (microseconds, or nanoseconds when needed).
pub(crate) fn push_iso_timestamp(out: &mut Vec<u8>, nanos: i64) {
    push_timestamp(out, nanos, b'T', Fraction::Fixed(6));
    out.push(b'Z');
}

/// ISO 8601 UTC text of a date in milliseconds.
pub(crate) fn push_iso_date(out: &mut Vec<u8>, millis: i64) {
    push_timestamp(
        out,
        millis.saturating_mul(1_000_000),
        b'T',
        Fraction::Fixed(3),
    );
    out.push(b'Z');
}

/// The text of a string-like value (strings, dictionaries of strings), if it is one.
pub(crate) fn string_value(array: &dyn Array, row: usize) -> Option<&str> {
    match array.data_type() {
        DataType::Utf8 => Some(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Some(array.as_string::<i64>().value(row)),
        DataType::Utf8View => Some(array.as_string_view().value(row)),
        DataType::Dictionary(key, value)
            if **key == DataType::Int32 && **value == DataType::Utf8 =>
        {
            let dict = array.as_dictionary::<Int32Type>();
            let key = usize::try_from(dict.keys().value(row)).ok()?;
            let values = dict.values().as_string::<i32>();
            (key < values.len()).then(|| values.value(key))
        }
        _ => None,
    }
}

fn is_text(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// The values and the index into them of row `row` of a dictionary array whose values are
/// not text (text dictionaries are SYMBOLs, written by [`string_value`]).
fn dictionary_entry(array: &dyn Array, row: usize) -> Option<(&dyn Array, usize)> {
    let DataType::Dictionary(key, value) = array.data_type() else {
        return None;
    };
    if is_text(value) {
        return None;
    }
    fn entry<K: arrow::datatypes::ArrowDictionaryKeyType>(
        array: &dyn Array,
        row: usize,
    ) -> Option<(&dyn Array, usize)> {
        let dict = array.as_dictionary::<K>();
        let index = arrow::datatypes::ArrowNativeType::as_usize(dict.keys().value(row));
        (index < dict.values().len()).then(|| (dict.values().as_ref(), index))
    }
    use arrow::datatypes::{
        Int8Type as I8, Int16Type as I16, Int32Type as I32, Int64Type as I64, UInt8Type as U8,
        UInt16Type as U16, UInt32Type as U32, UInt64Type as U64,
    };
    match **key {
        DataType::Int8 => entry::<I8>(array, row),
        DataType::Int16 => entry::<I16>(array, row),
        DataType::Int32 => entry::<I32>(array, row),
        DataType::Int64 => entry::<I64>(array, row),
        DataType::UInt8 => entry::<U8>(array, row),
        DataType::UInt16 => entry::<U16>(array, row),
        DataType::UInt32 => entry::<U32>(array, row),
        DataType::UInt64 => entry::<U64>(array, row),
        _ => None,
    }
}

/// A number written bare, if the value is one; `Some(false)` for a non-finite float (which
/// JSON cannot hold).
pub(crate) fn push_number(out: &mut Vec<u8>, array: &dyn Array, row: usize) -> Option<bool> {
    match array.data_type() {
        DataType::Int8 => push_int(out, array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => push_int(out, array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => push_int(out, array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => push_int(out, array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => push_int(out, array.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => push_int(out, array.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => push_int(out, array.as_primitive::<UInt32Type>().value(row)),
        DataType::UInt64 => push_int(out, array.as_primitive::<UInt64Type>().value(row)),
        DataType::Float32 => {
            let v = array.as_primitive::<Float32Type>().value(row);
            if !v.is_finite() {
                return Some(false);
            }
            push_f32(out, v);
        }
        DataType::Float64 => {
            let v = array.as_primitive::<Float64Type>().value(row);
            if !v.is_finite() {
                return Some(false);
            }
            push_f64(out, v);
        }
        _ => return None,
    }
    Some(true)
}

/// One value as JSON.
pub fn write_json_value(out: &mut Vec<u8>, array: &dyn Array, row: usize) {
    // A `NullArray` (of a NULL literal) keeps no validity: every row is NULL.
    if array.is_null(row) || *array.data_type() == DataType::Null {
        out.extend_from_slice(b"null");
        return;
    }
    write_present_value(out, array, row, b"null", |out, text| {
        write_json_string(out, text)
    });
}

/// A non-NULL value as the HTTP answers write it: numbers bare (`absent` for NaN and
/// infinities), booleans as `true`/`false`, timestamps and dates as quoted ISO 8601, and every
/// other value as text through `string` (JSON strings for `/exec`, CSV fields for `/exp`).
pub(crate) fn write_present_value(
    out: &mut Vec<u8>,
    array: &dyn Array,
    row: usize,
    absent: &[u8],
    string: impl Fn(&mut Vec<u8>, &str),
) {
    if let Some((values, index)) = dictionary_entry(array, row) {
        // A dictionary of non-text values (`length(symbol)`): its value, as the value type's.
        if values.is_null(index) {
            out.extend_from_slice(b"null");
            return;
        }
        return write_present_value(out, values, index, absent, string);
    }
    if let Some(finite) = push_number(out, array, row) {
        if !finite {
            out.extend_from_slice(absent);
        }
        return;
    }
    if let Some(text) = string_value(array, row) {
        string(out, text);
        return;
    }
    match array.data_type() {
        DataType::Boolean => {
            let v = array.as_boolean().value(row);
            out.extend_from_slice(if v { b"true" } else { b"false" });
        }
        DataType::Timestamp(unit, _) => {
            out.push(b'"');
            push_iso_timestamp(out, timestamp_nanos(array, *unit, row));
            out.push(b'"');
        }
        DataType::Date64 => {
            out.push(b'"');
            push_iso_date(out, array.as_primitive::<Date64Type>().value(row));
            out.push(b'"');
        }
        DataType::Date32 => {
            let days = i64::from(array.as_primitive::<Date32Type>().value(row));
            out.push(b'"');
            push_iso_date(out, days.saturating_mul(86_400_000));
            out.push(b'"');
        }
        _ => {
            let text = arrow::util::display::array_value_to_string(array, row).unwrap_or_default();
            string(out, &text);
        }
    }
}

/// The columns of one batch with their JSON writer chosen once, not per value. SYMBOL
/// (dictionary) columns write each distinct value's escaped text once and copy it after.
pub(crate) struct JsonColumns<'a> {
    columns: Vec<JsonColumn<'a>>,
    /// Escaped JSON texts of dictionary values met so far, for every dictionary column.
    texts: Vec<u8>,
}

enum JsonColumn<'a> {
    Float64(&'a Float64Array),
    Int64(&'a Int64Array),
    Int32(&'a Int32Array),
    /// `last` is the previous value written and its JSON text: rows often repeat a
    /// timestamp (one per series at each instant), and formatting one is most of its cost.
    TimestampNanos {
        array: &'a TimestampNanosecondArray,
        last: Option<(i64, [u8; TIMESTAMP_JSON_BYTES_MAX], usize)>,
    },
    Utf8(&'a StringArray),
    /// Keys into `values`; `memo[key]` is the range of `texts` holding that value's JSON.
    Symbols {
        keys: &'a Int32Array,
        values: &'a StringArray,
        memo: Vec<Option<(usize, usize)>>,
    },
    Other(&'a dyn Array),
}

/// The longest JSON text of a nanosecond timestamp: a quoted `-292277-01-01T00:00:00.000000000Z`.
const TIMESTAMP_JSON_BYTES_MAX: usize = 40;

/// Dictionaries with more values than this (and than the batch's rows) are written value by
/// value: remembering their texts would cost more than it saves.
const MEMO_VALUES_MAX: usize = 4096;

impl<'a> JsonColumns<'a> {
    pub(crate) fn new(batch: &'a RecordBatch) -> Self {
        let rows = batch.num_rows();
        let columns = batch
            .columns()
            .iter()
            .map(|c| JsonColumn::of(c.as_ref(), rows))
            .collect();
        JsonColumns {
            columns,
            texts: Vec::new(),
        }
    }

    /// Row `row` as a JSON array.
    pub(crate) fn write_row(&mut self, out: &mut Vec<u8>, row: usize) {
        out.push(b'[');
        for (i, column) in self.columns.iter_mut().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            column.write(out, row, &mut self.texts);
        }
        out.push(b']');
    }
}

impl<'a> JsonColumn<'a> {
    fn of(array: &'a dyn Array, rows: usize) -> Self {
        match array.data_type() {
            DataType::Float64 => JsonColumn::Float64(array.as_primitive()),
            DataType::Int64 => JsonColumn::Int64(array.as_primitive()),
            DataType::Int32 => JsonColumn::Int32(array.as_primitive()),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => JsonColumn::TimestampNanos {
                array: array.as_primitive(),
                last: None,
            },
            DataType::Utf8 => JsonColumn::Utf8(array.as_string()),
            DataType::Dictionary(key, value)
                if **key == DataType::Int32 && **value == DataType::Utf8 =>
            {
                let dict = array.as_dictionary::<Int32Type>();
                let values = dict.values().as_string::<i32>();
                if values.len() > MEMO_VALUES_MAX.max(rows) {
                    return JsonColumn::Other(array);
                }
                JsonColumn::Symbols {
                    keys: dict.keys(),
                    values,
                    memo: vec![None; values.len()],
                }
            }
            _ => JsonColumn::Other(array),
        }
    }

    fn write(&mut self, out: &mut Vec<u8>, row: usize, texts: &mut Vec<u8>) {
        match self {
            JsonColumn::Float64(a) => match a.is_valid(row).then(|| a.value(row)) {
                Some(v) if v.is_finite() => push_f64(out, v),
                _ => out.extend_from_slice(b"null"),
            },
            JsonColumn::Int64(a) if a.is_valid(row) => push_int(out, a.value(row)),
            JsonColumn::Int32(a) if a.is_valid(row) => push_int(out, a.value(row)),
            JsonColumn::TimestampNanos { array, last } if array.is_valid(row) => {
                let nanos = array.value(row);
                if let Some((at, text, len)) = last
                    && *at == nanos
                {
                    out.extend_from_slice(&text[..*len]);
                    return;
                }
                let start = out.len();
                out.push(b'"');
                push_iso_timestamp(out, nanos);
                out.push(b'"');
                let written = &out[start..];
                if written.len() <= TIMESTAMP_JSON_BYTES_MAX {
                    let mut text = [0u8; TIMESTAMP_JSON_BYTES_MAX];
                    text[..written.len()].copy_from_slice(written);
                    *last = Some((nanos, text, written.len()));
                }
            }
            JsonColumn::Utf8(a) if a.is_valid(row) => write_json_string(out, a.value(row)),
            JsonColumn::Symbols { keys, values, memo } if keys.is_valid(row) => {
                let Some(key) = usize::try_from(keys.value(row))
                    .ok()
                    .filter(|&k| k < values.len() && values.is_valid(k))
                else {
                    out.extend_from_slice(b"null");
                    return;
                };
                let (start, end) = *memo[key].get_or_insert_with(|| {
                    let start = texts.len();
                    write_json_string(texts, values.value(key));
                    (start, texts.len())
                });
                out.extend_from_slice(&texts[start..end]);
            }
            JsonColumn::Other(a) => write_json_value(out, *a, row),
            _ => out.extend_from_slice(b"null"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, StringArray, TimestampNanosecondArray};

    fn json(array: ArrayRef) -> Vec<String> {
        (0..array.len())
            .map(|row| {
                let mut out = Vec::new();
                write_json_value(&mut out, array.as_ref(), row);
                String::from_utf8(out).unwrap()
            })
            .collect()
    }

    /// Writers chosen per column write what the writer per value does.
    #[test]
    fn column_writers_match_value_writers() {
        use arrow::array::{
            BooleanArray, DictionaryArray, Int32Array, Int64Array, TimestampMicrosecondArray,
        };
        use arrow::datatypes::Int32Type;
        let symbols: DictionaryArray<Int32Type> =
            vec![Some("a\"b"), None, Some("c"), Some("a\"b"), Some("é"), None]
                .into_iter()
                .collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Float64Array::from(vec![
                Some(1.5),
                None,
                Some(f64::INFINITY),
                Some(-0.0),
                Some(1e300),
                Some(f64::NAN),
            ])),
            Arc::new(Int64Array::from(vec![
                Some(i64::MIN),
                None,
                Some(0),
                Some(7),
                None,
                Some(1),
            ])),
            Arc::new(Int32Array::from(vec![
                None,
                Some(-3),
                Some(0),
                Some(i32::MAX),
                None,
                Some(2),
            ])),
            // Repeats, next to each other and around a NULL, take the remembered text.
            Arc::new(TimestampNanosecondArray::from(vec![
                Some(1_451_606_400_000_000_001),
                Some(1_451_606_400_000_000_001),
                Some(-1),
                None,
                Some(-1),
                Some(2),
            ])),
            Arc::new(TimestampMicrosecondArray::from(vec![
                Some(1),
                None,
                Some(2),
                None,
                Some(3),
                Some(4),
            ])),
            Arc::new(StringArray::from(vec![
                Some("x\n"),
                None,
                Some(""),
                Some("y"),
                None,
                Some("z"),
            ])),
            Arc::new(symbols),
            Arc::new(BooleanArray::from(vec![
                Some(true),
                None,
                Some(false),
                None,
                Some(true),
                Some(false),
            ])),
        ];
        let batch = RecordBatch::try_from_iter(
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("c{i}"), c.clone())),
        )
        .unwrap();
        let mut writers = JsonColumns::new(&batch);
        for row in 0..batch.num_rows() {
            let mut by_column = Vec::new();
            writers.write_row(&mut by_column, row);
            let by_value: Vec<String> = columns
                .iter()
                .map(|c| json(c.clone())[row].clone())
                .collect();
            assert_eq!(
                String::from_utf8(by_column).unwrap(),
                format!("[{}]", by_value.join(",")),
                "row {row}"
            );
        }
    }

    #[test]
    fn strings_are_escaped() {
        let mut out = Vec::new();
        write_json_string(&mut out, "a\"b\\c\nd\u{1}é");
        assert_eq!(String::from_utf8(out).unwrap(), r#""a\"b\\c\nd\u0001é""#);
    }

    #[test]
    fn values() {
        assert_eq!(
            json(Arc::new(Float64Array::from(vec![
                Some(1.0),
                Some(0.1),
                None,
                Some(f64::NAN)
            ]))),
            vec!["1.0", "0.1", "null", "null"]
        );
        assert_eq!(
            json(Arc::new(TimestampNanosecondArray::from(vec![
                1_451_606_400_000_000_000,
                1
            ]))),
            vec![
                "\"2016-01-01T00:00:00.000000Z\"",
                "\"1970-01-01T00:00:00.000000001Z\""
            ]
        );
        assert_eq!(
            json(Arc::new(StringArray::from(vec![Some("x"), None]))),
            vec!["\"x\"", "null"]
        );
    }
}
