//! Converting a partition between native column files and one Parquet file, in one atomic
//! commit that ingestion and queries never wait on for long.
//!
//! ```text
//!   writer (brief) ─▶ new version dir ─┐
//!   snapshot ─read every part─▶ write data.parquet (or column files) + zone files, fsync
//!   writer (brief) ─▶ parts unchanged? ─yes─▶ commit: the partition is now that one part
//!                                       └no──▶ discard the new version, try again
//! ```
//!
//! * The new version is written from a snapshot without holding the table's writer, so rows
//!   keep being committed meanwhile. The swap commits only if the partition's parts and the
//!   table's schema are what the snapshot read; otherwise the written version is deleted and
//!   the conversion starts over (a few times, then it reports the partition busy).
//! * Readers see the partition's parts before the commit and the new part after, never a mix:
//!   a snapshot names one set of parts. The replaced parts' directories are deleted once the
//!   last snapshot holding them goes (see `files.rs`).
//! * The new version's files, its directory and the table directory are fsynced before the
//!   commit, and the commit's slot after it, in every durability mode: a crash at any point
//!   leaves the old parts (a new directory no transaction names is deleted on open) or the new
//!   one, whole.
//! * With a cold store (`cold_store.rs`), the Parquet file is uploaded before the commit that
//!   names it (a crash between leaves an object no commit names, deleted at the next open), and
//!   the local file stays as a cached copy.
//! * A Parquet part holds every row of every column (rows below a column's top as NULL), so
//!   its columns have no top; a native part written back from one likewise.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::column::{SymbolResolver, from_arrow};
use crate::dir_sync::UnsyncedDirs;
use crate::error::{IoContext, Result, StorageError};
use crate::files::{ColumnFiles, PARQUET_FILE, PartitionDir, sync_dir};
use crate::parquet_file::{ParquetOptions, write_partition};
use crate::symbol_index::CommittedSymbols;
use crate::table::{Snapshot, Table};
use crate::txn::{PartFormat, PartitionMeta};
use crate::zone::{complete_zones, write_zones};

/// The format a partition is converted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvertTo {
    Native,
    Parquet,
}

/// Rows read and written at a time while converting to native files.
const CONVERT_CHUNK_ROWS: u64 = 1 << 20;

/// How many times a conversion starts over when rows or schema changes beat it to the commit.
const CONVERT_ATTEMPTS_MAX: usize = 3;

impl Table {
    /// Converts partition `key` to `to` (see the module docs): `Ok(false)` when it already is
    /// one part in that format. Converting to Parquet refuses the table's newest partition,
    /// which still takes rows in order.
    pub fn convert_partition(
        self: &Arc<Self>,
        key: i64,
        to: ConvertTo,
        options: &ParquetOptions,
    ) -> Result<bool> {
        for _ in 0..CONVERT_ATTEMPTS_MAX {
            let snapshot = self.snapshot();
            let meta = snapshot.meta().clone();
            let name = || meta.partition_by.dir_name(key);
            let parts: Vec<PartitionMeta> = snapshot
                .partitions()
                .iter()
                .filter(|p| p.key == key)
                .cloned()
                .collect();
            if parts.is_empty() {
                return Err(StorageError::NotFound(format!(
                    "table '{}' has no partition '{}'",
                    meta.name,
                    name()
                )));
            }
            let done =
                parts.len() == 1 && parts[0].format.is_parquet() == (to == ConvertTo::Parquet);
            if done {
                return Ok(false);
            }
            if to == ConvertTo::Parquet {
                if meta.timestamp_index.is_none() {
                    return Err(StorageError::InvalidInput(format!(
                        "table '{}' has no designated timestamp: only partitions of a table \
                         partitioned by time can be converted to Parquet",
                        meta.name
                    )));
                }
                if snapshot.partitions().last().is_some_and(|p| p.key == key) {
                    return Err(StorageError::InvalidInput(format!(
                        "partition '{}' is the newest of table '{}' and still takes rows: only \
                         older partitions can be converted to Parquet",
                        name(),
                        meta.name
                    )));
                }
            }
            let (version, path) = self.writer()?.new_version_dir(key)?;
            let mut unadopted = NewVersion(Some(path.clone()));
            let (part, dir) = write_version(self, &snapshot, &parts, version, path, to, options)?;
            // `dir` deletes the directory from here on, unless a commit adopts it.
            unadopted.0 = None;
            if self.writer()?.replace_parts(&meta, &parts, part, dir)? {
                return Ok(true);
            }
            tracing::debug!(
                "'{}': partition {} changed while it was being converted; starting over",
                meta.name,
                name()
            );
        }
        Err(StorageError::ResourceExhausted(format!(
            "partition {} of table '{}' kept changing while it was being converted; try again",
            self.meta().partition_by.dir_name(key),
            self.name()
        )))
    }
}

