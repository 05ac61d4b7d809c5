//! Directories whose entry lists a table's writer changed and that are not yet fsynced.
//!
//! `fsync` of a file makes its bytes durable, not its name: the name is an entry of its
//! directory, durable only once that directory is fsynced. A transaction slot reaches every
//! file it commits by name (table directory ─▶ partition directory or `_sym/` ─▶ file), so
//! with durability `sync` a commit must make each name on those paths durable before its slot.
//!
//! The writer records a directory here when it changes the directory's entries:
//!
//! * the table directory, when a partition directory (a new partition, or a new version of
//!   one written by an out-of-order merge) or `_sym/` is created in it;
//! * a partition directory, when it is new, when a column file in it gets its first rows (the
//!   files of a new partition, or of a column added by ADD COLUMN: created by that append),
//!   or when a validity file is renamed into it (its first NULL);
//! * `_sym/`, when a dictionary gets its first symbols (its files are created then).
//!
//! **Invariant** (durability `sync`): a transaction slot is written only after
//! [`UnsyncedDirs::sync_all`] fsynced every recorded directory, once each, partition
//! directories and `_sym/` before the table directory; the record is kept across rollbacks
//! until such a commit, so a name created by a discarded transaction and used by a later one is
//! still fsynced in time. Names left unsynced by an earlier process (a crash before its
//! commit, or another durability mode) are flushed by the `syncfs` with which opening a
//! database in `sync` mode ends. In other modes nothing is fsynced and the record is dropped at
//! each commit.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

/// The directories of one table whose entries changed since they were last fsynced.
#[derive(Debug, Default)]
pub(crate) struct UnsyncedDirs {
    dirs: BTreeSet<PathBuf>,
}

impl UnsyncedDirs {
    /// Records that `dir`'s entries changed.
    pub fn add(&mut self, dir: &Path) {
        if !self.dirs.contains(dir) {
            self.dirs.insert(dir.to_path_buf());
        }
    }

    /// Forgets `dir`: nothing will name it (a new directory the commit replaced).
    pub fn remove(&mut self, dir: &Path) {
        self.dirs.remove(dir);
    }

    /// Keeps only the directories `keep` accepts (after a rollback deleted some).
    pub fn retain(&mut self, keep: impl FnMut(&PathBuf) -> bool) {
        self.dirs.retain(keep);
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// Forgets every directory without fsyncing (durability other than `sync`).
    pub fn clear(&mut self) {
        self.dirs.clear();
    }

    /// Fsyncs every recorded directory once, children before parents (paths order by
    /// component, so a directory sorts before those under it), then forgets them. On error the
    /// record is kept whole: a later commit fsyncs them again.
    pub fn sync_all(&mut self) -> Result<()> {
        for dir in self.dirs.iter().rev() {
            sync_dir(dir)?;
        }
        #[cfg(test)]
        record::commit(self.dirs.iter().rev().cloned().collect());
        self.dirs.clear();
        Ok(())
    }
}

/// Flushes a directory entry list to stable storage.
pub(crate) fn sync_dir(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .at(path)
}

/// Test-only record of the directories each `sync` commit fsynced, per thread (a commit runs
/// on its caller's thread, so parallel tests do not see each other's commits).
#[cfg(test)]
pub(crate) mod record {
    use std::cell::RefCell;
    use std::path::PathBuf;

    thread_local! {
        static SYNCED: RefCell<Vec<Vec<PathBuf>>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn commit(dirs: Vec<PathBuf>) {
        SYNCED.with(|s| s.borrow_mut().push(dirs));
    }

    /// Per slot written since the last call (oldest first), the directories fsynced before it.
    pub(crate) fn take() -> Vec<Vec<PathBuf>> {
        SYNCED.with(|s| std::mem::take(&mut *s.borrow_mut()))
    }
}

/// Which directories a commit with durability `sync` fsyncs (power loss itself cannot be
/// simulated): exactly those whose entries it changed, each once, before its slot.
#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray};

    use super::record;
    use crate::{ColumnType, Database, Durability, PartitionBy, StorageOptions, Table, TableDef};

    const DAY_NS: i64 = 86_400_000_000_000;
    /// 2016-01-01T00:00:00Z.
    const BASE_NS: i64 = 1_451_606_400_000_000_000;

    fn open(dir: &Path, durability: Durability) -> Arc<Database> {
        let options = StorageOptions {
            durability,
            ..StorageOptions::default()
        };
        Database::open(dir, options).unwrap()
    }

    fn create(db: &Database) -> Arc<Table> {
        let def = TableDef {
            name: "t".into(),
            columns: vec![
                ("ts".into(), ColumnType::Timestamp),
                ("v".into(), ColumnType::Long),
                ("sym".into(), ColumnType::Symbol),
            ],
            timestamp: Some("ts".into()),
            partition_by: PartitionBy::Day,
            indexed: Vec::new(),
            dedup_keys: Vec::new(),
            ttl: None,
            cold_after: None,
        };
        db.create_table(def, false).unwrap()
    }

