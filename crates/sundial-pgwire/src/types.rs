//! PostgreSQL types for Arrow data: result columns encoded as text or binary, and parameter
//! values decoded into DataFusion scalars.
//!
//! Encoding is column-at-a-time set-up, value-at-a-time output: [`ColumnEncoder::new`] picks the
//! concrete array once per batch, then [`ColumnEncoder::encode`] appends one value (length
//! prefix included) straight into the output buffer. Numbers and timestamps are formatted by
//! hand or by `itoa`/`ryu`: no locks, no allocation per value.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Date64Array, Float32Array, Float64Array,
    Int16Array, Int32Array, Int64Array, TimestampNanosecondArray,
};
use arrow::buffer::NullBuffer;
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, TimeUnit};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use sundial_query::ScalarValue;
use sundial_query::text::{Fraction, push_date, push_timestamp};
use sundial_storage::{ColumnType, SUNDIAL_TYPE_KEY, TIMESTAMP_RANGE_TEXT, timestamp_in_range};

use crate::array_input;
use crate::error::PgError;

/// Type OIDs from PostgreSQL's `pg_type.dat`.
pub mod oid {
    pub const BOOL: i32 = 16;
    pub const BYTEA: i32 = 17;
    pub const CHAR: i32 = 18;
    pub const NAME: i32 = 19;
    pub const INT8: i32 = 20;
    pub const INT2: i32 = 21;
    pub const INT4: i32 = 23;
    pub const TEXT: i32 = 25;
    pub const OID: i32 = 26;
    pub const FLOAT4: i32 = 700;
    pub const FLOAT8: i32 = 701;
    pub const UNKNOWN: i32 = 705;
    pub const VARCHAR: i32 = 1043;
    pub const DATE: i32 = 1082;
    pub const TIME: i32 = 1083;
    pub const TIMESTAMP: i32 = 1114;
    pub const TIMESTAMPTZ: i32 = 1184;
    pub const NUMERIC: i32 = 1700;
    pub const UUID: i32 = 2950;
}

/// Microseconds between 1970-01-01 and PostgreSQL's epoch, 2000-01-01.
pub(crate) const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;
pub(crate) const PG_EPOCH_OFFSET_DAYS: i32 = 10_957;

/// The PostgreSQL type a result column of `data_type` is described and encoded as:
/// its OID and `typlen` (-1 for variable length). The catalog owns the mapping.
pub fn pg_type(data_type: &DataType) -> (i32, i16) {
    let (type_oid, _, len) = sundial_query::pg_type_for_arrow(data_type);
    (type_oid, len)
}

/// The PostgreSQL type a result field is described and encoded as: the type its metadata
/// declares (a catalog column's `name` or `oid`, see `sundial_query::pg_type_for_field`), else
/// [`pg_type`] of its Arrow type; a Sundial UUID column (canonical text in Arrow) is a `uuid`.
pub fn pg_field_type(field: &Field) -> (i32, i16) {
    let uuid = field
        .metadata()
        .get(SUNDIAL_TYPE_KEY)
        .is_some_and(|t| t == ColumnType::Uuid.name());
    if uuid && StrArrayType::is_str(field.data_type()) {
        (oid::UUID, 16)
    } else {
        let (type_oid, _, len) = sundial_query::pg_type_for_field(field);
        (type_oid, len)
    }
}

/// The type OIDs of `schema`'s fields, as [`pg_field_type`] describes them.
pub fn pg_field_types(schema: &Schema) -> Vec<i32> {
    schema.fields().iter().map(|f| pg_field_type(f).0).collect()
}

/// The Arrow type a parameter declared as `type_oid` decodes to; `None` for OIDs left for
/// the planner to infer (0, unknown) or not known here.
pub fn arrow_type_of(type_oid: i32) -> Option<DataType> {
    Some(match type_oid {
        oid::BOOL => DataType::Boolean,
        oid::INT2 => DataType::Int16,
        oid::INT4 | oid::OID => DataType::Int32,
        oid::INT8 => DataType::Int64,
        oid::FLOAT4 => DataType::Float32,
        oid::FLOAT8 | oid::NUMERIC => DataType::Float64,
        oid::TEXT | oid::VARCHAR | oid::NAME | oid::CHAR | oid::UUID => DataType::Utf8,
        oid::TIMESTAMP => DataType::Timestamp(TimeUnit::Nanosecond, None),
        oid::TIMESTAMPTZ => DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into())),
        oid::DATE => DataType::Date32,
        oid::TIME => DataType::Time64(TimeUnit::Microsecond),
        oid::BYTEA => DataType::Binary,
        other => {
            let element = arrow_type_of(sundial_query::pg_array_element(other)?)?;
            DataType::new_list(element, true)
        }
    })
}

/// Result value format, per column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Binary,
}

impl Format {
    pub fn from_code(code: i16) -> Result<Format, PgError> {
        match code {
            0 => Ok(Format::Text),
            1 => Ok(Format::Binary),
            c => Err(PgError::Protocol(format!("unknown format code {c}"))),
        }
    }

    pub fn code(self) -> i16 {
        match self {
            Format::Text => 0,
            Format::Binary => 1,
        }
    }

    /// The format of column `i` given a Bind message's result format codes: none means all
    /// text, one applies to every column, otherwise one per column.
    pub fn for_column(codes: &[Format], i: usize) -> Format {
        match codes.len() {
            0 => Format::Text,
            1 => codes[0],
            _ => codes.get(i).copied().unwrap_or(Format::Text),
        }
    }
}

/// One result column of one batch, ready to encode row by row.
pub struct ColumnEncoder<'a> {
    /// The column's validity, taken once so a value's NULL test is no virtual call.
    nulls: Option<&'a NullBuffer>,
    kind: Kind<'a>,
    format: Format,
}

