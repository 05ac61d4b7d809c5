//! Online backup (`Database::backup`): backups taken while another thread commits in-order and
//! out-of-order rows, adds a column, converts a partition to Parquet, truncates, and creates
//! and drops a table each
//! open as a database whose every table equals the model at one of its commits, and hold no
//! file the copy's transactions do not name; remote Parquet parts are copied in, so the copy
//! needs no cold store; hostile targets are refused; an interrupted backup is recognised;
//! a transaction of a newer format is refused, never rolled back past.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use sundial_storage::{
    BACKUP_INCOMPLETE, BACKUP_MANIFEST, ColdStoreOptions, ColumnType, ConvertTo, Database,
    PartitionBy, StorageError, TableDef,
};

const BASE_TS: i64 = 1_451_606_400_000_000_000; // 2016-01-01

fn def(name: &str) -> TableDef {
    TableDef {
        name: name.into(),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by: PartitionBy::Hour,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    }
}

/// What the writer thread did to table `t`, in commit order.
#[derive(Clone)]
enum Event {
    Rows(Vec<Row>),
    AddColumn,
    /// A conversion: no row changes.
    Convert,
    Truncate,
}

/// Every file under `dir`, relative, with its length (the data directory's `.lock` left out).
fn listing(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path.clone());
                out.push((path.strip_prefix(dir).unwrap().to_path_buf(), 0));
            } else if path.file_name().is_some_and(|n| n != ".lock") {
                let len = std::fs::metadata(&path).unwrap().len();
                out.push((path.strip_prefix(dir).unwrap().to_path_buf(), len));
            }
        }
    }
    out.sort();
    out
}

/// The model of `t` after the first `n` events: its rows and whether it has column `extra`.
fn model_at(events: &[Event], n: usize) -> (Vec<Row>, bool) {
    let mut rows = Vec::new();
    let mut extra = false;
    for e in &events[..n] {
        match e {
            Event::Rows(r) => rows.extend(r.iter().cloned()),
            Event::AddColumn => extra = true,
            Event::Convert => {}
            Event::Truncate => rows.clear(),
        }
    }
    (expected(&rows), extra)
}

