//! The storage engine against a simple model: random appends (in order and out of order),
//! NULLs, symbols, schema changes and reopening.

mod common;

use common::*;
use sundial_storage::{ColumnType, Database, PartitionBy, TableDef};

fn def(name: &str, partition_by: PartitionBy) -> TableDef {
    TableDef {
        name: name.into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    }
}

#[test]
fn random_appends_match_the_model_across_reopens() {
    for (seed, partition_by) in [
        (1u64, PartitionBy::Hour),
        (2, PartitionBy::Day),
        (3, PartitionBy::None),
        (4, PartitionBy::Hour),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Rng(seed * 7919);
        let mut model: Vec<Row> = Vec::new();
        let mut serial = 0;
        let base = 1_451_606_400_000_000_000i64; // 2016-01-01
        for round in 0..4 {
            let db = Database::open(dir.path(), options()).unwrap();
            let table = db.create_table(def("t", partition_by), true).unwrap();
            assert_rows(
                &read_all(&table.snapshot()),
                &expected(&model),
                &format!("seed {seed} reopen {round}"),
            );
            let mut w = table.writer().unwrap();
            let mut uncommitted = Vec::new();
            for _ in 0..8 {
                let n = 1 + rng.below(300) as usize;
                // Mostly moving forward in time, sometimes far back (out of order).
                let start =
                    base + round * 2 * HOUR_NS + if rng.chance(30) { -HOUR_NS * 3 } else { 0 };
                let rows: Vec<Row> = (0..n)
                    .map(|_| {
                        serial += 1;
                        random_row(&mut rng, start, serial)
                    })
                    .collect();
                w.append(&batch(&rows)).unwrap();
                uncommitted.extend(rows);
                if rng.chance(20) {
                    w.rollback();
                    uncommitted.clear();
                } else if rng.chance(60) {
                    w.commit().unwrap();
                    model.append(&mut uncommitted);
                }
            }
            w.commit().unwrap();
            model.append(&mut uncommitted);
            assert_rows(
                &read_all(&table.snapshot()),
                &expected(&model),
                &format!("seed {seed} round {round}"),
            );
        }
    }
}

/// Sorted runs that overlap in time, appended together (`append_all`, as the ingestion sink
/// hands over several senders' rows), land in timestamp order after the rows committed before,
/// equal timestamps in the order of the runs, and never rewrite a committed part.
#[test]
fn overlapping_runs_appended_together_land_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.create_table(def("t", PartitionBy::Day), false).unwrap();
    let mut rng = Rng(4242);
    let (mut model, mut serial) = (Vec::new(), 0);
    let base = 1_451_606_400_000_000_000i64; // 2016-01-01
    let mut w = table.writer().unwrap();
    for round in 0..30 {
        let start = base + round * HOUR_NS;
        let runs: Vec<Vec<Row>> = (0..1 + rng.below(5))
            .map(|_| {
                let mut run: Vec<Row> = (0..rng.below(200))
                    .map(|_| {
                        serial += 1;
                        let mut row = random_row(&mut rng, start, serial);
                        // Few distinct times, so runs share timestamps.
                        row.ts = start + rng.below(50) as i64 * (HOUR_NS / 50);
                        row
                    })
                    .collect();
                run.sort_by_key(|r| r.ts);
                run
            })
            .collect();
        let parts_before: Vec<(i64, u64)> = table
            .snapshot()
            .partitions()
            .iter()
            .map(|p| (p.key, p.version))
            .collect();
        let batches: Vec<_> = runs.iter().map(|r| batch(r)).collect();
        w.append_all(&batches).unwrap();
        w.commit().unwrap();
        model.extend(runs.into_iter().flatten());
        let parts_after: Vec<(i64, u64)> = table
            .snapshot()
            .partitions()
            .iter()
            .map(|p| (p.key, p.version))
            .collect();
        for part in &parts_before {
            assert!(
                parts_after.contains(part),
                "round {round}: part {part:?} was rewritten: {parts_after:?}"
            );
        }
        let mut keys: Vec<i64> = parts_after.iter().map(|(key, _)| *key).collect();
        keys.dedup();
        assert_eq!(
            keys.len(),
            parts_after.len(),
            "a partition was split into parts"
        );
    }
    assert_rows(&read_all(&table.snapshot()), &expected(&model), "runs");
}

