//! Kill a writing process (SIGKILL) at random moments, many times, and check that the reopened
//! table holds exactly the batches committed before the kill (plus possibly the one in flight),
//! against the model, with no partial batch.
//!
//! The same for schema changes: a child runs cycles of CREATE, RENAME, ADD/DROP/RENAME COLUMN,
//! ADD INDEX, DROP PARTITION, TRUNCATE and DROP TABLE on a table of many partitions; after each
//! kill the directory must open, without leftovers, to the state before or after the statement
//! in flight.
//!
//! The test binary re-executes itself as the child (`SUNDIAL_CRASH_CHILD=<dir>`,
//! `SUNDIAL_DDL_CRASH_CHILD=<dir>`).

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
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
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
    commit_batches_forever(&mut w, start, batch_rows);
}

/// The kill tests run one at a time: each times its kills, which a concurrent one would skew.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn killed_writer_loses_nothing_committed_and_leaves_no_partial_commit() {
    let _serial = SERIAL.lock();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5eed);
    let mut acknowledged: Option<u64> = None;
    for iteration in 0..24 {
        let sync = std::ffi::OsStr::new("1");
        let mut env = vec![(CHILD_ENV, dir.path().as_os_str())];
        if iteration % 6 == 5 {
            env.push((SYNC_ENV, sync));
        }
        let delay = Duration::from_millis(30 + rng.below(250));
        if let Some(i) = run_and_kill("crash_child", &env, delay) {
            acknowledged = Some(i);
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

// ---- Schema changes (DDL) killed mid-way ----------------------------------------------------

const DDL_CHILD_ENV: &str = "SUNDIAL_DDL_CRASH_CHILD";
/// Steps of one cycle of `ddl_step`; the cycle's table is gone after the last one.
const DDL_STEPS: u64 = 12;
/// Rows (one per HOUR partition) each append of a DDL cycle writes: many partitions, so that
/// deleting them (DROP TABLE, TRUNCATE, DROP PARTITION) takes long enough to be interrupted.
const DDL_ROWS: i64 = 40;

fn ddl_rows(cycle: u64) -> Vec<Row> {
    let mut rng = Rng(cycle * 31 + 7);
    let base = 1_451_606_400_000_000_000i64;
    (0..DDL_ROWS)
        .map(|k| {
            let mut r = random_row(&mut rng, 0, k as u64);
            r.ts = base + k * HOUR_NS + rng.below(1000) as i64;
            r
        })
        .collect()
}

fn ddl_def(name: String) -> TableDef {
    TableDef { name, ..def() }
}

/// Step `k` of cycle `cycle`: every kind of DDL, on a table with many partitions.
fn ddl_step(db: &Database, cycle: u64, k: u64) {
    let created = format!("t{cycle}");
    let renamed = format!("r{cycle}");
    let writer = |name: &str| db.table(name).unwrap().writer().unwrap();
    let append = |name: &str| {
        let mut w = writer(name);
        // Without `v` and `s`, which steps 4 and 5 rename and drop.
        w.append(&batch(&ddl_rows(cycle)).project(&[0, 1, 4, 5]).unwrap())
            .unwrap();
        w.commit().unwrap();
    };
    match k {
        0 => drop(db.create_table(ddl_def(created), false).unwrap()),
        1 => append(&created),
        2 => db.rename_table(&created, &renamed).unwrap(),
        3 => writer(&renamed)
            .add_column("x", sundial_storage::ColumnType::Long)
            .unwrap(),
        4 => writer(&renamed).rename_column("v", "w").unwrap(),
        5 => writer(&renamed).drop_column("s").unwrap(),
        6 => writer(&renamed).set_column_indexed("sym", true).unwrap(),
        7 => {
            let mut w = writer(&renamed);
            let keys: Vec<i64> = w.table().snapshot().partitions()[..10]
                .iter()
                .map(|p| p.key)
                .collect();
            assert_eq!(w.drop_partitions(&keys).unwrap(), 10);
        }
        8 => append(&renamed),
        9 => writer(&renamed).truncate().unwrap(),
        10 => append(&renamed),
        11 => db.drop_table(&renamed).unwrap(),
        _ => unreachable!(),
    }
}

/// What a DDL cycle's table holds after a step: its name, columns (name, indexed) and the
/// timestamps of its rows in storage order.
#[derive(Debug, PartialEq)]
struct DdlState {
    name: String,
    columns: Vec<(String, bool)>,
    ts: Vec<i64>,
}

/// The model: the state after global step `step` (`None`: no table).
fn ddl_model(step: Option<u64>) -> Option<DdlState> {
    let step = step?;
    let (cycle, last) = (step / DDL_STEPS, step % DDL_STEPS);
    let mut state = DdlState {
        name: format!("t{cycle}"),
        columns: columns().into_iter().map(|(n, _)| (n, false)).collect(),
        ts: Vec::new(),
    };
    let rows: Vec<i64> = ddl_rows(cycle).iter().map(|r| r.ts).collect();
    for k in 1..=last {
        match k {
            1 | 8 | 10 => {
                state.ts.extend(&rows);
                state.ts.sort();
            }
            2 => state.name = format!("r{cycle}"),
            3 => state.columns.push(("x".into(), false)),
            4 => state.columns[2].0 = "w".into(),
            5 => state.columns.retain(|(n, _)| n != "s"),
            6 => state.columns[1].1 = true,
            7 => {
                let mut keys: Vec<i64> = state
                    .ts
                    .iter()
                    .map(|t| PartitionBy::Hour.floor(*t))
                    .collect();
                keys.dedup();
                state
                    .ts
                    .retain(|t| !keys[..10].contains(&PartitionBy::Hour.floor(*t)));
            }
            9 => state.ts.clear(),
            11 => return None,
            _ => unreachable!(),
        }
    }
    Some(state)
}

/// The state on disk; every column of every partition must read back.
fn ddl_disk_state(db: &Database) -> Option<DdlState> {
    let names = db.table_names();
    assert!(names.len() <= 1, "one table at a time: {names:?}");
    let table = db.table(names.first()?).unwrap();
    let snapshot = table.snapshot();
    let meta = snapshot.meta();
    let all: Vec<usize> = (0..meta.columns.len()).collect();
    let mut ts = Vec::new();
    for (p, part) in snapshot.partitions().iter().enumerate() {
        let batch = snapshot.read_batch(p, &all, 0..part.row_count).unwrap();
        let column = batch.column(meta.timestamp_index.unwrap());
        ts.extend(
            arrow_array::cast::AsArray::as_primitive::<
                arrow_array::types::TimestampNanosecondType,
            >(column.as_ref())
            .values()
            .iter()
            .copied(),
        );
    }
    Some(DdlState {
        name: meta.name.clone(),
        columns: meta
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.indexed))
            .collect(),
        ts,
    })
}

