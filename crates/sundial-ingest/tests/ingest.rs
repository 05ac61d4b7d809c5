//! Lines in, committed rows out: tables and columns on the fly, types, rejections.

use std::sync::Arc;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, TimestampNanosecondType};
use sundial_ilp::Precision;
use sundial_ingest::{IngestError, IngestOptions, Ingestor};
use sundial_storage::{
    ColumnType, Database, Durability, PartitionBy, StorageOptions, TIMESTAMP_END_NS,
    TIMESTAMP_MIN_NS, TableDef,
};

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
            dedup_keys: Vec::new(),
            ttl: None,
            cold_after: None,
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
    // Rows go to the sink one by one (commit_rows / 8); whenever 10 or more are pending a
    // commit thread commits them (how many each commit takes depends on when the thread
    // runs). So, once the commit threads are done, fewer than 10 are pending: at least 16 of
    // the 25 went without a flush, the rest go with it.
    let rows = || db.table("m").unwrap().snapshot().row_count();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while rows() < 16 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} rows committed by volume",
            rows()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let committed = rows();
    assert_eq!(ing.pending_rows(), 0);
    // A commit thread may still be committing when the flush starts: the flush takes at most
    // what was left.
    assert!(ing.flush().unwrap() <= 25 - committed);
    assert_eq!(db.table("m").unwrap().snapshot().row_count(), 25);
    let s = db.table("m").unwrap().snapshot();
    let ts = s.read_column(0, 0, 0..1).unwrap();
    assert_eq!(
        ts.as_primitive::<TimestampNanosecondType>().value(0),
        1_451_606_400_000_000_000
    );
}

/// The message of a rejected line, or `"ok"`.
fn outcome(ing: &mut Ingestor, line: &str, precision: Precision) -> String {
    match ing.ingest_line(line.as_bytes(), precision, 42) {
        Ok(()) => "ok".into(),
        Err(e) => e.to_string(),
    }
}

fn committed_timestamps(db: &Database, table: &str) -> Vec<i64> {
    let s = db.table(table).unwrap().snapshot();
    let mut out = Vec::new();
    for (p, partition) in s.partitions().iter().enumerate() {
        let ts = s.read_column(p, 0, 0..partition.row_count).unwrap();
        out.extend_from_slice(ts.as_primitive::<TimestampNanosecondType>().values());
    }
    assert_eq!(out.len() as u64, s.row_count());
    out
}

#[test]
fn designated_timestamps_outside_the_storage_range_are_rejected_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let mut ing = Ingestor::new(db.clone(), IngestOptions::default());
    let (min, end) = (TIMESTAMP_MIN_NS, TIMESTAMP_END_NS);
    let end_s = end / 1_000_000_000;
    let min_s = min / 1_000_000_000;
    let cases: Vec<(i64, Precision, bool)> = vec![
        (i64::MAX, Precision::Nanos, false),
        (i64::MIN, Precision::Nanos, false),
        (min, Precision::Nanos, true),
        (min - 1, Precision::Nanos, false),
        (end - 1, Precision::Nanos, true),
        (end, Precision::Nanos, false),
        (end_s - 1, Precision::Seconds, true),
        (end_s, Precision::Seconds, false),
        (min_s, Precision::Seconds, true),
        (min_s - 1, Precision::Seconds, false),
        (end / 1_000_000 - 1, Precision::Millis, true),
        (end / 1_000_000, Precision::Millis, false),
        (end / 1_000 - 1, Precision::Micros, true),
        (end / 1_000, Precision::Micros, false),
        // The conversion to nanoseconds overflows i64 (and must not wrap into the range).
        (i64::MAX, Precision::Seconds, false),
        (i64::MIN, Precision::Millis, false),
        (i64::MAX / 1_000 + 1, Precision::Micros, false),
        (18_446_744_074, Precision::Seconds, false), // wraps to 0.7 s after the epoch
    ];
    let mut want = Vec::new();
    for (value, precision, accepted) in &cases {
        let line = format!("cpu,host=a usage=1 {value}");
        let got = outcome(&mut ing, &line, *precision);
        if *accepted {
            assert_eq!(got, "ok", "{value} {precision:?}");
            want.push(precision.to_nanos(*value).unwrap());
        } else {
            assert_eq!(
                got,
                format!(
                    "timestamp {value} (precision {}) is out of range: timestamps must be from \
                     1678-01-01T00:00:00Z (inclusive) to 2262-01-01T00:00:00Z (exclusive)",
                    precision.unit()
                ),
                "{value} {precision:?}"
            );
        }
    }
    assert_eq!(ing.flush().unwrap(), want.len() as u64);
    want.sort();
    assert_eq!(committed_timestamps(&db, "cpu"), want);
    assert_eq!(
        ing.stats().lines_rejected,
        (cases.len() - want.len()) as u64
    );
}