/// Late rows near the end of a large partition rewrite only its tail: the partition becomes a
/// few parts in time order, the oldest never rewritten, and every row reads back as the model
/// says through column additions and reopening.
#[test]
fn late_rows_rewrite_only_the_tail_of_a_partition() {
    const SECOND_NS: i64 = 1_000_000_000;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x7a11);
    let base = 1_451_606_400_000_000_000i64; // 2016-01-01
    let mut model = Vec::new();
    let mut serial = 0;
    let mut row_at = |rng: &mut Rng, ts: i64| {
        serial += 1;
        let mut row = random_row(rng, 0, serial);
        row.ts = ts;
        row
    };
    let first: Vec<Row> = (0..20_000)
        .map(|i| row_at(&mut rng, base + i * SECOND_NS))
        .collect();
    let mut newest = base + 19_999 * SECOND_NS;
    let mut db = Database::open(dir.path(), options()).unwrap();
    let mut table = db.create_table(def("t", PartitionBy::Day), false).unwrap();
    let mut w = table.writer().unwrap();
    w.append(&batch(&first)).unwrap();
    w.commit().unwrap();
    model.extend(first);
    let oldest_version = table.snapshot().partitions()[0].version;
    let mut most_parts = 1;
    for round in 0..300 {
        if round == 100 {
            w.add_column("extra", ColumnType::Long).unwrap();
        }
        if round == 200 {
            drop(w);
            drop(table);
            drop(db);
            db = Database::open(dir.path(), options()).unwrap();
            table = db.table("t").unwrap();
            w = table.writer().unwrap();
        }
        // Up to 100 seconds late, and some rows ahead.
        let rows: Vec<Row> = (0..50)
            .map(|_| {
                let ts = newest - rng.below(100) as i64 * SECOND_NS + SECOND_NS;
                row_at(&mut rng, ts)
            })
            .collect();
        newest = newest.max(rows.iter().map(|r| r.ts).max().unwrap());
        w.append(&batch(&rows)).unwrap();
        w.commit().unwrap();
        model.extend(rows);
        let snapshot = table.snapshot();
        let parts = snapshot.partitions();
        most_parts = most_parts.max(parts.len());
        assert!(parts.len() <= 16, "round {round}: {} parts", parts.len());
        assert!(parts.iter().all(|p| p.key == parts[0].key));
        assert!(parts.windows(2).all(|p| p[0].max_ts <= p[1].min_ts));
        assert_eq!(
            parts[0].version, oldest_version,
            "round {round}: oldest part rewritten"
        );
        assert!(
            parts[0].row_count >= 19_000,
            "round {round}: {:?}",
            parts[0]
        );
    }
    assert!(most_parts > 2, "the merges made {most_parts} parts");
    let snapshot = table.snapshot();
    assert_rows(&read_all(&snapshot), &expected(&model), "after the merges");
    let extra = snapshot.meta().column_index("extra").unwrap();
    for (p, part) in snapshot.partitions().iter().enumerate() {
        let values = snapshot.read_column(p, extra, 0..part.row_count).unwrap();
        assert_eq!(values.null_count(), part.row_count as usize);
    }
    drop(w);
    drop(table);
    drop(db);
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.table("t").unwrap();
    assert_rows(&read_all(&table.snapshot()), &expected(&model), "reopened");
    // Only the live parts' directories remain.
    let dirs = std::fs::read_dir(table.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("2016")
        })
        .count();
    assert_eq!(dirs, table.snapshot().partitions().len());
}

#[test]
fn uncommitted_rows_are_invisible_and_rollback_forgets_symbols() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.create_table(def("t", PartitionBy::Day), false).unwrap();
    let mut rng = Rng(42);
    let rows: Vec<Row> = (0..10).map(|i| random_row(&mut rng, 0, i)).collect();
    let mut w = table.writer().unwrap();
    w.append(&batch(&rows)).unwrap();
    assert_eq!(table.snapshot().row_count(), 0);
    drop(w);
    assert_eq!(table.snapshot().row_count(), 0);
    let mut w = table.writer().unwrap();
    w.commit().unwrap();
    assert_eq!(table.snapshot().row_count(), 0);
    assert_eq!(
        arrow_array::Array::len(table.snapshot().symbols(1).unwrap().as_ref()),
        0
    );
    w.append(&batch(&rows)).unwrap();
    w.commit().unwrap();
    assert_eq!(read_all(&table.snapshot()), expected(&rows));
}