/// The DDL child: runs cycles of `ddl_step` forever, printing each finished global step.
#[test]
fn ddl_crash_child() {
    let Ok(dir) = std::env::var(DDL_CHILD_ENV) else {
        return;
    };
    let db = open(std::path::Path::new(&dir), std::env::var(SYNC_ENV).is_ok());
    let mut out = std::io::stdout().lock();
    for step in 0.. {
        ddl_step(&db, step / DDL_STEPS, step % DDL_STEPS);
        writeln!(out, "{step}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn killed_ddl_reopens_to_the_state_before_or_after_it() {
    let _serial = SERIAL.lock();
    let mut rng = Rng(0xdd1);
    let mut steps_seen = std::collections::BTreeSet::new();
    for iteration in 0..24 {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "ddl_crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DDL_CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        if iteration % 5 == 4 {
            cmd.env(SYNC_ENV, "1");
        }
        let mut child = cmd.spawn().unwrap();
        // Killed a random time after a random step finished, however fast the machine is.
        // Every third kill aims at DROP TABLE, the longest deletion.
        let target = if iteration % 3 == 0 {
            DDL_STEPS * rng.below(2) + DDL_STEPS - 2
        } else {
            rng.below(2 * DDL_STEPS)
        };
        let mut acknowledged = None;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while acknowledged.is_none_or(|a| a < target) {
            let Some(line) = lines.next() else { break };
            if let Some(i) = last_number(&line.unwrap()) {
                acknowledged = Some(i);
            }
        }
        let delay_us = if rng.chance(50) { 4_000 } else { 30_000 };
        std::thread::sleep(Duration::from_micros(rng.below(delay_us)));
        child.kill().unwrap();
        child.wait().unwrap();
        for line in lines {
            if let Some(i) = last_number(&line.unwrap()) {
                acknowledged = Some(i);
            }
        }
        let db = open_db(dir.path(), StorageOptions::default());
        let on_disk = ddl_disk_state(&db);
        let before = ddl_model(acknowledged);
        let after = ddl_model(Some(acknowledged.map_or(0, |a| a + 1)));
        assert!(
            on_disk == before || on_disk == after,
            "iteration {iteration}, killed after step {acknowledged:?}: on disk {:?}, expected \
             {:?} or {:?}",
            on_disk.as_ref().map(|s| (&s.name, &s.columns, s.ts.len())),
            before.as_ref().map(|s| (&s.name, &s.columns, s.ts.len())),
            after.as_ref().map(|s| (&s.name, &s.columns, s.ts.len())),
        );
        // An interrupted drop or create is finished at open: nothing but live tables remains.
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left.len(),
            1 + usize::from(on_disk.is_some()),
            "iteration {iteration}: {left:?}"
        );
        if let Some(a) = acknowledged {
            steps_seen.insert((a + 1) % DDL_STEPS);
        }
        // The reopened directory takes further DDL.
        drop(db);
        let db = open(dir.path(), false);
        for name in db.table_names() {
            db.drop_table(&name).unwrap();
        }
    }
    assert!(
        steps_seen.len() >= DDL_STEPS as usize / 2,
        "kills landed in too few kinds of step: {steps_seen:?}"
    );
}

