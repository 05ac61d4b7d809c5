//! A table: its published snapshot for readers and its single writer.
//!
//! ```text
//!   TableWriter ──append──▶ column files past the committed rows   (in-order rows)
//!        │        └──────▶ memory, merged into a new partition     (out-of-order rows)
//!        └──commit──▶ fsync files, then changed dirs (sync) ─▶ _txn.{seq%2} ─▶ publish Snapshot
//!   readers ──snapshot()──▶ Arc<Snapshot> (never sees uncommitted rows, never blocks)
//! ```

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use arrow_array::{ArrayRef, RecordBatch, cast::AsArray, types::TimestampNanosecondType};
use arrow_buffer::{BooleanBuffer, Buffer};

use crate::cache::FileCache;
use crate::cells::PartRows;
use crate::changes::{ChangeLog, Changes};
use crate::cold_store::ColdStore;
use crate::column::{ColumnBuf, SymbolResolver, Values, from_arrow};
use crate::dedup;
use crate::dir_sync::UnsyncedDirs;
use crate::error::{IoContext, Result, StorageError, ensure_invariant};
use crate::files::{
    ColumnFiles, PARQUET_FILE, PartitionDir, TableDir, data_file, offsets_file, partition_dir_name,
    read_offset, remove_table_dir, sync_dir, validity_file, write_file,
};
use crate::invariants::{self, Written};
use crate::merge;
use crate::partition::PartitionBy;
use crate::read::{read_array, read_picked};
use crate::symbol_index::{CommittedSymbols, PublishedSymbols};
use crate::symbols::{SYMBOL_DIR, SymbolDict};
use crate::ttl::Ttl;
use crate::txn::{
    ColumnMeta, PartFormat, PartitionMeta, RefreshState, TableKind, TableMeta, TxnState,
};
use crate::types::{ColumnType, Layout, SymbolValues};
use crate::validate_name;
use crate::zone::{Zone, complete_zones, read_zones, write_zones};

/// What a commit promises about surviving a crash of the operating system or a power loss.
/// Every mode survives a crash of the Sundial process itself (`kill -9`): committed data is in
/// the page cache, which the kernel writes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `fsync` column files, then the directories whose entries the commit changed (see
    /// `dir_sync.rs`), then the transaction file, before a commit returns.
    Sync,
    /// The whole file system is flushed every `interval_ms` when something was committed:
    /// an OS crash loses at most the last interval's commits.
    Periodic { interval_ms: u64 },
    /// Never flush explicitly; the kernel writes back when it likes.
    None,
}

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct StorageOptions {
    pub durability: Durability,
    /// Out-of-order rows a writer may hold in memory before commit; past it `append` fails.
    pub uncommitted_bytes_max: usize,
    /// How long `Table::writer` waits for another writer of the same table to finish.
    pub writer_wait_ms: u64,
    /// Column files the database keeps open for writing, least recently used first out.
    /// Default: half the soft `RLIMIT_NOFILE` when the options are made (the rest is left to
    /// connections and transient files), at least 64.
    pub open_files_max: usize,
    /// Column files the database keeps memory-mapped for reading, least recently used first
    /// out (queries still reading an evicted mapping keep it until they finish). Default: a
    /// quarter of `vm.max_map_count`, at least 1024.
    pub mapped_files_max: usize,
    /// Bytes of decoded Parquet column chunks kept for reads of cold partitions, least
    /// recently used first out (see `parquet_read.rs`). Default 512 MiB.
    pub decoded_cache_bytes: usize,
    /// How often the database looks for partitions `COLD AFTER` has made cold and converts
    /// them to Parquet (0: never, only when asked). Default one minute.
    pub cold_check_interval_ms: u64,
    /// An object store for Parquet partitions (none: they stay in the data directory).
    pub cold_store: Option<crate::ColdStoreOptions>,
    /// The wall clock of `ttl_wall_clock` and `timestamp_future_ms_max` (the system's; tests
    /// set a manual one).
    pub clock: crate::WallClock,
    /// TTL and `COLD AFTER` count back from the newest row capped at the wall clock, so that
    /// one row stamped in the future cannot expire the others (QuestDB's default,
    /// `cairo.ttl.use.wall.clock=true`, with no tolerance either); `false`: from the newest
    /// row alone. Default true.
    pub ttl_wall_clock: bool,
    /// Rows whose designated timestamp is more than this many milliseconds ahead of the wall
    /// clock are refused (`append` fails, naming the row's timestamp and the bound). `None`
    /// (the default): any timestamp in the supported range is taken.
    pub timestamp_future_ms_max: Option<u64>,
}

impl StorageOptions {
    /// The time TTL and `COLD AFTER` may count back from at most (the wall clock), if they are
    /// capped.
    pub(crate) fn ttl_cap_ns(&self) -> Option<i64> {
        self.ttl_wall_clock.then(|| self.clock.now_ns())
    }

    /// Refuses a row for `table` whose designated timestamp `ts` is more than
    /// `timestamp_future_ms_max` after `now_ns`, naming both (storage checks every append
    /// against its clock; receivers may check a line earlier against theirs).
    pub fn check_future(&self, table: &str, ts: i64, now_ns: i64) -> Result<()> {
        let Some(max_ms) = self.timestamp_future_ms_max else {
            return Ok(());
        };
        let ahead_ns = i64::try_from(max_ms)
            .unwrap_or(i64::MAX)
            .saturating_mul(1_000_000);
        let bound = now_ns.saturating_add(ahead_ns);
        if ts <= bound {
            return Ok(());
        }
        Err(StorageError::InvalidInput(format!(
            "designated timestamp {} of a row for table '{table}' is more than {max_ms} ms \
             ahead of the server's clock: rows after {} are refused (timestamp_future_ms_max)",
            crate::clock::rfc3339(ts),
            crate::clock::rfc3339(bound),
        )))
    }
}

impl Default for StorageOptions {
    fn default() -> Self {
        let open_files = crate::cache::open_files_limit().unwrap_or(1024) / 2;
        let mappings = crate::cache::mappings_limit().unwrap_or(65_530) / 4;
        StorageOptions {
            durability: Durability::Periodic { interval_ms: 1_000 },
            uncommitted_bytes_max: 1 << 30,
            writer_wait_ms: 30_000,
            open_files_max: usize::try_from(open_files.clamp(64, 1 << 20)).unwrap_or(64),
            mapped_files_max: usize::try_from(mappings.clamp(1024, 1 << 20)).unwrap_or(1024),
            decoded_cache_bytes: 512 << 20,
            cold_check_interval_ms: 60_000,
            cold_store: None,
            clock: crate::WallClock::system(),
            ttl_wall_clock: true,
            timestamp_future_ms_max: None,
        }
    }
}

/// A consistent, immutable view of a table at one commit.
#[derive(Clone)]
pub struct Snapshot {
    state: Arc<TxnState>,
    dirs: Vec<Arc<PartitionDir>>,
    /// Per SYMBOL column id, the dictionary version this commit published.
    symbols: HashMap<u32, Arc<PublishedSymbols>>,
    /// The table's columns as Arrow fields, built once per commit: reads project it.
    schema: arrow_schema::SchemaRef,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("table", &self.state.meta.name)
            .field("seq", &self.state.seq)
            .field("rows", &self.row_count())
            .finish()
    }
}

impl Snapshot {
    pub fn meta(&self) -> &Arc<TableMeta> {
        &self.state.meta
    }

    /// The commit sequence number this snapshot reads.
    pub fn seq(&self) -> u64 {
        self.state.seq
    }

    /// Committed partitions in timestamp order.
    /// A materialized view's refresh watermark, committed with these rows.
    pub fn refresh(&self) -> Option<&RefreshState> {
        self.state.refresh.as_ref()
    }

    pub fn partitions(&self) -> &[PartitionMeta] {
        &self.state.partitions
    }

    pub fn row_count(&self) -> u64 {
        self.state.row_count()
    }

    /// The dictionary of a SYMBOL column (position = code).
    pub fn symbols(&self, column: usize) -> Option<&SymbolValues> {
        Some(self.published_symbols(column)?.values())
    }

    /// The code of `value` in the dictionary of SYMBOL column `column`, if a committed row ever
    /// held it. A hash lookup that allocates nothing; the first lookup in a dictionary version
    /// builds its index (from the previous version's, when there is one).
    pub fn symbol_code(&self, column: usize, value: &str) -> Option<i32> {
        self.published_symbols(column)?.code(value)
    }

    fn published_symbols(&self, column: usize) -> Option<&PublishedSymbols> {
        let id = self.state.meta.columns.get(column)?.id;
        self.symbols.get(&id).map(Arc::as_ref)
    }

    /// How many of rows `rows` of column `column` of partition `partition` are NULL, from the
    /// validity bitmap alone (no data is read).
    pub fn null_count(&self, partition: usize, column: usize, rows: Range<u64>) -> Result<u64> {
        let part = self.partition(partition)?;
        let col = self.column(column)?;
        check_rows(part, &rows)?;
        // Rows before the column existed (below its top) are NULL.
        let top = part.column_top(col.id);
        let below_top = rows.end.min(top).saturating_sub(rows.start);
        let (lo, hi) = (rows.start.max(top) - top, rows.end.max(top) - top);
        if lo >= hi {
            return Ok(below_top);
        }
        let dir = &self.dirs[partition];
        if let Some(file) = dir.parquet()? {
            let symbols = self.symbols.get(&col.id).map(Arc::as_ref);
            let rows = rows.start.max(top)..rows.end;
            return Ok(below_top + file.null_count(dir.cache(), dir.id(), col, rows, symbols)?);
        }
        let nulls = match self.dirs[partition].map_validity(col.id, hi as usize)? {
            Some(bits) => {
                let valid = BooleanBuffer::new(bits, lo as usize, (hi - lo) as usize);
                (hi - lo) - valid.count_set_bits() as u64
            }
            None => 0,
        };
        Ok(below_top + nulls)
    }

    /// The zones (runs of [`crate::ZONE_ROWS`] rows, see `docs/design.md`) of column `column` of
    /// partition `partition` complete in this snapshot, in row order: `None` for a zone whose
    /// entry is missing or damaged, and for every zone of a column type without zone maps.
    pub fn zones(&self, partition: usize, column: usize) -> Result<Vec<Option<Zone>>> {
        let part = self.partition(partition)?;
        let col = self.column(column)?;
        let n = complete_zones(part.row_count);
        let dir = &self.dirs[partition];
        if let Some(kept) = dir.cached_zones(col.id).filter(|z| z.len() as u64 >= n) {
            return Ok(kept[..n as usize].to_vec());
        }
        let read = read_zones(dir, col, part.column_top(col.id), n)?;
        dir.keep_zones(col.id, read.clone());
        Ok(read.to_vec())
    }

    /// Rows `rows` of column `column` of partition `partition`, without copying fixed-width data.
    pub fn read_column(
        &self,
        partition: usize,
        column: usize,
        rows: Range<u64>,
    ) -> Result<ArrayRef> {
        let part = self.partition(partition)?;
        let col = self.column(column)?;
        check_rows(part, &rows)?;
        let array = read_array(
            &self.dirs[partition],
            col,
            part.column_top(col.id),
            rows.start,
            rows.end,
            self.symbols.get(&col.id).map(|s| s.as_ref()),
        )?;
        ensure_invariant!(
            array.len() as u64 == rows.end - rows.start,
            "read {} rows, wanted {rows:?}",
            array.len()
        );
        Ok(array)
    }