#[test]
fn schema_changes_keep_rows_and_read_new_columns_as_null() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(9);
    let rows: Vec<Row> = (0..50).map(|i| random_row(&mut rng, 0, i)).collect();
    {
        let db = Database::open(dir.path(), options()).unwrap();
        let table = db
            .create_table(
                TableDef {
                    name: "t".into(),
                    columns: vec![
                        ("ts".into(), ColumnType::Timestamp),
                        ("d".into(), ColumnType::Double),
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
        let mut w = table.writer().unwrap();
        let only_ts_d = batch(&rows).project(&[0, 5]).unwrap();
        w.append(&only_ts_d).unwrap();
        w.commit().unwrap();
        w.add_column("sym", ColumnType::Symbol).unwrap();
        w.add_column("v", ColumnType::Long).unwrap();
        w.add_column("s", ColumnType::Varchar).unwrap();
        w.add_column("b", ColumnType::Boolean).unwrap();
        assert!(w.add_column("B", ColumnType::Long).is_err());
        let more: Vec<Row> = (50..80).map(|i| random_row(&mut rng, 0, i)).collect();
        w.append(&batch(&more)).unwrap();
        w.commit().unwrap();
        let mut model: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                sym: None,
                v: None,
                s: None,
                b: None,
                ..r.clone()
            })
            .collect();
        model.extend(more);
        assert_eq!(read_all(&table.snapshot()), expected(&model));
        w.rename_column("v", "value").unwrap();
        w.drop_column("s").unwrap();
        assert!(w.drop_column("ts").is_err());
        w.set_column_indexed("sym", true).unwrap();
        assert!(
            w.set_column_indexed("sym", true).is_err(),
            "already indexed"
        );
        assert!(w.set_column_indexed("value", true).is_err(), "not a SYMBOL");
        drop(w);
        let meta = table.meta();
        let names: Vec<_> = meta.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["ts", "d", "sym", "value", "b"]);
    }
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.table("T").unwrap();
    let indexed: Vec<_> = table.meta().columns.iter().map(|c| c.indexed).collect();
    assert_eq!(
        indexed,
        [false, false, true, false, false],
        "the flag survives reopening"
    );
    table
        .writer()
        .unwrap()
        .set_column_indexed("SYM", false)
        .unwrap();
    assert!(!table.meta().columns[2].indexed);
    assert_eq!(table.snapshot().row_count(), 80);
    db.rename_table("t", "t2").unwrap();
    assert!(db.table("t").is_none());
    let mut w = db.table("t2").unwrap().writer().unwrap();
    let keys: Vec<i64> = w
        .table()
        .snapshot()
        .partitions()
        .iter()
        .map(|p| p.key)
        .collect();
    assert_eq!(w.drop_partitions(&keys[..1]).unwrap(), 1);
    w.truncate().unwrap();
    assert_eq!(w.table().snapshot().row_count(), 0);
    drop(w);
    db.drop_table("t2").unwrap();
    assert!(db.table_names().is_empty());
    drop(table);
    drop(db);
    let db = Database::open(dir.path(), options()).unwrap();
    assert!(db.table_names().is_empty());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "only the lock file remains: {left:?}");
}

#[test]
fn second_process_open_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let _db = Database::open(dir.path(), options()).unwrap();
    // flock locks belong to the open file description, so a second open in this process
    // conflicts just as another process would.
    let err = Database::open(dir.path(), options())
        .unwrap_err()
        .to_string();
    assert!(err.contains("locked"), "{err}");
}

#[test]
fn bad_input_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    assert!(
        db.create_table(
            TableDef {
                name: "a/b".into(),
                ..def("x", PartitionBy::Day)
            },
            false
        )
        .is_err()
    );
    assert!(
        db.create_table(
            TableDef {
                timestamp: Some("d".into()),
                ..def("x", PartitionBy::Day)
            },
            false
        )
        .is_err()
    );
    assert!(
        db.create_table(
            TableDef {
                timestamp: None,
                ..def("x", PartitionBy::Day)
            },
            false
        )
        .is_err()
    );
    let table = db.create_table(def("t", PartitionBy::Day), false).unwrap();
    let mut w = table.writer().unwrap();
    let good: Vec<Row> = (0..5).map(|i| random_row(&mut Rng(5), 0, i)).collect();
    w.append(&batch(&good)).unwrap();
    // A batch with a column the table lacks fails, and discards the pending rows too.
    let bad = batch(&good);
    let renamed = arrow_array::RecordBatch::try_new(
        std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "nope",
            arrow_schema::DataType::Int64,
            true,
        )])),
        vec![bad.column(2).clone()],
    )
    .unwrap();
    assert!(w.append(&renamed).is_err());
    w.commit().unwrap();
    assert_eq!(table.snapshot().row_count(), 0);
}

