//! The database: a data directory of tables, its lock, and the table catalog.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use crate::cache::FileCache;
use crate::cold_store::ColdStore;
use crate::dedup::set_dedup_keys;
use crate::error::{IoContext, Result, StorageError};
use crate::files::{DROPPED_PREFIX, remove_trash, sync_dir};
use crate::partition::PartitionBy;
use crate::table::{Durability, StorageOptions, Table, check_indexable};
use crate::ttl::Ttl;
use crate::txn::{ColumnMeta, DEFINITION_BYTES_MAX, TableKind, TableMeta};
use crate::types::ColumnType;
use crate::validate_name;

const LOCK_FILE: &str = ".lock";
const CREATING_PREFIX: &str = ".creating-";

/// What `create_table` needs to know.
#[derive(Debug, Clone)]
pub struct TableDef {
    pub name: String,
    pub columns: Vec<(String, ColumnType)>,
    /// The designated timestamp column (must be one of `columns`, of type TIMESTAMP).
    pub timestamp: Option<String>,
    pub partition_by: PartitionBy,
    /// SYMBOL columns (of `columns`) that get a symbol index.
    pub indexed: Vec<String>,
    /// `DEDUP UPSERT KEYS`: the designated timestamp and the columns that, with it, identify a
    /// row (empty: no deduplication). See [`TableMeta::dedup_keys`].
    pub dedup_keys: Vec<String>,
    /// Partitions older than this, counted back from the newest row capped at the wall clock
    /// (see `ttl.rs`), are dropped (see [`Database::enforce_ttl`]).
    pub ttl: Option<Ttl>,
    /// Partitions older than this, counted back as for `ttl`, are converted to Parquet (see
    /// [`Database::convert_cold`]).
    pub cold_after: Option<Ttl>,
}

/// An open data directory. One process at a time may hold it.
pub struct Database {
    root: PathBuf,
    options: Arc<StorageOptions>,
    /// Open column files and mappings of every table, within the options' bounds.
    cache: Arc<FileCache>,
    /// Where remote Parquet parts are kept (`StorageOptions::cold_store`).
    cold: Option<Arc<ColdStore>>,
    tables: RwLock<BTreeMap<String, Arc<Table>>>,
    /// Serialises CREATE / DROP / RENAME TABLE.
    ddl: Mutex<u64>,
    committed_since_sync: Arc<AtomicBool>,
    _lock: File,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("root", &self.root)
            .finish()
    }
}

fn catalog_key(name: &str) -> String {
    name.to_lowercase()
}

