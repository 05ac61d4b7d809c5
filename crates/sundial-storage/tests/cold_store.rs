//! Parquet partitions in a cold store (a `file://` directory here; the end-to-end tests use an
//! S3 server): uploaded by conversion, downloaded on read into a bounded local cache, deleted
//! with the versions that replace them; a crash mid-conversion leaves every row and no object
//! that a reopened table does not clean up; an unreachable store fails only the reads of its
//! partitions.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use sundial_storage::{ColdStoreOptions, ConvertTo, PartitionBy, StorageOptions, Table, TableDef};

const BASE_TS: i64 = 1_451_606_400_000_000_000; // 2016-01-01
const DAY_NS: i64 = 24 * HOUR_NS;
const CHILD_ENV: &str = "SUNDIAL_COLD_STORE_CRASH_CHILD";

fn store_options(store: &Path, cache_bytes: u64) -> StorageOptions {
    StorageOptions {
        cold_store: Some(ColdStoreOptions {
            url: format!("file://{}", store.display()),
            settings: Vec::new(),
            cache_bytes,
        }),
        ..options()
    }
}

fn def() -> TableDef {
    TableDef {
        name: "t".into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by: PartitionBy::Day,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    }
}

fn rows(seed: u64, days: i64, n: u64) -> Vec<Row> {
    rows_in_days(&mut Rng(seed), BASE_TS, days, n, 0)
}