    /// Columns `projection` of partition `partition`, mapped for reading single rows (see
    /// `cells.rs`); `None` for a Parquet part, which is read through Arrow only.
    pub fn part_rows(&self, partition: usize, projection: &[usize]) -> Result<Option<PartRows>> {
        let part = self.partition(partition)?;
        let dir = &self.dirs[partition];
        if dir.is_parquet() {
            return Ok(None);
        }
        let columns = projection
            .iter()
            .map(|&c| self.column(c))
            .collect::<Result<Vec<_>>>()?;
        let symbols = |id| self.symbols.get(&id).map(|s| s.values().clone());
        PartRows::map(dir, part, &columns, symbols).map(Some)
    }

    /// Rows `rows` of the projected columns as one batch (schema: the projected table columns).
    pub fn read_batch(
        &self,
        partition: usize,
        projection: &[usize],
        rows: Range<u64>,
    ) -> Result<RecordBatch> {
        let len = (rows.end - rows.start) as usize;
        self.batch(projection, len, |c| {
            self.read_column(partition, c, rows.clone())
        })
    }

    /// Rows `rows` (ascending) of the projected columns of a partition, as one batch: the
    /// rows an index picked, gathered without reading the range between them.
    pub fn read_batch_picked(
        &self,
        partition: usize,
        projection: &[usize],
        rows: &[u32],
    ) -> Result<RecordBatch> {
        let part = self.partition(partition)?;
        if !rows.is_sorted() || rows.last().is_some_and(|r| u64::from(*r) >= part.row_count) {
            return Err(StorageError::InvalidInput(format!(
                "picked rows must ascend within the partition's {} rows",
                part.row_count
            )));
        }
        self.batch(projection, rows.len(), |c| {
            let col = self.column(c)?;
            let top = part.column_top(col.id);
            let symbols = self.symbols.get(&col.id).map(|s| s.as_ref());
            read_picked(&self.dirs[partition], col, top, rows, symbols)
        })
    }

    /// A batch of `rows` rows of the projected columns, each read by `read`, which must
    /// return exactly `rows` values.
    fn batch(
        &self,
        projection: &[usize],
        rows: usize,
        mut read: impl FnMut(usize) -> Result<ArrayRef>,
    ) -> Result<RecordBatch> {
        let schema = Arc::new(
            self.schema
                .project(projection)
                .map_err(|e| StorageError::InvalidInput(e.to_string()))?,
        );
        let columns = projection
            .iter()
            .map(|&c| {
                let array = read(c)?;
                ensure_invariant!(
                    array.len() == rows,
                    "read {} rows of column {c}, wanted {rows}",
                    array.len()
                );
                Ok(array)
            })
            .collect::<Result<Vec<_>>>()?;
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(schema, columns, &options)
            .map_err(|e| StorageError::Internal(e.to_string()))
    }

    /// Rows of a partition whose designated timestamp is in `[lo, hi)`, by binary search.
    pub fn rows_in_range(
        &self,
        partition: usize,
        lo: Option<i64>,
        hi: Option<i64>,
    ) -> Result<Range<u64>> {
        let part = self.partition(partition)?;
        let ts_index = self.state.meta.timestamp_index.ok_or_else(|| {
            StorageError::InvalidInput(format!(
                "table '{}' has no designated timestamp",
                self.meta().name
            ))
        })?;
        if lo.is_none_or(|lo| lo <= part.min_ts) && hi.is_none_or(|hi| hi > part.max_ts) {
            return Ok(0..part.row_count);
        }
        let ts_col = &self.state.meta.columns[ts_index];
        let pieces = match self.dirs[partition].parquet()? {
            // A row group at a time: no copy of the whole column.
            Some(file) => {
                let dir = &self.dirs[partition];
                file.pieces(dir.cache(), dir.id(), ts_col, 0..part.row_count, None)?
            }
            None => vec![self.read_column(partition, ts_index, 0..part.row_count)?],
        };
        let pieces: Vec<&[i64]> = pieces
            .iter()
            .map(|p| {
                p.as_primitive_opt::<TimestampNanosecondType>()
                    .map(|ts| ts.values().as_ref())
                    .ok_or_else(|| StorageError::Internal("timestamps are not timestamps".into()))
            })
            .collect::<Result<_>>()?;
        let start = lo.map_or(0, |lo| rows_before(&pieces, lo));
        let end = hi.map_or(part.row_count, |hi| rows_before(&pieces, hi));
        Ok(start..end.max(start))
    }

    /// Where part `partition` keeps its rows: its Parquet file (a URL in the cold store for a
    /// remote part), or its directory of column files, relative to the data directory.
    pub fn part_location(&self, partition: usize) -> Result<String> {
        let dir = &self.dirs.get(partition).ok_or_else(|| {
            StorageError::InvalidInput(format!("partition {partition} does not exist"))
        })?;
        Ok(dir.location())
    }

    /// Bytes on disk of part `partition`'s files (those of rolled-back rows included).
    pub fn part_disk_bytes(&self, partition: usize) -> Result<u64> {
        let dir = &self.dirs.get(partition).ok_or_else(|| {
            StorageError::InvalidInput(format!("partition {partition} does not exist"))
        })?;
        let mut bytes = 0;
        for entry in std::fs::read_dir(&dir.path).at(&dir.path)? {
            let entry = entry.at(&dir.path)?;
            bytes += entry.metadata().at(&entry.path())?.len();
        }
        Ok(bytes)
    }

    /// The committed state this snapshot reads (for `backup.rs`).
    pub(crate) fn state(&self) -> &Arc<TxnState> {
        &self.state
    }

    /// The directory of part `partition`, kept alive by this snapshot (for `backup.rs`).
    pub(crate) fn part_dir(&self, partition: usize) -> Option<&Arc<PartitionDir>> {
        self.dirs.get(partition)
    }

    /// The published dictionary of SYMBOL column id `column_id`.
    pub(crate) fn published(&self, column_id: u32) -> Option<&PublishedSymbols> {
        self.symbols.get(&column_id).map(Arc::as_ref)
    }

    fn partition(&self, partition: usize) -> Result<&PartitionMeta> {
        self.state.partitions.get(partition).ok_or_else(|| {
            StorageError::InvalidInput(format!("partition {partition} does not exist"))
        })
    }

    fn column(&self, column: usize) -> Result<&ColumnMeta> {
        self.state
            .meta
            .columns
            .get(column)
            .ok_or_else(|| StorageError::InvalidInput(format!("column {column} does not exist")))
    }
}

/// A table handle shared by readers and the writer.
pub struct Table {
    dir: Arc<TableDir>,
    /// The id in the directory's name: never reused within a data directory.
    id: u64,
    options: Arc<StorageOptions>,
    current: RwLock<Arc<Snapshot>>,
    writer: Mutex<Option<Box<WriterState>>>,
    writer_returned: Condvar,
    committed_since_sync: Arc<AtomicBool>,
    /// What each commit since the table was opened changed (see `changes.rs`).
    changes: Mutex<ChangeLog>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("dir", &self.dir.path)
            .finish()
    }
}

const TXN_SLOTS: [&str; 2] = ["_txn.0", "_txn.1"];

impl Table {
    /// Writes the first transaction of a new table into `dir` (which must be empty).
    pub(crate) fn create_files(dir: &Path, meta: TableMeta, sync: bool) -> Result<()> {
        let state = TxnState {
            seq: 0,
            meta: Arc::new(meta),
            partitions: Vec::new(),
            symbol_counts: Vec::new(),
            dropped: false,
            refresh: None,
        };
        let slot = state.encode();
        invariants::debug_check_publishable(dir, &state, &slot, &[]);
        write_file(&dir.join(TXN_SLOTS[0]), &slot, sync)?;
        write_file(&dir.join(TXN_SLOTS[1]), &[], sync)?;
        if sync {
            sync_dir(dir)?;
        }
        Ok(())
    }

    /// Opens a table directory, recovering from an interrupted commit. `Ok(None)` means the
    /// table was dropped, or never had a transaction on disk (an interrupted CREATE, or what an
    /// interrupted DROP of an earlier version left); its directory is then removed.
    pub(crate) fn open(
        path: PathBuf,
        options: Arc<StorageOptions>,
        cache: Arc<FileCache>,
        cold: Option<Arc<ColdStore>>,
        committed_since_sync: Arc<AtomicBool>,
    ) -> Result<Option<Arc<Table>>> {
        let state = match read_txn(&path)? {
            TxnFound::Live(state) => state,
            TxnFound::Dropped => {
                remove_table_dir(&path)?;
                return Ok(None);
            }
            TxnFound::None => {
                tracing::warn!(
                    "{}: no transaction was ever written; removing the directory (an \
                     interrupted CREATE or DROP TABLE)",
                    path.display()
                );
                remove_table_dir(&path)?;
                return Ok(None);
            }
            TxnFound::TornCreate => {
                tracing::warn!(
                    "{}: only a torn first transaction of CREATE TABLE reached the disk; \
                     removing the directory (a CREATE that never completed)",
                    path.display()
                );
                remove_table_dir(&path)?;
                return Ok(None);
            }
        };
        debug_assert!(!state.dropped, "a dropped table is never opened");
        let dir = Arc::new(TableDir {
            path,
            dropped: AtomicBool::new(false),
            cache,
            cold,
        });
        remove_unreferenced(&dir.path, &state)?;
        let mut dirs = BTreeMap::new();
        for part in &state.partitions {
            let stem = state.meta.partition_by.dir_name(part.key);
            let pdir = Arc::new(PartitionDir::with_format(
                dir.clone(),
                dir.path.join(partition_dir_name(&stem, part.version)),
                part.format,
            ));
            dirs.insert((part.key, part.version), pdir);
        }
        let mut symbols = HashMap::new();
        for c in &state.meta.columns {
            if c.column_type == ColumnType::Symbol {
                let dict = SymbolDict::load(&dir.path, c.id, state.symbol_count(c.id))?;
                symbols.insert(c.id, dict);
            }
        }
        let next_version = state
            .partitions
            .iter()
            .map(|p| p.version)
            .max()
            .unwrap_or(0)
            .max(state.seq)
            + 1;
        let writer = WriterState {
            table_dir: dir.clone(),
            committed: state,
            dirs,
            symbols,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            files: HashMap::new(),
            unsynced_dirs: UnsyncedDirs::default(),
            next_version,
            options: options.clone(),
            future_row_warned_ns: i64::MIN,
            replacing: None,
            refresh: None,
            txn_rows: None,
        };
        let snapshot = writer.snapshot();
        let id = dir
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once('~'))
            .and_then(|(_, id)| id.parse().ok())
            .unwrap_or(0);
        let changes = Mutex::new(ChangeLog::after(snapshot.seq()));
        Ok(Some(Arc::new(Table {
            dir,
            id,
            changes,
            options,
            current: RwLock::new(Arc::new(snapshot)),
            writer: Mutex::new(Some(Box::new(writer))),
            writer_returned: Condvar::new(),
            committed_since_sync,
        })))
    }

    /// The latest committed snapshot. Never blocks on the writer.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        match self.current.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn name(&self) -> String {
        self.snapshot().meta().name.clone()
    }

    /// The table's identity: the id in its directory's name, which no other table of the data
    /// directory ever has (a table dropped and created again gets a new one).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// What the commits after `seq` changed (a superset), or `None` when that is not known:
    /// `seq` is older than the table's opening (see `changes.rs`).
    pub fn changes_since(&self, seq: u64) -> Option<Changes> {
        match self.changes.lock() {
            Ok(log) => log.since(seq),
            Err(_) => None,
        }
    }

    /// Records what commit `seq` changed.
    fn record_changes(&self, seq: u64, changes: Changes) {
        if let Ok(mut log) = self.changes.lock() {
            log.record(seq, changes);
        }
    }

    /// The table's directory.
    pub fn path(&self) -> &Path {
        &self.dir.path
    }

    /// The options of the database the table belongs to.
    pub fn options(&self) -> &StorageOptions {
        &self.options
    }

    /// Whether DROP TABLE dropped this table. Its directory is deleted once the last handle
    /// goes: holders of a handle (ingestion's sinks) let a dropped one go.
    pub fn is_dropped(&self) -> bool {
        self.dir.dropped.load(Ordering::Acquire)
    }

    pub fn meta(&self) -> Arc<TableMeta> {
        self.snapshot().meta().clone()
    }

    /// Takes the table's single writer, waiting up to `writer_wait_ms` for the current one.
    pub fn writer(self: &Arc<Self>) -> Result<TableWriter> {
        let wait = Duration::from_millis(self.options.writer_wait_ms);
        let guard = self
            .writer
            .lock()
            .map_err(|_| StorageError::Internal("writer slot poisoned".into()))?;
        let (mut guard, timeout) = self
            .writer_returned
            .wait_timeout_while(guard, wait, |w| w.is_none())
            .map_err(|_| StorageError::Internal("writer slot poisoned".into()))?;
        if timeout.timed_out() && guard.is_none() {
            return Err(StorageError::ResourceExhausted(format!(
                "table '{}' is busy: another writer held it for over {} ms",
                self.name(),
                wait.as_millis()
            )));
        }
        let state = guard
            .take()
            .ok_or_else(|| StorageError::Internal("writer vanished".into()))?;
        Ok(TableWriter {
            table: self.clone(),
            state: Some(state),
        })
    }

    pub(crate) fn mark_dropped(&self) {
        self.dir.dropped.store(true, Ordering::Release);
    }

    pub(crate) fn table_dir(&self) -> &Arc<TableDir> {
        &self.dir
    }

    /// For the cold store's orphan check: the table's name there, the first version not yet
    /// used, and the directory names of its remote parts.
    pub(crate) fn cold_parts(&self) -> (String, u64, Vec<String>) {
        let next = self
            .writer
            .lock()
            .ok()
            .and_then(|w| w.as_ref().map(|w| w.next_version))
            .unwrap_or(0);
        let snapshot = self.snapshot();
        let parts = snapshot
            .dirs
            .iter()
            .filter(|d| d.is_remote())
            .map(|d| d.name())
            .collect();
        (self.dir.cold_name(), next, parts)
    }

    /// Makes sure version `version` is never allocated by this process; false if it may have
    /// been already (or the table has no writer).
    pub(crate) fn claim_version(&self, version: u64) -> bool {
        let Ok(mut writer) = self.writer.lock() else {
            return false;
        };
        match writer.as_mut() {
            Some(w) if w.next_version <= version => {
                w.next_version = version + 1;
                true
            }
            _ => false,
        }
    }

    fn publish(&self, snapshot: Snapshot) {
        let snapshot = Arc::new(snapshot);
        match self.current.write() {
            Ok(mut s) => *s = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
        if matches!(self.options.durability, Durability::Periodic { .. }) {
            self.committed_since_sync.store(true, Ordering::Release);
        }
    }
}