impl Database {
    /// Opens (creating if needed) a data directory, taking its lock and recovering every table.
    pub fn open(root: impl AsRef<Path>, options: StorageOptions) -> Result<Arc<Database>> {
        let root = root.as_ref().to_path_buf();
        std::fs::create_dir_all(&root).at(&root)?;
        let lock = lock_directory(&root)?;
        crate::backup::refuse_incomplete(&root)?;
        let cache = Arc::new(FileCache::new(
            options.open_files_max,
            options.mapped_files_max,
            options.decoded_cache_bytes,
        ));
        let cold = options
            .cold_store
            .as_ref()
            .map(ColdStore::open)
            .transpose()?;
        let options = Arc::new(options);
        let committed_since_sync = Arc::new(AtomicBool::new(false));
        let mut tables = BTreeMap::new();
        let mut max_id = 0u64;
        // Listed first: opening a table may rename its directory (a drop being finished).
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&root).at(&root)? {
            let entry = entry.at(&root)?;
            entries.push((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            ));
        }
        entries.sort();
        for (name, path) in entries {
            if let Some(id) = name.strip_prefix(CREATING_PREFIX) {
                // A CREATE TABLE that did not reach its rename: the table never existed.
                max_id = max_id.max(id.parse().unwrap_or(0));
                std::fs::remove_dir_all(&path).at(&path)?;
                continue;
            }
            if let Some(id) = name.strip_prefix(DROPPED_PREFIX) {
                // A DROP TABLE past its rename: finish deleting.
                max_id = max_id.max(id.parse().unwrap_or(0));
                remove_trash(&path)?;
                continue;
            }
            let Some((_, id)) = name.rsplit_once('~') else {
                continue;
            };
            let Ok(id) = id.parse::<u64>() else { continue };
            max_id = max_id.max(id);
            if let Some(table) = Table::open(
                path.clone(),
                options.clone(),
                cache.clone(),
                cold.clone(),
                committed_since_sync.clone(),
            )? && let Some(other) = tables.insert(catalog_key(&table.name()), table)
            {
                return Err(StorageError::corrupt(
                    &path,
                    format!(
                        "table '{}' is also in {}; only one table may have a name",
                        other.name(),
                        other.path().display()
                    ),
                ));
            }
        }
        if options.durability == Durability::Sync {
            // Names an earlier process created but never fsynced (files of a transaction it
            // did not commit, or everything under another durability mode) become durable
            // here; from now on each writer fsyncs the directories it changes
            // (`dir_sync.rs`) before a commit may name their files.
            sync_file_system(&root)?;
        }
        let db = Arc::new(Database {
            root,
            options,
            cache,
            cold,
            tables: RwLock::new(tables),
            ddl: Mutex::new(max_id + 1),
            committed_since_sync,
            _lock: lock,
        });
        if let Durability::Periodic { interval_ms } = db.options.durability {
            start_periodic_sync(Arc::downgrade(&db), interval_ms)?;
        }
        if db.options.cold_check_interval_ms > 0 {
            start_cold_conversion(Arc::downgrade(&db), db.options.cold_check_interval_ms)?;
        }
        // Every commit drops what its table's TTL expires; a crash may have come between.
        db.enforce_ttl();
        if let Some(cold) = &db.cold {
            db.remove_cold_orphans(cold, max_id + 1);
        }
        Ok(db)
    }

    /// Drops the partitions every table's TTL has expired (each table in a commit of its own,
    /// as `DROP PARTITION`); returns how many. A table that fails is logged and skipped. Commits
    /// do this for their table (see [`TableWriter::commit`](crate::TableWriter::commit)).
    pub fn enforce_ttl(&self) -> usize {
        let mut dropped = 0;
        for table in self.tables() {
            if table.meta().ttl.is_none() {
                continue;
            }
            match table.writer().and_then(|mut w| w.drop_expired()) {
                Ok(n) => dropped += n,
                Err(e) => tracing::error!(
                    "'{}': dropping expired partitions failed: {e}",
                    table.name()
                ),
            }
        }
        dropped
    }

    /// Converts the cold partitions of every table with `COLD AFTER` to Parquet (see
    /// [`Table::convert_cold`]); returns how many. A table that fails is logged and skipped.
    /// The database does this every `cold_check_interval_ms`.
    pub fn convert_cold(&self) -> usize {
        let options = crate::ParquetOptions::default();
        let mut converted = 0;
        for table in self.tables() {
            match table.convert_cold(&options) {
                Ok(n) => converted += n,
                Err(e) => tracing::error!(
                    "'{}': converting cold partitions to Parquet failed: {e}",
                    table.name()
                ),
            }
        }
        converted
    }

    /// Starts deleting the cold store's objects no table names. An object is an orphan when no
    /// part committed at open names it and nothing in this process can still write it: its
    /// version (or its table's id) was allocated before open, or is claimed now so that it is
    /// never allocated. Versions past those the transaction records are not enough: a crash
    /// between allocating a version, uploading its file and committing leaves such objects.
    fn remove_cold_orphans(self: &Arc<Self>, cold: &Arc<ColdStore>, tables_end: u64) {
        let mut live = std::collections::HashSet::new();
        let mut tables = std::collections::HashMap::new();
        for table in self.tables() {
            let (dir, next, parts) = table.cold_parts();
            live.extend(parts.into_iter().map(|p| (dir.clone(), p)));
            tables.insert(dir, (next, Arc::downgrade(&table)));
        }
        let db = Arc::downgrade(self);
        cold.remove_orphans(move |table, part| {
            if live.contains(&(table.to_string(), part.to_string())) {
                return false;
            }
            let number_after =
                |s: &str, sep: char| s.rsplit_once(sep).and_then(|(_, n)| n.parse::<u64>().ok());
            match tables.get(table) {
                Some((next, t)) => number_after(part, '.')
                    .is_some_and(|v| v < *next || t.upgrade().is_some_and(|t| t.claim_version(v))),
                None => number_after(table, '-').is_some_and(|id| {
                    id < tables_end || db.upgrade().is_some_and(|db| db.claim_table_id(id))
                }),
            }
        });
    }

    /// Makes sure table id `id` is never given to a table this process creates; false if it
    /// may have been already.
    fn claim_table_id(&self, id: u64) -> bool {
        let Ok(mut next_id) = self.ddl.lock() else {
            return false;
        };
        if *next_id > id {
            return false;
        }
        *next_id = id + 1;
        true
    }

    /// Bytes of local copies of remote Parquet files kept now (`None` without a cold store).
    pub fn cold_cached_bytes(&self) -> Option<u64> {
        self.cold.as_ref().map(|c| c.cached_bytes())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn options(&self) -> &StorageOptions {
        &self.options
    }

    /// A table by name (case-insensitive).
    pub fn table(&self, name: &str) -> Option<Arc<Table>> {
        self.tables
            .read()
            .ok()
            .and_then(|t| t.get(&catalog_key(name)).cloned())
    }

    /// Every table, ordered by name.
    pub fn tables(&self) -> Vec<Arc<Table>> {
        self.tables
            .read()
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn table_names(&self) -> Vec<String> {
        self.tables().iter().map(|t| t.name()).collect()
    }

    /// Creates a table; with `if_not_exists` an existing table of that name is returned instead.
    pub fn create_table(&self, def: TableDef, if_not_exists: bool) -> Result<Arc<Table>> {
        let meta = validate_def(&def)?;
        self.create(meta, if_not_exists)
    }

    /// Creates a view or a materialized view named `def.name`, with the columns of `def` and
    /// its `definition` (the defining statement, kept in its transaction: see [`TableKind`]).
    /// A view has no partitions, so no designated timestamp settings beyond the column. With
    /// `if_not_exists`, an existing table or view of that name is returned instead.
    pub fn create_derived(
        &self,
        def: TableDef,
        kind: TableKind,
        definition: &str,
        if_not_exists: bool,
    ) -> Result<Arc<Table>> {
        if kind == TableKind::Table {
            return Err(StorageError::InvalidInput(
                "create_derived makes views: use create_table".into(),
            ));
        }
        if definition.len() > DEFINITION_BYTES_MAX {
            return Err(StorageError::InvalidInput(format!(
                "the definition of {} '{}' has {} bytes; at most {DEFINITION_BYTES_MAX} are kept",
                kind.name(),
                def.name,
                definition.len()
            )));
        }
        let mut meta = validate_def(&def)?;
        if kind == TableKind::View && (meta.ttl.is_some() || meta.cold_after.is_some()) {
            return Err(StorageError::InvalidInput(format!(
                "view '{}' stores no rows: it takes no TTL or COLD AFTER",
                def.name
            )));
        }
        meta.kind = kind;
        meta.definition = Some(Arc::from(definition));
        self.create(meta, if_not_exists)
    }

    fn create(&self, meta: TableMeta, if_not_exists: bool) -> Result<Arc<Table>> {
        let mut next_id = self
            .ddl
            .lock()
            .map_err(|_| StorageError::Internal("catalog lock poisoned".into()))?;
        if let Some(existing) = self.table(&meta.name) {
            if if_not_exists {
                return Ok(existing);
            }
            return Err(StorageError::AlreadyExists(format!(
                "{} '{}' already exists",
                existing.meta().kind.name(),
                meta.name
            )));
        }
        let id = *next_id;
        *next_id += 1;
        let sync = self.options.durability == Durability::Sync;
        let tmp = self.root.join(format!("{CREATING_PREFIX}{id}"));
        std::fs::create_dir(&tmp).at(&tmp)?;
        let name = meta.name.clone();
        Table::create_files(&tmp, meta, sync)?;
        let path = self.root.join(format!("{name}~{id}"));
        std::fs::rename(&tmp, &path).at(&path)?;
        if sync {
            sync_dir(&self.root)?;
        }
        let table = Table::open(
            path,
            self.options.clone(),
            self.cache.clone(),
            self.cold.clone(),
            self.committed_since_sync.clone(),
        )?
        .ok_or_else(|| StorageError::Internal("new table opened as dropped".into()))?;
        self.tables
            .write()
            .map_err(|_| StorageError::Internal("catalog lock poisoned".into()))?
            .insert(catalog_key(&name), table.clone());
        Ok(table)
    }

    /// Drops a table. Queries already reading it finish; its files go when they do.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let _ddl = self
            .ddl
            .lock()
            .map_err(|_| StorageError::Internal("catalog lock poisoned".into()))?;
        let table = self.table(name).ok_or_else(|| not_found(name))?;
        table.writer()?.mark_dropped()?;
        self.tables
            .write()
            .map_err(|_| StorageError::Internal("catalog lock poisoned".into()))?
            .remove(&catalog_key(name));
        Ok(())
    }

    pub fn rename_table(&self, from: &str, to: &str) -> Result<()> {
        validate_name(to, "table")?;
        let _ddl = self
            .ddl
            .lock()
            .map_err(|_| StorageError::Internal("catalog lock poisoned".into()))?;
        let table = self.table(from).ok_or_else(|| not_found(from))?;
        if let Some(other) = self.table(to)
            && !Arc::ptr_eq(&other, &table)
        {
            return Err(StorageError::AlreadyExists(format!(
                "table '{to}' already exists"
            )));
        }
        table.writer()?.rename_table(to)?;
        let mut tables = self
            .tables
            .write()
            .map_err(|_| StorageError::Internal("catalog lock poisoned".into()))?;
        tables.remove(&catalog_key(from));
        tables.insert(catalog_key(to), table);
        Ok(())
    }

    /// Copies every table's committed state into `to`, a new or empty directory outside the
    /// data directory, while commits go on (see `backup.rs`). The set of tables is that of
    /// one moment (listed, and each table's snapshot taken, under the DDL lock); each table
    /// is the state of one of its commits. Copying holds no lock.
    pub fn backup(&self, to: &Path) -> Result<crate::BackupReport> {
        let target = crate::backup::claim_target(&self.root, to)?;
        let tables = {
            let _ddl = self
                .ddl
                .lock()
                .map_err(|_| StorageError::Internal("catalog lock poisoned".into()))?;
            self.tables()
                .into_iter()
                .map(|t| {
                    let s = t.snapshot();
                    (t, s)
                })
                .collect()
        };
        crate::backup::write_backup(&self.root, self.cold.as_ref(), target, tables)
    }

    /// Column files held open and mapped now by the database's bounded caches
    /// (`StorageOptions::open_files_max`, `mapped_files_max`).
    pub fn cached_files(&self) -> (usize, usize) {
        self.cache.counts()
    }

    /// Flushes every file system write (used by the periodic durability mode).
    pub fn sync_all(&self) -> Result<()> {
        sync_file_system(&self.root)
    }
}

