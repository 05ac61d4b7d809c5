//! Lines in, committed rows out: tables and columns on the fly, types, rejections.

use std::sync::Arc;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, TimestampNanosecondType};
use sundial_ilp::Precision;
use sundial_ingest::{IngestError, IngestOptions, Ingestor};
use sundial_storage::{ColumnType, Database, Durability, PartitionBy, StorageOptions, TableDef};

fn db(dir: &std::path::Path) -> Arc<Database> {
    Database::open(
        dir,
        StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        },
    )
    .unwrap()
}

fn ingest(ing: &mut Ingestor, lines: &str) -> Vec<Result<(), IngestError>> {
    lines
        .lines()
        .map(|l| ing.ingest_line(l.as_bytes(), Precision::Nanos, 42))
        .collect()
}

#[test]
fn creates_tables_and_columns_on_the_fly() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let mut ing = Ingestor::new(db.clone(), IngestOptions::default());
    let results = ingest(
        &mut ing,
        "cpu,host=a,region=eu usage=1.5,cores=4i,ok=t,note=\"hi there\" 1451606400000000000\n\
         cpu,host=b usage=2 1451606410000000000\n\
         cpu,host=c,rack=r1 usage=3,extra=7i 1451606420000000000\n\
         mem,host=a free=10i",
    );
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    // Adding `rack`/`extra` handed the first two rows to the table's sink under the old schema.
    assert_eq!(ing.pending_rows(), 2);
    assert_eq!(db.table("cpu").unwrap().snapshot().row_count(), 0);
    assert_eq!(ing.flush().unwrap(), 4);
    let cpu = db.table("cpu").unwrap().meta();
    let types: Vec<(&str, ColumnType)> = cpu
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.column_type))
        .collect();
    assert_eq!(
        types,
        vec![
            ("timestamp", ColumnType::Timestamp),
            ("host", ColumnType::Symbol),
            ("region", ColumnType::Symbol),
            ("usage", ColumnType::Double),
            ("cores", ColumnType::Long),
            ("ok", ColumnType::Boolean),
            ("note", ColumnType::Varchar),
            ("rack", ColumnType::Symbol),
            ("extra", ColumnType::Long),
        ]
    );
    assert_eq!(cpu.partition_by, PartitionBy::Day);
    let s = db.table("cpu").unwrap().snapshot();
    assert_eq!(s.row_count(), 3);
    let usage = s.read_column(0, 3, 0..3).unwrap();
    assert_eq!(
        usage.as_primitive::<Float64Type>().values().to_vec(),
        vec![1.5, 2.0, 3.0]
    );
    let cores = s.read_column(0, 4, 0..3).unwrap();
    assert_eq!(cores.null_count(), 2);
    let extra = s.read_column(0, 8, 0..3).unwrap();
    assert_eq!(extra.as_primitive::<Int64Type>().value(2), 7);
    assert!(extra.is_null(0));
    // A line without a timestamp gets the receiver's clock.
    let mem = db.table("mem").unwrap().snapshot();
    let ts = mem.read_column(0, 0, 0..1).unwrap();
    assert_eq!(ts.as_primitive::<TimestampNanosecondType>().value(0), 42);
    assert_eq!(ing.stats().lines_accepted, 4);
}

#[test]
fn bad_lines_are_rejected_whole_and_the_rest_go_in() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    db.create_table(
        TableDef {
            name: "t".into(),
            columns: vec![
                ("ts".into(), ColumnType::Timestamp),
                ("v".into(), ColumnType::Double),
                ("n".into(), ColumnType::Int),
                ("s".into(), ColumnType::Symbol),
            ],
            timestamp: Some("ts".into()),
            partition_by: PartitionBy::Hour,
            indexed: Vec::new(),
        },
        false,
    )
    .unwrap();
    let mut ing = Ingestor::new(db.clone(), IngestOptions::default());
    let results = ingest(
        &mut ing,
        "t,s=a v=1i,n=5i 1000\n\
         t,s=b v=\"text\",n=6i 2000\n\
         t,s=c v=2.5,n=99999999999i 3000\n\
         t v=3,ts=4i 4000\n\
         t,s=d v=4 not-a-timestamp\n\
         t,s=e v=5 5000",
    );
    assert!(results[0].is_ok());
    assert!(
        results[1]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("cannot store a string in a DOUBLE column")
    );
    assert!(
        results[2]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("out of range for INT")
    );
    assert!(
        results[3]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("designated timestamp")
    );
    assert!(
        matches!(results[4], Err(IngestError::Syntax(_))),
        "{:?}",
        results[4]
    );
    assert!(results[5].is_ok());
    assert_eq!(ing.flush().unwrap(), 2);
    let s = db.table("t").unwrap().snapshot();
    assert_eq!(s.row_count(), 2);
    let v = s.read_column(0, 1, 0..2).unwrap();
    assert_eq!(
        v.as_primitive::<Float64Type>().values().to_vec(),
        vec![1.0, 5.0]
    );
    assert_eq!(ing.stats().lines_rejected, 4);
}

#[test]
fn precision_and_commit_by_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let options = IngestOptions {
        commit_rows: 10,
        ..IngestOptions::default()
    };
    let mut ing = Ingestor::new(db.clone(), options);
    for i in 0..25 {
        ing.ingest_line(
            format!("m v={i} {}", 1_451_606_400 + i).as_bytes(),
            Precision::Seconds,
            0,
        )
        .unwrap();
    }
    // Rows go to the sink one by one (commit_rows / 8); at 10 pending it commits all but the
    // newest quarter: 8 at the 10th line, 8 more at the 18th, leaving 9 pending.
    assert_eq!(db.table("m").unwrap().snapshot().row_count(), 16);
    assert_eq!(ing.pending_rows(), 0);
    assert_eq!(ing.flush().unwrap(), 9);
    assert_eq!(db.table("m").unwrap().snapshot().row_count(), 25);
    let s = db.table("m").unwrap().snapshot();
    let ts = s.read_column(0, 0, 0..1).unwrap();
    assert_eq!(
        ts.as_primitive::<TimestampNanosecondType>().value(0),
        1_451_606_400_000_000_000
    );
}
