//! DataRow values encoded straight from a table's mapped files, for point lookups.
//!
//! A lookup's rows arrive as [`Cell`]s read from the column files (see
//! `sundial_storage::PartRows`), not as Arrow arrays. [`CellEncoder`] writes each in text or
//! binary exactly as [`ColumnEncoder`](crate::types::ColumnEncoder) writes the same value
//! read through Arrow (the tests compare the two byte for byte), so a client cannot tell which
//! path served it.

use arrow::datatypes::{DataType, Field, TimeUnit};
use sundial_query::text::{Fraction, push_date, push_timestamp};
use sundial_storage::Cell;

use crate::types::{
    Format, PG_EPOCH_OFFSET_DAYS, PG_EPOCH_OFFSET_US, oid, push_bytea_hex, push_float, put_bytes,
    with_length,
};

/// How one result column's cells are encoded.
#[derive(Debug, Clone, Copy)]
pub struct CellEncoder {
    format: Format,
    /// A TIMESTAMP column described as `timestamptz` (text ends in `+00`).
    zoned: bool,
    /// A UUID column described as `uuid` (binary is its 16 bytes, not its text).
    uuid_type: bool,
}

impl CellEncoder {
    /// The encoder of a column read as `field` (a table column's Arrow type) and described as
    /// `type_oid`; `None` for a type that reaches clients only through Arrow.
    pub fn new(field: &Field, type_oid: i32, format: Format) -> Option<CellEncoder> {
        let zoned = match field.data_type() {
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => tz.is_some(),
            DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float32
            | DataType::Float64
            | DataType::Date64
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::LargeBinary => false,
            DataType::Dictionary(key, value)
                if **key == DataType::Int32 && **value == DataType::Utf8 =>
            {
                false
            }
            _ => return None,
        };
        Some(CellEncoder {
            format,
            zoned,
            uuid_type: type_oid == oid::UUID,
        })
    }

    /// Appends `cell`: a 4-byte length (-1 for NULL) and its bytes.
    #[inline]
    pub fn encode(&self, cell: Cell<'_>, out: &mut Vec<u8>) {
        match self.format {
            Format::Text => self.text(cell, out),
            Format::Binary => self.binary(cell, out),
        }
    }

    fn text(&self, cell: Cell<'_>, out: &mut Vec<u8>) {
        let mut ints = itoa::Buffer::new();
        match cell {
            Cell::Null => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Cell::Bool(v) => put_bytes(out, if v { b"t" } else { b"f" }),
            // Arrow's Int8 is sent as int2.
            Cell::Byte(v) => put_bytes(out, ints.format(i16::from(v)).as_bytes()),
            Cell::Short(v) => put_bytes(out, ints.format(v).as_bytes()),
            Cell::Int(v) => put_bytes(out, ints.format(v).as_bytes()),
            Cell::Long(v) => put_bytes(out, ints.format(v).as_bytes()),
            Cell::Float(v) => with_length(out, |out| push_float(out, f64::from(v), true)),
            Cell::Double(v) => with_length(out, |out| push_float(out, v, false)),
            Cell::Timestamp(v) => with_length(out, |out| {
                push_timestamp(out, v, b' ', Fraction::TrimmedMicros);
                if self.zoned {
                    out.extend_from_slice(b"+00");
                }
            }),
            Cell::Date(ms) => with_length(out, |out| push_date(out, ms.div_euclid(86_400_000))),
            Cell::Str(v) => put_bytes(out, v.as_bytes()),
            Cell::Binary(v) => with_length(out, |out| push_bytea_hex(out, v)),
            Cell::Uuid(v) => put_bytes(out, &uuid_text(v)),
        }
    }

    fn binary(&self, cell: Cell<'_>, out: &mut Vec<u8>) {
        match cell {
            Cell::Null => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Cell::Bool(v) => put_bytes(out, &[u8::from(v)]),
            Cell::Byte(v) => put_bytes(out, &i16::from(v).to_be_bytes()),
            Cell::Short(v) => put_bytes(out, &v.to_be_bytes()),
            Cell::Int(v) => put_bytes(out, &v.to_be_bytes()),
            Cell::Long(v) => put_bytes(out, &v.to_be_bytes()),
            Cell::Float(v) => put_bytes(out, &v.to_be_bytes()),
            Cell::Double(v) => put_bytes(out, &v.to_be_bytes()),
            Cell::Timestamp(v) => put_bytes(
                out,
                &(v.div_euclid(1000) - PG_EPOCH_OFFSET_US).to_be_bytes(),
            ),
            Cell::Date(ms) => {
                let days = ms.div_euclid(86_400_000) as i32 - PG_EPOCH_OFFSET_DAYS;
                put_bytes(out, &days.to_be_bytes());
            }
            Cell::Str(v) => put_bytes(out, v.as_bytes()),
            Cell::Binary(v) => put_bytes(out, v),
            Cell::Uuid(v) if self.uuid_type => put_bytes(out, v),
            Cell::Uuid(v) => put_bytes(out, &uuid_text(v)),
        }
    }
}

