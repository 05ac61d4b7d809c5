//! Kill a writing process (SIGKILL) at random moments, many times, and check that the reopened
//! table holds exactly the batches committed before the kill (plus possibly the one in flight),
//! against the model, with no partial batch.
//!
//! The test binary re-executes itself as the writer child (`SUNDIAL_CRASH_CHILD=<dir>`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use sundial_storage::{Database, Durability, PartitionBy, StorageOptions, TableDef};

const CHILD_ENV: &str = "SUNDIAL_CRASH_CHILD";
const SYNC_ENV: &str = "SUNDIAL_CRASH_SYNC";

fn batch_rows(i: u64) -> Vec<Row> {
    let mut rng = Rng(i * 2_654_435_761 + 1);
    let n = 50 + (i * 37 % 400);
    let mut base = 1_451_606_400_000_000_000i64 + i as i64 * 600_000_000_000;
    if i % 5 == 3 {
        base -= 3 * HOUR_NS; // out of order: merged into older partitions
    }
    (0..n)
        .map(|k| random_row(&mut rng, base, i * 1000 + k))
        .collect()
}

fn cumulative_rows(batches: u64) -> u64 {
    (0..batches).map(|i| batch_rows(i).len() as u64).sum()
}

fn batches_for_rows(rows: u64) -> Option<u64> {
    let mut total = 0;
    for i in 0.. {
        if total == rows {
            return Some(i);
        }
        if total > rows {
            return None;
        }
        total += batch_rows(i).len() as u64;
    }
    None
}

fn open(dir: &std::path::Path, sync: bool) -> std::sync::Arc<Database> {
    let durability = if sync {
        Durability::Sync
    } else {
        Durability::None
    };
    Database::open(
        dir,
        StorageOptions {
            durability,
            ..StorageOptions::default()
        },
    )
    .unwrap()
}

fn def() -> TableDef {
    TableDef {
        name: "crash".into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by: PartitionBy::Hour,
        indexed: Vec::new(),
    }
}

/// The writer child: appends and commits batches forever, printing each committed index.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = open(std::path::Path::new(&dir), std::env::var(SYNC_ENV).is_ok());
    let table = db.create_table(def(), true).unwrap();
    let start = batches_for_rows(table.snapshot().row_count())
        .expect("row count matches no batch boundary");
    let mut w = table.writer().unwrap();
    let mut out = std::io::stdout().lock();
    for i in start.. {
        let rows = batch_rows(i);
        // Two appends per commit, so a kill can land between them.
        let half = rows.len() / 2;
        w.append(&batch(&rows[..half])).unwrap();
        w.append(&batch(&rows[half..])).unwrap();
        w.commit().unwrap();
        writeln!(out, "{i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn killed_writer_loses_nothing_committed_and_leaves_no_partial_commit() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5eed);
    let mut acknowledged: Option<u64> = None;
    for iteration in 0..24 {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if iteration % 6 == 5 {
            cmd.env(SYNC_ENV, "1");
        }
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(30 + rng.below(250)));
        child.kill().unwrap();
        child.wait().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        for line in stdout.lines() {
            if let Ok(i) = line.unwrap().trim().parse::<u64>() {
                acknowledged = Some(i);
            }
        }
        let db = open(dir.path(), false);
        let table = db.create_table(def(), true).unwrap();
        let snapshot = table.snapshot();
        let rows = snapshot.row_count();
        let batches = batches_for_rows(rows).unwrap_or_else(|| {
            panic!("iteration {iteration}: {rows} rows is not a whole number of batches")
        });
        let acked = acknowledged.map_or(0, |a| a + 1);
        assert!(
            batches >= acked,
            "iteration {iteration}: {batches} batches on disk, {acked} acknowledged"
        );
        let mut model = Vec::new();
        for i in 0..batches {
            model.extend(batch_rows(i));
        }
        assert_rows(
            &read_all(&snapshot),
            &expected(&model),
            &format!("iteration {iteration}"),
        );
        assert_eq!(rows, cumulative_rows(batches));
    }
    assert!(
        acknowledged.unwrap_or(0) > 10,
        "the writer made too little progress to test anything"
    );
}
