//! Readers query while a writer commits: every snapshot is a whole number of commits, readable
//! in full, sorted, and readers never wait for the writer.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampNanosecondType};
use common::*;
use sundial_storage::{Database, Durability, PartitionBy, StorageOptions, TableDef};

const BATCH_ROWS: u64 = 500;
const BATCHES: u64 = 200;

#[test]
fn readers_see_whole_commits_while_a_writer_appends() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path(),
        StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        },
    )
    .unwrap();
    let table = db
        .create_table(
            TableDef {
                name: "t".into(),
                columns: columns(),
                timestamp: Some("ts".into()),
                partition_by: PartitionBy::Hour,
                indexed: Vec::new(),
                dedup_keys: Vec::new(),
            },
            false,
        )
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let table = table.clone();
        let done = done.clone();
        std::thread::spawn(move || {
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
            done.store(true, Ordering::Release);
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let table = table.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut checks = 0;
                while !done.load(Ordering::Acquire) || checks == 0 {
                    let s = table.snapshot();
                    let total = s.row_count();
                    assert_eq!(total % BATCH_ROWS, 0, "partial commit visible");
                    let mut sum = 0;
                    let mut last_ts = i64::MIN;
                    for (p, part) in s.partitions().iter().enumerate() {
                        let v = s.read_column(p, 2, 0..part.row_count).unwrap();
                        sum += v.as_primitive::<Int64Type>().iter().flatten().sum::<i64>();
                        let ts = s.read_column(p, 0, 0..part.row_count).unwrap();
                        for t in ts.as_primitive::<TimestampNanosecondType>().values() {
                            assert!(*t >= last_ts);
                            last_ts = *t;
                        }
                    }
                    assert_eq!(sum as u64, total);
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(table.snapshot().row_count(), BATCH_ROWS * BATCHES);
}
