//! COPY TO STDOUT: result rows in the text, CSV or binary COPY format.
//!
//! One CopyData message per row, as PostgreSQL sends them (clients such as psycopg parse each
//! message as one row). In binary, the signature rides in the first message and the trailer
//! has its own, again as PostgreSQL does. Values are PostgreSQL's text (or binary) forms, the
//! same ones query results use.

use arrow::array::ArrayRef;
use arrow::datatypes::{Schema, SchemaRef};
use sundial_query::copy::{CopyFormat, CopyOptions};

use crate::codec::Writer;
use crate::copy_decode::BINARY_SIGNATURE;
use crate::error::PgError;
use crate::types::{ColumnEncoder, Format, pg_field_types};

/// Writes the rows of one COPY TO.
pub struct RowWriter {
    options: CopyOptions,
    /// The binary signature still has to go out (in front of the first message).
    signature_due: bool,
    /// One value's text, before escaping.
    value: Vec<u8>,
    /// The PostgreSQL types of the columns (see `types::pg_field_type`).
    column_types: Vec<i32>,
}

impl RowWriter {
    pub fn new(options: CopyOptions, schema: &Schema) -> RowWriter {
        RowWriter {
            signature_due: options.format == CopyFormat::Binary,
            options,
            value: Vec::new(),
            column_types: pg_field_types(schema),
        }
    }

    /// The overall format code of CopyOutResponse / CopyInResponse.
    pub fn format_code(format: CopyFormat) -> i8 {
        match format {
            CopyFormat::Binary => 1,
            CopyFormat::Text | CopyFormat::Csv => 0,
        }
    }

    /// The header line (CSV or text with HEADER): the column names.
    pub fn header(&mut self, out: &mut Writer, schema: &SchemaRef) {
        if !self.options.header || self.options.format == CopyFormat::Binary {
            return;
        }
        let at = out.begin(b'd');
        for (i, field) in schema.fields().iter().enumerate() {
            if i > 0 {
                out.buf.push(self.options.delimiter);
            }
            self.push_value(&mut out.buf, field.name().as_bytes());
        }
        out.buf.push(b'\n');
        out.end(at);
    }

    /// Appends rows `rows` of `columns` (already normalized), one CopyData each.
    pub fn rows(
        &mut self,
        out: &mut Writer,
        columns: &[ArrayRef],
        rows: std::ops::Range<usize>,
    ) -> Result<(), PgError> {
        let format = match self.options.format {
            CopyFormat::Binary => Format::Binary,
            CopyFormat::Text | CopyFormat::Csv => Format::Text,
        };
        let encoders = columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let type_oid = self.column_types.get(i).copied().unwrap_or(0);
                ColumnEncoder::for_type(c, type_oid, format)
            })
            .collect::<Result<Vec<_>, _>>()?;
        for row in rows {
            let at = out.begin(b'd');
            self.signature(out);
            match self.options.format {
                CopyFormat::Binary => {
                    out.i16(encoders.len() as i16);
                    for e in &encoders {
                        e.encode(row, &mut out.buf);
                    }
                }
                CopyFormat::Text | CopyFormat::Csv => self.text_row(&mut out.buf, &encoders, row),
            }
            out.end(at);
        }
        Ok(())
    }

    /// The end of the data: the binary trailer (with the signature if no row carried it).
    pub fn finish(&mut self, out: &mut Writer) {
        if self.options.format == CopyFormat::Binary {
            let at = out.begin(b'd');
            self.signature(out);
            out.i16(-1);
            out.end(at);
        }
    }

    fn signature(&mut self, out: &mut Writer) {
        if self.signature_due {
            out.buf.extend_from_slice(BINARY_SIGNATURE);
            out.i32(0);
            out.i32(0);
            self.signature_due = false;
        }
    }

    fn text_row(&mut self, out: &mut Vec<u8>, encoders: &[ColumnEncoder<'_>], row: usize) {
        for (i, e) in encoders.iter().enumerate() {
            if i > 0 {
                out.push(self.options.delimiter);
            }
            self.value.clear();
            if e.encode_text(row, &mut self.value) {
                let value = std::mem::take(&mut self.value);
                self.push_value(out, &value);
                self.value = value;
            } else {
                out.extend_from_slice(self.options.null.as_bytes());
            }
        }
        out.push(b'\n');
    }

    /// Appends a non-NULL value, escaped (text) or quoted where needed (CSV).
    fn push_value(&self, out: &mut Vec<u8>, v: &[u8]) {
        match self.options.format {
            CopyFormat::Csv => push_csv(out, v, &self.options),
            _ => push_text(out, v, self.options.delimiter),
        }
    }
}

