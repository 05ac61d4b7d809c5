//! Directories and column files: naming, memory-mapped reads, positioned writes.
//!
//! Files of column `N` in a partition directory: `N.d` (values), `N.o` (`u64` end offsets of
//! variable-length values, preceded by a 0), `N.v` (validity bitmap, absent when no NULL was ever
//! written). Files only grow while a partition version is live, and bytes of committed rows are
//! never rewritten, so a reader can map them while the writer appends.
//!
//! A Parquet part's directory holds `data.parquet` (see `parquet_read.rs`) and the zone files
//! of its columns instead.
//!
//! Descriptors and mappings come from the database's bounded [`FileCache`]: nothing here keeps
//! a file open by itself.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow_buffer::Buffer;
use sundial_kernels::Zone;

use crate::bits;
use crate::cache::{FileCache, Mapped};
use crate::cold_store::ColdStore;
use crate::column::{ColumnBuf, Values};
use crate::dir_sync::UnsyncedDirs;
pub(crate) use crate::dir_sync::sync_dir;
use crate::error::{IoContext, Result, StorageError};
use crate::parquet_read::{OpenedParquet, ParquetPart};
use crate::txn::{ColumnMeta, PartFormat};
use crate::types::Layout;

/// A table's directory; deleted (through [`remove_table_dir`]) when the last reference goes
/// while it is marked `dropped`, which is set only after the DROP TABLE transaction is written.
#[derive(Debug)]
pub(crate) struct TableDir {
    pub path: PathBuf,
    pub dropped: AtomicBool,
    pub cache: Arc<FileCache>,
    /// Where remote Parquet parts are kept, if the database has a cold store.
    pub cold: Option<Arc<ColdStore>>,
}

impl TableDir {
    /// The name of the table's objects in the cold store: `<name>-<id>` after the directory's
    /// `<name>~<id>`, with every character of the name but ASCII letters, digits and `_` as
    /// `_`, so that keys need no escaping in any store or URL.
    pub fn cold_name(&self) -> String {
        let dir = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (name, id) = dir.rsplit_once('~').unwrap_or((dir.as_str(), ""));
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{name}-{id}")
    }
}

impl Drop for TableDir {
    fn drop(&mut self) {
        if !self.dropped.load(Ordering::Acquire) {
            return;
        }
        self.cache.forget_files_under(&self.path);
        if let Some(cold) = &self.cold {
            cold.delete_under_later(&self.cold_name());
        }
        if let Err(e) = remove_table_dir(&self.path) {
            tracing::warn!(
                "could not remove dropped table {}: {e}",
                self.path.display()
            );
        }
    }
}

/// One version of one partition's directory, shared by every snapshot that reads it.
/// Removed from disk when the last reference goes after a commit replaced it (`obsolete`).
#[derive(Debug)]
pub(crate) struct PartitionDir {
    pub path: PathBuf,
    pub obsolete: AtomicBool,
    /// Unique in the process: names this directory's entries in the mapping cache.
    id: u64,
    // Keeps the table directory alive while this partition is readable.
    table: Arc<TableDir>,
    /// Zone entries read so far, per column id: only of zones complete under the snapshot
    /// that read them, which never change (see `zone.rs`).
    zones: Mutex<HashMap<u32, Arc<[Option<Zone>]>>>,
    /// Per SYMBOL column id, `(n, d)`: the codes of the first `n` rows were checked to be
    /// below `d`. Committed rows never change, so a read of rows below `n` with a dictionary
    /// of at least `d` symbols may skip the check (see `read::symbol_array`).
    symbols_checked: Mutex<HashMap<u32, (u64, usize)>>,
    /// For a Parquet part: the file's committed length, whether it is remote, and the file
    /// once opened.
    parquet: Option<(u64, bool, Arc<OpenedParquet>)>,
}

/// Source of `PartitionDir::id`.
static NEXT_PARTITION_DIR_ID: AtomicU64 = AtomicU64::new(0);