#[test]
fn backups_taken_while_committing_open_at_one_commit_per_table() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let db = Database::open(&data, options()).unwrap();
    let t = db.create_table(def("t"), false).unwrap();
    let events = Arc::new(Mutex::new(Vec::<Event>::new()));
    let u_batches = Arc::new(Mutex::new(Vec::<Vec<Row>>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, t, events, u_batches, stop) = (
            db.clone(),
            t.clone(),
            events.clone(),
            u_batches.clone(),
            stop.clone(),
        );
        std::thread::spawn(move || {
            let mut rng = Rng(7);
            let mut serial = 0;
            let mut u = None;
            let mut i = 0u64;
            // At least enough events for every kind; then until the backups are done.
            while i < 40 || !stop.load(Ordering::Acquire) {
                // Random rows over six hours: most land before a partition's newest row,
                // so commits merge out-of-order rows into new parts. Once the first hour is
                // Parquet, rows go to later hours, so that its Parquet part stays.
                let base = if i > 20 { BASE_TS + HOUR_NS } else { BASE_TS };
                let rows: Vec<Row> = (0..200)
                    .map(|k| random_row(&mut rng, base, serial + k))
                    .collect();
                serial += 200;
                commit(&t, &rows);
                events.lock().unwrap().push(Event::Rows(rows));
                if i == 10 {
                    t.writer()
                        .unwrap()
                        .add_column("extra", ColumnType::Long)
                        .unwrap();
                    events.lock().unwrap().push(Event::AddColumn);
                }
                if i == 15 {
                    u = Some(db.create_table(def("u"), false).unwrap());
                }
                if i == 20 {
                    // The first hour; its late rows start native parts after the Parquet one.
                    t.convert_partition(BASE_TS, ConvertTo::Parquet, &small_row_groups())
                        .unwrap();
                    events.lock().unwrap().push(Event::Convert);
                }
                if i == 30 {
                    t.writer().unwrap().truncate().unwrap();
                    events.lock().unwrap().push(Event::Truncate);
                }
                if i == 34 {
                    db.drop_table("u").unwrap();
                    u = None;
                }
                if let Some(u) = &u {
                    let rows: Vec<Row> = (0..50)
                        .map(|k| random_row(&mut rng, BASE_TS, serial + k))
                        .collect();
                    serial += 50;
                    commit(u, &rows);
                    u_batches.lock().unwrap().push(rows);
                }
                i += 1;
            }
        })
    };
    let mut backups = Vec::new();
    for k in 0..7 {
        // Spread the backups over the writer's events.
        while events.lock().unwrap().len() < 8 * k {
            std::thread::yield_now();
        }
        let to = dir.path().join(format!("backup-{k}"));
        let report = db.backup(&to).unwrap();
        assert_eq!(report.path, to.canonicalize().unwrap());
        assert!(report.bytes > 0);
        backups.push((to, report));
    }
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    let events = events.lock().unwrap().clone();
    let u_batches = u_batches.lock().unwrap().clone();
    drop((t, db));
    let mut saw = (false, false, false);
    for (to, report) in backups {
        assert!(to.join(BACKUP_MANIFEST).exists());
        assert!(!to.join(BACKUP_INCOMPLETE).exists());
        let manifest = std::fs::read_to_string(to.join(BACKUP_MANIFEST)).unwrap();
        assert!(manifest.contains("\"transaction_format\": 6"), "{manifest}");
        let before = listing(&to);
        let copy = Database::open(&to, options()).unwrap();
        let t = copy.table("t").unwrap();
        let s = t.snapshot();
        let actual = read_all(&s);
        let has_extra = s.meta().column_index("extra").is_some();
        if s.partitions().iter().any(|p| p.format.is_parquet()) {
            // Parquet files never change: linked, not copied (one file system here).
            assert!(report.linked_bytes > 0, "{}", to.display());
            saw.2 = true;
        }
        let at = (0..=events.len())
            .find(|n| model_at(&events, *n) == (actual.clone(), has_extra))
            .unwrap_or_else(|| {
                panic!(
                    "{}: table t ({} rows, extra: {has_extra}) is no commit of the model",
                    to.display(),
                    actual.len()
                )
            });
        saw.0 |= events[..at].iter().any(|e| matches!(e, Event::AddColumn));
        let mut rows = actual.len() as u64;
        match copy.table("u") {
            Some(u) => {
                let actual = read_all(&u.snapshot());
                let n = (0..=u_batches.len())
                    .find(|n| expected(&u_batches[..*n].concat()) == actual)
                    .unwrap_or_else(|| panic!("{}: table u is no commit", to.display()));
                saw.1 |= n > 0;
                rows += actual.len() as u64;
            }
            None => assert_eq!(report.tables, 1),
        }
        assert_eq!(report.rows, rows);
        drop((t, copy));
        // Opening deletes every file no transaction names: there was none.
        assert_eq!(listing(&to), before, "{}", to.display());
    }
    assert!(
        saw.0 && saw.1 && saw.2,
        "the backups missed the schema change, table u or the Parquet part: {saw:?}"
    );
}

#[test]
fn remote_parquet_parts_are_copied_into_the_backup() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let with_store = sundial_storage::StorageOptions {
        cold_store: Some(ColdStoreOptions {
            url: format!("file://{}", store.display()),
            settings: Vec::new(),
            cache_bytes: 1 << 30,
        }),
        ..options()
    };
    let db = Database::open(dir.path().join("data"), with_store).unwrap();
    let t = db.create_table(def("t"), false).unwrap();
    let mut rng = Rng(11);
    let rows: Vec<Row> = (0..3000)
        .map(|k| random_row(&mut rng, BASE_TS, k))
        .collect();
    commit(&t, &rows);
    assert!(
        t.convert_partition(BASE_TS, ConvertTo::Parquet, &small_row_groups())
            .unwrap()
    );
    // The local copy evicted: the backup downloads the object.
    let part = t.snapshot().part_location(0).unwrap();
    assert!(part.starts_with("file://"), "{part}");
    for e in std::fs::read_dir(t.path()).unwrap() {
        let p = e.unwrap().path().join("data.parquet");
        if p.exists() {
            std::fs::remove_file(p).unwrap();
        }
    }
    let to = dir.path().join("backup");
    db.backup(&to).unwrap();
    drop((t, db));
    std::fs::remove_dir_all(&store).unwrap();
    // Opened without any cold store: every part is local.
    let copy = Database::open(&to, options()).unwrap();
    let s = copy.table("t").unwrap().snapshot();
    assert!(s.partitions().iter().any(|p| p.format.is_parquet()));
    for i in 0..s.partitions().len() {
        assert!(!s.part_location(i).unwrap().starts_with("file://"));
    }
    assert_rows(&read_all(&s), &expected(&rows), "remote part copied");
}