/// What the transaction slots of a table directory say.
enum TxnFound {
    /// The newest complete commit of a live table.
    Live(TxnState),
    /// The newest valid slot commits DROP TABLE: the directory only awaits deletion.
    Dropped,
    /// Neither slot holds a byte: no transaction of this directory ever reached the disk.
    None,
    /// No slot is valid, and the directory is what a CREATE TABLE whose first slot did not
    /// reach the disk whole leaves (see [`create_never_completed`]).
    TornCreate,
}

/// Reads the newest valid commit. A DROP TABLE commit is taken as soon as its slot is valid:
/// the deletion that follows it may have removed any of the files earlier commits name.
fn read_txn(dir: &Path) -> Result<TxnFound> {
    let mut candidates = Vec::new();
    let mut last_error = None;
    let mut any_bytes = false;
    for slot in TXN_SLOTS {
        let path = dir.join(slot);
        match std::fs::read(&path) {
            Ok(bytes) if bytes.is_empty() => {}
            Ok(bytes) => {
                any_bytes = true;
                // Never fall back past a newer Sundial's commit: the older slot names files
                // that commit replaced, and opening would delete the newer ones.
                if let Some(format) = TxnState::newer_format(&bytes) {
                    return Err(TxnState::newer_format_error(&path, format));
                }
                match TxnState::decode(&bytes, &path) {
                    Ok(s) => candidates.push(s),
                    Err(e) => last_error = Some(e),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StorageError::io(path, e)),
        }
    }
    if !any_bytes {
        return Ok(TxnFound::None);
    }
    if candidates.is_empty() && create_never_completed(dir)? {
        return Ok(TxnFound::TornCreate);
    }
    candidates.sort_by_key(|s| std::cmp::Reverse(s.seq));
    if candidates.first().is_some_and(|s| s.dropped) {
        return Ok(TxnFound::Dropped);
    }
    for state in candidates {
        match verify_files(dir, &state) {
            Ok(()) => return Ok(TxnFound::Live(state)),
            Err(e) => {
                tracing::warn!(
                    "{}: commit {} is incomplete on disk ({e}); trying the previous one",
                    dir.display(),
                    state.seq
                );
                last_error = Some(e);
            }
        }
    }
    Err(last_error.unwrap_or_else(|| StorageError::corrupt(dir, "no transaction file")))
}

/// Whether a table directory with bytes in a slot but no valid slot is a CREATE TABLE that
/// never completed: without `sync`, the rename that publishes a new table's directory may reach
/// the disk before the bytes of its slot `_txn.0` (seq 0). True exactly when
///
/// * `_txn.1` is empty or absent, as CREATE leaves it (commit 1, and every odd one after it,
///   writes a whole slot there);
/// * `_txn.0` holds what a crash may leave of a seq-0 slot
///   ([`TxnState::may_be_torn_first_slot`]): a later commit's slot that kept a byte of its seq
///   says the table existed;
/// * the directory holds nothing but the two slots: every partition directory and `_sym/` is
///   created after CREATE returned, by appends.
///
/// A directory holding anything written after CREATE returned (bytes in `_txn.1`, a slot
/// whose seq is not 0, a partition directory, `_sym/`) is a table that existed: opening
/// reports it corrupt.
fn create_never_completed(dir: &Path) -> Result<bool> {
    for entry in std::fs::read_dir(dir).at(dir)? {
        let name = entry.at(dir)?.file_name();
        if !TXN_SLOTS.iter().any(|slot| name == *slot) {
            return Ok(false);
        }
    }
    let second = dir.join(TXN_SLOTS[1]);
    match std::fs::metadata(&second) {
        Ok(m) if m.len() > 0 => return Ok(false),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(StorageError::io(second, e));
        }
        _ => {}
    }
    let first = dir.join(TXN_SLOTS[0]);
    let bytes = std::fs::read(&first).at(&first)?;
    debug_assert!(!bytes.is_empty(), "a slot holds bytes");
    Ok(TxnState::may_be_torn_first_slot(&bytes))
}

/// Checks that the files a transaction names hold at least the bytes it commits.
fn verify_files(dir: &Path, state: &TxnState) -> Result<()> {
    let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let need = |p: PathBuf, n: u64| {
        if len(&p) < n {
            Err(StorageError::corrupt(
                &p,
                format!("shorter than the {n} committed bytes"),
            ))
        } else {
            Ok(())
        }
    };
    for part in &state.partitions {
        if part.format.is_parquet() {
            // Written whole and fsynced before the commit that names it (in every durability
            // mode), so never torn by a crash: a damaged file is reported by the reads of its
            // partition, and the table's other partitions stay readable.
            continue;
        }
        let pdir = dir.join(partition_dir_name(
            &state.meta.partition_by.dir_name(part.key),
            part.version,
        ));
        for c in &state.meta.columns {
            let rows = part.row_count - part.column_top(c.id);
            if rows == 0 {
                continue;
            }
            match c.column_type.layout() {
                Layout::Fixed { width } => need(pdir.join(data_file(c.id)), rows * width as u64)?,
                Layout::Bits => need(pdir.join(data_file(c.id)), rows.div_ceil(8))?,
                Layout::Var => need(pdir.join(offsets_file(c.id)), (rows + 1) * 8)?,
            }
            let v = pdir.join(validity_file(c.id));
            if v.exists() && len(&v) < rows.div_ceil(8) {
                return Err(StorageError::corrupt(
                    &v,
                    "validity shorter than committed rows",
                ));
            }
        }
    }
    let sym = dir.join(SYMBOL_DIR);
    for (id, count) in &state.symbol_counts {
        if *count > 0 {
            // Without `sync`, the offsets may reach the disk without the symbols they end at.
            let (offsets, count) = (sym.join(offsets_file(*id)), u64::from(*count));
            need(offsets.clone(), (count + 1) * 8)?;
            need(sym.join(data_file(*id)), read_offset(&offsets, count)?)?;
        }
    }
    Ok(())
}

/// Deletes partition directories and temporary files no committed transaction refers to.
fn remove_unreferenced(dir: &Path, state: &TxnState) -> Result<()> {
    let live: std::collections::HashSet<String> = state
        .partitions
        .iter()
        .map(|p| partition_dir_name(&state.meta.partition_by.dir_name(p.key), p.version))
        .collect();
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == SYMBOL_DIR {
            remove_dropped_column_files(&entry.path(), state)?;
            continue;
        }
        if name.starts_with('_') {
            continue;
        }
        if live.contains(&name) {
            remove_dropped_column_files(&entry.path(), state)?;
            continue;
        }
        let path = entry.path();
        let result = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        result.at(&path)?;
    }
    Ok(())
}

/// Deletes files of columns the table no longer has (in a partition or the symbol directory),
/// and unfinished temporary files.
fn remove_dropped_column_files(dir: &Path, state: &TxnState) -> Result<()> {
    for entry in std::fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let id = name.split('.').next().and_then(|id| id.parse::<u32>().ok());
        let live = name == PARQUET_FILE
            || !name.ends_with(".tmp")
                && id.is_some_and(|id| state.meta.columns.iter().any(|c| c.id == id));
        if !live {
            let path = entry.path();
            std::fs::remove_file(&path).at(&path)?;
        }
    }
    Ok(())
}

/// A part of a partition (see `merge.rs`): its key and version.
type PartKey = (i64, u64);

/// A part of a partition as a commit leaves it.
struct WrittenPart {
    meta: PartitionMeta,
    dir: Arc<PartitionDir>,
    /// The first zone to write, if the commit gave the part rows.
    zones_from: Option<u64>,
}

/// Rows of one partition added by the pending transaction (to its last part, or merged).
struct Pending {
    dir: Arc<PartitionDir>,
    is_new: bool,
    base: PartitionMeta,
    /// Rows appended to the files after `base.row_count`.
    tail_rows: u64,
    min_ts: i64,
    /// The newest row of the partition with this transaction's rows (of a new part after a
    /// Parquet part, that part's newest until rows arrive).
    max_ts: i64,
    /// A new part after a committed Parquet part, which in-order rows start.
    after_parquet: bool,
    /// Out-of-order rows, merged at commit into a new version of the partition.
    o3: Option<Vec<ColumnBuf>>,
    o3_ts: Vec<i64>,
}