impl Drop for PartitionDir {
    fn drop(&mut self) {
        self.table.cache.forget_mappings_of(self.id);
        if !self.obsolete.load(Ordering::Acquire) {
            return;
        }
        self.table.cache.forget_files_under(&self.path);
        if let (Some((_, true, _)), Some(cold)) = (&self.parquet, &self.table.cold) {
            cold.forget(&self.path.join(PARQUET_FILE));
            cold.delete_later(cold.key(&self.table.cold_name(), &self.name()));
        }
        if let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(
                "could not remove old partition {}: {e}",
                self.path.display()
            );
        }
    }
}

/// Prefix of a dropped table's directory while it is being deleted: `.dropped-<id>`.
pub(crate) const DROPPED_PREFIX: &str = ".dropped-";

/// Deletes a table directory `<root>/<name>~<id>` crash-safely: first renamed to
/// `<root>/.dropped-<id>` (atomic; the parent is fsynced), then deleted file by file. A crash
/// before the rename leaves the table whole under its name, after it a `.dropped-` directory
/// that opening the database deletes; never a table with some of its files gone.
pub(crate) fn remove_table_dir(path: &Path) -> Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(StorageError::Internal(format!(
            "table directory {} has no parent",
            path.display()
        )));
    };
    let name = name.to_string_lossy();
    let id = name.rsplit_once('~').map_or(name.as_ref(), |(_, id)| id);
    let trash = parent.join(format!("{DROPPED_PREFIX}{id}"));
    debug_assert!(trash != path, "a table directory is never named like trash");
    match std::fs::rename(path, &trash) {
        Ok(()) => sync_dir(parent)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StorageError::io(path, e)),
    }
    remove_trash(&trash)
}

/// Deletes a `.dropped-` directory (whose rename already made the drop durable).
pub(crate) fn remove_trash(trash: &Path) -> Result<()> {
    match std::fs::remove_dir_all(trash) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StorageError::io(trash, e)),
        _ => Ok(()),
    }
}

pub(crate) fn data_file(id: u32) -> String {
    format!("{id}.d")
}
pub(crate) fn offsets_file(id: u32) -> String {
    format!("{id}.o")
}
pub(crate) fn validity_file(id: u32) -> String {
    format!("{id}.v")
}

pub(crate) use crate::parquet_read::PARQUET_FILE;

pub(crate) fn partition_dir_name(stem: &str, version: u64) -> String {
    format!("{stem}.{version}")
}

impl PartitionDir {
    /// The directory of a native part.
    pub fn new(table: Arc<TableDir>, path: PathBuf) -> PartitionDir {
        PartitionDir::with_format(table, path, PartFormat::Native)
    }

    pub fn with_format(table: Arc<TableDir>, path: PathBuf, format: PartFormat) -> PartitionDir {
        let parquet = match format {
            PartFormat::Native => None,
            PartFormat::Parquet { file_bytes, remote } => {
                Some((file_bytes, remote, Arc::new(Mutex::new(None))))
            }
        };
        PartitionDir {
            path,
            obsolete: AtomicBool::new(false),
            id: NEXT_PARTITION_DIR_ID.fetch_add(1, Ordering::Relaxed),
            table,
            zones: Mutex::new(HashMap::new()),
            symbols_checked: Mutex::new(HashMap::new()),
            parquet,
        }
    }

    /// Whether the codes of rows `..end` of SYMBOL column `id` were checked to name symbols
    /// of a dictionary of `symbols` symbols.
    pub(crate) fn symbols_checked(&self, id: u32, end: u64, symbols: usize) -> bool {
        self.symbols_checked.lock().is_ok_and(|checked| {
            checked
                .get(&id)
                .is_some_and(|&(n, d)| end <= n && d <= symbols)
        })
    }

    /// Records that the codes of rows `rows` of SYMBOL column `id` are below `symbols`; the
    /// mark grows when they continue the checked rows (below the larger of the two bounds).
    pub(crate) fn note_symbols_checked(&self, id: u32, rows: std::ops::Range<u64>, symbols: usize) {
        if let Ok(mut checked) = self.symbols_checked.lock() {
            let (n, d) = checked.entry(id).or_insert((0, 0));
            if rows.start <= *n {
                *n = (*n).max(rows.end);
                *d = (*d).max(symbols);
            }
        }
    }

    /// Unique in the process: names this directory's entries in the caches.
    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn is_parquet(&self) -> bool {
        self.parquet.is_some()
    }

