//! Partitions written as Parquet read back, with the `parquet` crate's own reader, as the rows
//! the partition holds: timestamps as UTC timestamps, SYMBOLs as strings, every part of a
//! partition in time order, NULLs kept, whatever the encodings and compression.

mod common;

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, TimestampNanosecondType};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use common::*;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::basic::Encoding;
use parquet::file::metadata::PageIndexPolicy;
use sundial_storage::{
    Database, Encodings, PageCompression, ParquetOptions, PartitionBy, TableDef, write_partition,
};

const BASE_TS: i64 = 1_451_606_400_000_000_000; // 2016-01-01

/// The rows of a Parquet file, as the model's rows.
fn rows_of(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let ts = b.column(0).as_primitive::<TimestampNanosecondType>();
        let sym = arrow_cast::cast(b.column(1), &DataType::Utf8).unwrap();
        let sym = sym.as_string::<i32>();
        let v = b.column(2).as_primitive::<Int64Type>();
        let s = arrow_cast::cast(b.column(3), &DataType::Utf8).unwrap();
        let s = s.as_string::<i32>();
        let flag = b.column(4).as_boolean();
        let d = b.column(5).as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            let text = |a: &arrow_array::StringArray| a.is_valid(i).then(|| a.value(i).to_string());
            out.push(Row {
                ts: ts.value(i),
                sym: text(sym),
                v: v.is_valid(i).then(|| v.value(i)),
                s: text(s),
                b: flag.is_valid(i).then(|| flag.value(i)),
                d: d.value(i),
            });
        }
    }
    out
}

#[test]
fn partitions_read_back_from_parquet_as_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), options()).unwrap();
    let table = db
        .create_table(
            TableDef {
                name: "t".into(),
                columns: columns(),
                timestamp: Some("ts".into()),
                partition_by: PartitionBy::Day,
                indexed: Vec::new(),
                dedup_keys: Vec::new(),
                ttl: None,
                cold_after: None,
            },
            false,
        )
        .unwrap();
    // Two days; late rows split the first day into parts.
    let mut rng = Rng(21);
    let mut all = Vec::new();
    let mut w = table.writer().unwrap();
    // (start hour, rows): each spread over 6 hours; the third lands late, near the end of the
    // first day, which makes the storage rewrite only that day's tail: a second part.
    for (round, (hour, n)) in [(0, 3000), (6, 3000), (11, 100), (24, 2000)]
        .into_iter()
        .enumerate()
    {
        let start = BASE_TS + hour * HOUR_NS;
        let rows: Vec<Row> = (0..n)
            .map(|k| random_row(&mut rng, start, round as u64 * 10_000 + k))
            .collect();
        w.append(&batch(&rows)).unwrap();
        w.commit().unwrap();
        all.extend(rows);
    }
    drop(w);
    let snapshot = table.snapshot();
    let keys: Vec<i64> = {
        let mut k: Vec<i64> = snapshot.partitions().iter().map(|p| p.key).collect();
        k.dedup();
        k
    };
    assert!(keys.len() >= 2);
    assert!(
        snapshot.partitions().len() > keys.len(),
        "a partition in several parts"
    );
    let variants = [
        ParquetOptions::default(),
        ParquetOptions {
            row_group_rows: 333,
            compression: PageCompression::Lz4,
            encodings: Encodings::NoDictionary,
        },
        ParquetOptions {
            row_group_rows: 1000,
            compression: PageCompression::None,
            encodings: Encodings::Defaults,
        },
    ];
    for (n, options) in variants.iter().enumerate() {
        let mut read = Vec::new();
        for key in &keys {
            let path = dir.path().join(format!("{n}-{key}.parquet"));
            let written = write_partition(
                &snapshot,
                *key,
                std::fs::File::create(&path).unwrap(),
                options,
            )
            .unwrap();
            assert_eq!(
                written.bytes,
                std::fs::metadata(&path).unwrap().len(),
                "bytes counted"
            );
            assert_eq!(written.column_bytes.len(), 6);
            let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(
                std::fs::File::open(&path).unwrap(),
                ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required),
            )
            .unwrap();
            let schema = builder.schema().clone();
            assert_eq!(
                schema.field(0).data_type(),
                &DataType::Timestamp(TimeUnit::Nanosecond, Some(Arc::from("UTC")))
            );
            // SYMBOLs are text in the file (Arrow readers see a dictionary of strings).
            let metadata = builder.metadata().clone();
            let sym = metadata.file_metadata().schema_descr().column(1);
            assert_eq!(sym.physical_type(), parquet::basic::Type::BYTE_ARRAY);
            assert_eq!(
                sym.logical_type_ref(),
                Some(&parquet::basic::LogicalType::String)
            );
            assert_eq!(
                schema.field(1).data_type(),
                &DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
            );
            let groups = metadata.row_groups();
            assert_eq!(
                groups.iter().map(|g| g.num_rows() as u64).sum::<u64>(),
                written.rows
            );
            assert!(
                groups
                    .iter()
                    .all(|g| g.num_rows() as usize <= options.row_group_rows)
            );
            let ts_encodings: Vec<Encoding> = groups[0].column(0).encodings().collect();
            assert_eq!(
                ts_encodings.contains(&Encoding::DELTA_BINARY_PACKED),
                options.encodings != Encodings::Defaults,
                "{ts_encodings:?}"
            );
            assert!(metadata.offset_index().is_some(), "page index written");
            let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
            let rows = rows_of(&batches);
            assert!(rows.windows(2).all(|w| w[0].ts <= w[1].ts), "in time order");
            read.extend(rows);
        }
        assert_rows(&read, &expected(&all), &format!("variant {n}"));
    }
}

/// Writing a partition to a full disk (`/dev/full`: every write fails with ENOSPC) is a
/// disk-full error, which the protocols answer as such (SQLSTATE 53100), not an internal one.
#[test]
fn a_full_disk_is_a_disk_full_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db
        .create_table(
            TableDef {
                name: "t".into(),
                columns: columns(),
                timestamp: Some("ts".into()),
                partition_by: PartitionBy::Day,
                indexed: Vec::new(),
                dedup_keys: Vec::new(),
                ttl: None,
                cold_after: None,
            },
            false,
        )
        .unwrap();
    let mut rng = Rng(22);
    let rows: Vec<Row> = (0..5000)
        .map(|k| random_row(&mut rng, BASE_TS, k))
        .collect();
    commit(&table, &rows);
    let snapshot = table.snapshot();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let e = write_partition(
        &snapshot,
        snapshot.partitions()[0].key,
        full,
        &ParquetOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(e, sundial_storage::StorageError::DiskFull { .. }),
        "{e:?}"
    );
}
