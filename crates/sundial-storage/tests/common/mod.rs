//! A plain in-memory model of a table and helpers to compare the engine against it.
#![allow(dead_code)]

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, TimestampNanosecondType};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampNanosecondArray,
};
use arrow_schema::{DataType, Field, Schema};
use sundial_storage::{
    ColumnType, Durability, ParquetOptions, Snapshot, StorageOptions, Table, TableWriter,
};

/// Storage options for tests that never need the disk to survive the OS: no fsync.
pub fn options() -> StorageOptions {
    StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub ts: i64,
    pub sym: Option<String>,
    pub v: Option<i64>,
    pub s: Option<String>,
    pub b: Option<bool>,
    pub d: f64,
}

pub fn columns() -> Vec<(String, ColumnType)> {
    vec![
        ("ts".into(), ColumnType::Timestamp),
        ("sym".into(), ColumnType::Symbol),
        ("v".into(), ColumnType::Long),
        ("s".into(), ColumnType::Varchar),
        ("b".into(), ColumnType::Boolean),
        ("d".into(), ColumnType::Double),
    ]
}

/// A batch of `rows` in the table's column order, named as the table's columns.
pub fn batch(rows: &[Row]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, None),
            false,
        ),
        Field::new("sym", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("d", DataType::Float64, false),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(TimestampNanosecondArray::from_iter_values(
            rows.iter().map(|r| r.ts),
        )),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| r.sym.clone()))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.v))),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| r.s.clone()))),
        Arc::new(BooleanArray::from_iter(rows.iter().map(|r| r.b))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.d))),
    ];
    RecordBatch::try_new(schema, cols).unwrap()
}

/// Every committed row of a snapshot, in storage order, as model rows (by column name; a
/// missing column reads as NULL).
pub fn read_all(snapshot: &Snapshot) -> Vec<Row> {
    let meta = snapshot.meta();
    let idx = |name: &str| meta.column_index(name);
    let mut out = Vec::new();
    for (p, part) in snapshot.partitions().iter().enumerate() {
        let n = part.row_count;
        let get = |name: &str| idx(name).map(|i| snapshot.read_column(p, i, 0..n).unwrap());
        let ts = get("ts").unwrap();
        let ts = ts.as_primitive::<TimestampNanosecondType>();
        let sym = get("sym");
        let v = get("v");
        let s = get("s");
        let b = get("b");
        let d = get("d");
        for i in 0..n as usize {
            out.push(Row {
                ts: ts.value(i),
                sym: sym.as_ref().and_then(|a| dict_value(a.as_ref(), i)),
                v: v.as_ref().and_then(|a| {
                    let a = a.as_primitive::<Int64Type>();
                    a.is_valid(i).then(|| a.value(i))
                }),
                s: s.as_ref().and_then(|a| {
                    let a = a.as_string::<i64>();
                    a.is_valid(i).then(|| a.value(i).to_string())
                }),
                b: b.as_ref().and_then(|a| {
                    let a = a.as_boolean();
                    a.is_valid(i).then(|| a.value(i))
                }),
                d: d.as_ref()
                    .map_or(f64::NAN, |a| a.as_primitive::<Float64Type>().value(i)),
            });
        }
    }
    out
}

fn dict_value(a: &dyn Array, i: usize) -> Option<String> {
    if a.is_null(i) {
        return None;
    }
    let dict = a.as_any_dictionary();
    let key = dict.normalized_keys()[i];
    Some(dict.values().as_string::<i32>().value(key).to_string())
}

/// The model's expected storage order: stable by timestamp, so equal timestamps keep
/// insertion order.
pub fn expected(rows: &[Row]) -> Vec<Row> {
    let mut out = rows.to_vec();
    out.sort_by_key(|r| r.ts);
    out
}

/// A small deterministic PRNG (xorshift) so failures reproduce from the seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub const HOUR_NS: i64 = 3_600_000_000_000;

