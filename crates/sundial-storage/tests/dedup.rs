//! DEDUP UPSERT KEYS against a model: of the rows with one (timestamp, key), the table holds the
//! last to arrive, whatever the order, repetition or commit boundaries of the batches, through
//! out-of-order merges, reopening and `kill -9` mid-merge.
//!
//! The kill test re-executes this binary as the writing child (`SUNDIAL_DEDUP_CRASH_CHILD=<dir>`).

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use sundial_storage::{PartitionBy, TableDef};

const MINUTE_NS: i64 = 60_000_000_000;
const BASE_TS: i64 = 1_451_606_400_000_000_000; // 2016-01-01
const CHILD_ENV: &str = "SUNDIAL_DEDUP_CRASH_CHILD";

fn def(partition_by: PartitionBy) -> TableDef {
    TableDef {
        name: "d".into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by,
        indexed: Vec::new(),
        dedup_keys: vec!["ts".into(), "sym".into()],
        ttl: None,
        cold_after: None,
    }
}

/// The table as the model says: the last row of each (ts, sym), ordered by timestamp and, among
/// equal timestamps, by when the surviving row arrived.
#[derive(Default)]
struct Model {
    rows: HashMap<(i64, Option<String>), (u64, Row)>,
    arrivals: u64,
}

impl Model {
    fn apply(&mut self, rows: &[Row]) {
        for row in rows {
            self.arrivals += 1;
            self.rows
                .insert((row.ts, row.sym.clone()), (self.arrivals, row.clone()));
        }
    }

    fn expected(&self) -> Vec<Row> {
        let mut rows: Vec<&(u64, Row)> = self.rows.values().collect();
        rows.sort_by_key(|(arrival, row)| (row.ts, *arrival));
        rows.into_iter().map(|(_, row)| row.clone()).collect()
    }
}

/// Rows of batch `i`: keys from a small space, so that batches update each other's rows, at
/// times spread over a window that grows with `i` (many land behind the newest: merged). Every
/// fourth batch is the previous one again, as a client retrying after a lost connection sends.
fn batch_rows(i: u64) -> Vec<Row> {
    if i % 4 == 3 {
        return batch_rows(i - 1);
    }
    let mut rng = Rng(i * 0x9e37_79b9 + 17);
    let n = 20 + (i * 13 % 200);
    (0..n)
        .map(|k| {
            let mut row = random_row(&mut rng, 0, i * 1000 + k);
            row.ts = BASE_TS + rng.below(40 + i * 3) as i64 * MINUTE_NS;
            row.sym = (!rng.chance(5)).then(|| format!("host_{}", rng.below(6)));
            row.v = Some(i as i64);
            row
        })
        .collect()
}

#[test]
fn the_last_row_of_each_key_stands_in_any_order() {
    for (seed, partition_by) in [
        (1u64, PartitionBy::Hour),
        (2, PartitionBy::Day),
        (3, PartitionBy::None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Rng(seed * 7919);
        let mut model = Model::default();
        for round in 0..3 {
            let db = open_db(dir.path(), options());
            let table = db.create_table(def(partition_by), true).unwrap();
            assert_rows(
                &read_all(&table.snapshot()),
                &model.expected(),
                &format!("seed {seed} reopen {round}"),
            );
            let mut w = table.writer().unwrap();
            let mut uncommitted = Vec::new();
            for b in 0..30 {
                let mut rows = batch_rows(rng.below(60));
                // Shuffled, and sometimes sent twice within one commit.
                for k in (1..rows.len()).rev() {
                    rows.swap(k, rng.below(k as u64 + 1) as usize);
                }
                let times = if rng.chance(20) { 2 } else { 1 };
                if rng.chance(30) {
                    // Appended together as sorted runs (as the ingestion sink hands over the
                    // rows of several senders): the later run's rows arrived last.
                    let mut runs = vec![rows.clone(); times];
                    if times == 1 {
                        let tail = runs[0].split_off(rows.len() / 2);
                        runs.push(tail);
                    }
                    for run in &mut runs {
                        run.sort_by_key(|r| r.ts);
                    }
                    let batches: Vec<_> = runs.iter().map(|r| batch(r)).collect();
                    w.append_all(&batches).unwrap();
                    uncommitted.extend(runs);
                } else {
                    for _ in 0..times {
                        w.append(&batch(&rows)).unwrap();
                        uncommitted.push(rows.clone());
                    }
                }
                if rng.chance(10) {
                    w.rollback();
                    uncommitted.clear();
                } else if rng.chance(50) || b == 29 {
                    w.commit().unwrap();
                    for rows in uncommitted.drain(..) {
                        model.apply(&rows);
                    }
                }
                let snapshot = table.snapshot();
                assert!(snapshot.partitions().len() < 200);
            }
            assert_rows(
                &read_all(&table.snapshot()),
                &model.expected(),
                &format!("seed {seed} round {round}"),
            );
        }
    }
}

/// The writer child: commits batches from where the table stands, forever, printing each
/// committed index. A batch's rows hold its index in `v` (a retried batch, its original's), and
/// the newest batch's rows always survive, so the batch after the highest `v` stored is the
/// first not committed, or a retry of the last committed one, which changes nothing.
#[test]
fn dedup_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = open_db(std::path::Path::new(&dir), options());
    let table = db.create_table(def(PartitionBy::Hour), true).unwrap();
    let start = read_all(&table.snapshot())
        .iter()
        .filter_map(|r| r.v)
        .max()
        .map_or(0, |v| v as u64 + 1);
    let mut w = table.writer().unwrap();
    commit_batches_forever(&mut w, start, batch_rows);
}

#[test]
fn killed_mid_merge_keeps_every_acknowledged_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0xdead);
    let mut acknowledged: Option<u64> = None;
    for iteration in 0..16 {
        let env = [(CHILD_ENV, dir.path().as_os_str())];
        let delay = Duration::from_millis(40 + rng.below(250));
        if let Some(i) = run_and_kill("dedup_crash_child", &env, delay) {
            acknowledged = Some(i);
        }
        let db = open_db(dir.path(), options());
        let table = db.create_table(def(PartitionBy::Hour), true).unwrap();
        let stored = read_all(&table.snapshot());
        // Every acknowledged batch, perhaps the one in flight, nothing else.
        let model = |batches: u64| {
            let mut model = Model::default();
            for i in 0..batches {
                model.apply(&batch_rows(i));
            }
            model.expected()
        };
        let acked = acknowledged.map_or(0, |a| a + 1);
        if stored != model(acked) {
            assert_rows(
                &stored,
                &model(acked + 1),
                &format!("iteration {iteration}"),
            );
            // The batch in flight was committed: it is durable now, and the next child, which
            // starts after it, may commit one more before it prints anything.
            acknowledged = Some(acked);
        }
    }
    assert!(
        acknowledged.unwrap_or(0) > 10,
        "the writer made too little progress to test anything"
    );
}
