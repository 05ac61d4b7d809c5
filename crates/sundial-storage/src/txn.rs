//! The transaction file: the one place that says what a table is and which rows are committed.
//!
//! A table directory holds two slots, `_txn.0` and `_txn.1`. Commit `seq` overwrites slot
//! `seq % 2`, so the previous commit's slot is intact while the new one is written. Each slot is
//!
//! ```text
//! magic "SDTX" | format u16 | reserved u16 | seq u64 | payload_len u32 | payload | crc32 u32
//! ```
//!
//! (little-endian; the CRC covers everything before it). Opening reads both slots and takes the
//! valid one with the highest `seq`.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Result, StorageError};
use crate::partition::PartitionBy;
use crate::ttl::{PartSpan, Ttl, TtlUnit};
use crate::types::ColumnType;

const MAGIC: &[u8; 4] = b"SDTX";
/// Version 2 added a flags byte per column, version 3 the TTL, version 4 each part's storage
/// format and the `COLD AFTER` setting, version 5 the table's kind, definition and refresh
/// state (views), version 6 the last-value caches; older slots are still read.
pub(crate) const FORMAT_VERSION: u16 = 6;
/// The most last-value caches a table has.
pub const LAST_VALUE_CACHES_MAX: usize = 16;
/// The most key columns a last-value cache has.
pub const LAST_VALUE_CACHE_KEYS_MAX: usize = 4;
/// The longest definition (a view's statement) a transaction holds, in bytes.
pub const DEFINITION_BYTES_MAX: usize = 1 << 20;
/// The longest reason a materialized view is invalid, in bytes (longer ones are cut).
pub const INVALID_REASON_BYTES_MAX: usize = 4096;
/// A part's format code: column files.
const PART_NATIVE: u8 = 0;
/// A part's format code: one Parquet file, followed by its length (`u64`).
const PART_PARQUET: u8 = 1;
/// A part's format code: one Parquet file in the cold store, followed by its length (`u64`).
const PART_PARQUET_REMOTE: u8 = 2;
/// Column flag: a SYMBOL column with a symbol index.
const COLUMN_INDEXED: u8 = 1;
/// Column flag: one of the table's `DEDUP UPSERT KEYS`.
const COLUMN_DEDUP_KEY: u8 = 2;
const HEADER_BYTES: usize = 4 + 2 + 2 + 8 + 4;
/// Offset of `seq` in a slot.
const SEQ_AT: usize = 4 + 2 + 2;

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMeta {
    /// Stable identity: names the column's files; never reused within a table.
    pub id: u32,
    pub name: String,
    pub column_type: ColumnType,
    /// A SYMBOL column whose filters are answered through a symbol index (`INDEX`).
    pub indexed: bool,
    /// One of the table's `DEDUP UPSERT KEYS` (see [`TableMeta::dedup_keys`]).
    pub dedup_key: bool,
}

/// A table's schema and settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMeta {
    pub name: String,
    pub columns: Vec<ColumnMeta>,
    /// Index into `columns` of the designated timestamp.
    pub timestamp_index: Option<usize>,
    pub partition_by: PartitionBy,
    pub next_column_id: u32,
    /// Partitions older than this, counted back from the newest row, are dropped.
    pub ttl: Option<Ttl>,
    /// Partitions older than this, counted back from the newest row, are converted to Parquet
    /// (see `convert.rs`).
    pub cold_after: Option<Ttl>,
    /// What the table's rows are: written to it, or derived from other tables.
    pub kind: TableKind,
    /// For a view or materialized view, the statement that defines it (as the query layer
    /// wrote it; storage never reads it); `None` for a table.
    pub definition: Option<Arc<str>>,
    /// The table's last-value caches (`CREATE LAST VALUE CACHE`). Storage keeps only their
    /// definitions; the query layer keeps the rows in memory.
    pub last_value_caches: Vec<LastValueCacheDef>,
}