/// A random row near `base_ts` (spread over several hours, so several HOUR partitions).
pub fn random_row(rng: &mut Rng, base_ts: i64, serial: u64) -> Row {
    Row {
        ts: base_ts + rng.below(6 * HOUR_NS as u64) as i64,
        sym: (!rng.chance(10)).then(|| format!("host_{}", rng.below(20))),
        v: (!rng.chance(20)).then_some(serial as i64),
        s: (!rng.chance(20)).then(|| format!("s{}", rng.below(1000)).repeat(rng.below(3) as usize)),
        b: (!rng.chance(30)).then(|| rng.chance(50)),
        d: serial as f64 * 0.5,
    }
}

/// Compares row lists, reporting the length and the first difference instead of both lists.
#[track_caller]
pub fn assert_rows(actual: &[Row], expected: &[Row], context: &str) {
    if actual == expected {
        return;
    }
    let first = actual
        .iter()
        .zip(expected)
        .position(|(a, e)| a != e)
        .unwrap_or(actual.len().min(expected.len()));
    panic!(
        "{context}: {} rows, expected {}; first difference at {first}: {:?} vs {:?}",
        actual.len(),
        expected.len(),
        actual.get(first),
        expected.get(first)
    );
}

/// The body of a writing child process: commits `batch_rows(i)` for `i` from `start` on,
/// forever, each in two appends (so a kill can land between them), printing each committed
/// index on its own line.
pub fn commit_batches_forever(
    w: &mut TableWriter,
    start: u64,
    batch_rows: impl Fn(u64) -> Vec<Row>,
) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for i in start.. {
        let rows = batch_rows(i);
        let half = rows.len() / 2;
        w.append(&batch(&rows[..half])).unwrap();
        w.append(&batch(&rows[half..])).unwrap();
        w.commit().unwrap();
        writeln!(out, "{i}").unwrap();
        out.flush().unwrap();
    }
}

/// Runs this test binary's test `child` with `env` set, kills it (SIGKILL) after `delay`, and
/// returns the last index it printed as committed, if any.
pub fn run_and_kill(
    child: &str,
    env: &[(&str, &std::ffi::OsStr)],
    delay: std::time::Duration,
) -> Option<u64> {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", child, "--nocapture", "--test-threads=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (key, value) in env {
        cmd.env(key, value);
    }
    let mut process = cmd.spawn().unwrap();
    std::thread::sleep(delay);
    process.kill().unwrap();
    process.wait().unwrap();
    // libtest writes `test <child> ... ` before the child's own output, without a line
    // break, so the first index shares a line with it: each line's last word is read.
    BufReader::new(process.stdout.take().unwrap())
        .lines()
        .filter_map(|line| line.ok()?.split_whitespace().last()?.parse::<u64>().ok())
        .last()
}

/// Appends `rows` and commits them.
pub fn commit(table: &Arc<Table>, rows: &[Row]) {
    let mut w = table.writer().unwrap();
    w.append(&batch(rows)).unwrap();
    w.commit().unwrap();
}

/// `n` random rows spread over `days` days from `base_ts`, in random order.
pub fn rows_in_days(rng: &mut Rng, base_ts: i64, days: i64, n: u64, serial: u64) -> Vec<Row> {
    (0..n)
        .map(|k| {
            let mut row = random_row(rng, base_ts, serial + k);
            row.ts = base_ts + rng.below((days * 24 * HOUR_NS) as u64) as i64;
            row
        })
        .collect()
}

/// Parquet row groups of 1,000 rows, so that reads span several of them.
pub fn small_row_groups() -> ParquetOptions {
    ParquetOptions {
        row_group_rows: 1000,
        ..ParquetOptions::default()
    }
}

/// `Database::open`, waiting (30 s at most) while this process itself holds the directory's
/// lock: a child process that another test of the binary is starting holds a copy of every
/// open file until it executes, the lock file of a database just dropped included, so a
/// reopen can find the lock still held by a process that no longer holds the database.
pub fn open_db(
    dir: impl AsRef<std::path::Path>,
    options: StorageOptions,
) -> Arc<sundial_storage::Database> {
    let dir = dir.as_ref();
    let ourselves = format!("pid {}", std::process::id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match sundial_storage::Database::open(dir, options.clone()) {
            Ok(db) => return db,
            Err(sundial_storage::StorageError::Locked { holder, .. })
                if holder == ourselves && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("opening {}: {e}", dir.display()),
        }
    }
}
