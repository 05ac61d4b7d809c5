//! TTL: partitions whose whole time range is older than the TTL, counted back from the newest
//! row capped at the wall clock, are dropped; the setting survives reopening; tables it cannot
//! apply to refuse it. One row stamped in the future expires nothing (COLD AFTER likewise), and
//! rows too far ahead of the clock can be refused.

mod common;

use common::*;
use sundial_storage::{
    ParquetOptions, PartFormat, PartitionBy, StorageError, StorageOptions, TableDef, Ttl, TtlUnit,
    WallClock,
};

const DAY_NS: i64 = 24 * HOUR_NS;
const BASE_TS: i64 = 1_451_606_400_000_000_000; // 2016-01-01

fn def(partition_by: PartitionBy, ttl: Option<Ttl>) -> TableDef {
    TableDef {
        name: "t".into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl,
        cold_after: None,
    }
}

fn days(n: u32) -> Option<Ttl> {
    Some(Ttl {
        count: n,
        unit: TtlUnit::Day,
    })
}

/// Rows of `days` days from 2016-01-01, each day's newest at 11:00.
fn rows_over_days(days: i64, rng: &mut Rng) -> Vec<Row> {
    (0..days * 100)
        .map(|i| {
            let mut row = random_row(rng, BASE_TS, i as u64);
            row.ts = BASE_TS + (i % days) * DAY_NS + (i % 12) * HOUR_NS;
            row
        })
        .collect()
}

fn partition_days(table: &sundial_storage::Table) -> Vec<i64> {
    table
        .snapshot()
        .partitions()
        .iter()
        .map(|p| (p.key - BASE_TS) / DAY_NS)
        .collect()
}

#[test]
fn commits_drop_the_partitions_the_ttl_expires() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path(), options());
    let table = db
        .create_table(def(PartitionBy::Day, days(2)), false)
        .unwrap();
    let mut rng = Rng(11);
    let mut model = rows_over_days(5, &mut rng);
    commit(&table, &model);
    // Newest row 01-05 11:00, cutoff 01-03 11:00: 01-01 and 01-02 end before it, 01-03 not.
    assert_eq!(partition_days(&table), vec![2, 3, 4]);
    model.retain(|r| r.ts >= BASE_TS + 2 * DAY_NS);
    assert_rows(&read_all(&table.snapshot()), &expected(&model), "after TTL");
    // A late row for an expired day is dropped with its partition by its own commit.
    let mut late = random_row(&mut rng, BASE_TS, 9_999);
    late.ts = BASE_TS + HOUR_NS;
    commit(&table, &[late]);
    assert_eq!(partition_days(&table), vec![2, 3, 4]);
    // A newer row moves the cutoff: 01-07 11:00 expires 01-03 and 01-04.
    let mut newer = random_row(&mut rng, BASE_TS, 10_000);
    newer.ts = BASE_TS + 6 * DAY_NS + 11 * HOUR_NS;
    commit(&table, std::slice::from_ref(&newer));
    assert_eq!(partition_days(&table), vec![4, 6]);
    model.retain(|r| r.ts >= BASE_TS + 4 * DAY_NS);
    model.push(newer);
    assert_rows(&read_all(&table.snapshot()), &expected(&model), "newer row");
    // Removing the TTL keeps everything from then on, across reopening.
    table.writer().unwrap().set_ttl(None).unwrap();
    let mut old = random_row(&mut rng, BASE_TS, 10_001);
    old.ts = BASE_TS;
    commit(&table, std::slice::from_ref(&old));
    model.push(old);
    drop(table);
    drop(db);
    let db = open_db(dir.path(), options());
    let table = db.table("t").unwrap();
    assert_eq!(table.meta().ttl, None);
    assert_eq!(partition_days(&table), vec![0, 4, 6]);
    assert_rows(&read_all(&table.snapshot()), &expected(&model), "reopened");
}