/// A last-value cache: the newest row per key of a table, kept in memory by the query layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastValueCacheDef {
    /// Unique among the table's caches (a column-like name).
    pub name: String,
    /// The ids of its key columns (SYMBOL columns, 1 to [`LAST_VALUE_CACHE_KEYS_MAX`]), in the
    /// order given.
    pub keys: Vec<u32>,
    /// InfluxDB 3's semantics: per key, each column's newest non-NULL value, rather than the
    /// newest row.
    pub ignore_nulls: bool,
}

/// What a table's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableKind {
    /// Rows written to it.
    #[default]
    Table,
    /// No rows: a query run when it is read. Its columns are the query's, as of its creation.
    View,
    /// Rows a query over a base table computed, replaced range by range as the base changes
    /// (see [`RefreshState`]); written only by its refresh.
    MaterializedView,
}

impl TableKind {
    fn code(self) -> u8 {
        match self {
            TableKind::Table => 0,
            TableKind::View => 1,
            TableKind::MaterializedView => 2,
        }
    }

    fn from_code(code: u8) -> Option<TableKind> {
        Some(match code {
            0 => TableKind::Table,
            1 => TableKind::View,
            2 => TableKind::MaterializedView,
            _ => return None,
        })
    }

    /// The kind as `tables()` and error messages name it.
    pub fn name(self) -> &'static str {
        match self {
            TableKind::Table => "table",
            TableKind::View => "view",
            TableKind::MaterializedView => "materialized view",
        }
    }
}

/// How far a materialized view's rows follow its base table, committed in the same
/// transaction as the rows it describes: after any crash the view's rows are the query's
/// answer over the base table as of commit `base_seq` (see docs/design.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshState {
    /// The base table's identity (its directory's id): a base table dropped and created again
    /// under the same name is another table.
    pub base_id: u64,
    /// The base table's commit the rows reflect.
    pub base_seq: u64,
    /// When that refresh committed, nanoseconds since the epoch.
    pub refreshed_at_ns: i64,
    /// Why the rows no longer follow the base table (a change refresh cannot follow, such as
    /// TRUNCATE of the base); a full refresh clears it.
    pub invalid: Option<String>,
}

impl TableMeta {
    /// Finds a column by name: exact match first, then ASCII case-insensitive.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name == name)
            .or_else(|| {
                self.columns
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case(name))
            })
    }

    /// With `DEDUP UPSERT KEYS`, the columns (designated timestamp first) whose values identify
    /// a row: of rows equal in all of them (NULL equal to NULL), the last to arrive replaces
    /// the others. Empty when the table does not deduplicate.
    pub fn dedup_keys(&self) -> Vec<usize> {
        let Some(ts) = self.timestamp_index.filter(|i| self.columns[*i].dedup_key) else {
            return Vec::new();
        };
        std::iter::once(ts)
            .chain((0..self.columns.len()).filter(|i| *i != ts && self.columns[*i].dedup_key))
            .collect()
    }

    /// Whether the table has `DEDUP UPSERT KEYS`.
    pub fn deduplicates(&self) -> bool {
        self.timestamp_index
            .is_some_and(|i| self.columns[i].dedup_key)
    }

    pub fn timestamp_column(&self) -> Option<&ColumnMeta> {
        self.timestamp_index.map(|i| &self.columns[i])
    }

    /// The table's Arrow schema (see [`crate::types::arrow_field`]).
    pub fn arrow_schema(&self) -> arrow_schema::SchemaRef {
        let fields: Vec<_> = self
            .columns
            .iter()
            .map(|c| crate::types::arrow_field(&c.name, c.column_type))
            .collect();
        Arc::new(arrow_schema::Schema::new(fields))
    }
}

/// A committed partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMeta {
    /// First nanosecond of the partition (0 for unpartitioned tables).
    pub key: i64,
    /// Suffix of the partition's directory; a rewrite creates a new version.
    pub version: u64,
    pub row_count: u64,
    pub min_ts: i64,
    pub max_ts: i64,
    /// Columns added after rows already existed: `(column id, rows before the column existed)`.
    pub tops: Vec<(u32, u64)>,
    pub format: PartFormat,
}

