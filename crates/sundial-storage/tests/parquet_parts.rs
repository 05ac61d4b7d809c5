//! Partitions kept as Parquet parts read exactly as they did as column files: every type, NULLs,
//! several parts, after reopening, with late rows arriving for them, converted back, across
//! schema changes, and after a crash in the middle of a conversion. A damaged file fails the
//! reads of its own partition only, naming it.

mod common;

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date64Array, Float32Array, Float64Array, Int8Array,
    Int16Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use common::*;
use sundial_storage::{ColumnType, ConvertTo, PartFormat, PartitionBy, Snapshot, Table, TableDef};

const BASE_TS: i64 = 1_451_606_400_000_000_000; // 2016-01-01
const DAY_NS: i64 = 24 * HOUR_NS;
const CHILD_ENV: &str = "SUNDIAL_PARQUET_CRASH_CHILD";

fn def(name: &str) -> TableDef {
    TableDef {
        name: name.into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by: PartitionBy::Day,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    }
}

fn rows(rng: &mut Rng, days: i64, n: u64, serial: u64) -> Vec<Row> {
    rows_in_days(rng, BASE_TS, days, n, serial)
}

fn day(n: i64) -> i64 {
    BASE_TS + n * DAY_NS
}

/// The formats of each partition's parts, by day from `BASE_TS`.
fn formats(snapshot: &Snapshot) -> Vec<(i64, Vec<&'static str>)> {
    let mut out: Vec<(i64, Vec<&'static str>)> = Vec::new();
    for p in snapshot.partitions() {
        let d = (p.key - BASE_TS) / DAY_NS;
        match out.last_mut() {
            Some((k, f)) if *k == d => f.push(p.format.name()),
            _ => out.push((d, vec![p.format.name()])),
        }
    }
    out
}

/// Every way of reading a partition gives the same answer: whole, in pieces crossing row
/// groups, picked rows, NULL counts and timestamp ranges, against the model's rows of it.
fn check_reads(snapshot: &Snapshot, model: &[Row], context: &str) {
    assert_rows(&read_all(snapshot), &expected(model), context);
    let meta = snapshot.meta();
    let v = meta.column_index("v").unwrap();
    let all: Vec<usize> = (0..meta.columns.len()).collect();
    for (p, part) in snapshot.partitions().iter().enumerate() {
        let n = part.row_count;
        let whole = snapshot.read_batch(p, &all, 0..n).unwrap();
        // Empty ranges, at the start and at the end, read as no rows.
        for at in [0, n] {
            assert_eq!(snapshot.read_batch(p, &all, at..at).unwrap().num_rows(), 0);
        }
        // NULL counts of whole row groups come from their statistics.
        for c in 0..all.len() {
            let nulls = snapshot.null_count(p, c, 0..n).unwrap();
            assert_eq!(
                nulls,
                whole.column(c).null_count() as u64,
                "{context}: column {c}"
            );
        }
        // Pieces of 777 rows, each read on its own, make the whole.
        let mut from = 0;
        while from < n {
            let to = (from + 777).min(n);
            let piece = snapshot.read_batch(p, &all, from..to).unwrap();
            assert_eq!(
                piece,
                whole.slice(from as usize, (to - from) as usize),
                "{context}"
            );
            let nulls = snapshot.null_count(p, v, from..to).unwrap();
            assert_eq!(nulls, piece.column(v).null_count() as u64, "{context}");
            from = to;
        }
        let picks: Vec<u32> = (0..n as u32).filter(|r| r % 97 == 3).collect();
        let picked = snapshot.read_batch_picked(p, &all, &picks).unwrap();
        let indices = arrow_array::UInt32Array::from(picks.clone());
        for c in 0..all.len() {
            let want = arrow_select::take::take(whole.column(c), &indices, None).unwrap();
            assert_eq!(picked.column(c), &want, "{context}: picked column {c}");
        }
        if n > 2 {
            let ts = whole.column(0);
            let ts = ts
                .as_any()
                .downcast_ref::<TimestampNanosecondArray>()
                .unwrap();
            let (lo, hi) = (ts.value(1), ts.value(n as usize - 1));
            let range = snapshot.rows_in_range(p, Some(lo), Some(hi)).unwrap();
            let want = ts.values().partition_point(|t| *t < lo) as u64
                ..ts.values().partition_point(|t| *t < hi) as u64;
            assert_eq!(range, want, "{context}");
        }
        for c in 0..all.len() {
            let zones = snapshot.zones(p, c).unwrap();
            assert_eq!(
                zones.len() as u64,
                n / sundial_storage::ZONE_ROWS,
                "{context}"
            );
        }
    }
}

#[test]
fn parquet_partitions_read_as_native_ones_and_convert_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut rng = Rng(0x5EED);
    let mut model = Vec::new();
    {
        let db = open_db(&path, options());
        let table = db.create_table(def("t"), false).unwrap();
        // Four days in several commits, in random order; the last one's rows fall among
        // each day's rows late in the day: partitions of several parts.
        for round in 0..3 {
            let mut batch = rows(&mut rng, 4, 6000, round * 10_000);
            batch.retain(|r| (r.ts - BASE_TS) % DAY_NS / HOUR_NS != 16);
            commit(&table, &batch);
            model.extend(batch);
        }
        let mut batch = rows(&mut rng, 4, 3000, 90_000);
        for r in &mut batch {
            r.ts = (r.ts - BASE_TS) / DAY_NS * DAY_NS + BASE_TS + 16 * HOUR_NS + r.ts % HOUR_NS;
        }
        commit(&table, &batch);
        model.extend(batch);
        let before = read_all(&table.snapshot());
        assert!(table.snapshot().partitions().len() > 4, "several parts");
        for d in [0, 2] {
            assert!(
                table
                    .convert_partition(day(d), ConvertTo::Parquet, &small_row_groups())
                    .unwrap()
            );
        }
        // Converting again changes nothing.
        assert!(
            !table
                .convert_partition(day(0), ConvertTo::Parquet, &small_row_groups())
                .unwrap()
        );
        let snapshot = table.snapshot();
        assert_eq!(formats(&snapshot)[0], (0, vec!["parquet"]));
        assert_eq!(formats(&snapshot)[2], (2, vec!["parquet"]));
        assert_rows(&read_all(&snapshot), &before, "converted");
        check_reads(&snapshot, &model, "converted");
        // The newest partition still takes rows: it stays native.
        let newest = table.convert_partition(day(3), ConvertTo::Parquet, &small_row_groups());
        assert!(format!("{}", newest.unwrap_err()).contains("newest"));
    }
    // Reopened: the Parquet parts are committed, the native versions gone.
    let db = open_db(&path, options());
    let table = db.table("t").unwrap();
    check_reads(&table.snapshot(), &model, "reopened");
    let old_dirs = std::fs::read_dir(table.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("2016-01-01.")
        })
        .count();
    assert_eq!(old_dirs, 1, "one version of the converted day is left");

    // Late rows for a Parquet partition: after its newest row, and among its rows.
    // Among its last rows, after its newest, and in other days.
    let mut late = rows(&mut rng, 4, 300, 900_000);
    for r in &mut late[..100] {
        r.ts = day(1) - 1 - rng.below(20 * 60 * 1_000_000_000) as i64;
    }
    for r in &mut late[100..] {
        r.ts = day(1) + (r.ts - BASE_TS) / 4 * 3;
    }
    commit(&table, &late);
    model.extend(late);
    let snapshot = table.snapshot();
    let first_day = &formats(&snapshot)[0];
    assert_eq!(
        first_day.1[0], "parquet",
        "a prefix stays Parquet: {first_day:?}"
    );
    assert!(
        first_day.1.len() > 1,
        "late rows went beside it: {first_day:?}"
    );
    check_reads(&snapshot, &model, "late rows");

    // Schema changes across formats.
    {
        let mut w = table.writer().unwrap();
        w.add_column("extra", ColumnType::Long).unwrap();
        w.rename_column("s", "text").unwrap();
        w.rename_column("text", "s").unwrap();
    }
    let snapshot = table.snapshot();
    let extra = snapshot.meta().column_index("extra").unwrap();
    for p in 0..snapshot.partitions().len() {
        let n = snapshot.partitions()[p].row_count;
        assert_eq!(snapshot.null_count(p, extra, 0..n).unwrap(), n);
    }
    check_reads(&snapshot, &model, "after ADD COLUMN");
    // Converted again with the new column, then everything back to native.
    assert!(
        table
            .convert_partition(day(0), ConvertTo::Parquet, &small_row_groups())
            .unwrap()
    );
    check_reads(&table.snapshot(), &model, "converted again");
    for d in 0..4 {
        table
            .convert_partition(day(d), ConvertTo::Native, &small_row_groups())
            .unwrap();
    }
    let snapshot = table.snapshot();
    assert!(
        snapshot
            .partitions()
            .iter()
            .all(|p| p.format == PartFormat::Native)
    );
    check_reads(&snapshot, &model, "back to native");
    drop(snapshot);
    drop(table);
    drop(db);
    let db = open_db(&path, options());
    check_reads(
        &db.table("t").unwrap().snapshot(),
        &model,
        "reopened native",
    );
}