/// Flushes every write to the file system holding `root` (`syncfs`).
fn sync_file_system(root: &Path) -> Result<()> {
    let dir = File::open(root).at(root)?;
    // SAFETY: syncfs only reads the descriptor, which `dir` keeps open.
    if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
        return Err(StorageError::io(root, std::io::Error::last_os_error()));
    }
    Ok(())
}

fn not_found(name: &str) -> StorageError {
    StorageError::NotFound(format!("table '{name}' does not exist"))
}

fn validate_def(def: &TableDef) -> Result<TableMeta> {
    validate_name(&def.name, "table")?;
    if def.columns.is_empty() {
        return Err(StorageError::InvalidInput(format!(
            "table '{}' needs at least one column",
            def.name
        )));
    }
    let mut columns: Vec<ColumnMeta> = Vec::with_capacity(def.columns.len());
    for (i, (name, column_type)) in def.columns.iter().enumerate() {
        validate_name(name, "column")?;
        if columns.iter().any(|c| c.name.eq_ignore_ascii_case(name)) {
            return Err(StorageError::InvalidInput(format!(
                "duplicate column name '{name}'"
            )));
        }
        columns.push(ColumnMeta {
            id: i as u32,
            name: name.clone(),
            column_type: *column_type,
            indexed: false,
            dedup_key: false,
        });
    }
    let timestamp_index = match &def.timestamp {
        None => None,
        Some(ts) => {
            let i = columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(ts))
                .ok_or_else(|| {
                    StorageError::InvalidInput(format!(
                        "designated timestamp column '{ts}' is not a column of the table"
                    ))
                })?;
            if columns[i].column_type != ColumnType::Timestamp {
                return Err(StorageError::InvalidInput(format!(
                    "designated timestamp column '{ts}' must be of type TIMESTAMP, not {}",
                    columns[i].column_type.name()
                )));
            }
            Some(i)
        }
    };
    for name in &def.indexed {
        let column = columns
            .iter_mut()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                StorageError::InvalidInput(format!(
                    "indexed column '{name}' is not a column of the table"
                ))
            })?;
        check_indexable(column)?;
        column.indexed = true;
    }
    set_dedup_keys(&mut columns, timestamp_index, &def.dedup_keys)?;
    if timestamp_index.is_none() && def.partition_by != PartitionBy::None {
        return Err(StorageError::InvalidInput(format!(
            "PARTITION BY {} needs a designated timestamp: add TIMESTAMP(column)",
            def.partition_by.name()
        )));
    }
    crate::ttl::check(def.ttl, timestamp_index.is_some(), def.partition_by)?;
    crate::ttl::check_cold_after(def.cold_after, timestamp_index.is_some(), def.partition_by)?;
    Ok(TableMeta {
        name: def.name.clone(),
        next_column_id: columns.len() as u32,
        columns,
        timestamp_index,
        partition_by: def.partition_by,
        ttl: def.ttl,
        cold_after: def.cold_after,
        kind: TableKind::Table,
        definition: None,
        last_value_caches: Vec::new(),
    })
}