struct WriterState {
    table_dir: Arc<TableDir>,
    committed: TxnState,
    /// Each committed part's directory (see `merge.rs`), by partition key and version.
    dirs: BTreeMap<PartKey, Arc<PartitionDir>>,
    symbols: HashMap<u32, SymbolDict>,
    pending: BTreeMap<i64, Pending>,
    pending_bytes: usize,
    /// Append positions of the columns of partitions the pending transaction wrote to.
    files: HashMap<i64, HashMap<u32, ColumnFiles>>,
    /// Directories whose entries this writer changed since they were last fsynced (see
    /// `dir_sync.rs`); kept across rollbacks, emptied by each commit.
    unsynced_dirs: UnsyncedDirs,
    next_version: u64,
    options: Arc<StorageOptions>,
    /// The newest row ahead of the wall clock already logged (see
    /// [`TableWriter::warn_of_future_row`]).
    future_row_warned_ns: i64,
    /// The pending transaction replaces every committed row with a timestamp in `lo..hi`
    /// (see [`TableWriter::replace_range`]).
    replacing: Option<(i64, i64)>,
    /// The refresh state the pending transaction commits (see [`TableWriter::set_refresh`]).
    refresh: Option<RefreshState>,
    /// The smallest and largest timestamps the pending transaction writes or replaces.
    txn_rows: Option<(i64, i64)>,
}

/// The single writer of a table. Rows appended become visible at `commit`; dropping the writer
/// (or any error from `append`) discards uncommitted rows.
pub struct TableWriter {
    table: Arc<Table>,
    state: Option<Box<WriterState>>,
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        if let Some(mut state) = self.state.take() {
            state.rollback();
            if let Ok(mut slot) = self.table.writer.lock() {
                *slot = Some(state);
            }
            self.table.writer_returned.notify_one();
        }
    }
}

impl TableWriter {
    fn state(&mut self) -> Result<&mut WriterState> {
        self.state
            .as_deref_mut()
            .ok_or_else(|| StorageError::Internal("writer used after release".into()))
    }

    pub fn meta(&self) -> Arc<TableMeta> {
        self.state
            .as_ref()
            .map_or_else(|| self.table.meta(), |s| s.committed.meta.clone())
    }

    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Rows appended since the last commit.
    pub fn pending_rows(&self) -> u64 {
        self.state.as_ref().map_or(0, |s| {
            s.pending
                .values()
                .map(|p| p.tail_rows + p.o3_ts.len() as u64)
                .sum()
        })
    }

    /// Bytes of out-of-order rows held in memory until commit.
    pub fn pending_bytes(&self) -> usize {
        self.state.as_ref().map_or(0, |s| s.pending_bytes)
    }

    /// Appends a batch of rows. Columns are matched by name; table columns missing from the
    /// batch are NULL. On error, every uncommitted row of this writer is discarded.
    pub fn append(&mut self, batch: &RecordBatch) -> Result<()> {
        let state = self.state()?;
        let result = state.append(batch);
        if result.is_err() {
            state.rollback();
        }
        result
    }

    /// Appends `batches` as one batch: rows of batches that overlap in time are put in
    /// timestamp order together (rows with equal timestamps keep the order of `batches`), so
    /// sorted runs from several senders land as in-order rows rather than as out-of-order rows
    /// merged with the partition at commit. On error, every uncommitted row is discarded.
    pub fn append_all(&mut self, batches: &[RecordBatch]) -> Result<()> {
        let state = self.state()?;
        let result = state.append_all(batches);
        if result.is_err() {
            state.rollback();
        }
        result
    }

    /// Makes every appended row visible and durable (per the durability mode) atomically.
    /// Then, in a table with a TTL, drops the partitions it expires (a commit of its own: a
    /// failure there is logged, the rows stay committed).
    pub fn commit(&mut self) -> Result<()> {
        // One clock read and one histogram observation per commit (sundial-metrics).
        let started = std::time::Instant::now();
        let rows = self.pending_rows();
        let state = self.state()?;
        let changed = state.txn_rows.take();
        let snapshot = match state.commit() {
            Ok(Some(s)) => s,
            Ok(None) => return Ok(()),
            Err(e) => {
                state.rollback();
                sundial_metrics::metrics().commit_failed();
                return Err(e);
            }
        };
        let meta = snapshot.meta();
        let (ttl, cold_after) = (meta.ttl.is_some(), meta.cold_after.is_some());
        // Recorded before it is published: whoever sees this commit's snapshot finds its
        // changes in the log (a view's refresh reads the snapshot first, then the log).
        if let Some((min_ts, max_ts)) = changed {
            self.table
                .record_changes(snapshot.seq(), Changes::rows(min_ts, max_ts));
        }
        self.table.publish(snapshot);
        sundial_metrics::metrics().commit(rows, started.elapsed());
        if ttl || cold_after {
            self.warn_of_future_row();
        }
        if ttl && let Err(e) = self.drop_expired() {
            tracing::error!(
                "'{}': dropping expired partitions failed: {e}",
                self.table.name()
            );
        }
        Ok(())
    }

    /// Logs at WARN, once per newest row, that a table with a TTL or `COLD AFTER` holds a row
    /// ahead of the wall clock: what its reference time then is.
    fn warn_of_future_row(&mut self) {
        let options = self.table.options.clone();
        let Ok(state) = self.state() else {
            return;
        };
        let Some(newest) = crate::ttl::newest_row(&state.committed.partitions) else {
            return;
        };
        let now = options.clock.now_ns();
        if newest <= now || newest <= state.future_row_warned_ns {
            return;
        }
        state.future_row_warned_ns = newest;
        let counts_from = if options.ttl_wall_clock {
            "they count back from the wall clock instead, until it passes that row"
        } else {
            "with ttl_wall_clock off they count back from that row, expiring what is older"
        };
        tracing::warn!(
            "'{}': the newest row, at {}, is ahead of the wall clock ({}); TTL and COLD AFTER: \
             {counts_from}",
            state.committed.meta.name,
            crate::clock::rfc3339(newest),
            crate::clock::rfc3339(now),
        );
    }

    /// Discards every row appended since the last commit.
    pub fn rollback(&mut self) {
        if let Ok(s) = self.state() {
            s.rollback();
        }
    }

