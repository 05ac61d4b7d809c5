//! Designated timestamps across the whole range a table holds: before 1970 (negative
//! nanoseconds), around 0, at the range's ends, and outside it (rejected, changing nothing).

mod common;

use common::*;
use sundial_storage::{
    Database, PartitionBy, StorageError, TIMESTAMP_END_NS, TIMESTAMP_MIN_NS, TableDef,
};

const ALL: [PartitionBy; 6] = PartitionBy::ALL;

fn def(partition_by: PartitionBy) -> TableDef {
    TableDef {
        name: "t".into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    }
}

fn row(ts: i64, serial: u64) -> Row {
    random_row(&mut Rng(serial + 1), 0, serial).with_ts(ts)
}

trait WithTs {
    fn with_ts(self, ts: i64) -> Row;
}

impl WithTs for Row {
    fn with_ts(mut self, ts: i64) -> Row {
        self.ts = ts;
        self
    }
}

/// Every committed partition's rows lie inside it, partitions ascend, and the rows read back
/// are the model's, sorted by timestamp.
#[track_caller]
fn check(table: &sundial_storage::Table, model: &[Row], context: &str) {
    let snapshot = table.snapshot();
    let p = snapshot.meta().partition_by;
    let mut previous = None;
    for part in snapshot.partitions() {
        if p != PartitionBy::None {
            assert!(
                p.floor(part.min_ts) == part.key && p.floor(part.max_ts) == part.key,
                "{context}: partition {} holds {}..={}",
                p.dir_name(part.key),
                part.min_ts,
                part.max_ts
            );
        }
        // Parts of one partition share its key and follow each other in time.
        assert!(
            previous.is_none_or(
                |(key, max_ts)| key < part.key || (key == part.key && max_ts <= part.min_ts)
            ),
            "{context}: partitions out of order"
        );
        previous = Some((part.key, part.max_ts));
    }
    assert_rows(&read_all(&snapshot), &expected(model), context);
}

/// Timestamps from 1678 to 2261, most before 1970, with several around 0.
fn spread_timestamps() -> Vec<i64> {
    const YEAR_NS: i64 = 365 * 24 * HOUR_NS;
    let mut out = vec![
        TIMESTAMP_MIN_NS,
        TIMESTAMP_MIN_NS + 1,
        -HOUR_NS - 1,
        -HOUR_NS,
        -2,
        -1,
        0,
        1,
        HOUR_NS - 1,
        TIMESTAMP_END_NS - 1,
    ];
    let mut rng = Rng(77);
    for _ in 0..60 {
        out.push(-(rng.below(290 * YEAR_NS as u64) as i64));
    }
    for _ in 0..10 {
        out.push(rng.below(290 * YEAR_NS as u64) as i64);
    }
    out
}

#[test]
fn rows_before_1970_partition_and_sort_correctly_in_every_partitioning() {
    for p in ALL {
        let dir = tempfile::tempdir().unwrap();
        let mut model = Vec::new();
        {
            let db = Database::open(dir.path(), options()).unwrap();
            let table = db.create_table(def(p), false).unwrap();
            let mut w = table.writer().unwrap();
            let stamps = spread_timestamps();
            // One unsorted batch, then the same timestamps again in two halves, reversed: out
            // of order against the committed partitions.
            let first: Vec<Row> = stamps
                .iter()
                .enumerate()
                .map(|(i, t)| row(*t, i as u64))
                .collect();
            w.append(&batch(&first)).unwrap();
            w.commit().unwrap();
            model.extend(first);
            let mut again: Vec<Row> = stamps
                .iter()
                .rev()
                .enumerate()
                .map(|(i, t)| row(*t, 1000 + i as u64))
                .collect();
            let second = again.split_off(again.len() / 2);
            for part in [again, second] {
                w.append(&batch(&part)).unwrap();
                w.commit().unwrap();
                model.extend(part);
            }
            check(&table, &model, &format!("{p:?}"));
        }
        // Reopen: the pre-1970 partition directories are found again and hold the same rows.
        let db = Database::open(dir.path(), options()).unwrap();
        let table = db.table("t").unwrap();
        check(&table, &model, &format!("{p:?} reopened"));
        let mut w = table.writer().unwrap();
        let more = vec![row(-1, 5000), row(0, 5001), row(-HOUR_NS, 5002)];
        w.append(&batch(&more)).unwrap();
        w.commit().unwrap();
        model.extend(more);
        check(&table, &model, &format!("{p:?} appended after reopening"));
    }
}

#[test]
fn rows_at_minus_one_and_zero_keep_timestamp_order() {
    for p in ALL {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), options()).unwrap();
        let table = db.create_table(def(p), false).unwrap();
        let mut w = table.writer().unwrap();
        let mut model = Vec::new();
        for (serial, ts) in [0, -1, 0, -1, 1, -2].into_iter().enumerate() {
            let r = vec![row(ts, serial as u64)];
            w.append(&batch(&r)).unwrap();
            w.commit().unwrap();
            model.extend(r);
        }
        check(&table, &model, &format!("{p:?}"));
        let keys: Vec<i64> = table
            .snapshot()
            .partitions()
            .iter()
            .map(|p| p.key)
            .collect();
        match p {
            PartitionBy::None => assert_eq!(keys, [0]),
            // 1969-12-29 (a Monday) to 1970-01-04 is one ISO week: 1970-W01.
            PartitionBy::Week => assert_eq!(keys, [p.floor(0)], "{p:?}"),
            _ => {
                assert_eq!(keys.len(), 2, "{p:?}: -1 and 0 are in different partitions");
                assert!(keys[0] < 0 && keys[1] == 0, "{p:?}: {keys:?}");
            }
        }
    }
}

