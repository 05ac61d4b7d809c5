//! Single-row reads (`Snapshot::part_rows`) give what the Arrow reads give, value by value:
//! every column type, NULLs, rows before a column was added, several partitions. Damaged
//! files are reported as corrupt, never read past.

mod common;

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date64Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    TimestampNanosecondType,
};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date64Array, Float32Array, Float64Array, Int8Array,
    Int16Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
};
use arrow_schema::{DataType, Field, Schema};
use common::*;
use sundial_storage::{Cell, ColumnType, PartitionBy, Snapshot, StorageError, TableDef};

const BASE_TS: i64 = 1_451_606_400_000_000_000; // 2016-01-01
const DAY_NS: i64 = 24 * HOUR_NS;

const TYPES: [(&str, ColumnType); 14] = [
    ("ts", ColumnType::Timestamp),
    ("bo", ColumnType::Boolean),
    ("by", ColumnType::Byte),
    ("sh", ColumnType::Short),
    ("i", ColumnType::Int),
    ("l", ColumnType::Long),
    ("f", ColumnType::Float),
    ("d", ColumnType::Double),
    ("t2", ColumnType::Timestamp),
    ("da", ColumnType::Date),
    ("sy", ColumnType::Symbol),
    ("v", ColumnType::Varchar),
    ("u", ColumnType::Uuid),
    ("bi", ColumnType::Binary),
];

/// A table of every type, `sy` indexed.
fn def(name: &str, partition_by: PartitionBy) -> TableDef {
    TableDef {
        name: name.into(),
        columns: TYPES.iter().map(|(n, t)| (n.to_string(), *t)).collect(),
        timestamp: Some("ts".into()),
        partition_by,
        indexed: vec!["sy".into()],
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    }
}