/// One column of every type, with NULLs, through a Parquet part and back.
#[test]
fn every_column_type_survives_the_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path(), options());
    let types = [
        ("ts", ColumnType::Timestamp),
        ("bo", ColumnType::Boolean),
        ("by", ColumnType::Byte),
        ("sh", ColumnType::Short),
        ("i", ColumnType::Int),
        ("l", ColumnType::Long),
        ("f", ColumnType::Float),
        ("d", ColumnType::Double),
        ("t2", ColumnType::Timestamp),
        ("da", ColumnType::Date),
        ("sy", ColumnType::Symbol),
        ("v", ColumnType::Varchar),
        ("u", ColumnType::Uuid),
        ("bi", ColumnType::Binary),
    ];
    let table = db
        .create_table(
            TableDef {
                name: "all".into(),
                columns: types.iter().map(|(n, t)| (n.to_string(), *t)).collect(),
                timestamp: Some("ts".into()),
                partition_by: PartitionBy::Day,
                indexed: vec!["sy".into()],
                dedup_keys: Vec::new(),
                ttl: None,
                cold_after: None,
            },
            false,
        )
        .unwrap();
    let n = 5000usize;
    let some = |i: usize| i % 7 != 3;
    let ts = TimestampNanosecondArray::from_iter_values(
        (0..n).map(|i| BASE_TS + (i as i64) * 2 * DAY_NS / n as i64),
    );
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ts),
        Arc::new(BooleanArray::from_iter(
            (0..n).map(|i| some(i).then_some(i % 3 == 0)),
        )),
        Arc::new(Int8Array::from_iter(
            (0..n).map(|i| some(i).then_some(i as i8)),
        )),
        Arc::new(Int16Array::from_iter(
            (0..n).map(|i| some(i).then_some((i as i16).wrapping_mul(7))),
        )),
        Arc::new(Int32Array::from_iter(
            (0..n).map(|i| some(i).then_some((i as i32).wrapping_mul(-31))),
        )),
        Arc::new(Int64Array::from_iter(
            (0..n).map(|i| some(i).then_some((i as i64) << 33)),
        )),
        Arc::new(Float32Array::from_iter(
            (0..n).map(|i| some(i).then_some(i as f32 / 3.0)),
        )),
        Arc::new(Float64Array::from_iter(
            (0..n).map(|i| some(i).then_some(i as f64 * 1.5)),
        )),
        Arc::new(TimestampNanosecondArray::from_iter(
            (0..n).map(|i| some(i).then_some(BASE_TS - i as i64 * 1_000_003)),
        )),
        Arc::new(Date64Array::from_iter(
            (0..n).map(|i| some(i).then_some(1_451_606_400_123 + i as i64)),
        )),
        Arc::new(StringArray::from_iter(
            (0..n).map(|i| some(i).then(|| format!("s{}", i % 13))),
        )),
        Arc::new(StringArray::from_iter(
            (0..n).map(|i| some(i).then(|| "é".repeat(i % 5))),
        )),
        Arc::new(StringArray::from_iter((0..n).map(|i| {
            some(i).then(|| format!("12345678-1234-5678-9abc-{:012x}", i * 977))
        }))),
        Arc::new(BinaryArray::from_iter(
            (0..n).map(|i| some(i).then(|| vec![i as u8; i % 4])),
        )),
    ];
    let fields: Vec<Field> = types
        .iter()
        .zip(&columns)
        .map(|((name, _), a)| Field::new(*name, a.data_type().clone(), true))
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let mut w = table.writer().unwrap();
    w.append(&batch).unwrap();
    w.commit().unwrap();
    drop(w);
    let all: Vec<usize> = (0..types.len()).collect();
    let read = |t: &Table| {
        let s = t.snapshot();
        s.read_batch(0, &all, 0..s.partitions()[0].row_count)
            .unwrap()
    };
    let native = read(&table);
    table
        .convert_partition(BASE_TS, ConvertTo::Parquet, &small_row_groups())
        .unwrap();
    assert!(table.snapshot().partitions()[0].format.is_parquet());
    assert_eq!(read(&table), native);
    assert_eq!(
        native.schema().field(0).data_type(),
        &DataType::Timestamp(TimeUnit::Nanosecond, None)
    );
    table
        .convert_partition(BASE_TS, ConvertTo::Native, &small_row_groups())
        .unwrap();
    assert_eq!(read(&table), native);
}