enum Kind<'a> {
    Bool(&'a BooleanArray),
    I16(&'a Int16Array),
    I32(&'a Int32Array),
    I64(&'a Int64Array),
    F32(&'a Float32Array),
    F64(&'a Float64Array),
    Str(StrArray<'a>),
    /// Canonical UUID text (8-4-4-4-12 hex digits), sent as 16 bytes in binary.
    Uuid(StrArray<'a>),
    Dict(&'a Int32Array, StrArray<'a>),
    Timestamp(&'a TimestampNanosecondArray, bool),
    Date32(&'a Date32Array),
    Date64(&'a Date64Array),
    Bytes(BinArray<'a>),
    Numeric(ArrayFormatter<'a>),
    Time(ArrayFormatter<'a>),
    List(&'a dyn Array),
    Text(ArrayFormatter<'a>),
}

#[derive(Clone, Copy)]
enum StrArray<'a> {
    Small(&'a arrow::array::StringArray),
    Large(&'a arrow::array::LargeStringArray),
    View(&'a arrow::array::StringViewArray),
}

impl<'a> StrArray<'a> {
    fn of(array: &'a dyn Array) -> Option<StrArray<'a>> {
        Some(match array.data_type() {
            DataType::Utf8 => StrArray::Small(array.as_string::<i32>()),
            DataType::LargeUtf8 => StrArray::Large(array.as_string::<i64>()),
            DataType::Utf8View => StrArray::View(array.as_string_view()),
            _ => return None,
        })
    }

    #[inline]
    fn value(&self, row: usize) -> &'a str {
        match self {
            StrArray::Small(a) => a.value(row),
            StrArray::Large(a) => a.value(row),
            StrArray::View(a) => a.value(row),
        }
    }
}

#[derive(Clone, Copy)]
enum BinArray<'a> {
    Small(&'a arrow::array::BinaryArray),
    Large(&'a arrow::array::LargeBinaryArray),
    View(&'a arrow::array::BinaryViewArray),
    Fixed(&'a arrow::array::FixedSizeBinaryArray),
}

impl<'a> BinArray<'a> {
    #[inline]
    fn value(&self, row: usize) -> &'a [u8] {
        match self {
            BinArray::Small(a) => a.value(row),
            BinArray::Large(a) => a.value(row),
            BinArray::View(a) => a.value(row),
            BinArray::Fixed(a) => a.value(row),
        }
    }
}

const FORMAT_OPTIONS: FormatOptions<'static> = FormatOptions::new();

/// Casts arrays without a direct encoder to one that has one (once per batch, not per value).
pub fn normalize(array: &ArrayRef) -> Result<ArrayRef, PgError> {
    let target = match array.data_type() {
        DataType::Int8 | DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 => DataType::Int64,
        DataType::Float16 => DataType::Float32,
        DataType::Timestamp(unit, tz) if *unit != TimeUnit::Nanosecond => {
            DataType::Timestamp(TimeUnit::Nanosecond, tz.clone())
        }
        DataType::Dictionary(key, value)
            if !(**key == DataType::Int32 && StrArrayType::is_str(value)) =>
        {
            (**value).clone()
        }
        DataType::ListView(item) | DataType::FixedSizeList(item, _) => DataType::List(item.clone()),
        DataType::LargeListView(item) => DataType::LargeList(item.clone()),
        _ => return Ok(array.clone()),
    };
    let options = CastOptions {
        safe: true,
        ..Default::default()
    };
    cast_with_options(array, &target, &options)
        .map_err(|e| PgError::Internal(format!("cannot convert a result column: {e}")))
}

struct StrArrayType;
impl StrArrayType {
    fn is_str(t: &DataType) -> bool {
        matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
    }
}

impl<'a> ColumnEncoder<'a> {
    /// Prepares `array` (already passed through [`normalize`]) for encoding in `format`, as
    /// the PostgreSQL type its Arrow type maps to.
    pub fn new(array: &'a ArrayRef, format: Format) -> Result<ColumnEncoder<'a>, PgError> {
        ColumnEncoder::for_type(array, 0, format)
    }

    /// Like [`ColumnEncoder::new`], for a column described as `type_oid` (see
    /// [`pg_field_type`]; 0: by its Arrow type).
    pub fn for_type(
        array: &'a ArrayRef,
        type_oid: i32,
        format: Format,
    ) -> Result<ColumnEncoder<'a>, PgError> {
        if type_oid == oid::UUID
            && let Some(values) = StrArray::of(array.as_ref())
        {
            if format == Format::Binary {
                check_uuids(array.as_ref(), values)?;
            }
            return Ok(ColumnEncoder {
                nulls: array.nulls(),
                kind: Kind::Uuid(values),
                format,
            });
        }
        let a: &'a dyn Array = array.as_ref();
        let formatter = || {
            ArrayFormatter::try_new(a, &FORMAT_OPTIONS)
                .map_err(|e| PgError::Internal(format!("cannot format a result column: {e}")))
        };
        let kind = match a.data_type() {
            DataType::Boolean => Kind::Bool(a.as_boolean()),
            DataType::Int16 => Kind::I16(a.as_primitive()),
            DataType::Int32 => Kind::I32(a.as_primitive()),
            DataType::Int64 => Kind::I64(a.as_primitive()),
            DataType::Float32 => Kind::F32(a.as_primitive()),
            DataType::Float64 => Kind::F64(a.as_primitive()),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                Kind::Str(StrArray::of(a).ok_or_else(|| PgError::Internal("string array".into()))?)
            }
            DataType::Dictionary(_, _) => {
                let dict = a.as_dictionary::<Int32Type>();
                let values = StrArray::of(dict.values().as_ref())
                    .ok_or_else(|| PgError::Internal("dictionary of strings".into()))?;
                Kind::Dict(dict.keys(), values)
            }
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
                Kind::Timestamp(a.as_primitive(), tz.is_some())
            }
            DataType::Date32 => Kind::Date32(a.as_primitive()),
            DataType::Date64 => Kind::Date64(a.as_primitive()),
            DataType::Binary => Kind::Bytes(BinArray::Small(a.as_binary())),
            DataType::LargeBinary => Kind::Bytes(BinArray::Large(a.as_binary())),
            DataType::BinaryView => Kind::Bytes(BinArray::View(a.as_binary_view())),
            DataType::FixedSizeBinary(_) => Kind::Bytes(BinArray::Fixed(a.as_fixed_size_binary())),
            DataType::UInt64
            | DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..) => Kind::Numeric(formatter()?),
            DataType::Time32(_) | DataType::Time64(_) => Kind::Time(formatter()?),
            DataType::List(_) | DataType::LargeList(_) => Kind::List(a),
            _ => Kind::Text(formatter()?),
        };
        if format == Format::Binary && matches!(kind, Kind::Text(_)) {
            return Err(PgError::NotSupported(format!(
                "binary format for a {} column; ask for text",
                a.data_type()
            )));
        }
        Ok(ColumnEncoder {
            nulls: a.nulls(),
            kind,
            format,
        })
    }

    #[inline]
    fn is_null(&self, row: usize) -> bool {
        self.nulls.is_some_and(|n| n.is_null(row))
    }

    /// Appends the value at `row`: a 4-byte length (-1 for NULL) and its bytes.
    #[inline]
    pub fn encode(&self, row: usize, out: &mut Vec<u8>) {
        if self.is_null(row) {
            out.extend_from_slice(&(-1i32).to_be_bytes());
            return;
        }
        match self.format {
            Format::Text => with_length(out, |out| self.text(row, out)),
            Format::Binary => self.binary(row, out),
        }
    }

    /// Appends the text form of the value at `row`, without a length prefix; false (with
    /// nothing appended) for NULL.
    #[inline]
    pub fn encode_text(&self, row: usize, out: &mut Vec<u8>) -> bool {
        if self.is_null(row) {
            return false;
        }
        self.text(row, out);
        true
    }

    fn text(&self, row: usize, out: &mut Vec<u8>) {
        let mut ints = itoa::Buffer::new();
        match &self.kind {
            Kind::Bool(a) => out.push(if a.value(row) { b't' } else { b'f' }),
            Kind::I16(a) => out.extend_from_slice(ints.format(a.value(row)).as_bytes()),
            Kind::I32(a) => out.extend_from_slice(ints.format(a.value(row)).as_bytes()),
            Kind::I64(a) => out.extend_from_slice(ints.format(a.value(row)).as_bytes()),
            Kind::F32(a) => push_float(out, f64::from(a.value(row)), true),
            Kind::F64(a) => push_float(out, a.value(row), false),
            Kind::Str(a) | Kind::Uuid(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Kind::Dict(keys, values) => {
                out.extend_from_slice(values.value(keys.value(row) as usize).as_bytes())
            }
            Kind::Timestamp(a, tz) => {
                push_timestamp(out, a.value(row), b' ', Fraction::TrimmedMicros);
                if *tz {
                    out.extend_from_slice(b"+00");
                }
            }
            Kind::Date32(a) => push_date(out, i64::from(a.value(row))),
            Kind::Date64(a) => push_date(out, a.value(row).div_euclid(86_400_000)),
            Kind::Bytes(a) => push_bytea_hex(out, a.value(row)),
            Kind::Numeric(f) | Kind::Time(f) | Kind::Text(f) => {
                let _ = f.value(row).write(&mut VecWriter(out));
            }
            Kind::List(a) => push_text_array(out, *a, row),
        }
    }

    /// Appends the binary form of the value at `row` with its length. Fixed-width values
    /// and strings know their length up front, so it is written before them, not patched.
    #[inline]
    fn binary(&self, row: usize, out: &mut Vec<u8>) {
        match &self.kind {
            Kind::Bool(a) => put_bytes(out, &[u8::from(a.value(row))]),
            Kind::I16(a) => put_bytes(out, &a.value(row).to_be_bytes()),
            Kind::I32(a) => put_bytes(out, &a.value(row).to_be_bytes()),
            Kind::I64(a) => put_bytes(out, &a.value(row).to_be_bytes()),
            Kind::F32(a) => put_bytes(out, &a.value(row).to_be_bytes()),
            Kind::F64(a) => put_bytes(out, &a.value(row).to_be_bytes()),
            Kind::Str(a) => put_bytes(out, a.value(row).as_bytes()),
            Kind::Uuid(a) => put_bytes(out, &uuid_bytes(a.value(row)).unwrap_or_default()),
            Kind::Dict(keys, values) => {
                put_bytes(out, values.value(keys.value(row) as usize).as_bytes())
            }
            Kind::Timestamp(a, _) => {
                let micros = a.value(row).div_euclid(1000) - PG_EPOCH_OFFSET_US;
                put_bytes(out, &micros.to_be_bytes());
            }
            Kind::Date32(a) => put_bytes(out, &(a.value(row) - PG_EPOCH_OFFSET_DAYS).to_be_bytes()),
            Kind::Date64(a) => {
                let days = a.value(row).div_euclid(86_400_000) as i32 - PG_EPOCH_OFFSET_DAYS;
                put_bytes(out, &days.to_be_bytes());
            }
            Kind::Bytes(a) => put_bytes(out, a.value(row)),
            Kind::Numeric(f) => with_length(out, |out| {
                let start = out.len();
                let _ = f.value(row).write(&mut VecWriter(out));
                let text = out.split_off(start);
                push_numeric_binary(out, &text);
            }),
            Kind::Time(f) => {
                let mut text = Vec::new();
                let _ = f.value(row).write(&mut VecWriter(&mut text));
                put_bytes(out, &time_micros(&text).to_be_bytes());
            }
            Kind::List(a) => with_length(out, |out| push_binary_array(out, *a, row)),
            // Rejected in `new`.
            Kind::Text(_) => with_length(out, |_| {}),
        }
    }
}

/// Appends a value after its length.
#[inline]
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(4 + bytes.len());
    out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// Appends what `write` appends, after its length.
#[inline]
pub(crate) fn with_length(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    write(out);
    let len = (out.len() - at - 4) as i32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// The 16 bytes of a UUID written as 32 hex digits, with or without dashes.
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    let mut bytes = [0u8; 16];
    let mut digits = text.bytes().filter(|b| *b != b'-');
    for byte in &mut bytes {
        let high = (digits.next()? as char).to_digit(16)?;
        let low = (digits.next()? as char).to_digit(16)?;
        *byte = (high << 4 | low) as u8;
    }
    digits.next().is_none().then_some(bytes)
}

/// Every non-NULL value of a UUID column must be a UUID before any is sent in binary.
fn check_uuids(array: &dyn Array, values: StrArray<'_>) -> Result<(), PgError> {
    for row in 0..array.len() {
        if array.is_valid(row) && uuid_bytes(values.value(row)).is_none() {
            return Err(PgError::Internal(format!(
                "'{}' in a UUID column is no UUID",
                values.value(row)
            )));
        }
    }
    Ok(())
}

struct VecWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for VecWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// PostgreSQL's float output (shortest round-trip digits): `1`, `0.5`, `1e+16`, `NaN`.
pub(crate) fn push_float(out: &mut Vec<u8>, v: f64, single: bool) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
        return;
    }
    if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"Infinity" } else { b"-Infinity" });
        return;
    }
    if !single && sundial_query::text::push_float_decimal(out, v, b"") {
        return;
    }
    let mut buf = ryu::Buffer::new();
    let s = if single {
        buf.format_finite(v as f32)
    } else {
        buf.format_finite(v)
    };
    let (mantissa, exponent) = match s.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (s, None),
    };
    out.extend_from_slice(mantissa.strip_suffix(".0").unwrap_or(mantissa).as_bytes());
    if let Some(e) = exponent {
        let (sign, digits) = match e.strip_prefix('-') {
            Some(d) => (b'-', d),
            None => (b'+', e),
        };
        out.push(b'e');
        out.push(sign);
        if digits.len() < 2 {
            out.push(b'0');
        }
        out.extend_from_slice(digits.as_bytes());
    }
}

pub(crate) fn push_bytea_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"\\x");
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 15)]);
    }
}

/// A one-dimensional array literal: `{a,"b c",NULL}`.
fn push_text_array(out: &mut Vec<u8>, list: &dyn Array, row: usize) {
    let values = match list.data_type() {
        DataType::List(_) => list.as_list::<i32>().value(row),
        DataType::LargeList(_) => list.as_list::<i64>().value(row),
        _ => return,
    };
    out.push(b'{');
    let Ok(formatter) = ArrayFormatter::try_new(values.as_ref(), &FORMAT_OPTIONS) else {
        out.push(b'}');
        return;
    };
    for i in 0..values.len() {
        if i > 0 {
            out.push(b',');
        }
        if values.is_null(i) {
            out.extend_from_slice(b"NULL");
            continue;
        }
        let start = out.len();
        let _ = formatter.value(i).write(&mut VecWriter(out));
        let element = out.split_off(start);
        let plain = !element.is_empty()
            && !element.eq_ignore_ascii_case(b"null")
            && !element
                .iter()
                .any(|c| matches!(c, b'"' | b'\\' | b',' | b'{' | b'}' | b' '));
        if plain {
            out.extend_from_slice(&element);
        } else {
            out.push(b'"');
            for &c in &element {
                if c == b'"' || c == b'\\' {
                    out.push(b'\\');
                }
                out.push(c);
            }
            out.push(b'"');
        }
    }
    out.push(b'}');
}

/// A one-dimensional array in binary: dimensions, NULL flag, element type, then each element
/// encoded as its own type's binary form.
fn push_binary_array(out: &mut Vec<u8>, list: &dyn Array, row: usize) {
    let values = match list.data_type() {
        DataType::List(_) => list.as_list::<i32>().value(row),
        DataType::LargeList(_) => list.as_list::<i64>().value(row),
        _ => return,
    };
    let values = match normalize(&values) {
        Ok(v) => v,
        Err(_) => values,
    };
    let (element_oid, _) = pg_type(values.data_type());
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&i32::from(values.null_count() > 0).to_be_bytes());
    out.extend_from_slice(&element_oid.to_be_bytes());
    out.extend_from_slice(&(values.len() as i32).to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    match ColumnEncoder::new(&values, Format::Binary) {
        Ok(encoder) => (0..values.len()).for_each(|i| encoder.encode(i, out)),
        // Elements without a binary form are sent as NULLs rather than as malformed bytes.
        Err(_) => (0..values.len()).for_each(|_| out.extend_from_slice(&(-1i32).to_be_bytes())),
    }
}

/// NUMERIC's binary form from decimal text: base-10000 digits around the decimal point.
fn push_numeric_binary(out: &mut Vec<u8>, text: &[u8]) {
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (int_part, frac_part) = match text.iter().position(|&c| c == b'.') {
        Some(p) => (&text[..p], &text[p + 1..]),
        None => (text, &text[..0]),
    };
    let digit = |c: &u8| i16::from(c.wrapping_sub(b'0')).clamp(0, 9);
    let mut groups: Vec<i16> = Vec::new();
    // Integer digits, grouped by four from the decimal point leftwards.
    let lead = int_part.len() % 4;
    let mut chunks: Vec<&[u8]> = Vec::new();
    if lead > 0 {
        chunks.push(&int_part[..lead]);
    }
    chunks.extend(int_part[lead..].chunks(4));
    for chunk in &chunks {
        groups.push(chunk.iter().fold(0, |acc, c| acc * 10 + digit(c)));
    }
    let int_groups = groups.len() as i16;
    for chunk in frac_part.chunks(4) {
        let mut g = chunk.iter().fold(0, |acc, c| acc * 10 + digit(c));
        for _ in chunk.len()..4 {
            g *= 10;
        }
        groups.push(g);
    }
    let mut weight = int_groups - 1;
    let leading_zeros = groups.iter().take_while(|&&g| g == 0).count();
    groups.drain(..leading_zeros);
    weight -= leading_zeros as i16;
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    let sign: u16 = if negative && !groups.is_empty() {
        0x4000
    } else {
        0
    };
    out.extend_from_slice(&(groups.len() as i16).to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&(frac_part.len() as i16).to_be_bytes());
    for g in groups {
        out.extend_from_slice(&g.to_be_bytes());
    }
}

/// Microseconds since midnight from `HH:MM:SS[.fff]`.
fn time_micros(text: &[u8]) -> i64 {
    let s = std::str::from_utf8(text).unwrap_or("");
    let mut parts = s.splitn(3, ':');
    let h: i64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let m: i64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let sec: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0.0);
    (h * 3600 + m * 60) * 1_000_000 + (sec * 1e6).round() as i64
}

/// Decodes one Bind parameter. `type_oid` is what the client declared (0 if nothing);
/// `target` is the type the planner expects, if it knows.
pub fn decode_param(
    value: Option<&[u8]>,
    format: Format,
    type_oid: i32,
    target: Option<&DataType>,
) -> Result<ScalarValue, PgError> {
    let element_oid = sundial_query::pg_array_element(type_oid);
    if element_oid.is_some() || matches!(target, Some(DataType::List(_))) {
        return decode_array(value, format, element_oid, target);
    }
    let declared = arrow_type_of(type_oid);
    let Some(bytes) = value else {
        let t = target.or(declared.as_ref()).unwrap_or(&DataType::Utf8);
        return ScalarValue::try_from(t).map_err(|e| PgError::Internal(e.to_string()));
    };
    let scalar = match format {
        Format::Binary => decode_binary(bytes, type_oid)?,
        Format::Text => {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| PgError::BadValue("parameter is not valid UTF-8".into()))?;
            decode_text(text, declared.as_ref())?
        }
    };
    let scalar = match (scalar, target) {
        (ScalarValue::Utf8(Some(text)), Some(t)) if is_zoneless_time(t) => {
            ScalarValue::Utf8(Some(without_utc_offset(&text).to_string()))
        }
        (scalar, _) => scalar,
    };
    let converted = match (scalar, target) {
        (ScalarValue::Utf8(Some(text)), Some(t)) if is_time(t) => time_from_text(&text, t)?,
        (scalar, Some(t)) if *t != scalar.data_type() => scalar.cast_to(t).map_err(|e| {
            PgError::BadValue(format!("parameter value cannot be converted to {t}: {e}"))
        })?,
        (scalar, _) => scalar,
    };
    check_time_range(&converted, &|| converted.to_string())?;
    Ok(converted)
}

/// An array parameter (`element_oid` the declared element type, if any): each element decoded
/// as a parameter of the element type `target` asks for, or else of the declared one.
fn decode_array(
    value: Option<&[u8]>,
    format: Format,
    element_oid: Option<i32>,
    target: Option<&DataType>,
) -> Result<ScalarValue, PgError> {
    let element_type = match target {
        Some(DataType::List(field)) => field.data_type().clone(),
        _ => element_oid
            .and_then(arrow_type_of)
            .unwrap_or(DataType::Utf8),
    };
    let list_type = DataType::new_list(element_type.clone(), true);
    let Some(bytes) = value else {
        return ScalarValue::try_from(target.unwrap_or(&list_type))
            .map_err(|e| PgError::Internal(e.to_string()));
    };
    let elements = match format {
        Format::Binary => {
            let split = array_input::split_binary(bytes)?;
            if let Some(declared) = element_oid
                && declared != split.element_oid
            {
                return Err(PgError::BadValue(format!(
                    "binary array of element type OID {} for an array of OID {declared}",
                    split.element_oid
                )));
            }
            split
                .elements
                .iter()
                .map(|e| decode_param(*e, format, split.element_oid, Some(&element_type)))
                .collect::<Result<Vec<_>, _>>()?
        }
        Format::Text => {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| PgError::BadValue("parameter is not valid UTF-8".into()))?;
            sundial_query::array_text::split(text)
                .map_err(array_input::text_error)?
                .iter()
                .map(|e| {
                    let e = e.as_deref().map(str::as_bytes);
                    decode_param(e, format, element_oid.unwrap_or(0), Some(&element_type))
                })
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    let list = ScalarValue::List(ScalarValue::new_list_nullable(&elements, &element_type));
    match target {
        Some(t) if *t != list.data_type() => list.cast_to(t).map_err(|e| {
            PgError::BadValue(format!("parameter value cannot be converted to {t}: {e}"))
        }),
        _ => Ok(list),
    }
}

fn decode_text(text: &str, declared: Option<&DataType>) -> Result<ScalarValue, PgError> {
    let bad =
        |what: &str| PgError::BadValue(format!("invalid input syntax for type {what}: \"{text}\""));
    Ok(match declared {
        Some(DataType::Boolean) => {
            ScalarValue::Boolean(Some(match text.trim().to_ascii_lowercase().as_str() {
                "t" | "true" | "1" | "yes" | "y" | "on" => true,
                "f" | "false" | "0" | "no" | "n" | "off" => false,
                _ => return Err(bad("boolean")),
            }))
        }
        Some(DataType::Int16) => {
            ScalarValue::Int16(Some(text.trim().parse().map_err(|_| bad("smallint"))?))
        }
        Some(DataType::Int32) => {
            ScalarValue::Int32(Some(text.trim().parse().map_err(|_| bad("integer"))?))
        }
        Some(DataType::Int64) => {
            ScalarValue::Int64(Some(text.trim().parse().map_err(|_| bad("bigint"))?))
        }
        Some(DataType::Float32) => {
            ScalarValue::Float32(Some(text.trim().parse().map_err(|_| bad("real"))?))
        }
        Some(DataType::Float64) => ScalarValue::Float64(Some(
            text.trim().parse().map_err(|_| bad("double precision"))?,
        )),
        Some(DataType::Binary) => {
            ScalarValue::Binary(Some(parse_bytea(text).ok_or_else(|| bad("bytea"))?))
        }
        Some(t @ (DataType::Timestamp(..) | DataType::Date32 | DataType::Time64(_))) => {
            let text = if is_zoneless_time(t) {
                without_utc_offset(text)
            } else {
                text
            };
            time_from_text(text, t)?
        }
        _ => ScalarValue::Utf8(Some(text.to_string())),
    })
}

/// Date and time types without a time zone, for which PostgreSQL ignores a UTC offset in the
/// input text: `'2024-05-05 10:00:00+05:30'::timestamp` is 10:00.
fn is_zoneless_time(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(_, None) | DataType::Date32 | DataType::Date64 | DataType::Time64(_)
    )
}

/// `text` without a trailing UTC offset (`Z`, `+05:30`, ` +00`, `-0800`) after its date part.
fn without_utc_offset(text: &str) -> &str {
    let trimmed = text.trim_end();
    if let Some(rest) = trimmed.strip_suffix(['Z', 'z']) {
        return rest.trim_end();
    }
    // The sign of an offset comes after `YYYY-MM-DD`, whose dashes are not one.
    const DATE_LEN: usize = 10;
    let Some(sign) = trimmed
        .get(DATE_LEN..)
        .and_then(|tail| tail.rfind(['+', '-']))
        .map(|i| i + DATE_LEN)
    else {
        return trimmed;
    };
    let zone = &trimmed[sign + 1..];
    let digits = zone.bytes().filter(u8::is_ascii_digit).count();
    let is_offset =
        zone.bytes().all(|b| b.is_ascii_digit() || b == b':') && matches!(digits, 2 | 4 | 6);
    if is_offset {
        trimmed[..sign].trim_end()
    } else {
        trimmed
    }
}

const MICROS_PER_DAY: i64 = 86_400_000_000;
const NANOS_PER_DAY: i64 = 86_400_000_000_000;

/// Whether parameters of type `t` are dates or times, decoded from text by [`time_from_text`].
fn is_time(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 | DataType::Time64(_)
    )
}

/// Date or time text as a scalar of type `t`. A value that is a valid date but outside what a
/// table holds is 22008, not a syntax error: it is recognised by parsing it again at a
/// resolution of seconds, whose range spans any year that can be written.
fn time_from_text(text: &str, t: &DataType) -> Result<ScalarValue, PgError> {
    let value = ScalarValue::Utf8(Some(text.to_string()));
    match value.cast_to(t) {
        Ok(scalar) => {
            check_time_range(&scalar, &|| text.to_string())?;
            Ok(scalar)
        }
        Err(_) => {
            if matches!(t, DataType::Timestamp(..)) && is_timestamp_beyond_nanos(text) {
                return Err(datetime_overflow("timestamp", text));
            }
            Err(PgError::BadValue(format!(
                "invalid input syntax for type {}: \"{text}\"",
                sundial_query::pg_type_for_arrow(t).1
            )))
        }
    }
}

/// Rejects a date or timestamp that a table cannot hold (see
/// [`sundial_storage::timestamp_in_range`]); `shown` spells the value for the message.
fn check_time_range(scalar: &ScalarValue, shown: &dyn Fn() -> String) -> Result<(), PgError> {
    let (what, nanos) = match scalar {
        ScalarValue::TimestampNanosecond(Some(v), _) => ("timestamp", Some(*v)),
        ScalarValue::TimestampMicrosecond(Some(v), _) => ("timestamp", v.checked_mul(1_000)),
        ScalarValue::TimestampMillisecond(Some(v), _) => ("timestamp", v.checked_mul(1_000_000)),
        ScalarValue::TimestampSecond(Some(v), _) => ("timestamp", v.checked_mul(1_000_000_000)),
        ScalarValue::Date32(Some(days)) => ("date", i64::from(*days).checked_mul(NANOS_PER_DAY)),
        ScalarValue::Date64(Some(ms)) => ("date", ms.checked_mul(1_000_000)),
        _ => return Ok(()),
    };
    if nanos.is_some_and(timestamp_in_range) {
        Ok(())
    } else {
        Err(datetime_overflow(what, &shown()))
    }
}

fn datetime_overflow(what: &str, shown: &str) -> PgError {
    PgError::DatetimeOverflow(range_message(what, shown))
}

fn range_message(what: &str, shown: &str) -> String {
    format!("{what} out of range: \"{shown}\" (Sundial holds {TIMESTAMP_RANGE_TEXT})")
}

/// The message for a timestamp a table cannot hold, spelled `shown`.
pub(crate) fn timestamp_overflow_message(shown: &str) -> String {
    range_message("timestamp", shown)
}

/// Whether `text` is a valid timestamp too far from 1970 for nanoseconds in an `i64`.
pub(crate) fn is_timestamp_beyond_nanos(text: &str) -> bool {
    let value = ScalarValue::Utf8(Some(text.to_string()));
    value
        .cast_to(&DataType::Timestamp(TimeUnit::Nanosecond, None))
        .is_err()
        && value
            .cast_to(&DataType::Timestamp(TimeUnit::Second, None))
            .is_ok()
}

/// Nanoseconds since 1970 of a binary timestamp, `micros` since 2000-01-01, if a table can
/// hold it.
pub(crate) fn timestamp_from_pg_micros(micros: i64) -> Result<i64, PgError> {
    micros
        .checked_add(PG_EPOCH_OFFSET_US)
        .and_then(|m| m.checked_mul(1_000))
        .filter(|nanos| timestamp_in_range(*nanos))
        .ok_or_else(|| datetime_overflow("timestamp", &pg_micros_text(micros)))
}

/// Days since 1970 of a binary date, `days` since 2000-01-01, if a table can hold it.
pub(crate) fn date_from_pg_days(days: i32) -> Result<i32, PgError> {
    let unix_days = i64::from(days) + i64::from(PG_EPOCH_OFFSET_DAYS);
    unix_days
        .checked_mul(NANOS_PER_DAY)
        .filter(|nanos| timestamp_in_range(*nanos))
        .and_then(|_| i32::try_from(unix_days).ok())
        .ok_or_else(|| {
            let mut shown = Vec::new();
            push_date(&mut shown, unix_days);
            datetime_overflow("date", &String::from_utf8_lossy(&shown))
        })
}

/// A timestamp given in microseconds since 2000-01-01 as PostgreSQL prints it, for any `i64`.
fn pg_micros_text(micros: i64) -> String {
    let mut out = Vec::new();
    push_date(
        &mut out,
        micros.div_euclid(MICROS_PER_DAY) + i64::from(PG_EPOCH_OFFSET_DAYS),
    );
    let of_day = micros.rem_euclid(MICROS_PER_DAY);
    let seconds = of_day / 1_000_000;
    format!(
        "{} {:02}:{:02}:{:02}.{:06}",
        String::from_utf8_lossy(&out),
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60,
        of_day % 1_000_000
    )
}

fn decode_binary(bytes: &[u8], type_oid: i32) -> Result<ScalarValue, PgError> {
    let fixed = |n: usize| -> Result<&[u8], PgError> {
        if bytes.len() == n {
            Ok(bytes)
        } else {
            Err(PgError::BadValue(format!(
                "binary value of {} bytes for a type of {n} bytes",
                bytes.len()
            )))
        }
    };
    Ok(match type_oid {
        oid::BOOL => ScalarValue::Boolean(Some(fixed(1)?[0] != 0)),
        oid::INT2 => ScalarValue::Int16(Some(i16::from_be_bytes(array(fixed(2)?)))),
        oid::INT4 | oid::OID => ScalarValue::Int32(Some(i32::from_be_bytes(array(fixed(4)?)))),
        oid::INT8 => ScalarValue::Int64(Some(i64::from_be_bytes(array(fixed(8)?)))),
        oid::FLOAT4 => ScalarValue::Float32(Some(f32::from_be_bytes(array(fixed(4)?)))),
        oid::FLOAT8 => ScalarValue::Float64(Some(f64::from_be_bytes(array(fixed(8)?)))),
        oid::TIMESTAMP | oid::TIMESTAMPTZ => {
            let nanos = timestamp_from_pg_micros(i64::from_be_bytes(array(fixed(8)?)))?;
            let tz = (type_oid == oid::TIMESTAMPTZ).then(|| Arc::from("+00:00"));
            ScalarValue::TimestampNanosecond(Some(nanos), tz)
        }
        oid::DATE => ScalarValue::Date32(Some(date_from_pg_days(i32::from_be_bytes(array(
            fixed(4)?,
        )))?)),
        oid::TIME => ScalarValue::Time64Microsecond(Some(i64::from_be_bytes(array(fixed(8)?)))),
        oid::BYTEA => ScalarValue::Binary(Some(bytes.to_vec())),
        oid::UUID => ScalarValue::Utf8(Some(uuid_text(fixed(16)?))),
        oid::TEXT | oid::VARCHAR | oid::NAME | oid::CHAR | oid::UNKNOWN | 0 => {
            ScalarValue::Utf8(Some(
                std::str::from_utf8(bytes)
                    .map_err(|_| PgError::BadValue("parameter is not valid UTF-8".into()))?
                    .to_string(),
            ))
        }
        other => {
            return Err(PgError::NotSupported(format!(
                "binary parameters of type OID {other}; send it as text"
            )));
        }
    })
}

fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

fn uuid_text(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// `bytea` input: `\x` hex, or the text's own bytes.
pub fn parse_bytea(text: &str) -> Option<Vec<u8>> {
    let Some(hex) = text.strip_prefix("\\x") else {
        return Some(text.as_bytes().to_vec());
    };
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    hex.as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [h, l] => Some(nibble(*h)? << 4 | nibble(*l)?),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(v: f64) -> String {
        let mut out = Vec::new();
        push_float(&mut out, v, false);
        String::from_utf8(out).unwrap()
    }

    /// Every value of `array` in binary, each as its length and bytes.
    fn binary_values(array: ArrayRef, type_oid: i32) -> Vec<Option<Vec<u8>>> {
        let encoder = ColumnEncoder::for_type(&array, type_oid, Format::Binary).unwrap();
        (0..array.len())
            .map(|row| {
                let mut out = Vec::new();
                encoder.encode(row, &mut out);
                let len = i32::from_be_bytes(out[..4].try_into().unwrap());
                if len < 0 {
                    assert_eq!(out.len(), 4);
                    return None;
                }
                assert_eq!(out.len(), 4 + len as usize, "length prefix of row {row}");
                Some(out[4..].to_vec())
            })
            .collect()
    }

    #[test]
    fn binary_values_carry_their_length() {
        use arrow::array::{DictionaryArray, StringArray};
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![Some(-2), None]));
        assert_eq!(
            binary_values(ints, 0),
            vec![Some((-2i64).to_be_bytes().to_vec()), None]
        );
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.5]));
        assert_eq!(
            binary_values(floats, 0),
            vec![Some(1.5f64.to_be_bytes().to_vec())]
        );
        let flags: ArrayRef = Arc::new(BooleanArray::from(vec![true, false]));
        assert_eq!(binary_values(flags, 0), vec![Some(vec![1]), Some(vec![0])]);
        let times: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![
            946_684_800_000_001_000,
        ]));
        assert_eq!(
            binary_values(times, 0),
            vec![Some(1i64.to_be_bytes().to_vec())]
        );
        let symbols: ArrayRef = Arc::new(
            vec![Some("host_1"), None, Some("")]
                .into_iter()
                .collect::<DictionaryArray<Int32Type>>(),
        );
        assert_eq!(
            binary_values(symbols, 0),
            vec![Some(b"host_1".to_vec()), None, Some(Vec::new())]
        );
        let uuids: ArrayRef = Arc::new(StringArray::from(vec![
            "00112233-4455-6677-8899-aabbccddeeff",
        ]));
        let bytes: Vec<u8> = (0..16).map(|i| i * 0x11).collect();
        assert_eq!(binary_values(uuids, oid::UUID), vec![Some(bytes)]);
    }

    #[test]
    fn zoneless_times_ignore_utc_offsets() {
        for (text, bare) in [
            (
                "2024-05-05 10:00:00.123456+05:30",
                "2024-05-05 10:00:00.123456",
            ),
            ("1999-12-31 +00", "1999-12-31"),
            ("2024-05-05T10:00:00-0800", "2024-05-05T10:00:00"),
            ("2024-05-05T10:00:00Z", "2024-05-05T10:00:00"),
            ("2024-05-05", "2024-05-05"),
            ("2024-05-05 10:00:00", "2024-05-05 10:00:00"),
        ] {
            assert_eq!(without_utc_offset(text), bare, "{text}");
        }
        let timestamp = DataType::Timestamp(TimeUnit::Nanosecond, None);
        let value = decode_param(
            Some(b"2024-05-05 10:00:00+05:30"),
            Format::Text,
            0,
            Some(&timestamp),
        )
        .unwrap();
        assert_eq!(
            value,
            ScalarValue::TimestampNanosecond(Some(1_714_903_200_000_000_000), None)
        );
        let date = decode_param(Some(b"1999-12-31 +00"), Format::Text, 1082, None).unwrap();
        assert_eq!(date, ScalarValue::Date32(Some(10_956)));
    }

    #[test]
    fn floats_print_like_postgres() {
        assert_eq!(float(1.0), "1");
        assert_eq!(float(0.5), "0.5");
        assert_eq!(float(-2.25), "-2.25");
        assert_eq!(float(1e22), "1e+22");
        assert_eq!(float(1.5e-7), "1.5e-07");
        assert_eq!(float(f64::NAN), "NaN");
        assert_eq!(float(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn numeric_binary_groups_base_10000() {
        let mut out = Vec::new();
        push_numeric_binary(&mut out, b"-12345.678");
        // ndigits 3, weight 1, negative, dscale 3, digits 1 2345 6780
        let words: Vec<i16> = out
            .chunks(2)
            .map(|c| i16::from_be_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(words, vec![3, 1, 0x4000, 3, 1, 2345, 6780]);
        out.clear();
        push_numeric_binary(&mut out, b"0");
        let words: Vec<i16> = out
            .chunks(2)
            .map(|c| i16::from_be_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(words, vec![0, 0, 0, 0]);
    }

    #[test]
    fn params_decode_and_convert() {
        let v = decode_param(Some(b"42"), Format::Text, 0, Some(&DataType::Int64)).unwrap();
        assert_eq!(v, ScalarValue::Int64(Some(42)));
        let v = decode_param(
            Some(&7i32.to_be_bytes()),
            Format::Binary,
            oid::INT4,
            Some(&DataType::Int64),
        )
        .unwrap();
        assert_eq!(v, ScalarValue::Int64(Some(7)));
        let v = decode_param(None, Format::Text, 0, Some(&DataType::Float64)).unwrap();
        assert_eq!(v, ScalarValue::Float64(None));
        assert!(decode_param(Some(b"x"), Format::Text, oid::INT4, None).is_err());
        let v = decode_param(Some(b"\\x00ff"), Format::Text, oid::BYTEA, None).unwrap();
        assert_eq!(v, ScalarValue::Binary(Some(vec![0, 255])));
    }

    fn list(values: Vec<ScalarValue>, element: &DataType) -> ScalarValue {
        ScalarValue::List(ScalarValue::new_list_nullable(&values, element))
    }

    /// A binary one-dimensional array of `element_oid` with `elements` (`None` for NULL).
    fn binary_array(element_oid: i32, elements: &[Option<Vec<u8>>]) -> Vec<u8> {
        let elements: Vec<Option<&[u8]>> = elements.iter().map(Option::as_deref).collect();
        let dims = [elements.len() as i32];
        crate::array_input::tests::binary(&dims, element_oid, &elements)
    }

    #[test]
    fn array_params_decode_element_by_element() {
        let longs = DataType::new_list(DataType::Int64, true);
        let want = list(
            vec![
                ScalarValue::Int64(Some(1)),
                ScalarValue::Int64(None),
                ScalarValue::Int64(Some(-3)),
            ],
            &DataType::Int64,
        );
        // Text, declared `int8[]` or left to the planner.
        for type_oid in [1016, 0] {
            let v = decode_param(Some(b"{1, NULL,-3}"), Format::Text, type_oid, Some(&longs));
            assert_eq!(v.unwrap(), want, "OID {type_oid}");
        }
        // Binary `int2[]` (psycopg's choice for small integers) for a `BIGINT[]`.
        let shorts = binary_array(
            oid::INT2,
            &[
                Some(1i16.to_be_bytes().to_vec()),
                None,
                Some((-3i16).to_be_bytes().to_vec()),
            ],
        );
        let v = decode_param(Some(&shorts), Format::Binary, 1005, Some(&longs)).unwrap();
        assert_eq!(v, want);
        // With no type from the planner, the declared one.
        let v = decode_param(Some(&shorts), Format::Binary, 1005, None).unwrap();
        assert_eq!(v.data_type(), DataType::new_list(DataType::Int16, true));
        let texts = decode_param(Some(b"{a,\"b c\"}"), Format::Text, 1009, None).unwrap();
        let want_texts = ["a", "b c"].map(|t| ScalarValue::Utf8(Some(t.into())));
        assert_eq!(texts, list(want_texts.to_vec(), &DataType::Utf8));
        let empty = decode_param(Some(b"{}"), Format::Text, 1016, Some(&longs)).unwrap();
        assert_eq!(empty, list(Vec::new(), &DataType::Int64));
        let null = decode_param(None, Format::Binary, 1016, Some(&longs)).unwrap();
        assert!(null.is_null() && null.data_type() == longs);
    }

    #[test]
    fn bad_array_params_are_refused_with_the_reason() {
        let longs = DataType::new_list(DataType::Int64, true);
        let (code, message) = param_error(b"{1,x}", Format::Text, 1016, Some(&longs));
        assert_eq!(code, "22P02", "{message}");
        assert!(
            message.contains("bigint") && message.contains('x'),
            "{message}"
        );
        let (code, message) = param_error(b"{1,2", Format::Text, 1016, Some(&longs));
        assert_eq!(code, "22P02", "{message}");
        assert!(message.contains("malformed array"), "{message}");
        let (code, message) = param_error(b"{{1},{2}}", Format::Text, 1016, Some(&longs));
        assert_eq!(code, "0A000", "{message}");
        // Elements of another type than the array's declared one.
        let ints = binary_array(oid::INT4, &[Some(1i32.to_be_bytes().to_vec())]);
        let (_, message) = param_error(&ints, Format::Binary, 1016, Some(&longs));
        assert!(message.contains("element type"), "{message}");
        // An element out of the table's time range, as a scalar would be.
        let timestamps = DataType::new_list(DataType::Timestamp(TimeUnit::Nanosecond, None), true);
        let far = binary_array(oid::TIMESTAMP, &[Some(i64::MAX.to_be_bytes().to_vec())]);
        let (code, message) = param_error(&far, Format::Binary, 1115, Some(&timestamps));
        assert_eq!(code, "22008", "{message}");
    }

    /// The SQLSTATE and message of a parameter that fails to decode.
    fn param_error(
        value: &[u8],
        format: Format,
        type_oid: i32,
        target: Option<&DataType>,
    ) -> (&'static str, String) {
        match decode_param(Some(value), format, type_oid, target) {
            Ok(v) => panic!("{value:?} decoded as {v:?}"),
            Err(e) => (e.sqlstate(), e.to_string()),
        }
    }

    #[test]
    fn times_outside_the_table_range_are_rejected_not_wrapped_or_clamped() {
        let ns = DataType::Timestamp(TimeUnit::Nanosecond, None);
        // Microseconds since 2000-01-01 of 2300-01-01 and of 1600-01-01.
        let micros_2300 = (10_413_792_000i64 - 946_684_800) * 1_000_000;
        let micros_1600 = (-11_676_096_000i64 - 946_684_800) * 1_000_000;
        for (bytes, shown) in [
            (i64::MAX, "294277-01-09 04:00:54.775807"),
            (i64::MIN, "-290278-12-22 19:59:05.224192"),
            (micros_2300, "2300-01-01 00:00:00.000000"),
            (micros_1600, "1600-01-01 00:00:00.000000"),
        ] {
            for type_oid in [oid::TIMESTAMP, oid::TIMESTAMPTZ] {
                for target in [None, Some(&ns)] {
                    let (code, message) =
                        param_error(&bytes.to_be_bytes(), Format::Binary, type_oid, target);
                    assert_eq!(code, "22008", "{message}");
                    assert!(message.contains(shown), "{message}");
                    assert!(message.contains(TIMESTAMP_RANGE_TEXT), "{message}");
                }
            }
        }
        for days in [i32::MAX, i32::MIN, -146_097] {
            let (code, message) =
                param_error(&days.to_be_bytes(), Format::Binary, oid::DATE, Some(&ns));
            assert_eq!(code, "22008", "{message}");
        }
        for text in [
            "2300-01-01",
            "2300-01-01 00:00:00",
            "1600-01-01T00:00:00Z",
            "2262-02-01 00:00:00",
            "1677-12-31 23:59:59.999999",
        ] {
            for (type_oid, target) in [
                (oid::TIMESTAMP, None),
                (0, Some(&ns)),
                (oid::TIMESTAMP, Some(&ns)),
            ] {
                let (code, message) = param_error(text.as_bytes(), Format::Text, type_oid, target);
                assert_eq!(code, "22008", "{text}: {message}");
                // A zoneless timestamp's UTC offset is dropped before it is read.
                assert!(message.contains(text.trim_end_matches('Z')), "{message}");
            }
        }
        let (code, _) = param_error(b"2300-13-01", Format::Text, oid::TIMESTAMP, None);
        assert_eq!(code, "22P02", "not a date at all is a syntax error");
        // The bounds themselves.
        let first = decode_param(Some(b"1678-01-01"), Format::Text, oid::TIMESTAMP, None);
        assert_eq!(
            first.unwrap(),
            ScalarValue::TimestampNanosecond(Some(sundial_storage::TIMESTAMP_MIN_NS), None)
        );
        let last =
            (sundial_storage::TIMESTAMP_END_NS / 1000 - 1 - PG_EPOCH_OFFSET_US).to_be_bytes();
        let last = decode_param(Some(&last), Format::Binary, oid::TIMESTAMP, None);
        assert_eq!(
            last.unwrap(),
            ScalarValue::TimestampNanosecond(Some(sundial_storage::TIMESTAMP_END_NS - 1000), None)
        );
        let (code, _) = param_error(b"2262-01-01", Format::Text, oid::TIMESTAMP, None);
        assert_eq!(code, "22008", "the end is exclusive");
    }
}
