//! Online backup: a consistent copy of an open database, taken while commits continue
//! ([`Database::backup`](crate::Database::backup)).
//!
//! ```text
//!  DDL lock: list tables, snapshot each ──▶ (lock released; commits go on)
//!  per table, from its snapshot:  part files truncated to the committed bytes (Parquet files
//!     hard-linked), dictionaries to the committed symbols, then a fresh _txn slot
//!  syncfs(target) ──▶ backup.json (the manifest) ──▶ unlink backup.incomplete
//! ```
//!
//! Invariants:
//!
//! * Every table in the copy is the state of exactly one commit: the snapshot's. Its slot is
//!   written from the snapshot's transaction, never copied, so it names no row the copy does not
//!   hold; the files it names hold at least the committed bytes (exactly those, but for the
//!   last byte of a bitmap, whose bits past the committed rows readers never look at).
//! * Only committed bytes are read. They never change while a transaction names them
//!   (`docs/design.md`, "Commit protocol"), and the snapshot keeps every part directory it
//!   names from being deleted, so a copy running beside appends, out-of-order merges,
//!   conversions, TRUNCATE or DROP reads what the snapshot committed.
//! * Only files proven immutable are hard-linked: a Parquet part's `data.parquet`, written
//!   whole and fsynced before the commit that names it and never written again (a download
//!   of a remote part's copy replaces the name, not the file). Column, zone and dictionary
//!   files are appended to in place and are always copied. A link that fails (another file
//!   system, no permission) falls back to a copy.
//! * A remote (cold-store) part becomes a local Parquet part in the copy (format 1), from the
//!   local copy when whole, downloaded otherwise: the backup never depends on an object the
//!   source may delete.
//! * No writer lock is taken and nothing is held in memory but one table's snapshot and
//!   the kernel's copy (`copy_file_range`): ingestion is never blocked by a backup, and memory
//!   does not grow with the data.
//! * `backup.incomplete` exists from before the first table is copied until after the
//!   manifest `backup.json` is durable; [`Database::open`](crate::Database::open) refuses a
//!   directory holding it, so an interrupted backup is never taken for a whole one.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cold_store::ColdStore;
use crate::error::{IoContext, Result, StorageError};
use crate::files::{PARQUET_FILE, data_file, offsets_file, read_offset, validity_file};
use crate::symbols::SYMBOL_DIR;
use crate::table::{Snapshot, Table};
use crate::txn::{PartFormat, TxnState};
use crate::types::Layout;
use crate::zone::{complete_zones, zone_domain, zone_file};

/// The manifest a finished backup ends with (JSON; see `docs/design.md`, "Backup").
pub const BACKUP_MANIFEST: &str = "backup.json";

/// Present in a backup directory while the backup is being written; a directory holding it
/// is refused by `Database::open`.
pub const BACKUP_INCOMPLETE: &str = "backup.incomplete";

/// Bytes of one zone map entry (`zone.rs`).
const ZONE_ENTRY_BYTES: u64 = 24;

/// What a finished backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// The backup directory, absolute.
    pub path: PathBuf,
    /// Tables copied.
    pub tables: usize,
    /// Committed rows of all tables copied.
    pub rows: u64,
    /// Bytes of every file in the backup (copied, linked or downloaded).
    pub bytes: u64,
    /// Of `bytes`, those hard-linked rather than copied.
    pub linked_bytes: u64,
    /// How long the backup took.
    pub duration: Duration,
}

/// One table of a backup, for the manifest.
struct TableCopied {
    name: String,
    directory: String,
    seq: u64,
    rows: u64,
    partitions: usize,
}

/// A backup directory claimed by [`claim_target`].
pub(crate) struct Claimed {
    /// Canonical.
    path: PathBuf,
    /// Whether the backup created the directory (else it existed, empty).
    created: bool,
}

