//! Directories and column files: naming, memory-mapped reads, positioned writes.
//!
//! Files of column `N` in a partition directory: `N.d` (values), `N.o` (`u64` end offsets of
//! variable-length values, preceded by a 0), `N.v` (validity bitmap, absent when no NULL was ever
//! written). Files only grow while a partition version is live, and bytes of committed rows are
//! never rewritten, so a reader can map them while the writer appends.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arrow_buffer::Buffer;

use crate::bits;
use crate::column::{ColumnBuf, Values};
use crate::error::{IoContext, Result, StorageError};
use crate::txn::ColumnMeta;
use crate::types::Layout;

/// A table's directory; removed from disk when dropped while marked `dropped`.
#[derive(Debug)]
pub(crate) struct TableDir {
    pub path: PathBuf,
    pub dropped: AtomicBool,
}

impl Drop for TableDir {
    fn drop(&mut self) {
        if self.dropped.load(Ordering::Acquire)
            && let Err(e) = std::fs::remove_dir_all(&self.path)
        {
            tracing::warn!(
                "could not remove dropped table {}: {e}",
                self.path.display()
            );
        }
    }
}

/// A cached mapping. `Missing` remembers that the file did not exist when `checked` (bytes, or
/// rows for validity bitmaps) were asked for: rows committed then had no NULLs, so the answer
/// holds for requests that reach no further.
#[derive(Debug)]
enum Mapped {
    Missing { checked: usize },
    Present(Buffer),
}

/// One version of one partition's directory, shared by every snapshot that reads it.
/// Removed from disk when the last reference goes after a commit replaced it (`obsolete`).
#[derive(Debug)]
pub(crate) struct PartitionDir {
    pub path: PathBuf,
    pub obsolete: AtomicBool,
    maps: Mutex<HashMap<String, Mapped>>,
    // Keeps the table directory alive while this partition is readable.
    _table: Arc<TableDir>,
}

impl Drop for PartitionDir {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire)
            && let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(
                "could not remove old partition {}: {e}",
                self.path.display()
            );
        }
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

pub(crate) fn partition_dir_name(stem: &str, version: u64) -> String {
    format!("{stem}.{version}")
}

impl PartitionDir {
    pub fn new(table: Arc<TableDir>, path: PathBuf) -> PartitionDir {
        PartitionDir {
            path,
            obsolete: AtomicBool::new(false),
            maps: Mutex::new(HashMap::new()),
            _table: table,
        }
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
        let mut maps = self
            .maps
            .lock()
            .map_err(|_| StorageError::Internal("mapping cache poisoned".into()))?;
        match maps.get(name) {
            Some(Mapped::Missing { checked }) if *checked >= extent => return Ok(None),
            Some(Mapped::Present(b)) if b.len() >= len => {
                return Ok(Some(b.slice_with_length(0, len)));
            }
            _ => {}
        }
        let path = self.path.join(name);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                maps.insert(name.to_string(), Mapped::Missing { checked: extent });
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
        maps.insert(name.to_string(), Mapped::Present(buffer));
        Ok(Some(out))
    }

    /// Forgets cached mappings of a file (after it was created or removed).
    pub fn forget(&self, name: &str) {
        if let Ok(mut maps) = self.maps.lock() {
            maps.remove(name);
        }
    }

    /// Copies rows `[0, rows)` of a column (rows below `top` are NULL) into memory.
    pub fn read_raw(&self, column: &ColumnMeta, top: u64, rows: u64) -> Result<ColumnBuf> {
        let n = (rows.saturating_sub(top)) as usize;
        let mut buf = ColumnBuf::nulls(column.column_type, top.min(rows) as usize);
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
                let b = self.map(&data_file(id), n * width)?.ok_or_else(missing)?;
                own.values = Values::Fixed {
                    width,
                    bytes: b.as_slice().to_vec(),
                };
            }
            Layout::Bits => {
                let b = self
                    .map(&data_file(id), bits::bytes_for(n))?
                    .ok_or_else(missing)?;
                let mut v = b.as_slice().to_vec();
                bits::clear_tail(&mut v, n);
                own.values = Values::Bits(v);
            }
            Layout::Var => {
                let o = self
                    .map(&offsets_file(id), (n + 1) * 8)?
                    .ok_or_else(missing)?;
                let offsets: Vec<u64> = o
                    .as_slice()
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect();
                validate_offsets(&offsets, &self.path.join(offsets_file(id)))?;
                let len = offsets[n] as usize;
                let d = self.map(&data_file(id), len)?.ok_or_else(missing)?;
                own.values = Values::Var {
                    offsets,
                    data: d.as_slice().to_vec(),
                };
            }
        }
        // Uncommitted rows may have created the bitmap since it was last looked for.
        self.forget(&validity_file(id));
        if let Some(v) = self.map_validity(id, n)? {
            let mut v = v.as_slice().to_vec();
            bits::clear_tail(&mut v, n);
            own.validity = Some(v);
        }
        if buf.rows == 0 {
            return Ok(own);
        }
        buf.extend_from(&own, 0..n);
        Ok(buf)
    }
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