/// `n` rows over two days from `first`, each column NULL on every 7th row.
fn batch(first: usize, n: usize, with_added: bool) -> RecordBatch {
    let rows = first..first + n;
    let some = |i: usize| i % 7 != 3;
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(TimestampNanosecondArray::from_iter_values(
            rows.clone().map(|i| BASE_TS + (i as i64) * DAY_NS / 1000),
        )),
        Arc::new(BooleanArray::from_iter(
            rows.clone().map(|i| some(i).then_some(i % 3 == 0)),
        )),
        Arc::new(Int8Array::from_iter(
            rows.clone().map(|i| some(i).then_some(i as i8)),
        )),
        Arc::new(Int16Array::from_iter(
            rows.clone()
                .map(|i| some(i).then_some((i as i16).wrapping_mul(7))),
        )),
        Arc::new(Int32Array::from_iter(
            rows.clone()
                .map(|i| some(i).then_some((i as i32).wrapping_mul(-31))),
        )),
        Arc::new(Int64Array::from_iter(
            rows.clone().map(|i| some(i).then_some((i as i64) << 33)),
        )),
        Arc::new(Float32Array::from_iter(
            rows.clone().map(|i| some(i).then_some(i as f32 / 3.0)),
        )),
        Arc::new(Float64Array::from_iter(
            rows.clone().map(|i| some(i).then_some(i as f64 * 1.5)),
        )),
        Arc::new(TimestampNanosecondArray::from_iter(
            rows.clone()
                .map(|i| some(i).then_some(BASE_TS - i as i64 * 1_000_003)),
        )),
        Arc::new(Date64Array::from_iter(
            rows.clone()
                .map(|i| some(i).then_some(1_451_606_400_123 + i as i64)),
        )),
        Arc::new(StringArray::from_iter(
            rows.clone()
                .map(|i| some(i).then(|| format!("s{}", i % 13))),
        )),
        Arc::new(StringArray::from_iter(
            rows.clone().map(|i| some(i).then(|| "é".repeat(i % 5))),
        )),
        Arc::new(StringArray::from_iter(rows.clone().map(|i| {
            some(i).then(|| format!("12345678-1234-5678-9abc-{:012x}", i * 977))
        }))),
        Arc::new(BinaryArray::from_iter(
            rows.clone().map(|i| some(i).then(|| vec![i as u8; i % 4])),
        )),
    ];
    let mut names: Vec<&str> = TYPES.iter().map(|(n, _)| *n).collect();
    if with_added {
        columns.push(Arc::new(Int64Array::from_iter(
            rows.map(|i| (i % 2 == 0).then_some(i as i64)),
        )));
        names.push("added");
    }
    let fields: Vec<Field> = names
        .iter()
        .zip(&columns)
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// Row `row` of an array read through Arrow, as a cell, for comparison.
fn arrow_cell(array: &dyn Array, row: usize) -> Cell<'_> {
    if array.is_null(row) {
        return Cell::Null;
    }
    match array.data_type() {
        DataType::Boolean => Cell::Bool(array.as_boolean().value(row)),
        DataType::Int8 => Cell::Byte(array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => Cell::Short(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => Cell::Int(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => Cell::Long(array.as_primitive::<Int64Type>().value(row)),
        DataType::Float32 => Cell::Float(array.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => Cell::Double(array.as_primitive::<Float64Type>().value(row)),
        DataType::Timestamp(..) => {
            Cell::Timestamp(array.as_primitive::<TimestampNanosecondType>().value(row))
        }
        DataType::Date64 => Cell::Date(array.as_primitive::<Date64Type>().value(row)),
        DataType::Dictionary(..) => {
            let dict = array.as_dictionary::<Int32Type>();
            let code = dict.keys().value(row) as usize;
            Cell::Str(dict.values().as_string::<i32>().value(code))
        }
        DataType::Utf8 => Cell::Str(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Cell::Str(array.as_string::<i64>().value(row)),
        DataType::LargeBinary => Cell::Binary(array.as_binary::<i64>().value(row)),
        other => panic!("unexpected type {other}"),
    }
}

/// Compares every cell of every partition with the Arrow read of the same row.
fn check_cells(snapshot: &Snapshot) -> usize {
    let columns: Vec<usize> = (0..snapshot.meta().columns.len()).collect();
    let mut checked = 0;
    for (p, part) in snapshot.partitions().iter().enumerate() {
        let rows = snapshot
            .part_rows(p, &columns)
            .unwrap()
            .expect("native part");
        assert_eq!(rows.rows(), part.row_count);
        let batch = snapshot.read_batch(p, &columns, 0..part.row_count).unwrap();
        for (c, array) in batch.columns().iter().enumerate() {
            for row in 0..part.row_count {
                let cell = rows.cell(c, row).unwrap();
                let expected = match snapshot.meta().columns[c].column_type {
                    // Arrow reads UUIDs as their canonical text.
                    ColumnType::Uuid => match cell {
                        Cell::Uuid(bytes) => {
                            let text = array.as_string::<i32>().value(row as usize);
                            assert_eq!(uuid_text(bytes), text, "partition {p} row {row}");
                            checked += 1;
                            continue;
                        }
                        _ => arrow_cell(array.as_ref(), row as usize),
                    },
                    _ => arrow_cell(array.as_ref(), row as usize),
                };
                assert_eq!(cell, expected, "partition {p} column {c} row {row}");
                checked += 1;
            }
        }
        assert!(rows.cell(0, part.row_count).is_err(), "a row past the end");
        assert!(rows.cell(columns.len(), 0).is_err(), "a column not mapped");
    }
    checked
}

fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[test]
fn single_rows_read_as_arrow_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path(), options());
    let table = db
        .create_table(def("all", PartitionBy::Day), false)
        .unwrap();
    let mut w = table.writer().unwrap();
    w.append(&batch(0, 1500, false)).unwrap();
    w.commit().unwrap();
    // Rows of the last partition before and after a column is added: the first read NULL.
    w.add_column("added", ColumnType::Long).unwrap();
    w.append(&batch(1500, 700, true)).unwrap();
    w.commit().unwrap();
    drop(w);
    let snapshot = table.snapshot();
    assert!(snapshot.partitions().len() >= 3);
    let checked = check_cells(&snapshot);
    assert_eq!(
        checked as u64,
        snapshot.row_count() * TYPES.len() as u64 + 2200
    );
}

/// Offsets that run backwards or past the data, and SYMBOL codes outside the dictionary, are
/// errors naming the file.
#[test]
fn damaged_files_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path(), options());
    let table = db.create_table(def("t", PartitionBy::None), false).unwrap();
    let mut w = table.writer().unwrap();
    w.append(&batch(0, 20, false)).unwrap();
    w.commit().unwrap();
    drop(w);
    let snapshot = table.snapshot();
    let meta = snapshot.meta().clone();
    let id = |name: &str| meta.columns[meta.column_index(name).unwrap()].id;
    let part_dir = std::fs::read_dir(table.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.join(format!("{}.o", id("v"))).exists() && p.join(format!("{}.d", id("ts"))).exists()
        })
        .expect("the partition's directory");
    // Row 1's end offset of `v` (8 bytes at 16) far past the data; row 2's code of `sy`.
    let overwrite = |file: String, at: usize, bytes: &[u8]| {
        let path = part_dir.join(file);
        let mut all = std::fs::read(&path).unwrap();
        all[at..at + bytes.len()].copy_from_slice(bytes);
        std::fs::write(&path, all).unwrap();
    };
    overwrite(format!("{}.o", id("v")), 16, &(1i64 << 40).to_le_bytes());
    overwrite(format!("{}.d", id("sy")), 8, &1000i32.to_le_bytes());
    let all: Vec<usize> = (0..meta.columns.len()).collect();
    let rows = snapshot.part_rows(0, &all).unwrap().expect("native");
    let v = meta.column_index("v").unwrap();
    let sy = meta.column_index("sy").unwrap();
    for (column, row) in [(v, 1), (v, 2), (sy, 2)] {
        match rows.cell(column, row) {
            Err(StorageError::Corrupt { path, .. }) => {
                assert!(path.starts_with(&part_dir), "{path:?}")
            }
            other => panic!("column {column} row {row}: {other:?}"),
        }
    }
    assert_eq!(rows.cell(v, 0).unwrap(), Cell::Str(""));
}