/// A TTL set without dropping (as a crash right after `ALTER TABLE ... SET TTL` leaves it) is
/// enforced when the database opens, and the setting is kept.
#[test]
fn opening_drops_what_a_ttl_set_before_a_crash_expires() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(12);
    let mut model = rows_over_days(5, &mut rng);
    {
        let db = open_db(dir.path(), options());
        let table = db.create_table(def(PartitionBy::Day, None), false).unwrap();
        commit(&table, &model);
        table.writer().unwrap().set_ttl(days(1)).unwrap();
        assert_eq!(
            partition_days(&table),
            vec![0, 1, 2, 3, 4],
            "set_ttl drops nothing"
        );
    }
    let db = open_db(dir.path(), options());
    let table = db.table("t").unwrap();
    assert_eq!(table.meta().ttl, days(1));
    assert_eq!(partition_days(&table), vec![3, 4]);
    model.retain(|r| r.ts >= BASE_TS + 3 * DAY_NS);
    assert_rows(&read_all(&table.snapshot()), &expected(&model), "reopened");
    assert_eq!(db.enforce_ttl(), 0);
    assert_eq!(table.writer().unwrap().drop_expired().unwrap(), 0);
}

#[test]
fn a_ttl_needs_a_table_partitioned_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path(), options());
    let e = db
        .create_table(def(PartitionBy::None, days(3)), false)
        .unwrap_err();
    assert!(e.to_string().contains("partitioned by time"), "{e}");
    let table = db
        .create_table(def(PartitionBy::None, None), false)
        .unwrap();
    let e = table.writer().unwrap().set_ttl(days(3)).unwrap_err();
    assert!(e.to_string().contains("TTL 3 DAYS needs"), "{e}");
    assert_eq!(table.meta().ttl, None);
}

/// 2261-01-01T00:00:00Z: a client with a unit bug, or a typo in an INSERT.
const YEAR_2261: i64 = 9_183_110_400_000_000_000;

fn at_clock(clock: &WallClock, ttl_wall_clock: bool) -> StorageOptions {
    StorageOptions {
        clock: clock.clone(),
        ttl_wall_clock,
        // COLD AFTER converts only when a test asks.
        cold_check_interval_ms: 0,
        ..options()
    }
}

fn row_at(rng: &mut Rng, ts: i64, serial: u64) -> Row {
    let mut row = random_row(rng, BASE_TS, serial);
    row.ts = ts;
    row
}

/// One row stamped 2261 moves the TTL's reference only as far as the wall clock: the real
/// partitions stay, and go as the clock passes them, not before.
#[test]
fn a_future_row_expires_nothing_the_clock_has_not_expired() {
    let dir = tempfile::tempdir().unwrap();
    // The clock: an hour after the newest row of five days of rows.
    let clock = WallClock::manual(BASE_TS + 4 * DAY_NS + 12 * HOUR_NS);
    let db = open_db(dir.path(), at_clock(&clock, true));
    let table = db
        .create_table(def(PartitionBy::Day, days(2)), false)
        .unwrap();
    let mut rng = Rng(21);
    let mut model = rows_over_days(5, &mut rng);
    commit(&table, &model);
    assert_eq!(partition_days(&table), vec![2, 3, 4]);
    model.retain(|r| r.ts >= BASE_TS + 2 * DAY_NS);
    let future = row_at(&mut rng, YEAR_2261, 50_000);
    commit(&table, std::slice::from_ref(&future));
    model.push(future.clone());
    let future_day = (YEAR_2261 - BASE_TS) / DAY_NS;
    assert_eq!(partition_days(&table), vec![2, 3, 4, future_day]);
    assert_rows(&read_all(&table.snapshot()), &expected(&model), "2261 row");
    // Two days later by the clock (01-07 12:00): 01-03 and 01-04 have expired, by the next
    // commit or at open.
    clock.set_ns(BASE_TS + 6 * DAY_NS + 12 * HOUR_NS);
    assert_eq!(table.writer().unwrap().drop_expired().unwrap(), 2);
    assert_eq!(partition_days(&table), vec![4, future_day]);
    drop(table);
    drop(db);
    // With the cap off (QuestDB's legacy behaviour), the 2261 row expires everything else.
    let db = open_db(dir.path(), at_clock(&clock, false));
    let table = db.table("t").unwrap();
    assert_eq!(partition_days(&table), vec![future_day]);
    assert_rows(
        &read_all(&table.snapshot()),
        &expected(&[future]),
        "uncapped",
    );
}