impl PartSpan for PartitionMeta {
    fn key(&self) -> i64 {
        self.key
    }
    fn has_rows(&self) -> bool {
        self.row_count > 0
    }
    fn max_ts(&self) -> i64 {
        self.max_ts
    }
}

/// How a part of a partition keeps its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartFormat {
    /// One file per column (plus offsets, validity and zone files), appended to in place.
    #[default]
    Native,
    /// One immutable Parquet file, `data.parquet`, of exactly `file_bytes` bytes, holding
    /// every row of the part (and possibly more: a part kept as a prefix commits fewer); with
    /// `remote`, kept in the cold store (see `cold_store.rs`), the local file being a copy.
    Parquet { file_bytes: u64, remote: bool },
}

impl PartFormat {
    pub fn is_parquet(self) -> bool {
        matches!(self, PartFormat::Parquet { .. })
    }

    /// The format's name, as `SHOW PARTITIONS` shows it.
    pub fn name(self) -> &'static str {
        match self {
            PartFormat::Native => "native",
            PartFormat::Parquet { .. } => "parquet",
        }
    }
}

impl PartitionMeta {
    pub fn column_top(&self, column_id: u32) -> u64 {
        self.tops
            .iter()
            .find(|(id, _)| *id == column_id)
            .map_or(0, |(_, top)| *top)
            .min(self.row_count)
    }
}

/// Everything one commit makes true about a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnState {
    pub seq: u64,
    pub meta: Arc<TableMeta>,
    pub partitions: Vec<PartitionMeta>,
    /// Committed dictionary sizes of SYMBOL columns: `(column id, symbol count)`.
    pub symbol_counts: Vec<(u32, u32)>,
    /// Set by DROP TABLE; the directory is deleted once nothing reads it.
    pub dropped: bool,
    /// A materialized view's refresh watermark (`None` for other tables, and for a view not
    /// yet refreshed).
    pub refresh: Option<RefreshState>,
}

impl TxnState {
    pub fn symbol_count(&self, column_id: u32) -> u32 {
        self.symbol_counts
            .iter()
            .find(|(id, _)| *id == column_id)
            .map_or(0, |(_, n)| *n)
    }

    pub fn row_count(&self) -> u64 {
        self.partitions.iter().map(|p| p.row_count).sum()
    }

    pub fn encode(&self) -> Vec<u8> {
        self.encode_format(FORMAT_VERSION)
    }