/// Refuses to open `root` when it holds an unfinished backup.
pub(crate) fn refuse_incomplete(root: &Path) -> Result<()> {
    if root.join(BACKUP_INCOMPLETE).exists() {
        return Err(StorageError::InvalidInput(format!(
            "{} is an unfinished backup ({BACKUP_INCOMPLETE} is present): the backup was \
             interrupted and may lack tables; take it again, or delete {BACKUP_INCOMPLETE} to \
             open the tables it holds anyway",
            root.display()
        )));
    }
    Ok(())
}

/// Checks the target and claims it: `to` must be absolute, outside `root` (the data directory,
/// which must exist), and either missing or an empty directory. Creates it (and its parents)
/// and `backup.incomplete` in it.
pub(crate) fn claim_target(root: &Path, to: &Path) -> Result<Claimed> {
    let shown = to.display();
    if !to.is_absolute() {
        return Err(StorageError::InvalidInput(format!(
            "backup target '{shown}' must be an absolute path"
        )));
    }
    if to.components().any(|c| c == Component::ParentDir) {
        return Err(StorageError::InvalidInput(format!(
            "backup target '{shown}' must not contain '..'"
        )));
    }
    let root = root.canonicalize().at(root)?;
    // The nearest existing ancestor, resolved, plus the components that do not exist yet.
    let mut existing = to.to_path_buf();
    let mut missing = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut resolved = existing.canonicalize().at(&existing)?;
    for name in missing.iter().rev() {
        resolved.push(name);
    }
    if resolved.starts_with(&root) {
        return Err(StorageError::InvalidInput(format!(
            "backup target '{shown}' is inside the data directory {}; choose a directory \
             outside it",
            root.display()
        )));
    }
    if missing.is_empty() {
        let meta = std::fs::metadata(&resolved).at(&resolved)?;
        if !meta.is_dir() {
            return Err(StorageError::AlreadyExists(format!(
                "backup target '{shown}' exists and is not a directory"
            )));
        }
        if std::fs::read_dir(&resolved).at(&resolved)?.next().is_some() {
            return Err(StorageError::AlreadyExists(format!(
                "backup target '{shown}' exists and is not empty; choose a new directory"
            )));
        }
    } else {
        if let Some(parent) = resolved.parent() {
            std::fs::create_dir_all(parent).at(parent)?;
        }
        std::fs::create_dir(&resolved).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                StorageError::AlreadyExists(format!(
                    "backup target '{shown}' was created by someone else meanwhile"
                ))
            } else {
                StorageError::io(&resolved, e)
            }
        })?;
    }
    let created = !missing.is_empty();
    let marker = resolved.join(BACKUP_INCOMPLETE);
    let mut file = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&marker)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(StorageError::AlreadyExists(format!(
                "backup target '{shown}' is being written by another backup"
            )));
        }
        Err(e) => return Err(StorageError::io(&marker, e)),
    };
    writeln!(
        file,
        "An unfinished Sundial backup: it may lack tables. It is complete once {BACKUP_MANIFEST} \
         exists and this file is gone."
    )
    .at(&marker)?;
    file.sync_all().at(&marker)?;
    crate::files::sync_dir(&resolved)?;
    if let Some(parent) = resolved.parent() {
        crate::files::sync_dir(parent)?;
    }
    Ok(Claimed {
        path: resolved,
        created,
    })
}

/// Copies `tables` (each with the snapshot taken under the DDL lock) into the claimed target,
/// then writes the manifest and removes `backup.incomplete`. On failure, removes what it
/// wrote (best effort: what is left keeps `backup.incomplete`).
pub(crate) fn write_backup(
    source: &Path,
    cold: Option<&Arc<ColdStore>>,
    target: Claimed,
    tables: Vec<(Arc<Table>, Arc<Snapshot>)>,
) -> Result<BackupReport> {
    let result = write_claimed(source, cold, &target.path, tables);
    if result.is_err() {
        remove_partial(&target);
    }
    result
}