/// Without `sync`, an OS crash may leave a commit's transaction slot and dictionary offsets on
/// disk without the symbol bytes they end at: opening takes the previous commit instead of
/// failing on the dictionary.
#[test]
fn symbols_an_os_crash_lost_reopen_at_the_previous_commit() {
    let dir = tempfile::tempdir().unwrap();
    let row = |ts: i64, sym: &str| Row {
        ts,
        sym: Some(sym.into()),
        v: None,
        s: None,
        b: None,
        d: 0.0,
    };
    let first = vec![row(1_451_606_400_000_000_000, "alpha")];
    let data = {
        let db = open(dir.path(), false);
        let table = db.create_table(def(), false).unwrap();
        let mut w = table.writer().unwrap();
        w.append(&batch(&first)).unwrap();
        w.commit().unwrap();
        w.append(&batch(&[row(1_451_606_400_000_000_001, "beta")]))
            .unwrap();
        w.commit().unwrap();
        let sym = table.meta().columns[1].id;
        table.path().join("_sym").join(format!("{sym}.d"))
    };
    // "beta" never reached the disk; its end offset and the transaction did.
    let file = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
    file.set_len("alpha".len() as u64).unwrap();
    let db = open(dir.path(), false);
    let snapshot = db.table("crash").unwrap().snapshot();
    assert_rows(&read_all(&snapshot), &expected(&first), "the first commit");
}

// ---- A torn transaction slot after an OS crash ------------------------------------------------

/// Opening `dir` in `none` mode: the error, if it fails.
fn open_error(dir: &std::path::Path) -> Option<sundial_storage::StorageError> {
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    Database::open(dir, options).err()
}

/// The slots of the only table in `dir`, overwritten with `first` and `second` (`None`: the
/// slot file absent).
fn tear_slots(dir: &std::path::Path, first: &[u8], second: Option<&[u8]>) {
    let table = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    std::fs::write(table.join("_txn.0"), first).unwrap();
    match second {
        Some(bytes) => std::fs::write(table.join("_txn.1"), bytes).unwrap(),
        None => std::fs::remove_file(table.join("_txn.1")).unwrap(),
    }
}