/// Every `data.parquet` under `dir`, as paths relative to it.
fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "data.parquet") {
                out.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// The objects the table's remote parts name, relative to the store.
fn live_objects(table: &Table) -> Vec<PathBuf> {
    let snapshot = table.snapshot();
    let dir = table
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace('~', "-");
    let mut out: Vec<PathBuf> = snapshot
        .partitions()
        .iter()
        .filter(|p| {
            matches!(
                p.format,
                sundial_storage::PartFormat::Parquet { remote: true, .. }
            )
        })
        .map(|p| {
            PathBuf::from(&dir)
                .join(format!(
                    "2016-01-{:02}.{}",
                    (p.key - BASE_TS) / DAY_NS + 1,
                    p.version
                ))
                .join("data.parquet")
        })
        .collect();
    out.sort();
    out
}

/// Waits (deletes run in the background) until the store holds exactly the live objects.
fn await_store(store: &Path, table: &Table) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (have, want) = (parquet_files(store), live_objects(table));
        if have == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "store holds {have:?}, the table names {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Deletes the local copies of the table's Parquet files.
fn drop_local_copies(table: &Table) {
    for f in parquet_files(table.path()) {
        std::fs::remove_file(table.path().join(f)).unwrap();
    }
}

#[test]
fn remote_partitions_are_uploaded_cached_in_bounds_and_deleted_with_their_versions() {
    let dir = tempfile::tempdir().unwrap();
    let (data, store) = (dir.path().join("data"), dir.path().join("store"));
    let model = rows(1, 4, 12_000);
    // Room for about one local copy.
    let cache_bytes = 150_000;
    {
        let db = open_db(&data, store_options(&store, cache_bytes));
        let table = db.create_table(def(), false).unwrap();
        commit(&table, &model);
        for d in 0..3 {
            let key = BASE_TS + d * DAY_NS;
            assert!(
                table
                    .convert_partition(key, ConvertTo::Parquet, &small_row_groups())
                    .unwrap()
            );
        }
        await_store(&store, &table);
        assert_eq!(parquet_files(&store).len(), 3);
        let location = table.snapshot().part_location(0).unwrap();
        assert!(location.starts_with("file://"), "{location}");
        assert_rows(&read_all(&table.snapshot()), &expected(&model), "uploaded");
        // Without local copies, reads download them; the copies kept stay within the bound
        // (plus the one just opened).
        drop_local_copies(&table);
        assert_rows(
            &read_all(&table.snapshot()),
            &expected(&model),
            "downloaded",
        );
        let one_file = std::fs::metadata(store.join(&parquet_files(&store)[0]))
            .unwrap()
            .len();
        let cached = db.cold_cached_bytes().unwrap();
        assert!(
            cached <= cache_bytes.max(one_file * 2),
            "{cached} bytes cached"
        );
        assert!(parquet_files(table.path()).len() < 3, "copies were evicted");
        assert_rows(
            &read_all(&table.snapshot()),
            &expected(&model),
            "evicted and read again",
        );
        // Back to native: the object goes with the version.
        table
            .convert_partition(BASE_TS, ConvertTo::Native, &small_row_groups())
            .unwrap();
        await_store(&store, &table);
        assert_eq!(parquet_files(&store).len(), 2);
    }
    // Stray objects (a crash between upload and commit) go at open: of an old version, of a
    // version past every one the transactions record, and of a table id past the last one.
    let table_dir = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().replace('~', "-"))
        .find(|n| n.starts_with("t-"))
        .unwrap();
    for (table, part) in [
        (table_dir.as_str(), "2016-01-02.1"),
        (table_dir.as_str(), "2016-01-02.100000"),
        ("t-100000", "2016-01-02.1"),
    ] {
        let stray = store.join(table).join(part).join("data.parquet");
        std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
        std::fs::write(&stray, b"not a partition").unwrap();
    }
    let db = open_db(&data, store_options(&store, cache_bytes));
    let table = db.table("t").unwrap();
    drop_local_copies(&table);
    assert_rows(&read_all(&table.snapshot()), &expected(&model), "reopened");
    await_store(&store, &table);
    // Dropping the table deletes its objects.
    drop(table);
    db.drop_table("t").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !parquet_files(&store).is_empty() {
        assert!(
            Instant::now() < deadline,
            "{:?} left",
            parquet_files(&store)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// With the store out of reach, reads of remote partitions fail naming the store, native
/// partitions read, and rows still commit; conversions fail and change nothing.
#[test]
fn an_unreachable_cold_store_fails_only_its_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let (data, store) = (dir.path().join("data"), dir.path().join("store"));
    let model = rows(2, 3, 6_000);
    {
        let db = open_db(&data, store_options(&store, 1 << 30));
        let table = db.create_table(def(), false).unwrap();
        commit(&table, &model);
        table
            .convert_partition(BASE_TS, ConvertTo::Parquet, &small_row_groups())
            .unwrap();
        drop_local_copies(&table);
    }
    // An S3 endpoint nothing listens on.
    let unreachable = StorageOptions {
        cold_store: Some(ColdStoreOptions {
            url: "s3://bucket/prefix".into(),
            settings: vec![
                ("aws_endpoint".into(), "http://127.0.0.1:9".into()),
                ("aws_allow_http".into(), "true".into()),
                ("aws_access_key_id".into(), "test".into()),
                ("aws_secret_access_key".into(), "test".into()),
                ("aws_region".into(), "us-east-1".into()),
            ],
            cache_bytes: 1 << 30,
        }),
        ..options()
    };
    let db = open_db(&data, unreachable);
    let table = db.table("t").unwrap();
    let snapshot = table.snapshot();
    let n = snapshot.partitions()[0].row_count;
    let err = snapshot.read_column(0, 2, 0..n).unwrap_err().to_string();
    assert!(err.contains("cold store s3://bucket/prefix"), "{err}");
    for p in 1..snapshot.partitions().len() {
        let n = snapshot.partitions()[p].row_count;
        snapshot.read_column(p, 2, 0..n).unwrap();
    }
    let late = rows(3, 3, 100)
        .into_iter()
        .map(|mut r| {
            r.ts = BASE_TS + 2 * DAY_NS + (r.ts - BASE_TS) / 3;
            r
        })
        .collect::<Vec<_>>();
    commit(&table, &late);
    assert_eq!(table.snapshot().row_count(), model.len() as u64 + 100);
    let err = table
        .convert_partition(BASE_TS + DAY_NS, ConvertTo::Parquet, &small_row_groups())
        .unwrap_err();
    assert!(err.to_string().contains("cold store"), "{err}");
    assert!(!table.snapshot().partitions()[1].format.is_parquet());
}

/// The converting child: converts day partitions to Parquet (uploading them) and back, forever.
#[test]
fn cold_store_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    use std::io::Write;
    let dir = PathBuf::from(dir);
    let db = open_db(dir.join("data"), store_options(&dir.join("store"), 1 << 30));
    let table = db.table("t").unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        let key = BASE_TS + (i % 3) as i64 * DAY_NS;
        let to = if (i / 3) % 2 == 0 {
            ConvertTo::Parquet
        } else {
            ConvertTo::Native
        };
        table
            .convert_partition(key, to, &small_row_groups())
            .unwrap();
        writeln!(out, "{i}").unwrap();
        out.flush().unwrap();
    }
}

/// Killed at any point of uploads and conversions, the table reopens with every row, and the
/// store ends up holding exactly the objects its parts name.
#[test]
fn killed_while_uploading_reopens_with_every_row_and_no_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let (data, store) = (dir.path().join("data"), dir.path().join("store"));
    let model = rows(4, 4, 30_000);
    {
        let db = open_db(&data, store_options(&store, 1 << 30));
        let table = db.create_table(def(), false).unwrap();
        commit(&table, &model);
    }
    let mut rng = Rng(0xBEEF);
    let mut finished = 0;
    for iteration in 0..10 {
        let env = [(CHILD_ENV, dir.path().as_os_str())];
        let delay = Duration::from_millis(50 + rng.below(300));
        if run_and_kill("cold_store_crash_child", &env, delay).is_some() {
            finished += 1;
        }
        let db = open_db(&data, store_options(&store, 1 << 30));
        let table = db.table("t").unwrap();
        if iteration % 2 == 0 {
            drop_local_copies(&table);
        }
        assert_rows(
            &read_all(&table.snapshot()),
            &expected(&model),
            &format!("iteration {iteration}"),
        );
        await_store(&store, &table);
    }
    assert!(finished > 0, "no conversion finished before a kill");
}