/// Deletes a failed backup's files, the marker last, and the directory if the backup made it.
fn remove_partial(target: &Claimed) {
    if let Ok(entries) = std::fs::read_dir(&target.path) {
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name() == BACKUP_INCOMPLETE {
                continue;
            }
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
    let _ = std::fs::remove_file(target.path.join(BACKUP_INCOMPLETE));
    if target.created {
        let _ = std::fs::remove_dir(&target.path);
    }
}

fn write_claimed(
    source: &Path,
    cold: Option<&Arc<ColdStore>>,
    to: &Path,
    tables: Vec<(Arc<Table>, Arc<Snapshot>)>,
) -> Result<BackupReport> {
    let started = Instant::now();
    let started_at = chrono::Utc::now();
    let mut bytes = Bytes::default();
    let mut copied = Vec::with_capacity(tables.len());
    for (table, snapshot) in tables {
        copied.push(copy_table(&table, &snapshot, cold, to, &mut bytes)?);
        // The snapshot goes here: its part directories may be deleted from now on.
    }
    sync_file_system(to)?;
    let rows = copied.iter().map(|t| t.rows).sum();
    let manifest = manifest(source, started_at, &copied, rows, bytes.total);
    let tmp = to.join(format!("{BACKUP_MANIFEST}.tmp"));
    let mut file = File::create(&tmp).at(&tmp)?;
    file.write_all(manifest.as_bytes()).at(&tmp)?;
    file.sync_all().at(&tmp)?;
    let path = to.join(BACKUP_MANIFEST);
    std::fs::rename(&tmp, &path).at(&path)?;
    crate::files::sync_dir(to)?;
    let marker = to.join(BACKUP_INCOMPLETE);
    std::fs::remove_file(&marker).at(&marker)?;
    crate::files::sync_dir(to)?;
    Ok(BackupReport {
        path: to.to_path_buf(),
        tables: copied.len(),
        rows,
        bytes: bytes.total,
        linked_bytes: bytes.linked,
        duration: started.elapsed(),
    })
}

#[derive(Default)]
struct Bytes {
    total: u64,
    linked: u64,
}

/// Copies what `snapshot` commits of `table` into `to/<table directory>`.
fn copy_table(
    table: &Table,
    snapshot: &Snapshot,
    cold: Option<&Arc<ColdStore>>,
    to: &Path,
    bytes: &mut Bytes,
) -> Result<TableCopied> {
    let source = table.path();
    let dir_name = source
        .file_name()
        .ok_or_else(|| StorageError::Internal(format!("table path {}", source.display())))?;
    let target = to.join(dir_name);
    std::fs::create_dir(&target).at(&target)?;
    let state: &TxnState = snapshot.state();
    let meta = &state.meta;
    let mut partitions = Vec::with_capacity(state.partitions.len());
    for (i, part) in state.partitions.iter().enumerate() {
        let pdir = snapshot.part_dir(i).ok_or_else(|| {
            StorageError::Internal(format!("snapshot of {} lacks part {i}", source.display()))
        })?;
        let (from, into) = (&pdir.path, target.join(pdir.name()));
        std::fs::create_dir(&into).at(&into)?;
        let mut part = part.clone();
        match part.format {
            PartFormat::Native => {
                for c in &meta.columns {
                    let rows = part.row_count - part.column_top(c.id);
                    if rows == 0 {
                        continue;
                    }
                    let d = data_file(c.id);
                    match c.column_type.layout() {
                        Layout::Fixed { width } => {
                            bytes.total += copy_prefix(from, &into, &d, rows * width as u64)?;
                        }
                        Layout::Bits => {
                            bytes.total += copy_prefix(from, &into, &d, rows.div_ceil(8))?;
                        }
                        Layout::Var => {
                            let o = offsets_file(c.id);
                            let data_bytes = read_offset(&from.join(&o), rows)?;
                            bytes.total += copy_prefix(from, &into, &o, (rows + 1) * 8)?;
                            bytes.total += copy_prefix(from, &into, &d, data_bytes)?;
                        }
                    }
                    bytes.total += copy_prefix_if_present(
                        from,
                        &into,
                        &validity_file(c.id),
                        rows.div_ceil(8),
                    )?;
                }
            }
            PartFormat::Parquet { file_bytes, remote } => {
                let (linked, total) = copy_parquet(table, pdir, cold, &into, file_bytes, remote)?;
                bytes.total += total;
                bytes.linked += linked;
                part.format = PartFormat::Parquet {
                    file_bytes,
                    remote: false,
                };
            }
        }
        // Zone maps are derived data: a missing or short file only makes zones unknown.
        let zone_bytes = complete_zones(part.row_count) * ZONE_ENTRY_BYTES;
        if zone_bytes > 0 {
            for c in &meta.columns {
                if zone_domain(c.column_type).is_some() {
                    bytes.total += copy_prefix_at_most(from, &into, &zone_file(c.id), zone_bytes)?;
                }
            }
        }
        partitions.push(part);
    }
    let symbols = source.join(SYMBOL_DIR);
    let symbol_counts: Vec<(u32, u32)> = state
        .symbol_counts
        .iter()
        .filter(|(id, _)| meta.columns.iter().any(|c| c.id == *id))
        .copied()
        .collect();
    if symbol_counts.iter().any(|(_, n)| *n > 0) {
        let into = target.join(SYMBOL_DIR);
        std::fs::create_dir(&into).at(&into)?;
        for (id, count) in &symbol_counts {
            if *count == 0 {
                continue;
            }
            let (o, count) = (offsets_file(*id), u64::from(*count));
            let data_bytes = read_offset(&symbols.join(&o), count)?;
            bytes.total += copy_prefix(&symbols, &into, &o, (count + 1) * 8)?;
            bytes.total += copy_prefix(&symbols, &into, &data_file(*id), data_bytes)?;
        }
    }
    let copy = TxnState {
        seq: state.seq,
        meta: meta.clone(),
        partitions,
        symbol_counts,
        dropped: false,
        refresh: state.refresh.clone(),
    };
    let slot = copy.encode();
    let (this, other) = if copy.seq.is_multiple_of(2) {
        ("_txn.0", "_txn.1")
    } else {
        ("_txn.1", "_txn.0")
    };
    crate::files::write_file(&target.join(this), &slot, false)?;
    crate::files::write_file(&target.join(other), &[], false)?;
    bytes.total += slot.len() as u64;
    Ok(TableCopied {
        name: meta.name.clone(),
        directory: dir_name.to_string_lossy().into_owned(),
        seq: copy.seq,
        rows: copy.row_count(),
        partitions: copy.partitions.len(),
    })
}

/// Puts a Parquet part's file into `into`: a hard link of the local file when it is whole,
/// else a copy of it, else (a remote part without a whole local copy) a download. Returns the
/// bytes linked and the bytes in all.
fn copy_parquet(
    table: &Table,
    pdir: &crate::files::PartitionDir,
    cold: Option<&Arc<ColdStore>>,
    into: &Path,
    file_bytes: u64,
    remote: bool,
) -> Result<(u64, u64)> {
    let local = pdir.path.join(PARQUET_FILE);
    let target = into.join(PARQUET_FILE);
    // Opened first: a remote part's local copy may be evicted (unlinked) meanwhile, and the
    // descriptor keeps the file.
    if let Ok(file) = File::open(&local)
        && file.metadata().is_ok_and(|m| m.len() == file_bytes)
    {
        if std::fs::hard_link(&local, &target).is_ok()
            && std::fs::metadata(&target).is_ok_and(|m| m.len() == file_bytes)
        {
            return Ok((file_bytes, file_bytes));
        }
        let _ = std::fs::remove_file(&target);
        return Ok((0, copy_open(&file, &local, &target, file_bytes)?));
    }
    if !remote {
        return Err(StorageError::corrupt(
            &local,
            format!("Parquet file is not of its committed {file_bytes} bytes"),
        ));
    }
    let cold = cold.ok_or_else(|| StorageError::ColdStore {
        url: "(none configured)".into(),
        message: format!(
            "partition {} is kept in a cold store; start the server with --cold-store to back \
             it up",
            pdir.path.display()
        ),
    })?;
    let key = cold.key(&table.table_dir().cold_name(), &pdir.name());
    cold.download(&key, &target, file_bytes)?;
    Ok((0, file_bytes))
}

/// Copies the first `len` bytes of `from/name` to `into/name`; the file must hold them.
fn copy_prefix(from: &Path, into: &Path, name: &str, len: u64) -> Result<u64> {
    let source = from.join(name);
    let file = File::open(&source).at(&source)?;
    copy_open(&file, &source, &into.join(name), len)
}

/// Like [`copy_prefix`] for a file that may be missing (a validity bitmap: none means no NULL).
fn copy_prefix_if_present(from: &Path, into: &Path, name: &str, len: u64) -> Result<u64> {
    let source = from.join(name);
    match File::open(&source) {
        Ok(file) => copy_open(&file, &source, &into.join(name), len),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(StorageError::io(source, e)),
    }
}

/// Copies up to `len` bytes of `from/name`, if it exists (zone maps: any prefix is valid).
fn copy_prefix_at_most(from: &Path, into: &Path, name: &str, len: u64) -> Result<u64> {
    let source = from.join(name);
    let file = match File::open(&source) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(StorageError::io(source, e)),
    };
    let available = file.metadata().at(&source)?.len();
    copy_open(&file, &source, &into.join(name), len.min(available))
}