#[test]
fn timestamps_outside_the_range_are_rejected_and_change_nothing() {
    for p in ALL {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), options()).unwrap();
        let table = db.create_table(def(p), false).unwrap();
        let mut w = table.writer().unwrap();
        let good = vec![
            row(TIMESTAMP_MIN_NS, 0),
            row(TIMESTAMP_END_NS - 1, 1),
            row(0, 2),
        ];
        w.append(&batch(&good)).unwrap();
        w.commit().unwrap();
        let before = read_all(&table.snapshot());
        let seq = table.snapshot().seq();
        for bad in [
            i64::MAX,
            i64::MIN,
            TIMESTAMP_END_NS,
            TIMESTAMP_MIN_NS - 1,
            i64::MIN + 1,
        ] {
            for rows in [
                vec![row(bad, 10)],
                vec![row(5, 11), row(bad, 12), row(-5, 13)],
            ] {
                let err = w.append(&batch(&rows)).unwrap_err();
                assert!(
                    matches!(err, StorageError::InvalidInput(_)),
                    "{p:?} {bad}: {err:?}"
                );
                let text = err.to_string();
                assert!(
                    text.contains(&bad.to_string()) && text.contains("'ts'"),
                    "{p:?}: the message names the value and the column: {text}"
                );
                assert!(text.contains("1678-01-01"), "{text}");
                assert_eq!(w.pending_rows(), 0, "{p:?} {bad}: nothing pending");
                w.commit().unwrap();
                assert_eq!(
                    table.snapshot().seq(),
                    seq,
                    "{p:?} {bad}: nothing committed"
                );
                assert_eq!(read_all(&table.snapshot()), before);
            }
        }
        // The bounds themselves: the first nanosecond is accepted, the end is not.
        let edge = vec![row(TIMESTAMP_MIN_NS, 20), row(TIMESTAMP_END_NS - 1, 21)];
        w.append(&batch(&edge)).unwrap();
        w.commit().unwrap();
        let mut model = good.clone();
        model.extend(edge);
        check(&table, &model, &format!("{p:?} bounds"));
        drop(w);
        drop(table);
        drop(db);
        let db = Database::open(dir.path(), options()).unwrap();
        check(
            &db.table("t").unwrap(),
            &model,
            &format!("{p:?} bounds reopened"),
        );
    }
}

/// A TIMESTAMP column that is not the designated one holds the same range.
#[test]
fn other_timestamp_columns_are_checked_too() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let mut cols = columns();
    cols.push(("at".into(), sundial_storage::ColumnType::Timestamp));
    let table = db
        .create_table(
            TableDef {
                columns: cols,
                ..def(PartitionBy::Day)
            },
            false,
        )
        .unwrap();
    let mut w = table.writer().unwrap();
    let stamps = |v: Vec<Option<i64>>| {
        let ts = arrow_array::TimestampNanosecondArray::from(vec![0i64; v.len()]);
        let at = arrow_array::TimestampNanosecondArray::from(v);
        arrow_array::RecordBatch::try_from_iter([
            ("ts", std::sync::Arc::new(ts) as arrow_array::ArrayRef),
            ("at", std::sync::Arc::new(at) as arrow_array::ArrayRef),
        ])
        .unwrap()
    };
    w.append(&stamps(vec![Some(-1), None, Some(TIMESTAMP_MIN_NS)]))
        .unwrap();
    let err = w
        .append(&stamps(vec![Some(1), Some(i64::MAX)]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("'at'") && err.contains(&i64::MAX.to_string()),
        "{err}"
    );
    w.commit().unwrap();
    assert_eq!(
        table.snapshot().row_count(),
        0,
        "a failed append discards the batch and the rows pending before it"
    );
    w.append(&stamps(vec![Some(-1), None])).unwrap();
    w.commit().unwrap();
    assert_eq!(table.snapshot().row_count(), 2);
}

/// Timestamps in coarser units are checked after conversion to nanoseconds, including those
/// whose conversion would overflow `i64`.
#[test]
fn timestamps_in_other_units_are_checked_in_nanoseconds() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.create_table(def(PartitionBy::Day), false).unwrap();
    let mut w = table.writer().unwrap();
    let micros = |v: i64| {
        let ts = arrow_array::TimestampMicrosecondArray::from(vec![v]);
        arrow_array::RecordBatch::try_from_iter([(
            "ts",
            std::sync::Arc::new(ts) as arrow_array::ArrayRef,
        )])
        .unwrap()
    };
    for bad in [
        i64::MAX,
        i64::MIN,
        TIMESTAMP_END_NS / 1000,
        TIMESTAMP_MIN_NS / 1000 - 1,
    ] {
        let err = w.append(&micros(bad)).unwrap_err().to_string();
        assert!(
            err.contains(&bad.to_string()) && err.contains("'ts'") && err.contains("2262"),
            "{err}"
        );
    }
    w.append(&micros(TIMESTAMP_MIN_NS / 1000)).unwrap();
    w.append(&micros(-1)).unwrap();
    w.commit().unwrap();
    let ts: Vec<i64> = read_all(&table.snapshot()).iter().map(|r| r.ts).collect();
    assert_eq!(ts, [TIMESTAMP_MIN_NS, -1000]);
}