    /// The directory's name (`<partition>.<version>`).
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Whether the part's Parquet file is kept in the cold store.
    pub fn is_remote(&self) -> bool {
        matches!(self.parquet, Some((_, true, _)))
    }

    /// Where the part's rows are: its Parquet file (a URL in the cold store for a remote
    /// part), or its directory of column files, relative to the data directory
    /// (`<table>~<id>/<partition>.<version>[/data.parquet]`): any user may read it, and the
    /// server's own paths are for its operators to know.
    pub fn location(&self) -> String {
        let local = || {
            let root = self.table.path.parent().unwrap_or(Path::new(""));
            self.path
                .strip_prefix(root)
                .unwrap_or(&self.path)
                .to_path_buf()
        };
        match (&self.parquet, &self.table.cold) {
            (Some((_, true, _)), Some(cold)) => {
                cold.location(&cold.key(&self.table.cold_name(), &self.name()))
            }
            (Some(_), _) => local().join(PARQUET_FILE).display().to_string(),
            (None, _) => local().display().to_string(),
        }
    }

    /// A Parquet part's file, opened (memory-mapped, its footer read) on first use, after
    /// downloading it from the cold store for a remote part without a whole local copy;
    /// `None` for a native part.
    pub fn parquet(&self) -> Result<Option<Arc<ParquetPart>>> {
        let Some((file_bytes, remote, slot)) = &self.parquet else {
            return Ok(None);
        };
        let mut opened = slot
            .lock()
            .map_err(|_| StorageError::Internal("Parquet file slot poisoned".into()))?;
        if let Some(part) = opened.as_ref() {
            return Ok(Some(part.clone()));
        }
        let local = self.path.join(PARQUET_FILE);
        if !*remote {
            let part = Arc::new(ParquetPart::open(&local, *file_bytes)?);
            *opened = Some(part.clone());
            return Ok(Some(part));
        }
        let cold = self
            .table
            .cold
            .as_ref()
            .ok_or_else(|| StorageError::ColdStore {
                url: "(none configured)".into(),
                message: format!(
                    "partition {} is kept in a cold store; start the server with --cold-store",
                    self.path.display()
                ),
            })?;
        let whole = std::fs::metadata(&local).is_ok_and(|m| m.len() == *file_bytes);
        if !whole {
            let key = cold.key(&self.table.cold_name(), &self.name());
            cold.download(&key, &local, *file_bytes)?;
        }
        let part = Arc::new(ParquetPart::open(&local, *file_bytes)?);
        *opened = Some(part.clone());
        drop(opened);
        cold.opened(&local, *file_bytes, Arc::downgrade(slot));
        Ok(Some(part))
    }

    /// The zone entries of column `id` read so far (see `zone.rs`).
    pub fn cached_zones(&self, id: u32) -> Option<Arc<[Option<Zone>]>> {
        self.zones.lock().ok()?.get(&id).cloned()
    }

    /// Keeps `zones` as column `id`'s entries, unless more are kept already.
    pub fn keep_zones(&self, id: u32, zones: Arc<[Option<Zone>]>) {
        if let Ok(mut kept) = self.zones.lock()
            && kept.get(&id).is_none_or(|z| z.len() < zones.len())
        {
            kept.insert(id, zones);
        }
    }

    pub fn cache(&self) -> &Arc<FileCache> {
        &self.table.cache
    }

    /// The first `len` bytes of file `name`, memory-mapped; `None` if the file does not exist.
    pub fn map(&self, name: &str, len: usize) -> Result<Option<Buffer>> {
        self.map_extent(name, len, len)
    }

    /// The validity bitmap of column `id` covering `rows` rows, or `None` if it has no NULLs.
    pub fn map_validity(&self, id: u32, rows: usize) -> Result<Option<Buffer>> {
        self.map_extent(&validity_file(id), bits::bytes_for(rows), rows)
    }