#[test]
fn hostile_targets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let db = Database::open(&data, options()).unwrap();
    let t = db.create_table(def("t"), false).unwrap();
    let mut rng = Rng(3);
    let rows: Vec<Row> = (0..10).map(|k| random_row(&mut rng, BASE_TS, k)).collect();
    commit(&t, &rows);
    let refused = |to: &Path, what: &str| {
        let e = db.backup(to).unwrap_err();
        assert!(
            e.to_string().contains(what),
            "{}: '{e}' lacks '{what}'",
            to.display()
        );
        e
    };
    refused(Path::new("relative/backup"), "must be an absolute path");
    refused(&data, "inside the data directory");
    refused(&data.join("sub/deeper"), "inside the data directory");
    assert!(!data.join("sub").exists(), "nothing is created inside");
    refused(&dir.path().join("x/../data/b"), "must not contain '..'");
    // Through a symbolic link into the data directory.
    std::os::unix::fs::symlink(&data, dir.path().join("link")).unwrap();
    refused(&dir.path().join("link/b"), "inside the data directory");
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("f"), b"x").unwrap();
    let e = refused(&full, "exists and is not empty");
    assert!(matches!(e, StorageError::AlreadyExists(_)));
    assert_eq!(
        std::fs::read(full.join("f")).unwrap(),
        b"x",
        "left as it was"
    );
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    refused(&file, "is not a directory");
    refused(&file.join("below"), "");
    // An empty directory is taken, once.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let report = db.backup(&empty).unwrap();
    assert_eq!((report.tables, report.rows), (1, 10));
    refused(&empty, "exists and is not empty");
    // An unwritable place (root ignores permissions: then there is nothing to check).
    if unsafe { libc::geteuid() } != 0 {
        use std::os::unix::fs::PermissionsExt;
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let e = refused(&locked.join("b"), "Permission denied");
        assert!(matches!(e, StorageError::Io { .. }));
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // A backup of a backup's source still works after all that.
    db.backup(&dir.path().join("after")).unwrap();
}

#[test]
fn an_interrupted_backup_is_refused_until_its_marker_goes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("data"), options()).unwrap();
    let t = db.create_table(def("t"), false).unwrap();
    let mut rng = Rng(5);
    let rows: Vec<Row> = (0..100).map(|k| random_row(&mut rng, BASE_TS, k)).collect();
    commit(&t, &rows);
    let to = dir.path().join("backup");
    db.backup(&to).unwrap();
    drop((t, db));
    // What a backup killed before its manifest leaves: the marker.
    std::fs::write(to.join(BACKUP_INCOMPLETE), b"").unwrap();
    let e = Database::open(&to, options()).unwrap_err();
    assert!(e.to_string().contains("unfinished backup"), "{e}");
    std::fs::remove_file(to.join(BACKUP_INCOMPLETE)).unwrap();
    let copy = Database::open(&to, options()).unwrap();
    assert_rows(
        &read_all(&copy.table("t").unwrap().snapshot()),
        &expected(&rows),
        "after the marker went",
    );
}

/// Overwrites slot `_txn.{seq % 2}` of the table in `table_dir` with its own bytes in format
/// `format`, CRC recomputed.
fn rewrite_newest_slot_format(table_dir: &Path, format: u16) {
    let mut newest: Option<(u64, PathBuf, Vec<u8>)> = None;
    for slot in ["_txn.0", "_txn.1"] {
        let path = table_dir.join(slot);
        let bytes = std::fs::read(&path).unwrap();
        if bytes.len() < 24 {
            continue;
        }
        let seq = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
        if newest.as_ref().is_none_or(|(s, _, _)| seq > *s) {
            newest = Some((seq, path, bytes));
        }
    }
    let (_, path, mut bytes) = newest.unwrap();
    bytes[4..6].copy_from_slice(&format.to_le_bytes());
    let body = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_newer_transaction_format_is_refused_not_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let db = Database::open(&data, options()).unwrap();
    let t = db.create_table(def("t"), false).unwrap();
    for k in 0..3 {
        commit(&t, &[random_row(&mut Rng(k + 1), BASE_TS, k)]);
    }
    let table_dir = t.path().to_path_buf();
    drop((t, db));
    let before = listing(&data);
    rewrite_newest_slot_format(&table_dir, 99);
    let e = Database::open(&data, options()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("newer version of Sundial") && text.contains("format 99"),
        "{text}"
    );
    // Nothing was deleted or taken from the older slot.
    let after = listing(&data);
    assert_eq!(after.len(), before.len());
}