    /// Starts a transaction that replaces every committed row with a timestamp in `lo..hi`
    /// (nanoseconds) by the rows appended before the commit, which must all fall in that
    /// range: a materialized view's refresh of the buckets there. Readers see the old rows
    /// until the commit and the new ones after it, never a mix. Must come before any append.
    pub fn replace_range(&mut self, lo: i64, hi: i64) -> Result<()> {
        let state = self.state()?;
        let meta = state.committed.meta.clone();
        if meta.timestamp_index.is_none() {
            return Err(StorageError::InvalidInput(format!(
                "table '{}' has no designated timestamp: no time range to replace",
                meta.name
            )));
        }
        if lo >= hi {
            return Err(StorageError::InvalidInput(format!(
                "an empty range to replace: {lo} is not before {hi}"
            )));
        }
        if !state.pending.is_empty() || state.replacing.is_some() {
            return Err(StorageError::InvalidInput(
                "a range replacement must start its transaction".into(),
            ));
        }
        // Every partition with a committed row in the range is rewritten, with or without
        // rows for it, through the out-of-order merge (see `merge_tail`).
        let keys: Vec<i64> = state
            .committed
            .partitions
            .iter()
            .filter(|p| p.row_count > 0 && p.min_ts < hi && p.max_ts >= lo)
            .map(|p| p.key)
            .collect();
        state.replacing = Some((lo, hi));
        state.txn_rows = Some((lo, hi - 1));
        for key in keys {
            let result = state.pending_partition(key).map(|p| {
                p.o3.get_or_insert_with(|| {
                    meta.columns
                        .iter()
                        .map(|c| ColumnBuf::empty(c.column_type))
                        .collect()
                });
            });
            if let Err(e) = result {
                state.rollback();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Sets the refresh state of a materialized view, committed by the next commit with the
    /// rows it describes (a commit with no rows commits it alone).
    pub fn set_refresh(&mut self, refresh: RefreshState) -> Result<()> {
        let state = self.state()?;
        if state.committed.meta.kind != TableKind::MaterializedView {
            return Err(StorageError::InvalidInput(format!(
                "'{}' is not a materialized view: it has no refresh state",
                state.committed.meta.name
            )));
        }
        let invalid = refresh.invalid.as_deref().map_or(0, str::len);
        if invalid > crate::txn::INVALID_REASON_BYTES_MAX {
            return Err(StorageError::InvalidInput(format!(
                "a reason of {invalid} bytes; at most {} are kept",
                crate::txn::INVALID_REASON_BYTES_MAX
            )));
        }
        state.refresh = Some(refresh);
        Ok(())
    }

    /// Adds a column; existing rows read it as NULL. Commits on its own.
    pub fn add_column(&mut self, name: &str, column_type: ColumnType) -> Result<()> {
        validate_name(name, "column")?;
        self.change_schema(Changes::default(), |state| {
            let meta = &state.meta;
            if meta.column_index(name).is_some() {
                return Err(StorageError::AlreadyExists(format!(
                    "column '{name}' already exists in table '{}'",
                    meta.name
                )));
            }
            let id = meta.next_column_id;
            let mut meta = (*state.meta).clone();
            meta.columns.push(ColumnMeta {
                id,
                name: name.to_string(),
                column_type,
                indexed: false,
                dedup_key: false,
            });
            meta.next_column_id += 1;
            state.meta = Arc::new(meta);
            for p in &mut state.partitions {
                if p.row_count > 0 {
                    p.tops.push((id, p.row_count));
                }
            }
            if column_type == ColumnType::Symbol {
                state.symbol_counts.push((id, 0));
            }
            Ok(())
        })
    }

    /// Removes a column. Its files are deleted when the partition is next rewritten or the
    /// table reopened.
    pub fn drop_column(&mut self, name: &str) -> Result<()> {
        let changed = Changes::schema("drop column operation");
        self.change_schema(changed, |state| {
            let index = column_or_error(&state.meta, name)?;
            if state.meta.timestamp_index == Some(index) {
                return Err(StorageError::InvalidInput(format!(
                    "cannot drop the designated timestamp column '{name}'"
                )));
            }
            let id = state.meta.columns[index].id;
            if let Some(cache) = state
                .meta
                .last_value_caches
                .iter()
                .find(|c| c.keys.contains(&id))
            {
                return Err(StorageError::InvalidInput(format!(
                    "cannot drop column '{name}': last value cache '{}' is keyed by it; drop \
                     the cache first (DROP LAST VALUE CACHE {} ON {})",
                    cache.name, cache.name, state.meta.name
                )));
            }
            if state.meta.columns[index].dedup_key {
                return Err(StorageError::InvalidInput(format!(
                    "cannot drop column '{name}': it is a DEDUP UPSERT KEY; change the keys \
                     first (ALTER TABLE ... DEDUP ENABLE UPSERT KEYS(...) or DEDUP DISABLE)"
                )));
            }
            let mut meta = (*state.meta).clone();
            let removed = meta.columns.remove(index);
            meta.timestamp_index = meta
                .timestamp_index
                .map(|t| if t > index { t - 1 } else { t });
            state.meta = Arc::new(meta);
            state.symbol_counts.retain(|(id, _)| *id != removed.id);
            for p in &mut state.partitions {
                p.tops.retain(|(id, _)| *id != removed.id);
            }
            Ok(())
        })
    }

    pub fn rename_column(&mut self, from: &str, to: &str) -> Result<()> {
        validate_name(to, "column")?;
        let changed = Changes::schema("rename column operation");
        self.change_schema(changed, |state| {
            let index = column_or_error(&state.meta, from)?;
            if let Some(other) = state.meta.column_index(to)
                && other != index
            {
                return Err(StorageError::AlreadyExists(format!(
                    "column '{to}' already exists"
                )));
            }
            let mut meta = (*state.meta).clone();
            meta.columns[index].name = to.to_string();
            state.meta = Arc::new(meta);
            Ok(())
        })
    }

    /// Adds or drops a SYMBOL column's index (`ALTER TABLE ... ALTER COLUMN c ADD/DROP INDEX`).
    /// The flag is all that is stored: indexes are derived from the column's data when read.
    pub fn set_column_indexed(&mut self, name: &str, indexed: bool) -> Result<()> {
        self.change_schema(Changes::default(), |state| {
            let index = column_or_error(&state.meta, name)?;
            let column = &state.meta.columns[index];
            if indexed {
                check_indexable(column)?;
            }
            if column.indexed == indexed {
                let state = if indexed { "already" } else { "not" };
                return Err(StorageError::InvalidInput(format!(
                    "column '{}' is {state} indexed",
                    column.name
                )));
            }
            let mut meta = (*state.meta).clone();
            meta.columns[index].indexed = indexed;
            state.meta = Arc::new(meta);
            Ok(())
        })
    }

    /// Sets the table's `DEDUP UPSERT KEYS` (column names, the designated timestamp among
    /// them), or turns deduplication off when `keys` is empty. Rows already stored are not
    /// deduplicated; rows written from the next commit on are.
    pub fn set_dedup_keys(&mut self, keys: &[String]) -> Result<()> {
        self.change_schema(Changes::default(), |state| {
            let mut meta = (*state.meta).clone();
            dedup::set_dedup_keys(&mut meta.columns, meta.timestamp_index, keys)?;
            state.meta = Arc::new(meta);
            Ok(())
        })
    }

    /// Sets (or with `None` removes) the table's TTL. Partitions it expires are dropped by the
    /// next commit of rows, or [`TableWriter::drop_expired`], not here.
    pub fn set_ttl(&mut self, ttl: Option<Ttl>) -> Result<()> {
        self.change_schema(Changes::default(), |state| {
            let mut meta = (*state.meta).clone();
            crate::ttl::check(ttl, meta.timestamp_index.is_some(), meta.partition_by)?;
            meta.ttl = ttl;
            state.meta = Arc::new(meta);
            Ok(())
        })
    }

    /// Sets (or with `None` removes) the table's `COLD AFTER`: partitions that much older than
    /// the newest row (capped at the wall clock) are converted to Parquet by
    /// [`Table::convert_cold`].
    pub fn set_cold_after(&mut self, cold_after: Option<Ttl>) -> Result<()> {
        self.change_schema(Changes::default(), |state| {
            let mut meta = (*state.meta).clone();
            let has_ts = meta.timestamp_index.is_some();
            crate::ttl::check_cold_after(cold_after, has_ts, meta.partition_by)?;
            meta.cold_after = cold_after;
            state.meta = Arc::new(meta);
            Ok(())
        })
    }

    /// Replaces a view's or materialized view's defining statement (`ALTER MATERIALIZED
    /// VIEW`); its rows and refresh state stay. Commits on its own.
    pub fn set_definition(&mut self, definition: &str) -> Result<()> {
        if definition.len() > crate::txn::DEFINITION_BYTES_MAX {
            return Err(StorageError::InvalidInput(format!(
                "a definition of {} bytes; at most {} are kept",
                definition.len(),
                crate::txn::DEFINITION_BYTES_MAX
            )));
        }
        self.change_schema(Changes::default(), |state| {
            if state.meta.kind == TableKind::Table {
                return Err(StorageError::InvalidInput(format!(
                    "'{}' is a table: it has no definition",
                    state.meta.name
                )));
            }
            let mut meta = (*state.meta).clone();
            meta.definition = Some(Arc::from(definition));
            state.meta = Arc::new(meta);
            Ok(())
        })
    }

    /// Adds a last-value cache (`CREATE LAST VALUE CACHE`): `keys` are SYMBOL column names.
    /// Commits on its own; the rows are the query layer's to keep.
    pub fn add_last_value_cache(
        &mut self,
        name: &str,
        keys: &[String],
        ignore_nulls: bool,
    ) -> Result<()> {
        validate_name(name, "last value cache")?;
        self.change_schema(Changes::default(), |state| {
            let meta = &state.meta;
            if meta.kind == TableKind::View || meta.timestamp_index.is_none() {
                return Err(StorageError::InvalidInput(format!(
                    "'{}' has no designated timestamp: a last value cache keeps the newest \
                     row per key by it",
                    meta.name
                )));
            }
            if meta
                .last_value_caches
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(name))
            {
                return Err(StorageError::AlreadyExists(format!(
                    "last value cache '{name}' already exists on '{}'",
                    meta.name
                )));
            }
            if meta.last_value_caches.len() >= crate::txn::LAST_VALUE_CACHES_MAX {
                return Err(StorageError::InvalidInput(format!(
                    "'{}' has {} last value caches, the most a table has",
                    meta.name,
                    meta.last_value_caches.len()
                )));
            }
            if keys.is_empty() || keys.len() > crate::txn::LAST_VALUE_CACHE_KEYS_MAX {
                return Err(StorageError::InvalidInput(format!(
                    "a last value cache has 1 to {} key columns, not {}",
                    crate::txn::LAST_VALUE_CACHE_KEYS_MAX,
                    keys.len()
                )));
            }
            let mut ids = Vec::with_capacity(keys.len());
            for key in keys {
                let column = &meta.columns[column_or_error(meta, key)?];
                if column.column_type != ColumnType::Symbol {
                    return Err(StorageError::InvalidInput(format!(
                        "column '{}' is {}: a last value cache's keys are SYMBOL columns",
                        column.name,
                        column.column_type.name()
                    )));
                }
                if ids.contains(&column.id) {
                    return Err(StorageError::InvalidInput(format!(
                        "column '{}' is named twice among the keys",
                        column.name
                    )));
                }
                ids.push(column.id);
            }
            let mut meta = (**meta).clone();
            meta.last_value_caches.push(crate::txn::LastValueCacheDef {
                name: name.to_string(),
                keys: ids,
                ignore_nulls,
            });
            state.meta = Arc::new(meta);
            Ok(())
        })
    }

    /// Drops the last-value cache `name`; `Ok(false)` if the table has none of that name.
    pub fn drop_last_value_cache(&mut self, name: &str) -> Result<bool> {
        let named = |c: &crate::txn::LastValueCacheDef| c.name.eq_ignore_ascii_case(name);
        if !self.meta().last_value_caches.iter().any(named) {
            return Ok(false);
        }
        self.change_schema(Changes::default(), |state| {
            let mut meta = (*state.meta).clone();
            meta.last_value_caches.retain(|c| !named(c));
            state.meta = Arc::new(meta);
            Ok(())
        })?;
        Ok(true)
    }

    /// Drops the partitions the table's TTL has expired (see `ttl.rs`); returns how many.
    pub fn drop_expired(&mut self) -> Result<usize> {
        let state = self.state()?;
        let meta = &state.committed.meta;
        let Some(ttl) = meta.ttl else {
            return Ok(0);
        };
        let cap = state.options.ttl_cap_ns();
        let expired = ttl.expired(meta.partition_by, &state.committed.partitions, cap);
        if expired.is_empty() {
            return Ok(0);
        }
        let names: Vec<String> = expired
            .iter()
            .map(|k| meta.partition_by.dir_name(*k))
            .collect();
        let expired_rows = Changes {
            expired: true,
            ..Changes::default()
        };
        let dropped = self.drop_partitions_as(&expired, expired_rows)?;
        tracing::info!(
            "'{}': TTL {ttl} dropped partition(s) {}",
            self.table.name(),
            names.join(", ")
        );
        Ok(dropped)
    }

    /// Removes every row, keeping the schema and symbol dictionaries.
    pub fn truncate(&mut self) -> Result<()> {
        self.change_schema(Changes::removed("truncate operation"), |state| {
            state.partitions.clear();
            Ok(())
        })
    }

    /// Removes whole partitions by key; returns how many existed.
    pub fn drop_partitions(&mut self, keys: &[i64]) -> Result<usize> {
        self.drop_partitions_as(keys, Changes::removed("drop partition operation"))
    }

    /// [`TableWriter::drop_partitions`], recorded as `changes`.
    fn drop_partitions_as(&mut self, keys: &[i64], changes: Changes) -> Result<usize> {
        let mut dropped = 0;
        self.change_schema(changes, |state| {
            let before = state.partitions.len();
            state.partitions.retain(|p| !keys.contains(&p.key));
            dropped = before - state.partitions.len();
            Ok(())
        })?;
        Ok(dropped)
    }

    /// A new, empty version directory for partition `key` (its version never used before),
    /// for a part written without the writer (see `convert.rs`). It is the caller's to delete
    /// unless [`TableWriter::replace_parts`] adopts it; opening the table deletes it after a
    /// crash.
    pub(crate) fn new_version_dir(&mut self, key: i64) -> Result<(u64, PathBuf)> {
        let state = self.state()?;
        let stem = state.committed.meta.partition_by.dir_name(key);
        let version = state.next_version;
        state.next_version += 1;
        let path = state
            .table_dir
            .path
            .join(partition_dir_name(&stem, version));
        if path.exists() {
            std::fs::remove_dir_all(&path).at(&path)?;
        }
        std::fs::create_dir(&path).at(&path)?;
        Ok((version, path))
    }

    /// Commits `part` (whose files in `dir` were written and fsynced, and the directory entries
    /// naming them too) in place of every part of its partition, durably in every mode, if the
    /// table's schema is still `meta` and those parts still `expected`; `Ok(false)` otherwise.
    /// Rows must not be pending.
    pub(crate) fn replace_parts(
        &mut self,
        meta: &Arc<TableMeta>,
        expected: &[PartitionMeta],
        part: PartitionMeta,
        dir: Arc<PartitionDir>,
    ) -> Result<bool> {
        let key = part.key;
        let state = self.state()?;
        if !state.pending.is_empty() {
            return Err(StorageError::InvalidInput(
                "commit or roll back pending rows before converting a partition".into(),
            ));
        }
        if state.committed.dropped {
            return Err(StorageError::NotFound(format!(
                "table '{}' was dropped",
                state.committed.meta.name
            )));
        }
        if *state.committed.meta != **meta || state.committed_parts(key) != expected {
            return Ok(false);
        }
        let mut next = state.committed.clone();
        next.seq += 1;
        let from = next.partitions.partition_point(|q| q.key < key);
        let to = next.partitions.partition_point(|q| q.key <= key);
        let version = part.version;
        next.partitions.splice(from..to, [part]);
        let snapshot = state.commit_state(next, vec![((key, version), dir)], true)?;
        self.table.publish(snapshot);
        Ok(true)
    }

    pub(crate) fn rename_table(&mut self, to: &str) -> Result<()> {
        let changed = Changes::schema("rename table operation");
        self.change_schema(changed, |state| {
            let mut meta = (*state.meta).clone();
            meta.name = to.to_string();
            state.meta = Arc::new(meta);
            Ok(())
        })
    }

    pub(crate) fn mark_dropped(&mut self) -> Result<()> {
        self.change_schema(Changes::schema("drop table operation"), |state| {
            state.dropped = true;
            Ok(())
        })?;
        self.table.mark_dropped();
        Ok(())
    }

    /// Commits a change of table state that adds no rows, recorded for materialized views as
    /// `changes` (see `changes.rs`). Fails if rows are pending.
    fn change_schema(
        &mut self,
        changes: Changes,
        change: impl FnOnce(&mut TxnState) -> Result<()>,
    ) -> Result<()> {
        let state = self.state()?;
        if !state.pending.is_empty() || state.replacing.is_some() || state.refresh.is_some() {
            return Err(StorageError::InvalidInput(
                "commit or roll back pending rows before changing the table".into(),
            ));
        }
        let mut next = state.committed.clone();
        next.seq += 1;
        change(&mut next)?;
        // Fsynced in every mode: the directories a schema change leaves unnamed are deleted
        // next, and the previous slot, which names them, must never be taken again.
        let snapshot = state.commit_state(next, Vec::new(), true)?;
        // Recorded before it is published (see `commit`).
        self.table.record_changes(snapshot.seq(), changes);
        self.table.publish(snapshot);
        Ok(())
    }
}

/// Only SYMBOL columns take an index.
pub(crate) fn check_indexable(column: &ColumnMeta) -> Result<()> {
    if column.column_type == ColumnType::Symbol {
        return Ok(());
    }
    Err(StorageError::InvalidInput(format!(
        "column '{}' is {}: only SYMBOL columns can be indexed",
        column.name,
        column.column_type.name()
    )))
}

fn column_or_error(meta: &TableMeta, name: &str) -> Result<usize> {
    meta.column_index(name).ok_or_else(|| {
        StorageError::NotFound(format!(
            "column '{name}' does not exist in table '{}'",
            meta.name
        ))
    })
}

/// Fails unless every non-NULL value of every TIMESTAMP column is in the range a table holds
/// ([`crate::timestamp_in_range`]), naming the first value outside it and its column.
fn check_timestamps_in_range(meta: &TableMeta, columns: &[ColumnBuf]) -> Result<()> {
    for (c, buf) in meta.columns.iter().zip(columns) {
        if c.column_type != ColumnType::Timestamp {
            continue;
        }
        let Values::Fixed { bytes, .. } = &buf.values else {
            continue;
        };
        let bad = bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .enumerate()
            .find(|(row, ns)| !crate::timestamp_in_range(*ns) && buf.is_valid(*row));
        if let Some((row, ns)) = bad {
            return Err(StorageError::InvalidInput(format!(
                "timestamp {ns} (row {}) in column '{}' of table '{}' is outside the supported \
                 range {} ({}..{} nanoseconds since the Unix epoch)",
                row + 1,
                c.name,
                meta.name,
                crate::TIMESTAMP_RANGE_TEXT,
                crate::TIMESTAMP_MIN_NS,
                crate::TIMESTAMP_END_NS,
            )));
        }
    }
    Ok(())
}

fn timestamps(buf: &ColumnBuf) -> Vec<i64> {
    match &buf.values {
        Values::Fixed { bytes, .. } => bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
        _ => Vec::new(),
    }
}

impl WriterState {
    fn snapshot(&self) -> Snapshot {
        let dirs = self
            .committed
            .partitions
            .iter()
            .filter_map(|p| self.dirs.get(&(p.key, p.version)).cloned())
            .collect();
        let symbols = self
            .symbols
            .iter()
            .map(|(id, d)| (*id, d.published()))
            .collect();
        Snapshot {
            schema: self.committed.meta.arrow_schema(),
            state: Arc::new(self.committed.clone()),
            dirs,
            symbols,
        }
    }

    /// The published dictionary of every SYMBOL column, by column id.
    fn published_symbols(&self) -> HashMap<u32, Arc<PublishedSymbols>> {
        self.symbols
            .iter()
            .map(|(id, d)| (*id, d.published()))
            .collect()
    }

    fn append(&mut self, batch: &RecordBatch) -> Result<()> {
        let meta = self.committed.meta.clone();
        match self.columns_of(&meta, batch)? {
            Some(columns) => self.append_columns(&meta, columns),
            None => Ok(()),
        }
    }

    /// Appends `batches` as one: when they overlap in time, their rows are put in timestamp
    /// order together (equal timestamps keep the order of `batches`), so that rows of several
    /// sorted runs land in order instead of being merged as out-of-order rows at commit.
    fn append_all(&mut self, batches: &[RecordBatch]) -> Result<()> {
        let meta = self.committed.meta.clone();
        let mut runs = Vec::with_capacity(batches.len());
        for batch in batches {
            if let Some(columns) = self.columns_of(&meta, batch)? {
                runs.push(columns);
            }
        }
        let in_order = match meta.timestamp_index {
            None => true,
            Some(t) => {
                let strict = meta.deduplicates();
                let mut last = i64::MIN;
                runs.iter().all(|run| {
                    let ts = timestamps(&run[t]);
                    let first = ts.first().copied().unwrap_or(i64::MAX);
                    let ordered = (first > last || (first == last && !strict))
                        && ts.windows(2).all(|w| w[0] <= w[1]);
                    last = ts.last().copied().unwrap_or(last);
                    ordered
                })
            }
        };
        if in_order || runs.len() == 1 {
            for columns in runs {
                self.append_columns(&meta, columns)?;
            }
            return Ok(());
        }
        let mut all: Vec<ColumnBuf> = meta
            .columns
            .iter()
            .map(|c| ColumnBuf::empty(c.column_type))
            .collect();
        for run in &runs {
            for (dst, src) in all.iter_mut().zip(run) {
                dst.extend_from(src, 0..src.rows);
            }
        }
        drop(runs);
        self.append_columns(&meta, all)
    }

    /// `batch` as the table's columns (NULL where it has none), or `None` when it has no rows.
    fn columns_of(
        &mut self,
        meta: &TableMeta,
        batch: &RecordBatch,
    ) -> Result<Option<Vec<ColumnBuf>>> {
        let rows = batch.num_rows();
        for field in batch.schema().fields() {
            if meta.column_index(field.name()).is_none() {
                return Err(StorageError::NotFound(format!(
                    "column '{}' does not exist in table '{}'",
                    field.name(),
                    meta.name
                )));
            }
        }
        if rows == 0 {
            return Ok(None);
        }
        let schema = batch.schema();
        let mut columns = Vec::with_capacity(meta.columns.len());
        for c in &meta.columns {
            let index = schema
                .fields()
                .iter()
                .position(|f| f.name() == &c.name)
                .or_else(|| {
                    schema
                        .fields()
                        .iter()
                        .position(|f| f.name().eq_ignore_ascii_case(&c.name))
                });
            let buf = match index {
                None => ColumnBuf::nulls(c.column_type, rows),
                Some(i) => {
                    let resolver = self
                        .symbols
                        .get_mut(&c.id)
                        .map(|d| d as &mut dyn SymbolResolver);
                    from_arrow(batch.column(i), c.column_type, &c.name, resolver)?
                }
            };
            columns.push(buf);
        }
        Ok(Some(columns))
    }

    /// Appends rows given as the table's columns, in timestamp order (sorted here if need be,
    /// and deduplicated in a table with keys).
    fn append_columns(&mut self, meta: &TableMeta, mut columns: Vec<ColumnBuf>) -> Result<()> {
        if self.committed.dropped {
            // A handle kept past DROP TABLE: its rows would go to files about to be deleted.
            return Err(StorageError::NotFound(format!(
                "table '{}' was dropped",
                meta.name
            )));
        }
        match meta.kind {
            TableKind::Table => {}
            // Only a refresh writes a materialized view's rows, replacing a range.
            TableKind::MaterializedView if self.replacing.is_some() => {}
            TableKind::MaterializedView => {
                return Err(StorageError::InvalidInput(format!(
                    "'{}' is a materialized view: its rows come from its query over its base \
                     table; write to the base table instead",
                    meta.name
                )));
            }
            TableKind::View => {
                return Err(StorageError::InvalidInput(format!(
                    "'{}' is a view: it stores no rows; write to the tables it reads",
                    meta.name
                )));
            }
        }
        let rows = columns.first().map_or(0, |c| c.rows);
        check_timestamps_in_range(meta, &columns)?;
        let Some(ts_index) = meta.timestamp_index else {
            return self.append_run(0, &columns, &[], 0..rows);
        };
        if columns[ts_index].has_nulls() {
            return Err(StorageError::InvalidInput(format!(
                "designated timestamp column '{}' cannot be NULL",
                meta.columns[ts_index].name
            )));
        }
        let mut ts = timestamps(&columns[ts_index]);
        let keys = meta.dedup_keys();
        // A batch in order into a table without keys (the usual case) is taken as it is.
        let sorted = ts.windows(2).all(|w| w[0] <= w[1]);
        if !sorted || !keys.is_empty() {
            let mut order: Vec<u32> = (0..rows as u32).collect();
            if !sorted {
                order.sort_by_key(|i| ts[*i as usize]);
            }
            if !keys.is_empty() {
                let key_columns: Vec<&ColumnBuf> = keys[1..].iter().map(|k| &columns[*k]).collect();
                let keys = dedup::Keys { keys: &key_columns };
                order = dedup::keep_last(&order, |i| ts[i as usize], &keys);
            }
            if !sorted || order.len() < rows {
                columns = columns.iter().map(|c| c.gather(&order)).collect();
                ts = timestamps(&columns[ts_index]);
            }
        }
        if let Some(newest) = ts.last()
            && self.options.timestamp_future_ms_max.is_some()
        {
            let now = self.options.clock.now_ns();
            self.options.check_future(&meta.name, *newest, now)?;
        }
        let rows = ts.len();
        let partition_by = meta.partition_by;
        let mut start = 0;
        while start < rows {
            let key = partition_by.floor(ts[start]);
            let next = partition_by.next(key);
            // Every timestamp is in range (checked above), so its partition starts at or before
            // it (NONE: one partition keyed 0) and ends after it: each run is non-empty and the
            // loop advances.
            debug_assert!(
                (key <= ts[start] || partition_by == PartitionBy::None) && ts[start] < next,
                "partition of {}",
                ts[start]
            );
            let end = start + ts[start..].partition_point(|t| *t < next);
            ensure_invariant!(
                end > start,
                "timestamp {} is not before the end {next} of its partition",
                ts[start]
            );
            self.append_run(key, &columns, &ts, start..end)?;
            start = end;
        }
        Ok(())
    }

    fn pending_partition(&mut self, key: i64) -> Result<&mut Pending> {
        if !self.pending.contains_key(&key) {
            // Appends go to the partition's last part, or to a new part after a Parquet one
            // (whose file never changes): rows before its end are out of order.
            let last = self.committed.partitions.iter().rfind(|p| p.key == key);
            let pending = match last.cloned() {
                Some(base) if !base.format.is_parquet() => Pending {
                    dir: self
                        .dirs
                        .get(&(key, base.version))
                        .cloned()
                        .ok_or_else(|| {
                            StorageError::Internal("partition without directory".into())
                        })?,
                    is_new: false,
                    base: base.clone(),
                    tail_rows: 0,
                    min_ts: base.min_ts,
                    max_ts: base.max_ts,
                    after_parquet: false,
                    o3: None,
                    o3_ts: Vec::new(),
                },
                after => {
                    let dir = self.new_partition_dir(key)?;
                    Pending {
                        dir,
                        is_new: true,
                        base: PartitionMeta {
                            key,
                            version: 0,
                            row_count: 0,
                            min_ts: i64::MAX,
                            max_ts: i64::MIN,
                            tops: Vec::new(),
                            format: PartFormat::Native,
                        },
                        tail_rows: 0,
                        min_ts: i64::MAX,
                        max_ts: after.as_ref().map_or(i64::MIN, |p| p.max_ts),
                        after_parquet: after.is_some(),
                        o3: None,
                        o3_ts: Vec::new(),
                    }
                }
            };
            self.pending.insert(key, pending);
        }
        self.pending
            .get_mut(&key)
            .ok_or_else(|| StorageError::Internal("pending partition vanished".into()))
    }

    fn new_partition_dir(&mut self, key: i64) -> Result<Arc<PartitionDir>> {
        let stem = self.committed.meta.partition_by.dir_name(key);
        let version = self.next_version;
        self.next_version += 1;
        let path = self.table_dir.path.join(partition_dir_name(&stem, version));
        if path.exists() {
            std::fs::remove_dir_all(&path).at(&path)?;
        }
        std::fs::create_dir(&path).at(&path)?;
        self.unsynced_dirs.add(&self.table_dir.path);
        self.unsynced_dirs.add(&path);
        let dir = Arc::new(PartitionDir::new(self.table_dir.clone(), path));
        // Removed on drop unless a commit adopts it.
        dir.obsolete.store(true, Ordering::Release);
        Ok(dir)
    }

    fn append_run(
        &mut self,
        key: i64,
        columns: &[ColumnBuf],
        ts: &[i64],
        range: Range<usize>,
    ) -> Result<()> {
        let meta = self.committed.meta.clone();
        let bytes_max = self.options.uncommitted_bytes_max;
        let n = range.len();
        let (run_min, run_max) = if ts.is_empty() {
            (0, 0)
        } else {
            (ts[range.start], ts[range.end - 1])
        };
        if !ts.is_empty() {
            if let Some((lo, hi)) = self.replacing
                && (run_min < lo || run_max >= hi)
            {
                return Err(StorageError::InvalidInput(format!(
                    "a row at {} is outside the range {lo}..{hi} being replaced",
                    if run_min < lo { run_min } else { run_max }
                )));
            }
            self.txn_rows = Some(match self.txn_rows {
                Some((a, b)) => (a.min(run_min), b.max(run_max)),
                None => (run_min, run_max),
            });
        } else if self.txn_rows.is_none() {
            self.txn_rows = Some((0, 0));
        }
        let pending_bytes = self.pending_bytes;
        let pending = self.pending_partition(key)?;
        let rows_so_far = pending.base.row_count + pending.tail_rows;
        // In a deduplicating table a row at the newest timestamp may replace one stored: merged.
        let behind = run_min < pending.max_ts || (meta.deduplicates() && run_min == pending.max_ts);
        let rows_before = rows_so_far > 0 || pending.after_parquet;
        let out_of_order = pending.o3.is_some() || (!ts.is_empty() && rows_before && behind);
        if !ts.is_empty() {
            pending.min_ts = pending.min_ts.min(run_min);
            pending.max_ts = pending.max_ts.max(run_max);
        }
        if out_of_order {
            let rows_total: usize = columns.first().map_or(1, |c| c.rows.max(1));
            let bytes: usize =
                columns.iter().map(ColumnBuf::heap_bytes).sum::<usize>() * n / rows_total;
            if pending_bytes + bytes > bytes_max {
                return Err(StorageError::ResourceExhausted(format!(
                    "out-of-order rows awaiting commit exceed {bytes_max} bytes; commit more often"
                )));
            }
            let o3 = pending.o3.get_or_insert_with(|| {
                meta.columns
                    .iter()
                    .map(|c| ColumnBuf::empty(c.column_type))
                    .collect()
            });
            for (dst, src) in o3.iter_mut().zip(columns) {
                dst.extend_from(src, range.clone());
            }
            pending.o3_ts.extend_from_slice(&ts[range]);
            self.pending_bytes += bytes;
            return Ok(());
        }
        pending.tail_rows += n as u64;
        let dir_path = pending.dir.path.clone();
        let base = pending.base.clone();
        let cache = self.table_dir.cache.clone();
        let files = self.files.entry(key).or_default();
        let unsynced = &mut self.unsynced_dirs;
        for (c, buf) in meta.columns.iter().zip(columns) {
            let f = match files.entry(c.id) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let rows = rows_so_far - base.column_top(c.id).min(rows_so_far);
                    e.insert(ColumnFiles::open(&cache, &dir_path, c, rows, unsynced)?)
                }
            };
            f.append(buf, range.clone(), unsynced)?;
        }
        Ok(())
    }