fn lock_directory(root: &Path) -> Result<File> {
    let path = root.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .at(&path)?;
    // SAFETY: flock only uses the descriptor, which `file` keeps open.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = match holder.trim() {
            "" => "unknown process".to_string(),
            pid => format!("pid {pid}"),
        };
        return Err(StorageError::Locked {
            path: root.to_path_buf(),
            holder,
        });
    }
    file.set_len(0).at(&path)?;
    file.rewind().at(&path)?;
    write!(file, "{}", std::process::id()).at(&path)?;
    Ok(file)
}

fn start_periodic_sync(db: Weak<Database>, interval_ms: u64) -> Result<()> {
    std::thread::Builder::new()
        .name("sundial-sync".into())
        .spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(interval_ms.max(1)));
                let Some(db) = db.upgrade() else { return };
                if db.committed_since_sync.swap(false, Ordering::AcqRel)
                    && let Err(e) = db.sync_all()
                {
                    tracing::error!("periodic sync failed: {e}");
                    db.committed_since_sync.store(true, Ordering::Release);
                }
            }
        })
        .map(|_| ())
        .map_err(|e| StorageError::io("sundial-sync thread", e))
}

/// Converts cold partitions (see [`Database::convert_cold`]) every `interval_ms`, on a thread
/// of its own: the conversions take a table's writer only to commit.
fn start_cold_conversion(db: Weak<Database>, interval_ms: u64) -> Result<()> {
    std::thread::Builder::new()
        .name("sundial-cold".into())
        .spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(interval_ms.max(1)));
                let Some(db) = db.upgrade() else { return };
                db.convert_cold();
            }
        })
        .map(|_| ())
        .map_err(|e| StorageError::io("sundial-cold thread", e))
}