#[test]
fn timestamp_fields_outside_the_storage_range_are_rejected_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let mut ing = Ingestor::new(db.clone(), IngestOptions::default());
    let (min, end) = (TIMESTAMP_MIN_NS, TIMESTAMP_END_NS);
    let cases: Vec<(String, bool)> = vec![
        (format!("{}n", i64::MAX), false),
        (format!("{}n", i64::MIN), false),
        (format!("{}t", i64::MAX), false),
        (format!("{}t", i64::MIN), false),
        (format!("{}t", i64::MAX / 1_000 + 1), false),
        (format!("{min}n"), true),
        (format!("{}n", min - 1), false),
        (format!("{}n", end - 1), true),
        (format!("{end}n"), false),
        (format!("{}t", end / 1_000 - 1), true),
        (format!("{}t", end / 1_000), false),
        (format!("{}t", min / 1_000), true),
        (format!("{}t", min / 1_000 - 1), false),
    ];
    let mut accepted = 0;
    for (i, (value, ok)) in cases.iter().enumerate() {
        let line = format!(
            "ev,k=a at={value} {}",
            1_451_606_400_000_000_000i64 + i as i64
        );
        let got = outcome(&mut ing, &line, Precision::Nanos);
        if *ok {
            assert_eq!(got, "ok", "{value}");
            accepted += 1;
        } else {
            assert_eq!(
                got,
                format!(
                    "field 'at': timestamp {value} is out of range: timestamps must be from \
                     1678-01-01T00:00:00Z (inclusive) to 2262-01-01T00:00:00Z (exclusive)"
                ),
            );
        }
    }
    assert_eq!(ing.flush().unwrap(), accepted);
    assert_eq!(db.table("ev").unwrap().snapshot().row_count(), accepted);
}

#[test]
fn a_bad_timestamp_in_a_batch_costs_only_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let options = IngestOptions {
        commit_rows: 8,
        ..IngestOptions::default()
    };
    let mut ing = Ingestor::new(db.clone(), options);
    let base = 1_451_606_400_000_000_000i64;
    let mut want = Vec::new();
    // Batches of good lines with a bad one in each, well past several commits.
    for i in 0..40i64 {
        let ts = base + i * 10_000_000_000;
        let line = match i % 10 {
            3 => format!("cpu,host=h{i} usage=1 {}", i64::MAX),
            7 => format!("cpu,host=h{i} usage=1 {}", i64::MIN),
            _ => {
                want.push(ts);
                format!("cpu,host=h{i} usage=1 {ts}")
            }
        };
        let bad = i % 10 == 3 || i % 10 == 7;
        assert_eq!(
            ing.ingest_line(line.as_bytes(), Precision::Nanos, 42)
                .is_err(),
            bad,
            "{line}"
        );
    }
    ing.flush().unwrap();
    assert_eq!(committed_timestamps(&db, "cpu"), want);
    // Later rows for the table still go in.
    ing.ingest_line(
        format!("cpu,host=z usage=2 {}", base - 1).as_bytes(),
        Precision::Nanos,
        0,
    )
    .unwrap();
    assert_eq!(ing.flush().unwrap(), 1);
    assert_eq!(
        db.table("cpu").unwrap().snapshot().row_count(),
        want.len() as u64 + 1
    );
}

/// A receiver lets go of a table DROP TABLE dropped at its next timer call, idle or not, so
/// that the table's directory goes; its next lines for the name create a new table.
#[test]
fn a_receiver_lets_go_of_a_dropped_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(dir.path());
    let mut ing = Ingestor::new(db.clone(), IngestOptions::default());
    let lines: String = (0..100)
        .map(|i| format!("gone,k=a v={i}i {}\n", 1_451_606_400_000_000_000i64 + i))
        .collect();
    assert!(ingest(&mut ing, &lines).iter().all(Result::is_ok));
    assert_eq!(ing.flush().unwrap(), 100);
    let old = db.table("gone").unwrap();
    let path = old.path().to_path_buf();
    drop(old);
    db.drop_table("gone").unwrap();
    assert!(
        path.exists(),
        "the receiver and its sink still hold the table"
    );
    // The receiver's timer, with nothing sent since.
    ing.flush_due(std::time::Instant::now()).unwrap();
    assert!(!path.exists(), "{} is still on disk", path.display());
    // The same receiver's next lines (of a series it knew) make a new table.
    assert!(
        ingest(&mut ing, "gone,k=a v=7i 1451606400000000001")
            .iter()
            .all(Result::is_ok)
    );
    assert_eq!(ing.flush().unwrap(), 1);
    let new = db.table("gone").unwrap();
    assert_ne!(new.path(), path);
    assert_eq!(new.snapshot().row_count(), 1);
}
