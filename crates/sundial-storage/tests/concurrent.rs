//! Readers query while a writer commits: every snapshot is a whole number of commits, readable
//! in full, sorted, and readers never wait for the writer; also while out-of-order commits
//! merge into the middle of partitions and split them into parts.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampNanosecondType};
use common::*;
use sundial_storage::{Database, Durability, PartitionBy, StorageOptions, Table, TableDef};

const BATCH_ROWS: u64 = 500;
const BATCHES: u64 = 200;

/// A snapshot holds whole commits (each row has `v` = 1), every row readable, in timestamp
/// order within and across partitions.
fn check_snapshot(s: &sundial_storage::Snapshot) {
    let total = s.row_count();
    assert_eq!(total % BATCH_ROWS, 0, "partial commit visible");
    let mut sum = 0;
    let mut last_ts = i64::MIN;
    for (p, part) in s.partitions().iter().enumerate() {
        let v = s.read_column(p, 2, 0..part.row_count).unwrap();
        sum += v.as_primitive::<Int64Type>().iter().flatten().sum::<i64>();
        let ts = s.read_column(p, 0, 0..part.row_count).unwrap();
        for t in ts.as_primitive::<TimestampNanosecondType>().values() {
            assert!(*t >= last_ts, "partition {p}: {t} after {last_ts}");
            last_ts = *t;
        }
    }
    assert_eq!(sum as u64, total);
}

/// Runs `write` on a thread of its own while two readers check every snapshot they take
/// ([`check_snapshot`]) until it is done; returns what `write` returned.
fn write_while_reading<T: Send + 'static>(
    table: &Arc<Table>,
    write: impl FnOnce(&Arc<Table>) -> T + Send + 'static,
) -> T {
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (table, done) = (table.clone(), done.clone());
        std::thread::spawn(move || {
            let out = write(&table);
            done.store(true, Ordering::Release);
            out
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (table, done) = (table.clone(), done.clone());
            std::thread::spawn(move || {
                let mut checks = 0;
                while !done.load(Ordering::Acquire) || checks == 0 {
                    check_snapshot(&table.snapshot());
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    let out = writer.join().unwrap();
    for r in readers {
        assert!(r.join().unwrap() > 0, "a reader checked nothing");
    }
    out
}

fn table_in(dir: &std::path::Path) -> Arc<Table> {
    let db = Database::open(
        dir,
        StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        },
    )
    .unwrap();
    db.create_table(
        TableDef {
            name: "t".into(),
            columns: columns(),
            timestamp: Some("ts".into()),
            partition_by: PartitionBy::Hour,
            indexed: Vec::new(),
            dedup_keys: Vec::new(),
            ttl: None,
            cold_after: None,
        },
        false,
    )
    .unwrap()
}

#[test]
fn readers_see_whole_commits_while_late_rows_merge_into_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let table = table_in(dir.path());
    let (model, split) = write_while_reading(&table, |table| {
        let mut w = table.writer().unwrap();
        let mut rng = Rng(11);
        let mut model = Vec::new();
        let mut newest = 0i64;
        let mut split = false;
        for b in 0..BATCHES / 2 {
            // Most batches move time forward; every third lands in the last few minutes
            // stored (a merge of the newest partition's tail, which splits it into
            // parts), every seventh anywhere (merges from the middle of old partitions).
            let tail = b % 3 == 2;
            let anywhere = b % 7 == 6;
            let rows: Vec<Row> = (0..BATCH_ROWS)
                .map(|k| {
                    let mut r = random_row(&mut rng, 0, b * BATCH_ROWS + k);
                    r.ts = if anywhere {
                        rng.below(newest as u64 + 1) as i64
                    } else if tail {
                        (newest - rng.below(HOUR_NS as u64 / 20) as i64).max(0)
                    } else {
                        newest + rng.below(HOUR_NS as u64 / 4) as i64
                    };
                    r.v = Some(1);
                    r
                })
                .collect();
            newest = newest.max(rows.iter().map(|r| r.ts).max().unwrap_or(0));
            model.extend(rows.iter().cloned());
            w.append(&batch(&rows)).unwrap();
            w.commit().unwrap();
            split |= table
                .snapshot()
                .partitions()
                .windows(2)
                .any(|pair| pair[0].key == pair[1].key);
        }
        (model, split)
    });
    assert!(split, "no merge split a partition into parts");
    let snapshot = table.snapshot();
    assert!(
        snapshot.partitions().len() > 1,
        "the rows span one partition only"
    );
    assert_rows(
        &read_all(&snapshot),
        &expected(&model),
        "after the last commit",
    );
}

#[test]
fn readers_see_whole_commits_while_a_writer_appends() {
    let dir = tempfile::tempdir().unwrap();
    let table = table_in(dir.path());
    write_while_reading(&table, |table| {
        let mut w = table.writer().unwrap();
        let mut rng = Rng(3);
        for b in 0..BATCHES {
            let rows: Vec<Row> = (0..BATCH_ROWS)
                .map(|k| {
                    let mut r = random_row(&mut rng, 0, k);
                    r.ts = ((b * BATCH_ROWS + k) * 1_000_000_000) as i64;
                    r.v = Some(1);
                    r
                })
                .collect();
            w.append(&batch(&rows)).unwrap();
            w.commit().unwrap();
        }
    });
    assert_eq!(table.snapshot().row_count(), BATCH_ROWS * BATCHES);
}