/// `COLD AFTER` counts from the same reference: a future row makes cold only what the clock
/// has made cold.
#[test]
fn a_future_row_makes_cold_only_what_the_clock_made_cold() {
    let dir = tempfile::tempdir().unwrap();
    let clock = WallClock::manual(BASE_TS + 4 * DAY_NS + 12 * HOUR_NS);
    let db = open_db(dir.path(), at_clock(&clock, true));
    let mut cold = def(PartitionBy::Day, None);
    cold.cold_after = days(1);
    let table = db.create_table(cold, false).unwrap();
    let mut rng = Rng(22);
    let mut model = rows_over_days(5, &mut rng);
    model.push(row_at(&mut rng, YEAR_2261, 60_000));
    commit(&table, &model);
    // Cutoff 01-04 12:00: days 0 to 2 end before it, day 3 and 4 not.
    assert_eq!(table.convert_cold(&ParquetOptions::default()).unwrap(), 3);
    let parquet: Vec<bool> = table
        .snapshot()
        .partitions()
        .iter()
        .map(|p| matches!(p.format, PartFormat::Parquet { .. }))
        .collect();
    assert_eq!(parquet, vec![true, true, true, false, false, false]);
    assert_rows(&read_all(&table.snapshot()), &expected(&model), "cold");
}

/// With `timestamp_future_ms_max`, a row further ahead of the clock is refused (the whole
/// append, nothing of it kept), naming its timestamp and the bound; rows within it are taken.
#[test]
fn rows_too_far_ahead_of_the_clock_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let now = BASE_TS + 12 * HOUR_NS;
    let options = StorageOptions {
        timestamp_future_ms_max: Some(3_600_000),
        ..at_clock(&WallClock::manual(now), true)
    };
    let db = open_db(dir.path(), options);
    let table = db.create_table(def(PartitionBy::Day, None), false).unwrap();
    let mut rng = Rng(23);
    let near = [row_at(&mut rng, now, 1), row_at(&mut rng, now + HOUR_NS, 2)];
    commit(&table, &near);
    let far = [
        row_at(&mut rng, now, 3),
        row_at(&mut rng, now + 2 * HOUR_NS, 4),
    ];
    let mut w = table.writer().unwrap();
    let e = w.append(&batch(&far)).unwrap_err();
    assert!(matches!(e, StorageError::InvalidInput(_)), "{e:?}");
    let message = e.to_string();
    for part in [
        "2016-01-01T14:00:00Z",
        "table 't'",
        "3600000 ms",
        "2016-01-01T13:00:00Z",
    ] {
        assert!(message.contains(part), "{message}");
    }
    assert_eq!(w.pending_rows(), 0);
    w.commit().unwrap();
    drop(w);
    assert_rows(
        &read_all(&table.snapshot()),
        &expected(&near),
        "near rows only",
    );
}

/// A handle kept past DROP TABLE refuses rows (its files are about to go), and its directory
/// goes with the last handle.
#[test]
fn a_dropped_table_refuses_rows_and_its_files_go_with_its_last_handle() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path(), options());
    let table = db.create_table(def(PartitionBy::Day, None), false).unwrap();
    let mut rng = Rng(24);
    commit(&table, &rows_over_days(2, &mut rng));
    let path = table.path().to_path_buf();
    db.drop_table("t").unwrap();
    assert!(table.is_dropped());
    let e = table
        .writer()
        .unwrap()
        .append(&batch(&rows_over_days(1, &mut rng)))
        .unwrap_err();
    assert!(e.to_string().contains("was dropped"), "{e}");
    assert!(path.exists());
    drop(table);
    assert!(!path.exists());
}

// ---- Killed mid-way ---------------------------------------------------------------------------

