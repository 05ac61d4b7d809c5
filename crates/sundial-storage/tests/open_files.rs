//! Many tables and partitions under a small descriptor limit: the database keeps at most
//! `open_files_max` column files open and `mapped_files_max` mapped, whatever it holds.
//!
//! One test in its own binary: it lowers the process's `RLIMIT_NOFILE` and counts the
//! process's descriptors and mappings, which other tests running alongside would disturb.

mod common;

use std::path::Path;

use common::*;
use sundial_storage::{Database, Durability, PartitionBy, StorageOptions, TableDef};

const TABLES: usize = 60;
const OPEN_FILES_MAX: usize = 16;
const MAPPED_FILES_MAX: usize = 32;
/// Far below what the tables' files need (each table writes about 30 files per round).
const RLIMIT_NOFILE: u64 = 128;

fn options(durability: Durability) -> StorageOptions {
    StorageOptions {
        durability,
        open_files_max: OPEN_FILES_MAX,
        mapped_files_max: MAPPED_FILES_MAX,
        ..StorageOptions::default()
    }
}

fn def(i: usize) -> TableDef {
    TableDef {
        name: format!("t{i}"),
        columns: columns(),
        timestamp: Some("ts".into()),
        partition_by: PartitionBy::Hour,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    }
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Mappings of files under `dir`.
fn mappings_under(dir: &Path) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let dir = dir.to_string_lossy();
    maps.lines().filter(|l| l.contains(dir.as_ref())).count()
}

fn set_descriptor_limit(soft: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write one rlimit through valid pointers.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = soft.min(limit.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
}

#[test]
fn many_tables_work_within_a_small_descriptor_limit() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = open_descriptors();
    set_descriptor_limit(RLIMIT_NOFILE);
    let mut models: Vec<Vec<Row>> = vec![Vec::new(); TABLES];
    {
        let db = Database::open(dir.path(), options(Durability::None)).unwrap();
        let tables: Vec<_> = (0..TABLES)
            .map(|i| db.create_table(def(i), false).unwrap())
            .collect();
        let mut rng = Rng(17);
        let base = 1_451_606_400_000_000_000i64;
        // Rounds over every table, so each table's files are evicted before it writes again;
        // the last round is out of order (merged into new partition versions).
        for round in 0..3i64 {
            for (i, table) in tables.iter().enumerate() {
                let start = base + if round == 2 { 0 } else { round * 3 * HOUR_NS };
                let rows: Vec<Row> = (0..40)
                    .map(|k| random_row(&mut rng, start, (round * 1000 + k) as u64))
                    .collect();
                let mut w = table.writer().unwrap();
                w.append(&batch(&rows)).unwrap();
                w.commit().unwrap();
                models[i].extend(rows);
            }
            let (files, maps) = db.cached_files();
            assert!(
                files <= OPEN_FILES_MAX && maps <= MAPPED_FILES_MAX,
                "{files} {maps}"
            );
        }
        for (i, table) in tables.iter().enumerate() {
            assert_rows(
                &read_all(&table.snapshot()),
                &expected(&models[i]),
                &format!("t{i}"),
            );
        }
        let (files, maps) = db.cached_files();
        assert!(
            files <= OPEN_FILES_MAX && maps <= MAPPED_FILES_MAX,
            "{files} {maps}"
        );
        // Nothing else holds descriptors or mappings once no query runs.
        let extra = open_descriptors().saturating_sub(baseline);
        assert!(extra <= OPEN_FILES_MAX + 4, "{extra} descriptors opened");
        let mapped = mappings_under(dir.path());
        assert!(mapped <= MAPPED_FILES_MAX, "{mapped} mappings");
        // Dropping tables releases what the caches held of them.
        for i in 0..TABLES / 2 {
            db.drop_table(&format!("t{i}")).unwrap();
        }
        drop(tables);
        assert!(open_descriptors() <= baseline + OPEN_FILES_MAX + 4);
    }
    // Reopened with fsync on every commit: files evicted between write and sync are reopened.
    let db = Database::open(dir.path(), options(Durability::Sync)).unwrap();
    assert_eq!(db.table_names().len(), TABLES / 2);
    for (i, model) in models.iter().enumerate().skip(TABLES / 2) {
        let table = db.table(&format!("t{i}")).unwrap();
        assert_rows(&read_all(&table.snapshot()), &expected(model), "reopened");
    }
    let mut rng = Rng(99);
    let mut writers: Vec<_> = (TABLES / 2..TABLES / 2 + 6)
        .map(|i| db.table(&format!("t{i}")).unwrap().writer().unwrap())
        .collect();
    // Appends to six tables interleaved before any commits: more files than the cache holds.
    for (k, w) in writers.iter_mut().enumerate() {
        let rows: Vec<Row> = (0..30)
            .map(|j| random_row(&mut rng, 1_451_606_400_000_000_000, 5000 + j))
            .collect();
        w.append(&batch(&rows)).unwrap();
        models[TABLES / 2 + k].extend(rows);
    }
    for w in &mut writers {
        w.commit().unwrap();
    }
    drop(writers);
    drop(db);
    let db = Database::open(dir.path(), options(Durability::None)).unwrap();
    for (i, model) in models.iter().enumerate().skip(TABLES / 2) {
        let table = db.table(&format!("t{i}")).unwrap();
        assert_rows(
            &read_all(&table.snapshot()),
            &expected(model),
            &format!("t{i} reopened after synced commits"),
        );
    }
}