    /// The slot in format `format` (older formats only for tests of reading them).
    fn encode_format(&self, format: u16) -> Vec<u8> {
        let mut p = Encoder::default();
        let meta = &self.meta;
        p.str(&meta.name);
        p.u8(meta.partition_by as u8);
        p.u32(
            meta.timestamp_index
                .map_or(u32::MAX, |i| meta.columns[i].id),
        );
        p.u32(meta.next_column_id);
        p.u8(u8::from(self.dropped));
        p.u32(meta.columns.len() as u32);
        for c in &meta.columns {
            p.u32(c.id);
            p.u8(c.column_type as u8);
            if format >= 2 {
                let indexed = if c.indexed { COLUMN_INDEXED } else { 0 };
                let key = if c.dedup_key { COLUMN_DEDUP_KEY } else { 0 };
                p.u8(indexed | key);
            }
            p.str(&c.name);
        }
        p.u32(self.symbol_counts.len() as u32);
        for (id, n) in &self.symbol_counts {
            p.u32(*id);
            p.u32(*n);
        }
        p.u32(self.partitions.len() as u32);
        for part in &self.partitions {
            p.i64(part.key);
            p.u64(part.version);
            p.u64(part.row_count);
            p.i64(part.min_ts);
            p.i64(part.max_ts);
            p.u32(part.tops.len() as u32);
            for (id, top) in &part.tops {
                p.u32(*id);
                p.u64(*top);
            }
        }
        if format >= 3 {
            encode_duration(&mut p, meta.ttl);
        }
        if format >= 4 {
            encode_duration(&mut p, meta.cold_after);
            for part in &self.partitions {
                match part.format {
                    PartFormat::Native => p.u8(PART_NATIVE),
                    PartFormat::Parquet { file_bytes, remote } => {
                        p.u8(if remote {
                            PART_PARQUET_REMOTE
                        } else {
                            PART_PARQUET
                        });
                        p.u64(file_bytes);
                    }
                }
            }
        }
        if format >= 5 {
            p.u8(meta.kind.code());
            if meta.kind != TableKind::Table {
                p.long_str(meta.definition.as_deref().unwrap_or_default());
            }
            match &self.refresh {
                None => p.u8(0),
                Some(r) => {
                    p.u8(1);
                    p.u64(r.base_id);
                    p.u64(r.base_seq);
                    p.i64(r.refreshed_at_ns);
                    match &r.invalid {
                        None => p.u8(0),
                        Some(reason) => {
                            p.u8(1);
                            p.long_str(reason);
                        }
                    }
                }
            }
        }
        if format >= 6 {
            p.u8(meta.last_value_caches.len() as u8);
            for cache in &meta.last_value_caches {
                p.str(&cache.name);
                p.u8(cache.keys.len() as u8);
                for id in &cache.keys {
                    p.u32(*id);
                }
                p.u8(u8::from(cache.ignore_nulls));
            }
        }
        let payload = p.0;
        let mut out = Vec::with_capacity(HEADER_BYTES + payload.len() + 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&format.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&payload);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and validates one slot; `path` is only used in error messages.
    /// Whether `bytes`, which are not a valid slot, may be what a crash left of a slot with
    /// seq 0 (CREATE TABLE's) being written: a prefix of it in which blocks the disk never got
    /// read as zeros. So every byte of the magic present is the magic's or 0, and every byte of
    /// `seq` present is 0. Later bytes depend on the schema and are not checked; a slot of
    /// any later commit that kept a byte of its `seq` fails.
    pub fn may_be_torn_first_slot(bytes: &[u8]) -> bool {
        let magic = bytes.iter().zip(MAGIC).all(|(b, m)| b == m || *b == 0);
        let seq = bytes.get(SEQ_AT..bytes.len().min(SEQ_AT + 8));
        magic && seq.unwrap_or_default().iter().all(|b| *b == 0)
    }

    /// The format version of `bytes` when they are a whole slot (magic and CRC right) of a
    /// format newer than this build reads: a slot a newer Sundial wrote.
    pub fn newer_format(bytes: &[u8]) -> Option<u16> {
        if bytes.len() < HEADER_BYTES + 4 || &bytes[0..4] != MAGIC {
            return None;
        }
        let body_len = bytes.len() - 4;
        let stored_crc = u32::from_le_bytes(bytes[body_len..].try_into().ok()?);
        let format = u16::from_le_bytes(bytes[4..6].try_into().ok()?);
        (crc32fast::hash(&bytes[..body_len]) == stored_crc && format > FORMAT_VERSION)
            .then_some(format)
    }

    /// The error for a slot [`TxnState::newer_format`] found.
    pub fn newer_format_error(path: &Path, format: u16) -> StorageError {
        StorageError::InvalidInput(format!(
            "{} was written by a newer version of Sundial (transaction format {format}; this \
             version {} reads formats 1 to {FORMAT_VERSION}): run that version or a later one, \
             or restore a backup taken before the upgrade",
            path.display(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    pub fn decode(bytes: &[u8], path: &Path) -> Result<TxnState> {
        let bad = |m: &str| StorageError::corrupt(path, m.to_string());
        if bytes.len() < HEADER_BYTES + 4 || &bytes[0..4] != MAGIC {
            return Err(bad("not a transaction file"));
        }
        let body_len = bytes.len() - 4;
        let stored_crc = u32::from_le_bytes(bytes[body_len..].try_into().map_err(|_| bad("crc"))?);
        if crc32fast::hash(&bytes[..body_len]) != stored_crc {
            return Err(bad("checksum mismatch"));
        }
        let mut d = Decoder {
            bytes: &bytes[4..body_len],
            path,
        };
        let format = d.u16()?;
        if format > FORMAT_VERSION {
            return Err(TxnState::newer_format_error(path, format));
        }
        if format == 0 {
            return Err(bad(&format!("unsupported format version {format}")));
        }
        d.u16()?;
        let seq = d.u64()?;
        let payload_len = d.u32()? as usize;
        if payload_len != d.bytes.len() {
            return Err(bad("payload length mismatch"));
        }
        let name = d.str()?;
        let partition_by =
            PartitionBy::from_code(d.u8()?).ok_or_else(|| bad("unknown partitioning"))?;
        let timestamp_id = d.u32()?;
        let next_column_id = d.u32()?;
        let dropped = d.u8()? != 0;
        let column_count = d.u32()? as usize;
        let mut columns = Vec::with_capacity(column_count.min(4096));
        for _ in 0..column_count {
            let id = d.u32()?;
            let column_type =
                ColumnType::from_code(d.u8()?).ok_or_else(|| bad("unknown column type"))?;
            let flags = if format >= 2 { d.u8()? } else { 0 };
            if flags & !(COLUMN_INDEXED | COLUMN_DEDUP_KEY) != 0 {
                return Err(bad("unknown column flags"));
            }
            let indexed = flags & COLUMN_INDEXED != 0;
            let dedup_key = flags & COLUMN_DEDUP_KEY != 0;
            if indexed && column_type != ColumnType::Symbol {
                return Err(bad("index on a column that is not a SYMBOL"));
            }
            let name = d.str()?;
            if id >= next_column_id {
                return Err(bad("column id beyond next_column_id"));
            }
            columns.push(ColumnMeta {
                id,
                name,
                column_type,
                indexed,
                dedup_key,
            });
        }
        let timestamp_index = if timestamp_id == u32::MAX {
            None
        } else {
            let i = columns
                .iter()
                .position(|c| c.id == timestamp_id)
                .ok_or_else(|| bad("designated timestamp column missing"))?;
            if columns[i].column_type != ColumnType::Timestamp {
                return Err(bad("designated timestamp is not a TIMESTAMP"));
            }
            Some(i)
        };
        let symbol_count_len = d.u32()? as usize;
        let mut symbol_counts = Vec::with_capacity(symbol_count_len.min(4096));
        for _ in 0..symbol_count_len {
            symbol_counts.push((d.u32()?, d.u32()?));
        }
        let partition_count = d.u32()? as usize;
        let mut partitions: Vec<PartitionMeta> = Vec::with_capacity(partition_count.min(1 << 16));
        for _ in 0..partition_count {
            let key = d.i64()?;
            let version = d.u64()?;
            let row_count = d.u64()?;
            let min_ts = d.i64()?;
            let max_ts = d.i64()?;
            let top_count = d.u32()? as usize;
            let mut tops = Vec::with_capacity(top_count.min(4096));
            for _ in 0..top_count {
                tops.push((d.u32()?, d.u64()?));
            }
            // Parts of one partition (see `merge.rs`) share its key and follow in time.
            if let Some(prev) = partitions.last()
                && (prev.key > key || (prev.key == key && prev.max_ts > min_ts))
            {
                return Err(bad("partitions out of order"));
            }
            if row_count > 0 && min_ts > max_ts {
                return Err(bad("partition min_ts > max_ts"));
            }
            partitions.push(PartitionMeta {
                key,
                version,
                row_count,
                min_ts,
                max_ts,
                tops,
                format: PartFormat::Native,
            });
        }
        let ttl = if format >= 3 { d.duration()? } else { None };
        let mut cold_after = None;
        if format >= 4 {
            cold_after = d.duration()?;
            for part in &mut partitions {
                part.format = match d.u8()? {
                    PART_NATIVE => PartFormat::Native,
                    code @ (PART_PARQUET | PART_PARQUET_REMOTE) => PartFormat::Parquet {
                        file_bytes: d.u64()?,
                        remote: code == PART_PARQUET_REMOTE,
                    },
                    _ => return Err(bad("unknown part format")),
                };
            }
        }
        let (mut kind, mut definition, mut refresh) = (TableKind::Table, None, None);
        if format >= 5 {
            kind = TableKind::from_code(d.u8()?).ok_or_else(|| bad("unknown table kind"))?;
            if kind != TableKind::Table {
                definition = Some(Arc::from(d.long_str(DEFINITION_BYTES_MAX)?));
            }
            if d.u8()? != 0 {
                let (base_id, base_seq, refreshed_at_ns) = (d.u64()?, d.u64()?, d.i64()?);
                let invalid = match d.u8()? {
                    0 => None,
                    _ => Some(d.long_str(INVALID_REASON_BYTES_MAX)?),
                };
                refresh = Some(RefreshState {
                    base_id,
                    base_seq,
                    refreshed_at_ns,
                    invalid,
                });
            }
        }
        let mut last_value_caches = Vec::new();
        if format >= 6 {
            let count = usize::from(d.u8()?);
            if count > LAST_VALUE_CACHES_MAX {
                return Err(bad("too many last-value caches"));
            }
            for _ in 0..count {
                let name = d.str()?;
                let key_count = usize::from(d.u8()?);
                if key_count == 0 || key_count > LAST_VALUE_CACHE_KEYS_MAX {
                    return Err(bad("a last-value cache's key count"));
                }
                let keys = (0..key_count)
                    .map(|_| d.u32())
                    .collect::<Result<Vec<_>>>()?;
                if !keys.iter().all(|id| columns.iter().any(|c| c.id == *id)) {
                    return Err(bad("a last-value cache keyed by a missing column"));
                }
                let ignore_nulls = match d.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(bad("a last-value cache's flags")),
                };
                last_value_caches.push(LastValueCacheDef {
                    name,
                    keys,
                    ignore_nulls,
                });
            }
        }
        if kind == TableKind::View && !partitions.is_empty() {
            return Err(bad("a view with partitions"));
        }
        if refresh.is_some() && kind != TableKind::MaterializedView {
            return Err(bad(
                "a refresh state of a table that is not a materialized view",
            ));
        }
        if !d.bytes.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(TxnState {
            seq,
            meta: Arc::new(TableMeta {
                name,
                columns,
                timestamp_index,
                partition_by,
                next_column_id,
                ttl,
                cold_after,
                kind,
                definition,
                last_value_caches,
            }),
            partitions,
            symbol_counts,
            dropped,
            refresh,
        })
    }
}

/// A TTL-like duration: its unit's code and count, or two zeros for none.
fn encode_duration(p: &mut Encoder, duration: Option<Ttl>) {
    match duration {
        Some(d) => {
            p.u8(d.unit as u8);
            p.u32(d.count);
        }
        None => {
            p.u8(0);
            p.u32(0);
        }
    }
}

#[derive(Default)]
struct Encoder(Vec<u8>);

impl Encoder {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u16(s.len() as u16);
        self.0.extend_from_slice(s.as_bytes());
    }
    /// A string longer than a name (bounded by the caller: see [`Decoder::long_str`]).
    fn long_str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
    }
}

struct Decoder<'a> {
    bytes: &'a [u8],
    path: &'a Path,
}

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(StorageError::corrupt(self.path, "truncated transaction"));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    /// A duration written by `encode_duration`.
    fn duration(&mut self) -> Result<Option<Ttl>> {
        let (unit, count) = (self.u8()?, self.u32()?);
        match (unit, TtlUnit::from_code(unit)) {
            (0, _) => Ok(None),
            (_, Some(unit)) if count > 0 => Ok(Some(Ttl { count, unit })),
            _ => Err(StorageError::corrupt(self.path, "unknown duration unit")),
        }
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    fn str(&mut self) -> Result<String> {
        let len = self.u16()? as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| StorageError::corrupt(self.path, "name is not UTF-8"))
    }
    /// A string of at most `bytes_max` bytes written by [`Encoder::long_str`].
    fn long_str(&mut self, bytes_max: usize) -> Result<String> {
        let len = self.u32()? as usize;
        if len > bytes_max {
            return Err(StorageError::corrupt(
                self.path,
                "text longer than its bound",
            ));
        }
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| StorageError::corrupt(self.path, "text is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TxnState {
        TxnState {
            seq: 7,
            meta: Arc::new(TableMeta {
                name: "cpu".into(),
                columns: vec![
                    ColumnMeta {
                        id: 0,
                        name: "ts".into(),
                        column_type: ColumnType::Timestamp,
                        indexed: false,
                        dedup_key: false,
                    },
                    ColumnMeta {
                        id: 2,
                        name: "host".into(),
                        column_type: ColumnType::Symbol,
                        indexed: true,
                        dedup_key: false,
                    },
                ],
                timestamp_index: Some(0),
                partition_by: PartitionBy::Day,
                next_column_id: 3,
                ttl: Some(Ttl {
                    count: 3,
                    unit: TtlUnit::Day,
                }),
                cold_after: Some(Ttl {
                    count: 2,
                    unit: TtlUnit::Hour,
                }),
                kind: TableKind::Table,
                definition: None,
                last_value_caches: Vec::new(),
            }),
            partitions: vec![
                PartitionMeta {
                    key: 0,
                    version: 3,
                    row_count: 10,
                    min_ts: 1,
                    max_ts: 9,
                    tops: vec![],
                    format: PartFormat::Parquet {
                        file_bytes: 4321,
                        remote: true,
                    },
                },
                PartitionMeta {
                    key: 0,
                    version: 5,
                    row_count: 10,
                    min_ts: 9,
                    max_ts: 12,
                    tops: vec![(2, 4)],
                    format: PartFormat::Native,
                },
            ],
            symbol_counts: vec![(2, 5)],
            dropped: false,
            refresh: None,
        }
    }

    /// `sample()` as a materialized view with a refresh state.
    fn sample_view() -> TxnState {
        let mut t = sample();
        let mut meta = (*t.meta).clone();
        meta.kind = TableKind::MaterializedView;
        meta.definition = Some(Arc::from("CREATE MATERIALIZED VIEW v AS (SELECT 1)"));
        t.meta = Arc::new(meta);
        t.refresh = Some(RefreshState {
            base_id: 4,
            base_seq: 99,
            refreshed_at_ns: -5,
            invalid: Some("truncated".into()),
        });
        t
    }

    #[test]
    fn views_round_trip() {
        let t = sample_view();
        assert_eq!(TxnState::decode(&t.encode(), Path::new("x")).unwrap(), t);
        let mut valid = t.clone();
        valid.refresh.as_mut().unwrap().invalid = None;
        assert_eq!(
            TxnState::decode(&valid.encode(), Path::new("x")).unwrap(),
            valid
        );
        // A view's rows are never stored.
        let mut view = sample_view();
        let mut meta = (*view.meta).clone();
        meta.kind = TableKind::View;
        view.meta = Arc::new(meta);
        view.refresh = None;
        let e = TxnState::decode(&view.encode(), Path::new("x")).unwrap_err();
        assert!(e.to_string().contains("a view with partitions"), "{e}");
        view.partitions.clear();
        assert_eq!(
            TxnState::decode(&view.encode(), Path::new("x")).unwrap(),
            view
        );
    }

    #[test]
    fn last_value_caches_round_trip() {
        let t = sample();
        let mut cached = t.clone();
        let mut meta = (*cached.meta).clone();
        meta.last_value_caches = vec![
            LastValueCacheDef {
                name: "last_host".into(),
                keys: vec![2],
                ignore_nulls: true,
            },
            LastValueCacheDef {
                name: "by_host_and_ts".into(),
                keys: vec![2, 0],
                ignore_nulls: false,
            },
        ];
        cached.meta = Arc::new(meta.clone());
        assert_eq!(
            TxnState::decode(&cached.encode(), Path::new("x")).unwrap(),
            cached
        );
        // A version 5 slot has none.
        assert_eq!(
            TxnState::decode(&cached.encode_format(5), Path::new("x")).unwrap(),
            t
        );
        // A cache keyed by a column the table lacks is corruption.
        meta.last_value_caches[1].keys = vec![7];
        cached.meta = Arc::new(meta);
        let e = TxnState::decode(&cached.encode(), Path::new("x")).unwrap_err();
        assert!(e.to_string().contains("missing column"), "{e}");
    }

    #[test]
    fn version_4_slots_read_as_tables() {
        let t = sample();
        assert_eq!(
            TxnState::decode(&t.encode_format(4), Path::new("x")).unwrap(),
            t
        );
    }

    #[test]
    fn round_trip() {
        let t = sample();
        let bytes = t.encode();
        assert_eq!(TxnState::decode(&bytes, Path::new("x")).unwrap(), t);
    }

    /// `sample()` as a slot of a format before version 4 reads it: every part native.
    fn sample_before_parquet() -> TxnState {
        let mut t = sample();
        for p in &mut t.partitions {
            p.format = PartFormat::Native;
        }
        let mut meta = (*t.meta).clone();
        meta.cold_after = None;
        t.meta = Arc::new(meta);
        t
    }

    #[test]
    fn version_3_slots_read_as_native_parts() {
        let t = sample();
        let bytes = t.encode_format(3);
        assert_eq!(
            TxnState::decode(&bytes, Path::new("x")).unwrap(),
            sample_before_parquet()
        );
    }

    #[test]
    fn version_1_slots_read_as_unindexed() {
        let mut t = sample_before_parquet();
        let bytes = t.encode_format(1);
        let mut meta = (*t.meta).clone();
        meta.columns[1].indexed = false;
        meta.ttl = None;
        t.meta = Arc::new(meta);
        assert_eq!(TxnState::decode(&bytes, Path::new("x")).unwrap(), t);
    }

    #[test]
    fn version_2_slots_read_without_a_ttl() {
        let mut t = sample_before_parquet();
        let bytes = t.encode_format(2);
        let mut meta = (*t.meta).clone();
        meta.ttl = None;
        t.meta = Arc::new(meta);
        assert_eq!(TxnState::decode(&bytes, Path::new("x")).unwrap(), t);
    }

    #[test]
    fn only_prefixes_of_a_first_slot_may_be_torn_first_slots() {
        let mut first = sample();
        first.seq = 0;
        let bytes = first.encode();
        for len in 0..bytes.len() {
            assert!(TxnState::may_be_torn_first_slot(&bytes[..len]), "{len}");
            // Blocks never written back read as zeros, from any offset on.
            let mut zeroed = bytes.clone();
            zeroed[len..].fill(0);
            assert!(
                TxnState::may_be_torn_first_slot(&zeroed),
                "zeros from {len}"
            );
        }
        let later = sample().encode();
        assert!(TxnState::may_be_torn_first_slot(&later[..SEQ_AT]));
        for len in SEQ_AT + 1..=later.len() {
            assert!(!TxnState::may_be_torn_first_slot(&later[..len]), "{len}");
        }
        assert!(!TxnState::may_be_torn_first_slot(b"garbage"));
    }

    #[test]
    fn newer_formats_are_recognised_as_such() {
        let t = sample();
        let mut bytes = t.encode();
        assert_eq!(TxnState::newer_format(&bytes), None);
        bytes[4..6].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let body = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(TxnState::newer_format(&bytes), Some(FORMAT_VERSION + 1));
        let e = TxnState::decode(&bytes, Path::new("x")).unwrap_err();
        assert!(e.to_string().contains("newer version of Sundial"), "{e}");
        // A damaged slot is not taken for a newer one.
        bytes[30] ^= 1;
        assert_eq!(TxnState::newer_format(&bytes), None);
    }

    #[test]
    fn every_flipped_byte_and_truncation_is_detected() {
        let bytes = sample_view().encode();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(TxnState::decode(&b, Path::new("x")).is_err(), "byte {i}");
            assert!(TxnState::decode(&bytes[..i], Path::new("x")).is_err());
        }
    }
}