/// Copies the first `len` bytes of the open file `file` (at `source`) into a new file `target`,
/// through the kernel (`copy_file_range` where it can): no buffer grows with the file.
fn copy_open(file: &File, source: &Path, target: &Path, len: u64) -> Result<u64> {
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(target)
        .at(target)?;
    let copied = std::io::copy(&mut file.take(len), &mut out).at(target)?;
    if copied != len {
        return Err(StorageError::corrupt(
            source,
            format!("holds {copied} bytes, the commit being backed up needs {len}"),
        ));
    }
    Ok(copied)
}

/// Flushes every write to the file system holding `path` (`syncfs`): the backup's files and
/// directory entries, before the manifest says it is complete.
fn sync_file_system(path: &Path) -> Result<()> {
    let dir = File::open(path).at(path)?;
    // SAFETY: syncfs only reads the descriptor, which `dir` keeps open.
    if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
        return Err(StorageError::io(path, std::io::Error::last_os_error()));
    }
    Ok(())
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn manifest(
    source: &Path,
    started: chrono::DateTime<chrono::Utc>,
    tables: &[TableCopied],
    rows: u64,
    bytes: u64,
) -> String {
    let time = |t: chrono::DateTime<chrono::Utc>| {
        json_string(&t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
    };
    let tables: Vec<String> = tables
        .iter()
        .map(|t| {
            format!(
                "    {{\"name\": {}, \"directory\": {}, \"seq\": {}, \"rows\": {}, \
                 \"partitions\": {}}}",
                json_string(&t.name),
                json_string(&t.directory),
                t.seq,
                t.rows,
                t.partitions
            )
        })
        .collect();
    format!(
        "{{\n  \"sundial_backup\": 1,\n  \"sundial_version\": {},\n  \"transaction_format\": {},\n  \
         \"source\": {},\n  \"started\": {},\n  \"finished\": {},\n  \"rows\": {rows},\n  \
         \"bytes\": {bytes},\n  \"tables\": [\n{}\n  ]\n}}\n",
        json_string(env!("CARGO_PKG_VERSION")),
        crate::txn::FORMAT_VERSION,
        json_string(&source.display().to_string()),
        time(started),
        time(chrono::Utc::now()),
        tables.join(",\n")
    )
}