/// Open files of one column of one partition, positioned for appending.
pub(crate) struct ColumnFiles {
    data: File,
    offsets: Option<File>,
    validity: Option<File>,
    /// Rows in the files (rows since the column's top), committed or pending.
    rows: u64,
    /// Bytes in the data file of variable-length columns.
    data_len: u64,
    dir: PathBuf,
    id: u32,
}

fn open_rw(path: &Path, create: bool) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
        .at(path)
}

impl ColumnFiles {
    /// Opens (creating if needed) the files of a column holding `rows` rows since its top.
    pub fn open(dir: &Path, column: &ColumnMeta, rows: u64) -> Result<ColumnFiles> {
        let id = column.id;
        let data_path = dir.join(data_file(id));
        let data = open_rw(&data_path, true)?;
        let mut data_len = 0;
        let offsets = if column.column_type.layout() == Layout::Var {
            let path = dir.join(offsets_file(id));
            let f = open_rw(&path, true)?;
            let mut entry = [0u8; 8];
            if rows == 0 {
                f.write_all_at(&entry, 0).at(&path)?;
            } else {
                f.read_exact_at(&mut entry, rows * 8).at(&path)?;
                data_len = u64::from_le_bytes(entry);
            }
            Some(f)
        } else {
            None
        };
        let validity_path = dir.join(validity_file(id));
        let validity = match File::options().read(true).write(true).open(&validity_path) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(StorageError::io(validity_path, e)),
        };
        Ok(ColumnFiles {
            data,
            offsets,
            validity,
            rows,
            data_len,
            dir: dir.to_path_buf(),
            id,
        })
    }

    /// Writes rows `range` of `buf` after the rows already in the files.
    pub fn append(&mut self, buf: &ColumnBuf, range: std::ops::Range<usize>) -> Result<()> {
        let n = range.len();
        if n == 0 {
            return Ok(());
        }
        let data_path = self.dir.join(data_file(self.id));
        match &buf.values {
            Values::Fixed { width, bytes } => {
                let w = *width;
                self.data
                    .write_all_at(&bytes[range.start * w..range.end * w], self.rows * w as u64)
                    .at(&data_path)?;
            }
            Values::Bits(src) => write_bits(&self.data, &data_path, self.rows, |dst, at| {
                bits::append(dst, at, src, range.start, n)
            })?,
            Values::Var { offsets, data } => {
                let start = offsets[range.start];
                let end = offsets[range.end];
                self.data
                    .write_all_at(&data[start as usize..end as usize], self.data_len)
                    .at(&data_path)?;
                let mut encoded = Vec::with_capacity(n * 8);
                for o in &offsets[range.start + 1..=range.end] {
                    encoded.extend_from_slice(&(self.data_len + o - start).to_le_bytes());
                }
                let path = self.dir.join(offsets_file(self.id));
                if let Some(f) = &self.offsets {
                    f.write_all_at(&encoded, (self.rows + 1) * 8).at(&path)?;
                }
                self.data_len += end - start;
            }
        }
        self.append_validity(buf, &range)?;
        self.rows += n as u64;
        Ok(())
    }

    fn append_validity(&mut self, buf: &ColumnBuf, range: &std::ops::Range<usize>) -> Result<()> {
        let n = range.len();
        let has_nulls = buf
            .validity
            .as_ref()
            .is_some_and(|v| (range.start..range.end).any(|i| !bits::get(v, i)));
        let path = self.dir.join(validity_file(self.id));
        if self.validity.is_none() {
            if !has_nulls {
                return Ok(());
            }
            // First NULL of this column in this partition: every earlier row is valid. The file
            // appears whole (rename) so a crash cannot leave committed rows marked NULL.
            let tmp = self.dir.join(format!("{}.tmp", validity_file(self.id)));
            let mut ones = Vec::new();
            bits::append_constant(&mut ones, 0, true, self.rows as usize);
            write_file(&tmp, &ones, false)?;
            std::fs::rename(&tmp, &path).at(&path)?;
            self.validity = Some(open_rw(&path, false)?);
        }
        if let Some(f) = &self.validity {
            match &buf.validity {
                Some(v) => write_bits(f, &path, self.rows, |dst, at| {
                    bits::append(dst, at, v, range.start, n)
                })?,
                None => write_bits(f, &path, self.rows, |dst, at| {
                    bits::append_constant(dst, at, true, n)
                })?,
            }
        }
        Ok(())
    }

    /// Flushes the files to stable storage.
    pub fn sync(&self) -> Result<()> {
        let path = self.dir.join(data_file(self.id));
        self.data.sync_data().at(&path)?;
        for f in self.offsets.iter().chain(self.validity.iter()) {
            f.sync_data().at(&path)?;
        }
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

/// Flushes a directory entry list to stable storage.
pub(crate) fn sync_dir(path: &Path) -> Result<()> {
    File::open(path).and_then(|f| f.sync_all()).at(path)
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