/// A truncated or overwritten Parquet file: reads of its partition fail, naming the partition's
/// directory; the table still opens and its other partitions read.
#[test]
fn a_damaged_parquet_file_fails_only_its_partition() {
    for damage in ["truncate", "scribble", "remove"] {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Rng(9);
        let model = rows(&mut rng, 3, 4000, 0);
        {
            let db = open_db(dir.path(), options());
            let table = db.create_table(def("t"), false).unwrap();
            commit(&table, &model);
            table
                .convert_partition(day(0), ConvertTo::Parquet, &small_row_groups())
                .unwrap();
            let file = table.path().join(format!(
                "2016-01-01.{}/data.parquet",
                table.snapshot().partitions()[0].version
            ));
            let len = std::fs::metadata(&file).unwrap().len();
            match damage {
                "truncate" => {
                    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
                    f.set_len(len / 2).unwrap();
                }
                "scribble" => {
                    use std::os::unix::fs::FileExt;
                    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
                    for at in (4..len - 8).step_by(97) {
                        f.write_all_at(&[0xA5; 13], at).unwrap();
                    }
                }
                _ => std::fs::remove_file(&file).unwrap(),
            }
        }
        let db = open_db(dir.path(), options());
        let table = db.table("t").unwrap();
        let snapshot = table.snapshot();
        let first = snapshot.partitions()[0].row_count;
        let err = snapshot
            .read_column(0, 3, 0..first)
            .unwrap_err()
            .to_string();
        assert!(err.contains("2016-01-01."), "{damage}: {err}");
        for p in 1..snapshot.partitions().len() {
            let n = snapshot.partitions()[p].row_count;
            snapshot.read_column(p, 3, 0..n).unwrap();
        }
    }
}