/// Without `sync`, the rename that publishes a new table's directory may reach the disk
/// before the bytes of its first slot. Every torn form of that slot (a prefix, blocks read as
/// zeros), with `_txn.1` empty or absent, opens as a CREATE that never completed: no table,
/// no directory, and its name free again.
#[test]
fn a_create_whose_first_slot_is_torn_opens_without_the_table() {
    let created = tempfile::tempdir().unwrap();
    let first_slot = {
        let db = open(created.path(), false);
        let table = db.create_table(def(), false).unwrap();
        std::fs::read(table.path().join("_txn.0")).unwrap()
    };
    let len = first_slot.len();
    let mut zeros_from_20 = first_slot.clone();
    zeros_from_20[20..].fill(0);
    let torn: Vec<(&str, Vec<u8>)> = vec![
        ("one byte", first_slot[..1].to_vec()),
        ("magic and format", first_slot[..8].to_vec()),
        ("header", first_slot[..20].to_vec()),
        ("all but the CRC", first_slot[..len - 4].to_vec()),
        ("zeros", vec![0; len]),
        ("zeros after the header", zeros_from_20),
    ];
    for (what, bytes) in torn {
        for second in [Some(&[][..]), None] {
            let dir = tempfile::tempdir().unwrap();
            let table = dir.path().join("crash~1");
            std::fs::create_dir(&table).unwrap();
            std::fs::write(table.join("_txn.1"), b"").unwrap();
            tear_slots(dir.path(), &bytes, second);
            let db = open(dir.path(), false);
            let case = format!("{what}, _txn.1 {second:?}");
            assert!(db.table_names().is_empty(), "{case}");
            assert!(!table.exists(), "{case}: the directory is removed");
            let t = db.create_table(def(), false).unwrap();
            assert!(t.path().ends_with("crash~2"), "{case}: {:?}", t.path());
        }
    }
}

/// A torn slot of a table that committed after its CREATE is still reported as corrupt, when
/// any of the three signs shows it: a partition directory, a seq that is not 0, bytes in
/// `_txn.1`.
#[test]
fn a_torn_slot_of_a_table_that_committed_is_reported_corrupt() {
    let row = |ts: i64| Row {
        ts,
        sym: None,
        v: Some(1),
        s: None,
        b: None,
        d: 0.0,
    };
    let is_corrupt = |e: Option<sundial_storage::StorageError>| {
        matches!(e, Some(sundial_storage::StorageError::Corrupt { .. }))
    };
    // Rows in commits 1 and 2; commit 2's slot `_txn.0` torn, commit 1's lost.
    for keep in [4, 30] {
        let dir = tempfile::tempdir().unwrap();
        let slot = {
            let db = open(dir.path(), false);
            let table = db.create_table(def(), false).unwrap();
            let mut w = table.writer().unwrap();
            for ts in [1_451_606_400_000_000_000, 1_451_606_400_000_000_001] {
                w.append(&batch(&[row(ts)])).unwrap();
                w.commit().unwrap();
            }
            std::fs::read(table.path().join("_txn.0")).unwrap()
        };
        tear_slots(dir.path(), &slot[..keep], Some(b""));
        let error = open_error(dir.path());
        assert!(is_corrupt(error), "rows, {keep} bytes kept");
    }
    // Only schema changes, so no directory: a seq of 2 in the torn slot.
    let dir = tempfile::tempdir().unwrap();
    let slot = {
        let db = open(dir.path(), false);
        let table = db.create_table(def(), false).unwrap();
        let mut w = table.writer().unwrap();
        w.add_column("x", sundial_storage::ColumnType::Long)
            .unwrap();
        w.rename_column("x", "y").unwrap();
        std::fs::read(table.path().join("_txn.0")).unwrap()
    };
    tear_slots(dir.path(), &slot[..20], None);
    assert!(is_corrupt(open_error(dir.path())), "seq 2");
    // CREATE's slot torn, the next commit's slot too.
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = {
        let db = open(dir.path(), false);
        let table = db.create_table(def(), false).unwrap();
        let first = std::fs::read(table.path().join("_txn.0")).unwrap();
        let mut w = table.writer().unwrap();
        w.add_column("x", sundial_storage::ColumnType::Long)
            .unwrap();
        (first, std::fs::read(table.path().join("_txn.1")).unwrap())
    };
    tear_slots(dir.path(), &first[..10], Some(&second[..10]));
    assert!(is_corrupt(open_error(dir.path())), "_txn.1 torn");
}

/// The number ending a line of a child's output: libtest writes `test <child> ... ` before the
/// child's own output, without a line break, so the first number shares a line with it.
fn last_number(line: &str) -> Option<u64> {
    line.split_whitespace().last()?.parse().ok()
}