    /// Discards pending rows; files keep harmless bytes past the committed rows. Their names
    /// stay recorded as unsynced: a later commit may give those files their first rows.
    fn rollback(&mut self) {
        for (key, p) in std::mem::take(&mut self.pending) {
            self.files.remove(&key);
            if !p.is_new {
                // Appended bytes may include a new validity file; forget cached mappings.
                for c in &self.committed.meta.columns {
                    p.dir.forget(&validity_file(c.id));
                }
            }
            // Dropping `p` deleted a directory new in the discarded transaction (obsolete,
            // held by nothing else): it needs no fsync; the table directory stays recorded.
        }
        self.unsynced_dirs.retain(|dir| dir.is_dir());
        for d in self.symbols.values_mut() {
            d.rollback();
        }
        self.pending_bytes = 0;
        self.replacing = None;
        self.refresh = None;
        self.txn_rows = None;
    }

    /// Writes the pending rows and the transaction. `Ok(None)` when nothing was pending.
    fn commit(&mut self) -> Result<Option<Snapshot>> {
        if self.pending.is_empty() && self.refresh.is_none() {
            self.replacing = None;
            return Ok(None);
        }
        let sync = self.options.durability == Durability::Sync;
        let mut next = self.committed.clone();
        next.seq += 1;
        if let Some(refresh) = self.refresh.clone() {
            next.refresh = Some(refresh);
        }
        let mut adopted = Vec::new();
        let pending = std::mem::take(&mut self.pending);
        let result = (|| -> Result<()> {
            for (key, p) in &pending {
                let parts = if p.o3.is_some() {
                    self.merge_tail(p, sync)?
                } else {
                    self.appended_parts(p, sync)?
                };
                let columns = &self.committed.meta.columns;
                for part in &parts {
                    if let Some(first) = part.zones_from {
                        let zones = first..complete_zones(part.meta.row_count);
                        let unsynced = &mut self.unsynced_dirs;
                        write_zones(&part.dir, columns, &part.meta, zones, sync, unsynced)?;
                    }
                }
                let from = next.partitions.partition_point(|q| q.key < *key);
                let to = next.partitions.partition_point(|q| q.key <= *key);
                next.partitions
                    .splice(from..to, parts.iter().map(|part| part.meta.clone()));
                adopted.extend(
                    parts
                        .into_iter()
                        .map(|part| ((part.meta.key, part.meta.version), part.dir)),
                );
            }
            for (id, dict) in &mut self.symbols {
                dict.write_pending(sync, &mut self.unsynced_dirs)?;
                match next.symbol_counts.iter_mut().find(|(i, _)| i == id) {
                    Some(entry) => entry.1 = dict.len(),
                    None => next.symbol_counts.push((*id, dict.len())),
                }
            }
            Ok(())
        })();
        self.pending = pending;
        result?;
        let snapshot = self.commit_state(next, adopted, false)?;
        Ok(Some(snapshot))
    }