/// The converting child: converts day partitions to Parquet and back, forever, printing the
/// number of each finished conversion.
#[test]
fn parquet_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    use std::io::Write;
    let db = open_db(std::path::Path::new(&dir), options());
    let table = db.table("t").unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        let d = (i % 3) as i64;
        let to = if (i / 3) % 2 == 0 {
            ConvertTo::Parquet
        } else {
            ConvertTo::Native
        };
        table
            .convert_partition(day(d), to, &small_row_groups())
            .unwrap();
        writeln!(out, "{i}").unwrap();
        out.flush().unwrap();
    }
}

/// Killed at any point of converting partitions either way, the table reopens with every row,
/// each partition wholly in one format or the other.
#[test]
fn killed_while_converting_reopens_with_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0xC0FFEE);
    let model = rows(&mut rng, 4, 30_000, 0);
    {
        let db = open_db(dir.path(), options());
        let table = db.create_table(def("t"), false).unwrap();
        commit(&table, &model);
    }
    let mut converted = 0;
    for iteration in 0..12 {
        let env = [(CHILD_ENV, dir.path().as_os_str())];
        let delay = std::time::Duration::from_millis(50 + rng.below(300));
        if run_and_kill("parquet_crash_child", &env, delay).is_some() {
            converted += 1;
        }
        let db = open_db(dir.path(), options());
        let table = db.table("t").unwrap();
        let snapshot = table.snapshot();
        check_reads(&snapshot, &model, &format!("iteration {iteration}"));
        for (d, parts) in formats(&snapshot) {
            assert!(
                parts.len() == 1 || parts.iter().all(|f| *f == "native"),
                "{d}: {parts:?}"
            );
        }
        // No directory but the committed versions, the symbol directory and the slots.
        let entries = std::fs::read_dir(table.path()).unwrap().count();
        assert_eq!(
            entries,
            snapshot.partitions().len() + 3,
            "iteration {iteration}"
        );
    }
    assert!(converted > 0, "no conversion finished before a kill");
}