#[test]
fn reopening_deletes_the_files_of_dropped_columns() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Row> = (0..20).map(|i| random_row(&mut Rng(11), 0, i)).collect();
    let table_dir = {
        let db = Database::open(dir.path(), options()).unwrap();
        let table = db.create_table(def("t", PartitionBy::None), false).unwrap();
        let mut w = table.writer().unwrap();
        w.append(&batch(&rows)).unwrap();
        w.commit().unwrap();
        w.drop_column("sym").unwrap();
        w.drop_column("s").unwrap();
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.is_dir())
            .unwrap()
    };
    let files = |sub: &str| -> Vec<String> {
        let mut all = Vec::new();
        for e in std::fs::read_dir(&table_dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && p.file_name().unwrap().to_string_lossy().starts_with(sub) {
                all.extend(
                    std::fs::read_dir(&p)
                        .unwrap()
                        .map(|f| f.unwrap().file_name().to_string_lossy().into_owned()),
                );
            }
        }
        all.sort();
        all
    };
    // Column ids: ts 0, sym 1, v 2, s 3, b 4, d 5.
    assert!(files("_sym").contains(&"1.d".to_string()));
    let db = Database::open(dir.path(), options()).unwrap();
    assert!(files("_sym").is_empty(), "{:?}", files("_sym"));
    let partition = files("default");
    assert!(
        partition
            .iter()
            .all(|f| !f.starts_with("1.") && !f.starts_with("3.")),
        "{partition:?}"
    );
    assert_eq!(db.table("t").unwrap().snapshot().row_count(), 20);
}

/// Each state an interrupted CREATE or DROP TABLE can leave opens as if the statement had not
/// started or had finished, with nothing left behind.
#[test]
fn interrupted_create_and_drop_are_finished_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Row> = (0..40).map(|i| random_row(&mut Rng(3), 0, i)).collect();
    let table_dirs = |names: &[&str]| -> Vec<std::path::PathBuf> {
        names
            .iter()
            .map(|n| {
                let db = Database::open(dir.path(), options()).unwrap();
                let t = db.create_table(def(n, PartitionBy::Hour), false).unwrap();
                let mut w = t.writer().unwrap();
                w.append(&batch(&rows)).unwrap();
                w.commit().unwrap();
                t.path().to_path_buf()
            })
            .collect()
    };
    let dirs = table_dirs(&["dropped_mid_delete", "no_slots", "kept"]);
    {
        // DROP committed, then killed while deleting: a snapshot that is never released keeps
        // the deletion from running; a partition's files are then removed by hand.
        let db = Database::open(dir.path(), options()).unwrap();
        let snapshot = db.table("dropped_mid_delete").unwrap().snapshot();
        db.drop_table("dropped_mid_delete").unwrap();
        std::mem::forget(snapshot);
    }
    let partition = std::fs::read_dir(&dirs[0])
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with('_'))
        .unwrap();
    std::fs::remove_dir_all(partition).unwrap();
    // What an interrupted DROP of earlier versions left: partitions without transaction slots.
    for slot in ["_txn.0", "_txn.1"] {
        std::fs::remove_file(dirs[1].join(slot)).unwrap();
    }
    // A DROP past its rename, and a CREATE before its rename.
    for leftover in [".dropped-77", ".creating-78"] {
        std::fs::create_dir_all(dir.path().join(leftover).join("2016-01-01T00.1")).unwrap();
        std::fs::write(dir.path().join(leftover).join("_txn.0"), b"x").unwrap();
    }
    let db = Database::open(dir.path(), options()).unwrap();
    assert_eq!(db.table_names(), ["kept"]);
    assert_eq!(
        read_all(&db.table("kept").unwrap().snapshot()),
        expected(&rows)
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let kept = dirs[2].file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(left, [".lock".to_string(), kept]);
    // New tables get ids past every leftover's.
    let t = db
        .create_table(def("new", PartitionBy::Day), false)
        .unwrap();
    assert!(
        t.path().to_string_lossy().ends_with("~79"),
        "{:?}",
        t.path()
    );
}

/// SYMBOLs arrive as dictionaries; one of only NULLs may have no values at all.
#[test]
fn symbols_as_dictionaries_including_all_null_ones() {
    use std::sync::Arc;

    use arrow_array::TimestampNanosecondArray;
    use arrow_array::types::Int32Type;
    use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};

    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    let table = db.create_table(def("t", PartitionBy::Day), false).unwrap();
    let dict = |keys: Vec<Option<i32>>, values: Vec<&str>| -> ArrayRef {
        Arc::new(
            DictionaryArray::<Int32Type>::try_new(
                Int32Array::from(keys),
                Arc::new(StringArray::from(values)),
            )
            .unwrap(),
        )
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
        Field::new(
            "sym",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
    ]));
    let ts = || -> ArrayRef { Arc::new(TimestampNanosecondArray::from(vec![1, 2, 3])) };
    let mut w = table.writer().unwrap();
    for sym in [
        dict(vec![None, None, None], vec![]),
        dict(vec![Some(1), None, Some(0)], vec!["a", "b"]),
    ] {
        w.append(&RecordBatch::try_new(schema.clone(), vec![ts(), sym]).unwrap())
            .unwrap();
    }
    w.commit().unwrap();
    let syms: Vec<Option<String>> = read_all(&table.snapshot())
        .into_iter()
        .map(|r| r.sym)
        .collect();
    let (a, b) = (Some("a".to_string()), Some("b".to_string()));
    assert_eq!(syms, vec![None, b, None, None, None, a]);
}