/// A UUID's canonical text: 8-4-4-4-12 lowercase hex digits.
fn uuid_text(bytes: &[u8; 16]) -> [u8; 36] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = [0u8; 36];
    let mut at = 0;
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text[at] = b'-';
            at += 1;
        }
        text[at] = HEX[usize::from(b >> 4)];
        text[at + 1] = HEX[usize::from(b & 0xf)];
        at += 2;
    }
    text
}

#[cfg(test)]
mod tests {
    use sundial_query::{Caller, Engine, ScalarValue};
    use sundial_storage::{Database, Durability, StorageOptions};

    use super::*;
    use crate::types::{ColumnEncoder, normalize, pg_field_types};

    /// Every column type, NULL and not, in both formats: the cells of a lookup encode to the
    /// bytes its Arrow batches encode to.
    #[tokio::test]
    async fn cells_encode_as_arrow_columns_do() {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        };
        let engine =
            Engine::new(Database::open(dir.path(), options).expect("open")).expect("engine");
        engine
            .run(
                "CREATE TABLE t (ts TIMESTAMP, id LONG, bo BOOLEAN, by BYTE, sh SHORT, i INT, \
                 f FLOAT, d DOUBLE, da DATE, sy SYMBOL, v VARCHAR, u UUID, bi BINARY) \
                 TIMESTAMP(ts) PARTITION BY DAY",
            )
            .await
            .expect("create");
        engine
            .run(
                "INSERT INTO t VALUES \
                 ('2024-01-01T00:00:00.123456Z', 1, true, -5, 300, -70000, 0.1, 1e300, \
                  '1969-12-31T23:59:59.999Z', 'a', 'é x', '0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9', \
                  X'00ff10'), \
                 ('2024-01-02T00:00:00Z', 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                  NULL, NULL, NULL), \
                 ('2024-01-02T01:00:00Z', 1, false, 127, -1, 0, 'NaN', -0.0, \
                  '2024-02-29T12:00:00Z', 'b', '', '00000000-0000-0000-0000-000000000000', X'')",
            )
            .await
            .expect("insert");
        // One lookup in a part added after a column.
        engine
            .run("ALTER TABLE t ADD COLUMN late INT")
            .await
            .expect("add");
        engine
            .run("INSERT INTO t (ts, id, late) VALUES ('2024-01-02T02:00:00Z', 1, 7)")
            .await
            .expect("insert");
        let prepared = engine
            .prepare("SELECT * FROM t WHERE id = $1")
            .await
            .expect("prepare");
        assert!(prepared.is_point_lookup());
        let params = [ScalarValue::Int64(Some(1))];
        let found = || {
            engine
                .run_lookup_now(&prepared, &params, &Caller::trusted())
                .expect("a lookup")
                .expect("found")
        };
        let rows = found();
        assert_eq!(rows.row_count(), 4);
        let schema = rows.schema().clone();
        let type_oids = pg_field_types(&schema);
        for format in [Format::Text, Format::Binary] {
            let mut direct = Vec::new();
            let encoders: Vec<CellEncoder> = schema
                .fields()
                .iter()
                .zip(&type_oids)
                .map(|(f, t)| CellEncoder::new(f, *t, format).expect("an encoder"))
                .collect();
            for (part, part_rows) in rows.parts().expect("parts").expect("native parts") {
                for &row in part_rows {
                    for (c, e) in encoders.iter().enumerate() {
                        e.encode(part.cell(c, u64::from(row)).expect("cell"), &mut direct);
                    }
                }
            }
            let mut arrow = Vec::new();
            for batch in found().into_batches().expect("batches") {
                let columns: Vec<_> = batch
                    .columns()
                    .iter()
                    .map(|c| normalize(c).expect("normalize"))
                    .collect();
                let encoders: Vec<ColumnEncoder> = columns
                    .iter()
                    .zip(&type_oids)
                    .map(|(c, t)| ColumnEncoder::for_type(c, *t, format).expect("encoder"))
                    .collect();
                for row in 0..batch.num_rows() {
                    for e in &encoders {
                        e.encode(row, &mut arrow);
                    }
                }
            }
            assert_eq!(direct, arrow, "{format:?}");
        }
    }
}