impl Table {
    /// Converts to Parquet every partition that `COLD AFTER` has made cold: whose whole time
    /// range is that much older than the newest row capped at the wall clock (as a TTL counts,
    /// see `ttl.rs`), but the newest partition,
    /// unless it is one Parquet part already (late rows beside a Parquet part are merged into
    /// it this way). Returns how many were converted.
    pub fn convert_cold(self: &Arc<Self>, options: &ParquetOptions) -> Result<usize> {
        let snapshot = self.snapshot();
        let meta = snapshot.meta();
        let Some(cold_after) = meta.cold_after else {
            return Ok(0);
        };
        let parts = snapshot.partitions();
        let newest = parts.last().map(|p| p.key);
        let mut converted = 0;
        let cap = self.options().ttl_cap_ns();
        for key in cold_after.expired(meta.partition_by, parts, cap) {
            let of_key: Vec<&PartitionMeta> = parts.iter().filter(|p| p.key == key).collect();
            let parquet = of_key.len() == 1 && of_key[0].format.is_parquet();
            if parquet || Some(key) == newest {
                continue;
            }
            if self.convert_partition(key, ConvertTo::Parquet, options)? {
                converted += 1;
                tracing::info!(
                    "'{}': partition {} is cold (COLD AFTER {cold_after}): converted to Parquet",
                    meta.name,
                    meta.partition_by.dir_name(key)
                );
            }
        }
        Ok(converted)
    }
}

/// A version directory being written: deleted on drop until a part owns it.
struct NewVersion(Option<PathBuf>);

impl Drop for NewVersion {
    fn drop(&mut self) {
        if let Some(path) = self.0.take()
            && let Err(e) = std::fs::remove_dir_all(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("could not remove {}: {e}", path.display());
        }
    }
}

/// Writes every row of `parts` (of `snapshot`) into the new version directory as one part in
/// format `to`, with its zone files, all fsynced; returns the part and its directory (marked
/// obsolete: deleted when dropped, unless a commit adopts it).
fn write_version(
    table: &Table,
    snapshot: &Snapshot,
    parts: &[PartitionMeta],
    version: u64,
    path: PathBuf,
    to: ConvertTo,
    options: &ParquetOptions,
) -> Result<(PartitionMeta, Arc<PartitionDir>)> {
    let key = parts[0].key;
    let meta = snapshot.meta();
    let mut part = PartitionMeta {
        key,
        version,
        row_count: parts.iter().map(|p| p.row_count).sum(),
        min_ts: parts[0].min_ts,
        max_ts: parts[parts.len() - 1].max_ts,
        tops: Vec::new(),
        format: PartFormat::Native,
    };
    let table_dir = table.table_dir().clone();
    let mut unsynced = UnsyncedDirs::default();
    match to {
        ConvertTo::Parquet => {
            let file_path = path.join(PARQUET_FILE);
            let file = std::fs::File::create(&file_path).at(&file_path)?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, &file);
            let written = write_partition(snapshot, key, &mut out, options)
                .map_err(|e| e.on_output(&file_path))?;
            drop(out);
            file.sync_all().at(&file_path)?;
            if written.rows != part.row_count {
                return Err(StorageError::Internal(format!(
                    "wrote {} rows of a partition of {}",
                    written.rows, part.row_count
                )));
            }
            // With a cold store the file goes there before the commit names it; the local
            // file stays as a cached copy.
            let remote = match &table_dir.cold {
                Some(cold) => {
                    let part_dir = path.file_name().map(|n| n.to_string_lossy().into_owned());
                    let key = cold.key(&table_dir.cold_name(), &part_dir.unwrap_or_default());
                    cold.upload(&file_path, &key)?;
                    cold.opened(&file_path, written.bytes, std::sync::Weak::new());
                    true
                }
                None => false,
            };
            part.format = PartFormat::Parquet {
                file_bytes: written.bytes,
                remote,
            };
        }
        ConvertTo::Native => {
            let cache = table_dir.cache.clone();
            for (c, column) in meta.columns.iter().enumerate() {
                let mut files = ColumnFiles::open(&cache, &path, column, 0, &mut unsynced)?;
                let published = snapshot.published(column.id);
                for (p, source) in snapshot.partitions().iter().enumerate() {
                    if source.key != key {
                        continue;
                    }
                    let mut from = 0;
                    while from < source.row_count {
                        let to = (from + CONVERT_CHUNK_ROWS).min(source.row_count);
                        let array = snapshot.read_column(p, c, from..to)?;
                        let mut lookup = published.map(CommittedSymbols);
                        let resolver = lookup.as_mut().map(|l| l as &mut dyn SymbolResolver);
                        let buf = from_arrow(&array, column.column_type, &column.name, resolver)?;
                        files.append(&buf, 0..buf.rows, &mut unsynced)?;
                        from = to;
                    }
                }
                files.sync()?;
            }
        }
    }
    let dir = Arc::new(PartitionDir::with_format(
        table_dir.clone(),
        path.clone(),
        part.format,
    ));
    dir.obsolete.store(true, Ordering::Release);
    let zones = 0..complete_zones(part.row_count);
    write_zones(&dir, &meta.columns, &part, zones, true, &mut unsynced)?;
    sync_dir(&path)?;
    sync_dir(&table_dir.path)?;
    Ok((part, dir))
}