const CHILD_ENV: &str = "SUNDIAL_TTL_CRASH_CHILD";
const MINUTE_NS: i64 = 60_000_000_000;
const CRASH_TTL_HOURS: u32 = 3;

/// Batch `i`: rows in the half hour from `i` x 30 minutes on; every fourth batch also has rows
/// 2-5 hours late (some for partitions the TTL has already dropped). `v` is `i` x 1000 + row.
fn crash_batch(i: u64) -> Vec<Row> {
    let mut rng = Rng(i * 7_919 + 3);
    let start = BASE_TS + i as i64 * 30 * MINUTE_NS;
    (0..20 + i % 50)
        .map(|k| {
            let mut row = random_row(&mut rng, start, k);
            row.ts = start + rng.below(30 * MINUTE_NS as u64) as i64;
            if i % 4 == 3 && k % 3 == 0 {
                row.ts -= (2 + rng.below(4) as i64) * HOUR_NS;
            }
            row.v = Some((i * 1000 + k) as i64);
            row
        })
        .collect()
}

fn crash_def() -> TableDef {
    def(
        PartitionBy::Hour,
        Some(Ttl {
            count: CRASH_TTL_HOURS,
            unit: TtlUnit::Hour,
        }),
    )
}

/// The rows of batches `0..n` the TTL keeps: those in hours that end after the newest row
/// minus the TTL.
fn crash_model(n: u64) -> Vec<Row> {
    let rows: Vec<Row> = (0..n).flat_map(crash_batch).collect();
    let Some(newest) = rows.iter().map(|r| r.ts).max() else {
        return rows;
    };
    let cutoff = newest - i64::from(CRASH_TTL_HOURS) * HOUR_NS;
    rows.into_iter()
        .filter(|r| r.ts.div_euclid(HOUR_NS) * HOUR_NS + HOUR_NS > cutoff)
        .collect()
}

/// The writer child: commits batches forever from the one after the newest stored, printing
/// each committed index.
#[test]
fn ttl_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = open_db(std::path::Path::new(&dir), options());
    let table = db.create_table(crash_def(), true).unwrap();
    let start = read_all(&table.snapshot())
        .iter()
        .filter_map(|r| r.v)
        .max()
        .map_or(0, |v| v as u64 / 1000 + 1);
    let mut w = table.writer().unwrap();
    commit_batches_forever(&mut w, start, crash_batch);
}

/// Killed while committing rows and dropping what the TTL expires, the table reopens to the
/// model of the batches committed (plus possibly the one in flight), with the TTL applied.
#[test]
fn killed_while_dropping_expired_partitions_reopens_to_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x77);
    let mut acknowledged: Option<u64> = None;
    for iteration in 0..16 {
        let env = [(CHILD_ENV, dir.path().as_os_str())];
        let delay = std::time::Duration::from_millis(60 + rng.below(400));
        if let Some(i) = run_and_kill("ttl_crash_child", &env, delay) {
            acknowledged = Some(i);
        }
        let db = open_db(dir.path(), options());
        let table = db.create_table(crash_def(), true).unwrap();
        let stored = read_all(&table.snapshot());
        let batches = stored
            .iter()
            .filter_map(|r| r.v)
            .max()
            .map_or(0, |v| v as u64 / 1000 + 1);
        let acked = acknowledged.map_or(0, |a| a + 1);
        assert!(
            batches == acked || batches == acked + 1,
            "iteration {iteration}: {batches} batches stored, {acked} acknowledged"
        );
        assert_rows(
            &stored,
            &expected(&crash_model(batches)),
            &format!("iteration {iteration}"),
        );
        let mut keys: Vec<i64> = table
            .snapshot()
            .partitions()
            .iter()
            .map(|p| p.key)
            .collect();
        keys.dedup();
        assert!(keys.len() <= CRASH_TTL_HOURS as usize + 1, "{keys:?}");
    }
    // Past a few hours of batches, so that the TTL dropped partitions while the kills came.
    let acked = acknowledged.unwrap_or(0);
    assert!(
        acked > 4 * u64::from(CRASH_TTL_HOURS),
        "the writer made too little progress to test anything: {acked} batches"
    );
}