    /// Like `map`; a cached "file missing" answers requests up to `extent` (bytes or rows).
    fn map_extent(&self, name: &str, len: usize, extent: usize) -> Result<Option<Buffer>> {
        let cache = &self.table.cache;
        match cache.mapping(self.id, name)? {
            Some(Mapped::Missing { checked }) if checked >= extent => return Ok(None),
            Some(Mapped::Present(b)) if b.len() >= len => {
                return Ok(Some(b.slice_with_length(0, len)));
            }
            _ => {}
        }
        let path = self.path.join(name);
        // Closed when this function returns: the mapping does not need the descriptor.
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                cache.set_mapping(self.id, name, Mapped::Missing { checked: extent })?;
                return Ok(None);
            }
            Err(e) => return Err(StorageError::io(path, e)),
        };
        let file_len = file.metadata().at(&path)?.len() as usize;
        if file_len < len {
            return Err(StorageError::corrupt(
                &path,
                format!("file has {file_len} bytes, committed data needs {len}"),
            ));
        }
        let buffer = if file_len == 0 {
            Buffer::from_vec(Vec::<u8>::new())
        } else {
            // SAFETY: the committed prefix of a column file is never modified or truncated while
            // a partition version is live (see the module docs), so the mapping stays valid.
            let mmap = unsafe { memmap2::Mmap::map(&file) }.at(&path)?;
            let ptr = std::ptr::NonNull::new(mmap.as_ptr() as *mut u8)
                .ok_or_else(|| StorageError::Internal("null mapping".into()))?;
            let owner: Arc<dyn arrow_buffer::alloc::Allocation> = Arc::new(mmap);
            // SAFETY: `ptr` points to `file_len` readable bytes owned by `owner`.
            unsafe { Buffer::from_custom_allocation(ptr, file_len, owner) }
        };
        let out = buffer.slice_with_length(0, len);
        cache.set_mapping(self.id, name, Mapped::Present(buffer))?;
        Ok(Some(out))
    }

    /// Forgets cached mappings of a file (after it was created or removed).
    pub fn forget(&self, name: &str) {
        self.table.cache.forget_mapping(self.id, name);
    }

    /// Copies rows `rows` of a column (rows below `top` are NULL) into memory.
    pub fn read_raw(&self, column: &ColumnMeta, top: u64, rows: Range<u64>) -> Result<ColumnBuf> {
        let below_top = rows.end.min(top).saturating_sub(rows.start) as usize;
        let (lo, hi) = (
            rows.start.max(top) as usize - top as usize,
            rows.end.max(top) as usize - top as usize,
        );
        let mut buf = ColumnBuf::nulls(column.column_type, below_top);
        let n = hi.saturating_sub(lo);
        if n == 0 {
            return Ok(buf);
        }
        let mut own = ColumnBuf::empty(column.column_type);
        own.rows = n;
        let id = column.id;
        let missing =
            || StorageError::corrupt(self.path.join(data_file(id)), "missing column file");
        match column.column_type.layout() {
            Layout::Fixed { width } => {
                let b = self.map(&data_file(id), hi * width)?.ok_or_else(missing)?;
                own.values = Values::Fixed {
                    width,
                    bytes: b.as_slice()[lo * width..].to_vec(),
                };
            }
            Layout::Bits => {
                let b = self
                    .map(&data_file(id), bits::bytes_for(hi))?
                    .ok_or_else(missing)?;
                let mut v = Vec::new();
                bits::append(&mut v, 0, b.as_slice(), lo, n);
                own.values = Values::Bits(v);
            }
            Layout::Var => {
                let o = self
                    .map(&offsets_file(id), (hi + 1) * 8)?
                    .ok_or_else(missing)?;
                let offsets: Vec<u64> = o.as_slice()[lo * 8..]
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect();
                let first = offsets[0];
                let offsets: Vec<u64> = offsets.iter().map(|o| o.wrapping_sub(first)).collect();
                validate_offsets(&offsets, &self.path.join(offsets_file(id)))?;
                let to = first.checked_add(offsets[n]).ok_or_else(|| {
                    StorageError::corrupt(self.path.join(offsets_file(id)), "offsets overflow")
                })?;
                let (from, to) = (first as usize, to as usize);
                let d = self.map(&data_file(id), to)?.ok_or_else(missing)?;
                own.values = Values::Var {
                    offsets,
                    data: d.as_slice()[from..to].to_vec(),
                };
            }
        }
        // Uncommitted rows may have created the bitmap since it was last looked for.
        self.forget(&validity_file(id));
        if let Some(v) = self.map_validity(id, hi)? {
            let mut bits_of_rows = Vec::new();
            bits::append(&mut bits_of_rows, 0, v.as_slice(), lo, n);
            own.validity = Some(bits_of_rows);
        }
        if buf.rows == 0 {
            return Ok(own);
        }
        buf.extend_from(&own, 0..n);
        Ok(buf)
    }
}