    /// The committed parts of partition `key`, oldest first.
    fn committed_parts(&self, key: i64) -> &[PartitionMeta] {
        let parts = &self.committed.partitions;
        &parts[parts.partition_point(|q| q.key < key)..parts.partition_point(|q| q.key <= key)]
    }

    /// The parts of a partition whose pending rows were all appended in order: its last part
    /// (or a new one) grows.
    fn appended_parts(&mut self, p: &Pending, sync: bool) -> Result<Vec<WrittenPart>> {
        let key = p.base.key;
        if sync {
            self.sync_appended(key)?;
        }
        let mut meta = p.base.clone();
        meta.row_count += p.tail_rows;
        meta.min_ts = p.min_ts;
        meta.max_ts = p.max_ts;
        if p.is_new {
            meta.version = version_of(&p.dir.path)?;
        }
        if self.committed.meta.timestamp_index.is_none() {
            meta.min_ts = 0;
            meta.max_ts = 0;
        }
        let mut parts: Vec<WrittenPart> = self.kept_parts(key, usize::MAX)?;
        if !p.is_new {
            parts.pop();
        }
        // Zones complete after the committed ones; a new part has all.
        let zones_from = if p.is_new {
            0
        } else {
            complete_zones(p.base.row_count)
        };
        parts.push(WrittenPart {
            meta,
            dir: p.dir.clone(),
            zones_from: Some(zones_from),
        });
        Ok(parts)
    }

    /// Fsyncs the files this transaction appended to in partition `key`'s last part.
    fn sync_appended(&mut self, key: i64) -> Result<()> {
        for f in self
            .files
            .get_mut(&key)
            .into_iter()
            .flat_map(|m| m.values_mut())
        {
            f.sync()?;
        }
        Ok(())
    }

    /// The first `n` committed parts of partition `key`, unchanged.
    fn kept_parts(&self, key: i64, n: usize) -> Result<Vec<WrittenPart>> {
        self.committed_parts(key)
            .iter()
            .take(n)
            .map(|meta| {
                let dir = self.dirs.get(&(key, meta.version)).cloned();
                let dir = dir.ok_or_else(|| {
                    StorageError::Internal("committed part without directory".into())
                })?;
                Ok(WrittenPart {
                    meta: meta.clone(),
                    dir,
                    zones_from: None,
                })
            })
            .collect()
    }
    /// Writes `next` to the transaction file and makes it the committed state. With
    /// `durable`, the slot is fsynced whatever the durability mode.
    fn commit_state(
        &mut self,
        next: TxnState,
        adopted: Vec<(PartKey, Arc<PartitionDir>)>,
        durable: bool,
    ) -> Result<Snapshot> {
        let sync = durable || self.options.durability == Durability::Sync;
        ensure_invariant!(next.seq == self.committed.seq + 1, "commit sequence gap");
        let slot = self.table_dir.path.join(TXN_SLOTS[(next.seq % 2) as usize]);
        let bytes = next.encode();
        if cfg!(debug_assertions) {
            let written: Vec<Written> = adopted
                .iter()
                .map(|(key, dir)| Written {
                    key: key.0,
                    version: key.1,
                    fresh: !self.dirs.get(key).is_some_and(|d| Arc::ptr_eq(d, dir)),
                })
                .collect();
            invariants::debug_check_publishable(&self.table_dir.path, &next, &bytes, &written);
        }
        self.sync_dirs()?;
        // Overwritten in place (both slots exist from CREATE TABLE): no directory entry changes.
        debug_assert!(slot.is_file(), "transaction slot {} exists", slot.display());
        // Directories created by this commit stay marked obsolete (removed when dropped)
        // until the transaction naming them is written.
        write_file(&slot, &bytes, sync)?;
        // Committed: from here on nothing may fail.
        for (key, dir) in adopted {
            dir.obsolete.store(false, Ordering::Release);
            // Versions are never reused: a directory already held is the one adopted.
            if let Some(old) = self.dirs.insert(key, dir)
                && !Arc::ptr_eq(&old, &self.dirs[&key])
            {
                old.obsolete.store(true, Ordering::Release);
            }
        }
        // Parts are sorted by key and version-unique (the transaction's invariants): a binary
        // search each.
        let mut live: Vec<PartKey> = next.partitions.iter().map(|p| (p.key, p.version)).collect();
        live.sort_unstable();
        self.dirs.retain(|key, dir| {
            let keep = live.binary_search(key).is_ok();
            if !keep {
                dir.obsolete.store(true, Ordering::Release);
            }
            keep
        });
        // Where the next rows go is re-read from the files when a partition is next appended
        // to, so this state lasts one transaction and grows with no more than its partitions.
        self.files.clear();
        self.committed = next;
        self.pending.clear();
        self.pending_bytes = 0;
        self.replacing = None;
        self.refresh = None;
        self.txn_rows = None;
        for d in self.symbols.values_mut() {
            d.mark_committed();
        }
        for c in &self.committed.meta.columns {
            if c.column_type == ColumnType::Symbol
                && !self.symbols.contains_key(&c.id)
                && let Ok(d) = SymbolDict::load(&self.table_dir.path, c.id, 0)
            {
                self.symbols.insert(c.id, d);
            }
        }
        let ids: Vec<u32> = self.committed.meta.columns.iter().map(|c| c.id).collect();
        self.symbols.retain(|id, _| ids.contains(id));
        Ok(self.snapshot())
    }

