//! # sundial-storage
//!
//! Sundial's storage engine: tables partitioned by a designated timestamp, one append-only file
//! per column per partition, memory-mapped for reading, with crash-safe atomic commits. It knows
//! nothing of SQL; the query layer (`sundial-query`) reads [`Snapshot`]s and every ingestion path
//! writes through a [`TableWriter`].
//!
//! ```text
//!               ┌──────────── Database (data dir, .lock, catalog) ────────────┐
//!  RecordBatch  │  Table "cpu"                                                 │
//!  ──append──▶  │   TableWriter ─▶ cpu~1/2016-01-01.3/{0.d,1.d,5.o,5.v,..}     │
//!  ──commit──▶  │              ─▶ cpu~1/_txn.{0,1}  (which rows are committed) │
//!               │   snapshot() ─▶ Snapshot ─▶ read_column() ─▶ Arrow arrays    │
//!               └──────────────────────────────(zero-copy over mmap)──────────┘
//! ```
//!
//! * One writer per table, any number of readers. Readers hold an [`Snapshot`]: an immutable
//!   commit, never blocked by or exposed to a running append.
//! * In-order rows are written straight past the committed end of the files; rows older than a
//!   partition's newest row are kept in memory and merged into a new version of that partition
//!   at commit, so partitions are always sorted by timestamp.
//! * Timestamps are `i64` nanoseconds since the Unix epoch (UTC), like ILP and Arrow, from
//!   [`TIMESTAMP_MIN_NS`] to [`TIMESTAMP_END_NS`]; `append` rejects others before writing.
//! * Schema changes are crash-safe: a durable marker (a transaction, or the rename of a dropped
//!   table's directory to `.dropped-<id>`) precedes any deletion, and opening finishes it.
//! * Numeric and timestamp columns keep a zone map per partition version (`<col>.z`: range of
//!   values and NULL count per 65,536 rows), written with the commit that completes a zone and
//!   read through [`Snapshot::zones`]; damaged or missing entries only mean "unknown".
//! * A part of a partition may instead be one Parquet file (cold storage, `convert.rs`):
//!   converted either way in one commit, read through a bounded cache of decoded column chunks
//!   (`parquet_read.rs`), never appended to (late rows start a native part beside it); with a
//!   cold store, kept in an object store with bounded local copies (`cold_store.rs`).
//! * Descriptors and mappings of column files come from bounded LRU caches
//!   (`open_files_max`, `mapped_files_max`): no limit on tables or partitions follows from them.
//!
//! The exact on-disk format and the commit protocol are in `docs/design.md`.

mod backup;
mod bits;
mod cache;
mod cells;
mod changes;
mod clock;
mod cold_store;
mod column;
mod conform;
mod convert;
mod db;
mod dedup;
mod dir_sync;
mod error;
mod files;
mod invariants;
mod merge;
mod parquet_file;
mod parquet_read;
mod partition;
mod read;
mod symbol_index;
mod symbols;
mod table;
mod ttl;
mod txn;
mod types;
mod zone;

pub use backup::{BACKUP_INCOMPLETE, BACKUP_MANIFEST, BackupReport};
pub use cache::raise_open_files_limit;
pub use cells::{Cell, PartRows};
pub use changes::{CHANGE_LOG_ENTRIES_MAX, Changes};
pub use clock::WallClock;
pub use cold_store::ColdStoreOptions;
pub use column::parse_uuid;
pub use conform::{conform, conform_column, to_write_type};
pub use convert::ConvertTo;
pub use db::{Database, TableDef};
pub use error::{Result, StorageError};
pub use parquet_file::{
    Encodings, PageCompression, ParquetOptions, ParquetWritten, write_partition,
};
pub use partition::PartitionBy;
pub use table::{Durability, Snapshot, StorageOptions, Table, TableWriter};
pub use ttl::{Ttl, TtlUnit};
pub use txn::{
    ColumnMeta, DEFINITION_BYTES_MAX, LAST_VALUE_CACHE_KEYS_MAX, LAST_VALUE_CACHES_MAX,
    LastValueCacheDef, PartFormat, PartitionMeta, RefreshState, TableKind, TableMeta,
};
pub use types::{ColumnType, SUNDIAL_TYPE_KEY, SymbolValues, arrow_field};
pub use zone::{ZONE_ROWS, Zone};

/// Earliest timestamp a table holds: 1678-01-01T00:00:00Z, in nanoseconds since the Unix
/// epoch. With [`TIMESTAMP_END_NS`] it keeps every partition of any [`PartitionBy`] (a year
/// at most) that contains a timestamp, with its start and end, inside `i64`, so partition
/// arithmetic never overflows. Every ingestion path rejects timestamps outside the range.
pub const TIMESTAMP_MIN_NS: i64 = -9_214_560_000_000_000_000;

/// End of the timestamps a table holds, exclusive: 2262-01-01T00:00:00Z.
pub const TIMESTAMP_END_NS: i64 = 9_214_646_400_000_000_000;

/// Whether a table can hold a row at `ns` (see [`TIMESTAMP_MIN_NS`]).
pub fn timestamp_in_range(ns: i64) -> bool {
    (TIMESTAMP_MIN_NS..TIMESTAMP_END_NS).contains(&ns)
}

/// The range of [`timestamp_in_range`], for error messages.
pub const TIMESTAMP_RANGE_TEXT: &str =
    "1678-01-01T00:00:00Z (inclusive) to 2262-01-01T00:00:00Z (exclusive)";

/// Longest table or column name, in bytes.
pub const NAME_BYTES_MAX: usize = 127;

/// Checks a table or column name: non-empty, at most [`NAME_BYTES_MAX`] bytes, no control
/// characters, nothing that is special in a path, and not starting with `.` or `_`.
pub fn validate_name(name: &str, what: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(StorageError::InvalidInput(format!(
            "invalid {what} name '{name}': {why}"
        )))
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > NAME_BYTES_MAX {
        return bad(&format!("longer than {NAME_BYTES_MAX} bytes"));
    }
    if what == "table" && (name.starts_with('.') || name.starts_with('_')) {
        return bad("must not start with '.' or '_'");
    }
    if let Some(c) = name.chars().find(|c| {
        c.is_control()
            || matches!(
                c,
                '/' | '\\' | '~' | ':' | '*' | '?' | '"' | '<' | '>' | '|' | '\0'
            )
    }) {
        return bad(&format!("contains {c:?}"));
    }
    Ok(())
}