/// Entry `index` of an offsets file (`u64` end offsets after a leading 0): where the value
/// of row (or symbol) `index - 1` ends in the data file.
pub(crate) fn read_offset(offsets: &Path, index: u64) -> Result<u64> {
    let file = File::open(offsets).at(offsets)?;
    let mut entry = [0u8; 8];
    file.read_exact_at(&mut entry, index * 8).at(offsets)?;
    Ok(u64::from_le_bytes(entry))
}

/// Checks that variable-length offsets start at 0 and never decrease.
pub(crate) fn validate_offsets(offsets: &[u64], path: &Path) -> Result<()> {
    if offsets.first().is_some_and(|o| *o != 0) || offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err(StorageError::corrupt(path, "offsets are not monotonic"));
    }
    if offsets.last().is_some_and(|o| *o > i64::MAX as u64) {
        return Err(StorageError::corrupt(path, "offset out of range"));
    }
    Ok(())
}

/// The files of one column of one partition and where the next row goes. Holds no descriptor:
/// each write takes one from the database's [`FileCache`].
pub(crate) struct ColumnFiles {
    cache: Arc<FileCache>,
    data: PathBuf,
    /// Offsets file, for variable-length columns.
    offsets: Option<PathBuf>,
    validity: PathBuf,
    /// Whether the validity file exists (it is created at the first NULL).
    has_validity: bool,
    /// Rows in the files (rows since the column's top), committed or pending.
    rows: u64,
    /// Bytes in the data file of variable-length columns.
    data_len: u64,
    /// Files written since the last `sync`.
    unsynced: bool,
}

impl ColumnFiles {
    /// Opens (creating if needed) the files of a column holding `rows` rows since its top. With
    /// no row yet the files are created here (or were, by a discarded transaction): `dir` is
    /// recorded in `unsynced`, as the commit of these rows is the first to name the files.
    pub fn open(
        cache: &Arc<FileCache>,
        dir: &Path,
        column: &ColumnMeta,
        rows: u64,
        unsynced: &mut UnsyncedDirs,
    ) -> Result<ColumnFiles> {
        let id = column.id;
        if rows == 0 {
            unsynced.add(dir);
        }
        let data = dir.join(data_file(id));
        cache.file(&data, true)?;
        let mut data_len = 0;
        let offsets = if column.column_type.layout() == Layout::Var {
            let path = dir.join(offsets_file(id));
            let f = cache.file(&path, true)?;
            let mut entry = [0u8; 8];
            if rows == 0 {
                f.write_all_at(&entry, 0).at(&path)?;
            } else {
                f.read_exact_at(&mut entry, rows * 8).at(&path)?;
                data_len = u64::from_le_bytes(entry);
            }
            Some(path)
        } else {
            None
        };
        let validity = dir.join(validity_file(id));
        let has_validity = match std::fs::symlink_metadata(&validity) {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(StorageError::io(validity, e)),
        };
        Ok(ColumnFiles {
            cache: cache.clone(),
            data,
            offsets,
            validity,
            has_validity,
            rows,
            data_len,
            unsynced: true,
        })
    }