/// `COLD AFTER` converts the partitions that much older than the newest row, but the newest;
/// late rows beside a Parquet part are merged back into one by the next check; the setting is
/// kept across reopening and removed with `None`.
#[test]
fn cold_after_converts_old_partitions_and_merges_late_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0xC01D);
    let mut model = rows(&mut rng, 5, 10_000, 0);
    let one_day = sundial_storage::Ttl {
        count: 1,
        unit: sundial_storage::TtlUnit::Day,
    };
    {
        let db = open_db(dir.path(), options());
        let table = db
            .create_table(
                TableDef {
                    cold_after: Some(one_day),
                    ..def("t")
                },
                false,
            )
            .unwrap();
        commit(&table, &model);
        // The newest row is late on day 4: days 0-2 end a day before it, day 3 does not.
        let converted = table.convert_cold(&small_row_groups()).unwrap();
        assert_eq!(converted, 3);
        let snapshot = table.snapshot();
        let kinds: Vec<Vec<&str>> = formats(&snapshot).into_iter().map(|(_, f)| f).collect();
        assert_eq!(
            kinds,
            [
                ["parquet"],
                ["parquet"],
                ["parquet"],
                ["native"],
                ["native"]
            ]
        );
        check_reads(&snapshot, &model, "cold");
        assert_eq!(table.convert_cold(&small_row_groups()).unwrap(), 0);
    }
    let db = open_db(dir.path(), options());
    let table = db.table("t").unwrap();
    assert_eq!(table.meta().cold_after, Some(one_day));
    // Late rows after day 1's newest row: a native part beside its Parquet one, merged back.
    let mut late = rows(&mut rng, 1, 50, 500_000);
    for r in &mut late {
        r.ts = day(2) - 1 - rng.below(60_000_000_000) as i64;
    }
    commit(&table, &late);
    model.extend(late);
    assert_eq!(formats(&table.snapshot())[1].1, ["parquet", "native"]);
    assert_eq!(table.convert_cold(&small_row_groups()).unwrap(), 1);
    assert_eq!(formats(&table.snapshot())[1].1, ["parquet"]);
    check_reads(&table.snapshot(), &model, "late rows merged");
    table.writer().unwrap().set_cold_after(None).unwrap();
    assert_eq!(table.meta().cold_after, None);
    // Not on a table without partitions.
    let plain = db
        .create_table(
            TableDef {
                partition_by: PartitionBy::None,
                cold_after: Some(one_day),
                ..def("plain")
            },
            false,
        )
        .unwrap_err();
    assert!(plain.to_string().contains("COLD AFTER"), "{plain}");
}