    /// With durability `sync`, fsyncs every directory whose entries this writer changed since
    /// the last commit (see `dir_sync.rs`); called right before a transaction slot is written,
    /// after every file the slot commits was fsynced. In other modes only forgets them.
    fn sync_dirs(&mut self) -> Result<()> {
        if self.options.durability != Durability::Sync {
            self.unsynced_dirs.clear();
            return Ok(());
        }
        self.unsynced_dirs.sync_all()?;
        debug_assert!(self.unsynced_dirs.is_empty(), "every directory fsynced");
        Ok(())
    }

    /// Merges a partition's out-of-order rows with its existing rows from the first one after
    /// them (see `merge.rs`) into a new last part; returns the partition's parts.
    fn merge_tail(&mut self, p: &Pending, sync: bool) -> Result<Vec<WrittenPart>> {
        let meta = self.committed.meta.clone();
        let ts_col = meta.timestamp_column().ok_or_else(|| {
            StorageError::Internal("out-of-order rows without a timestamp".into())
        })?;
        let o3 =
            p.o3.as_ref()
                .ok_or_else(|| StorageError::Internal("no out-of-order rows".into()))?;
        let key = p.base.key;
        // The parts as they stand with this transaction's in-order rows: the last one (possibly
        // new) has them.
        // Committed parts precede a new one only after a Parquet part.
        let mut parts = self.kept_parts(key, usize::MAX)?;
        ensure_invariant!(
            !p.is_new || parts.is_empty() != p.after_parquet,
            "a new part follows committed parts only after a Parquet part"
        );
        if p.is_new {
            parts.push(WrittenPart {
                meta: p.base.clone(),
                dir: p.dir.clone(),
                zones_from: None,
            });
        }
        let last = parts.len() - 1;
        parts[last].meta.row_count += p.tail_rows;
        let rows: Vec<u64> = parts.iter().map(|part| part.meta.row_count).collect();
        let mut o3_min = p.o3_ts.iter().copied().min().unwrap_or(i64::MAX);
        if let Some((lo, _)) = self.replacing {
            o3_min = o3_min.min(lo);
        }
        // Rows at `o3_min` are merged too when incoming rows may replace them, or when the
        // range replaced starts there.
        let dedup = meta.dedup_keys();
        let inclusive = !dedup.is_empty() || self.replacing.is_some();
        let merged_from = |t: i64| t > o3_min || (inclusive && t == o3_min);
        // The first part with a row to merge: its last timestamp is known unless it is the last
        // part, which has one (the rows were out of order).
        let first = parts[..last]
            .iter()
            .position(|part| merged_from(part.meta.max_ts))
            .unwrap_or(last);
        let ts_mapped = if rows[first] == 0 {
            None
        } else {
            Some(part_timestamps(&parts[first].dir, ts_col, rows[first])?)
        };
        let ts_bytes: &[u8] = ts_mapped.as_ref().map_or(&[], |b| b.as_slice());
        let ts_at = |row: u64| {
            let i = row as usize * 8;
            i64::from_le_bytes(ts_bytes[i..i + 8].try_into().unwrap_or([0; 8]))
        };
        let row = merge::first_row_from(ts_bytes, rows[first], o3_min, inclusive);
        let start = merge::plan(&rows, first, row, p.o3_ts.len() as u64);
        // The start moves to an earlier part only from its first row.
        ensure_invariant!(start.row == 0 || start.part == first, "merge start moved");
        let total = start.rewritten as usize;
        if total >= u32::MAX as usize {
            return Err(StorageError::ResourceExhausted(format!(
                "an out-of-order merge may rewrite at most {} rows",
                u32::MAX - 1
            )));
        }
        let prefix_bounds = (start.row > 0).then(|| (ts_at(0), ts_at(start.row - 1)));
        tracing::debug!(
            "'{}': {} out-of-order rows (from {o3_min}) rewrite {} rows of partition {} \
             (part {} of {}, from row {})",
            meta.name,
            p.o3_ts.len(),
            start.rewritten - p.o3_ts.len() as u64,
            meta.partition_by.dir_name(key),
            start.part + 1,
            parts.len(),
            start.row
        );
        // A column's rows being merged: the existing ones, then the incoming ones.
        let published = self.published_symbols();
        let read = |c: &ColumnMeta, extra: &ColumnBuf| -> Result<ColumnBuf> {
            let mut all = ColumnBuf::empty(c.column_type);
            for (i, part) in parts.iter().enumerate().skip(start.part) {
                let from = if i == start.part { start.row } else { 0 };
                let top = part.meta.column_top(c.id);
                let symbols = published.get(&c.id).map(Arc::as_ref);
                let own = read_part(&part.dir, c, top, from..rows[i], symbols)?;
                all.extend_from(&own, 0..own.rows);
            }
            all.extend_from(extra, 0..extra.rows);
            Ok(all)
        };
        let ts_index = meta.timestamp_index.unwrap_or_default();
        let all_ts = timestamps(&read(ts_col, &o3[ts_index])?);
        let existing = all_ts.len() - p.o3_ts.len();
        let existing_ts = &all_ts[..existing];
        let mut o3_order: Vec<u32> = (0..p.o3_ts.len() as u32).collect();
        o3_order.sort_by_key(|i| p.o3_ts[*i as usize]);
        let mut order = merge::merge_order(existing_ts, &p.o3_ts, &o3_order);
        ensure_invariant!(order.len() == total, "merge lost rows");
        let mut key_columns: Vec<(usize, ColumnBuf)> = Vec::new();
        if !dedup.is_empty() {
            for &k in &dedup[1..] {
                key_columns.push((k, read(&meta.columns[k], &o3[k])?));
            }
            let keys: Vec<&ColumnBuf> = key_columns.iter().map(|(_, c)| c).collect();
            let keys = dedup::Keys { keys: &keys };
            order = dedup::keep_last(&order, |i| all_ts[i as usize], &keys);
        }
        if let Some((lo, hi)) = self.replacing {
            // Existing rows in the range are replaced by the incoming ones.
            order.retain(|i| *i as usize >= existing || !(lo..hi).contains(&all_ts[*i as usize]));
        }
        let merged_ts = |at: Option<&u32>| at.map(|i| all_ts[*i as usize]);
        // A range replacement may leave no rows from the merge start on: no tail part then.
        let mut tail = None;
        if let (Some(min_ts), Some(max_ts)) = (merged_ts(order.first()), merged_ts(order.last())) {
            let dir = self.new_partition_dir(key)?;
            for (i, (c, extra)) in meta.columns.iter().zip(o3).enumerate() {
                let all = match key_columns.iter().position(|(k, _)| *k == i) {
                    Some(at) => key_columns.swap_remove(at).1,
                    None => read(c, extra)?,
                };
                let merged = all.gather(&order);
                let unsynced = &mut self.unsynced_dirs;
                let mut files = ColumnFiles::open(dir.cache(), &dir.path, c, 0, unsynced)?;
                files.append(&merged, 0..merged.rows, unsynced)?;
                if sync {
                    files.sync()?;
                }
            }
            let meta = PartitionMeta {
                key,
                version: version_of(&dir.path)?,
                row_count: order.len() as u64,
                min_ts,
                max_ts,
                tops: Vec::new(),
                format: PartFormat::Native,
            };
            tail = Some(WrittenPart {
                meta,
                dir,
                zones_from: Some(0),
            });
        }
        let appended_to_kept_prefix = start.part == last && start.row > 0 && p.tail_rows > 0;
        if appended_to_kept_prefix && sync {
            self.sync_appended(key)?;
        }
        if p.is_new && !(start.part == last && start.row > 0) {
            // Replaced before any transaction named it; deleted once dropped.
            self.unsynced_dirs.remove(&p.dir.path);
        }
        let mut out: Vec<WrittenPart> = parts.drain(..start.part).collect();
        if let Some((min_ts, max_ts)) = prefix_bounds {
            let mut prefix = parts.swap_remove(0);
            prefix.meta.row_count = start.row;
            prefix.meta.min_ts = min_ts;
            prefix.meta.max_ts = max_ts;
            if start.part == last {
                // This transaction's appends may have completed zones of the kept rows.
                prefix.zones_from = Some(complete_zones(p.base.row_count));
                if p.is_new {
                    prefix.meta.version = version_of(&p.dir.path)?;
                }
            }
            for (_, top) in &mut prefix.meta.tops {
                *top = (*top).min(start.row);
            }
            // Sealed: never written again, so its files need no open descriptors (readers map).
            self.table_dir.cache.forget_files_under(&prefix.dir.path);
            out.push(prefix);
        }
        out.extend(tail);
        Ok(out)
    }
}

/// How many of the ascending timestamps in `pieces` (consecutive runs) are before `t`.
fn rows_before(pieces: &[&[i64]], t: i64) -> u64 {
    let mut rows = 0;
    for piece in pieces {
        match piece.last() {
            None => {}
            Some(last) if *last < t => rows += piece.len() as u64,
            Some(_) => return rows + piece.partition_point(|x| *x < t) as u64,
        }
    }
    rows
}

/// Rows `rows` of column `c` (rows below `top` NULL) of a committed part, in memory.
fn read_part(
    dir: &PartitionDir,
    c: &ColumnMeta,
    top: u64,
    rows: Range<u64>,
    symbols: Option<&PublishedSymbols>,
) -> Result<ColumnBuf> {
    if !dir.is_parquet() {
        return dir.read_raw(c, top, rows);
    }
    let array = read_array(dir, c, top, rows.start, rows.end, symbols)?;
    let mut lookup = symbols.map(CommittedSymbols);
    let resolver = lookup.as_mut().map(|l| l as &mut dyn SymbolResolver);
    from_arrow(&array, c.column_type, &c.name, resolver)
}

/// The first `rows` designated timestamps of a committed part, as little-endian bytes.
fn part_timestamps(dir: &PartitionDir, ts_col: &ColumnMeta, rows: u64) -> Result<Buffer> {
    if dir.is_parquet() {
        let array = read_array(dir, ts_col, 0, 0, rows, None)?;
        let ts = array
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or_else(|| StorageError::Internal("designated timestamp is not one".into()))?;
        return Ok(ts.values().inner().clone());
    }
    let path = || dir.path.join(data_file(ts_col.id));
    dir.map(&data_file(ts_col.id), rows as usize * 8)?
        .ok_or_else(|| StorageError::corrupt(path(), "missing timestamp file"))
}

fn version_of(path: &Path) -> Result<u64> {
    path.extension()
        .and_then(|e| e.to_str())
        .and_then(|e| e.parse().ok())
        .ok_or_else(|| {
            StorageError::Internal(format!("bad partition directory {}", path.display()))
        })
}

/// Fails unless `rows` is a range of `part`'s rows.
fn check_rows(part: &PartitionMeta, rows: &Range<u64>) -> Result<()> {
    if rows.start > rows.end || rows.end > part.row_count {
        return Err(StorageError::InvalidInput(format!(
            "rows {rows:?} outside partition of {} rows",
            part.row_count
        )));
    }
    Ok(())
}