    /// Writes rows `range` of `buf` after the rows already in the files; a validity file it
    /// renames into place records its directory in `unsynced`.
    pub fn append(
        &mut self,
        buf: &ColumnBuf,
        range: std::ops::Range<usize>,
        unsynced: &mut UnsyncedDirs,
    ) -> Result<()> {
        let n = range.len();
        if n == 0 {
            return Ok(());
        }
        self.unsynced = true;
        let data = self.cache.file(&self.data, false)?;
        match &buf.values {
            Values::Fixed { width, bytes } => {
                let w = *width;
                data.write_all_at(&bytes[range.start * w..range.end * w], self.rows * w as u64)
                    .at(&self.data)?;
            }
            Values::Bits(src) => write_bits(&data, &self.data, self.rows, |dst, at| {
                bits::append(dst, at, src, range.start, n)
            })?,
            Values::Var {
                offsets,
                data: bytes,
            } => {
                let start = offsets[range.start];
                let end = offsets[range.end];
                data.write_all_at(&bytes[start as usize..end as usize], self.data_len)
                    .at(&self.data)?;
                let mut encoded = Vec::with_capacity(n * 8);
                for o in &offsets[range.start + 1..=range.end] {
                    encoded.extend_from_slice(&(self.data_len + o - start).to_le_bytes());
                }
                let path = self.offsets.as_ref().ok_or_else(|| {
                    StorageError::Internal(format!("no offsets file for {}", self.data.display()))
                })?;
                self.cache
                    .file(path, false)?
                    .write_all_at(&encoded, (self.rows + 1) * 8)
                    .at(path)?;
                self.data_len += end - start;
            }
        }
        self.append_validity(buf, &range, unsynced)?;
        self.rows += n as u64;
        Ok(())
    }

    fn append_validity(
        &mut self,
        buf: &ColumnBuf,
        range: &std::ops::Range<usize>,
        unsynced: &mut UnsyncedDirs,
    ) -> Result<()> {
        let n = range.len();
        let has_nulls = buf
            .validity
            .as_ref()
            .is_some_and(|v| (range.start..range.end).any(|i| !bits::get(v, i)));
        let path = &self.validity;
        if !self.has_validity {
            if !has_nulls {
                return Ok(());
            }
            // First NULL of this column in this partition: every earlier row is valid. The file
            // appears whole (rename) so a crash cannot leave committed rows marked NULL.
            let mut tmp = path.clone().into_os_string();
            tmp.push(".tmp");
            let tmp = PathBuf::from(tmp);
            let mut ones = Vec::new();
            bits::append_constant(&mut ones, 0, true, self.rows as usize);
            write_file(&tmp, &ones, false)?;
            std::fs::rename(&tmp, path).at(path)?;
            if let Some(dir) = path.parent() {
                unsynced.add(dir);
            }
            self.has_validity = true;
        }
        let f = self.cache.file(path, false)?;
        match &buf.validity {
            Some(v) => write_bits(&f, path, self.rows, |dst, at| {
                bits::append(dst, at, v, range.start, n)
            }),
            None => write_bits(&f, path, self.rows, |dst, at| {
                bits::append_constant(dst, at, true, n)
            }),
        }
    }

    /// Flushes the files written since the last `sync` to stable storage. A descriptor evicted
    /// from the cache meanwhile is reopened: `fsync` flushes the file, whichever descriptor
    /// wrote it.
    pub fn sync(&mut self) -> Result<()> {
        if !self.unsynced {
            return Ok(());
        }
        let validity = self.has_validity.then_some(&self.validity);
        for path in std::iter::once(&self.data)
            .chain(self.offsets.as_ref())
            .chain(validity)
        {
            self.cache.file(path, false)?.sync_data().at(path)?;
        }
        self.unsynced = false;
        Ok(())
    }
}

/// Writes bits after the first `existing` bits of a bitmap file, preserving the partial byte.
fn write_bits(
    file: &File,
    path: &Path,
    existing: u64,
    fill: impl FnOnce(&mut Vec<u8>, usize),
) -> Result<()> {
    let byte = existing / 8;
    let bit = (existing % 8) as usize;
    let mut buf = Vec::new();
    if bit != 0 {
        let mut first = [0u8; 1];
        file.read_exact_at(&mut first, byte).at(path)?;
        buf.push(first[0]);
        bits::clear_tail(&mut buf, bit);
    }
    fill(&mut buf, bit);
    file.write_all_at(&buf, byte).at(path)
}

/// Creates directory `path` unless it exists; whether this call created it.
pub(crate) fn ensure_dir(path: &Path) -> Result<bool> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => Ok(false),
        Err(e) => Err(StorageError::io(path, e)),
    }
}

/// Writes a whole file: data, then optionally fsync.
pub(crate) fn write_file(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let f = File::create(path).at(path)?;
    f.write_all_at(bytes, 0).at(path)?;
    if sync {
        f.sync_data().at(path)?;
    }
    Ok(())
}