    /// Rows at `BASE_NS + ts_ns`, with values `v` (and, when given, column `name` too).
    fn rows(ts_ns: &[i64], v: &[Option<i64>], extra: Option<(&str, ArrayRef)>) -> RecordBatch {
        let ts = TimestampNanosecondArray::from_iter_values(ts_ns.iter().map(|t| BASE_NS + t));
        let mut columns: Vec<(&str, ArrayRef)> = vec![
            ("ts", Arc::new(ts)),
            ("v", Arc::new(Int64Array::from(v.to_vec()))),
        ];
        columns.extend(extra);
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn commit(table: &Arc<Table>, batch: &RecordBatch) -> Vec<PathBuf> {
        let mut w = table.writer().unwrap();
        w.append(batch).unwrap();
        w.commit().unwrap();
        last_commit()
    }

    /// The directories the one slot written since the last call fsynced.
    fn last_commit() -> Vec<PathBuf> {
        let mut slots = record::take();
        assert_eq!(slots.len(), 1, "one slot written: {slots:?}");
        slots.remove(0)
    }

    /// The table's partition directories, by name.
    fn partition_dirs(table: &Table) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(table.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('_'))
            .collect();
        dirs.sort();
        dirs
    }

    #[test]
    fn a_new_partition_fsyncs_it_and_the_table_directory_and_appends_fsync_none() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), Durability::Sync);
        let table = create(&db);
        record::take();
        let synced = commit(&table, &rows(&[1, 2], &[Some(1), Some(2)], None));
        let day1 = partition_dirs(&table).remove(0);
        assert_eq!(synced, [day1.clone(), table.path().to_path_buf()]);
        // Rows after the committed ones, in the files already there: no entry changes.
        assert!(commit(&table, &rows(&[3], &[Some(3)], None)).is_empty());
        let synced = commit(&table, &rows(&[DAY_NS + 1], &[Some(4)], None));
        let day2 = partition_dirs(&table).remove(1);
        assert_ne!(day1, day2);
        assert_eq!(synced, [day2, table.path().to_path_buf()]);
    }

    #[test]
    fn the_first_rows_of_an_added_column_fsync_its_partition_directory() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), Durability::Sync);
        let table = create(&db);
        commit(&table, &rows(&[1], &[Some(1)], None));
        let mut w = table.writer().unwrap();
        w.add_column("x", ColumnType::Long).unwrap();
        drop(w);
        assert!(last_commit().is_empty(), "ADD COLUMN writes no file");
        let x: ArrayRef = Arc::new(Int64Array::from(vec![7]));
        let synced = commit(&table, &rows(&[2], &[Some(2)], Some(("x", x.clone()))));
        assert_eq!(synced, partition_dirs(&table));
        assert!(commit(&table, &rows(&[3], &[Some(3)], Some(("x", x)))).is_empty());
    }

    #[test]
    fn a_validity_file_renamed_into_place_fsyncs_its_directory_even_after_a_rollback() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), Durability::Sync);
        let table = create(&db);
        commit(&table, &rows(&[1], &[Some(1)], None));
        let day1 = partition_dirs(&table);
        // The first NULL of `v` creates `v`'s validity file; the rows are rolled back, the
        // file stays, and the commit that first counts a NULL in it fsyncs its name.
        let mut w = table.writer().unwrap();
        w.append(&rows(&[2], &[None], None)).unwrap();
        w.rollback();
        w.append(&rows(&[2], &[None], None)).unwrap();
        w.commit().unwrap();
        drop(w);
        assert_eq!(last_commit(), day1);
        assert!(commit(&table, &rows(&[3], &[None], None)).is_empty());
    }

    #[test]
    fn the_first_symbols_fsync_the_symbol_and_table_directories() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), Durability::Sync);
        let table = create(&db);
        commit(&table, &rows(&[1], &[Some(1)], None));
        let sym = |s: &str| -> Option<(&'static str, ArrayRef)> {
            Some(("sym", Arc::new(StringArray::from(vec![s.to_string()]))))
        };
        let synced = commit(&table, &rows(&[2], &[Some(2)], sym("a")));
        let sym_dir = table.path().join(crate::symbols::SYMBOL_DIR);
        // The partition's files of `sym` hold its NULL of the first commit already.
        assert_eq!(synced, [sym_dir, table.path().to_path_buf()]);
        assert!(commit(&table, &rows(&[3], &[Some(3)], sym("b"))).is_empty());
    }

    #[test]
    fn an_out_of_order_commit_fsyncs_the_new_version_and_the_table_directory() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), Durability::Sync);
        let table = create(&db);
        commit(&table, &rows(&[5], &[Some(5)], None));
        let synced = commit(&table, &rows(&[1], &[Some(1)], None));
        let rewritten = partition_dirs(&table);
        assert_eq!(
            rewritten.len(),
            1,
            "the old version is deleted: {rewritten:?}"
        );
        assert_eq!(synced, [rewritten[0].clone(), table.path().to_path_buf()]);
        // A new partition whose rows arrive out of order: only its merged version is named.
        let mut w = table.writer().unwrap();
        w.append(&rows(&[DAY_NS + 5], &[Some(1)], None)).unwrap();
        w.append(&rows(&[DAY_NS + 1], &[Some(1)], None)).unwrap();
        w.commit().unwrap();
        let day2 = partition_dirs(&table).remove(1);
        assert_eq!(last_commit(), [day2, table.path().to_path_buf()]);
    }

    #[test]
    fn other_durability_modes_fsync_no_directory() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), Durability::None);
        let table = create(&db);
        let mut w = table.writer().unwrap();
        w.append(&rows(&[1, DAY_NS], &[None, Some(1)], None))
            .unwrap();
        w.commit().unwrap();
        w.add_column("x", ColumnType::Long).unwrap();
        assert!(record::take().is_empty());
    }
}