/// The text format's escapes: backslash, the delimiter and control characters.
fn push_text(out: &mut Vec<u8>, v: &[u8], delimiter: u8) {
    for &b in v {
        let escaped = match b {
            8 => b'b',
            12 => b'f',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            11 => b'v',
            b'\\' => b'\\',
            _ if b == delimiter => b,
            _ => {
                out.push(b);
                continue;
            }
        };
        out.push(b'\\');
        out.push(escaped);
    }
}

/// CSV: quoted when the value holds the delimiter, the quote, a line break, equals the NULL
/// string (so it does not read back as NULL) or is the end marker `\.`.
fn push_csv(out: &mut Vec<u8>, v: &[u8], o: &CopyOptions) {
    let needs_quotes = v == o.null.as_bytes()
        || v == b"\\."
        || v.iter()
            .any(|&b| b == o.delimiter || b == o.quote || b == b'\n' || b == b'\r');
    if !needs_quotes {
        out.extend_from_slice(v);
        return;
    }
    out.push(o.quote);
    for &b in v {
        if b == o.quote || b == o.escape {
            out.push(o.escape);
        }
        out.push(b);
    }
    out.push(o.quote);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Int64Array, StringArray};

    use super::*;

    fn options(format: CopyFormat) -> CopyOptions {
        CopyOptions {
            header: true,
            ..CopyOptions::defaults(format)
        }
    }

    /// The CopyData payloads written.
    fn messages(out: &Writer) -> Vec<Vec<u8>> {
        let mut rest = out.buf.as_slice();
        let mut all = Vec::new();
        while let Some((m, n)) = crate::codec::next_message(rest, 1 << 20).unwrap() {
            assert_eq!(m.tag, b'd');
            all.push(m.body.to_vec());
            rest = &rest[n..];
        }
        all
    }

    fn columns() -> (SchemaRef, Vec<ArrayRef>) {
        let s: ArrayRef = Arc::new(StringArray::from(vec![Some("a\tb\\c"), Some(""), None]));
        let n: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(-3)]));
        let b: ArrayRef = Arc::new(BooleanArray::from(vec![Some(true), Some(false), None]));
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("s", arrow::datatypes::DataType::Utf8, true),
            arrow::datatypes::Field::new("n,1", arrow::datatypes::DataType::Int64, true),
            arrow::datatypes::Field::new("b", arrow::datatypes::DataType::Boolean, true),
        ]));
        (schema, vec![s, n, b])
    }

    #[test]
    fn text_rows_escape_and_spell_null() {
        let (schema, cols) = columns();
        let mut w = RowWriter::new(options(CopyFormat::Text), &Schema::empty());
        let mut out = Writer::default();
        w.header(&mut out, &schema);
        w.rows(&mut out, &cols, 0..3).unwrap();
        w.finish(&mut out);
        let m = messages(&out);
        assert_eq!(m[0], b"s\tn,1\tb\n");
        assert_eq!(m[1], b"a\\tb\\\\c\t1\tt\n");
        assert_eq!(m[2], b"\t\\N\tf\n");
        assert_eq!(m[3], b"\\N\t-3\t\\N\n");
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn csv_rows_quote_where_needed() {
        let (schema, cols) = columns();
        let mut w = RowWriter::new(options(CopyFormat::Csv), &Schema::empty());
        let mut out = Writer::default();
        w.header(&mut out, &schema);
        w.rows(&mut out, &cols, 0..3).unwrap();
        let m = messages(&out);
        assert_eq!(m[0], b"s,\"n,1\",b\n");
        assert_eq!(m[1], b"a\tb\\c,1,t\n");
        assert_eq!(m[2], b"\"\",,f\n");
        assert_eq!(m[3], b",-3,\n");
    }

    #[test]
    fn binary_signature_rides_the_first_message() {
        let (_, cols) = columns();
        let mut w = RowWriter::new(
            CopyOptions {
                header: false,
                ..options(CopyFormat::Binary)
            },
            &Schema::empty(),
        );
        let mut out = Writer::default();
        w.rows(&mut out, &cols[1..2], 0..2).unwrap();
        w.finish(&mut out);
        let m = messages(&out);
        let mut first = BINARY_SIGNATURE.to_vec();
        first.extend_from_slice(&[0; 8]);
        first.extend_from_slice(&1i16.to_be_bytes());
        first.extend_from_slice(&8i32.to_be_bytes());
        first.extend_from_slice(&1i64.to_be_bytes());
        assert_eq!(m[0], first);
        assert_eq!(m[1], [0, 1, 255, 255, 255, 255]);
        assert_eq!(m[2], (-1i16).to_be_bytes());
        let mut empty = RowWriter::new(
            CopyOptions {
                header: false,
                ..options(CopyFormat::Binary)
            },
            &Schema::empty(),
        );
        let mut out = Writer::default();
        empty.finish(&mut out);
        assert_eq!(messages(&out)[0].len(), 19 + 2);
    }
}
